package statetest

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/clinkstream/clink/state"
)

const errMaxP = 8

// tryRestore opens a fresh backend for r, restores snaps and registers the
// named tables, and returns the first error (a *panicError for a panic). A
// backend may report bad data at Restore or when the table it belongs to
// is registered. The caller closes the backend with the function returned.
func (s *suite) tryRestore(t *testing.T, r state.KeyGroupRange, maxP int, snaps [][]state.KeyGroupData, names ...string) (*tables, func(), error) {
	t.Helper()
	b, closeB := s.openBriefly(t, r, maxP)
	tb := newTables(b, r, maxP)
	err := callNoPanic("restoring", func() error {
		if err := b.Restore(snaps); err != nil {
			return err
		}
		for _, name := range names {
			if err := tb.tryRegister(name); err != nil {
				return err
			}
		}
		return nil
	})
	return tb, closeB, err
}

func (s *suite) testErrors(t *testing.T) {
	t.Run("DuplicateName", func(t *testing.T) {
		b := s.open(t, fullRange(errMaxP), errMaxP)
		v, err := state.NewValue(b, "dup", state.CodecFor[string](), state.CodecFor[int64]())
		if err != nil {
			t.Fatal(err)
		}
		registers := map[string]func() error{
			"NewValue": func() error {
				_, err := state.NewValue(b, "dup", state.CodecFor[string](), state.CodecFor[int64]())
				return err
			},
			"NewList": func() error {
				_, err := state.NewList(b, "dup", state.CodecFor[string](), state.CodecFor[int64]())
				return err
			},
			"NewMap": func() error {
				_, err := state.NewMap[string, int64, int64](b, "dup", state.CodecFor[string]())
				return err
			},
			"NewReducing": func() error {
				_, err := state.NewReducing(b, "dup", state.CodecFor[string](), state.CodecFor[int64](), sum)
				return err
			},
			"NewAggregating": func() error {
				_, err := state.NewAggregating[string, int64, avgAcc, string](b, "dup", state.CodecFor[string](), average{})
				return err
			},
		}
		for _, name := range slices.Sorted(maps.Keys(registers)) {
			if err := callNoPanic(name, registers[name]); !refused(err) {
				t.Errorf("%s of a name already registered: err = %v, want an error", name, err)
			}
		}
		v.Put("k", 1)
		if got, ok := v.Get("k"); !ok || got != 1 {
			t.Errorf("the first state after refused duplicates: %d, %v", got, ok)
		}
	})

	t.Run("RegisterBeforeOpen", func(t *testing.T) {
		b := s.newBackend()
		registers := []func() error{
			func() error {
				_, err := state.NewValue(b, "early", state.CodecFor[string](), state.CodecFor[int64]())
				return err
			},
			func() error {
				_, err := state.NewList(b, "early", state.CodecFor[string](), state.CodecFor[int64]())
				return err
			},
			func() error {
				_, err := state.NewMap[string, int64, int64](b, "early", state.CodecFor[string]())
				return err
			},
			func() error {
				_, err := state.NewReducing(b, "early", state.CodecFor[string](), state.CodecFor[int64](), sum)
				return err
			},
			func() error {
				_, err := state.NewAggregating[string, int64, avgAcc, string](b, "early", state.CodecFor[string](), average{})
				return err
			},
		}
		for i, register := range registers {
			if err := callNoPanic("registering before Open", register); !refused(err) {
				t.Errorf("registration %d before Open: err = %v, want an error", i, err)
			}
		}
		// A refused registration does not take the name.
		if err := b.Open(fullRange(errMaxP), errMaxP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		v, err := state.NewValue(b, "early", state.CodecFor[string](), state.CodecFor[int64]())
		if err != nil {
			t.Fatalf("registering after Open a name refused before: %v", err)
		}
		v.Put("k", 1)
		if got, ok := v.Get("k"); !ok || got != 1 {
			t.Errorf("Get = %d, %v", got, ok)
		}
	})

	t.Run("OpenBadRange", func(t *testing.T) {
		for _, c := range []struct {
			r    state.KeyGroupRange
			maxP int
		}{
			{state.KeyGroupRange{Start: 0, End: 129}, 128},
			{state.KeyGroupRange{Start: -1, End: 4}, 128},
			{state.KeyGroupRange{Start: 5, End: 3}, 128},
			{state.KeyGroupRange{Start: 0, End: 0}, 0},
			{state.KeyGroupRange{Start: 0, End: 1}, 0},
			{state.KeyGroupRange{Start: 0, End: 1}, -1},
		} {
			b := s.newBackend()
			err := callNoPanic("Open", func() error { return b.Open(c.r, c.maxP) })
			if !refused(err) {
				t.Errorf("Open(%v, %d): err = %v, want an error", c.r, c.maxP, err)
			}
			if err == nil {
				b.Close()
			}
		}
	})

	t.Run("Truncated", func(t *testing.T) {
		// One table, so that every strict prefix of a key group's data
		// cuts it in the middle of that table's data.
		b := s.open(t, fullRange(errMaxP), errMaxP)
		tb := newTables(b, fullRange(errMaxP), errMaxP)
		tb.register(t, tValue)
		for i := range 40 {
			tb.value.Put(valueKey(i), int64(i)<<40|int64(i))
		}
		groups := persist(t, capture(t, b), tb.rng)
		if len(groups) == 0 {
			t.Fatal("nothing persisted")
		}
		for _, g := range groups[:min(len(groups), 3)] {
			for cut := 1; cut < len(g.Data); cut++ {
				bad := g
				bad.Data = slices.Clone(g.Data[:cut])
				_, closeB, err := s.tryRestore(t, tb.rng, errMaxP, [][]state.KeyGroupData{{bad}}, tValue)
				closeB()
				if !refused(err) {
					t.Fatalf("key group %d cut to %d of %d bytes: err = %v, want an error", g.KeyGroup, cut, len(g.Data), err)
				}
			}
		}
	})

	t.Run("Corrupt", s.testCorrupt)

	t.Run("WrongKeyGroup", func(t *testing.T) {
		w := s.fill(t, fullRange(errMaxP), errMaxP, 60, 600, 12)
		groups := persist(t, capture(t, w.tb.b), w.tb.rng)
		for _, g := range groups {
			moved := g
			moved.KeyGroup = (g.KeyGroup + 1) % errMaxP
			_, closeB, err := s.tryRestore(t, w.tb.rng, errMaxP, [][]state.KeyGroupData{{moved}}, allTables...)
			closeB()
			if !refused(err) {
				t.Errorf("data of key group %d given as key group %d: err = %v, want an error", g.KeyGroup, moved.KeyGroup, err)
			}
		}
		// Key groups outside the range are not the backend's: they are
		// left out, whatever they hold.
		rng := state.KeyGroupRange{Start: 0, End: 1}
		var outside []state.KeyGroupData
		for _, g := range groups {
			if !rng.Contains(g.KeyGroup) {
				outside = append(outside, g)
			}
		}
		outside = append(outside, state.KeyGroupData{KeyGroup: 5, Entries: 3, Data: []byte("garbage")})
		tb, closeB, err := s.tryRestore(t, rng, errMaxP, [][]state.KeyGroupData{outside}, allTables...)
		t.Cleanup(closeB)
		if err != nil {
			t.Fatalf("restoring key groups outside the range: %v", err)
		}
		expect(t, "backend given only key groups outside its range", tb.read(60), contents{})
	})
}

// testCorrupt restores damaged key groups: each must be refused with an
// error or restored, never panic; and what restored must capture and
// restore again as it was.
func (s *suite) testCorrupt(t *testing.T) {
	const n = 60
	b := s.open(t, fullRange(errMaxP), errMaxP)
	tb := newTables(b, fullRange(errMaxP), errMaxP)
	tb.register(t, allTables...)
	// At most one entry of a table per key group, so that what Persist
	// returns does not depend on the order a backend visits entries in,
	// and the damaged variants are the same in every run.
	w := newWriter(tb, newModel(), n, 13)
	used := map[entry]bool{}
	for _, table := range allTables {
		for i := range n {
			kg := keyGroupOf(table, i, errMaxP)
			if used[entry{table, kg}] {
				continue
			}
			used[entry{table, kg}] = true
			v := int64(i) * 1_000_003
			switch table {
			case tValue:
				w.putValue(i, v)
			case tList:
				w.addList(i, fmt.Sprint("a", i))
				w.addList(i, fmt.Sprint("b", i))
			case tMap:
				w.putMap(i, "x", v)
				w.putMap(i, "y", -v)
			case tReduce:
				w.addReduce(i, v)
			case tAgg:
				w.addAgg(i, v)
				w.addAgg(i, 1)
			}
		}
	}
	groups := persist(t, capture(t, b), tb.rng)
	slices.SortFunc(groups, func(a, b state.KeyGroupData) int { return a.KeyGroup - b.KeyGroup })
	if len(groups) < 3 {
		t.Fatalf("persisted %d key groups, want at least 3", len(groups))
	}

	type variant struct {
		what string
		data []byte
	}
	// The first key group, damaged at every byte in four ways (two with
	// -short: every variant opens a backend).
	g := groups[0]
	var variants []variant
	for at := range g.Data {
		flip := slices.Clone(g.Data)
		flip[at] ^= 0x01
		variants = append(variants,
			variant{fmt.Sprintf("byte %d xor 1", at), flip},
			variant{fmt.Sprintf("byte %d deleted", at), slices.Delete(slices.Clone(g.Data), at, at+1)},
		)
		if testing.Short() {
			continue
		}
		ff := slices.Clone(g.Data)
		ff[at] = 0xff
		variants = append(variants,
			variant{fmt.Sprintf("byte %d set to 0xff", at), ff},
			variant{fmt.Sprintf("0x00 inserted at %d", at), slices.Insert(slices.Clone(g.Data), at, 0)},
		)
	}
	for _, v := range variants {
		bad := g
		bad.Data = v.data
		s.checkDamaged(t, fmt.Sprintf("key group %d, %s", g.KeyGroup, v.what), bad, tb.rng, n)
	}
}

// checkDamaged restores the damaged key group bad: it must be refused with
// an error, or restore into state that captures and restores again as it
// was.
func (s *suite) checkDamaged(t *testing.T, what string, bad state.KeyGroupData, rng state.KeyGroupRange, n int) {
	t.Helper()
	restored, closeRestored, err := s.tryRestore(t, rng, errMaxP, [][]state.KeyGroupData{{bad}}, allTables...)
	defer closeRestored()
	if err != nil {
		if !refused(err) {
			t.Fatalf("%s: %v", what, err)
		}
		return
	}
	again := persist(t, capture(t, restored.b), rng)
	r2, closeR2, err := s.tryRestore(t, rng, errMaxP, [][]state.KeyGroupData{again}, allTables...)
	defer closeR2()
	if err != nil {
		t.Fatalf("%s: restored, but its capture did not: %v", what, err)
	}
	expect(t, what+": restored, then captured and restored again", r2.read(n), restored.read(n))
}
