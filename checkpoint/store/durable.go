package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clinkstream/clink/internal/fault"
)

// FsyncEnvVar turns fsync off when set to "0" or "false".
const FsyncEnvVar = "CLINK_STATE_FSYNC"

// Fault points reached by WriteFileDurable, in this order. They are reached
// whether or not fsync is on, so a crash test picks the same moment either
// way.
const (
	FaultBeforeSync   = "store.write.before-sync"
	FaultBeforeRename = "store.write.before-rename"
	FaultAfterRename  = "store.write.after-rename"
)

// FsyncEnabled reports whether durable writes fsync. It is false only when
// CLINK_STATE_FSYNC is "0" or "false" (in any case), for CI machines that
// punish fsync and for benchmarks where durability is not under test. The
// variable is read at every call, so the setting can change at run time.
func FsyncEnabled() bool {
	v := os.Getenv(FsyncEnvVar)
	return !(v == "0" || strings.EqualFold(v, "false"))
}

// tempPrefix and tempSuffix frame the name of a file being written, so that
// a leftover from a crash never looks like a snapshot or a marker.
const (
	tempPrefix = "."
	tempSuffix = ".part"
)

// isTemp reports whether name is a temporary file of WriteFileDurable.
func isTemp(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && strings.HasSuffix(name, tempSuffix)
}

// writeChunk bounds the scratch buffer WriteFileDurable copies through.
// vfs.File.Write may modify the slice it is given (MemFS does under the race
// detector), and the caller's data must stay intact. (The operating
// system's files leave it alone, but writing a large part as it is, in one
// write, made the write's latency worse on Linux, not better.)
const writeChunk = 64 << 10

// WriteFileDurable writes data to path so that, once it returns nil, a crash
// leaves either the old file or the complete new one at path, never a part.
//
// With fsync on it: creates "<dir>/.<base>.part", writes data, fsyncs the
// file through the descriptor that wrote it (strict: a failure is returned),
// closes it, renames it to path, and fsyncs the parent directory so that the
// rename itself survives a crash. The directory fsync is best effort: a
// failure to open or sync the directory is ignored, because some filesystems
// refuse to fsync a directory and the worst case is that recovery falls back
// to the previous checkpoint. With fsync off it only writes, closes and
// renames, which survives a process crash but not a power loss.
//
// The fault points FaultBeforeSync, FaultBeforeRename and FaultAfterRename
// are reached on the way. An error from a hook aborts the write: before the
// rename the temp file is removed and path is untouched; after the rename the
// new file is in place but its directory entry has not been synced.
//
// The parent directory must exist. Two concurrent writes of the same path are
// not supported: they share the temp name.
func WriteFileDurable(fs vfs.FS, path string, data []byte, fsync bool) error {
	_, err := writeFileDurable(fs, path, [][]byte{data}, fsync)
	return err
}

// writeFileDurable is WriteFileDurable of the concatenation of parts, which
// it does not build (the parts are written one after the other), and also
// returns the directory sync error it ignored, so that a Store can log it.
func writeFileDurable(fs vfs.FS, path string, parts [][]byte, fsync bool) (dirErr, err error) {
	tmp := tempPath(fs, path)
	return writeDurable(fs, path, tmp, createWith(fs, tmp, parts), fsync)
}

// tempPath is the name of path's temp file: "<dir>/.<base>.part".
func tempPath(fs vfs.FS, path string) string {
	return fs.PathJoin(fs.PathDir(path), tempPrefix+fs.PathBase(path)+tempSuffix)
}

// createWith returns writeDurable's create for a temp file tmp that holds
// the concatenation of parts.
func createWith(fs vfs.FS, tmp string, parts [][]byte) func() (vfs.File, error) {
	return func() (vfs.File, error) {
		f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", tmp, pathCause(err))
		}
		if err := writeAll(f, parts); err != nil {
			return f, fmt.Errorf("writing %s: %w", tmp, pathCause(err))
		}
		return f, nil
	}
}

// writeDurable is the sequence of WriteFileDurable after the temp file tmp
// has been given its content: create makes tmp and fills it, returning the
// open file to sync (also with an error, so that it is closed and tmp
// removed); then sync, close, rename to path, sync the directory. It is
// stageDurable followed by publishDurable.
func writeDurable(fs vfs.FS, path, tmp string, create func() (vfs.File, error), fsync bool) (dirErr, err error) {
	if err := stageDurable(fs, path, tmp, create, fsync); err != nil {
		return nil, err
	}
	return publishDurable(fs, path, tmp, fsync)
}

// stageDurable is the first half of writeDurable: create, sync and close
// the temp file tmp of path. On an error tmp is removed. Once it returned
// nil, tmp's content is on stable storage (with fsync), and publishDurable
// may follow at any later time; tmp is the caller's until then.
func stageDurable(fs vfs.FS, path, tmp string, create func() (vfs.File, error), fsync bool) error {
	f, err := create()
	abort := func(err error) error {
		if f != nil {
			_ = f.Close()
		}
		_ = fs.Remove(tmp)
		return err
	}
	if err != nil {
		if f == nil {
			return err
		}
		return abort(err)
	}
	if err := fault.Point(FaultBeforeSync); err != nil {
		return abort(fmt.Errorf("writing %s: %w", path, err))
	}
	if fsync {
		if err := f.Sync(); err != nil {
			return abort(fmt.Errorf("syncing %s: %w", tmp, pathCause(err)))
		}
	}
	err = f.Close()
	f = nil
	if err != nil {
		return abort(fmt.Errorf("closing %s: %w", tmp, pathCause(err)))
	}
	return nil
}

// publishDurable is the second half of writeDurable: rename the staged
// temp file tmp to path and sync the directory. Up to the rename an error
// removes tmp and leaves path untouched.
func publishDurable(fs vfs.FS, path, tmp string, fsync bool) (dirErr, err error) {
	if err := fault.Point(FaultBeforeRename); err != nil {
		_ = fs.Remove(tmp)
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := fs.Rename(tmp, path); err != nil {
		_ = fs.Remove(tmp)
		return nil, fmt.Errorf("renaming %s to %s: %w", tmp, path, pathCause(err))
	}
	if err := fault.Point(FaultAfterRename); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	if fsync {
		if err := syncDir(fs, fs.PathDir(path)); err != nil {
			return err, nil
		}
	}
	return nil, nil
}

// copyFileDurable stores the local file at src (read with the operating
// system, streamed, never whole in memory) at path in fs with the sequence
// and guarantees of WriteFileDurable, under the temp name tmp (a base name
// in path's directory that isTemp accepts, unique per concurrent call). When
// fs is the operating system's and src is on the same filesystem, the temp
// file is a hard link to src instead of a copy, and syncing it makes src's
// data durable; the caller must never change src afterwards.
func copyFileDurable(fs vfs.FS, path, tmpBase, src string, fsync bool) (dirErr, err error) {
	tmp := fs.PathJoin(fs.PathDir(path), tmpBase)
	if isOSFS(fs) {
		_ = fs.Remove(tmp) // a leftover of a crashed run
		if err := os.Link(src, tmp); err == nil {
			create := func() (vfs.File, error) {
				// fsync through a descriptor of the linked inode: its
				// data was written by another writer that never synced.
				f, err := fs.OpenReadWrite(tmp, vfs.WriteCategoryUnspecified)
				if err != nil {
					_ = fs.Remove(tmp)
					return nil, fmt.Errorf("opening %s: %w", tmp, pathCause(err))
				}
				return f, nil
			}
			dirErr, err := writeDurable(fs, path, tmp, create, fsync)
			if err == nil {
				// Renaming a link onto another link of the same inode (a
				// concurrent Put of the same file won) does nothing and
				// leaves tmp; the name is ours alone, so drop it.
				_ = fs.Remove(tmp)
			}
			return dirErr, err
		}
		// Another filesystem, or links are not supported: copy.
	}
	create := func() (vfs.File, error) {
		in, err := os.Open(src)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", src, pathCause(err))
		}
		defer in.Close()
		f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", tmp, pathCause(err))
		}
		if err := copyAll(f, in); err != nil {
			return f, fmt.Errorf("copying %s to %s: %w", src, tmp, pathCause(err))
		}
		return f, nil
	}
	return writeDurable(fs, path, tmp, create, fsync)
}

// isOSFS reports whether fs is the operating system's filesystem, so that
// its paths and local paths name the same files. Wrappers are not looked
// through: one may map paths or inject errors.
func isOSFS(fs vfs.FS) bool { return fs == vfs.Default }

// copyAll streams r into f through a writeChunk buffer.
func copyAll(f vfs.File, r io.Reader) error {
	buf := make([]byte, writeChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w, werr := f.Write(buf[:n])
			if werr == nil && w != n {
				werr = fmt.Errorf("short write: %d of %d bytes", w, n)
			}
			if werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// writeAll writes the concatenation of parts through a scratch buffer (see
// writeChunk), in writes of writeChunk bytes but for the last.
func writeAll(f vfs.File, parts [][]byte) error {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if total == 0 {
		return nil
	}
	buf := make([]byte, 0, min(total, writeChunk))
	flush := func() error {
		w, err := f.Write(buf)
		if err == nil && w != len(buf) {
			err = fmt.Errorf("short write: %d of %d bytes", w, len(buf))
		}
		buf = buf[:0]
		return err
	}
	for _, p := range parts {
		for len(p) > 0 {
			n := min(len(p), cap(buf)-len(buf))
			buf = append(buf, p[:n]...)
			p = p[n:]
			if len(buf) == cap(buf) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if len(buf) == 0 {
		return nil
	}
	return flush()
}

// SyncDir fsyncs directory dir on the operating system's filesystem, with
// the terms of syncDir; for connectors that publish files themselves.
func SyncDir(dir string) error { return syncDir(vfs.Default, dir) }

// syncDir fsyncs a directory so that the entries created, renamed or removed
// in it survive a crash. A filesystem that does not support fsync on a
// directory is not an error (see dirSyncUnsupported).
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("opening directory %s to sync it: %w", dir, pathCause(err))
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !dirSyncUnsupported(err) {
		return fmt.Errorf("syncing directory %s: %w", dir, pathCause(err))
	}
	return nil
}

// pathCause strips an *os.PathError, whose message repeats the path, from
// err, since the errors built here name the path themselves.
func pathCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
