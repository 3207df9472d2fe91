package state

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestBytesDiff diffs values of two byte slices that grew by appending,
// lost their first bytes, both, or changed otherwise: applied to the old
// value's encoding, the edits give the new one's; a value changed
// otherwise, or whose first slice is new, is written whole (no diff).
func TestBytesDiff(t *testing.T) {
	type two struct{ A, B []byte }
	codec := CodecFor[two]()
	diff := diffFor[two](codec)
	if diff == nil {
		t.Fatal("no diff for a struct of byte slices")
	}
	rng := rand.New(rand.NewPCG(3, 9))
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(4)) // few letters: probes match in many places
		}
		return b
	}
	change := func(o []byte) ([]byte, bool) {
		switch rng.IntN(6) {
		case 0: // as it was
			return o, true
		case 1: // appended to, in a copy
			return append(bytes.Clone(o), bytesOf(1+rng.IntN(20))...), true
		case 2: // its first bytes cut
			return bytes.Clone(o[rng.IntN(len(o)+1):]), true
		case 3: // cut (some of it is left), then appended to
			return append(bytes.Clone(o[rng.IntN(max(len(o), 1)):]), bytesOf(1+rng.IntN(20))...), true
		case 4: // nil
			return nil, true
		default: // another value (a prefix of o's suffixes only by chance)
			n := bytesOf(1 + rng.IntN(30))
			n[0] = 9 // a byte o never holds
			return n, len(o) == 0
		}
	}
	for i := range 20000 {
		o := two{A: bytesOf(rng.IntN(40)), B: bytesOf(rng.IntN(40))}
		if rng.IntN(8) == 0 {
			o.A = nil
		}
		na, okA := change(o.A)
		nb, okB := change(o.B)
		n := two{A: na, B: nb}
		edits, ok := diff(nil, o, n)
		if want := okA && okB; ok != want {
			t.Fatalf("case %d: diff of %v to %v: ok %v, want %v", i, o, n, ok, want)
		}
		if !ok {
			continue
		}
		got, err := applyEdits(nil, codec.Append(nil, o), edits)
		if err != nil {
			t.Fatalf("case %d: applying the diff of %v to %v: %v", i, o, n, err)
		}
		if want := codec.Append(nil, n); !bytes.Equal(got, want) {
			t.Fatalf("case %d: the diff of %v to %v gives %x, want %x", i, o, n, got, want)
		}
	}
}
