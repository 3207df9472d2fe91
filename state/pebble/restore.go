package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"

	"github.com/clinkstream/clink/state"
)

// Restore implements state.Backend for key-group data written by
// Capture.Persist: it loads the entries of the key groups in the
// backend's range. They are verified by the tables they belong to, at
// their registration (tables registered already verify them now).
func (b *Backend) Restore(snaps [][]state.KeyGroupData) error {
	if !b.opened || b.closed {
		return errors.New("restoring pebble state: the backend is not open")
	}
	if err := b.store.flush(); err != nil {
		return fmt.Errorf("restoring pebble state: %w", err)
	}
	batch := b.db.NewBatch()
	defer batch.Close()
	var key []byte
	for _, groups := range snaps {
		for _, g := range groups {
			if !b.rng.Contains(g.KeyGroup) {
				continue
			}
			data := g.Data
			if g.Entries < 0 {
				return fmt.Errorf("restoring pebble state: key group %d: %d entries", g.KeyGroup, g.Entries)
			}
			for i := 0; i < g.Entries; i++ {
				k, rest, err := lengthPrefixed(data)
				if err != nil {
					return fmt.Errorf("restoring pebble state: key group %d, entry %d: key: %w", g.KeyGroup, i, err)
				}
				v, rest, err := lengthPrefixed(rest)
				if err != nil {
					return fmt.Errorf("restoring pebble state: key group %d, entry %d: value: %w", g.KeyGroup, i, err)
				}
				data = rest
				key = append(state.KeyGroupPrefix(key[:0], g.KeyGroup), k...)
				if err := batch.Set(key, v, nil); err != nil {
					return fmt.Errorf("restoring pebble state: %w", err)
				}
			}
			if len(data) != 0 {
				return fmt.Errorf("restoring pebble state: key group %d: %d bytes left after %d entries", g.KeyGroup, len(data), g.Entries)
			}
		}
	}
	if batch.Empty() {
		return nil
	}
	if err := b.store.commit(batch); err != nil {
		return fmt.Errorf("restoring pebble state: %w", err)
	}
	// The cache may hold keys the batch wrote.
	b.store.reset()
	b.unchecked = true
	for _, t := range b.tables {
		if err := t.Check(); err != nil {
			return fmt.Errorf("restoring state %q: %w", t.Name(), err)
		}
	}
	return nil
}

// lengthPrefixed splits a uvarint-length-prefixed byte string off b.
func lengthPrefixed(b []byte) (s, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, state.ErrShortBuffer
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// RestoreFiles implements state.FileRestorer. Given the checkpoint of a
// subtask with the same key groups, it rebuilds that DB as the working DB:
// its data files are hard links to (or copies of) the shared files, and
// the next checkpoints upload only what is new since. Otherwise (the job
// was rescaled) it rebuilds each overlapping checkpoint in a temporary
// directory and copies the entries of the backend's key groups into the
// working DB, whose files are all new then.
//
// It must come before any table is registered.
func (b *Backend) RestoreFiles(snaps []*state.FileState, sf state.SharedFiles) error {
	if err := b.restoreFiles(snaps, sf); err != nil {
		return fmt.Errorf("restoring pebble state: %w", err)
	}
	return nil
}

func (b *Backend) restoreFiles(snaps []*state.FileState, sf state.SharedFiles) error {
	if !b.opened || b.closed {
		return errors.New("the backend is not open")
	}
	if len(b.tables) > 0 || b.captures > 0 || b.restores > 0 {
		return errors.New("files are restored into a backend that was just opened, before tables are registered")
	}
	var dirs []*checkpointDir
	for i, fs := range snaps {
		d, err := decodeFileState(fs)
		if err != nil {
			return fmt.Errorf("snapshot %d: %w", i, err)
		}
		if d.meta.MaxParallelism != b.maxParallelism {
			return fmt.Errorf("snapshot %d has %d key groups, the job %d: state cannot move to other key groups", i, d.meta.MaxParallelism, b.maxParallelism)
		}
		r := d.meta.rng()
		if r.Start < b.rng.End && b.rng.Start < r.End {
			dirs = append(dirs, d)
		}
	}
	b.restores++
	if len(dirs) == 1 && dirs[0].meta.rng() == b.rng {
		return b.restoreWhole(dirs[0], sf)
	}
	for i, d := range dirs {
		if err := b.restoreRange(d, sf, i); err != nil {
			return fmt.Errorf("key groups %v: %w", d.meta.rng(), err)
		}
	}
	return nil
}

// restoreWhole replaces the (empty) working DB by the checkpoint's.
func (b *Backend) restoreWhole(d *checkpointDir, sf state.SharedFiles) error {
	if err := b.store.closeIter(); err != nil {
		return err
	}
	if err := b.db.Close(); err != nil {
		return err
	}
	b.db, b.store.db = nil, nil
	b.store.reset()
	if err := os.RemoveAll(b.dbDir); err != nil {
		return err
	}
	if err := rebuild(b.dbDir, d, sf); err != nil {
		return err
	}
	db, err := pebble.Open(b.dbDir, b.pebbleOptions(false))
	if err != nil {
		return err
	}
	b.db, b.store.db = db, db
	b.restoredFiles = d.meta.Files
	return nil
}

// restoreRange copies the entries of the backend's key groups from a
// checkpoint into the working DB.
func (b *Backend) restoreRange(d *checkpointDir, sf state.SharedFiles, i int) (err error) {
	dir := filepath.Join(b.work, fmt.Sprintf("restore-%d-%d", b.restores, i))
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	if err := rebuild(dir, d, sf); err != nil {
		return err
	}
	src, err := pebble.Open(dir, b.pebbleOptions(true))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, src.Close()) }()
	r := d.meta.rng()
	it, err := src.NewIter(&pebble.IterOptions{
		LowerBound: state.KeyGroupPrefix(nil, max(r.Start, b.rng.Start)),
		UpperBound: state.KeyGroupPrefix(nil, min(r.End, b.rng.End)),
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	batch := b.db.NewBatch()
	defer func() { batch.Close() }()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := batch.Set(it.Key(), v, nil); err != nil {
			return err
		}
		if batch.Len() >= 4<<20 {
			if err := b.store.commit(batch); err != nil {
				return err
			}
			batch.Close()
			batch = b.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	return b.store.commit(batch)
}

// rebuild creates the checkpoint directory dir: the inline files written,
// the data files linked from shared storage (copied if they cannot be).
func rebuild(dir string, d *checkpointDir, sf state.SharedFiles) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range d.files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	for local, shared := range d.meta.Files {
		src, err := sf.Path(shared)
		if err != nil {
			return fmt.Errorf("locating shared file %s: %w", shared, err)
		}
		if err := linkOrCopy(src, filepath.Join(dir, local)); err != nil {
			return fmt.Errorf("fetching shared file %s: %w", shared, err)
		}
	}
	return nil
}

// linkOrCopy hard-links src to dst, or copies it where links do not work
// (another filesystem). Pebble never writes to a data file once it is
// written, so a link never changes the shared file.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
