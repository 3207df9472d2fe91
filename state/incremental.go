package state

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Incremental checkpoints of the memory backend, in the manner of Flink's
// changelog state backend.
//
// A checkpoint persists the entries written or deleted since the previous
// one (a delta file: each changed key with its value as of the capture, or
// edits of the value the chain held (Differ), or its deletion) and lists, in a manifest stored inline in the task
// snapshot, the chain of files its state is made of: a full base, then the
// deltas written since, in order. Files are shared files (SharedFiles): a
// checkpoint lists every file of its chain, and retention deletes a file
// once no remaining checkpoint lists it.
//
// Once the chain exists, a capture copies the entries that changed
// instead of freezing the tables (deltacapture.go): the tables' slot
// arrays are not shared with it, so writes after it copy nothing.
//
// Once the bytes the deltas since the base make redundant (values written
// again or deleted, bytes that edits cut; not values appended to or keys
// added) outgrow twice the base (and MemoryOptions.MaterializeBytes), so
// that a restore would read more that is dead than is live, or the chain
// holds more than maxChainFiles files, a goroutine of the backend merges
// the chain's files into a new base (compact), one key group at a time as
// a restore merges them, beside the checkpoints; the tables are not
// frozen for it, as a base of them would make the next write to each of
// their shards copy it, all at once. The first checkpoint after it is
// done lists that base and the deltas written after the chain it merged,
// and the files before it are collected when the last checkpoint listing
// them is.
//
// Restore merges, per key group and table, the last base that covers the
// key group with the deltas after it, and then keeps the chain: the next
// checkpoint only adds a delta, also after a rescale (each file of the
// chain applies to the key groups its manifest entry names). Files are
// mapped read-only (mapFile: no copy, no fresh memory) and key groups
// merged on several goroutines; a merged key group points into the
// files' bytes, which its table decodes when the operator registers it
// (mergedEntry, restoredGroup). Where the deltas mostly insert, the merge
// is left to the table: it takes the base's entries and then the deltas'
// (chainMerge), without looking up each entry of the base. The files stay
// mapped until the next capture, which copies what a table not registered
// yet still holds of them. The large arrays a restore fills at once are
// mapped when made (makeFaulted, growRestored), not page by page as they
// are written.

// MemoryOptions configure a memory backend.
type MemoryOptions struct {
	// Incremental makes checkpoints write only what changed since the
	// previous checkpoint (Flink's state.backend.incremental). It needs
	// shared storage that implements SharedWriter (a checkpoint
	// directory); Captured.Persist still returns the full state.
	Incremental bool
	// MaterializeBytes is the volume of bytes the deltas since the base
	// make redundant (values they replace or delete) after which a new
	// base is written, when it also exceeds twice the size of the base
	// (default DefaultMaterializeBytes). Deltas that only add keys or
	// append to values do not count: a new base would hold their bytes
	// too.
	MaterializeBytes int64
	// PreemptiveEntries is how many changed entries the tables may gather
	// between checkpoints before the backend writes them ahead of the next
	// checkpoint (PersistPreemptively; Flink's preemptive persist of the
	// changelog, dstl.dfs.preemptive-persist-threshold, counted in
	// entries): 0 means DefaultPreemptiveEntries, negative never.
	PreemptiveEntries int
	// PreemptiveInterval is how long after a capture the changes gathered
	// since are written ahead of the next checkpoint, once there are at
	// least minPreemptiveEntries of them, however few PreemptiveEntries
	// would wait for: 0 means DefaultPreemptiveInterval, negative never.
	PreemptiveInterval time.Duration
}

// DefaultPreemptiveEntries is the default of
// MemoryOptions.PreemptiveEntries.
const DefaultPreemptiveEntries = 1 << 16

// DefaultPreemptiveInterval is the default of
// MemoryOptions.PreemptiveInterval: a fifth of the usual checkpoint
// interval, so that a checkpoint writes what changed in its last fifth.
const DefaultPreemptiveInterval = 200 * time.Millisecond

// lateShare and maxLateLead bound the last part of a checkpoint interval
// in which the tables whose keys live shorter than an interval are written
// ahead (see lateWindow): 30% of the interval, at most a second.
const (
	lateShare   = 0.3
	maxLateLead = time.Second
)

// minPreemptiveEntries is the fewest changed entries a preemptive persist
// writes: below that, a checkpoint's delta is small anyway.
const minPreemptiveEntries = 1024

// DefaultMaterializeBytes is the default of MemoryOptions.MaterializeBytes.
const DefaultMaterializeBytes = 64 << 20

// materializeRatio is how many times the size of the base the bytes the
// deltas since it make redundant grow to before a new base is written:
// writing bases costs about 1/materializeRatio of writing the deltas that
// replace values, and a restore reads at most materializeRatio times the
// state in bytes it then drops.
const materializeRatio = 2

// maxChainFiles bounds the files of a chain whose deltas are small: each
// checkpoint lists them all, and a restore reads them all.
const maxChainFiles = 1000

// Whole checkpoints. Where the state churns within a checkpoint interval
// (its keys live shorter than one: a join that drops its rows seconds
// after they came), the files of a checkpoint (its delta and what was
// written ahead for it) hold more bytes than the state, many of them dead
// by the checkpoint, and every second or third checkpoint a
// materialization reads them all back to write a base the size of the
// state. A base written by the checkpoint itself costs the state's bytes
// once, and nothing is written ahead or merged. So once a checkpoint's
// files hold as many bytes as the state (estimated from the chain's base,
// which a materialization or a whole checkpoint wrote, scaled by how many
// more entries the tables hold now) and at least minWholeBytes, the next
// wholeBases checkpoints freeze the tables and write a base each
// (incrState.whole), as without incremental checkpoints; then one writes
// a delta again, to measure anew. A state that grows, or changes in part
// between checkpoints, writes less than that.
//
// A chain with no written base to measure by (a new job's, whose first
// files are deltas of everything, or a restored one's) estimates the
// state's bytes as its entries times the mean size of the entries the
// checkpoint's files hold: the checkpoint's files then start whole
// checkpoints once they hold wholeEntries times as many entries as the
// tables. The margin covers the estimate's error (deletions are short
// entries) and a new state's first checkpoint, whose files hold every
// entry once: a state that only grows holds as many entries as its
// first checkpoint's files, one that churns several times as many.
//
// Measuring by a checkpoint's files costs an interval whose tables track
// their changes: every key inserted and deleted is listed, and what is
// written ahead of the checkpoint mostly dies before it. Counting the
// keys the tables insert costs nothing, tracked or not, and tells the
// churn of keys that come and go (churns): once the tables inserted,
// since the last checkpoint's capture, wholeEntries times as many keys as
// they hold (and at least minChurnEntries), their keys live, by Little's
// law, less than half that time on average, so the keys alive at the
// next checkpoint will have come since the last one. Then the tables
// stop tracking at once, in the middle of the interval (a new job's first
// interval, or the one after whole checkpoints), and the checkpoints are
// whole; and whole checkpoints whose interval churned so are followed by
// more of them without an interval to measure in. A state whose values
// change in place inserts no keys: its files still measure it.
const (
	wholeBases      = 8
	minWholeBytes   = 4 << 20
	wholeEntries    = 2
	minChurnEntries = 16384
)

// Validate checks the options and fills in defaults.
func (o *MemoryOptions) Validate() error {
	if o.MaterializeBytes < 0 {
		return fmt.Errorf("memory state backend: negative materialization volume %d", o.MaterializeBytes)
	}
	if o.MaterializeBytes == 0 {
		o.MaterializeBytes = DefaultMaterializeBytes
	}
	if o.PreemptiveEntries == 0 {
		o.PreemptiveEntries = DefaultPreemptiveEntries
	}
	if o.PreemptiveInterval == 0 {
		o.PreemptiveInterval = DefaultPreemptiveInterval
	}
	return nil
}

// NewMemoryBackendWith returns an empty memory backend configured by o.
func NewMemoryBackendWith(o MemoryOptions) (*MemoryBackend, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	b := NewMemoryBackend()
	if o.Incremental {
		var tok [6]byte
		if _, err := rand.Read(tok[:]); err != nil {
			return nil, fmt.Errorf("memory state backend: making a file token: %w", err)
		}
		b.incremental = true
		b.inc = &incrState{token: hex.EncodeToString(tok[:]), materializeBytes: o.MaterializeBytes, preemptive: o.PreemptiveEntries,
			preemptEvery: o.PreemptiveInterval, now: time.Now, minWhole: minWholeBytes}
	}
	return b, nil
}

// ChainManifestName is the name of the inline file (FileState.Named) in
// which the memory backend lists the chain of an incremental checkpoint.
const ChainManifestName = "memory.chain"

// chainFile is one file of a chain.
type chainFile struct {
	name string
	base bool
	// applies holds the key groups the file's entries are read for: the
	// range of the backend that wrote it, narrowed by rescaling.
	applies KeyGroupRange
	size    int64
	// entries is how many entries the file holds; 0 for files of a
	// restored chain (unknown).
	entries int64
	// dead is how many bytes of the files before it a delta makes
	// redundant (see diffStats); a restored delta counts all of its size.
	dead int64
	// seq is the capture the file holds the state (base) or changes
	// (delta) of; 0 for files of a restored chain.
	seq uint64
}

// incrState is what a backend with incremental checkpoints keeps between
// checkpoints. The task goroutine (Capture) and the snapshot worker
// (PersistFiles) share it; the materialization goroutine reports to it.
type incrState struct {
	token            string
	materializeBytes int64
	preemptive       int
	preemptEvery     time.Duration
	// ahead is PersistPreemptively's list of the tables it writes ahead,
	// kept for its room (task goroutine only).
	ahead []changeCapturer
	// lastCapture is when the last capture was taken (task goroutine
	// only).
	lastCapture time.Time
	// lastCheckpoint is when the last checkpoint's capture was taken and
	// checkpointEvery the time between the last two (0: fewer than two);
	// lateStarted: the tables whose keys live shorter than an interval
	// have been written ahead since lastCheckpoint (see lateWindow). Task
	// goroutine only.
	lastCheckpoint  time.Time
	checkpointEvery time.Duration
	lateStarted     bool
	// now is the clock of the three (time.Now; tests set another).
	now func() time.Time
	// shared is where preemptive persists write their files (UseShared);
	// nil: none are written.
	shared SharedWriter

	// persistMu serialises PersistFiles calls; it is taken before mu.
	persistMu sync.Mutex

	mu sync.Mutex
	// seq numbers captures.
	seq uint64
	// unpersisted holds the captures, in order, whose changes no file of
	// the chain holds: the changes of one that was discarded or failed
	// go into the next delta.
	unpersisted []*incrCapture
	chain       []chainFile
	// lastSeq is the newest capture whose changes the chain holds.
	lastSeq uint64
	// baseBytes totals the chain's bases and deadBytes what its deltas
	// make redundant (chainFile.dead): the bytes a restore reads that a
	// new base would not hold.
	baseBytes, deadBytes int64
	// full: the next checkpoint writes a base (restored from a full
	// snapshot, or the chain was lost).
	full bool
	// whole: the state churns faster than deltas pay (see wholeBases):
	// checkpoints freeze the tables and write bases, wholeLeft more
	// captures of them (counted down by captureMode). minWhole is the
	// fewest bytes of a checkpoint's files that start it (minWholeBytes;
	// tests lower it).
	whole     bool
	wholeLeft int
	minWhole  int64
	// untracked: the tables record no changes (trackChanges), as the
	// capture after the last one is whole too (task goroutine writes it,
	// under mu).
	untracked bool
	// matRunning: the materialization goroutine runs (compact); matDone
	// is the base it wrote, not yet listed; matErr is its failure,
	// reported by the next checkpoint.
	matRunning bool
	matDone    *chainFile
	matErr     error
	// preRunning: a preemptive persist is being written.
	preRunning bool

	closing atomic.Bool
	wg      sync.WaitGroup
}

// incrCapture is the capture of a backend with incremental checkpoints.
type incrCapture struct {
	memoryCapture
	b   *MemoryBackend
	seq uint64
	// delimited holds the delimited entries of the pending tables.
	delimited [][]restoredGroup
	// undelimited: a pending table was restored from a full snapshot, so
	// its entries cannot be merged: the checkpoint is written whole.
	undelimited bool
	// changes: the tables captured their changes only (captureChanges),
	// not every entry, so this capture can write a delta but no base.
	// chainAt and before are the chain and the unpersisted captures at
	// its capture: a capture persisted after a newer one lists them with a
	// delta of its own.
	changes bool
	chainAt []chainFile
	before  []*incrCapture
	// whole: a capture of frozen tables for a base, the backend checking
	// whole (see wholeBases). entries counts the tables' entries at the
	// capture of a checkpoint (not counted for a preemptive one).
	whole   bool
	entries int64
	// untracked: the tables recorded no changes between the capture
	// before and this one, so no delta can hold them: a delta after this
	// capture, if it is not persisted, cannot be written.
	untracked bool
	// preemptive: a capture of changes taken between checkpoints to write
	// them ahead (PersistPreemptively); file is its file once written.
	preemptive bool
	file       *chainFile
}

// captureMode says whether the next checkpoint's capture captures the
// tables' changes only (changes: when the chain exists and the checkpoint
// will write a delta onto it), or freezes them for a base because the
// state churns (whole, see wholeBases), and whether the tables record
// their changes after it (track): not while more whole captures follow,
// which need none (each change otherwise lists its key, and the old
// value of a table that diffs values). The capture after an untracked
// interval is whole, whatever else the backend decided. churned says
// whether the interval that ends churned (churns): the last of a run of
// whole captures then starts another.
func (b *MemoryBackend) captureMode(churned bool) (changes, whole, track bool) {
	inc := b.inc
	if inc == nil {
		return false, false, false
	}
	inc.mu.Lock()
	defer inc.mu.Unlock()
	if inc.whole {
		if inc.wholeLeft--; inc.wholeLeft == 0 && churned {
			inc.wholeLeft = wholeBases
		}
		inc.whole = inc.wholeLeft > 0
		return false, true, !inc.whole
	}
	if inc.untracked {
		return false, true, true
	}
	return len(inc.chain) > 0 && !inc.full, false, true
}

// errUntracked fails a delta over a capture whose changes no table
// recorded.
func errUntracked(seq uint64) error {
	return fmt.Errorf("writing memory state: the changes before capture %d were not recorded (it was to be written whole, and was not); the next checkpoint writes the state whole", seq)
}

// untrackedBefore returns the first of captures whose changes were not
// recorded, or nil.
func untrackedBefore(captures []*incrCapture) *incrCapture {
	for _, u := range captures {
		if u.untracked {
			return u
		}
	}
	return nil
}

// captureIncremental wraps the capture c of a backend with incremental
// checkpoints: of the tables' changes only (changes), for a preemptive
// persist when preemptive is set, of frozen tables for a base when whole,
// after an interval in which the tables recorded no changes when
// untracked.
func (b *MemoryBackend) captureIncremental(c *memoryCapture, changes, preemptive, whole, untracked bool) *incrCapture {
	ic := &incrCapture{memoryCapture: *c, b: b, changes: changes, preemptive: preemptive, whole: whole, untracked: untracked}
	for _, t := range b.tables {
		if cc, ok := t.(changeCapturer); ok && !preemptive {
			ic.entries += int64(cc.len())
		}
	}
	for _, p := range c.pending {
		var d []restoredGroup
		for _, g := range p.groups {
			if !g.delimited() {
				ic.undelimited = true
			}
			d = append(d, restoredGroup{kg: g.kg, entries: g.entries, data: g.delim})
		}
		ic.delimited = append(ic.delimited, d)
	}
	inc := b.inc
	inc.lastCapture = inc.now()
	inc.mu.Lock()
	inc.seq++
	ic.seq = inc.seq
	if changes {
		ic.chainAt = slices.Clone(inc.chain)
		ic.before = slices.Clone(inc.unpersisted)
	}
	inc.unpersisted = append(inc.unpersisted, ic)
	inc.mu.Unlock()
	return ic
}

// Persist returns the full state, as without incremental checkpoints. The
// changes it covers are then in no file: the next checkpoint writes a base.
// A capture of changes holds no full state: it refuses.
func (c *incrCapture) Persist() ([]KeyGroupData, error) {
	if c.changes {
		return nil, errors.New("persisting memory state: this capture holds the changes since the last checkpoint for a delta of the chain (PersistFiles), not the whole state")
	}
	groups, err := c.memoryCapture.Persist()
	if err != nil {
		return nil, err
	}
	inc := c.b.inc
	inc.mu.Lock()
	if c.seq > inc.lastSeq {
		inc.dropUnpersisted(c.seq)
		inc.full = true
	}
	inc.mu.Unlock()
	return groups, nil
}

// dropUnpersisted forgets the captures up to seq. The caller holds mu.
func (inc *incrState) dropUnpersisted(seq uint64) {
	i := 0
	for i < len(inc.unpersisted) && inc.unpersisted[i].seq <= seq {
		inc.unpersisted[i] = nil
		i++
	}
	inc.unpersisted = inc.unpersisted[i:]
}

// PersistFiles implements FileCaptured: it writes the changes since the
// previous checkpoint as a delta file (or a base, when the chain must
// start again) and returns the manifest of the chain.
func (c *incrCapture) PersistFiles(sf SharedFiles) (*FileState, error) {
	sw, ok := sf.(SharedWriter)
	if !ok {
		return nil, errors.New("the memory state backend's incremental checkpoints need shared storage it can write files to")
	}
	inc := c.b.inc
	inc.persistMu.Lock()
	defer inc.persistMu.Unlock()

	inc.mu.Lock()
	if err := inc.matErr; err != nil {
		inc.matErr = nil
		inc.mu.Unlock()
		return nil, fmt.Errorf("materializing memory state: %w", err)
	}
	outOfOrder := c.seq <= inc.lastSeq
	full := inc.full
	var earlier []*incrCapture
	for _, u := range inc.unpersisted {
		if u.seq < c.seq {
			earlier = append(earlier, u)
		}
	}
	// The files preemptive persists wrote, in order, up to the first
	// capture that has none.
	var pre []chainFile
	for _, u := range earlier {
		if !u.preemptive || u.file == nil {
			break
		}
		pre = append(pre, *u.file)
	}
	chain := slices.Clone(inc.chain)
	baseBytes, deadBytes := inc.baseBytes, inc.deadBytes
	newBase := inc.matDone
	if newBase != nil && len(chain) > 0 && newBase.seq < chain[0].seq {
		// Merged from a chain that a base written since (a whole
		// checkpoint's) replaced: nothing lists it.
		inc.matDone, newBase = nil, nil
	}
	inc.mu.Unlock()

	switch {
	case c.undelimited:
		// Written whole, inline; the next checkpoint does so again until
		// the pending tables are registered.
		groups, err := c.memoryCapture.Persist()
		if err != nil {
			return nil, err
		}
		inc.mu.Lock()
		inc.dropUnpersisted(c.seq)
		inc.full, inc.chain, inc.lastSeq = true, nil, max(inc.lastSeq, c.seq)
		inc.mu.Unlock()
		return &FileState{KeyGroups: groups}, nil
	case outOfOrder && c.changes:
		// A newer capture was persisted first (only callers other than
		// the runtime do that): its chain holds these changes with later
		// values. This checkpoint lists the chain as it was at its
		// capture, and a delta of its own changes and those of the
		// captures then unpersisted.
		if u := untrackedBefore(c.before); u != nil {
			return nil, errUntracked(u.seq)
		}
		for _, f := range c.chainAt {
			if !sw.Has(f.name) {
				return nil, fmt.Errorf("writing memory state: shared file %s of the chain of capture %d is gone", f.name, c.seq)
			}
		}
		f, err := c.writeFile(sw.Write, false, c.before, "own.delta")
		if err != nil {
			return nil, err
		}
		return c.manifest(append(slices.Clone(c.chainAt), f)), nil
	case outOfOrder:
		// As above, for frozen tables: a base of their own.
		f, err := c.writeFile(sw.Write, true, nil, "")
		if err != nil {
			return nil, err
		}
		return c.manifest([]chainFile{f}), nil
	case full && c.changes:
		inc.mu.Lock()
		inc.dropUnpersisted(c.seq)
		inc.mu.Unlock()
		return nil, errors.New("writing memory state: the chain must start again with a base, and this capture holds only the changes since the last checkpoint; the next checkpoint writes the state whole")
	case full || c.whole:
		f, err := c.writeFile(sw.Write, true, nil, "")
		if err != nil {
			return nil, err
		}
		inc.mu.Lock()
		inc.dropUnpersisted(c.seq)
		inc.chain, inc.lastSeq, inc.full = []chainFile{f}, c.seq, false
		inc.baseBytes, inc.deadBytes = f.size, 0
		inc.mu.Unlock()
		return c.manifest([]chainFile{f}), nil
	}
	if u := untrackedBefore(earlier); u != nil {
		// A whole capture after an untracked interval was not persisted
		// (it failed, or was discarded): this delta cannot hold what
		// changed before it.
		inc.mu.Lock()
		inc.full = true
		inc.dropUnpersisted(c.seq)
		inc.mu.Unlock()
		return nil, errUntracked(u.seq)
	}

	usedBase := false
	if newBase != nil {
		// Has pins the base for this checkpoint; false if a retention
		// collected it before any checkpoint listed it.
		if sw.Has(newBase.name) {
			rest := []chainFile{*newBase}
			deadBytes = 0
			for _, f := range chain {
				if f.seq > newBase.seq {
					rest = append(rest, f)
					deadBytes += f.dead
				}
			}
			chain, baseBytes = rest, newBase.size
		}
		usedBase = true
	}
	for _, f := range chain {
		if !sw.Has(f.name) {
			inc.mu.Lock()
			inc.full = true
			inc.mu.Unlock()
			return nil, fmt.Errorf("writing memory state: shared file %s of the checkpoint chain is gone; the next checkpoint writes the state whole", f.name)
		}
	}
	// A preemptive file that a retention collected before this
	// checkpoint could pin it ends the files listed: its changes and
	// those after it go into this delta.
	for i, f := range pre {
		if !sw.Has(f.name) {
			pre = pre[:i]
			break
		}
	}
	// The bytes and entries of this checkpoint's files.
	var written, writtenEntries int64
	for _, f := range pre {
		chain = append(chain, f)
		deadBytes += f.dead
		written += f.size
		writtenEntries += f.entries
	}
	earlier = earlier[len(pre):]
	changed := c.hasChanges(earlier)
	if changed {
		f, err := c.writeFile(sw.Write, false, earlier, "")
		if err != nil {
			return nil, err
		}
		chain = append(chain, f)
		deadBytes += f.dead
		written += f.size
		writtenEntries += f.entries
	}

	inc.mu.Lock()
	if usedBase && inc.matDone == newBase {
		inc.matDone = nil
	}
	inc.chain, inc.lastSeq = chain, c.seq
	inc.baseBytes, inc.deadBytes = baseBytes, deadBytes
	inc.dropUnpersisted(c.seq)
	// The chain's base, merged or written by a whole checkpoint, holds
	// the state's live bytes as of its capture; as many more now as the
	// tables hold more entries (a state that grows holds more than its
	// base). Without one, the entries tell (see wholeEntries).
	if len(chain) > 0 && written >= inc.minWhole && !inc.full {
		var churns bool
		if base := chain[0]; base.base && base.entries > 0 {
			live := float64(base.size) * max(1, float64(c.entries)/float64(base.entries))
			churns = float64(written) >= live
		} else {
			churns = writtenEntries >= wholeEntries*c.entries
		}
		if churns {
			inc.whole, inc.wholeLeft = true, wholeBases
		}
	}
	due := deadBytes > max(inc.materializeBytes, materializeRatio*baseBytes) || len(chain) > maxChainFiles
	switch {
	case inc.whole || inc.matRunning || inc.matDone != nil || inc.closing.Load() || !due:
	default:
		inc.matRunning = true
		inc.wg.Add(1)
		go c.b.compact(sw, slices.Clone(chain), c.seq, c.expiry)
	}
	inc.mu.Unlock()
	return c.manifest(chain), nil
}

// compact writes a base of the chain's state as of capture seq, merged
// from its files, for a later checkpoint to list in place of them. The
// tables are not frozen for it: a base of them would make the next write
// to each of their shards copy it, every shard at once. It runs on its own
// goroutine, one key group at a time (the job keeps the other core), which
// the backend's Close waits for. The entries of tables with a TTL that
// expired by the capture (expiry) are left out, as a base of the tables
// would leave them out.
func (b *MemoryBackend) compact(sw SharedWriter, chain []chainFile, seq uint64, expiry map[string]expiryAt) {
	inc := b.inc
	defer inc.wg.Done()
	f, err := b.writeCompacted(sw, chain, seq, expiry)
	inc.mu.Lock()
	defer inc.mu.Unlock()
	inc.matRunning = false
	switch {
	case inc.closing.Load():
	case err != nil && !chainListed(inc.chain, chain):
		// The chain was started anew meanwhile (and its files may be
		// collected): the base is not needed.
	case err != nil:
		inc.matErr = err
	default:
		inc.matDone = &f
	}
}

// chainListed reports whether every file of sub is in chain.
func chainListed(chain, sub []chainFile) bool {
	for _, f := range sub {
		if !slices.ContainsFunc(chain, func(c chainFile) bool { return c.name == f.name }) {
			return false
		}
	}
	return true
}

// writeCompacted writes the base compact makes.
func (b *MemoryBackend) writeCompacted(sw SharedWriter, chain []chainFile, seq uint64, expiry map[string]expiryAt) (f chainFile, err error) {
	inc := b.inc
	maps := &fileMaps{}
	defer func() {
		if rerr := maps.release(); err == nil && rerr != nil {
			err = rerr
		}
	}()
	l := &chainLoader{sf: sw, maxParallelism: b.maxParallelism, maps: maps}
	// Named apart from the bases of captures (writeFile), which may
	// have the same seq.
	f = chainFile{name: fmt.Sprintf("mem-%s-%d.merged.base", inc.token, seq), base: true, applies: b.rng, seq: seq}
	err = writeChainFile(sw.WriteUnpinned, &f, func(fw *fileWriter) error {
		var data []byte
		for kg := b.rng.Start; kg < b.rng.End && fw.err == nil; kg++ {
			if inc.closing.Load() {
				return errClosing
			}
			tables, err := l.mergeKeyGroup(chain, kg)
			if err != nil {
				return err
			}
			for _, t := range tables {
				es := t.entries
				if x, ok := expiry[t.name]; ok {
					es = slices.DeleteFunc(es, func(e mergedEntry) bool { return x.expired(e.w) })
				}
				if len(es) == 0 {
					continue
				}
				data = appendEntriesDelimited(data[:0], es)
				fw.writeSection(kg, t.name, len(es), data)
			}
		}
		return nil
	})
	return f, err
}

// Discard implements the runtime's discard of a capture that will not be
// persisted: its changes go into the next delta, so there is nothing to
// do, unless the tables recorded none before it (untracked): then no
// delta can hold them, and the next checkpoint writes a base.
func (c *incrCapture) Discard() error {
	if c.untracked {
		inc := c.b.inc
		inc.mu.Lock()
		inc.full = true
		inc.mu.Unlock()
	}
	return nil
}

func (c *incrCapture) hasChanges(earlier []*incrCapture) bool {
	for _, e := range append(earlier, c) {
		for _, f := range e.frozen {
			if ct, ok := f.(changeTable); ok && ct.hasChanges() {
				return true
			}
		}
	}
	return false
}

func (c *incrCapture) manifest(chain []chainFile) *FileState {
	fs := &FileState{Named: []NamedData{{Name: ChainManifestName, Data: appendManifest(nil, c.b.maxParallelism, c.rng, chain)}}}
	for _, f := range chain {
		if !slices.Contains(fs.Shared, f.name) {
			fs.Shared = append(fs.Shared, f.name)
		}
	}
	return fs
}

// errClosing stops a materialization when the backend closes.
var errClosing = errors.New("the state backend is closing")

// writeFile writes a base (every live entry of c) or a delta (the changes
// of the earlier captures and c) through write and returns its chain
// entry. suffix, if not empty, replaces the name's "base" or "delta".
func (c *incrCapture) writeFile(write func(string, func(io.Writer) error) error, base bool, earlier []*incrCapture, suffix string) (chainFile, error) {
	inc := c.b.inc
	if suffix == "" {
		suffix = "delta"
	}
	if base {
		suffix = "base"
	}
	f := chainFile{name: fmt.Sprintf("mem-%s-%d.%s", inc.token, c.seq, suffix), base: base, applies: c.rng, seq: c.seq}
	// The captures of the same table in the earlier captures.
	var before [][]changeTable
	if !base {
		before = make([][]changeTable, len(c.frozen))
		for i, name := range c.names {
			for _, e := range earlier {
				if j := slices.Index(e.names, name); j >= 0 {
					if ct, ok := e.frozen[j].(changeTable); ok {
						before[i] = append(before[i], ct)
					}
				}
			}
		}
	}
	err := writeChainFile(write, &f, func(fw *fileWriter) error {
		var scratch []byte
		tables := c.frozen
		for kg := c.rng.Start; kg < c.rng.End && fw.err == nil; kg++ {
			if base && inc.closing.Load() {
				return errClosing
			}
			for i, fr := range tables {
				ct, ok := fr.(changeTable)
				if !ok {
					return fmt.Errorf("state %q does not record changes", c.names[i])
				}
				var n int
				if base {
					scratch, n = ct.appendDelimited(scratch[:0], kg)
				} else {
					var dead int64
					scratch, n, dead = ct.appendChanges(scratch[:0], kg, before[i])
					f.dead += dead
				}
				if n > 0 {
					fw.writeSection(kg, c.names[i], n, scratch)
				}
			}
			if base {
				for i, p := range c.pending {
					for _, g := range c.delimited[i] {
						if g.kg == kg {
							fw.writeSection(kg, p.name, g.entries, g.data)
						}
					}
				}
			}
		}
		return nil
	})
	return f, err
}

// writeChainFile writes the chain file f through write: its magic and
// kind, the sections body writes, and the CRC; it sets f.size. An error
// names the file, and f is then the zero chainFile.
func writeChainFile(write func(string, func(io.Writer) error) error, f *chainFile, body func(fw *fileWriter) error) error {
	kind := byte(kindDelta)
	if f.base {
		kind = kindBase
	}
	err := write(f.name, func(w io.Writer) error {
		fw := &fileWriter{w: w}
		fw.write(append([]byte(fileMagic), kind))
		if err := body(fw); err != nil {
			return err
		}
		fw.write(binary.LittleEndian.AppendUint32(nil, fw.crc))
		f.size, f.entries = fw.n, fw.entries
		return fw.err
	})
	if err != nil {
		err = fmt.Errorf("writing memory state file %s: %w", f.name, err)
		*f = chainFile{}
	}
	return err
}

// fileWriter writes to w, keeping the first error, the CRC, the size and
// the entries of the sections written.
type fileWriter struct {
	w       io.Writer
	crc     uint32
	n       int64
	entries int64
	err     error
	// head is the room of a section's header.
	head []byte
}

// writeSection writes the section of table name in key group kg, its n
// entries delimited in data: the header, then data as it is (a state's
// sections run to megabytes, not copied once more behind a header).
func (fw *fileWriter) writeSection(kg int, name string, n int, data []byte) {
	h := binary.AppendUvarint(fw.head[:0], uint64(kg))
	h = binary.AppendUvarint(h, uint64(len(name)))
	h = append(h, name...)
	h = binary.AppendUvarint(h, uint64(n))
	h = binary.AppendUvarint(h, uint64(len(data)))
	fw.head = h
	fw.write(h)
	fw.write(data)
	fw.entries += int64(n)
}

func (fw *fileWriter) write(p []byte) {
	if fw.err != nil {
		return
	}
	fw.crc = crc32.Update(fw.crc, castagnoli, p)
	_, fw.err = fw.w.Write(p)
	fw.n += int64(len(p))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A chain file is
//
//	magic    "clink-mem1"
//	kind     1 byte: 'B' base, 'D' delta
//	sections one per key group and table that has entries:
//	           uvarint key group, uvarint length + table name,
//	           uvarint entries, uvarint length + delimited entries
//	crc      4 bytes little endian, CRC-32C of everything before
const (
	fileMagic = "clink-mem1"
	kindBase  = 'B'
	kindDelta = 'D'
)

// fileSection is one section of a chain file.
type fileSection struct {
	kg      int
	name    string
	entries int
	data    []byte
}

// parseChainFile checks a chain file and returns its kind and sections,
// which point into data.
func parseChainFile(name string, data []byte, maxParallelism int) (base bool, secs []fileSection, err error) {
	if len(data) < len(fileMagic)+1+4 || string(data[:len(fileMagic)]) != fileMagic {
		return false, nil, fmt.Errorf("memory state file %s: not a chain file", name)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return false, nil, fmt.Errorf("memory state file %s: checksum mismatch (corrupt or cut short)", name)
	}
	switch body[len(fileMagic)] {
	case kindBase:
		base = true
	case kindDelta:
	default:
		return false, nil, fmt.Errorf("memory state file %s: unknown kind %q", name, body[len(fileMagic)])
	}
	b := body[len(fileMagic)+1:]
	for len(b) > 0 {
		kg, n := binary.Uvarint(b)
		if n <= 0 || kg >= uint64(maxParallelism) {
			return false, nil, fmt.Errorf("memory state file %s: bad key group in a section (max parallelism %d)", name, maxParallelism)
		}
		b = b[n:]
		// The rest of a section is as in key-group data: read one.
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return false, nil, fmt.Errorf("memory state file %s: key group %d: table name is truncated", name, kg)
		}
		end := n + int(l)
		e, m := binary.Uvarint(b[end:])
		if m <= 0 {
			return false, nil, fmt.Errorf("memory state file %s: key group %d: bad entry count", name, kg)
		}
		end += m
		dl, m := binary.Uvarint(b[end:])
		if m <= 0 || dl > uint64(len(b)-end-m) {
			return false, nil, fmt.Errorf("memory state file %s: key group %d: data is truncated", name, kg)
		}
		end += m
		if e > dl {
			return false, nil, fmt.Errorf("memory state file %s: key group %d: %d entries in %d bytes", name, kg, e, dl)
		}
		secs = append(secs, fileSection{kg: int(kg), name: string(b[n : n+int(l)]), entries: int(e), data: b[end : end+int(dl)]})
		b = b[end+int(dl):]
	}
	return base, secs, nil
}

// The manifest (ChainManifestName) is
//
//	version  1 byte, 1
//	uvarint  max parallelism, key-group range start, end
//	uvarint  files, then per file: uvarint length + name, 1 byte kind
//	         ('B' or 'D'), uvarint range start, end it applies to,
//	         uvarint size
const manifestVersion = 1

func appendManifest(dst []byte, maxParallelism int, rng KeyGroupRange, chain []chainFile) []byte {
	dst = append(dst, manifestVersion)
	dst = binary.AppendUvarint(dst, uint64(maxParallelism))
	dst = binary.AppendUvarint(dst, uint64(rng.Start))
	dst = binary.AppendUvarint(dst, uint64(rng.End))
	dst = binary.AppendUvarint(dst, uint64(len(chain)))
	for _, f := range chain {
		dst = binary.AppendUvarint(dst, uint64(len(f.name)))
		dst = append(dst, f.name...)
		if f.base {
			dst = append(dst, kindBase)
		} else {
			dst = append(dst, kindDelta)
		}
		dst = binary.AppendUvarint(dst, uint64(f.applies.Start))
		dst = binary.AppendUvarint(dst, uint64(f.applies.End))
		dst = binary.AppendUvarint(dst, uint64(f.size))
	}
	return dst
}

// chainManifest is a decoded manifest.
type chainManifest struct {
	maxParallelism int
	rng            KeyGroupRange
	files          []chainFile
}

func parseManifest(b []byte) (*chainManifest, error) {
	bad := func(what string) error { return fmt.Errorf("memory state manifest: %s", what) }
	if len(b) == 0 || b[0] != manifestVersion {
		return nil, bad("unknown version")
	}
	b = b[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	mp, ok1 := next()
	start, ok2 := next()
	end, ok3 := next()
	if !ok1 || !ok2 || !ok3 || mp < 1 || mp > MaxMaxParallelism || start > end || end > mp {
		return nil, bad("bad key-group range")
	}
	m := &chainManifest{maxParallelism: int(mp), rng: KeyGroupRange{Start: int(start), End: int(end)}}
	count, ok := next()
	if !ok || count > uint64(len(b)) {
		return nil, bad("bad file count")
	}
	for range count {
		l, ok := next()
		if !ok || l == 0 || l > uint64(len(b)) {
			return nil, bad("file name is truncated")
		}
		f := chainFile{name: string(b[:l])}
		b = b[l:]
		if len(b) == 0 || (b[0] != kindBase && b[0] != kindDelta) {
			return nil, bad(fmt.Sprintf("file %s: bad kind", f.name))
		}
		f.base = b[0] == kindBase
		b = b[1:]
		s, ok1 := next()
		e, ok2 := next()
		size, ok3 := next()
		if !ok1 || !ok2 || !ok3 || s > e || e > mp || size > 1<<62 {
			return nil, bad(fmt.Sprintf("file %s: bad key-group range or size", f.name))
		}
		f.applies, f.size = KeyGroupRange{Start: int(s), End: int(e)}, int64(size)
		m.files = append(m.files, f)
	}
	if len(b) != 0 {
		return nil, bad(fmt.Sprintf("%d bytes after the file list", len(b)))
	}
	return m, nil
}

// manifestOf returns the chain manifest in fs, or nil if fs has none.
func manifestOf(fs *FileState) (*chainManifest, error) {
	for _, n := range fs.Named {
		if n.Name == ChainManifestName {
			return parseManifest(n.Data)
		}
	}
	return nil, nil
}

// mergedTable is the merged state of one table in one key group. A table
// decodes its entries when it registers (restoredGroup); a capture before
// then writes them delimited.
type mergedTable struct {
	name    string
	entries []mergedEntry
	// lazy, if not nil, holds the merge not done yet in place of entries
	// (see chainMerge).
	lazy *chainMerge
}

// mergedEntry is one entry of a merged table, a put: key and value point
// into a chain file's bytes, or the value into a buffer of the merge that
// applied edits to it. A merge copies no other bytes.
type mergedEntry struct {
	key, value []byte
	w          int64
}

// appendEntriesData appends entries as FrozenTable.AppendGroup encodes
// them.
func appendEntriesData(dst []byte, entries []mergedEntry) []byte {
	for _, e := range entries {
		dst = append(dst, e.key...)
		dst = append(dst, e.value...)
		dst = binary.AppendVarint(dst, e.w)
	}
	return dst
}

// appendEntriesDelimited appends entries delimited, as put entries.
func appendEntriesDelimited(dst []byte, entries []mergedEntry) []byte {
	for _, e := range entries {
		dst = appendPutEntry(dst, e.key, e.value, e.w)
	}
	return dst
}

// parseMerged returns the n put entries delimited in b, pointing into it.
func parseMerged(n int, b []byte) ([]mergedEntry, error) {
	out := make([]mergedEntry, 0, min(n, len(b)))
	for i := 0; i < n; i++ {
		e, l, err := nextEntry(b)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if e.del || e.splice {
			return nil, fmt.Errorf("entry %d: not a put", i)
		}
		out = append(out, mergedEntry{key: e.key, value: e.value, w: e.w})
		b = b[l:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes left after %d entries", len(b), n)
	}
	return out, nil
}

// loadedFile is a read and parsed chain file.
type loadedFile struct {
	base bool
	byKG map[int][]fileSection
}

// chainLoader reads the files of chains once each. Its methods may be
// called concurrently.
type chainLoader struct {
	sf             SharedFiles
	maxParallelism int
	// maps keeps the files mapFile mapped until the loader's owner
	// releases them.
	maps *fileMaps
	// lazy: a key group's merges may be left to the tables (chainMerge).
	lazy  bool
	mu    sync.Mutex
	files map[string]*loadedFile
}

// fileMaps holds the chain files a restore mapped until nothing points
// into their bytes any more. Its methods may be called concurrently.
type fileMaps struct {
	mu   sync.Mutex
	maps [][]byte
}

// add keeps data mapped until release.
func (m *fileMaps) add(data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.maps = append(m.maps, data)
}

// release unmaps the files: nothing may read their bytes after it.
func (m *fileMaps) release() error {
	m.mu.Lock()
	maps := m.maps
	m.maps = nil
	m.mu.Unlock()
	var errs []error
	for _, data := range maps {
		if err := unmapFile(data); err != nil {
			errs = append(errs, fmt.Errorf("unmapping a memory state file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// load returns the file name, read and parsed the first time it is asked
// for (two goroutines asking for it at once may both read it).
func (l *chainLoader) load(name string) (*loadedFile, error) {
	l.mu.Lock()
	f := l.files[name]
	l.mu.Unlock()
	if f != nil {
		return f, nil
	}
	f, err := l.read(name)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.files == nil {
		l.files = map[string]*loadedFile{}
	}
	l.files[name] = f
	return f, nil
}

func (l *chainLoader) read(name string) (*loadedFile, error) {
	p, err := l.sf.Path(name)
	if err != nil {
		return nil, err
	}
	data, mapped, err := mapFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading memory state file: %w", err)
	}
	base, secs, err := parseChainFile(name, data, l.maxParallelism)
	if err != nil {
		if mapped {
			_ = unmapFile(data)
		}
		return nil, err
	}
	if mapped {
		l.maps.add(data)
	}
	f := &loadedFile{base: base, byKG: map[int][]fileSection{}}
	for _, s := range secs {
		f.byKG[s.kg] = append(f.byKG[s.kg], s)
	}
	return f, nil
}

// preload loads the files of chain that apply to a key group of rng, on
// up to workers goroutines at once.
func (l *chainLoader) preload(chain []chainFile, rng KeyGroupRange, workers int) error {
	var names []string
	seen := map[string]bool{}
	for _, cf := range chain {
		if a := intersect(cf.applies, rng); a.Start < a.End && !seen[cf.name] {
			seen[cf.name] = true
			names = append(names, cf.name)
		}
	}
	return forEach(len(names), workers, func(i int) error {
		_, err := l.load(names[i])
		return err
	})
}

// mergeRange merges the key groups of rng under chain, on up to workers
// goroutines at once: a key group's merge reads the loaded files only, and
// the two cores a restore usually has would otherwise wait for one.
func (l *chainLoader) mergeRange(chain []chainFile, rng KeyGroupRange, workers int) ([][]mergedTable, error) {
	if err := l.preload(chain, rng, workers); err != nil {
		return nil, err
	}
	merged := make([][]mergedTable, rng.End-rng.Start)
	err := forEach(len(merged), workers, func(i int) error {
		tables, err := l.mergeKeyGroup(chain, rng.Start+i)
		merged[i] = tables
		return err
	})
	return merged, err
}

// forEach calls f(i) for each i in [0, n), on up to workers goroutines at
// once, and returns the error of the lowest i whose call failed. After a
// failure it starts no more calls. A panic in f is returned as an error.
func forEach(n, workers int, f func(i int) error) error {
	errs := make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	call := func(i int) {
		defer func() {
			if r := recover(); r != nil {
				errs[i] = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
				if se, ok := r.(*StoreError); ok {
					errs[i] = se
				}
				failed.Store(true)
			}
		}()
		if errs[i] = f(i); errs[i] != nil {
			failed.Store(true)
		}
	}
	var wg sync.WaitGroup
	for range min(max(workers, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				call(i)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// mergeKeyGroup returns the state of key group kg under chain: the last
// base that applies to it, then the deltas after it in order.
func (l *chainLoader) mergeKeyGroup(chain []chainFile, kg int) ([]mergedTable, error) {
	var files []*loadedFile
	for _, cf := range chain {
		if !cf.applies.Contains(kg) {
			continue
		}
		f, err := l.load(cf.name)
		if err != nil {
			return nil, err
		}
		if f.base != cf.base {
			return nil, fmt.Errorf("memory state file %s: the manifest and the file disagree on its kind", cf.name)
		}
		if f.base {
			files = files[:0]
		}
		files = append(files, f)
	}
	var order []string
	secs := map[string][]fileSection{}
	for _, f := range files {
		for _, s := range f.byKG[kg] {
			if _, ok := secs[s.name]; !ok {
				order = append(order, s.name)
			}
			secs[s.name] = append(secs[s.name], s)
		}
	}
	var out []mergedTable
	for _, name := range order {
		ss := secs[name]
		// A section that begins with a reset starts the table's entries
		// of this key group anew.
		for i := len(ss) - 1; i >= 0; i-- {
			if s := ss[i]; s.entries > 0 && len(s.data) > 0 && s.data[0] == opReset {
				s.entries, s.data = s.entries-1, s.data[1:]
				ss = append([]fileSection{s}, ss[i+1:]...)
				break
			}
		}
		c, err := collectChanges(kg, name, ss)
		if err != nil {
			return nil, err
		}
		// A table sizes its shard for bound(): with at most half as many
		// puts as the base has entries, it is at most half again too
		// large should every put write a key of the base again.
		if l.lazy && c.puts <= c.base.entries/2 {
			if c.bound() > 0 {
				out = append(out, mergedTable{name: name, lazy: c})
			}
			continue
		}
		es, err := c.entries()
		if err != nil {
			return nil, err
		}
		if len(es) > 0 {
			out = append(out, mergedTable{name: name, entries: es})
		}
	}
	return out, nil
}

// delimitedEntry is one decoded delimited entry; its slices point into the
// file.
type delimitedEntry struct {
	del bool
	// splice: value holds edits of the key's earlier value (opSplice).
	splice bool
	key    []byte
	value  []byte
	w      int64
	// edited: value is a buffer of the merge that applied edits to it,
	// which later edits may change in place (editValue); a value in the
	// file's bytes is copied first.
	edited bool
}

// nextEntry decodes the delimited entry at the front of b.
func nextEntry(b []byte) (delimitedEntry, int, error) {
	if len(b) == 0 {
		return delimitedEntry{}, 0, ErrShortBuffer
	}
	var e delimitedEntry
	switch b[0] {
	case opDelete:
		e.del = true
	case opPut:
		ks, ke, vs, ve, w, n, ok := putFields(b)
		if !ok {
			return e, 0, ErrShortBuffer
		}
		return delimitedEntry{key: b[ks:ke:ke], value: b[vs:ve:ve], w: w}, n, nil
	case opSplice:
		e.splice = true
	case opReset:
		return e, 0, errors.New("a reset entry after the first")
	default:
		return e, 0, fmt.Errorf("unknown entry kind %d", b[0])
	}
	p := 1
	field := func() ([]byte, error) {
		l, n := binary.Uvarint(b[p:])
		if n <= 0 || l > uint64(len(b)-p-n) {
			return nil, ErrShortBuffer
		}
		p += n
		// Capped, so that an append to a value a codec kept (against
		// Codec's rule) cannot write over the bytes after it.
		f := b[p : p+int(l) : p+int(l)]
		p += int(l)
		return f, nil
	}
	var err error
	if e.key, err = field(); err != nil {
		return e, 0, err
	}
	if !e.del {
		if e.value, err = field(); err != nil {
			return e, 0, err
		}
		w, n := binary.Varint(b[p:])
		if n <= 0 {
			return e, 0, ErrShortBuffer
		}
		e.w = w
		p += n
	}
	return e, p, nil
}

// putFields decodes the put entry at the front of b (b[0] is opPut) as
// offsets into b: its key is b[ks:ke], its value b[vs:ve], its write time
// w, and it takes n bytes; ok is false if b is too short. Its results fit
// in registers, so a loop over a base's puts (eachBase) calls it rather
// than nextEntry, which decodes any entry. Keys and values are capped
// slices, so that an append to a value a codec kept (against Codec's rule)
// cannot write over the bytes after it.
func putFields(b []byte) (ks, ke, vs, ve int, w int64, n int, ok bool) {
	l, m := binary.Uvarint(b[1:])
	if m <= 0 || l > uint64(len(b)-1-m) {
		return 0, 0, 0, 0, 0, 0, false
	}
	ks = 1 + m
	ke = ks + int(l)
	l, m = binary.Uvarint(b[ke:])
	if m <= 0 || l > uint64(len(b)-ke-m) {
		return 0, 0, 0, 0, 0, 0, false
	}
	vs = ke + m
	ve = vs + int(l)
	w, m = binary.Varint(b[ve:])
	if m <= 0 {
		return 0, 0, 0, 0, 0, 0, false
	}
	return ks, ke, vs, ve, w, ve + m, true
}

// appendPutEntry appends the delimited put entry of key k with value v and
// write time w.
func appendPutEntry(dst, k, v []byte, w int64) []byte {
	dst = append(dst, opPut)
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	dst = append(dst, v...)
	return binary.AppendVarint(dst, w)
}

// eachEntry calls f for the entries of a section.
func eachEntry(kg int, s fileSection, f func(delimitedEntry)) error {
	b := s.data
	for i := 0; i < s.entries; i++ {
		e, n, err := nextEntry(b)
		if err != nil {
			return fmt.Errorf("key group %d, table %q, entry %d: %w", kg, s.name, i, err)
		}
		f(e)
		b = b[n:]
	}
	if len(b) != 0 {
		return fmt.Errorf("key group %d, table %q: %d bytes left after %d entries", kg, s.name, len(b), s.entries)
	}
	return nil
}

// keyString returns key as a string without copying it: for the keys of
// a merge's maps, which point into a loaded file's bytes that nothing
// writes (edits write only copies of values, editValue) and that outlive
// the maps.
func keyString(key []byte) string {
	return unsafe.String(unsafe.SliceData(key), len(key))
}

// chainMerge is the merge of the sections of one table and key group,
// oldest first, in which a later entry of a key replaces an earlier one:
// the first section (base), then the others (deltas). entries returns the
// merged entries. A table restoring it may instead replay it: take the
// base's entries, then the deltas' in order, writing a key it holds again
// as it does any write and deleting what a delta deletes. With deltas
// that mostly insert, as a table growing between checkpoints writes them,
// that skips looking up every entry of the base among the changes, and
// where no delta edits a value (opSplice), indexing the deltas' entries at
// all. The merge then keeps the sections' bytes until the table is
// restored.
type chainMerge struct {
	kg     int
	name   string
	base   fileSection
	deltas []fileSection
	// indexed: latest indexes the last change of each key of the deltas,
	// in changes, edits applied (index). A merge whose deltas edit
	// values is indexed from the start; others when entries is called.
	indexed bool
	latest  map[string]int
	changes []delimitedEntry
	// puts and dels count the changes of each kind: indexed, the keys
	// whose last change is a put or a delete; else the deltas' entries of
	// each kind, a key written twice counted twice.
	puts, dels int
}

// collectChanges checks the entries of the sections after the first and
// counts them; if one edits a value, it indexes them (index).
func collectChanges(kg int, name string, secs []fileSection) (*chainMerge, error) {
	c := &chainMerge{kg: kg, name: name, base: secs[0], deltas: secs[1:]}
	splices := false
	for _, s := range c.deltas {
		if err := eachEntry(kg, s, func(e delimitedEntry) {
			switch {
			case e.splice:
				splices = true
			case e.del:
				c.dels++
			default:
				c.puts++
			}
		}); err != nil {
			return nil, err
		}
	}
	if splices {
		if err := c.index(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// index indexes the last entry of each key in the deltas: edits are
// applied onto the key's value before them, from the deltas or the base
// (indexed on the first edit). The index and change list are sized for
// every entry of the deltas, so that neither grows as it fills: exact for
// a chain that mostly inserts, and otherwise a few words per entry of one
// key group's sections, whose bytes are in memory anyway, for the length
// of its merge.
func (c *chainMerge) index() error {
	if c.indexed {
		return nil
	}
	n := 0
	for _, s := range c.deltas {
		n += s.entries
	}
	kg, name := c.kg, c.name
	latest := make(map[string]int, n)
	changes := makeFaulted[delimitedEntry](n)[:0]
	var base map[string]delimitedEntry
	var failed error
	for si, s := range c.deltas {
		i := 0
		err := eachEntry(kg, s, func(e delimitedEntry) {
			defer func() { i++ }()
			if failed != nil {
				return
			}
			if e.splice {
				var before delimitedEntry
				var had bool
				if j, ok := latest[keyString(e.key)]; ok {
					before, had = changes[j], true
				} else {
					if base == nil {
						base = make(map[string]delimitedEntry, c.base.entries)
						failed = eachEntry(kg, c.base, func(b delimitedEntry) { base[keyString(b.key)] = b })
						if failed != nil {
							return
						}
					}
					before, had = base[keyString(e.key)]
				}
				if !had || before.del {
					failed = fmt.Errorf("key group %d, table %q, section %d, entry %d: edits of a value the chain does not hold", kg, name, si+1, i)
					return
				}
				v, err := editValue(before.value, before.edited, e.value)
				if err != nil {
					failed = fmt.Errorf("key group %d, table %q, section %d, entry %d: %w", kg, name, si+1, i, err)
					return
				}
				e = delimitedEntry{key: e.key, value: v, w: e.w, edited: true}
			}
			k := keyString(e.key)
			if j, ok := latest[k]; ok {
				changes[j] = e
				return
			}
			latest[k] = len(changes)
			changes = append(changes, e)
		})
		if err == nil {
			err = failed
		}
		if err != nil {
			return err
		}
	}
	c.indexed, c.latest, c.changes = true, latest, changes
	c.puts, c.dels = 0, 0
	for _, e := range changes {
		if e.del {
			c.dels++
		} else {
			c.puts++
		}
	}
	return nil
}

// bound is at least the number of merged entries, and the number of puts
// replay makes.
func (c *chainMerge) bound() int { return c.base.entries + c.puts }

// entries returns the merged entries: the base's that no change replaced,
// then the changes' puts.
func (c *chainMerge) entries() ([]mergedEntry, error) {
	if err := c.index(); err != nil {
		return nil, err
	}
	es := makeFaulted[mergedEntry](c.bound())[:0]
	// A delta first in its chain may delete keys the state never had, but
	// not edit their values.
	err := c.eachBase(func(e delimitedEntry) error {
		if _, changed := c.latest[keyString(e.key)]; !changed {
			es = append(es, mergedEntry{key: e.key, value: e.value, w: e.w})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, e := range c.changes {
		if !e.del {
			es = append(es, mergedEntry{key: e.key, value: e.value, w: e.w})
		}
	}
	return es, nil
}

// replay calls put with the base's puts, which name each key once, then
// baseDone, then put and del with the deltas' entries in their order: put
// for a put, del for a delete (of a key the puts before may or may not
// have written). A key may come twice after baseDone; the last call for
// it is its merged state. An indexed merge calls put with the base's puts
// whose key no change deletes, then baseDone, then put with the changes'
// puts, and never calls del.
func (c *chainMerge) replay(put func(key, value []byte, w int64) error, del func(key []byte) error, baseDone func()) error {
	err := c.eachBase(func(e delimitedEntry) error {
		if c.indexed && c.dels > 0 {
			if j, ok := c.latest[keyString(e.key)]; ok && c.changes[j].del {
				return nil
			}
		}
		return put(e.key, e.value, e.w)
	})
	if err != nil {
		return err
	}
	baseDone()
	if c.indexed {
		for _, e := range c.changes {
			if !e.del {
				if err := put(e.key, e.value, e.w); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var failed error
	for _, s := range c.deltas {
		if err := eachEntry(c.kg, s, func(e delimitedEntry) {
			if failed != nil {
				return
			}
			if e.del {
				failed = del(e.key)
			} else {
				failed = put(e.key, e.value, e.w)
			}
		}); err != nil {
			return err
		}
		if failed != nil {
			return failed
		}
	}
	return nil
}

// eachBase calls f with the base's puts, refusing edits (which a base
// cannot hold: there is no value before it to edit).
func (c *chainMerge) eachBase(f func(delimitedEntry) error) error {
	b := c.base.data
	for i := 0; i < c.base.entries; i++ {
		if len(b) > 0 && b[0] == opPut {
			// A put, decoded in place: most entries of a base are.
			ks, ke, vs, ve, w, n, ok := putFields(b)
			if !ok {
				return fmt.Errorf("key group %d, table %q, entry %d: %w", c.kg, c.name, i, ErrShortBuffer)
			}
			if err := f(delimitedEntry{key: b[ks:ke:ke], value: b[vs:ve:ve], w: w}); err != nil {
				return err
			}
			b = b[n:]
			continue
		}
		e, n, err := nextEntry(b)
		if err != nil {
			return fmt.Errorf("key group %d, table %q, entry %d: %w", c.kg, c.name, i, err)
		}
		b = b[n:]
		if e.splice {
			return fmt.Errorf("key group %d, table %q: edits of a value the chain does not hold before them", c.kg, c.name)
		}
		if e.del {
			continue
		}
		if err := f(e); err != nil {
			return err
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("key group %d, table %q: %d bytes left after %d entries", c.kg, c.name, len(b), c.base.entries)
	}
	return nil
}

// ReadChain returns the key-group data (as Persist returns it) of a
// memory backend's incremental checkpoint, fs, whose files are in sf, and
// the job's number of key groups; ok is false if fs is not such a
// checkpoint. clink state-cat reads checkpoints with it.
func ReadChain(fs *FileState, sf SharedFiles) (groups []KeyGroupData, maxParallelism int, ok bool, err error) {
	m, err := manifestOf(fs)
	if err != nil || m == nil {
		return nil, 0, false, err
	}
	// The merged tables are encoded anew (mergedKeyGroup): nothing
	// returned points into the files, which are mapped only here.
	maps := &fileMaps{}
	defer func() {
		if rerr := maps.release(); err == nil && rerr != nil {
			groups, err = nil, rerr
		}
	}()
	l := &chainLoader{sf: sf, maxParallelism: m.maxParallelism, maps: maps}
	for kg := m.rng.Start; kg < m.rng.End; kg++ {
		tables, err := l.mergeKeyGroup(m.files, kg)
		if err != nil {
			return nil, 0, true, err
		}
		if g, ok := mergedKeyGroup(kg, tables); ok {
			groups = append(groups, g)
		}
	}
	return groups, m.maxParallelism, true, nil
}

// mergedKeyGroup encodes merged tables as key-group data.
func mergedKeyGroup(kg int, tables []mergedTable) (KeyGroupData, bool) {
	g := KeyGroupData{KeyGroup: kg}
	var data []byte
	for _, t := range tables {
		data = appendEntriesData(data[:0], t.entries)
		g.Data = appendSection(g.Data, t.name, len(t.entries), data)
		g.Entries += len(t.entries)
	}
	return g, g.Entries > 0
}

// RestoreFiles implements FileRestorer: it restores the key groups in the
// backend's range from the snapshots of old subtasks, each either an
// incremental checkpoint (a chain manifest) or key-group data. With
// incremental checkpoints on, the restored chains become the backend's, so
// that the next checkpoint writes only a delta.
func (b *MemoryBackend) RestoreFiles(snaps []*FileState, sf SharedFiles) error {
	var inline [][]KeyGroupData
	var chain []chainFile
	// The files stay mapped while merged entries of tables not
	// registered yet point into them: until the next capture (Capture)
	// or Close.
	l := &chainLoader{sf: sf, maxParallelism: b.maxParallelism, maps: &b.maps, lazy: true}
	for _, fs := range snaps {
		m, err := manifestOf(fs)
		if err != nil {
			return fmt.Errorf("restoring memory state: %w", err)
		}
		if m == nil {
			if len(fs.Named) > 0 {
				return errors.New("restoring memory state: the snapshot holds files of another state backend")
			}
			inline = append(inline, fs.KeyGroups)
			continue
		}
		if m.maxParallelism != b.maxParallelism {
			return fmt.Errorf("restoring memory state: the checkpoint has %d key groups, the job %d (the max parallelism changed)", m.maxParallelism, b.maxParallelism)
		}
		rng := intersect(m.rng, b.rng)
		for _, f := range m.files {
			f.applies = intersect(f.applies, rng)
			if f.applies.Start < f.applies.End {
				chain = append(chain, f)
			}
		}
		merged, err := l.mergeRange(m.files, rng, restoreWorkers())
		if err != nil {
			return fmt.Errorf("restoring memory state: %w", err)
		}
		for i, tables := range merged {
			if err := b.restoreMerged(rng.Start+i, tables); err != nil {
				return err
			}
		}
	}
	if err := b.Restore(inline); err != nil {
		return err
	}
	if b.inc != nil {
		inc := b.inc
		inc.mu.Lock()
		defer inc.mu.Unlock()
		if len(inline) > 0 {
			inc.full = true
			return nil
		}
		inc.chain = chain
		inc.baseBytes, inc.deadBytes = 0, 0
		for i, f := range chain {
			if f.base {
				inc.baseBytes += f.size
			} else {
				// What a delta made redundant is not in the manifest.
				chain[i].dead = f.size
				inc.deadBytes += f.size
			}
		}
	}
	return nil
}

func intersect(a, b KeyGroupRange) KeyGroupRange {
	r := KeyGroupRange{Start: max(a.Start, b.Start), End: min(a.End, b.End)}
	if r.End < r.Start {
		r.End = r.Start
	}
	return r
}

// restoreMerged loads merged tables of key group kg into the registered
// tables, or keeps them for tables registered later.
func (b *MemoryBackend) restoreMerged(kg int, tables []mergedTable) error {
	for _, m := range tables {
		g := restoredGroup{kg: kg, entries: len(m.entries), merged: m.entries}
		if m.lazy != nil {
			g = restoredGroup{kg: kg, entries: m.lazy.bound(), lazy: m.lazy}
		}
		if t := b.byName[m.name]; t != nil {
			if err := restoreGroups(t, []restoredGroup{g}); err != nil {
				return fmt.Errorf("restoring state %q: %w", m.name, err)
			}
			continue
		}
		b.restored[m.name] = append(b.restored[m.name], g)
	}
	return nil
}

// closeIncremental stops a materialization and waits for it.
func (b *MemoryBackend) closeIncremental() {
	if b.inc == nil {
		return
	}
	// Under mu, which PersistFiles holds while it checks closing and
	// starts a materialization (wg.Add): none starts after this, so Wait
	// never runs beside an Add.
	b.inc.mu.Lock()
	b.inc.closing.Store(true)
	b.inc.mu.Unlock()
	b.inc.wg.Wait()
}
