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
// Pause turns the collector off while a job restores a checkpoint
// (clink.Options.OnRestore): a restore allocates the state it reads and
// frees almost nothing, so the collections it would trigger (marking
// hundreds of megabytes each as the state doubles) find nothing to free.
// A memory limit below the machine's memory (or the cgroup's) stays in
// force meanwhile, should the restore allocate more than it keeps.
//
// It is the binary's policy, not the library's: clink.Environment never
// changes the collector of the program that embeds it.
package gctune

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
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
	activeMu.Lock()
	active = t
	activeMu.Unlock()
	return func() {
		activeMu.Lock()
		if active == t {
			active = nil
		}
		activeMu.Unlock()
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.stopped {
			t.stopped = true
			if t.paused > 0 {
				debug.SetMemoryLimit(t.limitBefore)
			}
			debug.SetGCPercent(t.before)
		}
	}
}

var (
	activeMu sync.Mutex
	// active is the tuner Start started and has not stopped.
	active *tuner
)

type tuner struct {
	headroom uint64
	before   int
	// mu orders a tuning after a collection against stop and Pause.
	mu      sync.Mutex
	stopped bool
	// paused counts the Pauses not resumed; limitBefore is the memory
	// limit before the first of them.
	paused      int
	limitBefore int64
	// sample is read under mu.
	sample []metrics.Sample
}

// Pause turns the collector off, under a memory limit of three quarters
// of the memory the process may use (the machine's, or its cgroup's if
// lower; or the limit in force, GOMEMLIMIT, if lower still), until resume
// is called: for the restore of a checkpoint. Pauses nest; the last
// resume tunes the collector again as after a collection. Without a
// running tuner (Start not called, or GOGC set) or a known memory size,
// Pause changes nothing.
func Pause() (resume func()) {
	activeMu.Lock()
	t := active
	activeMu.Unlock()
	if t == nil {
		return func() {}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return func() {}
	}
	if t.paused == 0 {
		mem := memoryBytes()
		if mem == 0 {
			return func() {}
		}
		t.limitBefore = debug.SetMemoryLimit(-1)
		debug.SetMemoryLimit(min(t.limitBefore, int64(mem/4*3)))
		debug.SetGCPercent(-1)
	}
	t.paused++
	var once sync.Once
	return func() { once.Do(t.resume) }
}

// resume ends one Pause.
func (t *tuner) resume() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.paused--; t.paused > 0 || t.stopped {
		return
	}
	debug.SetMemoryLimit(t.limitBefore)
	t.tune()
}

// tune sets the percentage for the live heap of the last collection; the
// caller holds mu.
func (t *tuner) tune() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		debug.SetGCPercent(Percent(t.sample[0].Value.Uint64(), t.headroom))
	}
}

// memoryBytes returns the memory this process may use: the machine's
// (/proc/meminfo), or its cgroup's limit (cgroup v2 memory.max) if that is
// lower; 0 where neither is known.
func memoryBytes() uint64 {
	var mem uint64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := bytes.Fields(sc.Bytes())
			if len(f) >= 2 && string(f[0]) == "MemTotal:" {
				if kb, err := strconv.ParseUint(string(f[1]), 10, 64); err == nil && kb < math.MaxUint64/1024 {
					mem = kb * 1024
				}
				break
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64); err == nil && n > 0 && (mem == 0 || n < mem) {
			mem = n
		}
	}
	return mem
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
		if t.paused == 0 {
			t.tune()
		}
		t.arm()
	})
}
