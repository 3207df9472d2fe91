//go:build !linux

package state

import "unsafe"

// hugePages does nothing where transparent huge pages cannot be asked for.
func hugePages(p unsafe.Pointer, n int) {}
