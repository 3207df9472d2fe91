//go:build !unix

package store

import "errors"

// dirSyncUnsupported reports whether err means the filesystem does not
// support fsync on a directory, rather than that the sync failed.
func dirSyncUnsupported(err error) bool {
	return errors.Is(err, errors.ErrUnsupported)
}
