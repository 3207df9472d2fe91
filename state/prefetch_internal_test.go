package state

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// BenchmarkAppendDelimitedScatteredRows appends the entries of a frozen
// table as a whole checkpoint does: 128K keys of 128 key groups, each
// value a join's rows, 160 bytes allocated apart from the table (q7's
// join holds about that many at a checkpoint). Between two appends a
// 64 MiB buffer is read, so that the rows are not in the caches, as
// they are not after an interval's other work.
func BenchmarkAppendDelimitedScatteredRows(b *testing.B) {
	const keys, maxP, rowBytes = 1 << 17, 128, 160
	be := NewMemoryBackend()
	if err := be.Open(KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
		b.Fatal(err)
	}
	type rows struct{ Left, Right []byte }
	v, err := NewValue(be, "v", CodecFor[int64](), CodecFor[rows]())
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range r.Perm(keys) {
		row := make([]byte, rowBytes)
		row[0], row[rowBytes-1] = byte(k), byte(k>>8)
		v.Put(int64(k), rows{Left: row})
	}
	fr := v.t.Freeze().(*frozenCow[int64, rows])
	benchColdAppends(b, keys, keys*rowBytes, func(dst []byte, kg int) ([]byte, int) {
		return fr.appendDelimited(dst, kg)
	})
}

// benchColdAppends times appending every key group of a table of 128
// (appendGroup), want entries of bytes bytes in all, with a 64 MiB
// buffer read between two rounds so that the values are not in the
// caches.
func benchColdAppends(b *testing.B, want, bytes int, appendGroup func(dst []byte, kg int) ([]byte, int)) {
	evict := make([]byte, 64<<20)
	var sink byte
	var dst []byte
	n := 0
	for b.Loop() {
		b.StopTimer()
		for i := 0; i < len(evict); i += 64 {
			sink += evict[i]
		}
		b.StartTimer()
		n = 0
		for kg := range 128 {
			var c int
			dst, c = appendGroup(dst[:0], kg)
			n += c
		}
	}
	if n != want {
		b.Fatalf("appended %d entries, want %d (%d)", n, want, sink)
	}
	b.SetBytes(int64(bytes))
}

// TestRefOffsets checks the pointers an entry's prefetch reads: those of
// strings, slices and pointers that the key or value is or holds as
// fields, not deeper, at most maxRefs.
func TestRefOffsets(t *testing.T) {
	type rows struct {
		Left  []byte
		N     int64
		Right string
		Inner struct{ S string }
	}
	type many struct{ A, B, C, D, E []byte }
	for _, c := range []struct {
		name string
		got  []uintptr
		want []uintptr
	}{
		{"int64 to rows", refOffsets[int64, rows](), []uintptr{8, 8 + 32}},
		{"string to int64", refOffsets[string, int64](), []uintptr{0}},
		{"int64 to pointer", refOffsets[int64, *rows](), []uintptr{8}},
		{"int64 to int64", refOffsets[int64, int64](), nil},
		{"int64 to five slices", refOffsets[int64, many](), []uintptr{8, 32, 56, 80}},
		{"rows alone", valueRefOffsets[rows](), []uintptr{0, 32}},
		{"a string alone", valueRefOffsets[string](), []uintptr{0}},
		{"an int64 alone", valueRefOffsets[int64](), nil},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: offsets %v, want %v", c.name, c.got, c.want)
		}
	}
	// Nil pointers are passed over; others, prefetched, change nothing.
	v := kv[int64, rows]{k: 1, v: rows{Left: []byte("x")}}
	prefetchRefs(unsafe.Pointer(&v), refOffsets[int64, rows]())
	if string(v.v.Left) != "x" || v.v.Right != "" {
		t.Fatal("a prefetch changed the entry")
	}
}

// BenchmarkAppendChangesScatteredRows appends a capture of changes as a
// delta does: 32K of 256K keys of 128 key groups changed, each to a
// 160-byte row allocated apart, in another order than the keys changed.
// The appends are timed as BenchmarkAppendDelimitedScatteredRows's.
func BenchmarkAppendChangesScatteredRows(b *testing.B) {
	const keys, changed, maxP, rowBytes = 1 << 18, 1 << 15, 128, 160
	be, err := NewMemoryBackendWith(MemoryOptions{Incremental: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := be.Open(KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
		b.Fatal(err)
	}
	type rows struct{ Left, Right []byte }
	v, err := NewValue(be, "v", CodecFor[int64](), CodecFor[rows]())
	if err != nil {
		b.Fatal(err)
	}
	for k := range int64(keys) {
		v.Put(k, rows{Left: []byte{byte(k)}})
	}
	v.t.captureChanges()
	r := rand.New(rand.NewPCG(3, 4))
	fresh := make([][]byte, changed)
	for _, i := range r.Perm(changed) {
		fresh[i] = make([]byte, rowBytes)
	}
	for i, k := range r.Perm(keys)[:changed] {
		v.Put(int64(k), rows{Left: fresh[i]})
	}
	d := v.t.captureChanges().(*changedCow[int64, rows])
	benchColdAppends(b, changed, changed*rowBytes, func(dst []byte, kg int) ([]byte, int) {
		dst, n, _ := d.appendChanges(dst, kg, nil)
		return dst, n
	})
}
