package state

import "time"

// SetClock makes b's incremental checkpoints read the time from now (the
// interval of preemptive persists, the late window of tables whose keys
// live shorter than a checkpoint interval).
func SetClock(b *MemoryBackend, now func() time.Time) { b.inc.now = now }
