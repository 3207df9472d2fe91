package store

import (
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
