package state

import (
	"testing"
	"time"
)

// TestLateWindow checks when the tables whose keys live shorter than a
// checkpoint interval may be written ahead: in the last 30% of the
// interval the last two checkpoints were apart by, at most its last
// second, and never before two checkpoints.
func TestLateWindow(t *testing.T) {
	t0 := time.UnixMilli(1_000_000)
	for _, c := range []struct {
		name  string
		every time.Duration // 0: one checkpoint so far
		since time.Duration
		want  bool
	}{
		{"one checkpoint so far", 0, time.Hour, false},
		{"1s interval, early", time.Second, 699 * time.Millisecond, false},
		{"1s interval, window opens", time.Second, 700 * time.Millisecond, true},
		{"1s interval, past due", time.Second, 3 * time.Second, true},
		{"10s interval, lead capped at 1s", 10 * time.Second, 8999 * time.Millisecond, false},
		{"10s interval, last second", 10 * time.Second, 9 * time.Second, true},
		{"100ms interval", 100 * time.Millisecond, 70 * time.Millisecond, true},
	} {
		inc := &incrState{now: time.Now}
		if c.every > 0 {
			inc.checkpointCaptured(t0.Add(-c.every))
		}
		inc.checkpointCaptured(t0)
		if inc.lateStarted {
			t.Fatalf("%s: a checkpoint's capture left lateStarted set", c.name)
		}
		if got := inc.lateWindow(t0.Add(c.since)); got != c.want {
			t.Errorf("%s: lateWindow %v after the checkpoint = %v, want %v", c.name, c.since, got, c.want)
		}
	}
}
