package state

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// Captures of changes. Once a backend with incremental checkpoints has a
// chain, a capture needs only what changed since the last one: its delta.
// Freezing the tables for that (Freeze) makes every key group that is
// written afterwards copy its slot arrays, which costs as much as the
// written key groups are large, every checkpoint interval; a table of a
// few large key groups (COUNT(DISTINCT) entries live in their group's key
// group) then copied most of itself each second, on the task goroutine.
// So such a capture copies, per table, the entries its change lists name
// (captureChanges, on the task goroutine: as much work as there were
// changes) and leaves the tables as they are. A capture freezes the
// tables only when a checkpoint needs every entry: the first one (no
// chain yet) and one that writes a base (after a restore from key-group
// data, or once the chain was lost); a materialization merges the chain's
// files instead (compact).

// changeCapturer is implemented by the tables that can capture their
// changes without freezing (cowTable).
type changeCapturer interface {
	Table
	// captureChanges copies the entries that changed since the last
	// capture and starts new change lists.
	captureChanges() FrozenTable
	// changedCount returns how many keys the change lists hold.
	changedCount() int
	// appends reports whether the table's changes are worth persisting
	// preemptively (yes), or only in the last part of a checkpoint
	// interval, its keys living shorter than one (late; see appends on
	// cowTable).
	appends() (yes, late bool)
	// checkpointed tells the table that a checkpoint captured it.
	checkpointed()
	// insertedSince returns how many keys the table inserted since the
	// last checkpoint's capture (insertsCaptured), tracking its changes
	// or not.
	insertedSince() int64
	// insertsCaptured notes a checkpoint's capture for insertedSince.
	insertsCaptured()
	// len returns how many entries the table holds.
	len() int
	// trackChanges starts (on) or stops the table's change lists: a
	// capture after an interval without them must freeze the tables for
	// a base.
	trackChanges(on bool)
}

// changedEntry is one entry a capture of changes holds: a listed key with
// its value as of the capture (present) or its deletion, and the value the
// key had before its first write after the capture before (old).
type changedEntry[K comparable, V any] struct {
	k       K
	v       V
	w       int64 // write time, 0 without TTL
	present bool
	old     oldValue[V]
}

// changedCow is a cowTable's capture of changes: per key group (index into
// the table's shards), the changed entries.
type changedCow[K comparable, V any] struct {
	t      *cowTable[K, V]
	groups []changeList[K, V]
}

// changeList is the changed entries of one key group in one capture. A
// reset list holds every live entry of the key group instead, replacing
// what the chain held (written after an opReset entry): a key group whose
// keys changed for the most part is copied whole, as a delta of frozen
// tables writes it, which also spares a deletion for every key that came
// and went in the interval.
//
// A reset list of a capture of changes holds no entries but the key
// group's arrays themselves (whole), shared with the table as a frozen
// table shares them: the first write after the capture copies them
// (cowTable.writable), so the capture costs the task nothing at the
// barrier, where copying the entries of a large key group took as long.
//
// The entries are held column by column: a key's value, write time and
// old value each in an array of their own, only the columns the table has
// (no write times without TTL, no old values without Differ), so that a
// capture allocates as little as it can, and values without pointers lie
// where the collector does not scan them.
type changeList[K comparable, V any] struct {
	keys   []K
	vals   []V
	ws     []int64       // write times, with TTL
	olds   []oldValue[V] // with old values
	absent []uint64      // bit i: keys[i] is deleted
	reset  bool
	whole  *kgTable[K, V]
	now    int64 // the capture's clock, for whole's expired entries
}

// size returns how many entries the list holds.
func (l *changeList[K, V]) size() int {
	if l.whole != nil {
		return l.whole.n
	}
	return len(l.keys)
}

// add appends e.
func (l *changeList[K, V]) add(e *changedEntry[K, V], ttl, olds bool) {
	i := len(l.keys)
	l.keys = append(l.keys, e.k)
	l.vals = append(l.vals, e.v)
	if ttl {
		l.ws = append(l.ws, e.w)
	}
	if olds {
		l.olds = append(l.olds, e.old)
	}
	if !e.present {
		for len(l.absent) <= i>>6 {
			l.absent = append(l.absent, 0)
		}
		l.absent[i>>6] |= 1 << (i & 63)
	}
}

// at returns entry i.
func (l *changeList[K, V]) at(i int) changedEntry[K, V] {
	e := changedEntry[K, V]{k: l.keys[i], v: l.vals[i], present: i>>6 >= len(l.absent) || l.absent[i>>6]&(1<<(i&63)) == 0}
	if l.ws != nil {
		e.w = l.ws[i]
	}
	if l.olds != nil {
		e.old = l.olds[i]
	}
	return e
}

// grown returns an empty list with room for n entries in the columns the
// table has.
func grown[K comparable, V any](n int, ttl, olds bool) changeList[K, V] {
	l := changeList[K, V]{keys: make([]K, 0, n), vals: make([]V, 0, n)}
	if ttl {
		l.ws = make([]int64, 0, n)
	}
	if olds {
		l.olds = make([]oldValue[V], 0, n)
	}
	return l
}

// eachWhole calls fn with every live entry of l.whole; fn must not keep
// the pointer.
func (l *changeList[K, V]) eachWhole(t *cowTable[K, V], fn func(*changedEntry[K, V])) {
	s := l.whole
	var e changedEntry[K, V] // one for all the calls, as in eachChanged
	for i := range s.slots {
		prefetchAheadOf(s.slots, i, t.refs)
		if !s.isUsed(i) {
			continue
		}
		e = changedEntry[K, V]{k: s.slots[i].k, v: s.slots[i].v, present: true}
		if t.ttl > 0 {
			if e.w = s.written[i]; l.now-e.w >= t.ttl {
				continue
			}
		}
		fn(&e)
	}
}

// each calls fn with every entry of the list, those of whole too; fn
// must not keep the pointer.
func (l *changeList[K, V]) each(t *cowTable[K, V], fn func(*changedEntry[K, V])) {
	if l.whole != nil {
		l.eachWhole(t, fn)
		return
	}
	var e changedEntry[K, V] // one for all the calls, as in eachChanged
	for i := range l.keys {
		prefetchAheadOf(l.vals, i, t.valueRefs)
		e = l.at(i)
		fn(&e)
	}
}

// captureChanges implements changeCapturer. Entries captured keep the
// table's values, which writes after it never change in place: a value
// changed in place is cloned first once the epoch moves on, and the slot
// arrays are written as they are (no capture holds them).
func (t *cowTable[K, V]) captureChanges() FrozenTable {
	t.finishRestore()
	d := &changedCow[K, V]{t: t, groups: make([]changeList[K, V], len(t.shards))}
	now := int64(0)
	if t.ttl > 0 {
		now = t.now()
	}
	for g := range t.shards {
		s := &t.shards[g]
		c := s.changes
		if c == nil || len(c.keys) == 0 {
			continue
		}
		d.groups[g] = t.copyChanged(s, c, now)
		once, again := c.writtenOnce()
		t.once.Add(once)
		t.again.Add(again)
		t.born += int64(c.inserted)
		c.restart()
	}
	t.lastSlot = nil
	t.epoch++
	return d
}

// copyChanged returns the entries of s that its change list c names, each
// key once: its first listing holds the value it had before the interval.
// Without old values, the deletions come first, then the slots whose bits
// say their keys are listed, in slot order, without a lookup; a key
// deleted and written again then has both, which apply in that order. A
// key group of which at least half the entries are listed (by the count
// of keys listed, deleted ones too) is captured whole instead (reset), its
// arrays shared.
func (t *cowTable[K, V]) copyChanged(s *kgTable[K, V], c *kgChanges[K, V], now int64) changeList[K, V] {
	ttl := t.ttl > 0
	if !c.withOlds && len(c.keys) >= 2*s.n {
		// Most keys listed came and went: the key group's few entries
		// say more than a deletion of each.
		whole := *s
		whole.changes = nil
		s.shared = true
		return changeList[K, V]{reset: true, whole: &whole, now: now}
	}
	if !c.withOlds {
		out := grown[K, V](len(c.keys)+len(c.deleted), ttl, false)
		for _, k := range c.deleted {
			out.add(&changedEntry[K, V]{k: k}, ttl, false)
		}
		for wi, w := range c.listed {
			for w != 0 {
				i := wi<<6 | bits.TrailingZeros64(w)
				w &= w - 1
				e := changedEntry[K, V]{k: s.slots[i].k, v: s.slots[i].v, present: true}
				if ttl {
					if e.w = s.written[i]; now-e.w >= t.ttl {
						e = changedEntry[K, V]{k: e.k}
					}
				}
				out.add(&e, ttl, false)
			}
		}
		return out
	}
	out := grown[K, V](len(c.keys), ttl, true)
	seen := newKeySet(t, c)
	for j, k := range c.keys {
		if !seen.first(k) {
			continue
		}
		e := changedEntry[K, V]{k: k, old: c.olds[j]}
		i, found := t.probe(s, k, t.hashKey(k))
		if found && ttl {
			if e.w = s.written[i]; now-e.w >= t.ttl {
				found = false
			}
		}
		if found {
			e.v, e.present = s.slots[i].v, true
		} else {
			e.w = 0
		}
		out.add(&e, ttl, true)
	}
	return out
}

// AppendGroup implements FrozenTable. A capture of changes holds no key
// group whole: the backend never asks it to (incrCapture.Persist refuses).
func (d *changedCow[K, V]) AppendGroup([]byte, int) ([]byte, int) {
	panic(fmt.Sprintf("state: the capture of changes of table %q has no whole key group to encode", d.t.name))
}

func (d *changedCow[K, V]) hasChanges() bool {
	for _, g := range d.groups {
		if g.size() > 0 || g.reset {
			return true
		}
	}
	return false
}

// appendDelimited implements changeTable; see AppendGroup.
func (d *changedCow[K, V]) appendDelimited(dst []byte, kg int) ([]byte, int) {
	panic(fmt.Sprintf("state: the capture of changes of table %q has no whole key group to write", d.t.name))
}

// appendChanges implements changeTable.
func (d *changedCow[K, V]) appendChanges(dst []byte, kg int, earlier []changeTable) ([]byte, int, int64) {
	t := d.t
	if !t.rng.Contains(kg) {
		return dst, 0, 0
	}
	g := kg - t.rng.Start
	lists := changedLists[K, V](earlier, g, nil)
	if l := d.groups[g]; l.size() > 0 || l.reset {
		lists = append(lists, l)
	}
	return t.appendMerged(dst, lists)
}

// changedLists returns the changed entries of shard g in the captures
// earlier, oldest first, with the lookup buffer buf.
func changedLists[K comparable, V any](earlier []changeTable, g int, buf []byte) []changeList[K, V] {
	var lists []changeList[K, V]
	for _, e := range earlier {
		var l changeList[K, V]
		switch e := e.(type) {
		case *changedCow[K, V]:
			l = e.groups[g]
		case *frozenCow[K, V]:
			l, buf = e.changedEntries(g, buf)
		}
		if l.size() > 0 || l.reset {
			lists = append(lists, l)
		}
	}
	return lists
}

// changedEntries returns the entries of shard g that f's change list
// names, as of f's capture, each key once.
func (f *frozenCow[K, V]) changedEntries(g int, buf []byte) (changeList[K, V], []byte) {
	c := f.shards[g].changes
	if c == nil || len(c.keys) == 0 {
		return changeList[K, V]{}, buf
	}
	ttl := f.t.ttl > 0
	out := grown[K, V](len(c.keys), ttl, c.withOlds)
	buf = f.eachChanged(g, buf, func(e *changedEntry[K, V]) { out.add(e, ttl, c.withOlds) })
	return out, buf
}

// eachChanged calls fn with each entry of shard g that f's change list
// names, as of f's capture, each key once, looked up with the buffer buf;
// fn must not keep the pointer.
func (f *frozenCow[K, V]) eachChanged(g int, buf []byte, fn func(*changedEntry[K, V])) []byte {
	t := f.t
	s := &f.shards[g]
	c := s.changes
	if c == nil || len(c.keys) == 0 {
		return buf
	}
	seen := newKeySet(t, c)
	// One entry for all the calls (fn keeps no pointer to it): a new one
	// per key would escape, an allocation per entry.
	var e changedEntry[K, V]
	for j, k := range c.keys {
		if !seen.first(k) {
			continue
		}
		e = changedEntry[K, V]{k: k}
		if c.withOlds {
			e.old = c.olds[j]
		}
		var i int
		var found bool
		i, found, buf = f.lookup(s, k, buf)
		if found && t.ttl > 0 {
			if e.w = s.written[i]; f.now-e.w >= t.ttl {
				found = false
			}
		}
		if found {
			e.v, e.present = s.slots[i].v, true
		} else {
			e.w = 0
		}
		fn(&e)
	}
	return buf
}

// appendMerged appends the delimited entries of the changed-entry lists
// (of consecutive captures, oldest first) as one delta: each key once,
// with its value as of the newest capture that lists it, written as edits
// of its value before the oldest one when the table diffs values. It
// returns dst with the number of entries appended.
// A reset list replaces everything before it: the delta then begins with
// opReset, and its deletions only say that a key is absent.
func (t *cowTable[K, V]) appendMerged(dst []byte, lists []changeList[K, V]) ([]byte, int, int64) {
	n := 0
	mark := len(dst)
	reset := false
	for i := len(lists) - 1; i >= 0; i-- {
		if lists[i].reset {
			lists = lists[i:]
			dst = append(dst, opReset)
			n++
			reset = true
			break
		}
	}
	var scratch []byte
	var st diffStats
	defer t.noteDiffs(&st)
	write := func(e *changedEntry[K, V]) {
		var wrote bool
		if dst, scratch, wrote = t.appendChanged(dst, e, scratch, &st); wrote {
			n++
		}
	}
	switch len(lists) {
	case 0:
	case 1:
		lists[0].each(t, write)
	default:
		entries := t.mergeChanged(lists)
		for i := range entries {
			write(&entries[i])
		}
	}
	if reset {
		// The key group written whole replaces what the chain held of it.
		return dst, n, int64(len(dst) - mark)
	}
	return dst, n, st.dead
}

// appendChanged appends the delimited entry of one changed entry: edits of
// its old value when the table diffs values and the key had one, else its
// value or its deletion. It writes nothing for a value the edits would
// leave as it was, and reports whether it wrote. It adds to st.dead the
// bytes of the chain the entry makes redundant (see diffStats).
func (t *cowTable[K, V]) appendChanged(dst []byte, e *changedEntry[K, V], scratch []byte, st *diffStats) ([]byte, []byte, bool) {
	if e.present && e.old.had && t.diff != nil {
		mark := len(dst)
		dst = append(dst, opSplice)
		scratch = t.keyCodec.Append(scratch[:0], e.k)
		dst = binary.AppendUvarint(dst, uint64(len(scratch)))
		dst = append(dst, scratch...)
		var ok bool
		if scratch, ok = t.diff(scratch[:0], e.old.v, e.v); ok {
			if len(scratch) == 0 {
				// Unchanged since the chain's value.
				return dst[:mark], scratch, false
			}
			dst = binary.AppendUvarint(dst, uint64(len(scratch)))
			dst = append(dst, scratch...)
			dst = binary.AppendVarint(dst, 0)
			st.spliced++
			st.dead += int64(len(dst)-mark-len(scratch)) + editsCut(scratch)
			return dst, scratch, true
		}
		dst = dst[:mark]
		st.rewritten++
	}
	mark := len(dst)
	if e.present {
		dst, scratch = appendEntryOf(t, dst, e.k, &e.v, e.w, scratch)
		if !e.old.fresh {
			// A value written again: the chain's one is as large,
			// about.
			st.dead += int64(len(dst) - mark)
		}
		return dst, scratch, true
	}
	dst, scratch = appendEntryOf(t, dst, e.k, nil, 0, scratch)
	st.dead += int64(len(dst) - mark)
	if e.old.had {
		// The value the chain holds, written now only to be measured.
		st.sized, scratch = appendEntryOf(t, st.sized[:0], e.k, &e.old.v, 0, scratch)
		st.dead += int64(len(st.sized))
	}
	return dst, scratch, true
}

// editsCut returns how many bytes of the earlier value the edits (see
// AppendEdit) replace.
func editsCut(edits []byte) int64 {
	var arr [4]edit
	// The edits were just made: the earlier value's length is not needed
	// to check them.
	es, _ := parseEdits(arr[:0], math.MaxInt, edits)
	var cut int64
	for _, e := range es {
		cut += int64(e.cut)
	}
	return cut
}

// diffStats counts the changed values a delta wrote as edits (spliced) and
// those it wrote whole although the key had an old value (rewritten), and
// the bytes of the chain before the delta that its entries make redundant
// (dead): all of a value written again or deleted, the bytes edits cut,
// and the bytes of entries that hold nothing the chain still needs (the
// headers of edits, deletions), but nothing for a key the chain did not
// hold. A value whose old one is unknown (a table that does not diff
// values, or a key listed without it) counts as written again. sized is
// scratch space for the size of a deleted value.
type diffStats struct {
	spliced, rewritten int64
	dead               int64
	sized              []byte
}

// noteDiffs adds st to the table's counts, which tell whether its values
// grow by appending (appends).
func (t *cowTable[K, V]) noteDiffs(st *diffStats) {
	if st.spliced != 0 {
		t.spliced.Add(st.spliced)
	}
	if st.rewritten != 0 {
		t.rewritten.Add(st.rewritten)
	}
}

// mergeChanged merges the lists of consecutive captures (oldest first)
// into one entry per key, in the order keys first appear: the value of the
// newest capture listing the key, the old value of the oldest.
func (t *cowTable[K, V]) mergeChanged(lists []changeList[K, V]) []changedEntry[K, V] {
	total := 0
	for i := range lists {
		total += lists[i].size()
	}
	out := make([]changedEntry[K, V], 0, total)
	var at map[K]int
	var atEnc map[string]int
	var scratch []byte
	if t.exact {
		at = make(map[K]int, total)
	} else {
		atEnc = make(map[string]int, total)
	}
	for i := range lists {
		lists[i].each(t, func(e *changedEntry[K, V]) {
			var j int
			var ok bool
			if at != nil {
				j, ok = at[e.k]
			} else {
				scratch = t.keyCodec.Append(scratch[:0], e.k)
				j, ok = atEnc[string(scratch)]
			}
			if !ok {
				if at != nil {
					at[e.k] = len(out)
				} else {
					atEnc[string(scratch)] = len(out)
				}
				out = append(out, *e)
				return
			}
			old := out[j].old
			out[j] = *e
			out[j].old = old
		})
	}
	return out
}

// appendEntryOf appends key k of table t with its value v and write time w
// (put) or its deletion (v nil).
func appendEntryOf[K comparable, V any](t *cowTable[K, V], dst []byte, k K, v *V, w int64, scratch []byte) ([]byte, []byte) {
	if v == nil {
		dst = append(dst, opDelete)
	} else {
		dst = append(dst, opPut)
	}
	scratch = t.keyCodec.Append(scratch[:0], k)
	dst = binary.AppendUvarint(dst, uint64(len(scratch)))
	dst = append(dst, scratch...)
	if v != nil {
		scratch = t.appendValue(scratch[:0], v)
		dst = binary.AppendUvarint(dst, uint64(len(scratch)))
		dst = append(dst, scratch...)
		dst = binary.AppendVarint(dst, w)
	}
	return dst, scratch
}

// keySet tells the first listing of a key in a change list that may list
// keys twice (dup: a key deleted and written again); without dup every
// listing is a first one. Keys whose == implies equal encodings (exact)
// are kept as they are, others by their encoding.
type keySet[K comparable, V any] struct {
	t       *cowTable[K, V]
	seen    map[K]struct{}
	seenEnc map[string]struct{}
	scratch []byte
}

func newKeySet[K comparable, V any](t *cowTable[K, V], c *kgChanges[K, V]) *keySet[K, V] {
	ks := &keySet[K, V]{t: t}
	if c.dup {
		if t.exact {
			ks.seen = make(map[K]struct{}, len(c.keys))
		} else {
			ks.seenEnc = make(map[string]struct{}, len(c.keys))
		}
	}
	return ks
}

// first reports whether k was not seen before, and notes it.
func (ks *keySet[K, V]) first(k K) bool {
	switch {
	case ks.seen != nil:
		if _, ok := ks.seen[k]; ok {
			return false
		}
		ks.seen[k] = struct{}{}
	case ks.seenEnc != nil:
		ks.scratch = ks.t.keyCodec.Append(ks.scratch[:0], k)
		if _, ok := ks.seenEnc[string(ks.scratch)]; ok {
			return false
		}
		ks.seenEnc[string(ks.scratch)] = struct{}{}
	}
	return true
}
