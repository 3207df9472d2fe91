package state

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page on amd64 and arm64 with
// 4 KiB base pages.
const hugePage = 2 << 20

// hugePages advises the kernel to back the 2 MiB-aligned interior of the n
// bytes at p with transparent huge pages. It is a hint: under the
// "madvise" policy it enables them there, under "always" it changes
// nothing, under "never" or on error the memory stays as it is. The
// memory stays the Go heap's: the advice changes how the kernel backs it,
// not who owns it.
func hugePages(p unsafe.Pointer, n int) {
	start := (uintptr(p) + hugePage - 1) &^ (hugePage - 1)
	end := (uintptr(p) + uintptr(n)) &^ (hugePage - 1)
	if start >= end {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start)
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE)
}

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14).
const madvPopulateWrite = 23

// populate maps writable pages under the page-aligned interior of the n
// bytes at p, in one call rather than a fault per page, and reports
// whether it did.
func populate(p unsafe.Pointer, n int) bool {
	start := (uintptr(p) + pageSize - 1) &^ (pageSize - 1)
	end := (uintptr(p) + uintptr(n)) &^ (pageSize - 1)
	if start >= end {
		return false
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start)
	return syscall.Madvise(b, madvPopulateWrite) == nil
}
