package checkpoint

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestSuccessionCases(t *testing.T) {
	cases := []struct {
		old, new int
		parents  [][]int // per new subtask
	}{
		{old: 3, new: 3, parents: [][]int{{0}, {1}, {2}}},
		{old: 4, new: 2, parents: [][]int{{0, 1}, {2, 3}}},
		{old: 4, new: 1, parents: [][]int{{0, 1, 2, 3}}},
		{old: 2, new: 4, parents: [][]int{{0}, nil, {1}, nil}},
		{old: 1, new: 4, parents: [][]int{{0}, nil, nil, nil}},
		{old: 3, new: 2, parents: [][]int{{0, 1}, {2}}},
		{old: 2, new: 3, parents: [][]int{{0}, {1}, nil}},
	}
	for _, c := range cases {
		s := Succession{OldParallelism: c.old, NewParallelism: c.new, MaxParallelism: 128}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		for sub, want := range c.parents {
			if got := s.Parents(sub); !slices.Equal(got, want) {
				t.Errorf("%d -> %d: subtask %d succeeds %v, want %v", c.old, c.new, sub, got, want)
			}
		}
	}
}

// TestSuccessionProperties checks the ownership rule over random
// parallelisms: every old subtask has exactly one successor, a successor
// holds the key group its parent's range starts with, without a rescale a
// subtask succeeds itself, and at a scale-up the successor is the parent's
// first child.
func TestSuccessionProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxP := rapid.IntRange(1, 512).Draw(t, "max")
		oldP := rapid.IntRange(1, maxP).Draw(t, "old")
		newP := rapid.IntRange(1, maxP).Draw(t, "new")
		s := Succession{OldParallelism: oldP, NewParallelism: newP, MaxParallelism: maxP}
		owners := make([]int, oldP)
		for sub := 0; sub < newP; sub++ {
			for _, p := range s.Parents(sub) {
				owners[p]++
				if !s.Succeeds(sub, p) {
					t.Fatalf("Parents(%d) lists %d but Succeeds says no", sub, p)
				}
			}
		}
		for old, n := range owners {
			if n != 1 {
				t.Fatalf("old subtask %d has %d successors", old, n)
			}
			succ := s.Successor(old)
			first := rangeStart(old, maxP, oldP)
			lo, hi := rangeStart(succ, maxP, newP), rangeStart(succ+1, maxP, newP)
			if first < lo || first >= hi {
				t.Fatalf("successor %d of old %d does not hold key group %d", succ, old, first)
			}
			if oldP == newP && succ != old {
				t.Fatalf("no rescale, but %d succeeds %d", succ, old)
			}
			if newP > oldP {
				// The first child: the lowest new subtask whose range
				// overlaps the parent's.
				end := rangeStart(old+1, maxP, oldP)
				for c := 0; c < newP; c++ {
					st, en := rangeStart(c, maxP, newP), rangeStart(c+1, maxP, newP)
					if st < end && en > first {
						if c != succ {
							t.Fatalf("scale-up %d->%d: parent %d succeeded by %d, first child is %d", oldP, newP, old, succ, c)
						}
						break
					}
				}
			}
		}
	})
}
