package state_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/statetest"
)

// discard drops a capture as the runtime does for an aborted checkpoint.
func discard(t *testing.T, b state.Backend) {
	t.Helper()
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ Discard() error }).Discard(); err != nil {
		t.Fatal(err)
	}
}

// Once a chain exists, a capture holds the changes since the last one:
// Persist, which must return the whole state, refuses it with a message
// that says why, and PersistFiles writes its delta.
func TestMemoryCaptureOfChangesRefusesPersist(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	b := newIncremental(t, 1<<30)
	defer b.Close()
	if err := b.Open(state.KeyGroupRange{Start: 0, End: 4}, 4); err != nil {
		t.Fatal(err)
	}
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	v.Put(1, 1)
	statetest.PersistFiles(t, b, sf)
	v.Put(2, 2)
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Persist(); err == nil || err.Error() != "persisting memory state: this capture holds the changes since the last checkpoint for a delta of the chain (PersistFiles), not the whole state" {
		t.Fatalf("Persist of a capture of changes: %v", err)
	}
	fs, err := c.(state.FileCaptured).PersistFiles(sf)
	if err != nil {
		t.Fatal(err)
	}
	r := newIncremental(t, 1<<30)
	defer r.Close()
	if err := r.Open(state.KeyGroupRange{Start: 0, End: 4}, 4); err != nil {
		t.Fatal(err)
	}
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	rv, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := rv.Get(1); a != 1 {
		t.Errorf("restored key 1 = %d", a)
	}
	if a, _ := rv.Get(2); a != 2 {
		t.Errorf("restored key 2 = %d", a)
	}
}

// Keys that come and go between two checkpoints (session windows opened
// and merged, say) leave the key group of a few live entries: its delta
// writes those entries after a reset, not a deletion per key that went.
func TestMemoryDeltaOfChurnedKeyGroupIsItsEntries(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	const maxP = 4
	b := newIncremental(t, 1<<30)
	defer b.Close()
	if err := b.Open(state.KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
		t.Fatal(err)
	}
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(8) {
		v.Put(k, k)
	}
	statetest.PersistFiles(t, b, sf)
	for k := int64(100); k < 20_100; k++ {
		v.Put(k, k)
		v.Delete(k)
	}
	v.Put(3, 33)
	fs := statetest.PersistFiles(t, b, sf)
	if n := fileSize(t, sf, newest(fs)); n > 400 {
		t.Fatalf("delta after 20000 keys came and went among 8 is %d bytes", n)
	}
	r := newIncremental(t, 1<<30)
	defer r.Close()
	if err := r.Open(state.KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
		t.Fatal(err)
	}
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	rv, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int64{}
	rv.Range(func(k, x int64) bool { got[k] = x; return true })
	want := map[int64]int64{0: 0, 1: 1, 2: 2, 3: 33, 4: 4, 5: 5, 6: 6, 7: 7}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
}

// The changes of discarded captures go into the next delta, merged with
// its own: each key once, with its newest value, and a value that grew is
// written as edits of the value the chain holds from before the discarded
// captures, also when the key was deleted and written again in between.
// Float keys, whose == differs from equal encodings (+0 and -0), are
// merged by their encodings.
func TestMemoryDeltaMergesDiscardedCaptures(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	b := newIncremental(t, 1<<30)
	defer b.Close()
	if err := b.Open(full, incMaxP); err != nil {
		t.Fatal(err)
	}
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[sides]())
	if err != nil {
		t.Fatal(err)
	}
	fv, err := state.NewValue(b, "f", state.CodecFor[float64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	negZero := math.Copysign(0, -1)
	floats := map[float64]int64{}
	putF := func(k float64, x int64) { fv.Put(k, x); floats[k] = x }
	delF := func(k float64) { fv.Delete(k); delete(floats, k) }
	rnd := rand.New(rand.NewPCG(7, 8))
	m := sidesModel{}
	mutateSides(rnd, v, m, 200, keysIn(full))
	putF(0, 1)
	putF(1.5, 2)
	statetest.PersistFiles(t, b, sf)
	for round := range 20 {
		mutateSides(rnd, v, m, 40, keysIn(full))
		switch round % 4 {
		case 0:
			delF(0)
			putF(negZero, int64(round))
		case 1:
			delF(negZero)
			putF(0, int64(round))
		case 2:
			putF(1.5, int64(round))
			delF(1.5)
			putF(1.5, int64(-round))
		}
		if round%3 != 2 {
			discard(t, b)
			continue
		}
		fs := statetest.PersistFiles(t, b, sf)
		r, _, got := restoredSides(t, []*state.FileState{fs}, sf, full)
		rf, err := state.NewValue(r, "f", state.CodecFor[float64](), state.CodecFor[int64]())
		if err != nil {
			t.Fatal(err)
		}
		gotF := map[string]int64{}
		rf.Range(func(k float64, x int64) bool { gotF[fmt.Sprintf("%x", math.Float64bits(k))] = x; return true })
		wantF := map[string]int64{}
		for k, x := range floats {
			wantF[fmt.Sprintf("%x", math.Float64bits(k))] = x
		}
		r.Close()
		if got.String() != m.String() {
			t.Fatalf("round %d: restored state differs\ngot:\n%s\nwant:\n%s", round, got, m)
		}
		if fmt.Sprint(gotF) != fmt.Sprint(wantF) {
			t.Fatalf("round %d: restored float keys %v, want %v", round, gotF, wantF)
		}
	}
}

// preFiles counts the files of preemptive persists in sf.
func preFiles(t *testing.T, sf *dirShared) int {
	t.Helper()
	n := 0
	for _, f := range sf.files(t) {
		if strings.HasSuffix(f, ".pre") {
			n++
		}
	}
	return n
}

// waitPreemptive waits until sf holds want files of preemptive persists.
func waitPreemptive(t *testing.T, sf *dirShared, want int) {
	t.Helper()
	untilPreFiles(t, sf, want, func() {})
}

// persistAhead asks b to persist preemptively until sf holds want
// preemptive files: a persist does not start while the one before has
// not noted its file, which it does just after writing it.
func persistAhead(t *testing.T, b *state.MemoryBackend, sf *dirShared, want int) {
	t.Helper()
	untilPreFiles(t, sf, want, func() {
		if err := b.PersistPreemptively(); err != nil {
			t.Fatal(err)
		}
	})
}

// untilPreFiles calls each, then counts the preemptive files, until there
// are want of them or 10 s passed.
func untilPreFiles(t *testing.T, sf *dirShared, want int, each func()) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		each()
		n := preFiles(t, sf)
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d preemptive files after 10s, want %d", n, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// A join's rows gathered between checkpoints are written ahead of the
// next one: the checkpoint lists the preemptive files before its own
// delta, which holds only what changed after them, and the chain restores
// to the state at the checkpoint. A preemptive file that is gone before a
// checkpoint could list it (a retention collected it) leaves its changes
// to the checkpoint's delta.
func TestMemoryPreemptivePersist(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost=%v", lose), func(t *testing.T) {
			sf := &dirShared{dir: t.TempDir()}
			full := state.KeyGroupRange{Start: 0, End: incMaxP}
			b, err := state.NewMemoryBackendWith(state.MemoryOptions{Incremental: true, MaterializeBytes: 1 << 30, PreemptiveEntries: 2000, PreemptiveInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := b.Open(full, incMaxP); err != nil {
				t.Fatal(err)
			}
			b.UseShared(sf)
			v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[sides]())
			if err != nil {
				t.Fatal(err)
			}
			m := sidesModel{}
			row := func(k int64, i int) {
				cur := m[k]
				cur.L = grow(cur.L, []byte(fmt.Sprintf("row %d of %d;", i, k)))
				v.Put(k, cur)
				m[k] = cur
			}
			for k := range int64(3000) {
				row(k, 0)
			}
			listed := statetest.PersistFiles(t, b, sf).Shared // the first checkpoint: a whole capture
			for round := range 3 {
				for k := range int64(2500) {
					row(k, round+1)
				}
				if err := b.PersistPreemptively(); err != nil {
					t.Fatal(err)
				}
				waitPreemptive(t, sf, round+1)
				// Not enough changes since: no second preemptive persist.
				row(7, 100+round)
				if err := b.PersistPreemptively(); err != nil {
					t.Fatal(err)
				}
				pres := 0
				for _, f := range sf.files(t) {
					if strings.HasSuffix(f, ".pre") {
						pres++
						if lose && round == 2 && !slices.Contains(listed, f) {
							if err := os.Remove(filepath.Join(sf.dir, f)); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				if pres != round+1 {
					t.Fatalf("round %d: %d preemptive files, want %d", round, pres, round+1)
				}
				fs := statetest.PersistFiles(t, b, sf)
				last := newest(fs)
				listsPre := strings.HasSuffix(fs.Shared[len(fs.Shared)-2], ".pre") && !slices.Contains(listed, fs.Shared[len(fs.Shared)-2])
				listed = fs.Shared
				if lose && round == 2 {
					if listsPre {
						t.Fatalf("round %d: the checkpoint lists %v, a preemptive file that is gone", round, fs.Shared)
					}
					if fileSize(t, sf, last) < 20_000 {
						t.Fatalf("round %d: the delta after a lost preemptive file is %d bytes; it must hold that file's changes", round, fileSize(t, sf, last))
					}
				} else {
					if !listsPre {
						t.Fatalf("round %d: the checkpoint lists %v, the preemptive file not before its delta", round, fs.Shared)
					}
					if n := fileSize(t, sf, last); n > 400 {
						t.Fatalf("round %d: the checkpoint's own delta is %d bytes after a preemptive persist of all but one change", round, n)
					}
				}
				r, _, got := restoredSides(t, []*state.FileState{fs}, sf, full)
				r.Close()
				if got.String() != m.String() {
					t.Fatalf("round %d: restored state differs from the state at the checkpoint", round)
				}
			}
		})
	}
}

// Values that are rebuilt rather than appended to (Top-N rows kept as one
// byte string) are not persisted ahead once a delta showed it: writing
// them again whole before every checkpoint would only add work.
func TestMemoryPreemptiveSkipsRewrittenValues(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	b, err := state.NewMemoryBackendWith(state.MemoryOptions{Incremental: true, MaterializeBytes: 1 << 30, PreemptiveEntries: 2000, PreemptiveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Open(full, incMaxP); err != nil {
		t.Fatal(err)
	}
	b.UseShared(sf)
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[sides]())
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(round int) {
		for k := range int64(2500) {
			v.Put(k, sides{L: []byte(fmt.Sprintf("top row of %d in round %d", k, round))})
		}
	}
	rewrite(0)
	statetest.PersistFiles(t, b, sf)
	rewrite(1)
	statetest.PersistFiles(t, b, sf) // a delta of 2500 values written whole
	rewrite(2)
	if err := b.PersistPreemptively(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil { // waits for a preemptive write, if one started
		t.Fatal(err)
	}
	for _, f := range sf.files(t) {
		if strings.HasSuffix(f, ".pre") {
			t.Fatalf("values rewritten whole were persisted ahead: %s", f)
		}
	}
}

// TestMemoryPreemptiveWritesNewKeysAhead: a table that does not diff its
// values is persisted ahead when its changes are mostly keys it did not
// hold (the values of a DISTINCT aggregate over an insert-only input), and
// not when they rewrite keys it held, nor when the new keys go again in the
// interval that wrote them; the chain with the files written ahead restores
// every key, and not those deleted after they were written ahead.
func TestMemoryPreemptiveWritesNewKeysAhead(t *testing.T) {
	for _, mode := range []string{"fresh", "rewrite", "churn"} {
		fresh := mode == "fresh"
		sf := &dirShared{dir: t.TempDir()}
		open := func() (*state.MemoryBackend, *state.ValueState[int64, int64]) { return openPreemptive(t, sf) }
		b, v := open()
		for k := range int64(2500) {
			v.Put(k, k)
		}
		statetest.PersistFiles(t, b, sf)
		next := int64(2500)
		for round := range 3 {
			for k := range int64(2500) {
				switch mode {
				case "fresh":
					v.Put(next, next)
					next++
				case "rewrite":
					v.Put(k, k+int64(round))
				case "churn":
					v.Put(-1-k, k)
					v.Delete(-1 - k)
				}
			}
			if fresh {
				persistAhead(t, b, sf, round+1)
			} else if err := b.PersistPreemptively(); err != nil {
				t.Fatal(err)
			}
		}
		// Keys written ahead and deleted since stay deleted.
		gone := func(k int64) bool { return fresh && k >= 2500 && k%3 == 0 }
		for k := range next {
			if gone(k) {
				v.Delete(k)
			}
		}
		fs := statetest.PersistFiles(t, b, sf)
		pre := preFiles(t, sf)
		if fresh && pre == 0 {
			t.Fatal("new keys were not persisted ahead")
		}
		if !fresh && pre != 0 {
			t.Fatalf("%s: keys were persisted ahead: %d files", mode, pre)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		r, rv := open()
		if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
			t.Fatal(err)
		}
		for k := range next {
			want := k
			if mode == "rewrite" {
				want = k + 2
			}
			got, ok := rv.Get(k)
			if gone(k) {
				if ok {
					t.Fatalf("%s: key %d, deleted after it was written ahead, restored as %d", mode, k, got)
				}
				continue
			}
			if !ok || got != want {
				t.Fatalf("%s: key %d restored as %d, %v; want %d", mode, k, got, ok, want)
			}
		}
		if _, ok := rv.Get(-1); ok {
			t.Fatalf("%s: a deleted key was restored", mode)
		}
		r.Close()
	}
}

// TestMemoryPreemptiveKeyLifetimes writes keys that live for a while and
// are deleted (a sliding window of 10,000 keys, 2,500 new and 2,500 gone
// per checkpoint: written ahead, the deletions too, as a delta writes
// each once) and keys that live shorter than a checkpoint interval
// (10,000 per interval of one second on a clock of the test's, in batches
// of 2,000, each deleted two batches later: once checkpoints saw that the
// table holds fewer keys than an interval inserts, and how far apart they
// come, it is written ahead in the last 30% of the interval only, since
// most of what it would write earlier is gone by the checkpoint). Both
// restore to the state at the last checkpoint.
func TestMemoryPreemptiveKeyLifetimes(t *testing.T) {
	for _, mode := range []string{"expiring", "short-lived"} {
		t.Run(mode, func(t *testing.T) {
			sf := &dirShared{dir: t.TempDir()}
			var clock atomic.Int64 // milliseconds
			open := func() (*state.MemoryBackend, *state.ValueState[int64, int64]) {
				b, v := openPreemptive(t, sf)
				state.SetClock(b, func() time.Time { return time.UnixMilli(clock.Load()) })
				return b, v
			}
			b, v := open()
			live := map[int64]bool{}
			put := func(k int64) { v.Put(k, k*3); live[k] = true }
			del := func(k int64) { v.Delete(k); delete(live, k) }
			next := int64(0)
			var fs *state.FileState
			if mode == "expiring" {
				for ; next < 10000; next++ {
					put(next)
				}
				fs = statetest.PersistFiles(t, b, sf)
				for round := range 4 {
					for range 2500 {
						del(next - 10000)
						put(next)
						next++
					}
					persistAhead(t, b, sf, round+1)
					fs = statetest.PersistFiles(t, b, sf)
				}
			} else {
				put(-1)
				fs = statetest.PersistFiles(t, b, sf)
				batch := func() {
					for range 2000 {
						put(next)
						next++
					}
					// The keys of two batches ago, captured since.
					for k := next - 6000; k < next-4000; k++ {
						if k >= 0 {
							del(k)
						}
					}
				}
				// Checkpoints at 0, 1000, ... ms; batches at these offsets,
				// the last two in the late window (from 700 ms on).
				offsets := []int64{100, 300, 500, 750, 900}
				for round := range int64(4) {
					start := preFiles(t, sf)
					for i, off := range offsets {
						clock.Store(round*1000 + off)
						batch()
						if err := b.PersistPreemptively(); err != nil {
							t.Fatal(err)
						}
						switch {
						case round == 0:
							// The lifetime is not known yet: written ahead
							// as any table.
							time.Sleep(5 * time.Millisecond)
						case i == 2:
							// No file may come from the early batches.
							time.Sleep(50 * time.Millisecond)
							if n := preFiles(t, sf); n != start {
								t.Fatalf("round %d: keys that live shorter than a checkpoint interval were written ahead before the late window: %d files, %d before", round, n, start)
							}
						case i == 3 && round >= 2:
							// The first batch of the window is written ahead
							// at once (the interval is known from round 2 on).
							persistAhead(t, b, sf, start+1)
						}
					}
					if round == 0 && preFiles(t, sf) == 0 {
						t.Fatal("nothing was written ahead before the keys' lifetime was known: the test proves nothing")
					}
					clock.Store((round + 1) * 1000)
					fs = statetest.PersistFiles(t, b, sf)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			r, rv := open()
			defer r.Close()
			if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
				t.Fatal(err)
			}
			for k := int64(-1); k < next; k++ {
				got, ok := rv.Get(k)
				if ok != live[k] || ok && got != k*3 {
					t.Fatalf("key %d restored as %d, %v; want present %v", k, got, ok, live[k])
				}
			}
		})
	}
}

// openPreemptive opens a memory backend over every key group that writes
// ahead once 2,000 keys changed (and not on time), with one value state
// "v" of int64 keys and values.
func openPreemptive(t *testing.T, sf *dirShared) (*state.MemoryBackend, *state.ValueState[int64, int64]) {
	t.Helper()
	b, err := state.NewMemoryBackendWith(state.MemoryOptions{Incremental: true, MaterializeBytes: 1 << 30, PreemptiveEntries: 2000, PreemptiveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Open(state.KeyGroupRange{Start: 0, End: incMaxP}, incMaxP); err != nil {
		t.Fatal(err)
	}
	b.UseShared(sf)
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	return b, v
}
