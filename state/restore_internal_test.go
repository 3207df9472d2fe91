package state

import (
	"errors"
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

// TestRestoreDelimitedRefusesTrailingBytes restores delimited entries
// whose key or value field holds bytes after what its codec decodes.
func TestRestoreDelimitedRefusesTrailingBytes(t *testing.T) {
	b := NewMemoryBackend()
	if err := b.Open(KeyGroupRange{Start: 0, End: 1}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := NewValue(b, "v", CodecFor[int64](), CodecFor[int64]()); err != nil {
		t.Fatal(err)
	}
	tbl := b.byName["v"].(delimitedRestorer)
	k := CodecFor[int64]().Append(nil, 7)
	v := CodecFor[int64]().Append(nil, 9)
	good := appendPutEntry(nil, k, v, 0)
	if err := tbl.restoreDelimited(0, 1, good); err != nil {
		t.Fatalf("a well-formed entry: %v", err)
	}
	for _, tc := range []struct {
		what  string
		entry []byte
		want  string
	}{
		{"value", appendPutEntry(nil, k, append(v, 0), 0), "bytes after the value"},
		{"key", appendPutEntry(nil, append(k, 0), v, 0), "bytes after the key"},
		{"delete", append([]byte{opDelete, byte(len(k))}, k...), "not a put"},
	} {
		err := tbl.restoreDelimited(0, 1, tc.entry)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: restoreDelimited = %v, want an error saying %q", tc.what, err, tc.want)
		}
	}
}
