// Package blackhole is the sink of SQL tables with `'connector' =
// 'blackhole'`: it accepts every row, inserts and updates alike, and
// discards it (Flink's BlackHole connector, for benchmarks and tests).
package blackhole

import "github.com/clinkstream/clink"

// Sink discards every record.
type Sink[T any] struct{}

// Open implements clink.Sink.
func (Sink[T]) Open(clink.SinkContext) (clink.SinkWriter[T], error) { return writer[T]{}, nil }

type writer[T any] struct{}

func (writer[T]) Write(T) error { return nil }
func (writer[T]) Close() error  { return nil }
