package statetest

import (
	"testing"

	"github.com/clinkstream/clink/state"
)

// PersistFiles captures b and persists the capture into sf, as a
// checkpoint of a backend with shared files does, and returns the
// manifest; it fails t on an error.
func PersistFiles(t testing.TB, b state.Backend, sf state.SharedFiles) *state.FileState {
	t.Helper()
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := c.(state.FileCaptured).PersistFiles(sf)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}
