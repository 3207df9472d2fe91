package filesystem_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connector/connectortest"
	"github.com/clinkstream/clink/connectors/filesystem"
)

// row is the record type of the sink tests.
type row struct {
	ID   int64
	Name string
	Tags []byte
}

func rowOf(i int) row {
	return row{ID: int64(i), Name: "name, \"quoted\"\nline " + strconv.Itoa(i), Tags: []byte{byte(i), 0, 1}}
}

// readCommitted decodes every committed file in dir with a file source.
func readCommitted[T any](t testing.TB, dir string, format filesystem.Format) []T {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	any := false
	for _, e := range entries {
		if filesystem.Committed(e.Name()) {
			any = true
		}
	}
	if !any {
		return nil
	}
	src, err := filesystem.NewSource[T](dir, format)
	if err != nil {
		t.Fatal(err)
	}
	return readAll(t, src, 0, 1, nil, nil)
}

// readAll reads subtask sub of par to the end.
func readAll[T any](t testing.TB, src connector.Source[T], sub, par int, offset []byte, rescaled [][]byte) []T {
	t.Helper()
	r, err := src.Open(connector.SourceContext{UID: "src", Subtask: sub, Parallelism: par, MaxParallelism: 128}, offset, rescaled)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []T
	for {
		st, err := r.Read(100, func(v T, _ int64) error { out = append(out, v); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if st == connector.Done {
			return out
		}
	}
}

func target(t testing.TB, format filesystem.Format, opts filesystem.SinkOptions) connectortest.Target[row, filesystem.Committable] {
	dir := filepath.Join(t.TempDir(), "out")
	newSink, err := filesystem.NewSink[row](dir, format, opts)
	if err != nil {
		t.Fatal(err)
	}
	return connectortest.Target[row, filesystem.Committable]{
		New:    newSink,
		Record: rowOf,
		Key:    strconv.Itoa,
		Visible: func(t testing.TB) []string {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				return nil
			}
			var out []string
			for _, r := range readCommitted[row](t, dir, format) {
				if want := rowOf(int(r.ID)); r.Name != want.Name || string(r.Tags) != string(want.Tags) {
					t.Errorf("record %d read back as %+v, want %+v", r.ID, r, want)
				}
				out = append(out, strconv.FormatInt(r.ID, 10))
			}
			return out
		},
		Reset: func(t testing.TB) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func TestConformanceCSV(t *testing.T) {
	connectortest.Run(t, target(t, filesystem.CSV, filesystem.SinkOptions{}))
}

func TestConformanceJSON(t *testing.T) {
	connectortest.Run(t, target(t, filesystem.JSON, filesystem.SinkOptions{}))
}

// TestConformanceRolling rolls after every few records, so that a
// checkpoint commits several files.
func TestConformanceRolling(t *testing.T) {
	connectortest.Run(t, target(t, filesystem.CSV, filesystem.SinkOptions{RollSize: 100, Prefix: "roll"}))
}

func FuzzCommittable(f *testing.F) {
	seed := filesystem.Committable{Dir: "/tmp/out", Files: []filesystem.PartFile{{Staged: ".part-sub0-ab-1.csv.staged", Final: "part-sub0-ab-1.csv"}}}
	connectortest.FuzzCodec(f, target(f, filesystem.CSV, filesystem.SinkOptions{}), seed)
}
