package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{40 << 20, 256 << 20, 400},
		{128 << 20, 256 << 20, 200},
		{256 << 20, 256 << 20, 100},
		{1 << 30, 256 << 20, 100},
		{0, 256 << 20, 400},
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}

// TestStart: after a collection the percentage gives a small heap the
// headroom; stop restores the percentage before; GOGC in the environment
// turns the tuner off.
func TestStart(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	stop := Start(1 << 30)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		time.Sleep(time.Millisecond) // the finalizer runs on its own goroutine
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if p > 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC percentage %d after collections, want the headroom of 1 GiB over a small heap", p)
		}
	}
	stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GOGC percentage %d after stop, want 100 again", p)
	}

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	stop = Start(1 << 30)
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := debug.SetGCPercent(150); p != 150 {
		t.Errorf("GOGC percentage %d with GOGC=150 in the environment, want it left alone", p)
	}
	stop()
}

// TestPause: a pause turns the collector off under a memory limit below
// the machine's memory, pauses nest, and the last resume tunes the
// collector again and restores the limit; without a tuner Pause changes
// nothing.
func TestPause(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	limit := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(limit)
	percent := func() int {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p
	}

	debug.SetGCPercent(100)
	Pause()()
	if p := percent(); p != 100 {
		t.Fatalf("GOGC percentage %d after a Pause without a tuner, want 100", p)
	}

	stop := Start(1 << 30)
	defer stop()
	mem := memoryBytes()
	if mem == 0 {
		t.Skip("the memory of the machine is not known here")
	}
	resume1 := Pause()
	resume2 := Pause()
	if p := percent(); p != -1 {
		t.Fatalf("GOGC percentage %d while paused, want -1 (off)", p)
	}
	if l := debug.SetMemoryLimit(-1); l != min(limit, int64(mem/4*3)) {
		t.Fatalf("memory limit %d while paused, want three quarters of %d", l, mem)
	}
	runtime.GC() // the tuner's finalizer must leave the pause alone
	time.Sleep(10 * time.Millisecond)
	resume1()
	resume1()
	if p := percent(); p != -1 {
		t.Fatalf("GOGC percentage %d with one pause of two resumed (once twice), want -1", p)
	}
	resume2()
	if p := percent(); p < 100 {
		t.Fatalf("GOGC percentage %d after the last resume, want the tuner's (100 or more)", p)
	}
	if l := debug.SetMemoryLimit(-1); l != limit {
		t.Fatalf("memory limit %d after the last resume, want %d again", l, limit)
	}
}
