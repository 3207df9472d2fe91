package state

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestBytesDiff diffs values of two byte slices that grew by appending,
// lost their first bytes, both, or changed otherwise: applied to the old
// value's encoding, the edits give the new one's; a value whose slices
// keep fewer than minKept bytes of the earlier ones (but for none), or
// none of their first ones, is written whole (no diff).
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
	// diffable is whether n is o appended to, or cut leaving minKept
	// bytes or none, then maybe appended to.
	diffable := func(o, n []byte) bool {
		if len(n) == 0 || bytes.HasPrefix(n, o) {
			return true
		}
		for k := 1; len(o)-k >= minKept; k++ {
			if bytes.HasPrefix(n, o[k:]) {
				return true
			}
		}
		return false
	}
	change := func(o []byte) []byte {
		switch rng.IntN(6) {
		case 0: // as it was
			return o
		case 1: // appended to, in a copy
			return append(bytes.Clone(o), bytesOf(1+rng.IntN(20))...)
		case 2: // its first bytes cut
			return bytes.Clone(o[rng.IntN(len(o)+1):])
		case 3: // cut, then appended to
			return append(bytes.Clone(o[rng.IntN(len(o)+1):]), bytesOf(1+rng.IntN(20))...)
		case 4: // nil
			return nil
		default: // another value
			return bytesOf(1 + rng.IntN(30))
		}
	}
	for i := range 20000 {
		o := two{A: bytesOf(rng.IntN(40)), B: bytesOf(rng.IntN(40))}
		if rng.IntN(8) == 0 {
			o.A = nil
		}
		n := two{A: change(o.A), B: change(o.B)}
		edits, ok := diff(nil, o, n)
		if want := diffable(o.A, n.A) && diffable(o.B, n.B); ok != want {
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
