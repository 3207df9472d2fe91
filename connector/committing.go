package connector

import (
	"fmt"
	"log/slog"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/state"
)

// CommittingSink is what a connector supplies to get exactly-once output:
// the verbs of a two-phase commit. The Committer calls them; a connector
// never calls them itself.
//
// Threading: Open, Write, PrepareCommit and Close run on the subtask's task
// goroutine. Commit and Abort run on the commit-dispatch goroutine,
// concurrently with Write and PrepareCommit of the next interval; a
// connector whose client is not safe for concurrent use must serialise
// access itself. Commit and Abort never run concurrently with Close, and
// never after it. Recover runs on the task goroutine during open, after
// Open and before the first Write.
type CommittingSink[In, C any] interface {
	// Open creates the connector's resources for one subtask. It runs
	// before the restored handles are recovered; ctx.Pending lists them, so
	// that a connector can reconcile an external registry (an XA sink rolls
	// back the prepared transactions it is responsible for that are not in
	// the list).
	Open(ctx InitContext[C]) error
	// Write buffers or stages one record.
	Write(v In) error
	// PrepareCommit makes what was written since the previous call durable
	// but not visible, at the barrier of checkpoint ckpt, and returns its
	// handle; ok is false when there is nothing to commit.
	PrepareCommit(ckpt checkpoint.ID) (c C, ok bool, err error)
	// Commit makes a prepared handle's output visible, atomically. It must
	// be idempotent: a handle may be committed again after a crash.
	Commit(c C) error
	// Abort rolls a prepared handle back. It must be idempotent.
	Abort(c C) error
	// MarshalCommittable and UnmarshalCommittable are the codec of the
	// persisted handle. The encoding must not depend on the instance: a
	// handle is decoded by another process after a crash.
	MarshalCommittable(c C) ([]byte, error)
	UnmarshalCommittable(b []byte) (C, error)
	// Close releases the connector's resources. What was written but not
	// prepared is discarded.
	Close() error
}

// Recoverer is implemented by committing sinks whose handles found pending
// at startup need other treatment than Commit. Without it the Committer
// recovers a handle by committing it.
type Recoverer[C any] interface {
	Recover(c C) error
}

// InitContext is what a committing sink learns when a subtask opens.
type InitContext[C any] struct {
	// UID is the sink operator's uid.
	UID string
	// Subtask and Parallelism place this subtask in the job.
	Subtask, Parallelism int
	// Generation is the topology generation: 0 on a fresh start, kept by a
	// restore at the same parallelism, and one more than the restored one
	// after a rescale. Names of external transactions carry it, so that an
	// owner never touches what a new subtask of the same index prepares.
	Generation int
	// RunToken is fresh at every open; staged artifacts carry it (see
	// StageName) so that a rerun never publishes over an earlier run's.
	RunToken string
	// Pending are the restored handles this subtask owns, oldest first.
	// The Committer recovers them after Open returns.
	Pending []C
	// Succeeds lists the subtasks of the restored run (generation
	// PreviousGeneration) whose handles this subtask owns; on a fresh start
	// it is empty.
	Succeeds []int
	// PreviousGeneration is the restored run's generation (equal to
	// Generation unless the job was rescaled); -1 on a fresh start.
	PreviousGeneration int
	// Logger is the subtask's logger.
	Logger *slog.Logger
}

// StageName is the name of what this subtask stages for checkpoint ckpt in
// this run: sub<N>-<run>-<ckpt>.
func (c InitContext[C]) StageName(ckpt checkpoint.ID) string {
	return fmt.Sprintf("sub%d-%s-%d", c.Subtask, c.RunToken, ckpt)
}

// StateCodec implements the committable codec of CommittingSink with the
// state package's codec for C (fixed-width integers, length-prefixed
// strings and bytes, structs field by field). Embed it in a connector whose
// handle is a plain value.
type StateCodec[C any] struct{}

// MarshalCommittable encodes c.
func (StateCodec[C]) MarshalCommittable(c C) ([]byte, error) {
	if err := state.CheckCodec[C](); err != nil {
		return nil, err
	}
	return state.CodecFor[C]().Append(nil, c), nil
}

// UnmarshalCommittable decodes a handle encoded by MarshalCommittable; the
// whole of b must be one handle.
func (StateCodec[C]) UnmarshalCommittable(b []byte) (C, error) {
	var zero C
	if err := state.CheckCodec[C](); err != nil {
		return zero, err
	}
	c, n, err := state.CodecFor[C]().Decode(b)
	if err != nil {
		return zero, err
	}
	if n != len(b) {
		return zero, fmt.Errorf("%d bytes left after the committable", len(b)-n)
	}
	return c, nil
}
