package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/internal/fault"
	"github.com/clinkstream/clink/metrics"
)

// errMarkerWrite marks the failure of a COMPLETED-N write, after which the
// checkpoint's fate is unknown until the directory is read again.
var errMarkerWrite = errors.New("the completed marker could not be written")

type driverEventKind uint8

const (
	evAck driverEventKind = iota
	evDecline
	evSourceFinished
	evTaskRunning
)

type driverEvent struct {
	kind driverEventKind
	id   checkpoint.ID
	p    checkpoint.ParticipantID
	info checkpoint.AckInfo
	err  error
}

// driver carries out the checkpoint coordinator's decisions for one job in
// this process: it triggers checkpoints periodically once every task runs
// (has opened and restored its state), injects their
// barriers into the source tasks, feeds acks and declines to the
// coordinator, writes COMPLETED-N markers, notifies listeners, and applies
// retention. One goroutine (run) owns the coordinator; tasks and snapshot
// workers talk to it through events.
type driver struct {
	coord     *checkpoint.Coordinator
	store     *store.Store
	sources   []*sourceTask
	listeners []CheckpointListener
	log       *slog.Logger
	metrics   *metrics.Registry
	interval  time.Duration
	policy    *checkpoint.AdaptiveModePolicy
	pressure  func() float64

	events  chan driverEvent
	stopped chan struct{} // closed when run returns
	// final is closed once the terminal checkpoint completed and every
	// listener was notified.
	final chan struct{}

	sourcesLeft int
	// starting counts the tasks still opening or restoring their state:
	// no periodic checkpoint is triggered until every task runs, as its
	// barrier would wait for the slowest restore.
	starting int
	// running, if set, is called once starting is down to 0 (every task
	// runs); it may be called again after.
	running   func()
	terminal  checkpoint.ID // the terminal checkpoint, once triggered
	finalDone bool
	switches  int
	// prepared is the last id handed to store.Prepare.
	prepared checkpoint.ID
}

func (d *driver) ack(id checkpoint.ID, p checkpoint.ParticipantID, info checkpoint.AckInfo) {
	d.send(driverEvent{kind: evAck, id: id, p: p, info: info})
}

func (d *driver) decline(id checkpoint.ID, p checkpoint.ParticipantID, err error) {
	d.send(driverEvent{kind: evDecline, id: id, p: p, err: err})
}

func (d *driver) sourceFinished() { d.send(driverEvent{kind: evSourceFinished}) }

func (d *driver) taskRunning() { d.send(driverEvent{kind: evTaskRunning}) }

func (d *driver) send(ev driverEvent) {
	select {
	case d.events <- ev:
	case <-d.stopped:
	}
}

// run drives checkpoints until the terminal checkpoint completes (nil), a
// checkpoint fails (the failure), or stop is closed (nil).
func (d *driver) run(stop <-chan struct{}) error {
	defer close(d.stopped)
	tickEvery := d.interval
	if tickEvery <= 0 {
		tickEvery = 100 * time.Millisecond
	}
	ticker := time.NewTicker(tickEvery)
	defer ticker.Stop()
	d.prepareNext()
	for {
		select {
		case <-stop:
			return nil
		case now := <-ticker.C:
			d.coord.Tick(now)
			if d.interval > 0 && d.sourcesLeft > 0 && d.starting == 0 {
				d.trigger(now, false)
			}
		case ev := <-d.events:
			d.handle(ev)
		}
		if err := d.process(); err != nil {
			return err
		}
		if d.finalDone {
			return nil
		}
		d.prepareNext()
	}
}

// prepareNext has the store prepare the next checkpoint (its directory and
// its staged COMPLETED marker) while no checkpoint is in flight, between
// two checkpoints, so that the next one does not wait for those syncs
// after its trigger. Errors show when the checkpoint writes there (see
// store.Prepare).
func (d *driver) prepareNext() {
	next := d.coord.NextID()
	if next == d.prepared || len(d.coord.InFlight()) > 0 || d.terminal != 0 {
		return
	}
	d.prepared = next
	d.store.Prepare(next)
}

func (d *driver) handle(ev driverEvent) {
	switch ev.kind {
	case evAck:
		d.coord.Ack(ev.id, ev.p, ev.info)
		if ev.info.Alignment > 0 {
			d.metrics.AlignmentTime(ev.info.Alignment)
		}
	case evDecline:
		d.log.Warn("checkpoint declined", "checkpoint", ev.id, "task", ev.p, "err", ev.err)
		d.coord.Decline(ev.id, ev.p, ev.err)
	case evTaskRunning:
		d.starting--
		if d.starting == 0 && d.running != nil {
			d.running()
		}
	case evSourceFinished:
		d.sourcesLeft--
		if d.sourcesLeft == 0 {
			d.trigger(time.Now(), true)
		}
	}
}

func (d *driver) trigger(now time.Time, terminal bool) {
	if terminal && d.terminal != 0 {
		return
	}
	before := 0
	if d.policy != nil {
		before = d.policy.Switches()
	}
	b, err := d.coord.Trigger(now, checkpoint.TriggerOptions{Terminal: terminal})
	if err != nil {
		if errors.Is(err, checkpoint.ErrTooManyInFlight) || errors.Is(err, checkpoint.ErrRewinding) {
			if terminal {
				// Retried when the in-flight one completes (process).
				d.log.Debug("deferring terminal checkpoint", "reason", err)
			}
			return
		}
		d.log.Warn("triggering checkpoint", "err", err)
		return
	}
	if d.policy != nil {
		for ; before < d.policy.Switches(); before++ {
			d.metrics.AdaptiveSwitch()
		}
	}
	if terminal {
		d.terminal = b.ID
	}
	d.metrics.ModeStamped(b.Mode.String())
	d.log.Debug("checkpoint triggered", "checkpoint", b.ID, "mode", b.Mode, "terminal", b.Terminal)
	for _, s := range d.sources {
		s.Inject(b)
	}
}

// process carries out the coordinator's effects until there are none.
func (d *driver) process() error {
	for {
		effects := d.coord.Ready()
		if len(effects) == 0 {
			return nil
		}
		d.coord.Advance()
		for _, e := range effects {
			if err := d.apply(e); err != nil {
				return err
			}
		}
	}
}

func (d *driver) apply(e checkpoint.Effect) error {
	switch e := e.(type) {
	case checkpoint.WriteMarker:
		err := fault.Point("checkpoint.before-marker")
		if err == nil {
			err = d.store.WriteCompleted(e.ID)
		}
		if err != nil {
			d.coord.MarkerFailed(e.ID, fmt.Errorf("writing COMPLETED-%d: %w: %w", e.ID, errMarkerWrite, err))
			return nil
		}
		if err := fault.Point("checkpoint.after-marker"); err != nil {
			return err
		}
		d.coord.MarkerWritten(e.ID)
	case checkpoint.NotifyComplete:
		dur := time.Since(e.TriggeredAt)
		d.metrics.CheckpointPhases(metrics.CheckpointPhases{
			Longest: parts(e.Max), Last: string(e.Last), LastParts: parts(e.LastTiming), Terminal: e.Terminal,
		})
		d.metrics.CheckpointCompleted(e.Mode.String(), dur, e.Bytes, e.FullBytes)
		d.log.Info("checkpoint completed", "checkpoint", e.ID, "mode", e.Mode, "duration", dur,
			"bytes", e.Bytes, "full_bytes", e.FullBytes, "terminal", e.Terminal,
			"max_start_delay", e.Max.StartDelay, "max_alignment", e.Max.Alignment,
			"max_sync", e.Max.Sync, "max_async", e.Max.Async,
			"last_task", e.Last, "last_timing", e.LastTiming.String())
		for _, l := range d.listeners {
			if err := l.NotifyCheckpointComplete(e.ID); err != nil {
				return fmt.Errorf("notifying completion of checkpoint %d: %w", e.ID, err)
			}
		}
		if err := d.store.ApplyRetention(); err != nil {
			d.log.Warn("applying checkpoint retention", "err", err)
		}
		if e.Terminal {
			d.finalDone = true
			close(d.final)
		}
	case checkpoint.NotifyAborted:
		d.metrics.CheckpointAborted(false)
		d.log.Info("checkpoint aborted", "checkpoint", e.ID, "reason", e.Reason)
		// A marker write that failed may still have left the marker on
		// disk, making the checkpoint a restore point: its sinks must not
		// roll it back. The job fails, and the next start finalises or
		// reconciles their handles.
		if !errors.Is(e.Reason, errMarkerWrite) {
			for _, l := range d.listeners {
				l.NotifyCheckpointAborted(e.ID)
			}
		}
		if e.ID == d.terminal {
			return &CheckpointError{ID: e.ID, Reason: e.Reason, Final: true}
		}
		if err := d.store.Discard(e.ID); err != nil {
			d.log.Warn("discarding aborted checkpoint", "checkpoint", e.ID, "err", err)
		}
	case checkpoint.FailJob:
		d.metrics.CheckpointAborted(true)
		// The restart loop (restart.go) rewinds the job to its last
		// completed checkpoint; until this driver stops, the coordinator
		// discards what completes above the failed id.
		return &CheckpointError{ID: e.ID, Reason: e.Reason}
	}
	if d.sourcesLeft == 0 && d.terminal == 0 {
		d.trigger(time.Now(), true)
	}
	return nil
}

// parts converts a checkpoint.Timing for the metrics package, which imports
// nothing of clink's.
func parts(t checkpoint.Timing) metrics.CheckpointParts {
	return metrics.CheckpointParts{StartDelay: t.StartDelay, Alignment: t.Alignment, Sync: t.Sync, Async: t.Async}
}
