package runtime

import (
	"fmt"
	"sync"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// snapshotJob is one captured, not yet durable, task snapshot.
type snapshotJob struct {
	id     checkpoint.ID
	snap   *captured
	timing snapshotTiming
}

// snapshotTiming is when a task met a checkpoint and how long its parts on
// the task goroutine took; the snapshot worker adds the asynchronous part.
type snapshotTiming struct {
	// barrierAt is when the checkpoint's first barrier reached the task.
	barrierAt time.Time
	// align is how long the task's inputs were paused for the checkpoint.
	align time.Duration
	// sync is how long the capture took on the task goroutine.
	sync time.Duration
	// captured is when the capture ended.
	captured time.Time
}

// ackInfo is the coordinator's AckInfo of a durable snapshot whose
// asynchronous part ended at durable.
func (t snapshotTiming) ackInfo(size snapshotSize, durable time.Time) checkpoint.AckInfo {
	info := checkpoint.AckInfo{
		Bytes: size.written, FullBytes: size.full,
		Alignment: t.align, BarrierAt: t.barrierAt, Sync: t.sync,
	}
	if !t.captured.IsZero() {
		info.Async = max(durable.Sub(t.captured), 0)
	}
	return info
}

// acker receives a task's verdict on a checkpoint.
type acker interface {
	ack(id checkpoint.ID, p checkpoint.ParticipantID, info checkpoint.AckInfo)
	decline(id checkpoint.ID, p checkpoint.ParticipantID, err error)
}

// snapshotSize is what one task's snapshot of a checkpoint adds up to.
type snapshotSize struct {
	// written is what the task newly wrote for the checkpoint: its
	// snapshot file and the shared files it stored (incremental size).
	written int64
	// full is its snapshot file and every shared file the snapshot lists
	// (full size).
	full int64
}

// snapshotWorker makes one task's captured snapshots durable off the task
// goroutine and acks each only after its bytes are on stable storage. Its
// queue holds one job behind the one being written: a task that captures a
// third checkpoint while two are outstanding blocks in enqueue, which bounds
// how far processing runs ahead of durability.
//
// The task goroutine owns the worker: it calls enqueue, then exactly one of
// drain (clean end: persist and ack the backlog) or cancel (failure: drop
// what has not started, ack nothing more), and both wait for the worker
// goroutine to exit.
type snapshotWorker struct {
	name        string
	vertex      string
	participant checkpoint.ParticipantID
	store       *store.Store
	// shared is the task's handle on the shared files (nil without
	// checkpointing): its operators store files through it, and it
	// counts what they wrote per checkpoint.
	shared *store.Shared
	acks   acker

	queue    chan snapshotJob
	canceled chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

func newSnapshotWorker(name, vertex string, p checkpoint.ParticipantID, st *store.Store, shared *store.Shared, acks acker) *snapshotWorker {
	w := &snapshotWorker{
		name:        name,
		vertex:      vertex,
		participant: p,
		store:       st,
		shared:      shared,
		acks:        acks,
		queue:       make(chan snapshotJob, 1),
		canceled:    make(chan struct{}),
	}
	w.wg.Add(1)
	go w.run()
	return w
}

func (w *snapshotWorker) run() {
	defer w.wg.Done()
	for {
		select {
		case <-w.canceled:
			return
		case job, ok := <-w.queue:
			if !ok {
				return
			}
			select {
			case <-w.canceled:
				return
			default:
			}
			w.persist(job)
		}
	}
}

func (w *snapshotWorker) persist(job snapshotJob) {
	snap, err := job.snap.snapshot(w.vertex)
	var size snapshotSize
	if err == nil {
		size, err = w.sharedSize(job.id, snap)
	}
	if err != nil {
		w.acks.decline(job.id, w.participant, fmt.Errorf("building snapshot of %s for checkpoint %d: %w", w.name, job.id, err))
		return
	}
	// The parts pass the in-flight records on as they were encoded: under
	// backpressure they are megabytes, and another copy of them delayed
	// the ack.
	n, err := w.store.WriteSnapshotParts(job.id, w.name, snap.MarshalParts())
	if err != nil {
		w.acks.decline(job.id, w.participant, fmt.Errorf("persisting snapshot of %s for checkpoint %d: %w", w.name, job.id, err))
		return
	}
	size.written += n
	size.full += n
	w.acks.ack(job.id, w.participant, job.timing.ackInfo(size, time.Now()))
}

// sharedSize returns the shared-file part of snap's sizes: the files the
// task stored for checkpoint id, and every file snap lists.
func (w *snapshotWorker) sharedSize(id checkpoint.ID, snap *store.TaskSnapshot) (snapshotSize, error) {
	if w.shared == nil {
		return snapshotSize{}, nil
	}
	var refs []string
	for _, op := range snap.Operators {
		for _, st := range op.OperatorState {
			if st.Name == store.SharedRefsState {
				refs = append(refs, store.ParseSharedRefs(st.Data)...)
			}
		}
	}
	full, err := w.shared.Sizes(refs)
	if err != nil {
		return snapshotSize{}, err
	}
	return snapshotSize{written: w.shared.TakeWritten(id), full: full}, nil
}

// enqueue hands a captured snapshot to the worker, blocking while the worker
// is a checkpoint behind. It returns false if the worker was canceled or done
// is closed first.
func (w *snapshotWorker) enqueue(job snapshotJob, done <-chan struct{}) bool {
	select {
	case w.queue <- job:
		return true
	case <-w.canceled:
		return false
	case <-done:
		return false
	}
}

// drain persists and acks everything queued, then stops the worker.
func (w *snapshotWorker) drain() {
	w.once.Do(func() { close(w.queue) })
	w.wg.Wait()
}

// cancel drops jobs that have not started and stops the worker; a write in
// progress finishes first (its ack may still be sent and is harmless: the
// coordinator ignores acks of checkpoints it no longer tracks).
func (w *snapshotWorker) cancel() {
	w.once.Do(func() { close(w.canceled) })
	w.wg.Wait()
}
