//go:build !amd64 && !arm64

package state

import "unsafe"

// prefetch2 does nothing on this architecture (see prefetch_asm.go).
func prefetch2(p unsafe.Pointer) {}
