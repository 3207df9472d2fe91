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
