package clink_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

type sideEvent struct {
	ID  int
	Key int
	Ts  int64
}

func sideEvents(n, keys int, seed uint64) []sideEvent {
	rng := rand.New(rand.NewPCG(seed, 3))
	var out []sideEvent
	ts := int64(0)
	for i := 0; i < n; i++ {
		ts += rng.Int64N(20)
		out = append(out, sideEvent{ID: i, Key: rng.IntN(keys), Ts: ts})
	}
	return out
}

func TestIntervalJoinMatchesReference(t *testing.T) {
	left, right := sideEvents(3000, 13, 1), sideEvents(2500, 13, 2)
	want := map[[2]int]int{}
	for _, a := range left {
		for _, b := range right {
			if a.Key == b.Key && b.Ts >= a.Ts-50 && b.Ts <= a.Ts+100 {
				want[[2]int{a.ID, b.ID}]++
			}
		}
	}
	for _, mode := range []clink.CheckpointMode{clink.Aligned, clink.Unaligned} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			env, err := clink.NewEnvironment(clink.Options{
				Parallelism: 2, WatermarkInterval: -1, BatchSize: 5, ChannelCapacity: 2,
				CheckpointDir: dir, CheckpointInterval: time.Millisecond, CheckpointMode: mode, Retain: 1000,
			})
			if err != nil {
				t.Fatal(err)
			}
			ts := func(e sideEvent) int64 { return e.Ts }
			l := clink.AssignTimestamps(clink.FromSlice(env, "left", left).SetParallelism(1), "left_ts", ts, 0).SetParallelism(1)
			r := clink.AssignTimestamps(clink.FromSlice(env, "right", right).SetParallelism(1), "right_ts", ts, 0).SetParallelism(1)
			key := func(e sideEvent) int { return e.Key }
			joined := clink.IntervalJoin(clink.KeyBy(l, key), clink.KeyBy(r, key), "join", -50*time.Millisecond, 100*time.Millisecond,
				func(a, b sideEvent, out *clink.Collector[[2]int]) error {
					out.Collect([2]int{a.ID, b.ID})
					return nil
				})
			var mu sync.Mutex
			got := map[[2]int]int{}
			clink.SinkTo(joined, "sink", clink.SinkFunc(func(p [2]int) error {
				mu.Lock()
				got[p]++
				mu.Unlock()
				return nil
			}))
			if err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Errorf("%d pairs joined, want %d", len(got), len(want))
			}
			bad := 0
			for p, n := range want {
				if got[p] != n && bad < 5 {
					t.Errorf("pair %v joined %d times, want %d", p, got[p], n)
					bad++
				}
			}
			// The buffers are cleaned up: the terminal checkpoint (after
			// the final watermark) holds no buffered records.
			st, err := store.Open(dir, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			id, err := st.Resolve("latest")
			if err != nil {
				t.Fatal(err)
			}
			if held := joinEntries(t, st, id, 2); held > 0 {
				t.Errorf("terminal checkpoint %d: the join still holds %d entries", id, held)
			}
		})
	}
}

// intervalJoinJob joins left and right as TestIntervalJoinMatchesReference
// does, from rate-limited generators, and adds each pair it joins to got.
func intervalJoinJob(t *testing.T, opts clink.Options, left, right []sideEvent, rate float64, got map[[2]int]int, mu *sync.Mutex) *clink.Environment {
	t.Helper()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := func(e sideEvent) int64 { return e.Ts }
	side := func(name string, evs []sideEvent) clink.Stream[sideEvent] {
		g := clink.FromGenerator(env, name, clink.GeneratorOptions{Count: int64(len(evs)), RatePerSecond: rate},
			func(i int64) sideEvent { return evs[i] }).SetParallelism(1)
		return clink.AssignTimestamps(g, name+"_ts", ts, 0).SetParallelism(1)
	}
	key := func(e sideEvent) int { return e.Key }
	joined := clink.IntervalJoin(clink.KeyBy(side("left", left), key), clink.KeyBy(side("right", right), key), "join",
		-50*time.Millisecond, 100*time.Millisecond, func(a, b sideEvent, out *clink.Collector[[2]int]) error {
			out.Collect([2]int{a.ID, b.ID})
			return nil
		})
	clink.SinkTo(joined, "sink", clink.SinkFunc(func(p [2]int) error {
		mu.Lock()
		got[p]++
		mu.Unlock()
		return nil
	}))
	return env
}

// TestIntervalJoinRestoreDropsBuffers stops an interval join midway, with
// records of both sides buffered, and restores its checkpoint at another
// parallelism: the restored job joins only pairs that belong together,
// the two runs together join every pair, and the restored buffers are
// dropped as the watermark passes them (their timers, which the memory
// backend does not checkpoint, are set again from the buffers), so the
// terminal checkpoint holds nothing. Keys come in blocks of consecutive
// records, so that the first keys get no record after the checkpoint:
// only their restored timers drop their buffers.
func TestIntervalJoinRestoreDropsBuffers(t *testing.T) {
	left, right := sideEvents(3000, 13, 1), sideEvents(2500, 13, 2)
	for _, evs := range [][]sideEvent{left, right} {
		for i := range evs {
			evs[i].Key = i * 40 / len(evs)
		}
	}
	want := map[[2]int]int{}
	for _, a := range left {
		for _, b := range right {
			if a.Key == b.Key && b.Ts >= a.Ts-50 && b.Ts <= a.Ts+100 {
				want[[2]int{a.ID, b.ID}]++
			}
		}
	}
	dir := t.TempDir()
	var mu sync.Mutex
	first, second := map[[2]int]int{}, map[[2]int]int{}
	env := intervalJoinJob(t, clink.Options{Parallelism: 2, WatermarkInterval: -1, CheckpointDir: dir,
		CheckpointInterval: 5 * time.Millisecond, Retain: 1000}, left, right, 10_000, first, &mu)
	st := stopAfterCheckpoints(t, env, dir, 3)
	restored, err := st.Resolve("latest")
	if err != nil {
		t.Fatal(err)
	}
	held := joinEntries(t, st, restored, 2)
	if held == 0 {
		t.Fatalf("checkpoint %d holds no buffered records: the test needs a job stopped midway", restored)
	}

	env2 := intervalJoinJob(t, clink.Options{Parallelism: 3, WatermarkInterval: -1, CheckpointDir: dir, Restore: "latest",
		CheckpointInterval: 5 * time.Millisecond, Retain: 1000}, left, right, 0, second, &mu)
	if err := env2.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	for p := range second {
		if want[p] == 0 {
			t.Fatalf("the restored job joined %v, which do not meet", p)
		}
	}
	for p := range want {
		if first[p]+second[p] == 0 {
			t.Fatalf("pair %v was joined by neither run", p)
		}
	}
	last, err := st.Resolve("latest")
	if err != nil {
		t.Fatal(err)
	}
	if left := joinEntries(t, st, last, 3); left > 0 {
		t.Errorf("terminal checkpoint %d: the join still holds %d entries (restored from checkpoint %d, %d entries)", last, left, restored, held)
	}
}

// joinEntries returns how many state entries the subtasks join-0 ..
// join-(subtasks-1) hold in checkpoint id.
func joinEntries(t *testing.T, st *store.Store, id checkpoint.ID, subtasks int) int {
	t.Helper()
	n := 0
	for sub := 0; sub < subtasks; sub++ {
		snap, err := st.ReadTaskSnapshot(id, fmt.Sprintf("join-%d", sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range snapshotKeyGroups(t, st, snap.Operators[0]) {
			n += g.Entries
		}
	}
	return n
}
