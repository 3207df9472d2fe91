package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/clinkstream/clink/checkpoint"
)

// sharedRig is a Store on a real directory with a local file to upload.
type sharedRig struct {
	t     *testing.T
	dir   string
	st    *Store
	local string
}

func newSharedRig(t *testing.T, retain int) *sharedRig {
	t.Setenv(FsyncEnvVar, "0")
	dir := t.TempDir()
	st, err := Open(dir, Options{Retain: retain})
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "sst")
	if err := os.WriteFile(local, []byte("table"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &sharedRig{t: t, dir: dir, st: st, local: local}
}

func (r *sharedRig) put(id checkpoint.ID, names ...string) {
	r.t.Helper()
	for _, n := range names {
		if err := r.st.SharedFor(id).Put(n, r.local); err != nil {
			r.t.Fatal(err)
		}
	}
}

// snapshot writes the snapshot of checkpoint id listing refs.
func (r *sharedRig) snapshot(id checkpoint.ID, task string, refs ...string) {
	r.t.Helper()
	snap := &TaskSnapshot{Checkpoint: id, Task: task, Parallelism: 1, MaxParallelism: 8,
		Operators: []OperatorSnapshot{{UID: "op", Watermark: NoWatermark,
			OperatorState: []NamedState{{Name: SharedRefsState, Data: FormatSharedRefs(refs)}}}}}
	if _, err := r.st.WriteTaskSnapshot(snap); err != nil {
		r.t.Fatal(err)
	}
}

func (r *sharedRig) complete(id checkpoint.ID) {
	r.t.Helper()
	if err := r.st.WriteCompleted(id); err != nil {
		r.t.Fatal(err)
	}
	if err := r.st.ApplyRetention(); err != nil {
		r.t.Fatal(err)
	}
}

// files returns the names in shared/, sorted.
func (r *sharedRig) files() []string {
	r.t.Helper()
	ents, err := os.ReadDir(filepath.Join(r.dir, sharedDirName))
	if err != nil && !os.IsNotExist(err) {
		r.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func (r *sharedRig) want(names ...string) {
	r.t.Helper()
	slices.Sort(names)
	if got := r.files(); !slices.Equal(got, names) {
		r.t.Fatalf("shared/ holds %v, want %v", got, names)
	}
}

// TestSharedFilesOfAbortedCheckpoint: files uploaded for a checkpoint that
// is then discarded are deleted by the next retention, unless a later
// checkpoint reuses them; files of a checkpoint in flight are never
// deleted, also when retention runs before its snapshot is written.
func TestSharedFilesOfAbortedCheckpoint(t *testing.T) {
	r := newSharedRig(t, 1)
	r.put(1, "a")
	r.snapshot(1, "t-0", "a")
	r.complete(1)

	// Checkpoint 2 uploads b, c and is aborted after its snapshot.
	r.put(2, "b", "c")
	r.snapshot(2, "t-0", "a", "b", "c")
	if err := r.st.Discard(2); err != nil {
		t.Fatal(err)
	}
	// The discarded checkpoint's Shared is dead: no more uploads.
	if err := r.st.SharedFor(2).Put("late", r.local); err == nil {
		t.Error("a discarded checkpoint's Put succeeded")
	}
	if r.st.SharedFor(2).Has("a") {
		t.Error("a discarded checkpoint's Has reported true")
	}

	// Checkpoint 3 reuses b (found with Has) and uploads d; checkpoint 4
	// uploads e and has not written its snapshot when 3 completes.
	if !r.st.SharedFor(3).Has("b") {
		t.Fatal("b is missing")
	}
	r.put(3, "d")
	r.put(4, "e")
	r.snapshot(3, "t-0", "a", "b", "d")
	r.complete(3)
	r.want("a", "b", "d", "e") // c: only the aborted 2 had it

	// Checkpoint 4 is aborted before it wrote anything, 5 completes.
	if err := r.st.Discard(4); err != nil {
		t.Fatal(err)
	}
	r.put(5, "f")
	r.snapshot(5, "t-0", "b", "f")
	r.complete(5)
	r.want("b", "f") // a, d: listed by the purged 3; e: by nobody
}

// TestSharedLeftoversOfEarlierRun: a Store deletes, at its first
// retention, what an earlier process left in shared/ that no remaining
// checkpoint lists (uploads of a checkpoint cut short, temp files of an
// interrupted Put), and keeps what the remaining checkpoints list.
func TestSharedLeftoversOfEarlierRun(t *testing.T) {
	r := newSharedRig(t, 2)
	r.put(1, "old-a", "old-b")
	r.snapshot(1, "t-0", "old-a", "old-b")
	r.complete(1)
	r.put(2, "old-c") // checkpoint 2 is in flight when the process dies
	sh := filepath.Join(r.dir, sharedDirName)
	for _, n := range []string{".old-d.7.part", ".old-e.part"} {
		if err := os.WriteFile(filepath.Join(sh, n), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	st, err := Open(r.dir, Options{Retain: 2})
	if err != nil {
		t.Fatal(err)
	}
	r.st = st
	id := st.NextID()
	if !st.SharedFor(id).Has("old-a") {
		t.Fatal("old-a is missing")
	}
	r.put(id, "new")
	r.snapshot(id, "t-0", "old-a", "new")
	r.complete(id)
	// Checkpoint 1 is retained (Retain 2): old-b stays.
	r.want("new", "old-a", "old-b")
}

// TestSharedUnreadableSnapshotKeepsOrphans: if a remaining snapshot cannot
// be read, files that might be only its are not deleted on a guess.
func TestSharedUnreadableSnapshotKeepsOrphans(t *testing.T) {
	r := newSharedRig(t, 3)
	r.put(1, "a", "orphan")
	r.snapshot(1, "t-0", "a")
	if err := os.WriteFile(filepath.Join(r.dir, "chk-1", "t-1.snap"), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.st.WriteCompleted(1); err != nil {
		t.Fatal(err)
	}
	// Pinned by the Store's own Shared is never deleted; a discarded
	// checkpoint's file is an orphan.
	r.put(2, "lost")
	if err := r.st.Discard(2); err != nil {
		t.Fatal(err)
	}
	if err := r.st.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	r.want("a", "lost", "orphan")
}

// TestSharedGCConcurrentWithUploads runs checkpoints whose tasks upload and
// reuse files concurrently with each other and with retention (run with
// -race). Every file a checkpoint lists must exist when it completes and
// while it is retained, and at the end shared/ holds exactly what the
// retained checkpoints list.
func TestSharedGCConcurrentWithUploads(t *testing.T) {
	r := newSharedRig(t, 2)
	rng := rand.New(rand.NewPCG(1, 2))
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := r.st.ApplyRetention(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const tasks = 4
	var known []string // names uploaded so far, reused at random
	listed := map[checkpoint.ID][]string{}
	var completed []checkpoint.ID
	next := 0
	for id := checkpoint.ID(1); id <= 40; id++ {
		refs := make([][]string, tasks)
		for i := range tasks {
			for range 3 {
				refs[i] = append(refs[i], fmt.Sprintf("f%d", next))
				next++
			}
			for range 2 {
				if len(known) > 0 {
					refs[i] = append(refs[i], known[rng.IntN(len(known))])
				}
			}
		}
		var wg sync.WaitGroup
		for i := range tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sf := r.st.SharedFor(id)
				for _, n := range refs[i] {
					if !sf.Has(n) {
						if err := sf.Put(n, r.local); err != nil {
							t.Error(err)
						}
					}
				}
			}()
		}
		wg.Wait()
		var all []string
		for i := range tasks {
			all = append(all, refs[i]...)
			known = append(known, refs[i]...)
		}
		for _, n := range all {
			if !r.st.Shared().Has(n) {
				t.Fatalf("checkpoint %d: %s, uploaded or found, is gone before its snapshot", id, n)
			}
		}
		if rng.IntN(4) == 0 {
			if err := r.st.Discard(id); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for i := range tasks {
			r.snapshot(id, fmt.Sprintf("t-%d", i), refs[i]...)
		}
		if err := r.st.WriteCompleted(id); err != nil {
			t.Fatal(err)
		}
		listed[id] = all
		completed = append(completed, id)
		for cid, names := range listed {
			if cid < completed[max(0, len(completed)-2)] {
				delete(listed, cid) // past retention (2)
				continue
			}
			for _, n := range names {
				if !r.st.Shared().Has(n) {
					t.Fatalf("after checkpoint %d: %s, listed by retained checkpoint %d, is gone", id, n, cid)
				}
			}
		}
	}
	close(stop)
	bg.Wait()
	if err := r.st.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, names := range listed {
		want = append(want, names...)
	}
	slices.Sort(want)
	r.want(slices.Compact(want)...)
}

// TestSharedPutLinksOrStreams: on the local filesystem Put hard-links the
// file; on another filesystem (MemFS here) it streams it in chunks; either
// way the stored bytes are the file's.
func TestSharedPutLinksOrStreams(t *testing.T) {
	t.Setenv(FsyncEnvVar, "1")
	data := make([]byte, 3*writeChunk+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	local := filepath.Join(t.TempDir(), "big.sst")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}

	st, err := Open(filepath.Join(t.TempDir(), "ckpt"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SharedFor(1).Put("big", local); err != nil {
		t.Fatal(err)
	}
	p, err := st.Shared().Path("big")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(local)
	b, _ := os.Stat(p)
	if !os.SameFile(a, b) {
		t.Error("Put on the same filesystem did not hard-link")
	}

	mem := vfs.NewMem()
	var writes int
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileWrite {
			writes++
		}
		return nil
	}))
	ms, err := Open("/ckpt", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.SharedFor(1).Put("big", local); err != nil {
		t.Fatal(err)
	}
	f, err := mem.Open("/ckpt/shared/big")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := got.ReadFrom(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(got.Bytes(), data) {
		t.Errorf("stored %d bytes, want the file's %d", got.Len(), len(data))
	}
	if writes != 4 {
		t.Errorf("%d writes, want 4 chunks of at most %d bytes", writes, writeChunk)
	}
	names, _ := mem.List("/ckpt/shared")
	if len(names) != 1 {
		t.Errorf("shared/ holds %v, want only big", names)
	}
}

// TestSharedPutRacingLinksLeaveNoTemp: two Puts of one name from one
// local file both hard-link it; the second rename joins two links of the
// same inode, which the operating system does as a no-op. The loser's temp
// file must not stay behind in shared/ (retention would not sweep it while
// the Store runs).
func TestSharedPutRacingLinksLeaveNoTemp(t *testing.T) {
	r := newSharedRig(t, 2)
	sh := r.st.SharedFor(1)
	if err := sh.ensureDir(); err != nil {
		t.Fatal(err)
	}
	dst, err := sh.path("f")
	if err != nil {
		t.Fatal(err)
	}
	// The interleaving of two Puts that both found no file: each links its
	// own temp and renames it.
	for i := range 2 {
		if _, err := copyFileDurable(r.st.fs, dst, fmt.Sprintf(".f.%d.part", i), r.local, false); err != nil {
			t.Fatal(err)
		}
	}
	r.want("f")
}

// TestCrashSharedPut crash-clones the filesystem at every operation of a
// Put: the shared file is absent or whole, never partial, and present in
// every clone once Put returned.
func TestCrashSharedPut(t *testing.T) {
	t.Setenv(FsyncEnvVar, "1")
	data := bytes.Repeat([]byte("sstable-block-"), 20000) // several MemFS blocks
	local := filepath.Join(t.TempDir(), "x.sst")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	mem := vfs.NewCrashableMem()
	seed := uint64(0)
	clones, whole := 0, 0
	var violations []string
	check := func(mustHave bool) {
		seed++
		cfgs := []vfs.CrashCloneCfg{{}, {UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(seed, 0))}}
		for i := range uint64(4) {
			cfgs = append(cfgs, vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, i+1))})
		}
		for _, cfg := range cfgs {
			c := mem.CrashClone(cfg)
			clones++
			f, err := c.Open("/ckpt/shared/x")
			if err != nil {
				if mustHave {
					violations = append(violations, "x missing after Put returned")
				}
				continue
			}
			var got bytes.Buffer
			_, _ = got.ReadFrom(f)
			f.Close()
			if !bytes.Equal(got.Bytes(), data) {
				violations = append(violations, fmt.Sprintf("x is partial: %d of %d bytes", got.Len(), len(data)))
				continue
			}
			whole++
		}
	}
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(errorfs.Op) error {
		check(false)
		return nil
	}))
	st, err := Open("/ckpt", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SharedFor(1).Put("x", local); err != nil {
		t.Fatal(err)
	}
	check(true)
	if len(violations) > 0 {
		t.Fatalf("%d of %d clones: first: %s", len(violations), clones, violations[0])
	}
	if whole == 0 {
		t.Fatal("no clone showed the file; the check proves nothing")
	}
	t.Logf("%d clones, %d with the whole file", clones, whole)
}
