package clink

import (
	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
)

// PebbleSteady is a state backend name for tests only: the pebble backend
// without automatic compactions, so that what a checkpoint uploads follows
// the job's writes alone, not when Pebble chooses to merge its files.
const PebbleSteady = "pebble-steady"

func init() {
	stateBackends[PebbleSteady] = func(_ *Options, dir string) (state.Backend, error) {
		opts := pebble.Options{Dir: dir, Tune: func(o *cpebble.Options) { o.DisableAutomaticCompactions = true }}
		if err := opts.Validate(); err != nil {
			return nil, err
		}
		return pebble.New(opts), nil
	}
}
