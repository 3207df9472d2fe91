package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clinkstream/clink/state"
)

// ReadCheckpoint reads the keyed state of one persisted checkpoint (what
// PersistFiles returned, with sf the shared files it lists) without a
// Backend, for tools that inspect checkpoints: it rebuilds the checkpoint
// in a temporary directory under tmp ("" for the system's), opens it read
// only and returns every key group's entries in the format of
// Capture.Persist (per entry: uvarint length + the storage key without
// its key-group prefix, uvarint length + the value). The temporary
// directory is removed before it returns; the shared files are only read.
func ReadCheckpoint(fs *state.FileState, sf state.SharedFiles, tmp string) (groups []state.KeyGroupData, maxParallelism int, err error) {
	d, err := decodeFileState(fs)
	if err != nil {
		return nil, 0, fmt.Errorf("reading pebble checkpoint: %w", err)
	}
	dir, err := os.MkdirTemp(tmp, "clink-pebble-read-")
	if err != nil {
		return nil, 0, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	db := filepath.Join(dir, "db")
	if err := rebuild(db, d, sf); err != nil {
		return nil, 0, fmt.Errorf("reading pebble checkpoint: %w", err)
	}
	o := &pebble.Options{FS: vfs.Default, ReadOnly: true, DisableWAL: true, CacheSize: 1 << 20, Logger: pebbleLogger{slog.New(slog.DiscardHandler)}}
	o.EnsureDefaults()
	pdb, err := pebble.Open(db, o)
	if err != nil {
		return nil, 0, fmt.Errorf("reading pebble checkpoint: %w", err)
	}
	defer func() { err = errors.Join(err, pdb.Close()) }()
	groups, err = keyGroupData(pdb, d.meta.rng())
	if err != nil {
		return nil, 0, fmt.Errorf("reading pebble checkpoint: %w", err)
	}
	return groups, d.meta.MaxParallelism, nil
}

// keyGroupData reads the entries of the key groups rng of db, in the
// format of Capture.Persist.
func keyGroupData(db *pebble.DB, rng state.KeyGroupRange) (out []state.KeyGroupData, err error) {
	it, err := db.NewIter(&pebble.IterOptions{
		LowerBound: state.KeyGroupPrefix(nil, rng.Start),
		UpperBound: state.KeyGroupPrefix(nil, rng.End),
	})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	var cur *state.KeyGroupData
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		kg := state.KeyGroupOfKey(k)
		if cur == nil || cur.KeyGroup != kg {
			out = append(out, state.KeyGroupData{KeyGroup: kg})
			cur = &out[len(out)-1]
		}
		cur.Data = binary.AppendUvarint(cur.Data, uint64(len(k)-2))
		cur.Data = append(cur.Data, k[2:]...)
		cur.Data = binary.AppendUvarint(cur.Data, uint64(len(v)))
		cur.Data = append(cur.Data, v...)
		cur.Entries++
	}
	return out, it.Error()
}
