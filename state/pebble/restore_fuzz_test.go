package pebble_test

import (
	"fmt"
	"testing"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
)

// FuzzRestore restores arbitrary key-group data: it must be refused with an
// error or restored, never panic, and what is restored must capture and
// restore again as it was.
func FuzzRestore(f *testing.F) {
	const maxP = 4
	b := pebble.New(pebble.Options{Dir: f.TempDir()})
	if err := b.Open(full(maxP), maxP); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	fx := newFixture(f, b)
	for i := range 8 {
		fx.write(i, int64(i))
	}
	c, err := b.Capture()
	if err != nil {
		f.Fatal(err)
	}
	groups, err := c.Persist()
	if err != nil {
		f.Fatal(err)
	}
	for _, g := range groups {
		f.Add(g.KeyGroup, g.Entries, g.Data)
	}
	f.Fuzz(func(t *testing.T, kg, entries int, data []byte) {
		in := []state.KeyGroupData{{KeyGroup: kg, Entries: entries, Data: data}}
		got, err := restoreAndRead(t, in)
		if err != nil {
			return
		}
		b := openBackend(t, testOptions(t), full(maxP), maxP)
		if err := b.Restore([][]state.KeyGroupData{in}); err != nil {
			t.Fatal(err)
		}
		c, err := b.Capture()
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Persist()
		if err != nil {
			t.Fatal(err)
		}
		got2, err := restoreAndRead(t, again)
		if err != nil {
			t.Fatalf("restored, but its capture did not: %v", err)
		}
		if fmt.Sprint(got) != fmt.Sprint(got2) {
			t.Fatalf("restored %v, then captured and restored %v", got, got2)
		}
	})
}

// restoreAndRead restores groups into a fresh backend, registers the
// fixture's states and reads them, turning a panic into an error.
func restoreAndRead(t *testing.T, groups []state.KeyGroupData) (out map[string]string, err error) {
	const maxP = 4
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	b := openBackend(t, testOptions(t), full(maxP), maxP)
	if err := b.Restore([][]state.KeyGroupData{groups}); err != nil {
		return nil, err
	}
	fx := &fixture{b: b}
	if fx.value, err = state.NewValue(b, "value", state.CodecFor[int64](), state.CodecFor[int64]()); err != nil {
		return nil, err
	}
	if fx.list, err = state.NewList(b, "list", state.CodecFor[string](), state.CodecFor[string]()); err != nil {
		return nil, err
	}
	if fx.mp, err = state.NewMap[int64, string, int64](b, "map", state.CodecFor[int64]()); err != nil {
		return nil, err
	}
	return fx.dump(8), nil
}
