package exec

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/clinkstream/clink/sql/types"
	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/statetest"
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

// lastFileSize returns the size of the last file of a checkpoint's chain.
func lastFileSize(t *testing.T, sf testShared, fs *state.FileState) int64 {
	t.Helper()
	info, err := os.Stat(filepath.Join(sf.dir, fs.Shared[len(fs.Shared)-1]))
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// openJoinState opens a memory backend with incremental checkpoints (and
// no materialization) over 8 key groups, with a join's value state.
func openJoinState(t *testing.T) (*state.MemoryBackend, *state.ValueState[int64, joinState]) {
	t.Helper()
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

// TestJoinStateDeltaHoldsAppendedRows checkpoints a join key whose rows
// grow by a few rows per checkpoint: the deltas together hold about the
// rows appended (also when a slice moved to a larger array), not the
// whole value at every checkpoint; and the chain restores to the rows.
func TestJoinStateDeltaHoldsAppendedRows(t *testing.T) {
	sf := testShared{dir: t.TempDir()}
	open := func() (*state.MemoryBackend, *state.ValueState[int64, joinState]) { return openJoinState(t) }
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
		fs = statetest.PersistFiles(t, b, sf)
		if round > 0 {
			deltas += lastFileSize(t, sf, fs)
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

// TestJoinStateDeltaCutsExpiredRows checkpoints a join key whose oldest
// rows go as new ones come, as a join with a JoinRetention drops them
// (joinRows.retained): a delta holds the rows appended and an edit that
// cuts the ones dropped, not the whole value; the chain restores to the
// rows, and to none once every row went.
func TestJoinStateDeltaCutsExpiredRows(t *testing.T) {
	sf := testShared{dir: t.TempDir()}
	open := func() (*state.MemoryBackend, *state.ValueState[int64, joinState]) { return openJoinState(t) }
	b, v := open()
	defer b.Close()
	right := appendJoinRec(nil, 0, 0, types.AppendValues(nil, []types.Value{types.Int64(-1)}))
	var fs *state.FileState
	var deltas, appended int64
	const rounds = 40
	for round := range rounds + 1 {
		st, _ := v.Get(7)
		st.Right = right
		if round < rounds {
			for i := range 5 {
				row := types.AppendValues(nil, []types.Value{types.Int64(int64(round)), types.String(fmt.Sprintf("row %d of round %d", i, round))})
				st.Left = appendJoinRec(st.Left, 0, 0, row)
				appended += int64(len(row)) + 2
			}
		}
		// The rows of the rounds before the last four go (all of them
		// after the last round).
		kept, _, err := st.Left.retained(1, func(r []types.Value) (int64, bool) { return r[0].Int64(), true },
			func(e int64) bool { return e > int64(round)-4 && round < rounds })
		if err != nil {
			t.Fatal(err)
		}
		st.Left = kept
		v.Put(7, st)
		fs = statetest.PersistFiles(t, b, sf)
		if round > 0 {
			deltas += lastFileSize(t, sf, fs)
		}
	}
	// Whole values every time would be about four times the rows
	// appended; each delta file adds a few dozen bytes of its own.
	if deltas > appended+rounds*64 {
		t.Fatalf("%d deltas hold %d bytes for %d bytes of rows appended", rounds, deltas, appended)
	}
	want, _ := v.Get(7)
	if len(want.Left) != 0 {
		t.Fatalf("%d bytes of rows left after the last round", len(want.Left))
	}
	r, rv := open()
	defer r.Close()
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	got, ok := rv.Get(7)
	if !ok || len(got.Left) != 0 || !bytes.Equal(got.Right, want.Right) {
		t.Fatalf("restored rows differ: %d/%d bytes, want 0/%d", len(got.Left), len(got.Right), len(want.Right))
	}
}
