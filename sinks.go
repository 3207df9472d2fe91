package clink

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/runtime"
)

// SinkContext tells a sink which subtask it serves.
type SinkContext struct {
	Subtask, Parallelism int
}

// Sink receives the records of a stream. Open is called once per subtask of
// the sink operator, possibly concurrently, and returns that subtask's
// writer; each writer is used by one goroutine only.
//
// A plain Sink sees the records a restored job replays again; exactly-once
// output to an external system needs a committing sink.
type Sink[T any] interface {
	Open(ctx SinkContext) (SinkWriter[T], error)
}

// SinkWriter writes one subtask's records.
type SinkWriter[T any] interface {
	Write(v T) error
	Close() error
}

// FlushingWriter is a SinkWriter that buffers: Flush is called at every
// checkpoint barrier, before the checkpoint is taken, so that nothing the
// checkpoint counts as written is still in a buffer when the process dies
// (at-least-once output; exactly-once needs a committing sink).
type FlushingWriter[T any] interface {
	SinkWriter[T]
	Flush() error
}

type sinkFunc[T any] func(T) error

func (f sinkFunc[T]) Open(SinkContext) (SinkWriter[T], error) { return f, nil }
func (f sinkFunc[T]) Write(v T) error                         { return f(v) }
func (f sinkFunc[T]) Close() error                            { return nil }

// SinkFunc adapts a function to a Sink whose every subtask calls f. f must
// be safe for concurrent use when the sink runs at a parallelism above 1.
func SinkFunc[T any](f func(T) error) Sink[T] { return sinkFunc[T](f) }

// PrintSink writes each record on its own line to w, formatted with %v.
func PrintSink[T any](w io.Writer) Sink[T] {
	var mu sync.Mutex
	return sinkFunc[T](func(v T) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintln(w, v)
		return err
	})
}

// CollectSink keeps every record in memory; for tests and examples.
type CollectSink[T any] struct {
	mu    sync.Mutex
	items []T
}

// Open implements Sink.
func (c *CollectSink[T]) Open(SinkContext) (SinkWriter[T], error) {
	return sinkFunc[T](func(v T) error {
		c.mu.Lock()
		c.items = append(c.items, v)
		c.mu.Unlock()
		return nil
	}), nil
}

// Items returns a copy of the records received so far.
func (c *CollectSink[T]) Items() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]T(nil), c.items...)
}

type sinkMember[T any] struct {
	name string
	sink Sink[T]
	w    SinkWriter[T]
}

func (m *sinkMember[T]) uid() string { return m.name }

func (m *sinkMember[T]) open(tc *runtime.TaskContext, _ restoreState) error {
	w, err := m.sink.Open(SinkContext{Subtask: tc.Subtask, Parallelism: tc.Parallelism})
	if err != nil {
		return err
	}
	m.w = w
	return nil
}

func (m *sinkMember[T]) snapshot(checkpoint.ID) (*store.OperatorSnapshot, error) {
	if f, ok := m.w.(FlushingWriter[T]); ok {
		if err := f.Flush(); err != nil {
			return nil, fmt.Errorf("flushing sink %s at the checkpoint: %w", m.name, err)
		}
	}
	return nil, nil
}
func (m *sinkMember[T]) endOfInput() error { return nil }

func (m *sinkMember[T]) close() error {
	if m.w == nil {
		return nil
	}
	w := m.w
	m.w = nil
	return w.Close()
}

// SinkTo ends s in sink. The sink operator runs at the parallelism of s and
// is chained to it.
func SinkTo[T any](s Stream[T], name string, sink Sink[T]) {
	up := s.node
	n := up.env.newNode(name, up.parallelism)
	n.inPorts = []portOps{up.port}
	connect(up, n, 0, partForward, nil)
	n.build = func(bc *buildCtx, _ any) ([]any, producer, error) {
		m := &sinkMember[T]{name: name, sink: sink}
		bc.add(m)
		c := bc.counters(name)
		in := &out[T]{
			rec: func(v T, _ int64) error {
				c.in++
				return m.w.Write(v)
			},
			wm: func(int64) error { return nil },
		}
		return []any{in}, nil, nil
	}
}

// AssignTimestamps gives each record of s the event time ts(v) in
// milliseconds and generates bounded-out-of-orderness watermarks: the
// highest timestamp seen minus outOfOrderness minus 1 ms, emitted every
// Options.WatermarkInterval. Watermarks arriving from upstream are replaced,
// except the final one at end of input.
func AssignTimestamps[T any](s Stream[T], name string, ts func(T) int64, outOfOrderness time.Duration) Stream[T] {
	bound := outOfOrderness.Milliseconds()
	env := s.node.env
	interval := max(env.opts.WatermarkInterval, 0)
	n := env.newNode(name, s.node.parallelism)
	n.port = s.node.port
	n.inPorts = []portOps{s.node.port}
	connect(s.node, n, 0, partForward, nil)
	n.build = func(bc *buildCtx, o any) ([]any, producer, error) {
		down := o.(*out[T])
		c := bc.counters(name)
		m := &watermarkMember{name: name, down: down.wm, maxTs: runtime.MinWatermark, emitted: runtime.MinWatermark, bound: bound, interval: interval}
		bc.add(m)
		next := down.rec
		in := &out[T]{
			rec: func(v T, _ int64) error {
				c.in++
				c.out++
				t := ts(v)
				if t > m.maxTs {
					m.maxTs = t
				}
				return next(v, t)
			},
			wm: func(wm int64) error {
				if wm == runtime.MaxWatermark {
					m.emitted = wm
					return m.down(wm)
				}
				return nil
			},
		}
		return []any{in}, nil, nil
	}
	return Stream[T]{node: n}
}

type watermarkMember struct {
	name     string
	down     func(int64) error
	maxTs    int64
	emitted  int64
	bound    int64
	interval time.Duration
	last     time.Time
}

func (m *watermarkMember) uid() string { return m.name }

func (m *watermarkMember) open(_ *runtime.TaskContext, rs restoreState) error {
	if rs.empty() {
		return nil
	}
	if wm := rs.watermark(); wm > m.emitted && wm != runtime.MaxWatermark {
		// Never emit a watermark below one emitted before the restore.
		m.emitted = wm
		m.maxTs = wm + m.bound + 1
	}
	return nil
}

func (m *watermarkMember) snapshot(checkpoint.ID) (*store.OperatorSnapshot, error) {
	return &store.OperatorSnapshot{UID: m.name, Watermark: m.emitted}, nil
}

// deadline is when the next watermark is due: the interval after the last
// one, if the highest timestamp has moved past what was emitted.
func (m *watermarkMember) deadline() (time.Time, bool) {
	if m.maxTs == runtime.MinWatermark || m.maxTs-m.bound-1 <= m.emitted {
		return time.Time{}, false
	}
	return m.last.Add(m.interval), true
}

func (m *watermarkMember) onDeadline(now time.Time) error {
	m.last = now
	m.emitted = m.maxTs - m.bound - 1
	return m.down(m.emitted)
}

func (m *watermarkMember) endOfInput() error { return nil }
func (m *watermarkMember) close() error      { return nil }
