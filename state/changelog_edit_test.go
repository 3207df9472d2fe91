package state

import (
	"errors"
	"testing"
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
