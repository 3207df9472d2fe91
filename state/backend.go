package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
)

// Backend holds the keyed state of one operator in one subtask: its
// tables (Value, List, Map, Reducing and Aggregating states, timers), split
// by key group.
//
// A backend is driven by the operator's task goroutine in this order:
//
//  1. Open, with the subtask's key-group range.
//  2. Restore, when the job restores from a checkpoint: the key groups of
//     every snapshot given (one per old subtask whose range overlaps, when
//     the job was rescaled) that fall into the range. Tables registered
//     later pick up their part then.
//  3. Register tables (the typed constructors NewValue, NewList, ... do),
//     then read and write them.
//  4. Capture at each checkpoint barrier: cheap, and writes made after it
//     never show in what it captured. The snapshot worker then calls
//     Captured.Persist, concurrently with more writes.
//  5. Close.
type Backend interface {
	// Name is the backend kind, "memory" or "pebble".
	Name() string
	// Open binds the backend to the key groups r of maxParallelism.
	Open(r KeyGroupRange, maxParallelism int) error
	// Register adds a table. Its restored content, if any, is loaded now.
	Register(t Table) error
	// Capture freezes every table for a checkpoint.
	Capture() (Captured, error)
	// Restore loads the key groups in the backend's range from snapshots.
	Restore(snaps [][]KeyGroupData) error
	// Close releases the backend.
	Close() error
}

// Captured is the frozen state of a backend at one checkpoint.
type Captured interface {
	// Persist encodes the frozen state per key group. It runs on the
	// snapshot worker, concurrently with the task writing to the tables.
	Persist() ([]KeyGroupData, error)
}

// Table is one named keyed state as a backend sees it. The typed states
// of this package implement it; a backend never needs their types.
type Table interface {
	// Name identifies the table in snapshots; unique per operator.
	Name() string
	// Freeze returns a view of the table as of now that later writes do
	// not change.
	Freeze() FrozenTable
	// RestoreGroup adds the entries of key group kg encoded by
	// FrozenTable.AppendGroup.
	RestoreGroup(kg int, entries int, data []byte) error
}

// FrozenTable is a table frozen by Freeze.
type FrozenTable interface {
	// AppendGroup appends the encoded entries of key group kg to dst and
	// returns it with the number of entries appended.
	AppendGroup(dst []byte, kg int) ([]byte, int)
}

// Key-group data of a backend holds one section per table:
//
//	name     uvarint length + bytes
//	entries  uvarint
//	data     uvarint length + bytes (the table's encoding of its entries)

// appendSection appends one table's section of a key group.
func appendSection(dst []byte, name string, entries int, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = binary.AppendUvarint(dst, uint64(entries))
	dst = binary.AppendUvarint(dst, uint64(len(data)))
	return append(dst, data...)
}

type section struct {
	name    string
	entries int
	data    []byte
}

// parseSections splits one key group's data into its tables' sections.
func parseSections(kg int, b []byte) ([]section, error) {
	var out []section
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, fmt.Errorf("key group %d: table name is truncated", kg)
		}
		name := string(b[n : n+int(l)])
		b = b[n+int(l):]
		e, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("key group %d, table %q: bad entry count", kg, name)
		}
		b = b[n:]
		l, n = binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, fmt.Errorf("key group %d, table %q: data is truncated", kg, name)
		}
		// Every entry takes at least one byte (its write time): bound the
		// count by the section's own data, not by what follows it.
		if e > l {
			return nil, fmt.Errorf("key group %d, table %q: %d entries in %d bytes", kg, name, e, l)
		}
		out = append(out, section{name: name, entries: int(e), data: b[n : n+int(l)]})
		b = b[n+int(l):]
	}
	return out, nil
}

// MemoryBackend keeps keyed state in Go maps, one per key group, with
// copy-on-write at checkpoints: Capture marks every key group shared, and
// the first write to a shared key group copies its map, so the capture
// keeps the old one. Entries holding slices or maps are copied on their
// first change after a capture in the same way.
type MemoryBackend struct {
	rng            KeyGroupRange
	maxParallelism int
	tables         []Table
	byName         map[string]Table
	// restored holds sections of tables not registered yet, by name.
	restored map[string][]restoredGroup
	opened   bool
	// broken is why a table's restore failed in Register: the backend
	// holds part of the state and must not be captured.
	broken error
	// incremental: tables record their changes; inc holds the chain of
	// files of the incremental checkpoints (incremental.go). Both are set
	// by NewMemoryBackendWith only.
	incremental bool
	inc         *incrState
	// maps holds the chain files RestoreFiles mapped, which merged
	// entries of restored point into.
	maps fileMaps
}

// restoredGroup is the restored state of one table in one key group, in
// one of four forms: data, as FrozenTable.AppendGroup encodes it
// (restored from key-group data); merged, the entries of a merge of the
// files of incremental checkpoints (pointing into the files' bytes);
// lazy, such a merge not done yet; or delim, merged entries delimited
// (see changelog.go), as a capture writes them. Capture turns merged and
// lazy into delim.
type restoredGroup struct {
	kg      int
	entries int
	data    []byte
	merged  []mergedEntry
	delim   []byte
	// lazy is a merge the table does as it decodes (chainMerge.each), in
	// place of merged; entries is then at least the number of entries.
	lazy *chainMerge
}

// delimited reports whether g came from the files of incremental
// checkpoints, so that a capture can write its entries as they are.
func (g restoredGroup) delimited() bool { return g.merged != nil || g.delim != nil || g.lazy != nil }

// mergedEntries returns the entries of a delimited group.
func (g restoredGroup) mergedEntries() ([]mergedEntry, error) {
	if g.merged != nil {
		return g.merged, nil
	}
	if g.lazy != nil {
		return g.lazy.entries()
	}
	es, err := parseMerged(g.entries, g.delim)
	if err != nil {
		return nil, fmt.Errorf("key group %d: %w", g.kg, err)
	}
	return es, nil
}

// restoreWorkers is how many goroutines a restore merges key groups and
// decodes them on (tests change it).
var restoreWorkers = func() int { return runtime.GOMAXPROCS(0) }

// groupsRestorer is a Table that restores groups of every form itself
// (merged entries without their key-group data encoding built first), on
// up to workers goroutines; it clears each group it restored.
type groupsRestorer interface {
	restoreGroups(groups []restoredGroup, workers int) error
}

// restoreGroups adds groups to t, clearing each group once t holds its
// entries decoded, so that the collector can have the encoded ones group
// by group.
func restoreGroups(t Table, groups []restoredGroup) error {
	if gr, ok := t.(groupsRestorer); ok {
		return gr.restoreGroups(groups, restoreWorkers())
	}
	for i, g := range groups {
		data, err := g.groupData()
		if err == nil {
			err = t.RestoreGroup(g.kg, g.entries, data)
		}
		if err != nil {
			return err
		}
		groups[i] = restoredGroup{}
	}
	return nil
}

// groupData returns g's entries as FrozenTable.AppendGroup encodes them.
func (g restoredGroup) groupData() ([]byte, error) {
	if !g.delimited() {
		return g.data, nil
	}
	es, err := g.mergedEntries()
	if err != nil {
		return nil, err
	}
	return appendEntriesData(nil, es), nil
}

// NewMemoryBackend returns an empty memory backend.
func NewMemoryBackend() *MemoryBackend {
	return &MemoryBackend{byName: map[string]Table{}, restored: map[string][]restoredGroup{}}
}

// Name implements Backend.
func (b *MemoryBackend) Name() string { return "memory" }

func (b *MemoryBackend) memoryBackend() *MemoryBackend { return b }

// Open implements Backend.
func (b *MemoryBackend) Open(r KeyGroupRange, maxParallelism int) error {
	if maxParallelism < 1 || r.Start < 0 || r.End > maxParallelism || r.Start > r.End {
		return fmt.Errorf("opening memory state backend: key-group range %v of max parallelism %d", r, maxParallelism)
	}
	b.rng, b.maxParallelism, b.opened = r, maxParallelism, true
	return nil
}

// Range returns the key groups the backend holds.
func (b *MemoryBackend) Range() KeyGroupRange { return b.rng }

// MaxParallelism returns the number of key groups of the job.
func (b *MemoryBackend) MaxParallelism() int { return b.maxParallelism }

// Incremental reports whether the backend's tables record their changes
// for incremental checkpoints (MemoryOptions.Incremental).
func (b *MemoryBackend) Incremental() bool { return b.incremental }

// Register implements Backend.
func (b *MemoryBackend) Register(t Table) error {
	if !b.opened {
		return errors.New("registering a state table before the backend is open")
	}
	if _, dup := b.byName[t.Name()]; dup {
		return fmt.Errorf("state %q is registered twice", t.Name())
	}
	b.byName[t.Name()] = t
	b.tables = append(b.tables, t)
	if err := restoreGroups(t, b.restored[t.Name()]); err != nil {
		b.broken = fmt.Errorf("restoring state %q: %w", t.Name(), err)
		return b.broken
	}
	delete(b.restored, t.Name())
	return nil
}

// Restore implements Backend. With incremental checkpoints, the next
// checkpoint after restoring key-group data writes the state whole.
func (b *MemoryBackend) Restore(snaps [][]KeyGroupData) error {
	for _, groups := range snaps {
		for _, g := range groups {
			if !b.rng.Contains(g.KeyGroup) {
				continue
			}
			if b.inc != nil {
				b.inc.mu.Lock()
				b.inc.full = true
				b.inc.mu.Unlock()
			}
			secs, err := parseSections(g.KeyGroup, g.Data)
			if err != nil {
				return fmt.Errorf("restoring memory state: %w", err)
			}
			for _, s := range secs {
				if t := b.byName[s.name]; t != nil {
					if err := t.RestoreGroup(g.KeyGroup, s.entries, s.data); err != nil {
						return fmt.Errorf("restoring state %q: %w", s.name, err)
					}
					continue
				}
				b.restored[s.name] = append(b.restored[s.name], restoredGroup{kg: g.KeyGroup, entries: s.entries, data: s.data})
			}
		}
	}
	return nil
}

// Capture implements Backend. With incremental checkpoints and a chain to
// add to, the tables capture only their changes (deltacapture.go).
func (b *MemoryBackend) Capture() (Captured, error) {
	if b.broken != nil {
		return nil, fmt.Errorf("capturing memory state after a failed restore: %w", b.broken)
	}
	// A restore still running in the background ends first: the capture
	// reads every key group, and the restored files are unmapped below.
	for _, t := range b.tables {
		if br, ok := t.(backgroundRestorer); ok {
			if err := br.settle(); err != nil {
				b.broken = fmt.Errorf("restoring state %q: %w", t.Name(), err)
				return nil, b.broken
			}
		}
	}
	c := &memoryCapture{rng: b.rng}
	// State restored for tables the operator has not registered (yet)
	// still belongs to the checkpoint. Merged entries are delimited once,
	// for this capture and the next ones, so that they hold no file's
	// bytes.
	for name, groups := range b.restored {
		for i, g := range groups {
			if g.merged != nil || g.lazy != nil {
				es, err := g.mergedEntries()
				if err != nil {
					return nil, fmt.Errorf("capturing state %q restored but not registered: %w", name, err)
				}
				groups[i] = restoredGroup{kg: g.kg, entries: len(es), delim: appendEntriesDelimited(nil, es)}
			}
		}
		c.pending = append(c.pending, pendingTable{name: name, groups: slices.Clone(groups)})
	}
	// Nothing points into the restored files any more.
	if err := b.maps.release(); err != nil {
		return nil, err
	}
	// The tables come last: a capture of their changes empties their
	// change lists, which a failure after it would lose.
	changes, whole, track := b.captureMode(b.churns())
	for _, t := range b.tables {
		c.names = append(c.names, t.Name())
		cc, ok := t.(changeCapturer)
		if !ok {
			c.frozen = append(c.frozen, t.Freeze())
			continue
		}
		cc.insertsCaptured()
		if !changes {
			c.frozen = append(c.frozen, t.Freeze())
			continue
		}
		c.frozen = append(c.frozen, cc.captureChanges())
		cc.checkpointed()
	}
	if b.inc != nil {
		for _, t := range b.tables {
			if et, ok := t.(expiringTable); ok {
				if x, ok := et.expiryAt(); ok {
					if c.expiry == nil {
						c.expiry = map[string]expiryAt{}
					}
					c.expiry[t.Name()] = x
				}
			}
		}
	}
	slices.SortFunc(c.pending, func(x, y pendingTable) int {
		if x.name < y.name {
			return -1
		}
		if x.name > y.name {
			return 1
		}
		return 0
	})
	if b.inc != nil {
		b.inc.checkpointCaptured(b.inc.now())
		untracked := b.inc.untracked
		if untracked == track {
			for _, t := range b.tables {
				if cc, ok := t.(changeCapturer); ok {
					cc.trackChanges(track)
				}
			}
			b.inc.mu.Lock()
			b.inc.untracked = !track
			b.inc.mu.Unlock()
		}
		return b.captureIncremental(c, changes, false, whole, untracked), nil
	}
	return c, nil
}

// Close implements Backend. It waits for a materialization of incremental
// checkpoints to stop.
func (b *MemoryBackend) Close() error {
	b.closeIncremental()
	// The goroutines of a background restore read the restored files.
	for _, t := range b.tables {
		if br, ok := t.(backgroundRestorer); ok {
			br.haltRestore()
		}
	}
	return b.maps.release()
}

type pendingTable struct {
	name   string
	groups []restoredGroup
}

type memoryCapture struct {
	rng     KeyGroupRange
	names   []string
	frozen  []FrozenTable
	pending []pendingTable
	// expiry holds, by name, the TTL of the tables that have one and
	// their clock at the capture (incremental checkpoints only).
	expiry map[string]expiryAt
}

// Persist encodes the frozen tables per key group.
func (c *memoryCapture) Persist() ([]KeyGroupData, error) {
	var out []KeyGroupData
	var scratch []byte
	for kg := c.rng.Start; kg < c.rng.End; kg++ {
		var data []byte
		total := 0
		for i, f := range c.frozen {
			var n int
			scratch, n = f.AppendGroup(scratch[:0], kg)
			if n == 0 {
				continue
			}
			data = appendSection(data, c.names[i], n, scratch)
			total += n
		}
		for _, p := range c.pending {
			for _, g := range p.groups {
				if g.kg == kg {
					gd, err := g.groupData()
					if err != nil {
						return nil, fmt.Errorf("state %q: %w", p.name, err)
					}
					data = appendSection(data, p.name, g.entries, gd)
					total += g.entries
				}
			}
		}
		if total > 0 {
			out = append(out, KeyGroupData{KeyGroup: kg, Entries: total, Data: data})
		}
	}
	return out, nil
}

// KeyGroupData is the snapshot of one key group of a backend: Entries
// entries over all its tables, encoded in Data (one section per table).
type KeyGroupData struct {
	KeyGroup int
	Entries  int
	Data     []byte
}
