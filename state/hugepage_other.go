//go:build !linux

package state

import "unsafe"

// hugePages does nothing where transparent huge pages cannot be asked for.
func hugePages(p unsafe.Pointer, n int) {}

// populate reports that it mapped nothing: prefault touches each page.
func populate(p unsafe.Pointer, n int) bool { return false }
