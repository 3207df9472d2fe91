package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/clinkstream/clink/checkpoint"
)

// crashRig runs store operations on a crashable MemFS and, before every
// filesystem operation, takes crash clones of it and checks the invariant
// that a COMPLETED-N marker never names a missing or partial snapshot.
type crashRig struct {
	t   *testing.T
	mem *vfs.MemFS
	fs  vfs.FS
	// written holds, per checkpoint, the snapshots whose WriteSnapshot
	// returned; the invariant covers exactly these.
	written map[checkpoint.ID]map[string][]byte
	// seed varies the random clones between checks.
	seed uint64
	// completing, when not nil, holds the ids WriteCompleted was called
	// for; a marker of any other id is a violation.
	completing map[checkpoint.ID]bool

	clones          int // clones checked
	clonesCompleted int // clones that showed at least one marker
	violations      []string
}

func newCrashRig(t *testing.T) *crashRig {
	t.Setenv(FsyncEnvVar, "1")
	r := &crashRig{t: t, mem: vfs.NewCrashableMem(), written: make(map[checkpoint.ID]map[string][]byte)}
	r.fs = errorfs.Wrap(r.mem, errorfs.InjectorFunc(func(errorfs.Op) error {
		r.check()
		return nil
	}))
	return r
}

// cloneCfgs are the crash outcomes tried at each step: only what was synced,
// everything, and random mixes of unsynced entries and blocks.
func (r *crashRig) cloneCfgs() []vfs.CrashCloneCfg {
	r.seed++
	cfgs := []vfs.CrashCloneCfg{{}, {UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(r.seed, 0))}}
	for i := range uint64(4) {
		cfgs = append(cfgs, vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(r.seed, i+1))})
	}
	return cfgs
}

func (r *crashRig) check() {
	for _, cfg := range r.cloneCfgs() {
		clone := r.mem.CrashClone(cfg)
		r.clones++
		if v := r.verify(clone); v != "" {
			r.violations = append(r.violations, v)
		}
	}
}

// verify returns a description of the first violation in fs, or "".
func (r *crashRig) verify(fs vfs.FS) string {
	names, err := fs.List(testDir)
	if err != nil {
		return "" // the checkpoint directory itself did not survive
	}
	sawMarker := false
	for _, name := range names {
		id, ok := parseID(name, completedPrefix)
		if !ok {
			continue
		}
		sawMarker = true
		if r.completing != nil && !r.completing[id] {
			return fmt.Sprintf("%s present although checkpoint %d was never completed", name, id)
		}
		for snap, want := range r.written[id] {
			p := fmt.Sprintf("%s/chk-%d/%s.snap", testDir, id, snap)
			f, err := fs.Open(p)
			if err != nil {
				return fmt.Sprintf("%s present but %s missing", name, p)
			}
			var got bytes.Buffer
			_, _ = got.ReadFrom(f)
			f.Close()
			if !bytes.Equal(got.Bytes(), want) {
				return fmt.Sprintf("%s present but %s is partial or damaged (%d bytes, want these %d)", name, p, got.Len(), len(want))
			}
		}
		// A surviving completed checkpoint must also be restorable.
		s, err := Open(testDir, Options{FS: fs})
		if err != nil {
			return fmt.Sprintf("reopening after a crash: %v", err)
		}
		for snap := range r.written[id] {
			if _, err := s.ReadTaskSnapshot(id, snap); err != nil {
				return fmt.Sprintf("%s present but: %v", name, err)
			}
		}
		if s.NextID() <= id {
			return fmt.Sprintf("%s present but NextID() = %d", name, s.NextID())
		}
	}
	if sawMarker {
		r.clonesCompleted++
	}
	return ""
}

func (r *crashRig) writeSnapshot(s *Store, id checkpoint.ID, task string) {
	snap := &TaskSnapshot{
		Checkpoint: id, Task: task, Parallelism: 1, MaxParallelism: 8,
		Operators: []OperatorSnapshot{{
			UID: "op", Watermark: int64(id),
			// Large enough to span several MemFS blocks, so a crash can
			// keep a prefix.
			KeyGroups: []KeyGroupState{{KeyGroup: 1, Entries: 1, Data: bytes.Repeat([]byte{byte(id)}, 10000)}},
		}},
	}
	b := snap.Marshal()
	if _, err := s.WriteSnapshot(id, task, b); err != nil {
		r.t.Fatal(err)
	}
	if r.written[id] == nil {
		r.written[id] = make(map[string][]byte)
	}
	r.written[id][task] = b
}

func (r *crashRig) finish() {
	r.t.Helper()
	r.check()
	if len(r.violations) > 0 {
		r.t.Fatalf("%d of %d crash clones violate the invariant; first: %s", len(r.violations), r.clones, r.violations[0])
	}
	if r.clonesCompleted == 0 {
		r.t.Fatalf("no crash clone out of %d showed a completed checkpoint; the check proves nothing", r.clones)
	}
	r.t.Logf("%d crash clones checked, %d with a completed checkpoint", r.clones, r.clonesCompleted)
}

func TestCrashWritingCheckpoints(t *testing.T) {
	r := newCrashRig(t)
	s, err := Open(testDir, Options{FS: r.fs, Retain: 2})
	if err != nil {
		t.Fatal(err)
	}
	for id := checkpoint.ID(1); id <= 4; id++ {
		for _, task := range []string{"src-0", "map-0", "map-1"} {
			r.writeSnapshot(s, id, task)
		}
		if err := s.WriteCompleted(id); err != nil {
			t.Fatal(err)
		}
		if id == 2 {
			if err := s.WriteConfirmed(id); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
	}
	// An aborted checkpoint: snapshots, then Discard.
	r.writeSnapshot(s, 5, "src-0")
	if err := s.Discard(5); err != nil {
		t.Fatal(err)
	}
	r.finish()
}

// TestCrashWritingPreparedCheckpoints is TestCrashWritingCheckpoints with
// every checkpoint prepared ahead (Store.Prepare): a staged marker is never
// taken for a marker, and a checkpoint completes only once its snapshots
// are durable.
func TestCrashWritingPreparedCheckpoints(t *testing.T) {
	r := newCrashRig(t)
	r.completing = map[checkpoint.ID]bool{}
	s, err := Open(testDir, Options{FS: r.fs, Retain: 2})
	if err != nil {
		t.Fatal(err)
	}
	s.Prepare(1)
	for id := checkpoint.ID(1); id <= 4; id++ {
		for _, task := range []string{"src-0", "map-0", "map-1"} {
			r.writeSnapshot(s, id, task)
		}
		r.completing[id] = true
		if err := s.WriteCompleted(id); err != nil {
			t.Fatal(err)
		}
		if err := s.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
		s.Prepare(id + 1)
	}
	// Checkpoint 5 is prepared and aborted, 6 prepared and never taken.
	r.writeSnapshot(s, 5, "src-0")
	if err := s.Discard(5); err != nil {
		t.Fatal(err)
	}
	s.Prepare(6)
	r.finish()
	s2, err := Open(testDir, Options{FS: r.mem.CrashClone(vfs.CrashCloneCfg{})})
	if err != nil {
		t.Fatal(err)
	}
	if s2.NextID() != 7 {
		t.Fatalf("after a crash with checkpoint 6 prepared: NextID() = %d, want 7", s2.NextID())
	}
}

// TestCrashRetention starts from synced completed checkpoints and crashes
// at every step of one retention pass that removes most of them.
func TestCrashRetention(t *testing.T) {
	r := newCrashRig(t)
	s, err := Open(testDir, Options{FS: r.mem, Retain: 1})
	if err != nil {
		t.Fatal(err)
	}
	for id := checkpoint.ID(1); id <= 5; id++ {
		r.writeSnapshot(s, id, "a-0")
		r.writeSnapshot(s, id, "b-0")
		if id != 3 {
			if err := s.WriteCompleted(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err = Open(testDir, Options{FS: r.fs, Retain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	r.finish()
	clone := r.mem.CrashClone(vfs.CrashCloneCfg{})
	if got := strings.Join(names(t, clone, testDir), " "); got != "COMPLETED-5 chk-5" {
		t.Fatalf("after a synced retention the directory holds %q", got)
	}
}

// The two tests below run orders that are wrong on purpose, to show that
// the rig catches them.

func TestCrashRigCatchesMarkerBeforeSnapshotSync(t *testing.T) {
	r := newCrashRig(t)
	t.Setenv(FsyncEnvVar, "0")
	s, err := Open(testDir, Options{FS: r.fs})
	if err != nil {
		t.Fatal(err)
	}
	r.writeSnapshot(s, 1, "a-0")
	if err := s.WriteCompleted(1); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		r.check()
	}
	if len(r.violations) == 0 {
		t.Fatalf("no violation found in %d crash clones of unsynced writes", r.clones)
	}
}

func TestCrashRigCatchesSnapshotsRemovedBeforeMarker(t *testing.T) {
	r := newCrashRig(t)
	s, err := Open(testDir, Options{FS: r.mem})
	if err != nil {
		t.Fatal(err)
	}
	r.writeSnapshot(s, 1, "a-0")
	if err := s.WriteCompleted(1); err != nil {
		t.Fatal(err)
	}
	// Wrong order: the chk directory goes (durably) before the marker.
	if err := r.fs.RemoveAll(testDir + "/chk-1"); err != nil {
		t.Fatal(err)
	}
	if err := syncDir(r.fs, testDir); err != nil {
		t.Fatal(err)
	}
	if err := r.fs.Remove(testDir + "/COMPLETED-1"); err != nil {
		t.Fatal(err)
	}
	if len(r.violations) == 0 {
		t.Fatalf("no violation found in %d crash clones", r.clones)
	}
}
