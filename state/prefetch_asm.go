//go:build amd64 || arm64

package state

import "unsafe"

// prefetch2 asks the processor to bring the two cache lines from p into
// its caches, without waiting for them: reads of scattered values issued
// a few entries ahead then overlap. p need not be a valid address.
//
//go:noescape
func prefetch2(p unsafe.Pointer)
