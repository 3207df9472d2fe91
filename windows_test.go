package clink_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink"
)

type event struct {
	Key string
	Ts  int64
	V   int64
}

type sumCount struct{ Sum, Count int64 }

// sumAgg sums V and counts records; it merges, so sessions can use it.
type sumAgg struct{}

func (sumAgg) CreateAccumulator() sumCount { return sumCount{} }
func (sumAgg) Add(acc sumCount, e event) sumCount {
	return sumCount{Sum: acc.Sum + e.V, Count: acc.Count + 1}
}
func (sumAgg) Result(acc sumCount) sumCount { return acc }
func (sumAgg) Merge(a, b sumCount) sumCount {
	return sumCount{Sum: a.Sum + b.Sum, Count: a.Count + b.Count}
}

type winKey struct {
	Key        string
	Start, End int64
}

// runWindows runs events (in the given order) through a window operator
// with watermarks lagging the highest timestamp by bound, and returns the
// last result per window and the late records.
func runWindows(t *testing.T, events []event, assigner clink.WindowAssigner, bound time.Duration, lateness time.Duration, p, batch int) (map[winKey]sumCount, []event, int) {
	t.Helper()
	env, err := clink.NewEnvironment(clink.Options{Parallelism: p, WatermarkInterval: -1, BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	src := clink.AssignTimestamps(clink.FromSlice(env, "events", events).SetParallelism(1), "ts",
		func(e event) int64 { return e.Ts }, bound).SetParallelism(1)
	w := clink.Aggregate(clink.KeyBy(src, func(e event) string { return e.Key }), "win", assigner,
		clink.AggregateFunction[event, sumCount, sumCount](sumAgg{}), clink.WindowOptions{AllowedLateness: lateness})
	var mu sync.Mutex
	got := map[winKey]sumCount{}
	emitted := 0
	var late []event
	clink.SinkTo(w.Results(), "results", clink.SinkFunc(func(r clink.WindowResult[string, sumCount]) error {
		mu.Lock()
		defer mu.Unlock()
		got[winKey{r.Key, r.Window.Start, r.Window.End}] = r.Value
		emitted++
		return nil
	}))
	clink.SinkTo(w.Late(), "late", clink.SinkFunc(func(e event) error {
		mu.Lock()
		defer mu.Unlock()
		late = append(late, e)
		return nil
	}))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	return got, late, emitted
}

func genEvents(n int, keys int, seed uint64) []event {
	rng := rand.New(rand.NewPCG(seed, seed))
	var evs []event
	ts := int64(0)
	for i := 0; i < n; i++ {
		ts += rng.Int64N(120) // gaps up to 120ms, so sessions split
		if rng.IntN(50) == 0 {
			ts += 700
		}
		evs = append(evs, event{Key: fmt.Sprintf("k%d", rng.IntN(keys)), Ts: ts, V: rng.Int64N(100)})
	}
	return evs
}

func add(m map[winKey]sumCount, k winKey, e event) {
	a := m[k]
	m[k] = sumCount{Sum: a.Sum + e.V, Count: a.Count + 1}
}

func diffWindows(t *testing.T, got, want map[winKey]sumCount) {
	t.Helper()
	var keys []winKey
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Key != keys[j].Key {
			return keys[i].Key < keys[j].Key
		}
		return keys[i].Start < keys[j].Start || keys[i].Start == keys[j].Start && keys[i].End < keys[j].End
	})
	bad := 0
	for _, k := range keys {
		if got[k] != want[k] && bad < 8 {
			t.Errorf("window %v: got %+v, want %+v", k, got[k], want[k])
			bad++
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d windows, want %d", len(got), len(want))
	}
}

func TestWindowsMatchReference(t *testing.T) {
	evs := genEvents(3000, 7, 7)
	t.Run("tumbling", func(t *testing.T) {
		want := map[winKey]sumCount{}
		for _, e := range evs {
			s := e.Ts - e.Ts%1000
			add(want, winKey{e.Key, s, s + 1000}, e)
		}
		got, late, _ := runWindows(t, evs, clink.TumblingWindows(time.Second), 0, 0, 2, 7)
		diffWindows(t, got, want)
		if len(late) != 0 {
			t.Errorf("%d late records from in-order input", len(late))
		}
	})
	t.Run("sliding", func(t *testing.T) {
		want := map[winKey]sumCount{}
		for _, e := range evs {
			for s := int64(0); s <= e.Ts; s += 250 {
				if e.Ts < s+1000 {
					add(want, winKey{e.Key, s, s + 1000}, e)
				}
			}
		}
		got, _, _ := runWindows(t, evs, clink.SlidingWindows(time.Second, 250*time.Millisecond), 0, 0, 3, 7)
		diffWindows(t, got, want)
	})
	t.Run("cumulate", func(t *testing.T) {
		want := map[winKey]sumCount{}
		for _, e := range evs {
			s := e.Ts - e.Ts%1000
			for end := s + 200; end <= s+1000; end += 200 {
				if e.Ts < end {
					add(want, winKey{e.Key, s, end}, e)
				}
			}
		}
		got, _, _ := runWindows(t, evs, clink.CumulateWindows(200*time.Millisecond, time.Second), 0, 0, 2, 7)
		diffWindows(t, got, want)
	})
	t.Run("session", func(t *testing.T) {
		const gap = 500
		byKey := map[string][]event{}
		for _, e := range evs {
			byKey[e.Key] = append(byKey[e.Key], e)
		}
		want := map[winKey]sumCount{}
		for k, es := range byKey {
			slices.SortStableFunc(es, func(a, b event) int { return int(a.Ts - b.Ts) })
			start, last := es[0].Ts, es[0].Ts
			acc := sumCount{}
			for _, e := range es {
				if e.Ts > last+gap {
					want[winKey{k, start, last + gap}] = acc
					start, acc = e.Ts, sumCount{}
				}
				last = e.Ts
				acc = sumCount{Sum: acc.Sum + e.V, Count: acc.Count + 1}
			}
			want[winKey{k, start, last + gap}] = acc
		}
		// Out of order within the watermark bound: sessions still merge.
		shuffled := slices.Clone(evs)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range shuffled {
			j := i + rng.IntN(min(5, len(shuffled)-i))
			if shuffled[j].Ts-shuffled[i].Ts < 300 {
				shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
			}
		}
		got, late, _ := runWindows(t, shuffled, clink.SessionWindows(gap*time.Millisecond), 400*time.Millisecond, 0, 2, 7)
		diffWindows(t, got, want)
		if len(late) != 0 {
			t.Errorf("%d late records, none expected within the bound", len(late))
		}
	})
}

func TestLateRecordsAndAllowedLateness(t *testing.T) {
	// Batches of one record, so a watermark (max ts - 1, bound 0) follows
	// every record. The record at 500 arrives after the watermark passed
	// 2499: its window [0,1000) has closed.
	evs := []event{
		{"a", 100, 1}, {"a", 900, 1}, {"a", 1500, 1}, {"a", 2500, 1},
		{"a", 500, 10}, // late for [0,1000): within 2s lateness, not within 0
		{"a", 5000, 1},
		{"a", 200, 100}, // too late even with 2s lateness (watermark 4999)
	}
	got, late, _ := runWindows(t, evs, clink.TumblingWindows(time.Second), 0, 0, 1, 1)
	if want := (sumCount{Sum: 2, Count: 2}); got[winKey{"a", 0, 1000}] != want {
		t.Errorf("window [0,1000) = %+v, want %+v (late records excluded)", got[winKey{"a", 0, 1000}], want)
	}
	if len(late) != 2 || late[0].Ts != 500 || late[1].Ts != 200 {
		t.Errorf("late output = %+v, want the records at 500 and 200", late)
	}
	got, late, emitted := runWindows(t, evs, clink.TumblingWindows(time.Second), 0, 2*time.Second, 1, 1)
	if want := (sumCount{Sum: 12, Count: 3}); got[winKey{"a", 0, 1000}] != want {
		t.Errorf("with lateness, window [0,1000) ends at %+v, want %+v (updated by the late record)", got[winKey{"a", 0, 1000}], want)
	}
	if len(late) != 1 || late[0].Ts != 200 {
		t.Errorf("with lateness, late output = %+v, want the record at 200", late)
	}
	if emitted != 5 {
		t.Errorf("with lateness, %d results emitted, want 5 (4 windows + 1 re-fire)", emitted)
	}
}

// TestLateRecordJoinsOpenSession: a record behind the watermark whose own
// session would be late still joins an open session it reaches, as in
// Flink (lateness is judged after merging); one that reaches none is late.
func TestLateRecordJoinsOpenSession(t *testing.T) {
	evs := []event{
		{"k1", 10_000, 1},
		{"k2", 20_000, 1},  // watermark 19999: [3000,18000) alone would be late
		{"k1", 3_000, 10},  // reaches k1's open session [10000,25000)
		{"k2", 1_000, 100}, // reaches nothing: late
	}
	got, late, _ := runWindows(t, evs, clink.SessionWindows(15*time.Second), 0, 0, 1, 1)
	if want := (sumCount{Sum: 11, Count: 2}); got[winKey{"k1", 3_000, 25_000}] != want {
		t.Errorf("k1's session = %+v (all: %+v), want [3000,25000) %+v", got[winKey{"k1", 3_000, 25_000}], got, want)
	}
	if len(late) != 1 || late[0].Ts != 1_000 {
		t.Errorf("late output = %+v, want only the record at 1000", late)
	}
}

// TestSlidingGapsAreNotLate: with a size below the slide, a record in a
// gap between windows belongs to none and is skipped, not reported late.
func TestSlidingGapsAreNotLate(t *testing.T) {
	evs := []event{{"a", 100, 1}, {"a", 700, 1}, {"a", 1100, 1}}
	got, late, _ := runWindows(t, evs, clink.SlidingWindows(500*time.Millisecond, time.Second), 0, 0, 1, 1)
	if len(late) != 0 {
		t.Errorf("late output = %+v, want none", late)
	}
	if got[winKey{"a", 0, 500}] != (sumCount{Sum: 1, Count: 1}) || got[winKey{"a", 1000, 1500}] != (sumCount{Sum: 1, Count: 1}) {
		t.Errorf("windows = %+v", got)
	}
}
