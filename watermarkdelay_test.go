package clink_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink"
)

// TestDelayWatermarks checks that a keyed operator behind DelayWatermarks
// sees watermarks at least the delay behind the timestamps of in-order
// records, and that the final watermark still fires its timers.
func TestDelayWatermarks(t *testing.T) {
	env, err := clink.NewEnvironment(clink.Options{Parallelism: 1, BatchSize: 8, WatermarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	src := clink.AssignTimestamps(
		clink.FromGenerator(env, "src", clink.GeneratorOptions{Count: 5000}, func(i int64) int64 { return i }),
		"ts", func(v int64) int64 { return v }, 0)
	delayed := clink.DelayWatermarks(src, "delay", 100*time.Millisecond)
	type obs struct{ ts, wm int64 }
	checked := clink.KeyedProcess(clink.KeyBy(delayed, func(v int64) int64 { return v % 3 }), "check",
		clink.KeyedProcessFunction[int64, int64, int64, obs]{
			ProcessElement: func(ctx *clink.KeyedContext[int64, int64], v int64, out *clink.Collector[obs]) error {
				if v == 4999 {
					ctx.RegisterEventTimeTimer(1 << 40)
				}
				out.Collect(obs{ts: ctx.Timestamp(), wm: ctx.CurrentWatermark()})
				return nil
			},
			OnTimer: func(ctx *clink.KeyedContext[int64, int64], ts int64, _ clink.TimeDomain, out *clink.Collector[obs]) error {
				out.Collect(obs{ts: -1, wm: ctx.CurrentWatermark()})
				return nil
			},
		})
	var mu sync.Mutex
	var seen []obs
	clink.SinkTo(checked, "sink", clink.SinkFunc(func(o obs) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, o)
		return nil
	}))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	withWatermark, fired := 0, false
	for _, o := range seen {
		if o.ts == -1 {
			fired = true
			continue
		}
		if o.wm == clink.NoTimestamp {
			continue
		}
		withWatermark++
		if o.wm > o.ts-100 {
			t.Fatalf("a record at %d saw the watermark %d: less than 100 ms behind", o.ts, o.wm)
		}
	}
	if withWatermark == 0 {
		t.Error("no record saw a watermark: the test proves nothing")
	}
	if !fired {
		t.Error("the final watermark did not fire the timer")
	}
}
