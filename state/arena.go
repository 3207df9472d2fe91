package state

import "unsafe"

// byteArena hands out the bytes of the strings and byte slices that one
// run of decoded values holds (a restore's, see RunDecoder) from chunks
// it allocates and maps in one call each (populate), instead of one
// allocation, and a page fault per page, for each value: a restore fills
// hundreds of megabytes of fresh memory, and on some virtual machines
// the first touch of a page costs more than the copy into it.
//
// Each value gets its own bytes, capped at their length, so that writing
// to one, or appending to it, leaves the others alone; only the garbage
// collector sees them share a chunk, which lives while any of them does.
// Chunks grow with the bytes handed out (minArenaChunk to maxArenaChunk),
// so that a short run (a key group of a sparse table: a job may have
// thousands) leaves little unused; values longer than maxArenaValue get
// an allocation of their own, mapped the same way.
type byteArena struct {
	free []byte
	// used is how many bytes the arena handed out.
	used int
}

const (
	minArenaChunk = 512
	maxArenaChunk = 256 << 10
	maxArenaValue = 16 << 10
)

// bytes returns a copy of src. A nil arena allocates it alone.
func (a *byteArena) bytes(src []byte) []byte {
	n := len(src)
	var b []byte
	switch {
	case a == nil || n == 0:
		// Not nil when empty: an empty slice decodes as one.
		b = make([]byte, n)
	case n > maxArenaValue:
		b = make([]byte, n)
		populate(unsafe.Pointer(unsafe.SliceData(b)), n)
	default:
		if len(a.free) < n {
			c := min(max(minArenaChunk, n, a.used), maxArenaChunk)
			a.free = make([]byte, c)
			populate(unsafe.Pointer(unsafe.SliceData(a.free)), c)
		}
		b = a.free[:n:n]
		a.free = a.free[n:]
		a.used += n
	}
	copy(b, src)
	return b
}

// string returns src as a string. A nil arena allocates it alone.
func (a *byteArena) string(src []byte) string {
	if a == nil || len(src) == 0 {
		return string(src)
	}
	b := a.bytes(src)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Arena is a byteArena for the RunDecoder of a codec outside this package:
// the byte slices the values of one run hold, copied into shared chunks
// mapped at once. The zero Arena is ready; it is for one goroutine.
type Arena struct{ a byteArena }

// Copy returns a copy of src, capped at its length (an append to it
// allocates anew), never nil.
func (a *Arena) Copy(src []byte) []byte { return a.a.bytes(src) }
