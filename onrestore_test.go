package clink_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/clinkstream/clink"
)

// TestOnRestore: a run that starts over does not call OnRestore; one
// that restores a checkpoint calls it once before any record is
// processed, and its function once before Execute returns.
func TestOnRestore(t *testing.T) {
	dir := t.TempDir()
	run := func(restore string) (begun, restored int, processedAtBegin int64) {
		var mu sync.Mutex
		var processed atomic.Int64
		env, err := clink.NewEnvironment(clink.Options{
			CheckpointDir: dir, Restore: restore,
			OnRestore: func() func() {
				mu.Lock()
				defer mu.Unlock()
				begun++
				processedAtBegin = processed.Load()
				return func() {
					mu.Lock()
					defer mu.Unlock()
					restored++
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		src := clink.FromGenerator(env, "n", clink.GeneratorOptions{Count: 1000}, func(i int64) int64 { return i })
		counts := clink.Process(clink.KeyBy(src, func(i int64) int64 { return i % 7 }), "count",
			func(ctx *clink.KeyedContext[int64, int64], i int64, out *clink.Collector[int64]) error {
				processed.Add(1)
				n, _ := ctx.Value()
				ctx.SetValue(n + 1)
				out.Collect(n + 1)
				return nil
			})
		clink.SinkTo(counts, "sink", &clink.CollectSink[int64]{})
		if err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return begun, restored, processedAtBegin
	}
	if begun, restored, _ := run(""); begun != 0 || restored != 0 {
		t.Errorf("a run without a restore: OnRestore called %d times, its function %d, want 0 and 0", begun, restored)
	}
	if begun, restored, at := run("latest"); begun != 1 || restored != 1 || at != 0 {
		t.Errorf("a restored run: OnRestore called %d times (after %d records), its function %d, want once (after none) and once", begun, at, restored)
	}
}
