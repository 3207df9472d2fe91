package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/clinkstream/clink/checkpoint"
)

const testDir = "/ckpt"

// layout creates names under testDir: "chk-N/" makes a directory, anything
// else an empty file (a "chk-N/x.snap" path creates the directory too).
func layout(t *testing.T, fs vfs.FS, names ...string) {
	t.Helper()
	for _, n := range names {
		p := fs.PathJoin(testDir, n)
		if strings.HasSuffix(n, "/") {
			if err := fs.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := fs.MkdirAll(fs.PathDir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

func openTest(t *testing.T, fs vfs.FS, opts Options) *Store {
	t.Helper()
	opts.FS = fs
	s, err := Open(testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func names(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	ns, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ns)
	return ns
}

func TestOpenCreatesDirectory(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	if s.Dir() != testDir {
		t.Fatalf("Dir() = %q", s.Dir())
	}
	if st, err := fs.Stat(testDir); err != nil || !st.IsDir() {
		t.Fatalf("checkpoint directory not created: %v", err)
	}
	if got := names(t, fs, testDir); len(got) != 0 {
		t.Fatalf("fresh directory holds %q, want nothing (receipts/ is lazy)", got)
	}
	if _, err := Open(testDir, Options{FS: fs, Retain: -1}); err == nil {
		t.Fatal("Open with Retain -1 succeeded")
	}
}

func TestNextID(t *testing.T) {
	for _, tt := range []struct {
		name  string
		names []string
		want  checkpoint.ID
	}{
		{"empty", nil, 1},
		{"incomplete chk dir without marker", []string{"COMPLETED-2", "chk-2/", "chk-5/"}, 6},
		{"chk dir with a temp file only", []string{"chk-9/.a-0.snap.part"}, 10},
		{"completed marker above dirs", []string{"chk-3/", "COMPLETED-7"}, 8},
		{"confirmed marker above all", []string{"chk-3/", "COMPLETED-3", "CONFIRMED-9"}, 10},
		{"noise ignored", []string{
			"chk-4/", "chk-x/", "chk-0/", "chk-07/", "COMPLETED-05", "COMPLETED-",
			".COMPLETED-20.part", "receipts/", "chk-18446744073709551615/", "other-99",
		}, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs := vfs.NewMem()
			layout(t, fs, tt.names...)
			s := openTest(t, fs, Options{})
			if got := s.NextID(); got != tt.want {
				t.Fatalf("NextID() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestNextIDMonotonic(t *testing.T) {
	fs := vfs.NewMem()
	layout(t, fs, "chk-2/", "COMPLETED-2")
	s := openTest(t, fs, Options{Retain: 1})
	if got := s.NextID(); got != 3 {
		t.Fatalf("NextID() = %d, want 3", got)
	}
	if got := s.NextID(); got != 3 {
		t.Fatalf("NextID() again = %d, want 3 (it does not reserve)", got)
	}
	if _, err := s.WriteSnapshot(12, "a-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := s.NextID(); got != 13 {
		t.Fatalf("NextID() after writing 12 = %d, want 13", got)
	}
	// Discarding the newest id must not lower NextID: its id was used.
	if err := s.Discard(12); err != nil {
		t.Fatal(err)
	}
	if got := s.NextID(); got != 13 {
		t.Fatalf("NextID() after discarding 12 = %d, want 13", got)
	}
	// A lower write does not lower it either.
	if _, err := s.WriteSnapshot(5, "a-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteCompleted(5); err != nil {
		t.Fatal(err)
	}
	if got := s.NextID(); got != 13 {
		t.Fatalf("NextID() after writing 5 = %d, want 13", got)
	}
	// A reopened store sees only what is durable: chk-5 and its marker.
	if got := openTest(t, fs, Options{}).NextID(); got != 6 {
		t.Fatalf("NextID() after reopening = %d, want 6", got)
	}
}

func TestWriteAndReadSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	n, err := s.WriteSnapshot(1, "map-0", []byte("state"))
	if err != nil || n != 5 {
		t.Fatalf("WriteSnapshot = %d, %v; want 5, nil", n, err)
	}
	if got := names(t, fs, "/ckpt/chk-1"); !slices.Equal(got, []string{"map-0.snap"}) {
		t.Fatalf("chk-1 holds %q", got)
	}
	b, err := s.ReadSnapshot(1, "map-0")
	if err != nil || string(b) != "state" {
		t.Fatalf("ReadSnapshot = %q, %v", b, err)
	}
	_, err = s.ReadSnapshot(1, "map-1")
	if err == nil || !strings.Contains(err.Error(), "/ckpt/chk-1/map-1.snap") {
		t.Fatalf("ReadSnapshot of a missing file: err = %v, want one naming /ckpt/chk-1/map-1.snap", err)
	}
	if strings.Count(err.Error(), "/ckpt/chk-1/map-1.snap") != 1 {
		t.Fatalf("error %q names the path more than once", err)
	}
	for _, bad := range []string{"", ".hidden", "a/b", `a\b`, "../x"} {
		if _, err := s.WriteSnapshot(1, bad, nil); err == nil {
			t.Errorf("WriteSnapshot with name %q succeeded", bad)
		}
	}
	if _, err := s.WriteSnapshot(0, "a-0", nil); err == nil {
		t.Error("WriteSnapshot with id 0 succeeded")
	}
}

func TestReadTaskSnapshotChecksWhereItLies(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	snap := &TaskSnapshot{Checkpoint: 2, Task: "map-0", Parallelism: 1, MaxParallelism: 1}
	if _, err := s.WriteTaskSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadTaskSnapshot(2, "map-0")
	if err != nil || got.Task != "map-0" {
		t.Fatalf("ReadTaskSnapshot = %+v, %v", got, err)
	}
	// The same bytes under another checkpoint's id are refused.
	if _, err := s.WriteSnapshot(3, "map-0", snap.Marshal()); err != nil {
		t.Fatal(err)
	}
	_, err = s.ReadTaskSnapshot(3, "map-0")
	if err == nil || !strings.Contains(err.Error(), "checkpoint 2") {
		t.Fatalf("err = %v, want a mismatch naming checkpoint 2", err)
	}
	if _, err := s.WriteSnapshot(4, "map-0", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	_, err = s.ReadTaskSnapshot(4, "map-0")
	if err == nil || !strings.HasPrefix(err.Error(), "decoding snapshot /ckpt/chk-4/map-0.snap: ") {
		t.Fatalf("err = %v, want one starting with the path", err)
	}
	if _, err := s.WriteTaskSnapshot(&TaskSnapshot{Checkpoint: 5, Task: "x-0"}); err == nil {
		t.Fatal("WriteTaskSnapshot of an invalid snapshot succeeded")
	}
}

func TestMarkers(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	if err := s.WriteCompleted(1); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("WriteCompleted without chk-1: err = %v", err)
	}
	if _, err := s.WriteSnapshot(1, "a-0", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteConfirmed(1); err == nil {
		t.Fatal("WriteConfirmed of an uncompleted checkpoint succeeded")
	}
	if err := s.WriteCompleted(1); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteConfirmed(1); err != nil {
		t.Fatal(err)
	}
	if got := names(t, fs, testDir); !slices.Equal(got, []string{"COMPLETED-1", "CONFIRMED-1", "chk-1"}) {
		t.Fatalf("directory holds %q", got)
	}
	c, err := s.Completed()
	if err != nil || !slices.Equal(c, []checkpoint.ID{1}) {
		t.Fatalf("Completed() = %v, %v", c, err)
	}
	c, err = s.Confirmed()
	if err != nil || !slices.Equal(c, []checkpoint.ID{1}) {
		t.Fatalf("Confirmed() = %v, %v", c, err)
	}
}

func TestResolve(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	if _, err := s.Resolve("latest"); err == nil || err.Error() != "no completed checkpoint in /ckpt" {
		t.Fatalf("Resolve(latest) on an empty dir: err = %v", err)
	}
	layout(t, fs, "chk-2/", "COMPLETED-2", "chk-3/", "COMPLETED-3", "chk-4/", "CONFIRMED-2", "COMPLETED-10", "chk-10/")
	for _, tt := range []struct {
		spec    string
		want    checkpoint.ID
		wantErr string
	}{
		{spec: "latest", want: 10},
		{spec: "2", want: 2},
		{spec: "3", want: 3},
		{spec: "4", wantErr: "checkpoint 4 in /ckpt is not completed (completed: 2, 3, 10)"},
		{spec: "99", wantErr: "checkpoint 99 in /ckpt is not completed"},
		{spec: "0", wantErr: `invalid checkpoint to restore "0"`},
		{spec: "-1", wantErr: `invalid checkpoint to restore "-1"`},
		{spec: "+2", wantErr: `invalid checkpoint to restore "+2"`},
		{spec: " 2", wantErr: "invalid checkpoint"},
		{spec: "", wantErr: "invalid checkpoint"},
		{spec: "Latest", wantErr: `want "latest" or a checkpoint id`},
	} {
		got, err := s.Resolve(tt.spec)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Resolve(%q) = %d, %v; want error containing %q", tt.spec, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %d, %v; want %d", tt.spec, got, err, tt.want)
		}
	}
}

func TestSnapshotsAndList(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	for _, w := range []struct {
		id   checkpoint.ID
		name string
		size int
	}{{1, "b-0", 3}, {1, "a-1", 10}, {1, "a-0", 7}, {2, "a-0", 1}} {
		if _, err := s.WriteSnapshot(w.id, w.name, make([]byte, w.size)); err != nil {
			t.Fatal(err)
		}
	}
	layout(t, fs, "chk-1/.c-0.snap.part", "chk-1/notes.txt", "COMPLETED-1", "CONFIRMED-1", "COMPLETED-3")
	files, err := s.Snapshots(1)
	if err != nil {
		t.Fatal(err)
	}
	want := []FileInfo{{"a-0.snap", 7}, {"a-1.snap", 10}, {"b-0.snap", 3}}
	if !slices.Equal(files, want) {
		t.Fatalf("Snapshots(1) = %v, want %v", files, want)
	}
	if _, err := s.Snapshots(7); err == nil || !strings.Contains(err.Error(), "/ckpt/chk-7") {
		t.Fatalf("Snapshots of a missing checkpoint: err = %v", err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(list)
	wantList := "[{1 true true true [{a-0.snap 7} {a-1.snap 10} {b-0.snap 3}] 20} " +
		"{2 false false true [{a-0.snap 1}] 1} {3 true false false [] 0}]"
	if got != wantList {
		t.Fatalf("List() =\n  %s\nwant\n  %s", got, wantList)
	}
}

func TestDiscard(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	for _, id := range []checkpoint.ID{1, 2} {
		if _, err := s.WriteSnapshot(id, "a-0", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteCompleted(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(1); err == nil || !strings.Contains(err.Error(), "completed") {
		t.Fatalf("Discard of a completed checkpoint: err = %v", err)
	}
	if !exists(t, fs, "/ckpt/chk-1/a-0.snap") {
		t.Fatal("refused Discard removed the snapshot")
	}
	if err := s.Discard(2); err != nil {
		t.Fatal(err)
	}
	if exists(t, fs, "/ckpt/chk-2") {
		t.Fatal("chk-2 still exists after Discard")
	}
	if _, err := s.WriteSnapshot(2, "a-1", []byte("late")); err == nil {
		t.Fatal("a late snapshot write recreated a discarded checkpoint")
	}
	if exists(t, fs, "/ckpt/chk-2") {
		t.Fatal("chk-2 recreated")
	}
	if err := s.Discard(9); err != nil {
		t.Fatalf("Discard of an id with no directory: %v", err)
	}
}

func TestRetention(t *testing.T) {
	fs := vfs.NewMem()
	// Completed: 2 3 5 6 7 (2 and 6 confirmed); incomplete: 1 4 8 9;
	// 11 has a stray CONFIRMED without COMPLETED and no directory.
	layout(t, fs,
		"chk-1/a-0.snap", "chk-2/a-0.snap", "chk-3/a-0.snap", "chk-4/a-0.snap", "chk-5/a-0.snap",
		"chk-6/a-0.snap", "chk-7/a-0.snap", "chk-8/a-0.snap", "chk-9/",
		"COMPLETED-2", "COMPLETED-3", "COMPLETED-5", "COMPLETED-6", "COMPLETED-7",
		"CONFIRMED-2", "CONFIRMED-6", ".COMPLETED-8.part", "receipts/")
	var logBuf bytes.Buffer
	s := openTest(t, fs, Options{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	if err := s.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"COMPLETED-5", "COMPLETED-6", "COMPLETED-7", "CONFIRMED-6",
		"chk-5", "chk-6", "chk-7", "chk-8", "chk-9", "receipts",
	}
	if got := names(t, fs, testDir); !slices.Equal(got, want) {
		t.Fatalf("after retention:\n  %q\nwant\n  %q", got, want)
	}
	if !strings.Contains(logBuf.String(), "removed_completed=\"2, 3\"") ||
		!strings.Contains(logBuf.String(), "removed_incomplete=\"1, 4\"") {
		t.Fatalf("log %q does not report what was removed", logBuf.String())
	}
	// Idempotent, and NextID is unchanged.
	if err := s.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, fs, testDir); !slices.Equal(got, want) {
		t.Fatalf("second retention changed the directory: %q", got)
	}
	if got := s.NextID(); got != 10 {
		t.Fatalf("NextID() = %d, want 10", got)
	}
}

func TestRetentionKeepsNewerIncomplete(t *testing.T) {
	fs := vfs.NewMem()
	layout(t, fs, "chk-1/a-0.snap", "COMPLETED-1", "chk-2/a-0.snap", "chk-3/a-0.snap")
	s := openTest(t, fs, Options{Retain: 1})
	if err := s.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	want := []string{"COMPLETED-1", "chk-1", "chk-2", "chk-3"}
	if got := names(t, fs, testDir); !slices.Equal(got, want) {
		t.Fatalf("after retention %q, want %q", got, want)
	}
}

func TestRetentionWithoutCompletedRemovesNothing(t *testing.T) {
	fs := vfs.NewMem()
	layout(t, fs, "chk-1/a-0.snap", "chk-2/")
	s := openTest(t, fs, Options{Retain: 1})
	if err := s.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, fs, testDir); !slices.Equal(got, []string{"chk-1", "chk-2"}) {
		t.Fatalf("after retention %q", got)
	}
}

func TestRetentionFloor(t *testing.T) {
	fs := vfs.NewMem()
	layout(t, fs,
		"chk-1/", "chk-2/", "chk-3/", "chk-4/", "chk-5/", "chk-6/",
		"COMPLETED-1", "COMPLETED-2", "COMPLETED-4", "COMPLETED-5", "COMPLETED-6", "CONFIRMED-2")
	s := openTest(t, fs, Options{Retain: 2})
	// The newest confirmed checkpoint, 2, is the restore point: keep it and
	// everything above, including incomplete 3.
	if err := s.ApplyRetentionFloor(2); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"COMPLETED-2", "COMPLETED-4", "COMPLETED-5", "COMPLETED-6", "CONFIRMED-2",
		"chk-2", "chk-3", "chk-4", "chk-5", "chk-6",
	}
	if got := names(t, fs, testDir); !slices.Equal(got, want) {
		t.Fatalf("after retention with floor 2:\n  %q\nwant\n  %q", got, want)
	}
	// A floor above the retained range changes nothing.
	if err := s.ApplyRetentionFloor(6); err != nil {
		t.Fatal(err)
	}
	want = []string{"COMPLETED-5", "COMPLETED-6", "chk-5", "chk-6"}
	if got := names(t, fs, testDir); !slices.Equal(got, want) {
		t.Fatalf("after retention with floor 6:\n  %q\nwant\n  %q", got, want)
	}
}

func TestReceiptsDirIsLazy(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	if exists(t, fs, "/ckpt/receipts") {
		t.Fatal("receipts/ created by Open")
	}
	dir, err := s.ReceiptsDir()
	if err != nil || dir != "/ckpt/receipts" {
		t.Fatalf("ReceiptsDir() = %q, %v", dir, err)
	}
	if st, err := fs.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("receipts/ not created: %v", err)
	}
	if got := s.NextID(); got != 1 {
		t.Fatalf("NextID() = %d with only receipts/", got)
	}
}

// TestConcurrentSnapshotWrites runs subtasks writing one checkpoint in
// parallel with the coordinator reading ids; run with -race.
func TestConcurrentSnapshotWrites(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	const tasks = 16
	var wg sync.WaitGroup
	for i := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := checkpoint.ID(1); id <= 3; id++ {
				if _, err := s.WriteSnapshot(id, SnapshotName("map", i), []byte{byte(i)}); err != nil {
					t.Error(err)
				}
				_ = s.NextID()
			}
		}()
	}
	wg.Wait()
	for id := checkpoint.ID(1); id <= 3; id++ {
		files, err := s.Snapshots(id)
		if err != nil || len(files) != tasks {
			t.Fatalf("checkpoint %d has %d files (%v), want %d", id, len(files), err, tasks)
		}
	}
	if got := s.NextID(); got != 4 {
		t.Fatalf("NextID() = %d, want 4", got)
	}
}

func syncFailFS(mem vfs.FS, path string) vfs.FS {
	return errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSync && op.Path == path {
			return errorfs.ErrInjected
		}
		return nil
	}))
}

// TestRetentionStopsWhenMarkerRemovalIsNotSynced pins that no snapshot is
// removed while the removal of its marker may not be durable.
func TestRetentionStopsWhenMarkerRemovalIsNotSynced(t *testing.T) {
	t.Setenv(FsyncEnvVar, "1")
	mem := vfs.NewMem()
	layout(t, mem, "chk-1/a-0.snap", "COMPLETED-1", "chk-2/a-0.snap", "COMPLETED-2")
	s := openTest(t, syncFailFS(mem, testDir), Options{Retain: 1})
	err := s.ApplyRetention()
	if !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("ApplyRetention() = %v, want the sync error", err)
	}
	if !exists(t, mem, "/ckpt/chk-1/a-0.snap") {
		t.Fatal("snapshot of checkpoint 1 removed although its marker removal was not synced")
	}
}

func TestIgnoredDirSyncIsLogged(t *testing.T) {
	t.Setenv(FsyncEnvVar, "1")
	mem := vfs.NewMem()
	var logBuf bytes.Buffer
	s := openTest(t, syncFailFS(mem, "/ckpt/chk-1"), Options{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	if _, err := s.WriteSnapshot(1, "a-0", []byte("x")); err != nil {
		t.Fatalf("WriteSnapshot with a failing directory sync: %v", err)
	}
	if !strings.Contains(logBuf.String(), "level=WARN") || !strings.Contains(logBuf.String(), "/ckpt/chk-1/a-0.snap") {
		t.Fatalf("log %q lacks a warning naming the file", logBuf.String())
	}
}
