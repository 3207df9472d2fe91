package state

import (
	"maps"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// checkSlabs checks the accounting of t's slabs: each slabbed key group's
// slots lie in its slab's carved part, a slab's live count is the slots
// of the key groups in it, and a slab other than the current one is at
// least half in use (else its arrays should have moved).
func checkSlabs[K comparable, V any](t *testing.T, tb *cowTable[K, V]) (slabs, slabbedGroups int) {
	t.Helper()
	live := map[*slotSlab[K, V]]int{}
	size := unsafe.Sizeof(kv[K, V]{})
	for g := range tb.shards {
		s := &tb.shards[g]
		if s.slab == nil {
			if len(s.slots)*int(size) >= slabMinBytes {
				t.Fatalf("key group %d: %d slots not carved from a slab", g, len(s.slots))
			}
			continue
		}
		slabbedGroups++
		sl := s.slab
		base := uintptr(unsafe.Pointer(unsafe.SliceData(sl.mem)))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(s.slots)))
		if p < base || p+uintptr(len(s.slots))*size > base+uintptr(sl.next)*size {
			t.Fatalf("key group %d: slots outside the carved part of its slab", g)
		}
		live[sl] += len(s.slots)
	}
	for sl, n := range live {
		if sl.live != n {
			t.Fatalf("a slab counts %d live slots, its key groups hold %d", sl.live, n)
		}
		if sl != tb.slab && sl.live*2 < len(sl.mem) {
			t.Fatalf("a slab of %d slots is only %d in use and was not emptied", len(sl.mem), sl.live)
		}
	}
	return len(live), slabbedGroups
}

// TestSlabbedTableCapturesAndMoves runs a value state large enough for
// slabs through growth, captures and writes to some key groups only (so
// that slabs empty and their remaining arrays move), and checks the
// accounting and that every capture and the live state hold what they
// should.
func TestSlabbedTableCapturesAndMoves(t *testing.T) {
	const maxP, keys = 4, 300_000
	b := NewMemoryBackend()
	if err := b.Open(KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
		t.Fatal(err)
	}
	v, err := NewValue(b, "v", CodecFor[int64](), CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	tb := v.t
	if !tb.slabbed || !tb.fast {
		t.Fatalf("an int64 value state is not slabbed (%v) or not on the fast path (%v)", tb.slabbed, tb.fast)
	}
	model := map[int64]int64{}
	r := rand.New(rand.NewPCG(3, 4))
	for k := range int64(keys) {
		v.Put(k, k)
		model[k] = k
	}
	slabs, groups := checkSlabs(t, tb)
	if groups != maxP {
		t.Fatalf("%d of %d key groups are slabbed after %d keys", groups, maxP, keys)
	}
	t.Logf("after loading: %d slabs", slabs)

	check := func(what string, c Captured, want map[int64]int64) {
		t.Helper()
		got, err := ReadValues[int64, int64](persistOf(t, c), "v", maxP)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s holds %d keys, want %d", what, len(got), len(want))
		}
		for k, x := range want {
			if got[k] != x {
				t.Fatalf("%s holds %d for key %d, want %d", what, got[k], k, x)
			}
		}
	}
	for round := range 6 {
		c, err := b.Capture()
		if err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(model)
		// Write (read-modify-write, put, delete, insert) keys of one or
		// two key groups only, so that the others stay in older slabs.
		only := r.IntN(maxP)
		for range 20_000 {
			k := r.Int64N(keys + keys/10)
			if kg := KeyGroupFor(HashUint64(uint64(k)), maxP); kg != only && kg != (only+round)%maxP {
				continue
			}
			switch r.IntN(4) {
			case 0:
				v.Delete(k)
				delete(model, k)
			case 1:
				v.Put(k, -k)
				model[k] = -k
			default:
				x, _ := v.Get(k)
				v.Put(k, x+1)
				model[k] = x + 1
			}
		}
		checkSlabs(t, tb)
		check("capture", c, want)
	}
	// Copy every key group once more, then check the live state.
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(model)
	for k := range int64(maxP * 4) {
		if x, ok := v.Get(k); ok {
			v.Put(k, x)
		}
	}
	check("last capture", c, want)
	slabs, _ = checkSlabs(t, tb)
	t.Logf("at the end: %d slabs", slabs)
	got := map[int64]int64{}
	v.Range(func(k, x int64) bool { got[k] = x; return true })
	if len(got) != len(model) {
		t.Fatalf("live state holds %d keys, want %d", len(got), len(model))
	}
	for k, x := range model {
		if got[k] != x {
			t.Fatalf("live state holds %d for key %d, want %d", got[k], k, x)
		}
	}
}

func persistOf(t *testing.T, c Captured) []KeyGroupData {
	t.Helper()
	groups, err := c.Persist()
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// TestHasPointers checks which slot types are carved from slabs.
func TestHasPointers(t *testing.T) {
	type flat struct {
		A int64
		B [2]uint32
	}
	type withString struct {
		A int64
		S string
	}
	for _, c := range []struct {
		got, want bool
		what      string
	}{
		{slabbed[int64, int64](), true, "int64, int64"},
		{slabbed[int32, float64](), true, "int32, float64"},
		{slabbed[flat, flat](), true, "flat struct"},
		{slabbed[string, int64](), false, "string key"},
		{slabbed[int64, []int64](), false, "slice value"},
		{slabbed[int64, map[int64]struct{}](), false, "map value"},
		{slabbed[int64, withString](), false, "struct with a string"},
		{slabbed[struct{}, struct{}](), false, "zero size"},
	} {
		if c.got != c.want {
			t.Errorf("%s: slabbed %v, want %v", c.what, c.got, c.want)
		}
	}
}
