package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestForEachLowestError checks that forEach returns the error of the
// lowest index that failed, turns a panic into an error, and calls every
// index once when none fails.
func TestForEachLowestError(t *testing.T) {
	calls := make([]int, 100)
	if err := forEach(len(calls), 4, func(i int) error { calls[i]++; return nil }); err != nil {
		t.Fatal(err)
	}
	for i, n := range calls {
		if n != 1 {
			t.Fatalf("index %d called %d times", i, n)
		}
	}
	// One worker runs the indexes in order: 3 fails first, and 7 never
	// runs.
	err := forEach(10, 1, func(i int) error {
		switch i {
		case 3:
			return errors.New("three")
		case 7:
			return errors.New("seven")
		}
		return nil
	})
	if err == nil || err.Error() != "three" {
		t.Fatalf("forEach = %v, want three", err)
	}
	err = forEach(5, 2, func(i int) error {
		if i == 2 {
			panic("bad entry")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "panic: bad entry") {
		t.Fatalf("forEach = %v, want the panic as an error", err)
	}
}

// TestRestoreEntriesRefusesTrailingBytes restores merged entries whose key
// or value holds bytes after what its codec decodes, and parses delimited
// entries that are not puts.
func TestRestoreEntriesRefusesTrailingBytes(t *testing.T) {
	b := NewMemoryBackend()
	if err := b.Open(KeyGroupRange{Start: 0, End: 1}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := NewValue(b, "v", CodecFor[int64](), CodecFor[int64]()); err != nil {
		t.Fatal(err)
	}
	tbl := b.byName["v"].(interface {
		restoreEntries(kg int, entries []mergedEntry) error
	})
	k := CodecFor[int64]().Append(nil, 7)
	v := CodecFor[int64]().Append(nil, 9)
	if err := tbl.restoreEntries(0, []mergedEntry{{key: k, value: v}}); err != nil {
		t.Fatalf("a well-formed entry: %v", err)
	}
	for _, tc := range []struct {
		what  string
		entry mergedEntry
		want  string
	}{
		{"value", mergedEntry{key: k, value: append(v, 0)}, "bytes after the value"},
		{"key", mergedEntry{key: append(k, 0), value: v}, "bytes after the key"},
	} {
		err := tbl.restoreEntries(0, []mergedEntry{tc.entry})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: restoreEntries = %v, want an error saying %q", tc.what, err, tc.want)
		}
	}
	put := appendPutEntry(nil, k, v, 5)
	es, err := parseMerged(2, append(slices.Clone(put), put...))
	if err != nil || len(es) != 2 || es[1].w != 5 || !bytes.Equal(es[1].value, v) {
		t.Fatalf("parseMerged of two puts = %v, %v", es, err)
	}
	for _, tc := range []struct {
		what string
		n    int
		b    []byte
		want string
	}{
		{"delete", 1, append([]byte{opDelete, byte(len(k))}, k...), "not a put"},
		{"more bytes", 1, append(slices.Clone(put), put...), "bytes left after 1 entries"},
		{"fewer bytes", 2, put, "entry 1"},
	} {
		if _, err := parseMerged(tc.n, tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: parseMerged = %v, want an error saying %q", tc.what, err, tc.want)
		}
	}
}

// TestChainMergeReplayMatchesEntries merges random sections of puts and
// deletes over a few keys (the first holds each key once, as a base or a
// delta first in its chain does) three ways: the merged entries (no key
// twice), and replay's calls applied as writes and deletes, of a merge
// not indexed (the deltas' entries in order) and of one indexed (the base
// then the changes); each must give what applying the sections in order
// gives, with no more puts than bound.
func TestChainMergeReplayMatchesEntries(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	for round := range 300 {
		keys := 1 + rnd.IntN(20)
		want := map[string]string{}
		var secs []fileSection
		for si := range 1 + rnd.IntN(5) {
			var data []byte
			n := rnd.IntN(2 * keys)
			if si == 0 {
				// A base, or a delta first in its chain: a key once.
				n = rnd.IntN(keys + 1)
			}
			for i := range n {
				k := fmt.Sprintf("k%d", rnd.IntN(keys))
				if si == 0 {
					k = fmt.Sprintf("k%d", i)
				}
				if rnd.IntN(4) == 0 {
					data = append(data, opDelete)
					data = binary.AppendUvarint(data, uint64(len(k)))
					data = append(data, k...)
					delete(want, k)
					continue
				}
				v := fmt.Sprintf("v%d.%d.%d", round, si, i)
				data = appendPutEntry(data, []byte(k), []byte(v), int64(i))
				want[k] = v
			}
			secs = append(secs, fileSection{kg: 0, name: "t", entries: n, data: data})
		}
		c, err := collectChanges(0, "t", secs)
		if err != nil {
			t.Fatal(err)
		}
		if c.indexed {
			t.Fatalf("round %d: a merge without edits indexed", round)
		}
		replayed := func(c *chainMerge) map[string]string {
			written, puts, baseDone := map[string]string{}, 0, -1
			err := c.replay(func(k, v []byte, _ int64) error {
				if _, dup := written[string(k)]; dup && baseDone < 0 {
					t.Fatalf("round %d: the base put key %s twice", round, k)
				}
				puts++
				written[string(k)] = string(v)
				return nil
			}, func(k []byte) error {
				delete(written, string(k))
				return nil
			}, func() {
				if baseDone >= 0 {
					t.Fatalf("round %d: the base ended twice", round)
				}
				baseDone = puts
			})
			if err != nil {
				t.Fatal(err)
			}
			if puts > c.bound() {
				t.Fatalf("round %d: replay put %d times, bound %d", round, puts, c.bound())
			}
			if baseDone < 0 || baseDone > c.base.entries {
				t.Fatalf("round %d: the base's end came after %d puts, of a base of %d entries", round, baseDone, c.base.entries)
			}
			return written
		}
		ordered := replayed(c)
		es, err := c.entries()
		if err != nil {
			t.Fatal(err)
		}
		if !c.indexed {
			t.Fatalf("round %d: entries left the merge unindexed", round)
		}
		merged := map[string]string{}
		for _, e := range es {
			if _, dup := merged[string(e.key)]; dup {
				t.Fatalf("round %d: key %s merged twice", round, e.key)
			}
			merged[string(e.key)] = string(e.value)
		}
		indexed := replayed(c)
		if !maps.Equal(merged, want) || !maps.Equal(ordered, want) || !maps.Equal(indexed, want) {
			t.Fatalf("round %d:\nentries %v\nreplay  %v\nindexed %v\nwant    %v", round, merged, ordered, indexed, want)
		}
	}
}

// TestDecodeLazyWritesBatchesInOrder restores a chain whose sections are
// larger than a decoder's batch, whose deltas write keys again, several
// times within one batch, and delete keys between their writes: the
// table must hold what applying the sections in order gives, with each
// key's last write time (TTL), although a batch is written in the order
// of the entries' home slots.
func TestDecodeLazyWritesBatchesInOrder(t *testing.T) {
	const now = int64(1_700_000_000_000)
	const restoreAt = now + 1
	tbl := ttlStringTable(t, now)
	type entry = restoredEntry
	want := map[string]entry{}
	rnd := rand.New(rand.NewPCG(5, 6))
	sc := CodecFor[string]()
	enc := func(x string) []byte { return sc.Append(nil, x) }
	batch := restoreBatchBytes / int(unsafe.Sizeof(kv[string, string]{}))
	baseKeys := batch + batch/4
	var secs []fileSection
	var data []byte
	for i := range baseKeys {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("base%d", i)
		// Some written without TTL: restored as written at the restore.
		w := now - int64(i)
		if i%7 == 0 {
			w = 0
		}
		data = appendPutEntry(data, enc(k), enc(v), w)
		want[k] = entry{v, w}
		if w == 0 {
			want[k] = entry{v, restoreAt}
		}
	}
	secs = append(secs, fileSection{kg: 0, name: "t", entries: baseKeys, data: data})
	for si := range 3 {
		data = data[:0:0]
		n := 0
		for i := range 20_000 {
			// Few keys: each is written several times in a batch.
			k := fmt.Sprintf("k%d", rnd.IntN(3000))
			n++
			// Deletes in the middle delta only: the others are batches of
			// puts with keys written several times.
			if si == 1 && rnd.IntN(10) == 0 {
				data = append(data, opDelete)
				data = binary.AppendUvarint(data, uint64(len(enc(k))))
				data = append(data, enc(k)...)
				delete(want, k)
				continue
			}
			v, w := fmt.Sprintf("d%d.%d", si, i), now-int64(rnd.IntN(1000))
			data = appendPutEntry(data, enc(k), enc(v), w)
			want[k] = entry{v, w}
		}
		if si == 1 {
			// Keys written and then deleted, or deleted and written again,
			// within a few entries; no later delta writes them.
			for i := range 300 {
				x, y := fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)
				data = appendPutEntry(data, enc(x), enc("x1"), now)
				data = appendPutEntry(data, enc(x), enc("x2"), now)
				data = append(data, opDelete)
				data = binary.AppendUvarint(data, uint64(len(enc(x))))
				data = append(data, enc(x)...)
				data = append(data, opDelete)
				data = binary.AppendUvarint(data, uint64(len(enc(y))))
				data = append(data, enc(y)...)
				data = appendPutEntry(data, enc(y), enc("y1"), now)
				n += 5
				want[y] = entry{"y1", now}
			}
		}
		secs = append(secs, fileSection{kg: 0, name: "t", entries: n, data: data})
	}
	c, err := collectChanges(0, "t", secs)
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.decodeLazy(tbl.restoreShard(0, c.bound(), c.bound()), 0, c, restoreAt); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, tbl, want)
	// The same sections merged first (entries), then decoded.
	merged := ttlStringTable(t, now)
	es, err := c.entries()
	if err != nil {
		t.Fatal(err)
	}
	if err := merged.decodeEntries(merged.restoreShard(0, len(es), len(es)), 0, es, restoreAt); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, merged, want)
}

// ttlStringTable returns a table of string keys and values with a TTL
// (whose clock reads now), on a backend of one key group.
func ttlStringTable(t *testing.T, now int64) *cowTable[string, string] {
	t.Helper()
	b := NewMemoryBackend()
	if err := b.Open(KeyGroupRange{Start: 0, End: 1}, 1); err != nil {
		t.Fatal(err)
	}
	tbl, err := newCowTable[string, string](b, "t", CodecFor[string](), CodecFor[string](), nil,
		[]StateOption{WithTTL(1000 * time.Hour), WithClock(func() int64 { return now })})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// restoredEntry is a restored value with its write time.
type restoredEntry struct {
	v string
	w int64
}

// checkRestored checks that tbl's only key group holds want, each key
// once, with its write time.
func checkRestored(t *testing.T, tbl *cowTable[string, string], want map[string]restoredEntry) {
	t.Helper()
	got := map[string]restoredEntry{}
	s := &tbl.shards[0]
	for i := range s.slots {
		if s.isUsed(i) {
			if _, dup := got[s.slots[i].k]; dup {
				t.Fatalf("key %s restored twice", s.slots[i].k)
			}
			got[s.slots[i].k] = restoredEntry{s.slots[i].v, s.written[i]}
		}
	}
	if len(got) != len(want) || s.n != len(want) {
		t.Fatalf("restored %d keys (shard counts %d), want %d", len(got), s.n, len(want))
	}
	for k, e := range want {
		if got[k] != e {
			t.Fatalf("key %s restored as %+v, want %+v", k, got[k], e)
		}
	}
	for k, e := range want {
		if v, ok := tbl.get(k); !ok || v != e.v {
			t.Fatalf("get(%s) = %q, %v, want %q", k, v, ok, e.v)
		}
	}
}

// TestRestoreCountsNoChanges restores a key group into a table that keeps
// a changelog: the restored keys are the chain's state, not changes of
// the interval, so the first capture after the restore counts none of
// them as inserted (born) or written once (once), and lists no key.
func TestRestoreCountsNoChanges(t *testing.T) {
	b, err := NewMemoryBackendWith(MemoryOptions{Incremental: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Open(KeyGroupRange{Start: 0, End: 1}, 1); err != nil {
		t.Fatal(err)
	}
	tbl, err := newCowTable[string, string](b, "t", CodecFor[string](), CodecFor[string](), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !tbl.changelog {
		t.Fatal("the table of an incremental backend keeps no changelog")
	}
	sc := CodecFor[string]()
	var data []byte
	const n = 2000
	for i := range n {
		data = appendPutEntry(data, sc.Append(nil, fmt.Sprint("k", i)), sc.Append(nil, "v"), 0)
	}
	c, err := collectChanges(0, "t", []fileSection{{kg: 0, name: "t", entries: n, data: data}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.decodeLazy(tbl.restoreShard(0, c.bound(), c.bound()), 0, c, 0); err != nil {
		t.Fatal(err)
	}
	if got := tbl.len(); got != n {
		t.Fatalf("restored %d keys, want %d", got, n)
	}
	// One key inserted after the restore is the interval's only change.
	tbl.put("new", "v")
	tbl.captureChanges()
	if tbl.born != 1 || tbl.once.Load() != 1 || tbl.again.Load() != 0 {
		t.Fatalf("first capture after a restore of %d keys and one insert: born %d, once %d, again %d; want 1, 1, 0",
			n, tbl.born, tbl.once.Load(), tbl.again.Load())
	}
}
