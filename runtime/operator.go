package runtime

import (
	"log/slog"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/metrics"
)

// TaskContext is what the runtime hands a task's operator chain when it
// opens. It belongs to the task: the chain may read it from goroutines of
// its own while it opens, and change nothing in it.
type TaskContext struct {
	// Vertex is the uid of the chain's head operator; Name is
	// "<uid>-<subtask>", the task's snapshot file name.
	Vertex, Name                         string
	Subtask, Parallelism, MaxParallelism int
	// Out carries the chain's output to downstream tasks.
	Out *Outputs
	// Restored is the task's snapshot when the job restores from a
	// checkpoint, nil on a fresh start.
	Restored *store.TaskSnapshot
	// Rescaled holds, when the job restores a checkpoint taken at another
	// parallelism of this vertex, the snapshots of every old subtask (and
	// Restored is nil): keyed state is redistributed by key group; state
	// that cannot be redistributed must refuse to open.
	Rescaled []*store.TaskSnapshot
	// RestoredOperators holds, on a restore, each operator's snapshots in
	// every subtask of the task that held it, by old subtask: an operator
	// restores from its own entry, at the parallelism it was checkpointed
	// at, whichever task held it then (the chains of the job may differ
	// from the checkpointed job's). Nil on a fresh start, or when no
	// operator of the chain is named in the checkpoint (then Restored and
	// Rescaled hold the task's state). Read-only: the subtasks share it.
	RestoredOperators map[string][]*store.OperatorSnapshot
	// Shared is the checkpoint directory's area for files that several
	// checkpoints share (file-based state backends); nil without
	// checkpointing.
	Shared *store.Shared
	// Done is closed when the task must stop.
	Done <-chan struct{}
	// Failing is closed when this task is ending with an error, before its
	// chain is closed: a chain's Close then knows it is a teardown after a
	// failure even before the job's Done is closed.
	Failing <-chan struct{}
	Logger  *slog.Logger
	Metrics *metrics.Registry
}

// Chain is the part of a task the runtime calls: its operators, chained by
// forward edges (and, at parallelism 1, keyed ones), seen as one. All methods run on the task goroutine, except
// Operator.EncodeBatch.
type Chain interface {
	// Open prepares the chain and restores its state from tc.Restored.
	Open(tc *TaskContext) error
	// Snapshot captures the state of every operator of the chain as of now.
	// It must be cheap; the returned value must not change afterwards.
	Snapshot(id checkpoint.ID) ([]store.OperatorSnapshot, error)
	// Flush pushes buffered output batches downstream. The runtime calls it
	// before it forwards a control element and when the buffer timeout
	// expires.
	Flush() error
	// Close releases resources. It runs after the last element.
	Close() error
}

// DeferredSnapshotter is implemented by chains whose state freezes cheaply
// (copy-on-write) but encodes slowly: SnapshotDeferred freezes on the task
// goroutine and returns the function that the snapshot worker calls to
// encode the frozen state, concurrently with the task's next records. The
// runtime then never calls Snapshot.
type DeferredSnapshotter interface {
	SnapshotDeferred(id checkpoint.ID) (func() ([]store.OperatorSnapshot, error), error)
}

// Operator is the chain of a task that has inputs.
type Operator interface {
	Chain
	// ProcessBatch handles a batch of records from logical input input.
	ProcessBatch(input int, b Batch) error
	// ProcessWatermark handles an advance of the task's input watermark
	// (the minimum over its open inputs). The chain decides what watermark,
	// if any, to forward through Out.
	ProcessWatermark(wm int64) error
	// EndOfInput is called once every input has ended, before the runtime
	// flushes and forwards end-of-input.
	EndOfInput() error
	// CanUnalign reports whether the chain can have in-flight records
	// captured into its snapshot (EncodeBatch/DecodeBatch work for every
	// input). A chain that cannot degrades unaligned barriers to aligned.
	CanUnalign() bool
	// EncodeBatch appends the encoding of b, a batch of input input, to dst.
	// It may run on another goroutine than the task's, concurrently with
	// the chain's other methods (never with ProcessBatch of the same b,
	// which waits until b is encoded), so it must only read b and the
	// chain's immutable configuration.
	EncodeBatch(input int, b Batch, dst []byte) []byte
	// DecodeBatch decodes a batch of input input encoded by EncodeBatch.
	DecodeBatch(input int, data []byte) (Batch, error)
}

// ResumableOperator is implemented by operators that can stop a record
// batch between two records and go on with the rest of it later. Their task
// takes an unaligned barrier that reaches its inputs while it processes a
// batch after the current record instead of after the whole batch: a chain
// that is slow per record (or blocked on a full output) then does not hold
// an unaligned checkpoint back by a batch's worth of work. The unprocessed
// rest of the batch precedes that barrier, so the task captures it into the
// checkpoint as in-flight records before it goes on processing it.
type ResumableOperator interface {
	Operator
	// ProcessBatchFrom handles the records of b from index from on, in
	// order, as ProcessBatch would. It calls in.Requested before its first
	// record and again after every few records (the fewer, the sooner a
	// barrier is taken), and when that reports true returns the index of
	// the next record without handling it; after the last record it
	// returns b.Len(). Only then may it recycle b.
	ProcessBatchFrom(input int, b Batch, from int, in *Interrupt) (next int, err error)
	// EncodeBatchFrom appends to dst the encoding of the records of b from
	// index from on, as EncodeBatch encodes a batch of only those records
	// (DecodeBatch reads it).
	EncodeBatchFrom(input int, b Batch, from int, dst []byte) []byte
}

// ProduceStatus says what a source's Produce call did.
type ProduceStatus uint8

const (
	// Produced means records were emitted (or may be soon): call again.
	Produced ProduceStatus = iota
	// Idle means nothing is available now: the runtime waits briefly.
	Idle
	// Done means the source is exhausted (bounded input).
	Done
)

// Source is the chain of a source task: a source and the operators chained
// after it. Barriers are taken only between Produce calls, so Snapshot
// captures the read position of exactly the records emitted before the
// barrier.
type Source interface {
	Chain
	// Produce emits a bounded amount of records through the chain.
	Produce() (ProduceStatus, error)
	// EndOfInput is called once after Produce returned Done: the chain
	// emits its final watermark and results.
	EndOfInput() error
}

// Restorer is implemented by chains whose state may still be restoring
// after Open (a state backend that decodes a large restore in the
// background while the chain runs). Restored is called once, on the task
// goroutine, after Open; it returns nil when nothing is restoring, or a
// channel closed once the restore is done. The task reports itself
// running, which lets periodic checkpoints start, only then: a
// checkpoint's capture would wait for the rest of the restore.
type Restorer interface {
	Restored() <-chan struct{}
}

// Timed is implemented by chains with processing-time work (periodic
// watermarks, processing-time timers). The runtime calls OnDeadline on the
// task goroutine once NextDeadline has passed, waking an idle task for it.
type Timed interface {
	// NextDeadline returns the earliest pending deadline, ok=false if none.
	NextDeadline() (deadline time.Time, ok bool)
	// OnDeadline runs the work due at now.
	OnDeadline(now time.Time) error
}

// CheckpointListener is implemented by chains that act when a checkpoint
// completes or is aborted (sources that defer broker acks, sinks that
// commit). The runtime calls it from the checkpoint driver's goroutine,
// concurrently with the task goroutine.
type CheckpointListener interface {
	NotifyCheckpointComplete(id checkpoint.ID) error
	NotifyCheckpointAborted(id checkpoint.ID)
}
