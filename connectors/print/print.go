// Package print is the sink of SQL tables with `'connector' = 'print'`: it
// writes every changelog row on its own line, formatted as Flink's print
// connector does (`+I[1, abc]`, `-U[...]`, `+U[...]`, `-D[...]`).
//
// The line prefix follows Flink: with parallelism above 1 each line starts
// with the subtask number (1-based) and "> ", after the print-identifier
// and a colon if one is set; at parallelism 1 only an identifier is
// printed ("id> "). The sink is at-least-once: a restored job prints the
// rows after its checkpoint again.
package print

import (
	"io"
	"strconv"
	"sync"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/sql/types"
)

// Options configures a print sink.
type Options struct {
	// Identifier is Flink's print-identifier, a prefix of every line.
	Identifier string
	// Out receives the lines; the SQL layer passes stdout, or stderr for
	// 'standard-error' = 'true'.
	Out io.Writer
}

// Sink is a print sink. Its subtasks share Out under a lock; each line is
// written whole.
type Sink struct {
	opts Options
	mu   sync.Mutex
}

// New returns a print sink.
func New(opts Options) *Sink { return &Sink{opts: opts} }

// Open implements clink.Sink.
func (s *Sink) Open(ctx clink.SinkContext) (clink.SinkWriter[types.Row], error) {
	prefix := s.opts.Identifier
	if ctx.Parallelism > 1 {
		if prefix != "" {
			prefix += ":"
		}
		prefix += strconv.Itoa(ctx.Subtask + 1)
	}
	if prefix != "" {
		prefix += "> "
	}
	return &writer{s: s, prefix: prefix}, nil
}

type writer struct {
	s      *Sink
	prefix string
	buf    []byte
}

// Write prints one row with one write call, under the sink's lock, so
// lines of several subtasks never interleave. It does not buffer: Flink's
// print sink shows each row at once, and its users watch it live.
func (w *writer) Write(r types.Row) error {
	w.buf = append(w.buf[:0], w.prefix...)
	w.buf = append(w.buf, r.String()...)
	w.buf = append(w.buf, '\n')
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	_, err := w.s.opts.Out.Write(w.buf)
	return err
}

// Close implements clink.SinkWriter.
func (w *writer) Close() error { return nil }
