package state_test

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/clinkstream/clink/state"
)

// incrementalSeed returns the files and manifest of a small incremental
// checkpoint: a base and a delta with puts and deletions.
func incrementalSeed(t testing.TB) (dir string, fs *state.FileState) {
	sf := &dirShared{dir: t.TempDir()}
	b, err := state.NewMemoryBackendWith(state.MemoryOptions{Incremental: true, MaterializeBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Open(state.KeyGroupRange{Start: 0, End: 4}, 4); err != nil {
		t.Fatal(err)
	}
	v, err := state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		v.Put(k, int64(i))
	}
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.(state.FileCaptured).PersistFiles(sf); err != nil {
		t.Fatal(err)
	}
	v.Delete("b")
	v.Put("c", 30)
	c, err = b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	fs, err = c.(state.FileCaptured).PersistFiles(sf)
	if err != nil {
		t.Fatal(err)
	}
	return sf.dir, fs
}

// FuzzMemoryChainFile feeds arbitrary bytes as the files of an incremental
// checkpoint: reading and restoring them must fail with an error or
// succeed, never panic.
func FuzzMemoryChainFile(f *testing.F) {
	dir, fs := incrementalSeed(f)
	for _, n := range fs.Shared {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, true, true)
		f.Add(data, false, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, base, fixCRC bool) {
		if fixCRC && len(data) >= 4 {
			// Past the checksum, so that the parser itself is fuzzed.
			data = binary.LittleEndian.AppendUint32(slices.Clone(data[:len(data)-4]),
				crc32.Checksum(data[:len(data)-4], crc32.MakeTable(crc32.Castagnoli)))
		}
		sf := &dirShared{dir: t.TempDir()}
		// The chain of the seed checkpoint with one of its files
		// replaced by data.
		for i, n := range fs.Shared {
			content, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			if (i == 0) == base {
				content = data
			}
			if err := os.WriteFile(filepath.Join(sf.dir, n), content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, _, err := state.ReadChain(fs, sf); err != nil {
			return
		}
		b := newIncremental(t, 1)
		defer b.Close()
		if err := b.Open(state.KeyGroupRange{Start: 0, End: 4}, 4); err != nil {
			t.Fatal(err)
		}
		if err := b.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
			return
		}
		// Bytes that passed the checksum: the value decoder has the last
		// word.
		_, _ = state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]())
	})
}

// FuzzMemoryChainManifest feeds arbitrary bytes as the manifest of an
// incremental checkpoint.
func FuzzMemoryChainManifest(f *testing.F) {
	dir, fs := incrementalSeed(f)
	f.Add(fs.Named[0].Data)
	f.Add([]byte{1, 4, 0, 4, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		sf := &dirShared{dir: dir}
		bad := &state.FileState{Named: []state.NamedData{{Name: state.ChainManifestName, Data: data}}, Shared: fs.Shared}
		_, _, _, _ = state.ReadChain(bad, sf)
		b := newIncremental(t, 1)
		defer b.Close()
		if err := b.Open(state.KeyGroupRange{Start: 0, End: 4}, 4); err != nil {
			t.Fatal(err)
		}
		_ = b.RestoreFiles([]*state.FileState{bad}, sf)
	})
}
