// Package gctune owns the garbage collector's pacing of the clink binary:
// it lets a small heap grow by more than its own size between two
// collections, so that a job whose live heap is a few tens of megabytes is
// not collected every few milliseconds.
//
// Go collects when the heap has grown by GOGC percent of the live heap
// (100 by default): with 40 MB live, every 40 MB allocated, which a job
// that allocates a row per record does hundreds of times a second. After
// each collection the tuner sets the percentage to what gives Headroom
// bytes of growth, between 100 and MaxPercent: a small heap grows by four
// times its size, one of Headroom / 4 to Headroom by Headroom, and a larger
// one by its own size, as without tuning.
//
// It is the binary's policy, not the library's: clink.Environment never
// changes the collector of the program that embeds it.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// MaxPercent caps the percentage: a heap that grows far beyond what lives
// in it is fresh memory on every cycle (page faults, and no cache holds
// it), which costs more than the collections it saves.
const MaxPercent = 400

// DefaultHeadroom is the growth between two collections the clink binary
// allows at least: 256 MiB.
const DefaultHeadroom = 256 << 20

// Percent returns the GOGC percentage that lets a heap of live bytes grow
// by headroom bytes before the next collection, but by at least its own
// size and by at most MaxPercent of it.
func Percent(live, headroom uint64) int {
	if live == 0 {
		live = 1 << 20
	}
	return int(min(max(headroom*100/live, 100), MaxPercent))
}

// Start tunes the collector after every collection until the returned
// stop is called, which restores the percentage in force before. When the
// GOGC environment variable is set, the user chose the pacing: Start does
// nothing.
func Start(headroom uint64) (stop func()) {
	if _, ok := os.LookupEnv("GOGC"); ok || headroom == 0 {
		return func() {}
	}
	t := &tuner{headroom: headroom, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.before = debug.SetGCPercent(100)
	debug.SetGCPercent(t.before)
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.stopped {
			t.stopped = true
			debug.SetGCPercent(t.before)
		}
	}
}

type tuner struct {
	headroom uint64
	before   int
	// mu orders a tuning after a collection against stop.
	mu      sync.Mutex
	stopped bool
	// sample is read on the finalizer goroutine only.
	sample []metrics.Sample
}

// arm sets a finalizer on a new object: it runs after the next
// collection, tunes the percentage and arms again.
func (t *tuner) arm() {
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.stopped {
			return
		}
		metrics.Read(t.sample)
		if t.sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetGCPercent(Percent(t.sample[0].Value.Uint64(), t.headroom))
		}
		t.arm()
	})
}
