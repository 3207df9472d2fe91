package store

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clinkstream/clink/checkpoint"
)

func catWith(t *testing.T, fs vfs.FS, id *checkpoint.ID, opts CatOptions) (string, error) {
	t.Helper()
	var b strings.Builder
	opts.FS = fs
	err := Cat(&b, testDir, id, opts)
	return b.String(), err
}

func TestCatKeyGroupLines(t *testing.T) {
	fs := catFixture(t)
	describe := func(kg, entries int, data []byte, _ bool) (string, error) {
		if kg == 70 {
			return "", errors.New("table name is truncated")
		}
		return fmt.Sprintf("value=%d, data=%q", entries, data), nil
	}
	got, err := catWith(t, fs, idp(1), CatOptions{DescribeKeyGroup: describe})
	if err == nil || err.Error() != "1 key group of checkpoint 1 in /ckpt could not be decoded" {
		t.Fatalf("err = %v, want the key group that could not be decoded counted", err)
	}
	want := `    keyed state:    2 key groups, 5 entries, 15 bytes
      kg 64: 2 entries, 10 bytes (value=2, data="0123456789")
      kg 70: 3 entries, 5 bytes (error: table name is truncated)
    operator state: none
`
	if !strings.Contains(got, want) {
		t.Fatalf("output lacks\n%s\ngot:\n%s", want, got)
	}
	// Everything after the bad key group is still printed.
	if !strings.Contains(got, "chk-1/src-0.snap (71 bytes)") {
		t.Fatalf("output stops at the bad key group:\n%s", got)
	}

	got, err = catWith(t, fs, idp(1), CatOptions{DescribeKeyGroup: describe, Summary: true})
	if err != nil {
		t.Fatalf("Cat --summary: %v", err)
	}
	if strings.Contains(got, "kg ") || !strings.Contains(got, "keyed state:    2 key groups, 5 entries, 15 bytes\n    operator state") {
		t.Fatalf("summary output lists key groups:\n%s", got)
	}
}

func TestCatKeyGroupLinesAlign(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	snap := &TaskSnapshot{
		Checkpoint: 1, Task: "count-0", Parallelism: 1, MaxParallelism: 128,
		Operators: []OperatorSnapshot{{UID: "count", Watermark: NoWatermark, KeyGroups: []KeyGroupState{
			{KeyGroup: 5, Entries: 1, Data: make([]byte, 1)},
			{KeyGroup: 42, Entries: 3, Data: make([]byte, 1024)},
			{KeyGroup: 127, Entries: 2000, Data: make([]byte, 1258291)},
		}}},
	}
	if _, err := s.WriteTaskSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	got, err := catWith(t, fs, idp(1), CatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `      kg   5: 1 entry, 1 byte
      kg  42: 3 entries, 1.0 KiB
      kg 127: 2000 entries, 1.2 MiB
`
	if !strings.Contains(got, want) {
		t.Fatalf("output lacks\n%s\ngot:\n%s", want, got)
	}
}

func TestSizeText(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{
		{0, "0 bytes"}, {1, "1 byte"}, {1023, "1023 bytes"}, {1024, "1.0 KiB"}, {1229, "1.2 KiB"},
		{5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}, {1 << 42, "4.0 TiB"},
	} {
		if got := sizeText(c.n); got != c.want {
			t.Errorf("sizeText(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// keyFixture writes checkpoint 1 with a source and a keyed operator "count"
// at parallelism 2 whose subtask files hold key groups out of order.
func keyFixture(t *testing.T) vfs.FS {
	t.Helper()
	fs := vfs.NewMem()
	s := openTest(t, fs, Options{})
	for _, snap := range []*TaskSnapshot{
		{Checkpoint: 1, Task: "src-0", Parallelism: 1, MaxParallelism: 64,
			Operators: []OperatorSnapshot{{UID: "src", Offset: []byte("1"), Watermark: NoWatermark}}},
		{Checkpoint: 1, Task: "count-0", Subtask: 0, Parallelism: 2, MaxParallelism: 64,
			Operators: []OperatorSnapshot{{UID: "count", Watermark: NoWatermark, KeyGroups: []KeyGroupState{
				{KeyGroup: 3, Entries: 1, Data: []byte("c")}, {KeyGroup: 30, Entries: 1, Data: []byte("d")},
			}}}},
		{Checkpoint: 1, Task: "count-1", Subtask: 1, Parallelism: 2, MaxParallelism: 64,
			Operators: []OperatorSnapshot{{UID: "count", Watermark: NoWatermark, KeyGroups: []KeyGroupState{
				{KeyGroup: 32, Entries: 2, Data: []byte("ab")},
			}}}},
	} {
		if _, err := s.WriteTaskSnapshot(snap); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteCompleted(1); err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestCatKey(t *testing.T) {
	fs := keyFixture(t)
	var seen []KeyedState
	find := func(ks KeyedState) ([]string, error) {
		seen = append(seen, ks)
		return []string{"key group 30:", "  value: 7"}, nil
	}
	got, err := catWith(t, fs, idp(1), CatOptions{Key: &KeyLookup{Key: "k007", Find: find}})
	if err != nil {
		t.Fatal(err)
	}
	want := `checkpoint 1 in /ckpt: completed, not confirmed, 3 files, ` // size follows
	if !strings.HasPrefix(got, want) {
		t.Fatalf("output starts %q, want %q", got, want)
	}
	_, body, _ := strings.Cut(got, "\n")
	wantBody := `key "k007" in the keyed state of 1 operator

operator count
  key group 30:
    value: 7
`
	if body != wantBody {
		t.Fatalf("output:\n%s\nwant:\n%s", body, wantBody)
	}
	wantState := []KeyedState{{
		Operator: "count", MaxParallelism: 64,
		KeyGroups: []KeyGroupState{
			{KeyGroup: 3, Entries: 1, Data: []byte("c")},
			{KeyGroup: 30, Entries: 1, Data: []byte("d")},
			{KeyGroup: 32, Entries: 2, Data: []byte("ab")},
		},
		Files: []string{"chk-1/count-0.snap", "chk-1/count-0.snap", "chk-1/count-1.snap"},
	}}
	if !reflect.DeepEqual(seen, wantState) {
		t.Fatalf("Find got %+v, want %+v", seen, wantState)
	}

	// A failing Find is printed under its operator and fails Cat.
	got, err = catWith(t, fs, idp(1), CatOptions{Key: &KeyLookup{Key: "x", Find: func(KeyedState) ([]string, error) {
		return []string{"partial"}, errors.New("key group 3: bad entry count")
	}}})
	if err == nil || err.Error() != "the keyed state of 1 operator of checkpoint 1 in /ckpt could not be searched" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(got, "operator count\n  partial\n  error: key group 3: bad entry count\n") {
		t.Fatalf("output:\n%s", got)
	}

	// A key needs a checkpoint.
	if _, err := catWith(t, fs, nil, CatOptions{Key: &KeyLookup{Key: "x", Find: find}}); err == nil {
		t.Fatal("Cat with a key and no checkpoint id: no error")
	}
}

func TestCatKeyDamagedCheckpoint(t *testing.T) {
	fs := keyFixture(t)
	s := openTest(t, fs, Options{})
	// A third subtask file that claims key group 30 again, with another
	// max parallelism, and a corrupt file.
	snap := &TaskSnapshot{Checkpoint: 1, Task: "count-2", Subtask: 2, Parallelism: 3, MaxParallelism: 128,
		Operators: []OperatorSnapshot{{UID: "count", Watermark: NoWatermark, KeyGroups: []KeyGroupState{
			{KeyGroup: 30, Entries: 1, Data: []byte("e")},
		}}}}
	if _, err := s.WriteTaskSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileDurable(fs, "/ckpt/chk-1/count-3.snap", []byte("CLNKSNAP\x00\x01garbage"), false); err != nil {
		t.Fatal(err)
	}
	var groups int
	got, err := catWith(t, fs, idp(1), CatOptions{Key: &KeyLookup{Key: "x", Find: func(ks KeyedState) ([]string, error) {
		groups = len(ks.KeyGroups)
		return nil, nil
	}}})
	if err == nil || err.Error() != "2 of 5 snapshot files of checkpoint 1 in /ckpt could not be read" {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		"error: chk-1/count-2.snap: operator count has max parallelism 128 here and 64 in chk-1/count-0.snap\n",
		"error: chk-1/count-3.snap: decoding snapshot",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if groups != 3 {
		t.Errorf("Find got %d key groups, want the 3 of the files that agree", groups)
	}

	// Two files holding one key group is reported.
	fs = keyFixture(t)
	s = openTest(t, fs, Options{})
	snap.MaxParallelism = 64
	if _, err := s.WriteTaskSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	got, err = catWith(t, fs, idp(1), CatOptions{Key: &KeyLookup{Key: "x", Find: func(KeyedState) ([]string, error) { return nil, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "  warning: key group 30 is in both chk-1/count-0.snap and chk-1/count-2.snap\n") {
		t.Fatalf("output:\n%s", got)
	}
}

func TestCatKeyWithoutKeyedState(t *testing.T) {
	fs := catFixture(t)
	got, err := catWith(t, fs, idp(3), CatOptions{Key: &KeyLookup{Key: "x", Find: func(KeyedState) ([]string, error) {
		t.Error("Find called for a checkpoint without keyed state")
		return nil, nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got, "\nkey \"x\": no operator of checkpoint 3 has keyed state\n") {
		t.Fatalf("output:\n%s", got)
	}
}
