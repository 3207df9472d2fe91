package store

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/clinkstream/clink/checkpoint"
)

func TestSharedFilesFollowRetention(t *testing.T) {
	t.Setenv(FsyncEnvVar, "0")
	dir := t.TempDir()
	st, err := Open(dir, Options{Retain: 2})
	if err != nil {
		t.Fatal(err)
	}
	sh := st.Shared()
	local := filepath.Join(t.TempDir(), "sst")
	if err := os.WriteFile(local, []byte("table"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Checkpoint i lists files {a, f<i>}; "a" stays referenced, each f<i>
	// only by its own checkpoint; "orphan" is uploaded but never listed,
	// so the first retention deletes it (see also shared_gc_test.go).
	refs := map[checkpoint.ID][]string{1: {"a", "f1"}, 2: {"a", "f2"}, 3: {"a", "f3"}, 4: {"a", "f4"}}
	// Each is put by the checkpoint that lists it first, which pins it
	// until that checkpoint completes; "orphan" by the Store's own Shared,
	// which pins nothing.
	for id, name := range []string{"orphan", "a", "f1", "f2", "f3", "f4"} {
		put := sh.Put
		if id > 0 {
			put = st.SharedFor(checkpoint.ID(max(id-1, 1))).Put
		}
		if err := put(name, local); err != nil {
			t.Fatal(err)
		}
	}
	for id := checkpoint.ID(1); id <= 4; id++ {
		snap := &TaskSnapshot{Checkpoint: id, Task: "op-0", Parallelism: 1, MaxParallelism: 8,
			Operators: []OperatorSnapshot{{UID: "op", Watermark: NoWatermark,
				OperatorState: []NamedState{{Name: SharedRefsState, Data: FormatSharedRefs(refs[id])}}}}}
		if _, err := st.WriteTaskSnapshot(snap); err != nil {
			t.Fatal(err)
		}
		if err := st.WriteCompleted(id); err != nil {
			t.Fatal(err)
		}
		if err := st.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]bool{"a": true, "f1": false, "f2": false, "f3": true, "f4": true, "orphan": false} {
		if got := sh.Has(name); got != want {
			t.Errorf("shared file %s present = %v, want %v", name, got, want)
		}
	}
	if p, err := sh.Path("a"); err != nil || filepath.Dir(p) != filepath.Join(dir, "shared") {
		t.Errorf("Path(a) = %q, %v", p, err)
	}
	if err := sh.Put("../escape", local); err == nil {
		t.Error("Put accepted a name with a path separator")
	}
}

// TestSharedWrittenAndSizes pins the accounting behind a checkpoint's
// incremental and full sizes: a file counts as written for the checkpoint
// that first stores it (or, from a background write, first pins it), once,
// in the account of the handle it was stored through; Sizes sums what the
// snapshots list.
func TestSharedWrittenAndSizes(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	task, other := st.Shared(), st.Shared()
	write := func(sh *Shared, name string, n int) {
		t.Helper()
		if err := sh.Write(name, func(w io.Writer) error {
			_, err := w.Write(make([]byte, n))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	write(task.For(1), "a", 100)
	write(task.For(1), "b", 30)
	write(other.For(1), "c", 7)
	if got := task.TakeWritten(1); got != 130 {
		t.Fatalf("task wrote %d bytes for checkpoint 1, want 130", got)
	}
	if got := task.TakeWritten(1); got != 0 {
		t.Fatalf("TakeWritten(1) again = %d, want 0 (taken)", got)
	}
	if got := other.TakeWritten(1); got != 7 {
		t.Fatalf("other task wrote %d bytes for checkpoint 1, want 7", got)
	}

	// Checkpoint 2 lists a and b again and adds d: only d is new.
	write(task.For(2), "a", 100)
	if !task.For(2).Has("b") {
		t.Fatal("Has(b) = false")
	}
	write(task.For(2), "d", 5)
	if got := task.TakeWritten(2); got != 5 {
		t.Fatalf("task wrote %d bytes for checkpoint 2, want 5", got)
	}
	if got, err := task.Sizes([]string{"a", "b", "d", "a"}); err != nil || got != 135 {
		t.Fatalf("Sizes = %d, %v; want 135", got, err)
	}
	if _, err := task.Sizes([]string{"a", "missing"}); err == nil {
		t.Fatal("Sizes of a missing file: no error")
	}

	// A background write counts for the first checkpoint that pins it.
	if err := task.For(2).WriteUnpinned("base", func(w io.Writer) error {
		_, err := w.Write(make([]byte, 1000))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := task.TakeWritten(2); got != 0 {
		t.Fatalf("a background write counted %d bytes at once, want 0", got)
	}
	if !task.For(3).Has("base") || !task.For(4).Has("base") {
		t.Fatal("Has(base) = false")
	}
	if got := task.TakeWritten(3); got != 1000 {
		t.Fatalf("checkpoint 3, first to pin the background file, wrote %d bytes, want 1000", got)
	}
	if got := task.TakeWritten(4); got != 0 {
		t.Fatalf("checkpoint 4 wrote %d bytes, want 0 (claimed by 3)", got)
	}
}
