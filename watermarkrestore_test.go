package clink_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint/store"
)

// TestKeyedWatermarkSurvivesRestore: a keyed operator restored from a
// checkpoint starts from the watermark it had reached then, not from the
// beginning of time, so a record that was late before the crash is late
// when it is replayed (a window that fired does not open again).
func TestKeyedWatermarkSurvivesRestore(t *testing.T) {
	const n = 200_000
	dir := t.TempDir()
	job := func(opts clink.Options, rate float64, first *int64, once *sync.Once) *clink.Environment {
		opts.CheckpointDir, opts.WatermarkInterval = dir, -1
		env, err := clink.NewEnvironment(opts)
		if err != nil {
			t.Fatal(err)
		}
		src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: n, RatePerSecond: rate}, func(i int64) int64 { return i })
		src = clink.AssignTimestamps(src, "ts", func(i int64) int64 { return i }, 0)
		out := clink.Process(clink.KeyBy(src, func(i int64) int64 { return i % 10 }), "wm",
			func(ctx *clink.KeyedContext[int64, int64], _ int64, _ *clink.Collector[int64]) error {
				once.Do(func() { *first = ctx.CurrentWatermark() })
				return nil
			})
		clink.SinkTo(out, "sink", clink.SinkFunc(func(int64) error { return nil }))
		return env
	}
	var first1 int64
	env := job(clink.Options{Parallelism: 1, CheckpointInterval: 20 * time.Millisecond}, 100_000, &first1, &sync.Once{})
	st := stopAfterCheckpoints(t, env, dir, 2)
	id, err := st.Resolve("latest")
	if err != nil {
		t.Fatal(err)
	}
	saved := checkpointedOperator(t, st, id, "wm").Watermark
	if saved == store.NoWatermark || saved < 0 {
		t.Fatalf("the checkpoint holds no watermark of the keyed operator (%d)", saved)
	}
	var first2 int64
	env2 := job(clink.Options{Parallelism: 1, Restore: "latest"}, 0, &first2, &sync.Once{})
	if err := env2.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	if first2 != saved {
		t.Fatalf("the first record after the restore sees watermark %d, want the checkpoint's %d", first2, saved)
	}
}
