package store

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clinkstream/clink/checkpoint"
)

func catFixture(t *testing.T) vfs.FS {
	t.Helper()
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	src := func(id checkpoint.ID, off string) *TaskSnapshot {
		return &TaskSnapshot{
			Checkpoint: id, Task: "src-0", Parallelism: 1, MaxParallelism: 128,
			Operators: []OperatorSnapshot{{
				UID: "src", Offset: []byte(off), OffsetText: "file=/in.csv offset=" + off, Watermark: math.MinInt64,
			}},
		}
	}
	agg := func(id checkpoint.ID) *TaskSnapshot {
		return &TaskSnapshot{
			Checkpoint: id, Task: "agg-1", Subtask: 1, Parallelism: 2, MaxParallelism: 128,
			Operators: []OperatorSnapshot{
				{
					UID: "agg", Watermark: 1000,
					KeyGroups: []KeyGroupState{
						{KeyGroup: 64, Entries: 2, Data: []byte("0123456789")},
						{KeyGroup: 70, Entries: 3, Data: []byte("abcde")},
					},
					InFlight: []InFlight{{Input: 0, Records: 4, Data: []byte("rrrr")}, {Input: 1, Records: 0}},
				},
				{
					UID: "sink", Watermark: 990,
					OperatorState: []NamedState{{Name: "txn", Data: []byte("t1")}, {Name: "pending"}},
				},
			},
		}
	}
	for _, snap := range []*TaskSnapshot{src(1, "100"), agg(1), src(2, "250"), agg(2), src(3, "400")} {
		if _, err := s.WriteTaskSnapshot(snap); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []checkpoint.ID{1, 2} {
		if err := s.WriteCompleted(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteConfirmed(1); err != nil {
		t.Fatal(err)
	}
	return fs
}

func catString(t *testing.T, fs vfs.FS, id *checkpoint.ID) (string, error) {
	t.Helper()
	var b strings.Builder
	err := Cat(&b, testDir, id, CatOptions{FS: fs})
	return b.String(), err
}

func idp(id checkpoint.ID) *checkpoint.ID { return &id }

func TestCatList(t *testing.T) {
	fs := catFixture(t)
	got, err := catString(t, fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `ID  COMPLETED  CONFIRMED  FILES  BYTES
1   yes        yes        2      167
2   yes        no         2      167
3   no         no         1      71

chk-1/
  agg-1.snap  96
  src-0.snap  71

chk-2/
  agg-1.snap  96
  src-0.snap  71

chk-3/
  src-0.snap  71
`
	if got != want {
		t.Fatalf("Cat list:\n%s\nwant:\n%s", got, want)
	}
}

func TestCatCheckpoint(t *testing.T) {
	fs := catFixture(t)
	got, err := catString(t, fs, idp(1))
	if err != nil {
		t.Fatal(err)
	}
	want := `checkpoint 1 in /ckpt: completed, confirmed, 2 files, 167 bytes

chk-1/agg-1.snap (96 bytes)
  task agg-1: subtask 1 of parallelism 2, max parallelism 128
  operator agg
    watermark:      1000
    keyed state:    2 key groups, 5 entries, 15 bytes
      kg 64: 2 entries, 10 bytes
      kg 70: 3 entries, 5 bytes
    operator state: none
    in-flight:      input 0: 4 records (4 bytes), input 1: 0 records (0 bytes)
  operator sink
    watermark:      990
    keyed state:    0 key groups, 0 entries, 0 bytes
    operator state: txn (2 bytes), pending (0 bytes)
    in-flight:      none

chk-1/src-0.snap (71 bytes)
  task src-0: subtask 0 of parallelism 1, max parallelism 128
  operator src
    offset:         file=/in.csv offset=100
    watermark:      none
    keyed state:    0 key groups, 0 entries, 0 bytes
    operator state: none
    in-flight:      none
`
	if got != want {
		t.Fatalf("Cat 1:\n%s\nwant:\n%s", got, want)
	}
	got, err = catString(t, fs, idp(3))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "checkpoint 3 in /ckpt: not completed, 1 file, 71 bytes\n") {
		t.Fatalf("Cat 3 header: %q", got)
	}
}

func TestCatCorruptFile(t *testing.T) {
	fs := catFixture(t)
	// A damaged file sorts first; the next one must still be printed.
	if err := WriteFileDurable(fs, "/ckpt/chk-2/agg-1.snap", []byte("CLNKSNAP\x00\x01garbage"), false); err != nil {
		t.Fatal(err)
	}
	got, err := catString(t, fs, idp(2))
	if err == nil || err.Error() != "1 of 2 snapshot files of checkpoint 2 in /ckpt could not be read" {
		t.Fatalf("err = %v", err)
	}
	wantLine := "\nchk-2/agg-1.snap (17 bytes)\n  error: decoding snapshot /ckpt/chk-2/agg-1.snap: at byte offset 13: checksum mismatch"
	if !strings.Contains(got, wantLine) {
		t.Fatalf("output lacks %q:\n%s", wantLine, got)
	}
	if !strings.Contains(got, "chk-2/src-0.snap (71 bytes)\n  task src-0:") ||
		!strings.Contains(got, "offset:         file=/in.csv offset=250\n") {
		t.Fatalf("output does not go on past the damaged file:\n%s", got)
	}
}

func TestCatErrors(t *testing.T) {
	fs := catFixture(t)
	if _, err := catString(t, fs, idp(9)); err == nil || err.Error() != "no checkpoint 9 in /ckpt" {
		t.Fatalf("Cat of a missing id: err = %v", err)
	}
	// A marker whose directory is gone is reported, not skipped.
	if err := fs.RemoveAll("/ckpt/chk-2"); err != nil {
		t.Fatal(err)
	}
	out, err := catString(t, fs, idp(2))
	if err == nil || !strings.Contains(out, "error: /ckpt/chk-2 is missing") {
		t.Fatalf("Cat of a checkpoint without directory: err = %v, output %q", err, out)
	}
	list, err := catString(t, fs, nil)
	if err != nil || !strings.Contains(list, "\nchk-2/\n  missing\n") {
		t.Fatalf("list with a missing directory: err = %v, output %q", err, list)
	}

	empty := vfs.NewMem()
	if _, err := catString(t, empty, nil); err == nil || !strings.Contains(err.Error(), "/ckpt") {
		t.Fatalf("Cat of a missing directory: err = %v", err)
	}
	if _, err := empty.Stat(testDir); err == nil {
		t.Fatal("Cat created the checkpoint directory")
	}
	if err := empty.MkdirAll(testDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := catString(t, empty, nil); err != nil || out != "no checkpoints in /ckpt\n" {
		t.Fatalf("Cat of an empty directory = %q, %v", out, err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestCatReportsWriteErrors(t *testing.T) {
	fs := catFixture(t)
	err := Cat(failWriter{}, testDir, nil, CatOptions{FS: fs})
	if err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("err = %v, want the writer's error", err)
	}
}
