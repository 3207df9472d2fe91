package pebble_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
	"github.com/clinkstream/clink/state/statetest"
)

// dirShared is a state.SharedFiles over a directory that counts what is
// put into it.
type dirShared struct {
	putMu sync.Mutex
	dir   string
	mu    struct {
		sync.Mutex
		puts     int
		putBytes int64
	}
}

func newDirShared(t testing.TB) *dirShared { return &dirShared{dir: t.TempDir()} }

func (s *dirShared) Put(name, path string) error {
	// Captures persisted concurrently may store the same file at once.
	s.putMu.Lock()
	defer s.putMu.Unlock()
	if s.Has(name) {
		return nil
	}
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := filepath.Join(s.dir, "."+name+".tmp")
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, in)
	if err = errors.Join(err, out.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		return err
	}
	s.mu.Lock()
	s.mu.puts++
	s.mu.putBytes += n
	s.mu.Unlock()
	return nil
}

func (s *dirShared) Has(name string) bool {
	_, err := os.Stat(filepath.Join(s.dir, name))
	return err == nil
}

func (s *dirShared) Path(name string) (string, error) {
	p := filepath.Join(s.dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// counts returns the files and bytes put so far.
func (s *dirShared) counts() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.puts, s.mu.putBytes
}

func testOptions(t testing.TB) pebble.Options {
	return pebble.Options{Dir: t.TempDir(), CacheBytes: 1 << 20, BlockCacheBytes: 4 << 20, MemTableBytes: 4 << 20}
}

func openBackend(t testing.TB, opts pebble.Options, r state.KeyGroupRange, maxP int) *pebble.Backend {
	t.Helper()
	b := pebble.New(opts)
	if err := b.Open(r, maxP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// fixture is one state of most kinds on a backend.
type fixture struct {
	b     *pebble.Backend
	value *state.ValueState[int64, int64]
	list  *state.ListState[string, string]
	mp    *state.MapState[int64, string, int64]
}

func newFixture(t testing.TB, b *pebble.Backend, opts ...state.StateOption) *fixture {
	t.Helper()
	f := &fixture{b: b}
	var err error
	if f.value, err = state.NewValue(b, "value", state.CodecFor[int64](), state.CodecFor[int64](), opts...); err != nil {
		t.Fatal(err)
	}
	if f.list, err = state.NewList(b, "list", state.CodecFor[string](), state.CodecFor[string](), opts...); err != nil {
		t.Fatal(err)
	}
	if f.mp, err = state.NewMap[int64, string, int64](b, "map", state.CodecFor[int64](), opts...); err != nil {
		t.Fatal(err)
	}
	return f
}

// write makes entry i of every state hold something derived from v.
func (f *fixture) write(i int, v int64) {
	f.value.Put(int64(i), v)
	f.list.Add(fmt.Sprint("l", i), fmt.Sprint(v))
	f.mp.Put(int64(i), fmt.Sprint("u", v%3), v)
}

// dump renders the entries 0..n-1 that the backend's range holds.
func (f *fixture) dump(n int) map[string]string {
	out := map[string]string{}
	rng, maxP := f.b.Range(), f.b.MaxParallelism()
	for i := range n {
		if rng.Contains(state.KeyGroupFor(state.HashUint64(uint64(i)), maxP)) {
			if v, ok := f.value.Get(int64(i)); ok {
				out[fmt.Sprint("value/", i)] = fmt.Sprint(v)
			}
			if f.mp.Len(int64(i)) > 0 {
				m := map[string]int64{}
				f.mp.Range(int64(i), func(k string, v int64) bool { m[k] = v; return true })
				out[fmt.Sprint("map/", i)] = fmt.Sprint(m)
			}
		}
		k := fmt.Sprint("l", i)
		if rng.Contains(state.KeyGroupFor(state.HashString(k), maxP)) {
			if l := f.list.Get(k); len(l) > 0 {
				out["list/"+k] = fmt.Sprint(l)
			}
		}
	}
	return out
}

func diffDumps(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var lines []string
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			lines = append(lines, fmt.Sprintf("%s: got %q (%v), want %q", k, g, ok, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, fmt.Sprintf("%s: got %q, want none", k, g))
		}
	}
	if len(lines) > 0 {
		slices.Sort(lines)
		t.Fatalf("%s: %d differences, first: %v", what, len(lines), lines[:min(len(lines), 10)])
	}
}

func full(maxP int) state.KeyGroupRange { return state.KeyGroupRange{Start: 0, End: maxP} }

// TestFilesRoundTrip persists through shared files and restores at the
// same parallelism: contents survive, writes after the capture are not in
// it, and a restored backend does not upload the files it restored from.
func TestFilesRoundTrip(t *testing.T) {
	const maxP, n = 32, 3000
	sf := newDirShared(t)
	f := newFixture(t, openBackend(t, testOptions(t), full(maxP), maxP))
	for i := range n {
		f.write(i, int64(i))
	}
	want := f.dump(n)
	c, err := f.b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	// Writes after the capture, before and while it is persisted.
	for i := range n / 2 {
		f.write(i, -1)
	}
	var fs *state.FileState
	done := make(chan error)
	go func() {
		var err error
		fs, err = c.(state.FileCaptured).PersistFiles(sf)
		done <- err
	}()
	for i := n / 2; i < n; i++ {
		f.value.Delete(int64(i))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(fs.Shared) == 0 {
		t.Fatal("the checkpoint references no shared file")
	}
	puts, _ := sf.counts()

	r := openBackend(t, testOptions(t), full(maxP), maxP)
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	rf := newFixture(t, r)
	diffDumps(t, "restored", rf.dump(n), want)

	// Unchanged, the restored state checkpoints without uploading.
	fs2 := statetest.PersistFiles(t, r, sf)
	if p, _ := sf.counts(); p != puts {
		t.Errorf("a checkpoint of the unchanged restored state put %d files", p-puts)
	}
	if !slices.Equal(fs2.Shared, fs.Shared) {
		t.Errorf("unchanged state references %v, the checkpoint it came from %v", fs2.Shared, fs.Shared)
	}
	// Changed, it uploads its new files, under names not taken before.
	rf.write(1, 1234)
	fs3 := statetest.PersistFiles(t, r, sf)
	var added []string
	for _, s := range fs3.Shared {
		if !slices.Contains(fs.Shared, s) {
			added = append(added, s)
		}
	}
	if p, _ := sf.counts(); len(added) == 0 || p != puts+len(added) {
		t.Errorf("a checkpoint after a change references %d new files and put %d", len(added), p-puts)
	}
	r3 := openBackend(t, testOptions(t), full(maxP), maxP)
	if err := r3.RestoreFiles([]*state.FileState{fs3}, sf); err != nil {
		t.Fatal(err)
	}
	want["value/1"] = "1234"
	want["list/l1"] = "[1 1234]"
	want["map/1"] = "map[u1:1234]"
	diffDumps(t, "restored from the restored backend's checkpoint", newFixture(t, r3).dump(n), want)
}

// TestIncrementalCheckpointUploadsChanges is the property on a
// small scale: after a checkpoint of N keys and changes to 1% of them, the
// next checkpoint uploads at most 5% of what the first did.
func TestIncrementalCheckpointUploadsChanges(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 50_000
	}
	const maxP = 128
	sf := newDirShared(t)
	b := openBackend(t, pebble.Options{Dir: t.TempDir()}, full(maxP), maxP)
	v, err := state.NewValue(b, "count", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v.Put(int64(i), int64(i))
	}
	fs1 := statetest.PersistFiles(t, b, sf)
	_, full := sf.counts()
	r := rand.New(rand.NewPCG(1, 2))
	for range n / 100 {
		k := int64(r.IntN(n))
		c, _ := v.Get(k)
		v.Put(k, c+1)
	}
	fs2 := statetest.PersistFiles(t, b, sf)
	_, total := sf.counts()
	incr := total - full
	t.Logf("%d keys: full checkpoint uploaded %d bytes in %d files (+%d inline); after 1%% changed: %d bytes (+%d inline), %.2f%%",
		n, full, len(fs1.Shared), inline(fs1), incr, inline(fs2), 100*float64(incr)/float64(full))
	if incr > full/20 {
		t.Errorf("incremental checkpoint uploaded %d bytes, more than 5%% of the full one's %d", incr, full)
	}
	if incr+int64(inline(fs2)) > full/20 {
		t.Errorf("incremental checkpoint uploaded %d bytes and %d inline, more than 5%% of the full one's %d", incr, inline(fs2), full)
	}
}

func inline(fs *state.FileState) int {
	n := 0
	for _, d := range fs.Named {
		n += len(d.Data)
	}
	return n
}

// TestRescaleFiles restores one checkpoint into 3 subtasks and their 3
// checkpoints into 1: each subtask holds exactly its key groups, and the
// union is everything.
func TestRescaleFiles(t *testing.T) {
	const maxP, n = 64, 2000
	sf := newDirShared(t)
	f := newFixture(t, openBackend(t, testOptions(t), full(maxP), maxP))
	for i := range n {
		f.write(i, int64(i))
	}
	want := f.dump(n)
	whole := statetest.PersistFiles(t, f.b, sf)

	var parts []*state.FileState
	union := map[string]string{}
	for sub := range 3 {
		rng := state.RangeForSubtask(sub, maxP, 3)
		b := openBackend(t, testOptions(t), rng, maxP)
		if err := b.RestoreFiles([]*state.FileState{whole}, sf); err != nil {
			t.Fatal(err)
		}
		fx := newFixture(t, b)
		got := fx.dump(n)
		for k, v := range got {
			if _, dup := union[k]; dup {
				t.Fatalf("%s in two subtasks", k)
			}
			union[k] = v
		}
		// Writes in each subtask after the rescale.
		for i := sub; i < n; i += 7 {
			if rng.Contains(state.KeyGroupFor(state.HashUint64(uint64(i)), maxP)) {
				fx.value.Put(int64(i), int64(-i))
				want[fmt.Sprint("value/", i)] = fmt.Sprint(-i)
			}
		}
		parts = append(parts, statetest.PersistFiles(t, b, sf))
	}
	diffDumps(t, "union of 3 subtasks", union, f.dump(n))

	b := openBackend(t, testOptions(t), full(maxP), maxP)
	if err := b.RestoreFiles(parts, sf); err != nil {
		t.Fatal(err)
	}
	diffDumps(t, "3 subtasks restored into 1", newFixture(t, b).dump(n), want)

	// 3 → 2: each new subtask takes key groups of two old ones.
	union = map[string]string{}
	for sub := range 2 {
		b := openBackend(t, testOptions(t), state.RangeForSubtask(sub, maxP, 2), maxP)
		if err := b.RestoreFiles(parts, sf); err != nil {
			t.Fatal(err)
		}
		for k, v := range newFixture(t, b).dump(n) {
			union[k] = v
		}
	}
	diffDumps(t, "3 subtasks restored into 2", union, want)
}

// TestTTLThroughFiles checks that entries expired at the capture are not
// restored, even on a clock at which they would be live, and that live
// ones keep their write time.
func TestTTLThroughFiles(t *testing.T) {
	const maxP = 16
	const t0 = int64(1_700_000_000_000)
	now := t0
	opts := []state.StateOption{state.WithTTL(100 * time.Millisecond), state.WithClock(func() int64 { return now })}
	sf := newDirShared(t)
	f := newFixture(t, openBackend(t, testOptions(t), full(maxP), maxP), opts...)
	for i := range 10 {
		f.write(i, 1)
	}
	now = t0 + 60
	for i := 10; i < 20; i++ {
		f.write(i, 2)
	}
	now = t0 + 100 // 0..9 expire, unread
	fs := statetest.PersistFiles(t, f.b, sf)

	now = t0 + 60
	r := newFixture(t, openBackend(t, testOptions(t), full(maxP), maxP), opts...)
	if err := r.b.RestoreFiles([]*state.FileState{fs}, sf); err == nil {
		t.Fatal("RestoreFiles after tables were registered: no error")
	}
	rb := openBackend(t, testOptions(t), full(maxP), maxP)
	if err := rb.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	r = newFixture(t, rb, opts...)
	got := r.dump(20)
	for i := range 20 {
		_, ok := got[fmt.Sprint("value/", i)]
		if ok != (i >= 10) {
			t.Errorf("value %d restored: %v, want %v", i, ok, i >= 10)
		}
	}
	now = t0 + 159
	if _, ok := r.value.Get(15); !ok {
		t.Error("value 15 expired before its TTL")
	}
	now = t0 + 160
	if _, ok := r.value.Get(15); ok {
		t.Error("value 15 live after its TTL")
	}
}

// TestTimersThroughFiles restores timers through files and a rescale.
func TestTimersThroughFiles(t *testing.T) {
	const maxP = 16
	sf := newDirShared(t)
	b := openBackend(t, testOptions(t), full(maxP), maxP)
	tm, err := state.NewTimers(b, state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(50) {
		tm.Register(state.EventTime, k, 1000-k)
	}
	fs := statetest.PersistFiles(t, b, sf)
	var fired []int64
	for sub := range 2 {
		r := openBackend(t, testOptions(t), state.RangeForSubtask(sub, maxP, 2), maxP)
		if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
			t.Fatal(err)
		}
		rt, err := state.NewTimers(r, state.CodecFor[int64]())
		if err != nil {
			t.Fatal(err)
		}
		last := int64(0)
		if err := rt.Fire(state.EventTime, 2000, func(k, ts int64) error {
			if ts < last || ts != 1000-k {
				t.Errorf("fired %d@%d after %d", k, ts, last)
			}
			last = ts
			fired = append(fired, k)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(fired)
	if len(fired) != 50 || fired[0] != 0 || fired[49] != 49 {
		t.Errorf("fired %v, want 0..49 once each", fired)
	}
}

// TestCapturesOutstanding persists several captures concurrently with
// writes, out of order (run with -race).
func TestCapturesOutstanding(t *testing.T) {
	const maxP, n, rounds = 16, 500, 5
	sf := newDirShared(t)
	f := newFixture(t, openBackend(t, testOptions(t), full(maxP), maxP))
	var wg sync.WaitGroup
	states := make([]*state.FileState, rounds)
	wants := make([]map[string]string, rounds)
	errs := make([]error, rounds)
	var caps []state.Captured
	for round := range rounds {
		for i := range n {
			f.write(i, int64(round*n+i))
		}
		wants[round] = f.dump(n)
		c, err := f.b.Capture()
		if err != nil {
			t.Fatal(err)
		}
		caps = append(caps, c)
	}
	for round := rounds - 1; round >= 0; round-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[round], errs[round] = caps[round].(state.FileCaptured).PersistFiles(sf)
		}()
	}
	for i := range n {
		f.write(i, -1)
	}
	wg.Wait()
	for round := range rounds {
		if errs[round] != nil {
			t.Fatal(errs[round])
		}
		r := openBackend(t, testOptions(t), full(maxP), maxP)
		if err := r.RestoreFiles([]*state.FileState{states[round]}, sf); err != nil {
			t.Fatal(err)
		}
		diffDumps(t, fmt.Sprint("capture ", round), newFixture(t, r).dump(n), wants[round])
	}
	// A capture persists once; a discarded one not at all.
	if _, err := caps[0].(state.FileCaptured).PersistFiles(sf); err == nil {
		t.Error("a capture persisted twice")
	}
	c, err := f.b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(*pebble.Capture).Discard(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Persist(); err == nil {
		t.Error("a discarded capture persisted")
	}
}

// TestRestoreFilesRefusesBadStates gives RestoreFiles damaged or foreign
// file states.
func TestRestoreFilesRefusesBadStates(t *testing.T) {
	const maxP = 16
	sf := newDirShared(t)
	f := newFixture(t, openBackend(t, testOptions(t), full(maxP), maxP))
	f.write(1, 1)
	good := statetest.PersistFiles(t, f.b, sf)
	clone := func() *state.FileState {
		c := &state.FileState{Shared: slices.Clone(good.Shared), Named: slices.Clone(good.Named)}
		return c
	}
	setMeta := func(fs *state.FileState, data string) {
		for i, n := range fs.Named {
			if n.Name == "pebble.json" {
				fs.Named[i].Data = []byte(data)
			}
		}
	}
	cases := map[string]func() *state.FileState{
		"Nil": func() *state.FileState { return nil },
		"NoMeta": func() *state.FileState {
			c := clone()
			c.Named = c.Named[1:]
			return c
		},
		"BadJSON":      func() *state.FileState { c := clone(); setMeta(c, "{"); return c },
		"UnknownField": func() *state.FileState { c := clone(); setMeta(c, `{"format":1,"x":1}`); return c },
		"NewerFormat": func() *state.FileState {
			c := clone()
			setMeta(c, `{"format":2,"keyGroupEnd":16,"maxParallelism":16}`)
			return c
		},
		"OtherMaxP": func() *state.FileState {
			c := clone()
			setMeta(c, `{"format":1,"keyGroupEnd":8,"maxParallelism":8}`)
			return c
		},
		"BadRange": func() *state.FileState {
			c := clone()
			setMeta(c, `{"format":1,"keyGroupStart":9,"keyGroupEnd":8,"maxParallelism":16}`)
			return c
		},
		"PathInFileName": func() *state.FileState {
			c := clone()
			setMeta(c, `{"format":1,"keyGroupEnd":16,"maxParallelism":16,"files":{"../x.sst":"a"}}`)
			c.Shared = []string{"a"}
			return c
		},
		"Unreferenced": func() *state.FileState { c := clone(); c.Shared = nil; return c },
		"UnknownNamed": func() *state.FileState {
			c := clone()
			c.Named = append(c.Named, state.NamedData{Name: "other"})
			return c
		},
		"InlineDataFile": func() *state.FileState {
			c := clone()
			c.Named = append(c.Named, state.NamedData{Name: "files/000001.sst"})
			return c
		},
		"KeyGroupData": func() *state.FileState {
			c := clone()
			c.KeyGroups = []state.KeyGroupData{{KeyGroup: 1}}
			return c
		},
		"MissingSharedFile": func() *state.FileState {
			c := clone()
			setMeta(c, `{"format":1,"keyGroupEnd":16,"maxParallelism":16,"files":{"000001.sst":"nope"}}`)
			c.Shared = []string{"nope"}
			return c
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			b := openBackend(t, testOptions(t), full(maxP), maxP)
			if err := b.RestoreFiles([]*state.FileState{mk()}, sf); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// TestCloseRemovesWorkingDir checks that Close leaves Dir as it found it,
// with captures not persisted.
func TestCloseRemovesWorkingDir(t *testing.T) {
	dir := t.TempDir()
	b := pebble.New(pebble.Options{Dir: dir})
	if err := b.Open(full(8), 8); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, b)
	f.write(1, 1)
	if _, err := b.Capture(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("Dir holds %d entries after Close", len(ents))
	}
	if err := (pebble.Options{CacheBytes: -1}).Validate(); err == nil {
		t.Error("negative CacheBytes validated")
	}
	if err := pebble.New(pebble.Options{MemTableBytes: -1}).Open(full(8), 8); err == nil {
		t.Error("Open with invalid options: no error")
	}
}
