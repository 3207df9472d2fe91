package pebble_test

import (
	"testing"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
	"github.com/clinkstream/clink/state/statetest"
)

// TestConformance runs the backend conformance suite, through Persist and
// Restore (the key-group data path).
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name  string
		cache int64
	}{
		{"Cached", 1 << 20},
		// A cache of a few entries: nearly every access reaches Pebble,
		// and evictions write dirty entries all the time.
		{"TinyCache", 2 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			statetest.Run(t, func() state.Backend {
				return pebble.New(pebble.Options{Dir: dir, CacheBytes: c.cache, BlockCacheBytes: 1 << 20, MemTableBytes: 1 << 20})
			})
		})
	}
}
