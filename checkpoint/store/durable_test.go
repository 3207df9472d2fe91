package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/clinkstream/clink/internal/fault"
)

var errRecInjected = errors.New("recorded injected error")

// recFS records the file operations that change state or sync it, and can
// fail the n-th of them (including a close, which errorfs never fails).
type recFS struct {
	vfs.FS
	mu     sync.Mutex
	ops    []string
	failAt int // 1-based index into ops; 0 fails nothing
}

func newRecFS() *recFS { return &recFS{FS: vfs.NewMem()} }

func (r *recFS) record(format string, args ...any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, fmt.Sprintf(format, args...))
	if len(r.ops) == r.failAt {
		return errRecInjected
	}
	return nil
}

func (r *recFS) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops = nil
	return ops
}

func (r *recFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := r.record("create %s", name); err != nil {
		return nil, err
	}
	f, err := r.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return &recFile{File: f, fs: r, name: name}, nil
}

func (r *recFS) OpenDir(name string) (vfs.File, error) {
	if err := r.record("opendir %s", name); err != nil {
		return nil, err
	}
	f, err := r.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &recFile{File: f, fs: r, name: name}, nil
}

func (r *recFS) Rename(oldname, newname string) error {
	if err := r.record("rename %s %s", oldname, newname); err != nil {
		return err
	}
	return r.FS.Rename(oldname, newname)
}

func (r *recFS) Remove(name string) error {
	if err := r.record("remove %s", name); err != nil {
		return err
	}
	return r.FS.Remove(name)
}

func (r *recFS) RemoveAll(name string) error {
	if err := r.record("removeall %s", name); err != nil {
		return err
	}
	return r.FS.RemoveAll(name)
}

func (r *recFS) MkdirAll(name string, perm os.FileMode) error {
	if err := r.record("mkdir %s", name); err != nil {
		return err
	}
	return r.FS.MkdirAll(name, perm)
}

type recFile struct {
	vfs.File
	fs   *recFS
	name string
}

func (f *recFile) Write(p []byte) (int, error) {
	if err := f.fs.record("write %s %d", f.name, len(p)); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *recFile) Sync() error {
	if err := f.fs.record("sync %s", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *recFile) Close() error {
	err := f.File.Close()
	if rerr := f.fs.record("close %s", f.name); rerr != nil {
		return rerr
	}
	return err
}

func exists(t *testing.T, fs vfs.FS, path string) bool {
	t.Helper()
	_, err := fs.Stat(path)
	return err == nil
}

func readAll(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return buf.Bytes()
}

func TestFsyncEnabled(t *testing.T) {
	for _, tt := range []struct {
		val  string
		want bool
	}{
		{"", true}, {"1", true}, {"true", true}, {"yes", true},
		{"0", false}, {"false", false}, {"FALSE", false}, {"False", false}, {"00", true},
	} {
		t.Setenv(FsyncEnvVar, tt.val)
		if got := FsyncEnabled(); got != tt.want {
			t.Errorf("FsyncEnabled() with %s=%q = %v, want %v", FsyncEnvVar, tt.val, got, tt.want)
		}
	}
}

var durableSeqFsync = []string{
	"create /d/.f.part",
	"write /d/.f.part 5",
	"sync /d/.f.part",
	"close /d/.f.part",
	"rename /d/.f.part /d/f",
	"opendir /d",
	"sync /d",
	"close /d",
}

var durableSeqNoFsync = []string{
	"create /d/.f.part",
	"write /d/.f.part 5",
	"close /d/.f.part",
	"rename /d/.f.part /d/f",
}

func TestWriteFileDurableSequence(t *testing.T) {
	for _, tt := range []struct {
		fsync bool
		want  []string
	}{{true, durableSeqFsync}, {false, durableSeqNoFsync}} {
		t.Run(fmt.Sprintf("fsync=%v", tt.fsync), func(t *testing.T) {
			fs := newRecFS()
			if err := fs.MkdirAll("/d", 0o755); err != nil {
				t.Fatal(err)
			}
			fs.take()
			if err := WriteFileDurable(fs, "/d/f", []byte("hello"), tt.fsync); err != nil {
				t.Fatal(err)
			}
			if got := fs.take(); !slices.Equal(got, tt.want) {
				t.Fatalf("operations:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if got := readAll(t, fs, "/d/f"); string(got) != "hello" {
				t.Fatalf("content = %q, want hello", got)
			}
		})
	}
}

func TestWriteFileDurableLargeWriteInChunks(t *testing.T) {
	fs := newRecFS()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), (2*writeChunk+100)/16)
	if err := WriteFileDurable(fs, "/d/f", data, true); err != nil {
		t.Fatal(err)
	}
	var writes int
	for _, op := range fs.take() {
		if strings.HasPrefix(op, "write ") {
			writes++
		}
	}
	if writes != 3 {
		t.Fatalf("%d writes for %d bytes, want 3", writes, len(data))
	}
	if got := readAll(t, fs, "/d/f"); !bytes.Equal(got, data) {
		t.Fatalf("content differs (%d bytes, want %d)", len(got), len(data))
	}
}

// TestWriteFileDurableFailEachStep fails each operation of the sequence in
// turn. Up to and including the rename, the write fails and leaves neither
// the final nor the temp file (nor an old file's content changed); the
// directory sync after it is best effort.
func TestWriteFileDurableFailEachStep(t *testing.T) {
	for i := 1; i <= len(durableSeqFsync); i++ {
		t.Run(durableSeqFsync[i-1], func(t *testing.T) {
			for _, withOld := range []bool{false, true} {
				fs := newRecFS()
				if err := fs.MkdirAll("/d", 0o755); err != nil {
					t.Fatal(err)
				}
				if withOld {
					if err := WriteFileDurable(fs, "/d/f", []byte("old"), true); err != nil {
						t.Fatal(err)
					}
				}
				fs.take()
				fs.failAt = i
				err := WriteFileDurable(fs, "/d/f", []byte("hello"), true)
				ops := fs.take()
				if exists(t, fs, "/d/.f.part") {
					t.Fatalf("temp file left behind; operations %q", ops)
				}
				renamed := i > 5
				if !renamed {
					if !errors.Is(err, errRecInjected) {
						t.Fatalf("err = %v, want the injected error", err)
					}
					// The failed step, then the cleanup: close the temp
					// file if the failure left it open, then remove it.
					want := slices.Clone(durableSeqFsync[:i])
					switch i {
					case 1: // nothing was created
					case 2, 3: // write or sync failed with the file open
						want = append(want, "close /d/.f.part", "remove /d/.f.part")
					default:
						want = append(want, "remove /d/.f.part")
					}
					if !slices.Equal(ops, want) {
						t.Fatalf("operations %q, want %q", ops, want)
					}
					if withOld {
						if got := readAll(t, fs, "/d/f"); string(got) != "old" {
							t.Fatalf("old file now holds %q", got)
						}
					} else if exists(t, fs, "/d/f") {
						t.Fatal("final file exists after a failed write")
					}
					return
				}
				if err != nil {
					t.Fatalf("a failed directory sync must be ignored, got %v", err)
				}
				if got := readAll(t, fs, "/d/f"); string(got) != "hello" {
					t.Fatalf("content = %q, want hello", got)
				}
			}
		})
	}
}

func TestWriteFileDurableErrorFS(t *testing.T) {
	for _, tt := range []struct {
		kind    errorfs.OpKind
		wantErr bool
	}{
		{errorfs.OpCreate, true},
		{errorfs.OpFileWrite, true},
		{errorfs.OpFileSync, true},
		{errorfs.OpRename, true},
		{errorfs.OpOpenDir, false},
	} {
		t.Run(fmt.Sprint(tt.kind), func(t *testing.T) {
			mem := vfs.NewMem()
			if err := mem.MkdirAll("/d", 0o755); err != nil {
				t.Fatal(err)
			}
			var toggle errorfs.Toggle
			toggle.Injector = errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind == tt.kind {
					return errorfs.ErrInjected
				}
				return nil
			})
			fs := errorfs.Wrap(mem, &toggle)
			toggle.On()
			err := WriteFileDurable(fs, "/d/f", []byte("hello"), true)
			toggle.Off()
			if exists(t, mem, "/d/.f.part") {
				t.Fatal("temp file left behind")
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("err = %v, want nil (directory sync is best effort)", err)
				}
				if !exists(t, mem, "/d/f") {
					t.Fatal("final file missing")
				}
				return
			}
			if !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("err = %v, want the injected error", err)
			}
			if !strings.Contains(err.Error(), "/d/") {
				t.Fatalf("error %q does not name the file", err)
			}
			if exists(t, mem, "/d/f") {
				t.Fatal("final file exists after a failed write")
			}
		})
	}
}

func TestWriteFileDurableFaultPoints(t *testing.T) {
	errHook := errors.New("hook")
	for _, tt := range []struct {
		point     string
		wantFinal bool
		wantOps   []string
	}{
		{FaultBeforeSync, false, []string{"create /d/.f.part", "write /d/.f.part 5", "close /d/.f.part", "remove /d/.f.part"}},
		{FaultBeforeRename, false, []string{"create /d/.f.part", "write /d/.f.part 5", "sync /d/.f.part", "close /d/.f.part", "remove /d/.f.part"}},
		{FaultAfterRename, true, []string{"create /d/.f.part", "write /d/.f.part 5", "sync /d/.f.part", "close /d/.f.part", "rename /d/.f.part /d/f"}},
	} {
		t.Run(tt.point, func(t *testing.T) {
			fs := newRecFS()
			if err := fs.MkdirAll("/d", 0o755); err != nil {
				t.Fatal(err)
			}
			fs.take()
			restore := fault.Set(tt.point, func() error { return errHook })
			err := WriteFileDurable(fs, "/d/f", []byte("hello"), true)
			restore()
			if !errors.Is(err, errHook) {
				t.Fatalf("err = %v, want the hook's error", err)
			}
			if got := fs.take(); !slices.Equal(got, tt.wantOps) {
				t.Fatalf("operations %q, want %q", got, tt.wantOps)
			}
			if exists(t, fs, "/d/.f.part") {
				t.Fatal("temp file left behind")
			}
			if exists(t, fs, "/d/f") != tt.wantFinal {
				t.Fatalf("final file exists = %v, want %v", !tt.wantFinal, tt.wantFinal)
			}
		})
	}
}

func TestWriteFileDurableFaultPointsReachedWithoutFsync(t *testing.T) {
	var reached []string
	for _, p := range []string{FaultBeforeSync, FaultBeforeRename, FaultAfterRename} {
		defer fault.Set(p, func() error { reached = append(reached, p); return nil })()
	}
	fs := vfs.NewMem()
	if err := WriteFileDurable(fs, "f", []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	want := []string{FaultBeforeSync, FaultBeforeRename, FaultAfterRename}
	if !slices.Equal(reached, want) {
		t.Fatalf("fault points reached %q, want %q", reached, want)
	}
}

// TestWriteFileDurableKeepsCallerData pins that the caller's slice is not
// modified; MemFS scribbles over written buffers under the race detector.
func TestWriteFileDurableKeepsCallerData(t *testing.T) {
	fs := vfs.NewMem()
	data := []byte("snapshot bytes")
	want := bytes.Clone(data)
	if err := WriteFileDurable(fs, "f", data, true); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("caller's data changed to %q", data)
	}
	if got := readAll(t, fs, "f"); !bytes.Equal(got, want) {
		t.Fatalf("file holds %q", got)
	}
}

func TestWriteFileDurableRealFS(t *testing.T) {
	dir := t.TempDir()
	path := vfs.Default.PathJoin(dir, "f")
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteFileDurable(vfs.Default, path, []byte(content), true); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, vfs.Default, path); string(got) != content {
			t.Fatalf("content = %q, want %q", got, content)
		}
	}
	names, err := vfs.Default.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"f"}) {
		t.Fatalf("directory holds %q, want only f", names)
	}
	if err := WriteFileDurable(vfs.Default, vfs.Default.PathJoin(dir, "missing", "f"), nil, true); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

// TestWriteSnapshotParts writes a snapshot with a large in-flight part: the
// file holds Marshal's bytes, written in writeChunk pieces through the
// scratch buffer (MemFS scribbles over written buffers under the race
// detector), and the snapshot's records are left intact.
func TestWriteSnapshotParts(t *testing.T) {
	fs := newRecFS()
	s := openTest(t, fs, Options{})
	records := bytes.Repeat([]byte("0123456789abcdef"), (2*writeChunk+100)/16)
	snap := &TaskSnapshot{
		Checkpoint: 1, Task: "sink-0", Parallelism: 1, MaxParallelism: 8,
		Operators: []OperatorSnapshot{{UID: "sink", Watermark: NoWatermark, InFlight: []InFlight{{Input: 1, Records: 7, Data: records}}}},
	}
	want := snap.Marshal()
	fs.take()
	n, err := s.WriteTaskSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(want)) {
		t.Fatalf("WriteTaskSnapshot wrote %d bytes, want %d", n, len(want))
	}
	var writes []string
	for _, op := range fs.take() {
		if strings.HasPrefix(op, "write ") {
			writes = append(writes, op)
		}
	}
	tmp := testDir + "/chk-1/.sink-0.snap.part"
	wantWrites := []string{
		fmt.Sprintf("write %s %d", tmp, writeChunk),
		fmt.Sprintf("write %s %d", tmp, writeChunk),
		fmt.Sprintf("write %s %d", tmp, len(want)-2*writeChunk),
	}
	if !slices.Equal(writes, wantWrites) {
		t.Fatalf("writes %q, want %q", writes, wantWrites)
	}
	if got := readAll(t, fs, s.SnapshotPath(1, "sink-0")); !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes that differ from Marshal's %d", len(got), len(want))
	}
	if !bytes.Equal(snap.Marshal(), want) {
		t.Fatal("writing the snapshot changed its records")
	}
}

// TestWriteSnapshotPartsRealFS writes parts below and above writeChunk on
// the operating system's filesystem.
func TestWriteSnapshotPartsRealFS(t *testing.T) {
	s, err := Open(t.TempDir(), Options{FS: vfs.Default})
	if err != nil {
		t.Fatal(err)
	}
	parts := [][]byte{[]byte("head"), bytes.Repeat([]byte{1}, writeChunk), []byte("mid"), bytes.Repeat([]byte{2}, 3*writeChunk+5), {}, []byte("tail")}
	want := bytes.Join(parts, nil)
	keep := bytes.Clone(want)
	n, err := s.WriteSnapshotParts(3, "a-0", parts)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(want)) {
		t.Fatalf("wrote %d bytes, want %d", n, len(want))
	}
	got, err := s.ReadSnapshot(3, "a-0")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || !bytes.Equal(bytes.Join(parts, nil), keep) {
		t.Fatal("the file or the parts differ from what was given")
	}
}
