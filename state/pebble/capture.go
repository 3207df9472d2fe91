package pebble

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/clinkstream/clink/state"
)

// Capture is a Pebble checkpoint of a Backend: a directory of hard links to
// the DB's files as of the capture (the working DB goes on without
// changing them). The runtime persists it once, with PersistFiles (or, for
// a full copy of its key groups, Persist), on the snapshot worker; a
// capture it will not persist (an aborted checkpoint) should be discarded
// so that its links do not keep obsolete files on disk.
type Capture struct {
	b   *Backend
	dir string
	mu  sync.Mutex
	// done: the directory is gone (persisted or discarded).
	done bool
}

var _ state.FileCaptured = (*Capture)(nil)

// take marks the capture used, refusing a second use.
func (c *Capture) take(what string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return fmt.Errorf("%s: the capture was already persisted or discarded", what)
	}
	c.done = true
	return nil
}

// Discard removes the capture's directory.
func (c *Capture) Discard() error {
	if err := c.take("discarding a pebble capture"); err != nil {
		return nil
	}
	return os.RemoveAll(c.dir)
}

// isShared reports whether a checkpoint file goes to shared storage: the
// immutable data files (sstables, blob files). The others (MANIFEST,
// OPTIONS, markers) are small and are stored inline.
func isShared(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// PersistFiles implements state.FileCaptured: it puts every data file of the
// checkpoint that shared storage does not hold yet into it (a file is
// stored once and referenced by every checkpoint that still needs it), and
// returns the small files inline with the mapping from local to shared
// names.
func (c *Capture) PersistFiles(sf state.SharedFiles) (*state.FileState, error) {
	if err := c.take("persisting a pebble capture"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(c.dir)
	fs, err := c.persistFiles(sf)
	if err != nil {
		return nil, fmt.Errorf("persisting pebble checkpoint: %w", err)
	}
	return fs, nil
}

func (c *Capture) persistFiles(sf state.SharedFiles) (*state.FileState, error) {
	b := c.b
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, err
	}
	meta := fileMeta{Format: metaFormat, Start: b.rng.Start, End: b.rng.End, MaxParallelism: b.maxParallelism, Files: map[string]string{}}
	out := &state.FileState{}
	var named []state.NamedData
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(c.dir, name)
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("checkpoint holds %s, which is not a regular file", name)
		}
		if !isShared(name) {
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			named = append(named, state.NamedData{Name: filePrefix + name, Data: data})
			continue
		}
		shared, ok := b.restoredFiles[name]
		if !ok {
			shared = b.token + "-" + name
		}
		if !sf.Has(shared) {
			if err := sf.Put(shared, path); err != nil {
				return nil, fmt.Errorf("storing %s as %s: %w", name, shared, err)
			}
		}
		meta.Files[name] = shared
		out.Shared = append(out.Shared, shared)
	}
	slices.Sort(out.Shared)
	mb, err := meta.encode()
	if err != nil {
		return nil, err
	}
	out.Named = append([]state.NamedData{{Name: metaName, Data: mb}}, named...)
	return out, nil
}

// Persist implements state.Captured: it reads the checkpoint and returns
// every key group's entries, a full copy that Backend.Restore reads (for a
// runtime that does not store files; PersistFiles is incremental). The
// data of a key group is, per entry: uvarint length + the storage key
// without its key-group prefix, uvarint length + the value.
func (c *Capture) Persist() ([]state.KeyGroupData, error) {
	if err := c.take("persisting a pebble capture"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(c.dir)
	groups, err := c.persist()
	if err != nil {
		return nil, fmt.Errorf("persisting pebble checkpoint: %w", err)
	}
	return groups, nil
}

func (c *Capture) persist() (out []state.KeyGroupData, err error) {
	b := c.b
	db, err := pebble.Open(c.dir, b.pebbleOptions(true))
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	return keyGroupData(db, b.rng)
}
