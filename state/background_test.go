package state_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/statetest"
)

// bgChain writes a chain of a base and deltas of a string-keyed table (its
// slots hold pointers, so it may restore in the background) and returns
// its last checkpoint with the state it holds.
func bgChain(t *testing.T, sf *dirShared, vc state.Codec[int64]) (*state.FileState, map[string]int64) {
	t.Helper()
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	src := openIncremental(t, 1<<40, full)
	defer src.Close()
	v, err := state.NewValue(src, "v", state.CodecFor[string](), vc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	rnd := rand.New(rand.NewPCG(11, 12))
	var fs *state.FileState
	for round := range 4 {
		for range 3000 {
			k := fmt.Sprintf("key-%d", rnd.IntN(4000))
			if rnd.IntN(5) == 0 {
				v.Delete(k)
				delete(want, k)
				continue
			}
			x := int64(round*100000 + rnd.IntN(1000))
			v.Put(k, x)
			want[k] = x
		}
		fs = statetest.PersistFiles(t, src, sf)
	}
	return fs, want
}

// restoreBackground restores fs into a backend whose restores of any size
// run in the background, on two goroutines.
func restoreBackground(t *testing.T, fs *state.FileState, sf *dirShared, vc state.Codec[int64]) (*state.MemoryBackend, *state.ValueState[string, int64]) {
	t.Helper()
	defer state.SetBackgroundMinEntries(0)()
	defer state.SetRestoreWorkers(2)()
	r := openIncremental(t, 1<<40, state.KeyGroupRange{Start: 0, End: incMaxP})
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	v, err := state.NewValue(r, "v", state.CodecFor[string](), vc)
	if err != nil {
		t.Fatal(err)
	}
	return r, v
}

func readAll(v *state.ValueState[string, int64]) map[string]int64 {
	got := map[string]int64{}
	v.Range(func(k string, x int64) bool {
		got[k] = x
		return true
	})
	return got
}

// TestBackgroundRestoreLookups: while the restore's goroutines are held,
// every lookup decodes its key group itself and finds what the checkpoint
// holds; writes made then survive the rest of the restore and the next
// checkpoint.
func TestBackgroundRestoreLookups(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	fs, want := bgChain(t, sf, state.CodecFor[int64]())
	release := state.HoldBackgroundRestores()
	r, v := restoreBackground(t, fs, sf, state.CodecFor[int64]())
	defer r.Close()
	defer release() // before Close, if the test fails
	if !state.Restoring(v) {
		t.Fatal("a restore of any size was decoded before Register returned")
	}
	restored := r.Restored()
	if restored == nil {
		t.Fatal("Restored returned nil while the restore runs")
	}
	// Lookups while nothing decodes in the background (a few keys, of
	// fewer key groups than the 32 there are): a key missing from the
	// checkpoint must not be found, one held must be.
	for i := range 8 {
		k := fmt.Sprintf("key-%d", i)
		got, ok := v.Get(k)
		if w, held := want[k]; ok != held || got != w {
			t.Fatalf("Get(%q) = %d, %v during the restore; the checkpoint holds %d, %v", k, got, ok, w, held)
		}
	}
	if !state.Restoring(v) {
		t.Fatal("8 lookups decoded every key group")
	}
	for i := range 4 {
		k := fmt.Sprintf("key-%d", i)
		v.Put(k, -int64(i))
		want[k] = -int64(i)
		k = fmt.Sprintf("new-%d", i)
		v.Put(k, int64(i))
		want[k] = int64(i)
	}
	v.Delete("key-6")
	delete(want, "key-6")
	release()
	if got := readAll(v); !maps.Equal(got, want) {
		t.Fatalf("after the restore: %d entries, want %d", len(got), len(want))
	}
	if state.Restoring(v) {
		t.Fatal("the restore still runs after a Range")
	}
	select {
	case <-restored:
	default:
		t.Fatal("the channel of Restored is open after the restore")
	}
	if r.Restored() != nil {
		t.Fatal("Restored returned a channel after the restore")
	}
	fs2 := statetest.PersistFiles(t, r, sf)
	r2, v2 := restoreBackground(t, fs2, sf, state.CodecFor[int64]())
	defer r2.Close()
	if got := readAll(v2); !maps.Equal(got, want) {
		t.Fatalf("restored from the checkpoint after a background restore: %d entries, want %d", len(got), len(want))
	}
}

// TestBackgroundRestoreConcurrentLookups reads and writes keys while the
// restore's goroutines decode (run it with -race): the results must be
// those of the checkpoint.
func TestBackgroundRestoreConcurrentLookups(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	fs, want := bgChain(t, sf, state.CodecFor[int64]())
	r, v := restoreBackground(t, fs, sf, state.CodecFor[int64]())
	defer r.Close()
	for i := 3999; i >= 0; i-- {
		k := fmt.Sprintf("key-%d", i)
		got, ok := v.Get(k)
		if w, held := want[k]; ok != held || got != w {
			t.Fatalf("Get(%q) = %d, %v; the checkpoint holds %d, %v", k, got, ok, w, held)
		}
		if i%7 == 0 {
			v.Put(k, 7)
			want[k] = 7
		}
	}
	// A capture waits for the rest.
	fs2 := statetest.PersistFiles(t, r, sf)
	if state.Restoring(v) {
		t.Fatal("a capture left the restore running")
	}
	r2, v2 := restoreBackground(t, fs2, sf, state.CodecFor[int64]())
	defer r2.Close()
	if got := readAll(v2); !maps.Equal(got, want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
}

// failingCodec is int64's codec, but a value of bad does not decode.
type failingCodec struct{ bad int64 }

func (failingCodec) Append(dst []byte, x int64) []byte {
	return state.CodecFor[int64]().Append(dst, x)
}

func (c failingCodec) Decode(src []byte) (int64, int, error) {
	x, n, err := state.CodecFor[int64]().Decode(src)
	if err == nil && x == c.bad {
		return 0, 0, errors.New("the bad value")
	}
	return x, n, err
}

// TestBackgroundRestoreError: an entry that does not decode fails the
// lookup that needs its key group (a StoreError, which fails the task) and
// the next capture, naming the state and the key group.
func TestBackgroundRestoreError(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	fs, want := bgChain(t, sf, state.CodecFor[int64]())
	var badKey string
	var bad int64
	for k, x := range want {
		badKey, bad = k, x
		break
	}
	release := state.HoldBackgroundRestores()
	r, v := restoreBackground(t, fs, sf, failingCodec{bad: bad})
	defer r.Close()
	defer release()
	func() {
		defer func() {
			p := recover()
			se, ok := p.(*state.StoreError)
			if !ok {
				t.Fatalf("Get of a key whose key group does not decode: recovered %v, want a *state.StoreError", p)
			}
			if msg := se.Error(); !strings.Contains(msg, `state "v"`) || !strings.Contains(msg, "key group") || !strings.Contains(msg, "the bad value") {
				t.Fatalf("the error does not say what failed: %v", msg)
			}
		}()
		v.Get(badKey)
	}()
	release()
	if _, err := r.Capture(); err == nil || !strings.Contains(err.Error(), "the bad value") {
		t.Fatalf("capture after a failed background restore: %v, want the decode's error", err)
	}
}

// TestBackgroundRestoreClose closes a backend while its restore's
// goroutines are let go: Close waits for them before it unmaps the files,
// and a lookup after it either finds what a goroutine decoded before it
// stopped or fails with a StoreError; it never reads an unmapped file.
func TestBackgroundRestoreClose(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	fs, want := bgChain(t, sf, state.CodecFor[int64]())
	release := state.HoldBackgroundRestores()
	r, v := restoreBackground(t, fs, sf, state.CodecFor[int64]())
	restored := r.Restored()
	done := make(chan error)
	go func() { done <- r.Close() }()
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := state.MappedFiles(r); n != 0 {
		t.Fatalf("%d files still mapped after Close", n)
	}
	// Nothing restores any more: whoever waits on Restored goes on.
	<-restored
	for i := range 8 {
		k := fmt.Sprintf("key-%d", i)
		func() {
			defer func() {
				if p := recover(); p != nil {
					if _, ok := p.(*state.StoreError); !ok {
						t.Fatalf("Get(%q) after Close: recovered %v, want a *state.StoreError", k, p)
					}
				}
			}()
			got, ok := v.Get(k)
			if w, held := want[k]; ok != held || got != w {
				t.Fatalf("Get(%q) = %d, %v after Close; the checkpoint holds %d, %v", k, got, ok, w, held)
			}
		}()
	}
}

// TestBackgroundRestoreIntKeys: a table of integer keys (find's inline
// path) whose string values hold pointers restores in the background too,
// and its lookups wait for their key groups as well.
func TestBackgroundRestoreIntKeys(t *testing.T) {
	sf := &dirShared{dir: t.TempDir()}
	full := state.KeyGroupRange{Start: 0, End: incMaxP}
	src := openIncremental(t, 1<<40, full)
	v, err := state.NewValue(src, "v", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for k := range int64(5000) {
		v.Put(k, fmt.Sprint("value-", k*3))
		want[k] = fmt.Sprint("value-", k*3)
	}
	fs := statetest.PersistFiles(t, src, sf)
	src.Close()
	release := state.HoldBackgroundRestores()
	undoMin, undoWorkers := state.SetBackgroundMinEntries(0), state.SetRestoreWorkers(2)
	r := openIncremental(t, 1<<40, full)
	err = r.RestoreFiles([]*state.FileState{fs}, sf)
	var rv *state.ValueState[int64, string]
	if err == nil {
		rv, err = state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[string]())
	}
	undoMin()
	undoWorkers()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer release()
	if !state.Restoring(rv) {
		t.Fatal("a restore of any size was decoded before Register returned")
	}
	for _, k := range []int64{0, 17, 4999, 5000} {
		got, ok := rv.Get(k)
		if w, held := want[k]; ok != held || got != w {
			t.Fatalf("Get(%d) = %q, %v during the restore; the checkpoint holds %q, %v", k, got, ok, w, held)
		}
	}
	release()
	n := 0
	rv.Range(func(k int64, x string) bool {
		if want[k] != x {
			t.Fatalf("key %d restored as %q, want %q", k, x, want[k])
		}
		n++
		return true
	})
	if n != len(want) {
		t.Fatalf("%d keys restored, want %d", n, len(want))
	}
	// The inline path is back: a lookup after the restore finds the key.
	if got, ok := rv.Get(4321); !ok || got != want[4321] {
		t.Fatalf("Get(4321) after the restore = %q, %v", got, ok)
	}
}
