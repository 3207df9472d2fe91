package state

import (
	"sync"
	"time"
)

// SetClock makes b's incremental checkpoints read the time from now (the
// interval of preemptive persists, the late window of tables whose keys
// live shorter than a checkpoint interval).
func SetClock(b *MemoryBackend, now func() time.Time) { b.inc.now = now }

// SetRestoreWorkers makes restores merge and decode key groups on n
// goroutines until the returned func is called.
func SetRestoreWorkers(n int) (undo func()) {
	old := restoreWorkers
	restoreWorkers = func() int { return n }
	return func() { restoreWorkers = old }
}

// MappedFiles returns how many chain files b holds mapped.
func MappedFiles(b *MemoryBackend) int {
	b.maps.mu.Lock()
	defer b.maps.mu.Unlock()
	return len(b.maps.maps)
}

// SharedShards returns how many of v's key groups hold slot arrays that a
// capture froze, which the next write to them copies.
func SharedShards[K comparable, V any](v *ValueState[K, V]) int {
	n := 0
	for i := range v.t.shards {
		if v.t.shards[i].shared {
			n++
		}
	}
	return n
}

// WholeBases is how many checkpoints in a row write a base once the
// state churns (see wholeBases).
const WholeBases = wholeBases

// SetMinWholeBytes sets the fewest bytes of a checkpoint's files that
// make b's next checkpoints whole (see wholeBases).
func SetMinWholeBytes(b *MemoryBackend, n int64) { b.inc.minWhole = n }

// Tracking reports whether v's table records its changes for deltas
// (see trackChanges).
func Tracking[K comparable, V any](v *ValueState[K, V]) bool { return v.t.changelog }

// MinChurnEntries is the fewest keys inserted in an interval that make
// the tables churn (see churns).
const MinChurnEntries = minChurnEntries

// SetBackgroundMinEntries makes restores of n entries or more decode in
// the background until the returned func is called.
func SetBackgroundMinEntries(n int) (undo func()) {
	old := backgroundMinEntries
	backgroundMinEntries = n
	return func() { backgroundMinEntries = old }
}

// HoldBackgroundRestores keeps the goroutines of the background restores
// started from now on from decoding anything until release is called:
// only lookups decode key groups until then. Calling release again does
// nothing.
func HoldBackgroundRestores() (release func()) {
	hold := make(chan struct{})
	backgroundHold = hold
	return sync.OnceFunc(func() {
		backgroundHold = nil
		close(hold)
	})
}

// Restoring reports whether v's table still restores key groups in the
// background, without waiting for them.
func Restoring[K comparable, V any](v *ValueState[K, V]) bool { return v.t.background != nil }
