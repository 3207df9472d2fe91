package state

import (
	"reflect"
	"unsafe"
)

// pageSize is the size of a base page of memory.
const pageSize = 4096

// prefault maps every page of a, fresh from make, to memory of its own
// before an element is written. A write of pointers, while
// the collector marks, first reads the pointers it replaces (the write
// barrier): on a page not written yet, that read maps the kernel's zero
// page, and the write then faults a second time and flushes the TLBs of
// every core the process runs on. populate maps the pages in one call;
// else a zero byte is stored in each (below the write barrier, as the
// memory holds zeros and nothing else holds it yet).
func prefault[T any](a []T) {
	if len(a) == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(a))
	n := len(a) * int(unsafe.Sizeof(a[0]))
	end := uintptr(p) + uintptr(n)
	if populate(p, n) {
		// The pages at either end, which a shares.
		*(*byte)(p) = 0
		*(*byte)(unsafe.Add(p, n-1)) = 0
		return
	}
	for q := uintptr(p); q < end; q = (q + pageSize) &^ (pageSize - 1) {
		*(*byte)(unsafe.Add(p, q-uintptr(p))) = 0
	}
}

// faultedBytes is the size from which makeFaulted prefaults: below it the
// pages are too few to matter.
const faultedBytes = 64 << 10

// makeFaulted is make([]T, n), prefaulted if it holds pointers and is
// large: for the arrays a restore allocates and fills at once while the
// collector, kept busy by the restore's allocations, marks.
func makeFaulted[T any](n int) []T {
	a := make([]T, n)
	var x T
	if n*int(unsafe.Sizeof(x)) >= faultedBytes && hasPointers(reflect.TypeFor[T]()) {
		prefault(a)
	}
	return a
}
