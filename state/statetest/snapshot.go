package statetest

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/clinkstream/clink/state"
)

const (
	snapMaxP    = 16
	snapEntries = 120
)

// fill returns a fixture with every table registered on a backend open
// for r, filled with random writes.
func (s *suite) fill(t *testing.T, r state.KeyGroupRange, maxP, n, writes int, seed uint64, opts ...state.StateOption) *writer {
	t.Helper()
	tb := newTables(s.open(t, r, maxP), r, maxP, opts...)
	tb.register(t, allTables...)
	w := newWriter(tb, newModel(), n, seed)
	w.random(writes)
	return w
}

// check fails the test if the live tables differ from the model.
func (w *writer) check(t *testing.T, what string) {
	t.Helper()
	expect(t, what, w.tb.read(w.n), w.m.contents(in(w.tb.rng, w.tb.maxP)))
}

// checkRestored restores groups into a fresh backend of the writer's range
// and compares it with want.
func (s *suite) checkRestored(t *testing.T, w *writer, what string, groups []state.KeyGroupData, want *model) {
	t.Helper()
	r := s.restore(t, w.tb.rng, w.tb.maxP, [][]state.KeyGroupData{groups}, w.tb.opts, allTables...)
	expect(t, what, r.read(w.n), want.contents(in(w.tb.rng, w.tb.maxP)))
}

func (s *suite) testSnapshotIsolation(t *testing.T) {
	for _, c := range []struct {
		name string
		rng  state.KeyGroupRange
	}{
		{"FullRange", fullRange(snapMaxP)},
		{"PartialRange", state.RangeForSubtask(1, snapMaxP, 3)},
	} {
		t.Run("WritesAfterCapture/"+c.name, func(t *testing.T) {
			w := s.fill(t, c.rng, snapMaxP, snapEntries, 2000, 1)
			before := w.m.clone()
			captured := capture(t, w.tb.b)
			w.touchAll()
			w.random(500)
			w.check(t, "live state after the writes that followed the capture")
			groups := persist(t, captured, c.rng)
			w.check(t, "live state after Persist")
			s.checkRestored(t, w, "restored capture", groups, before)
		})
	}
	t.Run("ConcurrentPersist", s.testConcurrentPersist)
	t.Run("CapturesOutstanding", s.testCapturesOutstanding)
	t.Run("Empty", func(t *testing.T) {
		b := s.open(t, fullRange(snapMaxP), snapMaxP)
		// A capture before any table is registered, one of empty tables
		// and one of tables whose entries were all removed.
		c0 := capture(t, b)
		tb := newTables(b, fullRange(snapMaxP), snapMaxP)
		tb.register(t, allTables...)
		c1 := capture(t, b)
		w := newWriter(tb, newModel(), 40, 2)
		w.random(300)
		c2 := capture(t, b)
		for _, table := range allTables {
			for i := range 40 {
				switch table {
				case tValue:
					w.deleteValue(i)
				case tList:
					if i%2 == 0 {
						w.clearList(i)
					} else {
						w.updateList(i, nil)
					}
				case tMap:
					if i%2 == 0 {
						w.clearMap(i)
						continue
					}
					// Removing every user key leaves no entry either.
					for _, uk := range slices.Sorted(maps.Keys(w.m.mp[i])) {
						w.removeMap(i, uk)
					}
				case tReduce:
					w.clearReduce(i)
				case tAgg:
					w.clearAgg(i)
				}
			}
		}
		c3 := capture(t, b)
		for i, c := range []state.Captured{c0, c1, c3} {
			groups := persist(t, c, tb.rng)
			entries := 0
			for _, g := range groups {
				entries += g.Entries
			}
			if entries != 0 {
				t.Errorf("capture %d of tables without entries persisted %d entries", i, entries)
			}
			r := s.restore(t, tb.rng, tb.maxP, [][]state.KeyGroupData{groups}, nil, allTables...)
			expect(t, fmt.Sprintf("capture %d", i), r.read(40), contents{})
		}
		if len(persist(t, c2, tb.rng)) == 0 {
			t.Errorf("a capture of 300 writes persisted no key group")
		}
	})
}

// testConcurrentPersist persists each capture on its own goroutine while
// the test goroutine goes on writing and takes the next capture, as the
// snapshot worker does. Run with -race, it also shows that Persist shares
// no unsynchronised memory with the writes.
func (s *suite) testConcurrentPersist(t *testing.T) {
	const rounds = 8
	w := s.fill(t, fullRange(snapMaxP), snapMaxP, snapEntries, 1000, 3)
	type result struct {
		groups []state.KeyGroupData
		err    error
	}
	results := make([]result, rounds)
	models := make([]*model, rounds)
	var wg sync.WaitGroup
	for round := range rounds {
		models[round] = w.m.clone()
		c := capture(t, w.tb.b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[round].groups, results[round].err = checkPersist(c, w.tb.rng)
		}()
		w.touchAll()
		w.random(300)
	}
	wg.Wait()
	w.check(t, "live state")
	for round, r := range results {
		if r.err != nil {
			t.Fatalf("round %d: %v", round, r.err)
		}
		s.checkRestored(t, w, fmt.Sprintf("capture of round %d", round), r.groups, models[round])
	}
}

// testCapturesOutstanding keeps three captures outstanding at once and
// persists them out of order, two of them concurrently with writes.
func (s *suite) testCapturesOutstanding(t *testing.T) {
	w := s.fill(t, fullRange(snapMaxP), snapMaxP, snapEntries, 1500, 4)
	m1 := w.m.clone()
	c1 := capture(t, w.tb.b)
	w.touchAll()
	m2 := w.m.clone()
	c2 := capture(t, w.tb.b)
	w.random(400)
	w.touchAll()

	var wg sync.WaitGroup
	var g1, g2 []state.KeyGroupData
	var err1, err2 error
	wg.Add(2)
	go func() {
		defer wg.Done()
		g2, err2 = checkPersist(c2, w.tb.rng)
	}()
	go func() {
		defer wg.Done()
		g1, err1 = checkPersist(c1, w.tb.rng)
	}()
	w.random(400)
	m3 := w.m.clone()
	c3 := capture(t, w.tb.b)
	w.touchAll()
	wg.Wait()
	if err1 != nil || err2 != nil {
		t.Fatalf("persisting: %v, %v", err1, err2)
	}
	g3 := persist(t, c3, w.tb.rng)
	w.check(t, "live state")
	s.checkRestored(t, w, "first capture", g1, m1)
	s.checkRestored(t, w, "second capture", g2, m2)
	s.checkRestored(t, w, "third capture", g3, m3)
}

// testFloatKeys checks that a capture of float keys restores: +0 and -0
// are equal for Go's ==, but their encodings (and so their key groups)
// differ. Whatever a backend makes of them, what it persists must restore
// and read back as it was.
func (s *suite) testFloatKeys(t *testing.T) {
	const maxP = 128
	negZero := math.Copysign(0, -1)
	keys := []float64{0, negZero, 1.5, -1.5, math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64}
	b := s.open(t, fullRange(maxP), maxP)
	v, err := state.NewValue(b, "f", state.CodecFor[float64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	// Reads and writes alternate between +0 and -0, as an operator that
	// reads a key and then writes it does.
	for i, k := range keys {
		v.Get(k)
		v.Put(k, int64(i))
	}
	v.Get(negZero)
	v.Put(0, 10)
	v.Get(0)
	v.Put(negZero, 11)
	read := func(v *state.ValueState[float64, int64]) string {
		out := ""
		for _, k := range keys {
			x, ok := v.Get(k)
			out += fmt.Sprintf("%v(%x)=%d,%v ", k, math.Float64bits(k), x, ok)
		}
		return out
	}
	want := read(v)
	groups := persist(t, capture(t, b), fullRange(maxP))
	r := s.open(t, fullRange(maxP), maxP)
	err = r.Restore([][]state.KeyGroupData{groups})
	var rv *state.ValueState[float64, int64]
	if err == nil {
		rv, err = state.NewValue(r, "f", state.CodecFor[float64](), state.CodecFor[int64]())
	}
	if err != nil {
		t.Fatalf("restoring a backend's own capture of float keys: %v", err)
	}
	if got := read(rv); got != want {
		t.Errorf("restored float keys:\n got %s\nwant %s", got, want)
	}
}
