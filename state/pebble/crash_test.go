package pebble_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
)

// The task snapshot of the crash test holds a FileState the way the engine
// stores it: inline files as operator state entries with this prefix, and
// the list of shared files in store.SharedRefsState.
const inlinePrefix = "file:"

func fileStateSnapshot(id checkpoint.ID, fs *state.FileState) *store.TaskSnapshot {
	op := store.OperatorSnapshot{UID: "op", Watermark: store.NoWatermark}
	for _, n := range fs.Named {
		op.OperatorState = append(op.OperatorState, store.NamedState{Name: inlinePrefix + n.Name, Data: n.Data})
	}
	op.OperatorState = append(op.OperatorState, store.NamedState{Name: store.SharedRefsState, Data: store.FormatSharedRefs(fs.Shared)})
	return &store.TaskSnapshot{Checkpoint: id, Task: "op-0", Parallelism: 1, MaxParallelism: 16,
		Operators: []store.OperatorSnapshot{op}}
}

func fileStateOf(snap *store.TaskSnapshot) *state.FileState {
	fs := &state.FileState{}
	for _, n := range snap.Operators[0].OperatorState {
		switch {
		case n.Name == store.SharedRefsState:
			fs.Shared = store.ParseSharedRefs(n.Data)
		case strings.HasPrefix(n.Name, inlinePrefix):
			fs.Named = append(fs.Named, state.NamedData{Name: n.Name[len(inlinePrefix):], Data: n.Data})
		}
	}
	return fs
}

// pebbleCrashRig persists Pebble checkpoints into a store on a crashable
// MemFS and, before every filesystem operation, restores the newest
// completed checkpoint of crash clones of it.
type pebbleCrashRig struct {
	t      *testing.T
	mem    *vfs.MemFS
	seed   uint64
	expect map[checkpoint.ID]map[string]string // completed checkpoints' contents
	// mayFail: without fsync a crash may lose what a marker names, and
	// restore must then fail with an error (counted in failed).
	mayFail bool

	clones, restored, failed int
	violations               []string
}

const crashKeys = 1200

func (r *pebbleCrashRig) check() {
	r.seed++
	// Only what was synced, and every other time a random half of what was
	// not (without fsync: all of it, and a random half).
	cfgs := []vfs.CrashCloneCfg{{}}
	if r.mayFail {
		cfgs = append(cfgs, vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(r.seed, 1))},
			vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(r.seed, 2))})
	} else if r.seed%2 == 0 {
		cfgs = append(cfgs, vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(r.seed, 1))})
	}
	for _, cfg := range cfgs {
		r.clones++
		if v := r.verify(r.mem.CrashClone(cfg)); v != "" {
			r.violations = append(r.violations, v)
		}
	}
}

// verify restores the newest completed checkpoint of a crash clone.
func (r *pebbleCrashRig) verify(fs vfs.FS) string {
	st, err := store.Open("/ckpt", store.Options{FS: fs})
	if err != nil {
		return fmt.Sprintf("reopening the store: %v", err)
	}
	id, err := st.Resolve("latest")
	if err != nil {
		return "" // nothing completed
	}
	snap, err := st.ReadTaskSnapshot(id, "op-0")
	if err != nil {
		if !r.mayFail || !strings.Contains(err.Error(), "op-0.snap") {
			return fmt.Sprintf("checkpoint %d is completed, but: %v", id, err)
		}
		r.failed++
		return ""
	}
	fst := fileStateOf(snap)
	// The backend reads shared files with the operating system: copy the
	// clone's out.
	local := newDirShared(r.t)
	for _, name := range fst.Shared {
		if err := copyOut(fs, "/ckpt/shared/"+name, filepath.Join(local.dir, name)); err != nil && !r.mayFail {
			return fmt.Sprintf("checkpoint %d is completed, but its shared file %s: %v", id, name, err)
		}
	}
	b := pebble.New(testOptions(r.t))
	if err := b.Open(full(16), 16); err != nil {
		r.t.Fatal(err)
	}
	defer b.Close()
	if err := b.RestoreFiles([]*state.FileState{fst}, local); err != nil {
		if !r.mayFail {
			return fmt.Sprintf("restoring completed checkpoint %d: %v", id, err)
		}
		if !strings.Contains(err.Error(), "restoring pebble state") {
			return fmt.Sprintf("restoring checkpoint %d: unclear error %v", id, err)
		}
		r.failed++
		return ""
	}
	got, err := readAll(b)
	if err != nil {
		if !r.mayFail {
			return fmt.Sprintf("reading restored checkpoint %d: %v", id, err)
		}
		r.failed++
		return ""
	}
	if want := r.expect[id]; fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Sprintf("checkpoint %d restored with wrong data (%d entries, want %d)", id, len(got), len(want))
	}
	r.restored++
	return ""
}

func copyOut(fs vfs.FS, from, to string) error {
	in, err := fs.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// readAll reads every key of the crash test, a panic of the typed state
// (a store error) turned into an error.
func readAll(b *pebble.Backend) (out map[string]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			if se, ok := r.(*state.StoreError); ok {
				err = se
				return
			}
			panic(r)
		}
	}()
	v, err := state.NewValue(b, "value", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		return nil, err
	}
	out = map[string]string{}
	for k := range int64(crashKeys) {
		if s, ok := v.Get(k); ok {
			out[fmt.Sprint(k)] = s
		}
	}
	return out, nil
}

func runPebbleCrash(t *testing.T, fsync bool) *pebbleCrashRig {
	if testing.Short() {
		t.Skip("restores a Pebble checkpoint at every filesystem operation")
	}
	t.Setenv(store.FsyncEnvVar, map[bool]string{true: "1", false: "0"}[fsync])
	r := &pebbleCrashRig{t: t, mem: vfs.NewCrashableMem(), expect: map[checkpoint.ID]map[string]string{}, mayFail: !fsync}
	armed := false
	fs := errorfs.Wrap(r.mem, errorfs.InjectorFunc(func(errorfs.Op) error {
		if armed {
			r.check()
		}
		return nil
	}))
	st, err := store.Open("/ckpt", store.Options{FS: fs, Retain: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := openBackend(t, testOptions(t), full(16), 16)
	v, err := state.NewValue(b, "value", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	armed = true
	for id := checkpoint.ID(1); id <= 3; id++ {
		// Each round rewrites a third of the keys with a long value, so
		// that files are replaced and some hold many MemFS blocks.
		for k := range int64(crashKeys) {
			if id == 1 || k%3 == int64(id)%3 {
				s := fmt.Sprintf("%d@%d:%s", k, id, bytes.Repeat([]byte("x"), 50))
				v.Put(k, s)
				want[fmt.Sprint(k)] = s
			}
		}
		c, err := b.Capture()
		if err != nil {
			t.Fatal(err)
		}
		fst, err := c.(state.FileCaptured).PersistFiles(st.SharedFor(id))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.WriteTaskSnapshot(fileStateSnapshot(id, fst)); err != nil {
			t.Fatal(err)
		}
		r.expect[id] = maps(want)
		if err := st.WriteCompleted(id); err != nil {
			t.Fatal(err)
		}
		if err := st.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
	}
	r.check()
	t.Logf("%d crash clones: %d restored the newest completed checkpoint, %d failed with an error, the others had none",
		r.clones, r.restored, r.failed)
	if len(r.violations) > 0 {
		t.Fatalf("%d violations; first: %s", len(r.violations), r.violations[0])
	}
	if r.restored == 0 {
		t.Fatal("no clone restored a checkpoint; the test proves nothing")
	}
	return r
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestCrashPebbleCheckpoints crash-clones the checkpoint directory at every
// filesystem operation of three incremental Pebble checkpoints (uploads of
// shared files, the task snapshot, the marker, retention of shared files):
// the newest completed checkpoint of every clone restores with its data.
func TestCrashPebbleCheckpoints(t *testing.T) {
	runPebbleCrash(t, true)
}

// TestCrashPebbleCheckpointsNoFsync is the same with fsync off: a crash
// clone may then lose files a marker names, and restoring must fail with
// an error, never return other data than the checkpoint's.
func TestCrashPebbleCheckpointsNoFsync(t *testing.T) {
	r := runPebbleCrash(t, false)
	if r.failed == 0 {
		t.Log("no clone lost a file a marker names")
	}
}
