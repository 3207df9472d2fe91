package exec

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/clinkstream/clink/sql/types"
	"github.com/clinkstream/clink/state"
)

// testShared is a state.SharedWriter over a directory.
type testShared struct{ dir string }

func (s testShared) Put(name, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, name), data, 0o644)
}

func (s testShared) Has(name string) bool {
	_, err := os.Stat(filepath.Join(s.dir, name))
	return err == nil
}

func (s testShared) Path(name string) (string, error) { return filepath.Join(s.dir, name), nil }

func (s testShared) Write(name string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, name), buf.Bytes(), 0o644)
}

func (s testShared) WriteUnpinned(name string, write func(io.Writer) error) error {
	return s.Write(name, write)
}

// persistState checkpoints b's state into sf as an incremental
// checkpoint does, and returns its manifest.
func persistState(t *testing.T, b state.Backend, sf state.SharedFiles) *state.FileState {
	t.Helper()
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := c.(state.FileCaptured).PersistFiles(sf)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestJoinStateDeltaHoldsAppendedRows checkpoints a join key whose rows
// grow by a few rows per checkpoint: the deltas together hold about the
// rows appended (also when a slice moved to a larger array), not the
// whole value at every checkpoint; and the chain restores to the rows.
func TestJoinStateDeltaHoldsAppendedRows(t *testing.T) {
	sf := testShared{dir: t.TempDir()}
	open := func() (*state.MemoryBackend, *state.ValueState[int64, joinState]) {
		b, err := state.NewMemoryBackendWith(state.MemoryOptions{Incremental: true, MaterializeBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Open(state.KeyGroupRange{Start: 0, End: 8}, 8); err != nil {
			t.Fatal(err)
		}
		v, err := state.NewValue(b, "value", state.CodecFor[int64](), state.CodecFor[joinState]())
		if err != nil {
			t.Fatal(err)
		}
		return b, v
	}
	b, v := open()
	defer b.Close()
	row := types.AppendValues(nil, []types.Value{types.Int64(42), types.String("a row of the left side")})
	var fs *state.FileState
	var deltas int64
	for round := range 40 {
		st, _ := v.Get(7)
		for range 5 {
			st.Left = appendJoinRec(st.Left, 0, 0, row)
		}
		if round%8 == 0 {
			st.Right = appendJoinRec(st.Right, 0, int64(round), row)
		}
		v.Put(7, st)
		fs = persistState(t, b, sf)
		if round > 0 {
			info, err := os.Stat(filepath.Join(sf.dir, fs.Shared[len(fs.Shared)-1]))
			if err != nil {
				t.Fatal(err)
			}
			deltas += info.Size()
		}
	}
	want, _ := v.Get(7)
	// Whole values every time would be about 20 times the final value;
	// each delta file adds a few dozen bytes of its own.
	if size := int64(len(want.Left) + len(want.Right)); deltas > size+39*64 {
		t.Fatalf("39 deltas hold %d bytes for a value that grew to %d", deltas, size)
	}
	r, rv := open()
	defer r.Close()
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	// The restored backend registered the state before RestoreFiles.
	got, ok := rv.Get(7)
	if !ok || !bytes.Equal(got.Left, want.Left) || !bytes.Equal(got.Right, want.Right) {
		t.Fatalf("restored rows differ: %d/%d bytes, want %d/%d", len(got.Left), len(got.Right), len(want.Left), len(want.Right))
	}
}
