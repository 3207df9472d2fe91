package pebble

import (
	"testing"

	"github.com/clinkstream/clink/state"
)

// FuzzDecodeFileState checks that whatever a snapshot holds, a decoded
// checkpoint names only files that stay in the directory it is rebuilt in,
// and a key-group range that makes sense.
func FuzzDecodeFileState(f *testing.F) {
	f.Add([]byte(`{"format":1,"keyGroupStart":0,"keyGroupEnd":16,"maxParallelism":16,"files":{"000001.sst":"t-000001.sst"}}`),
		"files/MANIFEST-000001", "t-000001.sst")
	f.Add([]byte(`{"format":1,"keyGroupStart":3,"keyGroupEnd":9,"maxParallelism":16,"files":{}}`), "files/OPTIONS-000003", "")
	f.Add([]byte(`{"format":1,"keyGroupEnd":16,"maxParallelism":16,"files":{"../x.sst":"a"}}`), "files/../y", "a")
	f.Fuzz(func(t *testing.T, meta []byte, named, shared string) {
		fs := &state.FileState{
			Named:  []state.NamedData{{Name: metaName, Data: meta}, {Name: named, Data: []byte("x")}},
			Shared: []string{shared},
		}
		d, err := decodeFileState(fs)
		if err != nil {
			return
		}
		m := d.meta
		if m.Start < 0 || m.Start > m.End || m.End > m.MaxParallelism || m.MaxParallelism > state.MaxMaxParallelism {
			t.Fatalf("accepted range [%d,%d) of %d", m.Start, m.End, m.MaxParallelism)
		}
		for local, s := range m.Files {
			if !plainName(local) || !isShared(local) || s != shared {
				t.Fatalf("accepted data file %q as %q", local, s)
			}
		}
		for name := range d.files {
			if !plainName(name) || isShared(name) {
				t.Fatalf("accepted inline file %q", name)
			}
		}
	})
}
