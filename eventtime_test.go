package clink_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/clinkstream/clink"
)

// TestWatermarkIsMinimumOverInputs runs a fast and a slow source of
// in-order timestamps into one keyed operator. Were the operator's
// watermark anything but the minimum over its inputs, records of the slow
// source would arrive behind it (late).
func TestWatermarkIsMinimumOverInputs(t *testing.T) {
	env, err := clink.NewEnvironment(clink.Options{Parallelism: 2, BatchSize: 8, WatermarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	fast := clink.AssignTimestamps(
		clink.FromGenerator(env, "fast", clink.GeneratorOptions{Count: 20000}, func(i int64) int64 { return i }),
		"fast_ts", func(v int64) int64 { return v }, 0)
	slow := clink.AssignTimestamps(
		clink.FromGenerator(env, "slow", clink.GeneratorOptions{Count: 2000, RatePerSecond: 20000}, func(i int64) int64 { return i * 10 }),
		"slow_ts", func(v int64) int64 { return v }, 0)
	all := clink.Union("all", fast, slow)
	type obs struct{ ts, wm int64 }
	checked := clink.Process(clink.KeyBy(all, func(v int64) int64 { return v % 4 }), "check",
		func(ctx *clink.KeyedContext[int64, int64], v int64, out *clink.Collector[obs]) error {
			out.Collect(obs{ts: ctx.Timestamp(), wm: ctx.CurrentWatermark()})
			return nil
		})
	var mu sync.Mutex
	late, n, withWatermark := 0, 0, 0
	clink.SinkTo(checked, "sink", clink.SinkFunc(func(o obs) error {
		mu.Lock()
		defer mu.Unlock()
		n++
		if o.wm != clink.NoTimestamp {
			withWatermark++
		}
		if o.ts <= o.wm {
			late++
		}
		return nil
	}))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n != 22000 {
		t.Fatalf("processed %d records, want 22000", n)
	}
	if late != 0 {
		t.Errorf("%d records arrived at or behind the watermark", late)
	}
	if withWatermark == 0 {
		t.Errorf("no record saw a watermark: watermarks do not flow")
	}
	t.Log(fmt.Sprintf("%d of %d records saw a watermark", withWatermark, n))
}
