package clink_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/metrics"
)

// completedSizes collects the sizes that the job's "checkpoint completed"
// log lines report, in completion order.
type completedSizes struct {
	mu   sync.Mutex
	list []ckptSize
}

type ckptSize struct {
	id          string
	bytes, full int64
}

func (c *completedSizes) Enabled(context.Context, slog.Level) bool { return true }
func (c *completedSizes) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *completedSizes) WithGroup(string) slog.Handler            { return c }
func (c *completedSizes) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "checkpoint completed" {
		return nil
	}
	s := ckptSize{bytes: -1, full: -1}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "checkpoint":
			s.id = a.Value.String()
		case "bytes":
			s.bytes = a.Value.Int64()
		case "full_bytes":
			s.full = a.Value.Int64()
		}
		return true
	})
	c.mu.Lock()
	c.list = append(c.list, s)
	c.mu.Unlock()
	return nil
}

// pausingSource emits one record for each of keys distinct keys, then
// nothing until two more checkpoints have completed (so that one of them
// holds every key), then one record for each of the first few keys, and
// ends.
type pausingSource struct {
	keys, few int64
	reg       *metrics.Registry
}

type pausingReader struct {
	s      *pausingSource
	next   int64
	waitAt int64 // checkpoints completed to wait for; 0: not waiting yet
}

func (s *pausingSource) Open(connector.SourceContext, []byte, [][]byte) (connector.SourceReader[int64], error) {
	return &pausingReader{s: s}, nil
}

func (r *pausingReader) Read(n int, emit func(int64, int64) error) (connector.ReadStatus, error) {
	if r.next == r.s.keys {
		done := r.s.reg.Summary().CheckpointsCompleted
		if r.waitAt == 0 {
			r.waitAt = done + 2
		}
		if done < r.waitAt {
			time.Sleep(time.Millisecond)
			return connector.Idle, nil
		}
	}
	for ; n > 0 && r.next < r.s.keys+r.s.few; n-- {
		k := r.next
		if k >= r.s.keys {
			k -= r.s.keys
		}
		if err := emit(k, connector.NoTimestamp); err != nil {
			return connector.More, err
		}
		r.next++
		if r.next == r.s.keys {
			return connector.More, nil
		}
	}
	if r.next == r.s.keys+r.s.few {
		return connector.Done, nil
	}
	return connector.More, nil
}

func (r *pausingReader) Offset() ([]byte, string) {
	return binary.AppendVarint(nil, r.next), fmt.Sprint(r.next)
}

func (r *pausingReader) Close() error { return nil }

// TestCheckpointSizesCountSharedFiles checks the two sizes a checkpoint
// reports with incremental checkpoints (both state backends): after a
// checkpoint of many keys, one after a few changes newly writes little
// (its bytes) but references about as much (its full bytes), and the full
// size of a checkpoint holding every key counts the shared files that
// hold them, not only the small snapshot files that list them. Pebble
// runs without automatic compactions here: one landing between the last
// two checkpoints rewrites any share of the files (two thirds seen), which
// the next checkpoint then uploads.
func TestCheckpointSizesCountSharedFiles(t *testing.T) {
	const keys, few = 100_000, 10
	for _, backend := range []string{"memory", clink.PebbleSteady} {
		t.Run(backend, func(t *testing.T) {
			sizes := &completedSizes{}
			reg := metrics.New()
			env, err := clink.NewEnvironment(clink.Options{
				CheckpointDir: t.TempDir(), CheckpointInterval: 20 * time.Millisecond,
				Parallelism: 2, StateBackend: backend, Metrics: reg, Logger: slog.New(sizes),
			})
			if err != nil {
				t.Fatal(err)
			}
			src := clink.FromSource[int64](env, "src", 1, &pausingSource{keys: keys, few: few, reg: reg})
			counted := clink.Process(clink.KeyBy(src, func(v int64) int64 { return v }), "count",
				func(ctx *clink.KeyedContext[int64, int64], v int64, out *clink.Collector[int64]) error {
					c, _ := ctx.Value()
					ctx.SetValue(c + 1)
					out.Collect(c + 1)
					return nil
				})
			clink.SinkTo(counted, "sink", clink.Sink[int64](&countSink{}))
			if err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}

			sizes.mu.Lock()
			list := sizes.list
			sizes.mu.Unlock()
			if len(list) < 3 {
				t.Fatalf("%d checkpoints completed (%v), want at least 3", len(list), list)
			}
			for _, s := range list {
				if s.bytes <= 0 || s.full < s.bytes {
					t.Fatalf("checkpoint %s reported %d new bytes of %d in all; want 0 < new <= full (all: %v)", s.id, s.bytes, s.full, list)
				}
			}
			t.Logf("completed checkpoints (id, new bytes, full bytes): %v", list)
			before, last := list[len(list)-2], list[len(list)-1]
			// Each key holds at least a key and a count in some encoding.
			if before.full < keys*2 {
				t.Fatalf("checkpoint %s holding %d keys reports a full size of %d bytes (all: %v)", before.id, keys, before.full, list)
			}
			// A checkpoint that wrote the state again would write all of it.
			part, shrink := int64(10), int64(10) // 1/10 written, 10% smaller at most
			if last.bytes > before.full/part {
				t.Errorf("checkpoint %s after %d changes newly wrote %d bytes, more than 1/%d of the %d bytes of checkpoint %s (all: %v)",
					last.id, few, last.bytes, part, before.full, before.id, list)
			}
			if d := last.full - before.full; d < -before.full/shrink || d > before.full/10 {
				t.Errorf("checkpoint %s full size %d is not within 10%% above or %d%% below checkpoint %s's %d (all: %v)",
					last.id, last.full, 100/shrink, before.id, before.full, list)
			}
			var written int64
			for _, s := range list {
				written += s.bytes
			}
			if written < last.full/2 {
				t.Errorf("the checkpoints newly wrote %d bytes in all, less than half of the %d bytes the last references (all: %v)", written, last.full, list)
			}
			if got := reg.Summary(); got.LastCheckpointBytes != last.bytes || got.LastCheckpointFullBytes != last.full {
				t.Errorf("Summary reports %d and %d bytes for the last checkpoint, its log line %d and %d",
					got.LastCheckpointBytes, got.LastCheckpointFullBytes, last.bytes, last.full)
			}
		})
	}
}
