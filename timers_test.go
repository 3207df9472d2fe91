package clink_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/runtime"
)

type fired struct {
	Key     int64
	Ts      int64
	Wm      int64
	Records int64
}

// timerJob keys records i (event time i) into 50 keys (blocks of n/50
// consecutive records, or round robin); each record adds to
// its key's count and sets an event-time timer at far + key, which only the
// final watermark reaches, and one at i + 5.
func timerJob(t *testing.T, opts clink.Options, p int, n int64, rate float64, far int64, blocks bool, out *[]fired, mu *sync.Mutex) *clink.Environment {
	t.Helper()
	env, src := timerSource(t, opts, n, rate)
	key := func(i int64) int64 { return i % 50 }
	if blocks {
		key = func(i int64) int64 { return i * 50 / n }
	}
	res := clink.KeyedProcess(clink.KeyBy(src, key), "timers",
		clink.KeyedProcessFunction[int64, int64, int64, fired]{
			ProcessElement: func(ctx *clink.KeyedContext[int64, int64], i int64, _ *clink.Collector[fired]) error {
				c, _ := ctx.Value()
				ctx.SetValue(c + 1)
				ctx.RegisterEventTimeTimer(far + ctx.Key())
				ctx.RegisterEventTimeTimer(i + 5)
				return nil
			},
			OnTimer: func(ctx *clink.KeyedContext[int64, int64], ts int64, d clink.TimeDomain, out *clink.Collector[fired]) error {
				if d != clink.EventTime {
					return fmt.Errorf("timer of domain %v", d)
				}
				c, _ := ctx.Value()
				out.Collect(fired{Key: ctx.Key(), Ts: ts, Wm: ctx.CurrentWatermark(), Records: c})
				return nil
			},
		}).SetParallelism(p)
	collectFired(res, out, mu)
	return env
}

// timerSource makes the environment of a timer test and its source:
// records 0..n-1, each its own event time, rate limited.
func timerSource(t *testing.T, opts clink.Options, n int64, rate float64) (*clink.Environment, clink.Stream[int64]) {
	t.Helper()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	return env, clink.AssignTimestamps(
		clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: n, RatePerSecond: rate}, func(i int64) int64 { return i }).SetParallelism(1),
		"ts", func(i int64) int64 { return i }, 0).SetParallelism(1)
}

// collectFired sinks res into out.
func collectFired(res clink.Stream[fired], out *[]fired, mu *sync.Mutex) {
	clink.SinkTo(res, "sink", clink.SinkFunc(func(f fired) error {
		mu.Lock()
		*out = append(*out, f)
		mu.Unlock()
		return nil
	}))
}

func TestEventTimeTimers(t *testing.T) {
	const n, far = 5000, int64(1 << 40)
	var out []fired
	var mu sync.Mutex
	env := timerJob(t, clink.Options{Parallelism: 2, WatermarkInterval: -1}, 2, n, 0, far, false, &out, &mu)
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int64]bool{}
	farFired := 0
	for _, f := range out {
		if f.Wm < f.Ts {
			t.Errorf("timer %d of key %d fired at watermark %d", f.Ts, f.Key, f.Wm)
		}
		k := [2]int64{f.Key, f.Ts}
		if seen[k] {
			t.Errorf("timer %d of key %d fired twice", f.Ts, f.Key)
		}
		seen[k] = true
		if f.Ts >= far {
			farFired++
			if f.Records != n/50 {
				t.Errorf("final timer of key %d sees %d records, want %d", f.Key, f.Records, n/50)
			}
		}
	}
	if farFired != 50 {
		t.Errorf("%d final timers fired, want one per key (50)", farFired)
	}
	if len(out) != n+50 {
		t.Errorf("%d timers fired, want %d", len(out), n+50)
	}
}

// TestTimersSurviveRestoreAndRescale stops a job in the middle, restores its
// checkpoint at another parallelism, and checks that the timers set before
// the checkpoint fire in the restored run.
func TestTimersSurviveRestoreAndRescale(t *testing.T) {
	const n, far = 20000, int64(1 << 40)
	dir := t.TempDir()
	var first []fired
	var mu sync.Mutex
	env := timerJob(t, clink.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond, WatermarkInterval: -1}, 3, n, 50_000, far, true, &first, &mu)
	st := stopAfterCheckpoints(t, env, dir, 3)
	var second []fired
	// Keys are blocks of consecutive records: the first keys received all
	// their records before the checkpoint, so only restored timers can fire
	// for them.
	restored, _ := st.Resolve("latest")
	env2 := timerJob(t, clink.Options{CheckpointDir: dir, Restore: "latest", WatermarkInterval: -1}, 2, n, 0, far, true, &second, &mu)
	if err := env2.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	farFired := map[int64]int64{}
	for _, f := range second {
		if f.Ts >= far {
			farFired[f.Key] = f.Records
		}
	}
	if len(farFired) != 50 {
		t.Fatalf("%d keys' final timers fired after the restore, want 50", len(farFired))
	}
	for k, c := range farFired {
		if c != n/50 {
			t.Errorf("key %d: final timer sees %d records, want %d", k, c, n/50)
		}
	}
	snap, err := st.ReadTaskSnapshot(restored, "gen-0")
	if err != nil {
		t.Fatal(err)
	}
	if next := sourceEmitted(t, snap.Operators[0]); next < n/50 {
		t.Fatalf("restored checkpoint %d is at record %d: no key had all its records before it", restored, next)
	}
}

// stopAfterCheckpoints runs env until at least n of its checkpoints into
// dir completed, then cancels it, and returns dir's store.
func stopAfterCheckpoints(t *testing.T, env *clink.Environment, dir string, n int) *store.Store {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx) }()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if ids, _ := st.Completed(); len(ids) >= n {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("job ended early: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return st
}

func TestProcessingTimeTimers(t *testing.T) {
	env, err := clink.NewEnvironment(clink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: 5, RatePerSecond: 10}, func(i int64) int64 { return i })
	type tick struct{ Key, Registered, Due, FiredAt int64 }
	res := clink.KeyedProcess(clink.KeyBy(src, func(i int64) int64 { return i }), "proc",
		clink.KeyedProcessFunction[int64, int64, int64, tick]{
			ProcessElement: func(ctx *clink.KeyedContext[int64, int64], _ int64, _ *clink.Collector[tick]) error {
				now := ctx.CurrentProcessingTime()
				ctx.SetValue(now)
				ctx.RegisterProcessingTimeTimer(now + 10)
				ctx.RegisterProcessingTimeTimer(now + 1_000_000) // deleted below
				ctx.DeleteProcessingTimeTimer(now + 1_000_000)
				return nil
			},
			OnTimer: func(ctx *clink.KeyedContext[int64, int64], ts int64, d clink.TimeDomain, out *clink.Collector[tick]) error {
				if d != clink.ProcessingTime {
					return fmt.Errorf("timer of domain %v", d)
				}
				reg, _ := ctx.Value()
				out.Collect(tick{Key: ctx.Key(), Registered: reg, Due: ts, FiredAt: ctx.CurrentProcessingTime()})
				return nil
			},
		})
	var mu sync.Mutex
	var got []tick
	clink.SinkTo(res, "sink", clink.SinkFunc(func(x tick) error {
		mu.Lock()
		got = append(got, x)
		mu.Unlock()
		return nil
	}))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Records come 100 ms apart and their timers are due 10 ms later: all
	// but possibly the last (the job ends right after it) fire.
	if len(got) < 4 {
		t.Fatalf("%d processing-time timers fired, want at least 4: %+v", len(got), got)
	}
	for _, x := range got {
		if x.Due != x.Registered+10 {
			t.Errorf("key %d: fired timer due %d, registered at %d (the deleted timer fired?)", x.Key, x.Due, x.Registered)
		}
		if x.FiredAt < x.Due {
			t.Errorf("key %d: timer due %d fired early at %d", x.Key, x.Due, x.FiredAt)
		}
	}
}

// TestKeyedCoProcessTimers sets an event-time timer for every record of
// the first of two connected streams: each fires once, with the key's
// shared state, at a watermark past it, and a timer's watermark is the
// lesser of the two inputs' while both run (the second stream's times
// run behind the first's, so no timer fires before the second input
// passed it).
func TestKeyedCoProcessTimers(t *testing.T) {
	const n = 3000
	env, err := clink.NewEnvironment(clink.Options{Parallelism: 2, WatermarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	gen := func(name string, ts func(int64) int64) clink.Stream[int64] {
		return clink.AssignTimestamps(
			clink.FromGenerator(env, name, clink.GeneratorOptions{Count: n}, func(i int64) int64 { return i }).SetParallelism(1),
			name+"_ts", ts, 0).SetParallelism(1)
	}
	a := gen("a", func(i int64) int64 { return i })
	b := gen("b", func(i int64) int64 { return i / 2 })
	key := func(i int64) int64 { return i % 10 }
	// MaxB is the latest time of the second stream the key has seen.
	type counts struct{ A, B, MaxB int64 }
	res := clink.KeyedCoProcess(clink.Connect(clink.KeyBy(a, key), clink.KeyBy(b, key)), "co",
		clink.KeyedCoProcessFunction[int64, int64, int64, counts, fired]{
			ProcessElement1: func(ctx *clink.KeyedContext[int64, counts], i int64, _ *clink.Collector[fired]) error {
				c, _ := ctx.Value()
				c.A++
				ctx.SetValue(c)
				ctx.RegisterEventTimeTimer(i + 3)
				return nil
			},
			ProcessElement2: func(ctx *clink.KeyedContext[int64, counts], j int64, _ *clink.Collector[fired]) error {
				c, _ := ctx.Value()
				c.B++
				c.MaxB = max(c.MaxB, ctx.Timestamp())
				ctx.SetValue(c)
				return nil
			},
			OnTimer: func(ctx *clink.KeyedContext[int64, counts], ts int64, d clink.TimeDomain, out *clink.Collector[fired]) error {
				if d != clink.EventTime {
					return fmt.Errorf("timer of domain %v", d)
				}
				c, ok := ctx.Value()
				if !ok || c.A == 0 {
					return fmt.Errorf("timer %d of key %d sees no state", ts, ctx.Key())
				}
				out.Collect(fired{Key: ctx.Key(), Ts: ts, Wm: ctx.CurrentWatermark(), Records: c.MaxB})
				return nil
			},
		})
	var out []fired
	var mu sync.Mutex
	clink.SinkTo(res, "sink", clink.SinkFunc(func(f fired) error {
		mu.Lock()
		out = append(out, f)
		mu.Unlock()
		return nil
	}))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int64]bool{}
	for _, f := range out {
		if f.Wm < f.Ts {
			t.Errorf("timer %d of key %d fired at watermark %d", f.Ts, f.Key, f.Wm)
		}
		// The second stream's times are i/2: a watermark that passed ts
		// while that stream ran came after its records up to ts of this
		// key. (Once it ended, the first one's watermark alone counts.)
		if f.Wm < runtime.MaxWatermark && f.Ts <= (n-1)/2 && f.Records+10 < f.Ts {
			t.Errorf("timer %d of key %d fired at watermark %d with the second stream only at %d", f.Ts, f.Key, f.Wm, f.Records)
		}
		k := [2]int64{f.Key, f.Ts}
		if seen[k] {
			t.Errorf("timer %d of key %d fired twice", f.Ts, f.Key)
		}
		seen[k] = true
	}
	if len(seen) != n {
		t.Fatalf("%d timers fired, want %d", len(seen), n)
	}
}

// dueCount is the value of eventTimerOfJob's keys: the records seen and
// when the key's timer is due.
type dueCount struct {
	Count, Due int64
}

// eventTimerOfJob is timerJob's job (keys in blocks, one final timer per
// key at far + key) with timers derived from the value (EventTimerOf)
// rather than checkpointed: each record registers the key's timer again,
// so it fires once per record, and only the firing at the value's Due time
// reports.
func eventTimerOfJob(t *testing.T, opts clink.Options, p int, n int64, rate float64, far int64, out *[]fired, mu *sync.Mutex) *clink.Environment {
	t.Helper()
	env, src := timerSource(t, opts, n, rate)
	res := clink.KeyedProcess(clink.KeyBy(src, func(i int64) int64 { return i * 50 / n }), "timers",
		clink.KeyedProcessFunction[int64, int64, dueCount, fired]{
			ProcessElement: func(ctx *clink.KeyedContext[int64, dueCount], i int64, _ *clink.Collector[fired]) error {
				v, _ := ctx.Value()
				v.Count++
				v.Due = far + ctx.Key()
				ctx.SetValue(v)
				ctx.RegisterEventTimeTimer(v.Due)
				return nil
			},
			OnTimer: func(ctx *clink.KeyedContext[int64, dueCount], ts int64, _ clink.TimeDomain, out *clink.Collector[fired]) error {
				v, ok := ctx.Value()
				if !ok || v.Due != ts {
					return nil
				}
				out.Collect(fired{Key: ctx.Key(), Ts: ts, Wm: ctx.CurrentWatermark(), Records: v.Count})
				v.Due = 0
				ctx.SetValue(v)
				return nil
			},
			EventTimerOf: func(_ int64, v dueCount) (int64, bool) { return v.Due, v.Due != 0 },
		}).SetParallelism(p)
	collectFired(res, out, mu)
	return env
}

// TestEventTimerOfRestoresTimers stops a job whose timers are derived from
// its values midway and restores its checkpoint at another parallelism:
// the keys whose records all came before the checkpoint get their timers
// back from their values alone, and every key's timer reports once with
// all its records.
func TestEventTimerOfRestoresTimers(t *testing.T) {
	const n, far = 20000, int64(1 << 40)
	dir := t.TempDir()
	var first []fired
	var mu sync.Mutex
	env := eventTimerOfJob(t, clink.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond, WatermarkInterval: -1}, 3, n, 50_000, far, &first, &mu)
	st := stopAfterCheckpoints(t, env, dir, 3)
	restored, _ := st.Resolve("latest")
	snap, err := st.ReadTaskSnapshot(restored, "gen-0")
	if err != nil {
		t.Fatal(err)
	}
	if next := sourceEmitted(t, snap.Operators[0]); next < n/50 {
		t.Fatalf("restored checkpoint %d is at record %d: no key had all its records before it", restored, next)
	}
	var second []fired
	env2 := eventTimerOfJob(t, clink.Options{CheckpointDir: dir, Restore: "latest", WatermarkInterval: -1}, 2, n, 0, far, &second, &mu)
	if err := env2.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[int64]int64{}
	for _, f := range second {
		if _, dup := got[f.Key]; dup {
			t.Errorf("key %d reported twice", f.Key)
		}
		if f.Ts != far+f.Key || f.Wm < f.Ts {
			t.Errorf("key %d: timer %d fired at watermark %d", f.Key, f.Ts, f.Wm)
		}
		got[f.Key] = f.Records
	}
	if len(got) != 50 {
		t.Fatalf("%d keys' timers reported after the restore, want 50", len(got))
	}
	for k, c := range got {
		if c != n/50 {
			t.Errorf("key %d: its timer sees %d records, want %d", k, c, n/50)
		}
	}
}
