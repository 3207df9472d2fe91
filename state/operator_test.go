package state

import (
	"slices"
	"strings"
	"testing"
)

func TestOperatorListRedistribution(t *testing.T) {
	// Three old subtasks with 2, 0 and 3 elements.
	var old [][]byte
	for _, items := range [][]string{{"a", "b"}, nil, {"c", "d", "e"}} {
		s, err := NewOperatorList[string]("offsets", Split)
		if err != nil {
			t.Fatal(err)
		}
		s.Update(items)
		old = append(old, s.Snapshot())
	}
	for _, p := range []int{1, 2, 3, 4, 7} {
		var got []string
		for sub := 0; sub < p; sub++ {
			s, _ := NewOperatorList[string]("offsets", Split)
			if err := s.Restore(old, sub, p); err != nil {
				t.Fatal(err)
			}
			got = append(got, s.Get()...)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
			t.Errorf("split at parallelism %d: subtasks hold %v, want each element once", p, got)
		}
	}
	var uold [][]byte
	for _, items := range [][]int64{{1}, {2, 3}} {
		s, _ := NewOperatorList[int64]("seen", Union)
		s.Update(items)
		uold = append(uold, s.Snapshot())
	}
	for sub := 0; sub < 3; sub++ {
		s, _ := NewOperatorList[int64]("seen", Union)
		if err := s.Restore(uold, sub, 3); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Get(), []int64{1, 2, 3}) {
			t.Errorf("union: subtask %d holds %v, want every element", sub, s.Get())
		}
	}
	// A state restored with another mode, or from corrupt bytes, is refused.
	s, _ := NewOperatorList[int64]("seen", Split)
	if err := s.Restore(uold, 0, 1); err == nil || !strings.Contains(err.Error(), "union redistribution") {
		t.Errorf("Restore with another mode = %v, want a refusal naming the modes", err)
	}
	if err := s.Restore([][]byte{{byte(Split), 2, 1}}, 0, 1); err == nil {
		t.Error("Restore of a truncated element was accepted")
	}
	if _, err := NewOperatorList[func()]("f", Split); err == nil {
		t.Error("an operator state of funcs was accepted")
	}
}
