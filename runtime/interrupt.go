package runtime

import "sync/atomic"

// Interrupt is how a task asks its chain to stop a record batch between two
// records (see ResumableOperator): the inputs of the task count the priority
// barriers queued on them, and the chain checks Requested every few
// records. One Interrupt serves all inputs of one task.
type Interrupt struct {
	// queued counts the priority barriers queued on the task's inputs:
	// producers add one in Channel.PushPriority, the task takes one off in
	// Channel.TryPop.
	queued atomic.Int32
	// declined is how many of the queued barriers the task looked at and
	// chose not to take inside the current batch (an aligned barrier, or a
	// barrier behind an element it may not pass). Only the task goroutine
	// reads and writes it.
	declined int32
	// inBatch is set by the task goroutine (which alone reads it) while the
	// chain processes a batch it can interrupt: only then may a Send go over
	// a full channel's capacity for a queued priority barrier, since only
	// then is the barrier taken within a few records.
	inBatch bool
	// kick wakes the task's Outputs.Send blocked on a full channel when a
	// priority barrier arrives: the record being processed then goes over
	// the capacity, the batch is interrupted after it, and the barrier
	// overtakes what went over. Nil when the task's chain cannot be
	// interrupted.
	kick chan struct{}
}

// Requested reports whether the task wants the chain to return from the
// batch before its next record: a priority barrier is queued at one of its
// inputs that it has not yet declined. It is two loads and a compare.
func (in *Interrupt) Requested() bool { return in.queued.Load() > in.declined }

// overCapacity reports whether a Send may go over a full channel's capacity
// now: a priority barrier is queued that the task will take within a few
// records (ResumableOperator), overtaking what this Send pushes.
func (in *Interrupt) overCapacity() bool { return in.inBatch && in.Requested() }

// noteQueued counts a priority barrier pushed to an input of the task and
// wakes a Send blocked on a full output.
func (in *Interrupt) noteQueued() {
	in.queued.Add(1)
	if in.kick != nil {
		select {
		case in.kick <- struct{}{}:
		default:
		}
	}
}

// notePopped takes a priority barrier popped by the task off the count. The
// task looks afresh at whatever is still queued: a barrier it declined may
// be takeable inside the next batch.
func (in *Interrupt) notePopped() {
	in.queued.Add(-1)
	in.declined = 0
}
