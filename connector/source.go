package connector

import (
	"log/slog"
	"math"
)

// NoTimestamp is the timestamp of a record that has none; it equals the
// runtime's lowest watermark.
const NoTimestamp int64 = math.MinInt64

// SourceContext tells a source which subtask it serves.
type SourceContext struct {
	UID                                  string
	Subtask, Parallelism, MaxParallelism int
	Logger                               *slog.Logger
}

// ReadStatus says what a SourceReader's Read did.
type ReadStatus uint8

const (
	// More means records were emitted or may follow at once.
	More ReadStatus = iota
	// Idle means nothing is available now; the runtime asks again soon.
	Idle
	// Done means the input is exhausted (a bounded source).
	Done
)

// Source is a replayable input: every subtask reads its share through a
// SourceReader whose offset the checkpoint keeps, so that a restored job
// emits each record after the checkpoint exactly once more.
type Source[T any] interface {
	// Open returns the reader of subtask ctx.Subtask positioned at offset
	// (nil: the beginning). When the job was restored at another
	// parallelism, offset is nil and rescaled holds the offsets of every
	// old subtask, in old subtask order; a source that cannot redistribute
	// them returns an error that says so.
	Open(ctx SourceContext, offset []byte, rescaled [][]byte) (SourceReader[T], error)
}

// SourceReader is one subtask's reader. Its methods run on the task
// goroutine; barriers fall between Read calls.
type SourceReader[T any] interface {
	// Read emits up to n records through emit with their event times
	// (NoTimestamp when they have none).
	Read(n int, emit func(v T, ts int64) error) (ReadStatus, error)
	// Offset returns the position after the last record emitted, and a
	// human-readable form of it (for clink state-cat).
	Offset() (data []byte, text string)
	Close() error
}
