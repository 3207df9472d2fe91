package statetest

import (
	"fmt"
	"testing"

	"github.com/clinkstream/clink/state"
)

func (s *suite) testRoundTrip(t *testing.T) {
	const maxP, n = 32, 200
	for _, c := range []struct {
		name string
		rng  state.KeyGroupRange
	}{
		{"FullRange", fullRange(maxP)},
		{"PartialRange", state.RangeForSubtask(2, maxP, 3)},
		{"OneKeyGroup", state.KeyGroupRange{Start: 7, End: 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := s.fill(t, c.rng, maxP, n, 3000, 5)
			want := w.m.contents(in(c.rng, maxP))
			if len(want) == 0 {
				t.Fatal("the fixture wrote nothing in the range")
			}
			r := s.roundTrip(t, w.tb)
			expect(t, "restored", r.read(n), want)
			// A restored backend captures what it restored.
			r2 := s.roundTrip(t, r)
			expect(t, "restored twice", r2.read(n), want)
			// And takes writes after the restore.
			w2 := newWriter(r2, w.m, n, 6)
			w2.random(500)
			w2.touchAll()
			w2.check(t, "restored state after writes")
			expect(t, "restored after writes, restored again", s.roundTrip(t, r2).read(n), w.m.contents(in(c.rng, maxP)))
		})
	}

	t.Run("RegisteredAfterRestore", func(t *testing.T) {
		w := s.fill(t, fullRange(maxP), maxP, n, 3000, 7)
		groups := persist(t, capture(t, w.tb.b), w.tb.rng)
		b := s.open(t, w.tb.rng, maxP)
		if err := b.Restore([][]state.KeyGroupData{groups}); err != nil {
			t.Fatal(err)
		}
		tb := newTables(b, w.tb.rng, maxP)
		tb.register(t, tValue, tList)
		expect(t, "value and list registered after the restore", tb.read(n), w.m.contents(nil, tValue, tList))
		w2 := newWriter(tb, w.m, n, 8)
		w2.random(500)
		expect(t, "value and list after writes", tb.read(n), w.m.contents(nil, tValue, tList))
		// The other tables are registered only after writes and a
		// capture of the first two.
		capture(t, b)
		tb.register(t, tMap, tReduce, tAgg)
		w2.check(t, "every table")
		w2.random(500)
		w2.touchAll()
		w2.check(t, "every table after writes")
	})

	t.Run("UnregisteredTableInCapture", func(t *testing.T) {
		w := s.fill(t, fullRange(maxP), maxP, n, 3000, 9)
		groups := persist(t, capture(t, w.tb.b), w.tb.rng)

		// Restore, register only the value state, write to it, capture:
		// the capture must carry the other tables' restored data too.
		b := s.open(t, w.tb.rng, maxP)
		if err := b.Restore([][]state.KeyGroupData{groups}); err != nil {
			t.Fatal(err)
		}
		tb := newTables(b, w.tb.rng, maxP)
		tb.register(t, tValue)
		w2 := newWriter(tb, w.m, n, 10)
		w2.random(300)
		atCapture := w.m.clone()
		c := capture(t, b)
		// The capture holds the unregistered tables; registering them
		// afterwards, while the capture is persisted, still loads them
		// here, and writes to them do not reach the capture.
		var groups2 []state.KeyGroupData
		var err2 error
		done := make(chan struct{})
		go func() {
			defer close(done)
			groups2, err2 = checkPersist(c, tb.rng)
		}()
		tb.register(t, tList, tMap, tReduce, tAgg)
		w2.touchAll()
		<-done
		if err2 != nil {
			t.Fatal(err2)
		}
		w2.check(t, "tables registered after the capture, after writes")

		// Restore elsewhere, and capture again without registering
		// anything but the list state.
		b3 := s.open(t, w.tb.rng, maxP)
		if err := b3.Restore([][]state.KeyGroupData{groups2}); err != nil {
			t.Fatal(err)
		}
		tb3 := newTables(b3, w.tb.rng, maxP)
		tb3.register(t, tList)
		groups3 := persist(t, capture(t, b3), tb3.rng)

		r := s.restore(t, w.tb.rng, maxP, [][]state.KeyGroupData{groups2}, nil, allTables...)
		expect(t, "capture taken while tables were unregistered", r.read(n), atCapture.contents(nil))
		r3 := s.restore(t, w.tb.rng, maxP, [][]state.KeyGroupData{groups3}, nil, allTables...)
		expect(t, "capture of a capture taken while tables were unregistered", r3.read(n), atCapture.contents(nil))
	})
}

// scaleTo restores snaps into the p subtasks of a job with max parallelism
// maxP, each given every snapshot, and checks that each subtask holds
// exactly the entries of want in its range: so that no entry is in two
// subtasks, none is lost and each is where its key group says.
func (s *suite) scaleTo(t *testing.T, snaps [][]state.KeyGroupData, maxP, p, n int, want *model) []*tables {
	t.Helper()
	out := make([]*tables, p)
	union := contents{}
	for sub := range p {
		rng := state.RangeForSubtask(sub, maxP, p)
		tb := s.restore(t, rng, maxP, snaps, nil, allTables...)
		got := tb.read(n)
		expect(t, fmt.Sprintf("subtask %d of %d, range %v", sub, p, rng), got, want.contents(in(rng, maxP)))
		for e, v := range got {
			if _, dup := union[e]; dup {
				t.Fatalf("%s[%s] is in two subtasks", e.Table, keyName(e))
			}
			union[e] = v
		}
		// What the subtask persists is exactly its part, nothing of the
		// key groups it was given but does not own.
		groups := persist(t, capture(t, tb.b), rng)
		all := s.restore(t, fullRange(maxP), maxP, [][]state.KeyGroupData{groups}, nil, allTables...)
		expect(t, fmt.Sprintf("capture of subtask %d of %d, range %v, restored at parallelism 1", sub, p, rng), all.read(n), want.contents(in(rng, maxP)))
		out[sub] = tb
	}
	expect(t, fmt.Sprintf("union of %d subtasks", p), union, want.contents(nil))
	return out
}

func (s *suite) testRescale(t *testing.T) {
	const maxP, n = 64, 400
	w := s.fill(t, fullRange(maxP), maxP, n, 5000, 11)
	whole := [][]state.KeyGroupData{persist(t, capture(t, w.tb.b), w.tb.rng)}
	for _, p := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("1to%d", p), func(t *testing.T) {
			s.scaleTo(t, whole, maxP, p, n, w.m)
		})
	}

	// From 3 back to 1 and on to 2, each from three snapshots, after
	// writes in each of the three subtasks.
	t.Run("3to1", func(t *testing.T) {
		m := w.m.clone()
		subs := s.scaleTo(t, whole, maxP, 3, n, m)
		var snaps [][]state.KeyGroupData
		for i, tb := range subs {
			ws := newWriter(tb, m, n, uint64(20+i))
			ws.random(1000)
			ws.touchAll()
			snaps = append(snaps, persist(t, capture(t, tb.b), tb.rng))
		}
		s.scaleTo(t, snaps, maxP, 1, n, m)
		s.scaleTo(t, snaps, maxP, 2, n, m)
		// The order of the snapshots does not matter.
		s.scaleTo(t, [][]state.KeyGroupData{snaps[2], snaps[0], snaps[1]}, maxP, 1, n, m)
	})
}
