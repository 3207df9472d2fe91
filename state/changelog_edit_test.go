package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestApplyEditsRefusesBadEdits checks that edits out of order, out of
// the earlier value or cut short fail with an error.
func TestApplyEditsRefusesBadEdits(t *testing.T) {
	old := []byte("abcdef")
	good := AppendEdit(AppendEdit(nil, 1, 2, []byte("XY")), 5, 0, []byte("Z"))
	got, err := applyEdits(nil, old, good)
	if err != nil || string(got) != "aXYdeZf" {
		t.Fatalf("applyEdits = %q, %v; want \"aXYdeZf\"", got, err)
	}
	bad := map[string][]byte{
		"out of order":      AppendEdit(AppendEdit(nil, 4, 1, nil), 2, 0, []byte("q")),
		"overlapping":       AppendEdit(AppendEdit(nil, 1, 3, nil), 2, 0, []byte("q")),
		"past the end":      AppendEdit(nil, 7, 0, []byte("q")),
		"cut past the end":  AppendEdit(nil, 4, 3, nil),
		"bytes cut short":   AppendEdit(nil, 1, 0, []byte("qqq"))[:5],
		"count cut short":   {1, 0},
		"offset cut short":  {0x80},
		"huge cut":          AppendEdit(nil, 1, 1<<62, nil),
		"huge insert count": {1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	}
	for name, e := range bad {
		if _, err := applyEdits(nil, old, e); err == nil {
			t.Errorf("%s: no error", name)
		} else if name == "bytes cut short" && !errors.Is(err, ErrShortBuffer) {
			t.Errorf("%s: %v, want ErrShortBuffer", name, err)
		}
	}
}

// TestEditValueMatchesApplyEdits checks editValue, in place and by
// copying, against applyEdits on random edits of random values, with the
// edited value edited again, as a restore edits a value once per delta.
func TestEditValueMatchesApplyEdits(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	inPlace := 0
	for trial := range 2000 {
		want := []byte(fmt.Sprint("v", trial))
		cur, owned := slices.Clone(want), false
		for step := range 12 {
			var edits []byte
			pos := 0
			for pos <= len(want) && rnd.IntN(3) != 0 {
				off := pos + rnd.IntN(len(want)-pos+1)
				cut := rnd.IntN(len(want) - off + 1)
				if rnd.IntN(2) == 0 {
					cut = 0 // mostly appends, as a join's state
				}
				ins := bytes.Repeat([]byte{byte('a' + step)}, rnd.IntN(20))
				edits = AppendEdit(edits, off, cut, ins)
				pos = off + cut + 1
			}
			next, err := applyEdits(nil, want, edits)
			if err != nil {
				t.Fatal(err)
			}
			before := unsafe.SliceData(cur)
			got, err := editValue(cur, owned, edits)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, next) {
				t.Fatalf("trial %d, step %d: editValue(%q, owned %v) = %q, applyEdits = %q", trial, step, want, owned, got, next)
			}
			if unsafe.SliceData(got) == before {
				if !owned {
					t.Fatalf("trial %d, step %d: edited a buffer it does not own", trial, step)
				}
				inPlace++
			}
			want, cur, owned = next, got, true
		}
	}
	if inPlace == 0 {
		t.Fatal("no value was edited in place")
	}
	if _, err := editValue([]byte("abc"), true, AppendEdit(nil, 4, 0, nil)); err == nil {
		t.Fatal("an edit past the end: no error")
	}
}
