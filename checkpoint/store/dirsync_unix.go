//go:build unix

package store

import (
	"errors"
	"syscall"
)

// dirSyncUnsupported reports whether err means the filesystem does not
// support fsync on a directory, rather than that the sync failed.
func dirSyncUnsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, errors.ErrUnsupported)
}
