package pebble_test

import (
	"strings"
	"testing"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
	"github.com/clinkstream/clink/state/statetest"
)

// FuzzRestoreFiles restores a persisted checkpoint whose inline part (the
// pebble.json metadata, Pebble's MANIFEST, OPTIONS and marker files, as a
// task snapshot carries them) is damaged: one entry's name or data is
// replaced, or the list of shared files is cut. RestoreFiles must refuse
// it with an error, or restore state that reads without panicking; it must
// never panic itself. An error must say what it was reading.
func FuzzRestoreFiles(f *testing.F) {
	const maxP = 4
	sf := newDirShared(f)
	b := openBackend(f, testOptions(f), full(maxP), maxP)
	fx := newFixture(f, b)
	for i := range 8 {
		fx.write(i, int64(i))
	}
	good := statetest.PersistFiles(f, b, sf)
	for i, n := range good.Named {
		f.Add(uint8(i), n.Name, n.Data, uint8(len(good.Shared)))
	}
	f.Add(uint8(0), "pebble.json", []byte(`{"format":1,"keyGroupStart":0,"keyGroupEnd":4,"maxParallelism":4,"files":{"000005.sst":"x"}}`), uint8(0))
	f.Add(uint8(1), "files/MANIFEST-000001", []byte{}, uint8(9))

	f.Fuzz(func(t *testing.T, idx uint8, name string, data []byte, keep uint8) {
		fs := &state.FileState{Shared: good.Shared[:min(int(keep), len(good.Shared))]}
		for i, n := range good.Named {
			if i == int(idx)%len(good.Named) {
				n = state.NamedData{Name: name, Data: data}
			}
			fs.Named = append(fs.Named, n)
		}
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("panic: %v", r)
			}
		}()
		r := pebble.New(testOptions(t))
		if err := r.Open(full(maxP), maxP); err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		err := r.RestoreFiles([]*state.FileState{fs}, sf)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "restoring pebble state: ") || len(err.Error()) < len("restoring pebble state: ")+8 {
				t.Fatalf("unclear error %q", err)
			}
			return
		}
		// Restored: the states read (their values may be whatever a
		// damaged but consistent checkpoint holds, or refused on read).
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(*state.StoreError); !ok {
						t.Fatalf("reading restored state: panic: %v", r)
					}
				}
			}()
			rf := &fixture{b: r}
			var err error
			if rf.value, err = state.NewValue(r, "value", state.CodecFor[int64](), state.CodecFor[int64]()); err != nil {
				return
			}
			if rf.list, err = state.NewList(r, "list", state.CodecFor[string](), state.CodecFor[string]()); err != nil {
				return
			}
			if rf.mp, err = state.NewMap[int64, string, int64](r, "map", state.CodecFor[int64]()); err != nil {
				return
			}
			rf.dump(8)
		}()
	})
}
