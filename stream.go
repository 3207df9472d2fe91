package clink

import (
	"fmt"
	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/runtime"
)

// Stream is a stream of records of type T. It is a handle: transformations
// of it add operators to its Environment.
type Stream[T any] struct {
	node *node
}

// Name returns the name of the operator that produces the stream.
func (s Stream[T]) Name() string { return s.node.name }

// SetParallelism sets the parallelism of the operator that produces the
// stream (default: the environment's).
func (s Stream[T]) SetParallelism(p int) Stream[T] {
	n := s.node
	switch {
	case n.fixedParallelism && p != 1:
		n.env.fail(fmt.Errorf("operator %q cannot run at parallelism %d: it reads one file", n.name, p))
	case p < 1 || p > n.env.opts.MaxParallelism:
		n.env.fail(fmt.Errorf("operator %q: parallelism %d must be between 1 and the max parallelism %d", n.name, p, n.env.opts.MaxParallelism))
	default:
		n.parallelism = p
	}
	return s
}

// Collector receives an operator's output records. Its records carry the
// timestamp of the input record being processed.
type Collector[T any] struct {
	o   *out[T]
	c   *counters
	ts  int64
	err error
}

// Collect emits v.
func (c *Collector[T]) Collect(v T) {
	if c.err != nil {
		return
	}
	c.c.out++
	c.err = c.o.rec(v, c.ts)
}

// CollectWithTimestamp emits v with event time ts (milliseconds).
func (c *Collector[T]) CollectWithTimestamp(v T, ts int64) {
	if c.err != nil {
		return
	}
	c.c.out++
	c.err = c.o.rec(v, ts)
}

// NoTimestamp is the timestamp of a record that has none.
const NoTimestamp int64 = runtime.MinWatermark

// stateless is the member of an operator without state.
type stateless struct{ name string }

func (s stateless) uid() string                                             { return s.name }
func (s stateless) open(*runtime.TaskContext, restoreState) error           { return nil }
func (s stateless) snapshot(checkpoint.ID) (*store.OperatorSnapshot, error) { return nil, nil }
func (s stateless) endOfInput() error                                       { return nil }
func (s stateless) close() error                                            { return nil }

func addOp[T, U any](s Stream[T], name string, build func(o *out[U], c *counters) *out[T]) Stream[U] {
	env := s.node.env
	n := env.newNode(name, s.node.parallelism)
	n.port = newPort[U]()
	n.inPorts = []portOps{s.node.port}
	connect(s.node, n, 0, partForward, nil)
	n.build = func(bc *buildCtx, o any) ([]any, producer, error) {
		bc.add(stateless{name: name})
		return []any{build(o.(*out[U]), bc.counters(name))}, nil, nil
	}
	return Stream[U]{node: n}
}

// Map applies f to every record.
func Map[T, U any](s Stream[T], name string, f func(T) U) Stream[U] {
	return addOp(s, name, func(o *out[U], c *counters) *out[T] {
		next := o.rec
		return &out[T]{rec: func(v T, ts int64) error {
			c.in++
			c.out++
			return next(f(v), ts)
		}, wm: o.wm}
	})
}

// Filter keeps the records for which f returns true.
func Filter[T any](s Stream[T], name string, f func(T) bool) Stream[T] {
	return addOp(s, name, func(o *out[T], c *counters) *out[T] {
		next := o.rec
		return &out[T]{rec: func(v T, ts int64) error {
			c.in++
			if f(v) {
				c.out++
				return next(v, ts)
			}
			return nil
		}, wm: o.wm}
	})
}

// FlatMap calls f for every record; f emits any number of results.
func FlatMap[T, U any](s Stream[T], name string, f func(T, *Collector[U]) error) Stream[U] {
	return addOp(s, name, func(o *out[U], cnt *counters) *out[T] {
		c := &Collector[U]{o: o, c: cnt}
		return &out[T]{rec: func(v T, ts int64) error {
			cnt.in++
			c.ts = ts
			if err := f(v, c); err != nil {
				return err
			}
			return c.err
		}, wm: o.wm}
	})
}

// Rebalance distributes the stream's records round-robin over the next
// operator's subtasks.
func Rebalance[T any](s Stream[T]) Stream[T] {
	return exchange(s, s.node.name+".rebalance", partRebalance)
}

// Broadcast sends every record to every subtask of the next operator.
func Broadcast[T any](s Stream[T]) Stream[T] {
	return exchange(s, s.node.name+".broadcast", partBroadcast)
}

func exchange[T any](s Stream[T], name string, part partKind) Stream[T] {
	env := s.node.env
	n := env.newNode(name, env.opts.Parallelism)
	n.port = s.node.port
	n.inPorts = []portOps{s.node.port}
	connect(s.node, n, 0, part, nil)
	n.build = passThrough[T](name)
	return Stream[T]{node: n}
}

// Union merges streams of the same type into one. The merged operator runs
// at the environment's parallelism; the order of records from one upstream
// subtask is kept. An input of the same parallelism feeds subtask i from
// its subtask i only, so records that follow each other in one upstream
// subtask (a retraction and its update) stay in one downstream subtask in
// order; an input of another parallelism is rebalanced.
func Union[T any](name string, streams ...Stream[T]) Stream[T] {
	if len(streams) == 0 {
		panic("clink.Union needs at least one stream")
	}
	env := streams[0].node.env
	n := env.newNode(name, env.opts.Parallelism)
	n.port = streams[0].node.port
	n.inPorts = []portOps{streams[0].node.port}
	for _, s := range streams {
		if s.node.env != env {
			env.fail(fmt.Errorf("union %q: streams belong to different environments", name))
		}
		connect(s.node, n, 0, partForward, nil)
	}
	n.build = passThrough[T](name)
	return Stream[T]{node: n}
}

// passThrough builds an operator that forwards its input unchanged
// (exchanges and unions), counting what passes.
func passThrough[T any](name string) func(bc *buildCtx, o any) ([]any, producer, error) {
	return func(bc *buildCtx, o any) ([]any, producer, error) {
		bc.add(stateless{name: name})
		c := bc.counters(name)
		down := o.(*out[T])
		next := down.rec
		return []any{&out[T]{rec: func(v T, ts int64) error {
			c.in++
			c.out++
			return next(v, ts)
		}, wm: down.wm}}, nil, nil
	}
}
