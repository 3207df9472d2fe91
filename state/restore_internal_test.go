package state

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
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
