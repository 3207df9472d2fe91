package state

import (
	"slices"
	"time"
)

// Preemptive persists. A checkpoint of a backend with incremental
// checkpoints writes, after its barrier, every entry changed since the
// checkpoint before; when state grows fast (a regular join keeping every
// row), that is tens of megabytes each interval, and the checkpoint waits
// for all of it. So, as Flink's changelog backend persists its changelog
// preemptively once it exceeds a threshold, the backend writes the changes
// gathered so far ahead of the next checkpoint, on a goroutine of its own,
// whenever the tables whose values grow by appending (a regular join's
// rows; see appends) have listed MemoryOptions.PreemptiveEntries changed
// entries since the last capture, or MemoryOptions.PreemptiveInterval
// after it: the task captures them (as a checkpoint
// captures its changes) between two records, when its chain asks
// (PersistPreemptively), and the goroutine writes them as a delta file
// through WriteUnpinned. The next checkpoint lists those files before its
// own delta, which then holds only the changes after the last of them.
// The tables whose keys live shorter than a checkpoint interval are
// written ahead so only in the interval's last part, once the first two
// checkpoints told how far apart checkpoints come (see appends and
// lateWindow).
//
// Such a capture is an unpersisted capture like a discarded checkpoint's:
// if its file is not written, or a retention collected it before a
// checkpoint could pin it, the next checkpoint's delta holds its changes.
// A preemptive persist starts only when every unpersisted capture is
// preemptive and written, so that its file holds its own changes only and
// the files follow one another.

// Preemptive is implemented by backends that persist changes ahead of
// checkpoints. Its caller is the task goroutine, between two records.
type Preemptive interface {
	// PersistPreemptively captures the changes since the last capture and
	// starts writing them when enough have gathered.
	PersistPreemptively() error
}

// SharedUser is implemented by backends that write shared files outside
// checkpoints (preemptive persists): UseShared gives them the task's
// shared storage, before the first record.
type SharedUser interface {
	UseShared(sw SharedWriter)
}

// UseShared implements SharedUser.
func (b *MemoryBackend) UseShared(sw SharedWriter) {
	if b.inc == nil {
		return
	}
	b.inc.mu.Lock()
	b.inc.shared = sw
	b.inc.mu.Unlock()
}

// appends reports whether the table's changes are cheap to write ahead of
// the checkpoint, for the most part: values that grow by appending, written
// as edits (Differ), such as a regular join's rows, whose changes written
// ahead cost only what was appended; or keys that are written once, as
// the values of a DISTINCT aggregate over an insert-only input, or
// deleted once, as the timers of a join that drops the rows no row to
// come can meet. The
// changes of other tables are written at the checkpoint only: a key
// written again after a preemptive persist would be written again whole.
//
// Both are learnt from the captures: a table that diffs values (Top-N and
// deduplication state, kept as one byte string per key, diff as a join's
// rows do) but whose deltas mostly rewrite them whole (they are rebuilt,
// not appended to) is not persisted ahead; a table that does not diff
// values is, once its captures of changes and the interval since have
// listed at least three keys written once for each key written again:
// keys inserted, or deleted after a value written before the interval, are
// written once; a key written before (or again after a persist ahead), or
// deleted in the interval that wrote it, is written again.
//
// A table whose keys live shorter than a checkpoint interval is late
// instead: by Little's law, when a table holds fewer keys than one
// interval inserts, a key lasts less than an interval on average, and
// most of what a persist ahead early in the interval writes is deleted
// before the checkpoint, whose delta then need not hold it at all (the
// rows of a join that drops those no row to come can meet, when event
// time runs ahead of the clock). But the checkpoint's delta then holds
// every key alive at the barrier, written while the checkpoint waits; so
// such a table is written ahead in the last part of the interval only
// (lateWindow), where what a persist ahead writes is mostly still alive
// at the barrier, and the checkpoint's own delta holds the changes since
// the last persist ahead.
func (t *cowTable[K, V]) appends() (yes, late bool) {
	t.finishRestore()
	if per := t.bornPerCheckpoint; per >= minPreemptiveEntries && int64(t.len()) < per {
		return false, true
	}
	if t.diff == nil {
		// The captures so far, and the interval since the last one.
		i, r := t.once.Load(), t.again.Load()
		for g := range t.shards {
			if c := t.shards[g].changes; c != nil {
				once, again := c.writtenOnce()
				i, r = i+once, r+again
			}
		}
		return i >= minPreemptiveEntries && i >= 3*r, false
	}
	s, r := t.spliced.Load(), t.rewritten.Load()
	return s >= 3*r, false
}

// checkpointCaptured notes a checkpoint's capture at now.
func (inc *incrState) checkpointCaptured(now time.Time) {
	if !inc.lastCheckpoint.IsZero() {
		inc.checkpointEvery = now.Sub(inc.lastCheckpoint)
	}
	inc.lastCheckpoint, inc.lateStarted = now, false
}

// lateWindow reports whether the next checkpoint is near enough for the
// tables whose keys live shorter than an interval (see appends) to be
// written ahead: in the last lateShare of the interval the last two
// checkpoints were apart by, and in its last maxLateLead at most. The
// first persist ahead in it must end before the barrier comes, and it
// writes every key alive (what the checkpoint would otherwise write): a
// later start would leave the checkpoint waiting for it; an earlier one
// writes more keys that die before the barrier. Before two checkpoints,
// the window is never open.
func (inc *incrState) lateWindow(now time.Time) bool {
	if inc.checkpointEvery <= 0 {
		return false
	}
	lead := min(time.Duration(float64(inc.checkpointEvery)*lateShare), maxLateLead)
	return now.Sub(inc.lastCheckpoint) >= inc.checkpointEvery-lead
}

// checkpointed implements changeCapturer.
func (t *cowTable[K, V]) checkpointed() {
	t.bornPerCheckpoint = t.born - t.bornAtCheckpoint
	t.bornAtCheckpoint = t.born
}

// insertedSince implements changeCapturer.
func (t *cowTable[K, V]) insertedSince() int64 { return t.inserted - t.insertedAtCapture }

// insertsCaptured implements changeCapturer.
func (t *cowTable[K, V]) insertsCaptured() { t.insertedAtCapture = t.inserted }

// changedCount returns how many keys the table's change lists hold.
func (t *cowTable[K, V]) changedCount() int {
	t.finishRestore()
	n := 0
	for g := range t.shards {
		if c := t.shards[g].changes; c != nil {
			n += len(c.keys)
		}
	}
	return n
}

// PersistPreemptively implements Preemptive. First, tables that track
// their changes stop once the next checkpoint will be whole anyway, or
// once they churn (see churns): the changes would go into no file.
func (b *MemoryBackend) PersistPreemptively() error {
	inc := b.inc
	if inc == nil {
		return nil
	}
	// Nothing is written ahead while a restore runs in the background:
	// what decides it reads every key group.
	for _, t := range b.tables {
		if br, ok := t.(backgroundRestorer); ok && br.restoring() {
			return nil
		}
	}
	if !inc.untracked {
		b.stopTrackingIfWhole()
	}
	if inc.preemptive < 0 && inc.preemptEvery < 0 {
		return nil
	}
	// The tables written ahead, decided once for this call.
	ahead := inc.ahead[:0]
	n, lateN := 0, 0
	window, windowKnown := false, false
	for _, t := range b.tables {
		cc, ok := t.(changeCapturer)
		if !ok {
			continue
		}
		yes, late := cc.appends()
		if late && !windowKnown {
			window, windowKnown = inc.lateWindow(inc.now()), true
		}
		if !yes && !(late && window) {
			continue
		}
		ahead = append(ahead, cc)
		c := cc.changedCount()
		n += c
		if late {
			lateN += c
		}
	}
	inc.ahead = ahead
	switch {
	case n < minPreemptiveEntries:
		return nil
	case lateN >= minPreemptiveEntries && !inc.lateStarted:
		// The late window opened: write what lives now at once.
	case inc.preemptive >= 0 && n >= inc.preemptive:
	case inc.preemptEvery < 0 || inc.now().Sub(inc.lastCapture) < inc.preemptEvery:
		return nil
	}
	for _, p := range b.restored {
		for _, g := range p {
			if !g.delimited() {
				return nil
			}
		}
	}
	inc.mu.Lock()
	sw := inc.shared
	ready := sw != nil && !inc.full && !inc.whole && !inc.untracked && !inc.preRunning && inc.matErr == nil && !inc.closing.Load()
	for _, u := range inc.unpersisted {
		if !u.preemptive || u.file == nil {
			ready = false
		}
	}
	if !ready {
		inc.mu.Unlock()
		return nil
	}
	inc.preRunning = true
	inc.lateStarted = inc.lateStarted || lateN > 0
	inc.wg.Add(1)
	inc.mu.Unlock()

	c := &memoryCapture{rng: b.rng}
	for _, cc := range ahead {
		c.names = append(c.names, cc.Name())
		c.frozen = append(c.frozen, cc.captureChanges())
	}
	ic := b.captureIncremental(c, true, true, false, false)
	go ic.persistPreemptively(sw)
	return nil
}

// churns reports whether the tables inserted, since the last checkpoint's
// capture, at least wholeEntries times as many keys as they hold, and at
// least minChurnEntries (see wholeBases).
func (b *MemoryBackend) churns() bool {
	var inserted, live int64
	for _, t := range b.tables {
		if cc, ok := t.(changeCapturer); ok {
			inserted += cc.insertedSince()
			live += int64(cc.len())
		}
	}
	return inserted >= minChurnEntries && inserted >= wholeEntries*live
}

// stopTrackingIfWhole stops the tables' change lists when the next
// checkpoint writes the state whole: when the backend decided so
// (incrState.whole), or when the tables churn, which starts a run of
// whole checkpoints. The task goroutine calls it while the tables track
// their changes.
func (b *MemoryBackend) stopTrackingIfWhole() {
	inc := b.inc
	inc.mu.Lock()
	whole := inc.whole
	inc.mu.Unlock()
	if !whole && !b.churns() {
		return
	}
	for _, t := range b.tables {
		if cc, ok := t.(changeCapturer); ok {
			cc.trackChanges(false)
		}
	}
	inc.mu.Lock()
	inc.untracked = true
	if !inc.whole {
		inc.whole, inc.wholeLeft = true, wholeBases
	}
	inc.mu.Unlock()
}

// persistPreemptively writes the changes of the preemptive capture c. It
// runs on its own goroutine, which the backend's Close waits for.
func (c *incrCapture) persistPreemptively(sw SharedWriter) {
	inc := c.b.inc
	defer inc.wg.Done()
	inc.persistMu.Lock()
	defer inc.persistMu.Unlock()
	inc.mu.Lock()
	// A checkpoint persisted meanwhile took these changes into its delta.
	wanted := !inc.closing.Load() && slices.Contains(inc.unpersisted, c)
	inc.mu.Unlock()
	var f chainFile
	var err error
	if wanted {
		f, err = c.writeFile(sw.WriteUnpinned, false, nil, "pre")
	}
	inc.mu.Lock()
	defer inc.mu.Unlock()
	inc.preRunning = false
	if wanted && err == nil {
		c.file = &f
	}
}
