package runtime

import (
	"fmt"
	"sync"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// taskBase is what every task has, whatever its kind.
type taskBase struct {
	name        string
	participant checkpoint.ParticipantID
	tc          *TaskContext
	wake        chan struct{}
	done        <-chan struct{}
	// failing is closed (by closeChain) when the task ends with an error.
	failing chan struct{}
	// final is closed when the terminal checkpoint completed and its
	// completion was delivered to every listener; nil without checkpoints.
	final  <-chan struct{}
	acks   acker
	worker *snapshotWorker // nil when checkpointing is off
	// running, if set, is called once the task opened its chain and
	// restored its state, before it takes its first record; or, for a
	// chain that decodes its state in the background, once that is done
	// (reportRunning).
	running       func()
	bufferTimeout time.Duration
	// debloatTarget is how long the batches queued in front of the task
	// should take to process (debloater); zero or less keeps the
	// channels' capacity.
	debloatTarget time.Duration
}

// reportRunning calls running, if set, once the task's chain c holds
// its state: at once, or, when c still restores in the background
// (Restorer), from a goroutine once that is over (not at all if the job
// ends first; a task that failed and closed its chain during the restore
// may still be reported, while the job fails anyway).
func (b *taskBase) reportRunning(c Chain) {
	if b.running == nil {
		return
	}
	if r, ok := c.(Restorer); ok {
		if ch := r.Restored(); ch != nil {
			go func() {
				select {
				case <-ch:
					b.running()
				case <-b.done:
				}
			}()
			return
		}
	}
	b.running()
}

// captured is a task's snapshot between the barrier and the worker: the
// chain's capture, and the parts the task adds (watermark, in-flight
// records).
type captured struct {
	meta store.TaskSnapshot
	// build completes the operator snapshots on the snapshot worker.
	build    func() ([]store.OperatorSnapshot, error)
	wm       int64
	inflight []store.InFlight
	// tails are the in-flight records that barriers overtook, encoded off
	// the task goroutine; each follows inflight's records of its input.
	tails []*overtakenEncoding
}

// snapshot builds the task snapshot; it runs on the snapshot worker.
func (c *captured) snapshot(vertex string) (*store.TaskSnapshot, error) {
	ops, err := c.build()
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		ops = []store.OperatorSnapshot{{UID: vertex, Watermark: store.NoWatermark}}
	}
	if c.wm != MinWatermark {
		ops[0].Watermark = c.wm
	}
	ops[0].InFlight = append(ops[0].InFlight, appendTails(c.inflight, c.tails)...)
	snap := c.meta
	snap.Operators = ops
	return &snap, nil
}

// capture takes the chain's snapshot for checkpoint id on the task
// goroutine. A chain that implements DeferredSnapshotter leaves the
// encoding of what it froze to the snapshot worker.
func (b *taskBase) capture(c Chain, id checkpoint.ID, wm int64) (*captured, error) {
	if b.worker == nil {
		return nil, nil
	}
	cp := &captured{
		meta: store.TaskSnapshot{
			Checkpoint:     id,
			Task:           b.name,
			Subtask:        b.tc.Subtask,
			Parallelism:    b.tc.Parallelism,
			MaxParallelism: b.tc.MaxParallelism,
		},
		wm: wm,
	}
	if d, ok := c.(DeferredSnapshotter); ok {
		build, err := d.SnapshotDeferred(id)
		if err != nil {
			return nil, fmt.Errorf("capturing snapshot of %s for checkpoint %d: %w", b.name, id, err)
		}
		cp.build = build
		return cp, nil
	}
	ops, err := c.Snapshot(id)
	if err != nil {
		return nil, fmt.Errorf("capturing snapshot of %s for checkpoint %d: %w", b.name, id, err)
	}
	cp.build = func() ([]store.OperatorSnapshot, error) { return ops, nil }
	return cp, nil
}

// closeChain closes the task's chain after its run ended with err, telling
// the chain first (TaskContext.Failing) when err is not nil, and returns
// err or, after a clean run, Close's error.
func (b *taskBase) closeChain(c Chain, err error) error {
	if err != nil && b.failing != nil {
		close(b.failing)
	}
	if cerr := c.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("closing %s: %w", b.name, cerr)
	}
	return err
}

// awaitFinal is a task's last step on a clean end: its snapshots are made
// durable and acked, then it waits until the terminal checkpoint completed,
// so that no chain is closed before it has heard of the completion.
func (b *taskBase) awaitFinal() error {
	if b.worker == nil {
		return nil
	}
	b.worker.drain()
	select {
	case <-b.final:
		return nil
	case <-b.done:
		return ErrCanceled
	}
}

// submit hands a captured snapshot to the worker.
func (b *taskBase) submit(job snapshotJob) bool {
	if b.worker == nil {
		return true
	}
	return b.worker.enqueue(job, b.done)
}

// sourceTask runs one subtask of a source vertex.
type sourceTask struct {
	base *taskBase
	src  Source
	// finished is called once when the source is exhausted; the driver then
	// triggers the terminal checkpoint.
	finished func()

	mu struct {
		sync.Mutex
		// barriers injected by the driver, not yet emitted; guarded by mu.
		barriers []checkpoint.Barrier
	}
	// inject wakes the source loop when a barrier is injected.
	inject chan struct{}
	idle   time.Duration
}

// Inject queues a barrier; the source loop emits it between Produce calls.
func (s *sourceTask) Inject(b checkpoint.Barrier) {
	if overtakes(b) {
		// A Produce blocked on a full channel returns now: the barrier
		// overtakes its batch anyway.
		s.base.tc.Out.beginOvertake()
	}
	s.mu.Lock()
	s.mu.barriers = append(s.mu.barriers, b)
	s.mu.Unlock()
	select {
	case s.inject <- struct{}{}:
	default:
	}
}

func (s *sourceTask) takeBarriers() []checkpoint.Barrier {
	s.mu.Lock()
	defer s.mu.Unlock()
	bs := s.mu.barriers
	s.mu.barriers = nil
	return bs
}

// drainBarriers snapshots and emits every pending barrier. It reports
// whether a terminal barrier was among them.
func (s *sourceTask) drainBarriers(wm int64) (terminal bool, err error) {
	if len(s.inject) == 0 {
		return false, nil
	}
	<-s.inject
	b := s.base
	for _, br := range s.takeBarriers() {
		// The offset is captured here, between Produce calls, on the
		// source goroutine: exactly the records emitted before the barrier.
		start := time.Now()
		snap, cerr := b.capture(s.src, br.ID, wm)
		tm := snapshotTiming{barrierAt: start, captured: time.Now()}
		tm.sync = tm.captured.Sub(start)
		if cerr != nil {
			b.acks.decline(br.ID, b.participant, cerr)
		}
		// Under an unaligned barrier the flush does not wait for room
		// (Outputs.overtaking): the barrier overtakes what it pushes.
		if err := s.src.Flush(); err != nil {
			return false, fmt.Errorf("flushing %s: %w", b.name, err)
		}
		if err := b.tc.Out.Barrier(br); err != nil {
			return false, err
		}
		if overtakes(br) {
			b.tc.Out.endOvertake()
		}
		if snap != nil && !b.submit(snapshotJob{id: br.ID, snap: snap, timing: tm}) {
			return false, ErrCanceled
		}
		terminal = terminal || br.Terminal
	}
	return terminal, nil
}

func (s *sourceTask) run() (err error) {
	b := s.base
	// Close also releases what a failed Open had already opened.
	defer func() { err = b.closeChain(s.src, err) }()
	if err := s.src.Open(b.tc); err != nil {
		return fmt.Errorf("opening %s: %w", b.name, err)
	}
	b.reportRunning(s.src)
	// A source chain tracks its own watermark (it generates it).
	const wm = int64(MinWatermark)
	timed, _ := s.src.(Timed)
	lastFlush := time.Now()
	for {
		if _, err := s.drainBarriers(wm); err != nil {
			return err
		}
		select {
		case <-b.done:
			return ErrCanceled
		default:
		}
		st, err := s.src.Produce()
		if err != nil {
			return fmt.Errorf("producing in %s: %w", b.name, err)
		}
		if timed != nil {
			if err := runDeadline(timed, b.name); err != nil {
				return err
			}
		}
		switch st {
		case Produced:
			if now := time.Now(); b.bufferTimeout >= 0 && now.Sub(lastFlush) >= b.bufferTimeout {
				if err := s.src.Flush(); err != nil {
					return fmt.Errorf("flushing %s: %w", b.name, err)
				}
				lastFlush = now
			}
			continue
		case Idle:
			if err := s.src.Flush(); err != nil {
				return fmt.Errorf("flushing %s: %w", b.name, err)
			}
			lastFlush = time.Now()
			t := time.NewTimer(s.idle)
			select {
			case <-s.inject:
				// Put the token back for drainBarriers.
				select {
				case s.inject <- struct{}{}:
				default:
				}
			case <-t.C:
			case <-b.done:
				t.Stop()
				return ErrCanceled
			}
			t.Stop()
			continue
		}
		// Done: the input is exhausted.
		break
	}
	if err := s.src.EndOfInput(); err != nil {
		return fmt.Errorf("ending input of %s: %w", b.name, err)
	}
	if err := s.src.Flush(); err != nil {
		return fmt.Errorf("flushing %s: %w", b.name, err)
	}
	if b.worker != nil {
		// Stay available for barriers until the terminal one: it carries
		// the final offsets, and every checkpoint until then needs this
		// task's snapshot.
		s.finished()
		for {
			terminal, err := s.drainBarriers(wm)
			if err != nil {
				return err
			}
			if terminal {
				break
			}
			select {
			case <-s.inject:
				select {
				case s.inject <- struct{}{}:
				default:
				}
			case <-b.done:
				return ErrCanceled
			}
		}
	}
	if err := b.tc.Out.End(); err != nil {
		return err
	}
	return b.awaitFinal()
}
