package state_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/statetest"
)

// sides is a value like a regular join's: two byte slices that grow by
// appending past their length and are otherwise replaced.
type sides struct {
	L, R []byte
}

// fileSize returns the size of the shared file name.
func fileSize(t *testing.T, sf *dirShared, name string) int64 {
	t.Helper()
	st, err := os.Stat(filepath.Join(sf.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// newest returns the last file of a checkpoint's chain.
func newest(fs *state.FileState) string { return fs.Shared[len(fs.Shared)-1] }

// TestMemoryIncrementalDeltaOfAppend checks that a delta holds what was
// appended to a large value, not the whole value, and that the chain
// restores to the value.
func TestMemoryIncrementalDeltaOfAppend(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	b, v := openSides(t, 1<<30, state.KeyGroupRange{Start: 0, End: 4}, 4)
	defer b.Close()
	big := make([]byte, 100_000, 200_000)
	for i := range big {
		big[i] = byte(i)
	}
	v.Put(1, sides{L: big})
	v.Put(2, sides{R: []byte("x")})
	statetest.PersistFiles(t, b, sf) // the base
	row := []byte("one more row")
	cur, _ := v.Get(1)
	v.Put(1, sides{L: append(cur.L, row...), R: []byte("r")})
	fs := statetest.PersistFiles(t, b, sf)
	if n := fileSize(t, sf, newest(fs)); n > 200 {
		t.Fatalf("delta after appending %d bytes to a value of %d is %d bytes", len(row), len(big), n)
	}
	// Appending again, and a value that is replaced, not grown.
	cur, _ = v.Get(1)
	v.Put(1, sides{L: append(cur.L, "another"...), R: cur.R})
	v.Put(2, sides{R: []byte("y")})
	fs = statetest.PersistFiles(t, b, sf)
	want := sides{L: append(slices.Clone(big), "one more rowanother"...), R: []byte("r")}

	r := newIncremental(t, 1<<30)
	defer r.Close()
	if err := r.Open(state.KeyGroupRange{Start: 0, End: 4}, 4); err != nil {
		t.Fatal(err)
	}
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	rv, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[sides]())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := rv.Get(1); !bytes.Equal(got.L, want.L) || !bytes.Equal(got.R, want.R) {
		t.Fatalf("restored value of key 1: L %d bytes, R %q; want %d bytes, %q", len(got.L), got.R, len(want.L), want.R)
	}
	if got, _ := rv.Get(2); got.L != nil || string(got.R) != "y" {
		t.Fatalf("restored value of key 2: %+v", got)
	}
}

// sidesModel is what a state of sides should hold.
type sidesModel map[int64]sides

func (m sidesModel) String() string {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var buf bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&buf, "%d: L=%q(nil %v) R=%q(nil %v)\n", k, m[k].L, m[k].L == nil, m[k].R, m[k].R == nil)
	}
	return buf.String()
}

// grow appends p to s: in place when s has room (a value edits can
// describe), else into a new array.
func grow(s, p []byte) []byte { return append(s, p...) }

// mutateSides makes random appends (in place and reallocating),
// replacements, empty and nil slices and deletions on v and m alike.
// keysIn are the keys mutateSides writes in a backend of range rng.
func keysIn(rng state.KeyGroupRange) []int64 {
	var ks []int64
	for k := range int64(60) {
		if rng.Contains(keyGroupOf(k, incMaxP)) {
			ks = append(ks, k)
		}
	}
	return ks
}

func mutateSides(rnd *rand.Rand, v *state.ValueState[int64, sides], m sidesModel, n int, keys []int64) {
	for range n {
		k := keys[rnd.IntN(len(keys))]
		cur, _ := v.Get(k)
		p := []byte(fmt.Sprint(rnd.IntN(1000), ";"))
		switch rnd.IntN(8) {
		case 0, 1, 2:
			cur.L = grow(cur.L, p)
		case 3:
			cur.R = grow(cur.R, p)
		case 4:
			// A new array with room to grow in place.
			cur.L = append(make([]byte, 0, len(cur.L)+64), cur.L...)
			cur.L = append(cur.L, p...)
		case 5:
			// Replaced by a shorter value.
			if len(cur.L) > 0 {
				cur.L = slices.Clone(cur.L[:len(cur.L)/2])
			}
		case 6:
			cur.R = []byte{}
			if rnd.IntN(2) == 0 {
				cur.R = nil
			}
		case 7:
			v.Delete(k)
			delete(m, k)
			continue
		}
		v.Put(k, cur)
		m[k] = sides{L: slices.Clone(cur.L), R: slices.Clone(cur.R)}
		if cur.L != nil && m[k].L == nil {
			m[k] = sides{L: []byte{}, R: m[k].R}
		}
		if cur.R != nil && m[k].R == nil {
			m[k] = sides{L: m[k].L, R: []byte{}}
		}
	}
}

// openSides returns an incremental memory backend open for rng of maxP,
// which materializes after materialize bytes, and its value state "v" of
// sides.
func openSides(t fataler, materialize int64, rng state.KeyGroupRange, maxP int) (*state.MemoryBackend, *state.ValueState[int64, sides]) {
	t.Helper()
	b := newIncremental(t, materialize)
	if err := b.Open(rng, maxP); err != nil {
		t.Fatal(err)
	}
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[sides]())
	if err != nil {
		t.Fatal(err)
	}
	return b, v
}

// restoredSides restores fs into a backend of range rng and returns its
// state.
func restoredSides(t *testing.T, fs []*state.FileState, sf *dirShared, rng state.KeyGroupRange) (*state.MemoryBackend, *state.ValueState[int64, sides], sidesModel) {
	t.Helper()
	r := newIncremental(t, 1<<12)
	if err := r.Open(rng, incMaxP); err != nil {
		t.Fatal(err)
	}
	if err := r.RestoreFiles(fs, sf); err != nil {
		t.Fatal(err)
	}
	rv, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[sides]())
	if err != nil {
		t.Fatal(err)
	}
	got := sidesModel{}
	rv.Range(func(k int64, v sides) bool { got[k] = v; return true })
	return r, rv, got
}

func (m sidesModel) only(rng state.KeyGroupRange) sidesModel {
	out := sidesModel{}
	for k, v := range m {
		if rng.Contains(keyGroupOf(k, incMaxP)) {
			out[k] = v
		}
	}
	return out
}

// TestMemoryIncrementalSpliceChain checkpoints values that grow by
// appending, and change otherwise, many times (with bases materialized
// along the way), restores every checkpoint whole and split in two
// (rescaling), continues a restored chain, and compares with the model.
func TestMemoryIncrementalSpliceChain(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	b, v := openSides(t, 1<<12, full, incMaxP)
	defer b.Close()
	rnd := rand.New(rand.NewPCG(3, 4))
	m := sidesModel{}
	for round := range 50 {
		mutateSides(rnd, v, m, 40, keysIn(full))
		fs := statetest.PersistFiles(t, b, sf)
		r, _, got := restoredSides(t, []*state.FileState{fs}, sf, full)
		r.Close()
		if got.String() != m.String() {
			t.Fatalf("round %d: restored state differs\ngot:\n%s\nwant:\n%s", round, got, m)
		}
		halves := []state.KeyGroupRange{{Start: 0, End: 13}, {Start: 13, End: incMaxP}}
		for _, h := range halves {
			r, rv, got := restoredSides(t, []*state.FileState{fs}, sf, h)
			if want := m.only(h); got.String() != want.String() {
				r.Close()
				t.Fatalf("round %d: state restored into %v differs\ngot:\n%s\nwant:\n%s", round, h, got, want)
			}
			if round%10 == 9 {
				// The restored chain goes on with deltas of its own.
				m2 := m.only(h)
				for range 3 {
					mutateSides(rnd, rv, m2, 30, keysIn(h))
					fs2 := statetest.PersistFiles(t, r, sf)
					r3, _, got := restoredSides(t, []*state.FileState{fs2}, sf, h)
					r3.Close()
					if got.String() != m2.String() {
						r.Close()
						t.Fatalf("round %d: restore of the continued chain in %v differs\ngot:\n%s\nwant:\n%s", round, h, got, m2)
					}
				}
			}
			r.Close()
		}
	}
}

// FuzzMemoryChainSplice feeds arbitrary bytes as the delta file of a chain
// whose deltas edit values: restoring must fail with an error or succeed,
// never panic.
func FuzzMemoryChainSplice(f *testing.F) {
	dir := f.TempDir()
	sf := &dirShared{dir: dir}
	b, v := openSides(f, 1<<30, state.KeyGroupRange{Start: 0, End: 4}, 4)
	defer b.Close()
	for k := range int64(6) {
		v.Put(k, sides{L: append(make([]byte, 0, 64), "abc"...)})
	}
	c, err := b.Capture()
	if err != nil {
		f.Fatal(err)
	}
	if _, err := c.(state.FileCaptured).PersistFiles(sf); err != nil {
		f.Fatal(err)
	}
	for k := range int64(6) {
		cur, _ := v.Get(k)
		v.Put(k, sides{L: append(cur.L, "def"...), R: []byte{byte(k)}})
	}
	c, err = b.Capture()
	if err != nil {
		f.Fatal(err)
	}
	fs, err := c.(state.FileCaptured).PersistFiles(sf)
	if err != nil {
		f.Fatal(err)
	}
	delta, err := os.ReadFile(filepath.Join(dir, fs.Shared[1]))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(delta)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 4 {
			// Past the checksum, so that the parser itself is fuzzed.
			data = binary.LittleEndian.AppendUint32(slices.Clone(data[:len(data)-4]),
				crc32.Checksum(data[:len(data)-4], crc32.MakeTable(crc32.Castagnoli)))
		}
		tsf := &dirShared{dir: t.TempDir()}
		for i, n := range fs.Shared {
			content, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				content = data
			}
			if err := os.WriteFile(filepath.Join(tsf.dir, n), content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, _, _, _ = state.ReadChain(fs, tsf)
		r := newIncremental(t, 1)
		defer r.Close()
		if err := r.Open(state.KeyGroupRange{Start: 0, End: 4}, 4); err != nil {
			t.Fatal(err)
		}
		if err := r.RestoreFiles([]*state.FileState{fs}, tsf); err != nil {
			return
		}
		_, _ = state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[sides]())
	})
}

// TestMemoryIncrementalMaterializeRedundant checks what makes a new base
// be written: not deltas that only append to values (a base would hold
// their bytes too), however large they grow beside the base, but values
// written again whole and values deleted, which leave bytes in the chain
// that a restore reads and drops. Every checkpoint restores to the model.
func TestMemoryIncrementalMaterializeRedundant(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	const materialize = 32 << 10
	b, v := openSides(t, materialize, full, incMaxP)
	defer b.Close()
	m := sidesModel{}
	bases := map[string]bool{}
	checkpoint := func(what string, round int) {
		t.Helper()
		fs := statetest.PersistFiles(t, b, sf)
		for _, n := range fs.Shared {
			if strings.HasSuffix(n, ".base") {
				bases[n] = true
			}
		}
		r, _, got := restoredSides(t, []*state.FileState{fs}, sf, full)
		r.Close()
		if got.String() != m.String() {
			t.Fatalf("%s, round %d: restored state differs\ngot:\n%s\nwant:\n%s", what, round, got, m)
		}
	}
	put := func(k int64, s sides) {
		v.Put(k, s)
		m[k] = sides{L: slices.Clone(s.L), R: slices.Clone(s.R)}
	}
	const keys = 50
	// Appends of 200 bytes to every key each round: the deltas (the chain
	// of a new backend begins with one) outgrow MaterializeBytes many
	// times over, and every byte they hold but their entries' headers is
	// live.
	for round := range 40 {
		for k := range int64(keys) {
			cur, _ := v.Get(k)
			put(k, sides{L: append(cur.L, bytes.Repeat([]byte{byte('a' + round%26)}, 200)...), R: cur.R})
		}
		checkpoint("appending", round)
	}
	if len(bases) != 0 {
		t.Fatalf("%d bases were written while values only grew by appending, want none", len(bases))
	}
	// Each value written again whole: the chain's copies are dead, and a
	// new base follows within a few checkpoints.
	waitBase := func(what string, change func(round int)) {
		t.Helper()
		had := len(bases)
		deadline := time.Now().Add(20 * time.Second)
		for round := 0; len(bases) == had; round++ {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no new base after %d checkpoints", what, round)
			}
			change(round)
			checkpoint(what, round)
		}
	}
	waitBase("rewriting", func(round int) {
		for k := range int64(keys) {
			cur, _ := v.Get(k)
			put(k, sides{L: bytes.Repeat([]byte{byte('A' + round%26)}, len(cur.L)), R: []byte{byte(round)}})
		}
	})
	// Each key deleted, then new small keys only added: the deletions make
	// the chain's values dead.
	waitBase("deleting", func(round int) {
		if round == 0 {
			for k := range int64(keys) {
				v.Delete(k)
				delete(m, k)
			}
		}
		put(int64(1000+round), sides{L: []byte("new")})
	})
}

// BenchmarkMemoryRestoreAppendChain restores a chain of a base and 40
// deltas that each append a row of 100 bytes to a third of 20,000 values
// (a regular join's state between two bases), so that a value is edited
// by about 13 deltas.
func BenchmarkMemoryRestoreAppendChain(b *testing.B) {
	sf := &dirShared{dir: b.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	src, v := openSides(b, 1<<40, full, incMaxP)
	defer src.Close()
	const keys = 20000
	row := bytes.Repeat([]byte{'r'}, 100)
	rnd := rand.New(rand.NewPCG(5, 6))
	var fs *state.FileState
	for round := range 41 {
		for k := range int64(keys) {
			if round > 0 && rnd.IntN(3) != 0 {
				continue
			}
			cur, _ := v.Get(k)
			v.Put(k, sides{L: append(cur.L, row...), R: cur.R})
		}
		fs = statetest.PersistFiles(b, src, sf)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r := newIncremental(b, 1<<40)
		if err := r.Open(full, incMaxP); err != nil {
			b.Fatal(err)
		}
		if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
			b.Fatal(err)
		}
		if _, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[sides]()); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}
