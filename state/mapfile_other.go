//go:build !linux

package state

import "os"

// mapFile reads the file at path: mapping is used on Linux only.
func mapFile(path string) (data []byte, mapped bool, err error) {
	data, err = os.ReadFile(path)
	return data, false, err
}

// unmapFile is never called where mapFile maps nothing.
func unmapFile(data []byte) error { return nil }
