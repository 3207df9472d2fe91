package state_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/statetest"
)

// dirShared is a SharedWriter over a directory: the shared-file area of
// one test, without retention.
type dirShared struct {
	dir    string
	mu     sync.Mutex
	writes int
}

func (d *dirShared) Put(name, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return d.Write(name, func(w io.Writer) error { _, err := w.Write(data); return err })
}

func (d *dirShared) Has(name string) bool {
	_, err := os.Stat(filepath.Join(d.dir, name))
	return err == nil
}

func (d *dirShared) Path(name string) (string, error) {
	p := filepath.Join(d.dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

func (d *dirShared) Write(name string, write func(io.Writer) error) error {
	p := filepath.Join(d.dir, name)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	f, err := os.CreateTemp(d.dir, ".tmp-*")
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d.mu.Lock()
	d.writes++
	d.mu.Unlock()
	return os.Rename(f.Name(), p)
}

func (d *dirShared) WriteUnpinned(name string, write func(io.Writer) error) error {
	return d.Write(name, write)
}

// files lists the shared files (not the temp files).
func (d *dirShared) files(t *testing.T) []string {
	t.Helper()
	es, err := os.ReadDir(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// filesBackend runs the conformance suite through incremental
// checkpoints: Persist writes the capture's delta (or base) files and
// returns the key groups read back from its chain.
type filesBackend struct {
	*state.MemoryBackend
	sf *dirShared
}

func (f filesBackend) Capture() (state.Captured, error) {
	c, err := f.MemoryBackend.Capture()
	if err != nil {
		return nil, err
	}
	fc, ok := c.(state.FileCaptured)
	if !ok {
		return nil, fmt.Errorf("capture %T does not write files", c)
	}
	return filesCapture{fc: fc, sf: f.sf}, nil
}

type filesCapture struct {
	fc state.FileCaptured
	sf *dirShared
}

func (c filesCapture) Persist() ([]state.KeyGroupData, error) {
	fs, err := c.fc.PersistFiles(c.sf)
	if err != nil {
		return nil, err
	}
	groups, _, ok, err := state.ReadChain(fs, c.sf)
	if err != nil {
		return nil, err
	}
	if !ok {
		return fs.KeyGroups, nil
	}
	return groups, nil
}

func newIncremental(t fataler, materialize int64) *state.MemoryBackend {
	t.Helper()
	b, err := state.NewMemoryBackendWith(state.MemoryOptions{Incremental: true, MaterializeBytes: materialize})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMemoryIncrementalConformance runs the conformance suite with
// incremental checkpoints: every capture is persisted as files of a chain
// (materializing a new base after a few hundred bytes of deltas) and read
// back from them.
func TestMemoryIncrementalConformance(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	statetest.Run(t, func() state.Backend { return filesBackend{newIncremental(t, 256), sf} })
}

// incModel is what the states of incFixture should hold.
type incModel struct {
	value map[string]int64
	list  map[int64][]string
	mp    map[string]map[string]int64
}

type incFixture struct {
	b     *state.MemoryBackend
	value *state.ValueState[string, int64]
	list  *state.ListState[int64, string]
	mp    *state.MapState[string, string, int64]
}

const incMaxP = 32

func openIncFixture(t *testing.T, rng state.KeyGroupRange, clock func() int64, materialize int64) *incFixture {
	t.Helper()
	return &incFixture{b: openIncremental(t, materialize, rng)}
}

// openIncremental returns a backend with incremental checkpoints, open on
// rng of incMaxP key groups.
func openIncremental(t fataler, materialize int64, rng state.KeyGroupRange) *state.MemoryBackend {
	t.Helper()
	b := newIncremental(t, materialize)
	if err := b.Open(rng, incMaxP); err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *incFixture) register(t *testing.T, clock func() int64) {
	t.Helper()
	var err error
	if f.value, err = state.NewValue(f.b, "value", state.CodecFor[string](), state.CodecFor[int64](),
		state.WithTTL(100*time.Millisecond), state.WithClock(clock)); err != nil {
		t.Fatal(err)
	}
	if f.list, err = state.NewList(f.b, "list", state.CodecFor[int64](), state.CodecFor[string]()); err != nil {
		t.Fatal(err)
	}
	if f.mp, err = state.NewMap[string, string, int64](f.b, "map", state.CodecFor[string]()); err != nil {
		t.Fatal(err)
	}
}

// read returns the contents of the fixture's states for keys in rng.
func (f *incFixture) read(rng state.KeyGroupRange) incModel {
	m := incModel{value: map[string]int64{}, list: map[int64][]string{}, mp: map[string]map[string]int64{}}
	f.value.Range(func(k string, v int64) bool { m.value[k] = v; return true })
	for k := range int64(incKeys) {
		if rng.Contains(keyGroupOf(k, incMaxP)) {
			if l := f.list.Get(k); len(l) > 0 {
				m.list[k] = slices.Clone(l)
			}
		}
		mk := fmt.Sprint("m", k)
		if rng.Contains(keyGroupOf(mk, incMaxP)) {
			f.mp.Range(mk, func(uk string, uv int64) bool {
				if m.mp[mk] == nil {
					m.mp[mk] = map[string]int64{}
				}
				m.mp[mk][uk] = uv
				return true
			})
		}
	}
	return m
}

func (m incModel) only(rng state.KeyGroupRange) incModel {
	out := incModel{value: map[string]int64{}, list: map[int64][]string{}, mp: map[string]map[string]int64{}}
	for k, v := range m.value {
		if rng.Contains(keyGroupOf(k, incMaxP)) {
			out.value[k] = v
		}
	}
	for k, v := range m.list {
		if rng.Contains(keyGroupOf(k, incMaxP)) {
			out.list[k] = v
		}
	}
	for k, v := range m.mp {
		if rng.Contains(keyGroupOf(k, incMaxP)) {
			out.mp[k] = v
		}
	}
	return out
}

func (m incModel) String() string {
	var lines []string
	for k, v := range m.value {
		lines = append(lines, fmt.Sprintf("value %s=%d", k, v))
	}
	for k, v := range m.list {
		lines = append(lines, fmt.Sprintf("list %d=%v", k, v))
	}
	for k, v := range m.mp {
		lines = append(lines, fmt.Sprintf("map %s=%v", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

const incKeys = 200

// mutate makes random writes, overwrites and deletes, and lets some values
// expire, on the fixture and in the model the same way.
func (f *incFixture) mutate(rnd *rand.Rand, now int64, written map[string]int64, m incModel, n int) {
	for range n {
		k := rnd.Int64N(incKeys)
		switch rnd.IntN(7) {
		case 0, 1:
			vk := fmt.Sprint("v", k)
			f.value.Put(vk, k*1000+int64(rnd.IntN(1000)))
			v, _ := f.value.Get(vk)
			m.value[vk], written[vk] = v, now
		case 2:
			vk := fmt.Sprint("v", k)
			f.value.Delete(vk)
			delete(m.value, vk)
			delete(written, vk)
		case 3:
			s := fmt.Sprint(rnd.IntN(100))
			f.list.Add(k, s)
			m.list[k] = append(m.list[k], s)
		case 4:
			f.list.Clear(k)
			delete(m.list, k)
		case 5:
			mk, uk := fmt.Sprint("m", k), fmt.Sprint("u", rnd.IntN(4))
			f.mp.Put(mk, uk, k)
			if m.mp[mk] == nil {
				m.mp[mk] = map[string]int64{}
			}
			m.mp[mk][uk] = k
		case 6:
			mk, uk := fmt.Sprint("m", k), fmt.Sprint("u", rnd.IntN(4))
			f.mp.Remove(mk, uk)
			if mm := m.mp[mk]; mm != nil {
				delete(mm, uk)
				if len(mm) == 0 {
					delete(m.mp, mk)
				}
			}
		}
	}
}

// expire drops from the model the values written ttl or more before now.
func expire(m incModel, written map[string]int64, now int64) {
	for k, w := range written {
		if now-w >= 100 {
			delete(m.value, k)
			delete(written, k)
		}
	}
}

// TestMemoryIncrementalRestoresEveryCheckpoint checkpoints a backend many
// times with writes, overwrites, deletes and TTL expiry in between, with
// new bases materialized along the way, and restores every checkpoint into
// a new backend, which must hold what the model says; the restored
// backend's own checkpoints (deltas on the restored chain) restore too.
func TestMemoryIncrementalRestoresEveryCheckpoint(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	var now int64 = 1_700_000_000_000
	clock := func() int64 { return now }
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	f := openIncFixture(t, full, clock, 2048)
	defer f.b.Close()
	f.register(t, clock)
	rnd := rand.New(rand.NewPCG(1, 2))
	m := incModel{value: map[string]int64{}, list: map[int64][]string{}, mp: map[string]map[string]int64{}}
	written := map[string]int64{}
	bases := map[string]bool{}
	for round := range 60 {
		f.mutate(rnd, now, written, m, 150)
		now += int64(rnd.IntN(40))
		expire(m, written, now)
		fs := statetest.PersistFiles(t, f.b, sf)
		for _, n := range fs.Shared {
			if strings.HasSuffix(n, ".base") {
				bases[n] = true
			}
		}
		r := openIncFixture(t, full, clock, 2048)
		if err := r.b.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
			t.Fatalf("round %d: RestoreFiles: %v", round, err)
		}
		r.register(t, clock)
		if got, want := r.read(full).String(), m.String(); got != want {
			t.Fatalf("round %d: restored state differs\ngot:\n%s\nwant:\n%s", round, got, want)
		}
		if round%10 == 9 {
			// Continue the restored chain: a delta on top of it restores.
			r2m := incModel{value: cloneMap(m.value), list: map[int64][]string{}, mp: map[string]map[string]int64{}}
			for k, v := range m.list {
				r2m.list[k] = slices.Clone(v)
			}
			for k, v := range m.mp {
				r2m.mp[k] = cloneMap(v)
			}
			w2 := cloneMap(written)
			r.mutate(rnd, now, w2, r2m, 50)
			fs2 := statetest.PersistFiles(t, r.b, sf)
			r3 := openIncFixture(t, full, clock, 2048)
			if err := r3.b.RestoreFiles([]*state.FileState{fs2}, sf); err != nil {
				t.Fatal(err)
			}
			r3.register(t, clock)
			if got, want := r3.read(full).String(), r2m.String(); got != want {
				t.Fatalf("round %d: restore of the restored chain differs\ngot:\n%s\nwant:\n%s", round, got, want)
			}
			r3.b.Close()
		}
		r.b.Close()
	}
	if len(bases) < 2 {
		t.Fatalf("%d bases were materialized over 60 checkpoints, want at least 2", len(bases))
	}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// syncFixture writes to f what makes its states in rng hold want:
// deletes, overwrites and new entries.
func syncFixture(f *incFixture, want incModel, rng state.KeyGroupRange) {
	cur := f.read(rng)
	for k := range cur.value {
		if _, ok := want.value[k]; !ok {
			f.value.Delete(k)
		}
	}
	for k, v := range want.value {
		if old, ok := cur.value[k]; !ok || old != v {
			f.value.Put(k, v)
		}
	}
	for k := range cur.list {
		if _, ok := want.list[k]; !ok {
			f.list.Clear(k)
		}
	}
	for k, v := range want.list {
		if !slices.Equal(cur.list[k], v) {
			f.list.Update(k, v)
		}
	}
	for k := range cur.mp {
		if _, ok := want.mp[k]; !ok {
			f.mp.Clear(k)
		}
	}
	for k, v := range want.mp {
		if fmt.Sprint(cur.mp[k]) != fmt.Sprint(v) {
			f.mp.Clear(k)
			for uk, uv := range v {
				f.mp.Put(k, uk, uv)
			}
		}
	}
}

// TestMemoryIncrementalRescale checkpoints two subtasks incrementally
// (each restored from the chain of one earlier subtask, so that their
// chains share its files), restores their chains at parallelism 3 and 1,
// checkpoints the restored backends again (deltas on the rescaled chains)
// and restores those.
func TestMemoryIncrementalRescale(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	now := int64(1_700_000_000_000)
	clock := func() int64 { return now }
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	rnd := rand.New(rand.NewPCG(3, 4))
	m := incModel{value: map[string]int64{}, list: map[int64][]string{}, mp: map[string]map[string]int64{}}
	written := map[string]int64{}
	src := openIncFixture(t, full, clock, 1<<20)
	src.register(t, clock)
	defer src.b.Close()
	var first *state.FileState
	for range 5 {
		src.mutate(rnd, now, written, m, 200)
		first = statetest.PersistFiles(t, src.b, sf)
	}
	// The two old subtasks start from src's chain and go on alone.
	var olds []*incFixture
	snaps := make([]*state.FileState, 2)
	for i := range 2 {
		o := openIncFixture(t, state.RangeForSubtask(i, incMaxP, 2), clock, 1500)
		if err := o.b.RestoreFiles([]*state.FileState{first}, sf); err != nil {
			t.Fatal(err)
		}
		o.register(t, clock)
		defer o.b.Close()
		olds = append(olds, o)
	}
	for range 8 {
		src.mutate(rnd, now, written, m, 200)
		for i, o := range olds {
			rng := state.RangeForSubtask(i, incMaxP, 2)
			syncFixture(o, m.only(rng), rng)
			snaps[i] = statetest.PersistFiles(t, o.b, sf)
		}
	}
	for _, p := range []int{3, 1} {
		for i := range p {
			rng := state.RangeForSubtask(i, incMaxP, p)
			r := openIncFixture(t, rng, clock, 1500)
			if err := r.b.RestoreFiles(snaps, sf); err != nil {
				t.Fatal(err)
			}
			r.register(t, clock)
			want := m.only(rng)
			if got := r.read(rng).String(); got != want.String() {
				t.Fatalf("parallelism %d, subtask %d: restored state differs\ngot:\n%s\nwant:\n%s", p, i, got, want)
			}
			// A delta on the rescaled chain restores too.
			for k := range incKeys {
				if vk := fmt.Sprint("v", k); rng.Contains(keyGroupOf(vk, incMaxP)) {
					r.value.Put(vk, -1)
					want.value[vk] = -1
					break
				}
			}
			fs := statetest.PersistFiles(t, r.b, sf)
			r2 := openIncFixture(t, rng, clock, 1500)
			if err := r2.b.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
				t.Fatal(err)
			}
			r2.register(t, clock)
			if got := r2.read(rng).String(); got != want.String() {
				t.Fatalf("parallelism %d, subtask %d: checkpoint after rescale differs\ngot:\n%s\nwant:\n%s", p, i, got, want)
			}
			r.b.Close()
			r2.b.Close()
		}
	}
}

// TestMemoryIncrementalDiscardedCapture leaves captures unpersisted (an
// aborted checkpoint's, a failed write's) and persists a later one: its
// delta must hold their changes too, the later values winning.
func TestMemoryIncrementalDiscardedCapture(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	clock := func() int64 { return 1 }
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	f := openIncFixture(t, full, clock, 1<<20)
	defer f.b.Close()
	f.register(t, clock)
	for k := range incKeys {
		f.value.Put(fmt.Sprint("v", k), int64(k))
	}
	statetest.PersistFiles(t, f.b, sf)
	want := f.read(full)

	// Changed before a capture that is discarded...
	f.value.Put("v1", 100)
	f.value.Delete("v2")
	want.value["v1"] = 100
	delete(want.value, "v2")
	c, err := f.b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := c.(interface{ Discard() error }); ok {
		if err := d.Discard(); err != nil {
			t.Fatal(err)
		}
	}
	// ... and before one whose write fails.
	f.value.Put("v3", 300)
	want.value["v3"] = 300
	c, err = f.b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.(state.FileCaptured).PersistFiles(failingShared{sf}); err == nil {
		t.Fatal("PersistFiles into failing storage succeeded")
	}
	f.value.Put("v1", 101)
	want.value["v1"] = 101
	fs := statetest.PersistFiles(t, f.b, sf)

	r := openIncFixture(t, full, clock, 1<<20)
	defer r.b.Close()
	if err := r.b.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	r.register(t, clock)
	if got := r.read(full).String(); got != want.String() {
		t.Fatalf("restored state differs\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// failingShared fails every write.
type failingShared struct{ *dirShared }

func (f failingShared) Write(name string, write func(io.Writer) error) error {
	return fmt.Errorf("writing %s: disk full", name)
}

// TestMemoryIncrementalPendingTables checkpoints restored state whose
// tables are not registered yet: from the chain of one old subtask alone
// (its entries written into the new chain's files as they were restored),
// and from that chain beside the key-group data of a second old subtask
// (the checkpoint is then written whole, the chain's entries encoded
// again). Each checkpoint must restore to the state the old subtasks held.
func TestMemoryIncrementalPendingTables(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	now := int64(1_700_000_000_000)
	clock := func() int64 { return now }
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	lo, hi := state.RangeForSubtask(0, incMaxP, 2), state.RangeForSubtask(1, incMaxP, 2)
	rnd := rand.New(rand.NewPCG(5, 6))
	m := incModel{value: map[string]int64{}, list: map[int64][]string{}, mp: map[string]map[string]int64{}}
	written := map[string]int64{}
	src := openIncFixture(t, full, clock, 1<<20)
	defer src.b.Close()
	src.register(t, clock)

	// Subtask 0 checkpoints incrementally: a base and deltas on it.
	chained := openIncFixture(t, lo, clock, 1<<20)
	defer chained.b.Close()
	chained.register(t, clock)
	var chain *state.FileState
	for range 4 {
		src.mutate(rnd, now, written, m, 200)
		syncFixture(chained, m.only(lo), lo)
		chain = statetest.PersistFiles(t, chained.b, sf)
	}
	// Subtask 1 checkpoints key-group data.
	plain := &incFixture{b: state.NewMemoryBackend()}
	if err := plain.b.Open(hi, incMaxP); err != nil {
		t.Fatal(err)
	}
	plain.register(t, clock)
	syncFixture(plain, m.only(hi), hi)
	inline := &state.FileState{KeyGroups: mustPersist(t, plain.b)}

	for _, tc := range []struct {
		name  string
		rng   state.KeyGroupRange
		snaps []*state.FileState
	}{
		{"chain", lo, []*state.FileState{chain}},
		{"chain and key-group data", full, []*state.FileState{chain, inline}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := openIncFixture(t, tc.rng, clock, 1<<20)
			defer r.b.Close()
			if err := r.b.RestoreFiles(tc.snaps, sf); err != nil {
				t.Fatal(err)
			}
			// Two checkpoints before any table registers.
			statetest.PersistFiles(t, r.b, sf)
			fs := statetest.PersistFiles(t, r.b, sf)
			again := openIncFixture(t, tc.rng, clock, 1<<20)
			defer again.b.Close()
			if err := again.b.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
				t.Fatal(err)
			}
			again.register(t, clock)
			if got, want := again.read(tc.rng).String(), m.only(tc.rng).String(); got != want {
				t.Fatalf("restored state differs\ngot:\n%s\nwant:\n%s", got, want)
			}
			// The tables register after the captures.
			r.register(t, clock)
			if got, want := r.read(tc.rng).String(), m.only(tc.rng).String(); got != want {
				t.Fatalf("state registered after two checkpoints differs\ngot:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestMemoryIncrementalRestoreWorkers restores the same chain with key
// groups merged and decoded on one goroutine and on several: the states
// must be equal, whatever the machine's number of cores.
func TestMemoryIncrementalRestoreWorkers(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	now := int64(1_700_000_000_000)
	clock := func() int64 { return now }
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	rnd := rand.New(rand.NewPCG(7, 8))
	m := incModel{value: map[string]int64{}, list: map[int64][]string{}, mp: map[string]map[string]int64{}}
	written := map[string]int64{}
	src := openIncFixture(t, full, clock, 1<<20)
	defer src.b.Close()
	src.register(t, clock)
	var fs *state.FileState
	for range 6 {
		src.mutate(rnd, now, written, m, 300)
		fs = statetest.PersistFiles(t, src.b, sf)
	}
	for _, workers := range []int{1, 3, 8} {
		undo := state.SetRestoreWorkers(workers)
		r := openIncFixture(t, full, clock, 1<<20)
		err := r.b.RestoreFiles([]*state.FileState{fs}, sf)
		if err == nil {
			r.register(t, clock)
		}
		undo()
		if err != nil {
			t.Fatalf("%d workers: %v", workers, err)
		}
		if got, want := r.read(full).String(), m.String(); got != want {
			t.Fatalf("%d workers: restored state differs\ngot:\n%s\nwant:\n%s", workers, got, want)
		}
		r.b.Close()
	}
}

// TestMemoryIncrementalRestoreWorkersStructKeys restores, on several
// goroutines, a table whose keys are hashed from their encoding.
func TestMemoryIncrementalRestoreWorkersStructKeys(t *testing.T) {
	type pair struct{ A, B int64 }
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	src := openIncremental(t, 1<<40, full)
	defer src.Close()
	v, err := state.NewValue(src, "pairs", state.CodecFor[pair](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	const keys = 5000
	var fs *state.FileState
	for round := range 2 {
		for k := range int64(keys) {
			v.Put(pair{k, -k}, k*10+int64(round))
		}
		fs = statetest.PersistFiles(t, src, sf)
	}
	undo := state.SetRestoreWorkers(8)
	defer undo()
	r := openIncremental(t, 1<<40, full)
	defer r.Close()
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	rv, err := state.NewValue(r, "pairs", state.CodecFor[pair](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(keys) {
		if got, ok := rv.Get(pair{k, -k}); !ok || got != k*10+1 {
			t.Fatalf("key %d: got %d, %v, want %d", k, got, ok, k*10+1)
		}
	}
}

// TestMemoryFailedRegisterRefusesCapture registers a restored table with a
// value codec that cannot decode its entries: Register fails, and the
// backend, holding part of the state, refuses to be captured.
func TestMemoryFailedRegisterRefusesCapture(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	src := openIncremental(t, 1<<40, full)
	defer src.Close()
	v, err := state.NewValue(src, "v", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(200) {
		v.Put(k, "abc")
	}
	fs := statetest.PersistFiles(t, src, sf)
	r := openIncremental(t, 1<<40, full)
	defer r.Close()
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	if _, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[int64]()); err == nil || !strings.Contains(err.Error(), `restoring state "v"`) {
		t.Fatalf("registering with the wrong value codec: %v, want a restore error", err)
	}
	if _, err := r.Capture(); err == nil || !strings.Contains(err.Error(), "after a failed restore") {
		t.Fatalf("Capture after a failed restore: %v, want it refused", err)
	}
}

// TestMemoryIncrementalRestoreLargeShards restores a table of string keys
// whose shards are large enough for the restore to map their slots when
// it grows them (growRestored), on one goroutine and on several.
func TestMemoryIncrementalRestoreLargeShards(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	src := openIncremental(t, 1<<40, full)
	defer src.Close()
	v, err := state.NewValue(src, "big", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	const keys = 100_000
	for k := range keys {
		v.Put(fmt.Sprintf("key-%d", k), int64(k))
	}
	statetest.PersistFiles(t, src, sf)
	for k := 0; k < keys+10_000; k += 3 {
		v.Put(fmt.Sprintf("key-%d", k), int64(-k))
	}
	fs := statetest.PersistFiles(t, src, sf)
	for _, workers := range []int{1, 2} {
		undo := state.SetRestoreWorkers(workers)
		r := openIncremental(t, 1<<40, full)
		if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
			t.Fatal(err)
		}
		rv, err := state.NewValue(r, "big", state.CodecFor[string](), state.CodecFor[int64]())
		undo()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for k := 0; k < keys+10_000; k++ {
			want, present := int64(k), k < keys
			if k%3 == 0 {
				want, present = int64(-k), true
			}
			got, ok := rv.Get(fmt.Sprintf("key-%d", k))
			if ok != present || ok && got != want {
				t.Fatalf("%d workers: key-%d: got %d, %v, want %d, %v", workers, k, got, ok, want, present)
			}
			if ok {
				n++
			}
		}
		if n == 0 {
			t.Fatalf("%d workers: nothing restored", workers)
		}
		r.Close()
	}
}

// TestMemoryRestoreUnmapsFiles checks that a restore keeps the chain's
// files mapped only while restored entries point into them: until the
// next capture, or Close; the state stays readable after.
func TestMemoryRestoreUnmapsFiles(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	src := openIncremental(t, 1<<40, full)
	defer src.Close()
	v, err := state.NewValue(src, "v", state.CodecFor[string](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	for k := range 1000 {
		v.Put(fmt.Sprintf("key-%d", k), fmt.Sprintf("value-%d", k))
	}
	statetest.PersistFiles(t, src, sf)
	for k := 0; k < 1000; k += 7 {
		v.Put(fmt.Sprintf("key-%d", k), "changed")
	}
	fs := statetest.PersistFiles(t, src, sf)

	restore := func() *state.MemoryBackend {
		r := openIncremental(t, 1<<40, full)
		if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
			t.Fatal(err)
		}
		if n := state.MappedFiles(r); runtime.GOOS == "linux" && n != 2 {
			t.Fatalf("%d files mapped after the restore, want the base and the delta", n)
		}
		return r
	}
	r := restore()
	// Captured before the table registers: its entries are copied out of
	// the files, which are then unmapped.
	statetest.PersistFiles(t, r, sf)
	if n := state.MappedFiles(r); n != 0 {
		t.Fatalf("%d files mapped after a capture", n)
	}
	rv, err := state.NewValue(r, "v", state.CodecFor[string](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	for k := range 1000 {
		want := fmt.Sprintf("value-%d", k)
		if k%7 == 0 {
			want = "changed"
		}
		if got, ok := rv.Get(fmt.Sprintf("key-%d", k)); !ok || got != want {
			t.Fatalf("key-%d: got %q, %v, want %q", k, got, ok, want)
		}
	}
	r.Close()

	r = restore()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := state.MappedFiles(r); n != 0 {
		t.Fatalf("%d files mapped after Close", n)
	}
}

// TestMemoryIncrementalCompactsFromFiles makes a materialization due
// (every checkpoint rewrites every value) and checks that it freezes no
// table: after each capture of changes no key group's slots are shared
// (a freeze would make the next write to each copy them), while a base
// merged from the chain's files comes to be listed, and the checkpoints
// listing it restore what was written.
func TestMemoryIncrementalCompactsFromFiles(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	b := openIncremental(t, 1024, full)
	defer b.Close()
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	const keys = 500
	merged := 0
	for round := int64(0); round < 400 && merged < 3; round++ {
		for k := range int64(keys) {
			v.Put(k, k*1000+round)
		}
		fs := statetest.PersistFiles(t, b, sf)
		if n := state.SharedShards(v); round > 0 && n != 0 {
			t.Fatalf("round %d: %d key groups frozen by a capture of changes", round, n)
		}
		if !slices.ContainsFunc(fs.Shared, func(n string) bool { return strings.HasSuffix(n, ".merged.base") }) {
			// The compaction runs beside the job: give it time.
			time.Sleep(2 * time.Millisecond)
			continue
		}
		merged++
		r := openIncremental(t, 1024, full)
		if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
			t.Fatalf("round %d: RestoreFiles: %v", round, err)
		}
		rv, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[int64]())
		if err != nil {
			t.Fatal(err)
		}
		for k := range int64(keys) {
			if got, ok := rv.Get(k); !ok || got != k*1000+round {
				t.Fatalf("round %d: restored key %d = %d, %v; want %d", round, k, got, ok, k*1000+round)
			}
		}
		r.Close()
	}
	if merged < 3 {
		t.Fatalf("%d checkpoints listed a base merged from files, want 3", merged)
	}
}

// TestMemoryIncrementalCompactionDropsExpired checks that a base merged
// from the chain's files leaves out the entries of a table with a TTL that
// expired, never read again, as a base of the tables would: else they
// would stay in every base after it.
func TestMemoryIncrementalCompactionDropsExpired(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	var now int64 = 1_700_000_000_000
	b := openIncremental(t, 1024, full)
	defer b.Close()
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[int64](),
		state.WithTTL(time.Second), state.WithClock(func() int64 { return now }))
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(500) {
		v.Put(-1-k, k) // expires, never read again
	}
	// Bases merged before the clock moves keep the 500 entries.
	before := map[string]bool{}
	mergedBases := func(fs *state.FileState) []string {
		var ns []string
		for _, n := range fs.Shared {
			if strings.HasSuffix(n, ".merged.base") {
				ns = append(ns, n)
			}
		}
		return ns
	}
	// The first capture may start a merge of its own: wait for it to be
	// listed, so that the one looked for below starts after the clock
	// moved.
	for range 100 {
		ns := mergedBases(statetest.PersistFiles(t, b, sf))
		for _, n := range ns {
			before[n] = true
		}
		if len(ns) > 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	now += 2000
	for round := int64(0); round < 400; round++ {
		for k := range int64(300) {
			v.Put(k, round)
		}
		fs := statetest.PersistFiles(t, b, sf)
		if !slices.ContainsFunc(mergedBases(fs), func(n string) bool { return !before[n] }) {
			for _, n := range mergedBases(fs) {
				before[n] = true
			}
			time.Sleep(2 * time.Millisecond)
			continue
		}
		groups, _, ok, err := state.ReadChain(fs, sf)
		if err != nil || !ok {
			t.Fatalf("ReadChain: %v, %v", ok, err)
		}
		n := 0
		for _, g := range groups {
			n += g.Entries
		}
		if n != 300 {
			t.Fatalf("the chain with a merged base holds %d entries, want the 300 live ones", n)
		}
		return
	}
	t.Fatal("no checkpoint listed a base merged from files")
}
