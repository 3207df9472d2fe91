package parquet_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connector/connectortest"
	"github.com/clinkstream/clink/connectors/filesystem"
	"github.com/clinkstream/clink/connectors/parquet"
)

// event holds every column type the sink supports.
type event struct {
	ID      int64
	Name    string `parquet:"name"`
	Payload []byte
	At      time.Time
	OK      bool
	Small   int8
	Mid     int16
	I32     int32
	I       int
	U8      uint8
	U16     uint16
	U32     uint32
	U       uint
	F32     float32
	F64     float64
	Skipped string `parquet:"-"`
	hidden  int
}

func eventOf(i int) event {
	return event{
		ID: int64(i), Name: "event " + strconv.Itoa(i), Payload: []byte{byte(i), 0, 0xff},
		At: time.UnixMicro(1_800_000_000_000_000 + int64(i)).UTC(), OK: i%2 == 0,
		Small: int8(-i % 128), Mid: int16(i), I32: int32(-i), I: i << 33, U8: uint8(i), U16: uint16(i), U32: uint32(i),
		U: uint(i) << 40, F32: float32(i) / 2, F64: float64(i) / 3,
	}
}

// readTable decodes one Parquet file into a table; the caller releases it.
func readTable(t testing.TB, path string) arrow.Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tbl, err := pqarrow.ReadTable(context.Background(), f, nil, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return tbl
}

// readEvents decodes every committed Parquet file in dir.
func readEvents(t testing.TB, dir string) []event {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for _, e := range entries {
		if !filesystem.Committed(e.Name()) {
			continue
		}
		tbl := readTable(t, filepath.Join(dir, e.Name()))
		rr := array.NewTableReader(tbl, 0)
		for rr.Next() {
			rec := rr.RecordBatch()
			col := func(name string) arrow.Array {
				idx := rec.Schema().FieldIndices(name)
				if len(idx) != 1 {
					t.Fatalf("%s has no column %s: %v", e.Name(), name, rec.Schema())
				}
				return rec.Column(idx[0])
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				out = append(out, event{
					ID:      col("ID").(*array.Int64).Value(i),
					Name:    col("name").(*array.String).Value(i),
					Payload: append([]byte(nil), col("Payload").(*array.Binary).Value(i)...),
					At:      col("At").(*array.Timestamp).Value(i).ToTime(arrow.Microsecond).UTC(),
					OK:      col("OK").(*array.Boolean).Value(i),
					Small:   col("Small").(*array.Int8).Value(i),
					Mid:     col("Mid").(*array.Int16).Value(i),
					I32:     col("I32").(*array.Int32).Value(i),
					I:       int(col("I").(*array.Int64).Value(i)),
					U8:      col("U8").(*array.Uint8).Value(i),
					U16:     col("U16").(*array.Uint16).Value(i),
					U32:     col("U32").(*array.Uint32).Value(i),
					U:       uint(col("U").(*array.Uint64).Value(i)),
					F32:     col("F32").(*array.Float32).Value(i),
					F64:     col("F64").(*array.Float64).Value(i),
				})
			}
		}
		rr.Release()
		tbl.Release()
	}
	return out
}

func target(t testing.TB, opts parquet.Options) connectortest.Target[event, filesystem.Committable] {
	dir := filepath.Join(t.TempDir(), "out")
	newSink, err := parquet.NewSink[event](dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return connectortest.Target[event, filesystem.Committable]{
		New:    newSink,
		Record: eventOf,
		Key:    strconv.Itoa,
		Visible: func(t testing.TB) []string {
			var out []string
			for _, e := range readEvents(t, dir) {
				want := eventOf(int(e.ID))
				if e.Name != want.Name || string(e.Payload) != string(want.Payload) || !e.At.Equal(want.At) || e.U != want.U || e.F64 != want.F64 {
					t.Errorf("record %d read back as %+v, want %+v", e.ID, e, want)
				}
				out = append(out, strconv.FormatInt(e.ID, 10))
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

func TestConformance(t *testing.T) {
	connectortest.Run(t, target(t, parquet.Options{}))
}

// TestConformanceSmallRowGroups writes many row groups per file.
func TestConformanceSmallRowGroups(t *testing.T) {
	connectortest.Run(t, target(t, parquet.Options{RowGroupRows: 3, Compression: "none"}))
}

func FuzzCommittable(f *testing.F) {
	seed := filesystem.Committable{Dir: "/tmp/out", Files: []filesystem.PartFile{{Staged: ".part-sub0-ab-1.parquet.staged", Final: "part-sub0-ab-1.parquet"}}}
	connectortest.FuzzCodec(f, target(f, parquet.Options{}), seed)
}

// TestCommittedFilesAreSelfDescribing reads a committed file back with
// the Parquet reader: every value of every column type, the Arrow schema
// in the metadata, and the row groups.
func TestCommittedFilesAreSelfDescribing(t *testing.T) {
	dir := t.TempDir()
	newSink, err := parquet.NewSink[event](dir, parquet.Options{RowGroupRows: 100, Compression: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSink()
	if err := s.Open(connector.InitContext[filesystem.Committable]{Subtask: 1, RunToken: "tok", Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 250
	for i := 0; i < n; i++ {
		if err := s.Write(eventOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	c, ok, err := s.PrepareCommit(9)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if len(c.Files) != 1 || c.Files[0].Final != "part-sub1-tok-9.parquet" || c.Files[0].Staged != ".part-sub1-tok-9.parquet.staged" {
		t.Fatalf("handle %+v", c)
	}
	// Staged: a complete file already, under a hidden name.
	staged := filepath.Join(dir, c.Files[0].Staged)
	readTable(t, staged).Release()
	if got := readEvents(t, dir); len(got) != 0 {
		t.Fatalf("%d records visible before the commit", len(got))
	}
	if err := s.Commit(c); err != nil {
		t.Fatal(err)
	}
	got := readEvents(t, dir)
	if len(got) != n {
		t.Fatalf("read %d records, want %d", len(got), n)
	}
	for i, e := range got {
		want := eventOf(i)
		want.Skipped = ""
		if e.ID != want.ID || e.Name != want.Name || string(e.Payload) != string(want.Payload) || !e.At.Equal(want.At) ||
			e.OK != want.OK || e.Small != want.Small || e.Mid != want.Mid || e.I32 != want.I32 || e.I != want.I ||
			e.U8 != want.U8 || e.U16 != want.U16 || e.U32 != want.U32 || e.U != want.U || e.F32 != want.F32 || e.F64 != want.F64 {
			t.Fatalf("row %d: got %+v, want %+v", i, e, want)
		}
	}
	f, err := os.Open(filepath.Join(dir, c.Files[0].Final))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if rg := pf.NumRowGroups(); rg != 3 {
		t.Errorf("%d row groups, want 3 (250 rows by 100)", rg)
	}
	if pf.MetaData().KeyValueMetadata().FindValue("ARROW:schema") == nil {
		t.Error("the file does not carry its Arrow schema")
	}
	if cols := pf.MetaData().Schema.NumColumns(); cols != 15 {
		t.Errorf("%d columns, want 15 (the unexported and '-' fields left out)", cols)
	}
}

func TestNewSinkErrors(t *testing.T) {
	dir := t.TempDir()
	type empty struct{ x int }
	type withPtr struct{ P *int }
	type dup struct {
		A int `parquet:"x"`
		B int `parquet:"x"`
	}
	for _, tc := range []struct {
		name string
		new  func() error
		want string
	}{
		{"not a struct", func() error { _, err := parquet.NewSink[int](dir, parquet.Options{}); return err }, "must be a struct, not int"},
		{"no columns", func() error { _, err := parquet.NewSink[empty](dir, parquet.Options{}); return err }, "has no exported fields"},
		{"pointer field", func() error { _, err := parquet.NewSink[withPtr](dir, parquet.Options{}); return err }, "field P: type *int has no Parquet column type"},
		{"duplicate column", func() error { _, err := parquet.NewSink[dup](dir, parquet.Options{}); return err }, `fields A and B are both column "x"`},
		{"compression", func() error { _, err := parquet.NewSink[event](dir, parquet.Options{Compression: "lzo"}); return err }, `unknown compression "lzo"`},
		{"row groups", func() error { _, err := parquet.NewSink[event](dir, parquet.Options{RowGroupRows: -1}); return err }, "negative row group size"},
		{"prefix", func() error { _, err := parquet.NewSink[event](dir, parquet.Options{Prefix: "_x"}); return err }, `file prefix "_x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.new()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("got %v, want an error naming %s and containing %q", err, dir, tc.want)
			}
		})
	}
}

func TestSinkIOErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	newSink, _ := parquet.NewSink[event](file, parquet.Options{})
	if err := newSink().Open(connector.InitContext[filesystem.Committable]{RunToken: "r"}); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("a sink path that is a file: %v", err)
	}
	gone := filepath.Join(dir, "gone")
	newSink, _ = parquet.NewSink[event](gone, parquet.Options{})
	s := newSink()
	if err := s.Open(connector.InitContext[filesystem.Committable]{RunToken: "r"}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	os.RemoveAll(gone)
	if err := s.Write(eventOf(1)); err == nil || !strings.Contains(err.Error(), gone) {
		t.Errorf("writing into a removed directory: %v", err)
	}
}

func TestCloseDiscardsUnstaged(t *testing.T) {
	dir := t.TempDir()
	newSink, _ := parquet.NewSink[event](dir, parquet.Options{RowGroupRows: 2})
	s := newSink()
	if err := s.Open(connector.InitContext[filesystem.Committable]{RunToken: "r"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := s.Write(eventOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("close left %d files", len(entries))
	}
}
