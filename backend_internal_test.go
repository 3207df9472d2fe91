package clink

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
)

// pebbleRig is a Pebble backend with one value state, and a checkpoint
// store for its files.
type pebbleRig struct {
	t     *testing.T
	work  string
	b     *pebble.Backend
	value *state.ValueState[int64, int64]
	st    *store.Store
	caps  backendCaptures
}

func newPebbleRig(t *testing.T) *pebbleRig {
	t.Setenv(store.FsyncEnvVar, "0")
	r := &pebbleRig{t: t, work: t.TempDir()}
	r.b = pebble.New(pebble.Options{Dir: r.work, CacheBytes: 1 << 20, MemTableBytes: 1 << 20,
		Tune: func(o *pebbledb.Options) { o.L0CompactionThreshold, o.L0StopWritesThreshold = 2, 8 }})
	if err := r.b.Open(state.KeyGroupRange{Start: 0, End: 8}, 8); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.b.Close() })
	var err error
	if r.value, err = state.NewValue(r.b, "value", state.CodecFor[int64](), state.CodecFor[int64]()); err != nil {
		t.Fatal(err)
	}
	if r.st, err = store.Open(t.TempDir(), store.Options{Retain: 1}); err != nil {
		t.Fatal(err)
	}
	return r
}

// write sets keys [from, to) to v.
func (r *pebbleRig) write(from, to, v int64) {
	for k := from; k < to; k++ {
		r.value.Put(k, v)
	}
}

// captureDirs returns the capture directories in the backend's working
// directory.
func (r *pebbleRig) captureDirs() []string {
	r.t.Helper()
	var out []string
	works, _ := filepath.Glob(filepath.Join(r.work, "clink-pebble-*"))
	for _, w := range works {
		ents, _ := os.ReadDir(w)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "capture-") {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

func (r *pebbleRig) snapshot(id checkpoint.ID) func() (*store.OperatorSnapshot, error) {
	r.t.Helper()
	build, err := backendSnapshot("op", id, r.b, r.st.Shared(), 0, &r.caps)
	if err != nil {
		r.t.Fatal(err)
	}
	return build
}

// complete writes the snapshot of checkpoint id, completes it and applies
// retention.
func (r *pebbleRig) complete(id checkpoint.ID, op *store.OperatorSnapshot) {
	r.t.Helper()
	snap := &store.TaskSnapshot{Checkpoint: id, Task: "op-0", Parallelism: 1, MaxParallelism: 8,
		Operators: []store.OperatorSnapshot{*op}}
	if _, err := r.st.WriteTaskSnapshot(snap); err != nil {
		r.t.Fatal(err)
	}
	if err := r.st.WriteCompleted(id); err != nil {
		r.t.Fatal(err)
	}
	r.caps.notifyComplete(id)
	if err := r.st.ApplyRetention(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *pebbleRig) sharedFiles() []string {
	ents, _ := os.ReadDir(filepath.Join(r.st.Dir(), "shared"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func refsOf(op *store.OperatorSnapshot) []string {
	for _, s := range op.OperatorState {
		if s.Name == store.SharedRefsState {
			return store.ParseSharedRefs(s.Data)
		}
	}
	return nil
}

// TestAbortedCheckpointDiscardsCapture: the capture of an aborted or
// subsumed checkpoint is discarded when the abort is heard, before the
// snapshot worker reaches it, which then uploads nothing; a capture being
// persisted when its checkpoint is discarded in the store stops uploading.
func TestAbortedCheckpointDiscardsCapture(t *testing.T) {
	r := newPebbleRig(t)
	r.write(0, 1000, 1)
	build1 := r.snapshot(1)
	r.write(0, 1000, 2)
	build2 := r.snapshot(2)
	if got := r.captureDirs(); len(got) != 2 {
		t.Fatalf("capture directories %v, want 2", got)
	}
	r.caps.notifyAborted(1)
	if got := r.captureDirs(); len(got) != 1 {
		t.Fatalf("after the abort of 1: capture directories %v, want 1", got)
	}
	if _, err := build1(); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("persisting the aborted capture: %v, want an error saying it was aborted", err)
	}
	if got := r.sharedFiles(); len(got) != 0 {
		t.Fatalf("the aborted capture uploaded %v", got)
	}

	// Checkpoint 3 completes while 2 is still pending: 2 is subsumed.
	r.write(0, 1000, 3)
	op3, err := r.snapshot(3)()
	if err != nil {
		t.Fatal(err)
	}
	r.complete(3, op3)
	if got := r.captureDirs(); len(got) != 0 {
		t.Fatalf("after completing 3: capture directories %v, want none", got)
	}
	if _, err := build2(); err == nil {
		t.Fatal("the subsumed capture persisted")
	}

	// Checkpoint 4's store side is discarded while its capture persists:
	// it fails instead of uploading.
	r.write(1000, 2000, 4)
	build4 := r.snapshot(4)
	if err := r.st.Discard(4); err != nil {
		t.Fatal(err)
	}
	before := r.sharedFiles()
	if _, err := build4(); err == nil {
		t.Fatal("a capture persisted into a discarded checkpoint")
	}
	if got := r.sharedFiles(); !slices.Equal(got, before) {
		t.Fatalf("the discarded checkpoint uploaded: %v, was %v", got, before)
	}
}

// TestAbortedUploadsAreCollected: files uploaded for a checkpoint that is
// aborted after its uploads are deleted once the next checkpoint completes,
// except those it reuses; restoring that checkpoint gives its data.
func TestAbortedUploadsAreCollected(t *testing.T) {
	r := newPebbleRig(t)
	r.write(0, 5000, 1)
	op1, err := r.snapshot(1)()
	if err != nil {
		t.Fatal(err)
	}
	r.complete(1, op1)

	// Checkpoint 2 uploads its new files, then is aborted.
	after1 := r.sharedFiles()
	r.write(0, 5000, 2)
	if _, err := r.snapshot(2)(); err != nil {
		t.Fatal(err)
	}
	r.caps.notifyAborted(2)
	if err := r.st.Discard(2); err != nil {
		t.Fatal(err)
	}
	uploaded2 := slices.DeleteFunc(r.sharedFiles(), func(n string) bool { return slices.Contains(after1, n) })

	// Rewrite everything twice so that compactions replace checkpoint 2's
	// files, then complete 3.
	r.write(0, 5000, 3)
	if _, err := r.snapshot(30)(); err != nil { // flushes; its id is never completed
		t.Fatal(err)
	}
	r.caps.notifyAborted(30)
	if err := r.st.Discard(30); err != nil {
		t.Fatal(err)
	}
	// Compactions run in the background: complete checkpoints until one
	// of checkpoint 2's files has been compacted away, checking each time
	// that shared/ holds exactly what the newest checkpoint lists.
	var op3 *store.OperatorSnapshot
	var lastV int64
	for round := 0; ; round++ {
		if round == 10 {
			t.Fatalf("after %d completed checkpoints every file only checkpoint 2 uploaded (%v) is still in use; the test proves nothing", round, uploaded2)
		}
		id := checkpoint.ID(31 + round)
		lastV = int64(4 + round)
		r.write(0, 5000, lastV)
		op, err := r.snapshot(id)()
		if err != nil {
			t.Fatal(err)
		}
		r.complete(id, op)
		op3 = op
		got, want := r.sharedFiles(), refsOf(op)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("shared/ holds %v, want exactly what checkpoint %d lists %v (checkpoint 2 uploaded %v)", got, id, want, uploaded2)
		}
		if gone := slices.DeleteFunc(slices.Clone(uploaded2), func(n string) bool { return slices.Contains(got, n) }); len(gone) > 0 {
			break
		}
	}

	// The newest checkpoint restores with its data.
	rb := pebble.New(pebble.Options{Dir: t.TempDir()})
	if err := rb.Open(state.KeyGroupRange{Start: 0, End: 8}, 8); err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	fs := &state.FileState{Shared: refsOf(op3)}
	for _, n := range op3.OperatorState {
		if name, ok := strings.CutPrefix(n.Name, fileEntryPrefix); ok {
			fs.Named = append(fs.Named, state.NamedData{Name: name, Data: n.Data})
		}
	}
	if err := rb.RestoreFiles([]*state.FileState{fs}, r.st.Shared()); err != nil {
		t.Fatal(err)
	}
	v, err := state.NewValue(rb, "value", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	for k := int64(0); k < 5000; k++ {
		if got, ok := v.Get(k); !ok || got != lastV {
			t.Fatalf("key %d restored as %d, %v; want %d", k, got, ok, lastV)
		}
	}
}

// TestMemoryBackendIncrementalOnlyWithCheckpoints checks that a job
// without a checkpoint directory, which never takes a checkpoint, gets a
// memory backend whose tables record no changes: the change lists would
// only grow (a join's churning rows made a run of 10M events hold 1 GB).
func TestMemoryBackendIncrementalOnlyWithCheckpoints(t *testing.T) {
	off := false
	for _, c := range []struct {
		name string
		opts Options
		want bool
	}{
		{"checkpoints", Options{CheckpointDir: t.TempDir()}, true},
		{"checkpoints, incremental off", Options{CheckpointDir: t.TempDir(), StateIncremental: &off}, false},
		{"no checkpoint directory", Options{}, false},
	} {
		b, err := stateBackends["memory"](&c.opts, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := b.(*state.MemoryBackend).Incremental(); got != c.want {
			t.Errorf("%s: incremental %v, want %v", c.name, got, c.want)
		}
	}
}
