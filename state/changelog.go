package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"reflect"
	"unsafe"
)

// With incremental checkpoints (MemoryOptions.Incremental), a cowTable
// records per key group the keys written or deleted since the last capture
// (kgChanges), so that a checkpoint writes only those entries: their value
// as of the capture, or a deletion. A key enters the list once per capture
// interval: a bit per slot says that the slot's key is listed, and it moves
// with the entry when growth or a deletion moves it. A deleted key leaves
// its slot, so a key deleted and written again in one interval may be
// listed twice (dup); Persist then removes the repeats (which matters for
// entries written as edits, which must apply once).
//
// A table whose deltas write values as edits (cowTable.diff) also lists,
// beside each key, the value the key had before its first write of the
// interval (olds): the value as of the last capture, which the chain
// holds once that capture is persisted. Those writes record before they
// change the slot (recordOld); every other write records after.

// kgChanges is the change list of one key group of a table.
type kgChanges[K comparable, V any] struct {
	// listed has bit i%64 of word i/64 set when the key in slot i is in
	// keys.
	listed []uint64
	keys   []K
	// olds[j] is the value keys[j] had before it was listed, when the
	// table keeps them (withOlds).
	olds     []oldValue[V]
	withOlds bool
	// deleted lists every key deleted in the interval (a key deleted
	// twice, twice); a key written again after is listed in keys too.
	deleted []K
	// dup: a key was deleted, so keys may hold it twice.
	dup bool
	changeCounts
}

// changeCounts count what a change list's keys are (see
// cowTable.appends). inserted counts the keys inserted in the interval
// (not in the table when it began, or deleted since): of the keys
// listed, the others were written before. churned counts the deletions of
// keys listed already, inserted or written in the interval and gone
// again. removed counts the deletions of keys written before the
// interval: like an insert, a deletion a delta writes ahead of the
// checkpoint is written once.
type changeCounts struct{ inserted, churned, removed int }

// writtenOnce returns how many of the keys listed a delta written ahead of
// the checkpoint writes once (inserted, or deleted after a value written
// before the interval) and how many it may write again (written before,
// or deleted after their write in the interval); see cowTable.appends.
func (c *kgChanges[K, V]) writtenOnce() (once, again int64) {
	once = int64(c.inserted + c.removed)
	return once, max(int64(len(c.keys))-once, 0) + int64(c.churned)
}

// oldValue is a key's value before its first write of an interval; had is
// false for a key that had none. fresh says that the key was not in the
// table then (recordOld without a value): a key listed without its old
// value (record) has neither had nor fresh set.
type oldValue[V any] struct {
	v     V
	had   bool
	fresh bool
}

// record lists the key k of slot i, unless it is listed. A table that
// keeps olds lists its keys with recordOld first; a key that reaches
// record unlisted gets no old value and is written whole.
func (c *kgChanges[K, V]) record(i int, k K) {
	w := &c.listed[i>>6]
	if b := uint64(1) << (i & 63); *w&b == 0 {
		*w |= b
		c.keys = append(c.keys, k)
		if c.withOlds {
			c.olds = append(c.olds, oldValue[V]{})
		}
	}
}

// recordOld lists the key k of slot i with its value before the write
// that is about to change it (had: the key had one), unless it is listed.
func (c *kgChanges[K, V]) recordOld(i int, k K, old V, had bool) {
	w := &c.listed[i>>6]
	if b := uint64(1) << (i & 63); *w&b == 0 {
		*w |= b
		c.keys = append(c.keys, k)
		c.olds = append(c.olds, oldValue[V]{v: old, had: had, fresh: !had})
	}
}

// recordDelete lists the key k of slot i, which is being deleted and
// holds old. Its slot no longer says so, so a write of k after this lists
// it again: dup.
func (c *kgChanges[K, V]) recordDelete(i int, k K, old V) {
	c.dup = true
	c.deleted = append(c.deleted, k)
	if c.listed[i>>6]&(1<<(i&63)) != 0 {
		c.churned++
		return
	}
	c.removed++
	c.keys = append(c.keys, k)
	if c.withOlds {
		c.olds = append(c.olds, oldValue[V]{v: old, had: true})
	}
}

// shift moves the bit of slot j to slot i (deleteAt moved its entry).
func (c *kgChanges[K, V]) shift(i, j int) {
	if c.listed[j>>6]&(1<<(j&63)) != 0 {
		c.listed[i>>6] |= 1 << (i & 63)
	} else {
		c.listed[i>>6] &^= 1 << (i & 63)
	}
}

// clear clears the bit of slot i, now empty.
func (c *kgChanges[K, V]) clear(i int) { c.listed[i>>6] &^= 1 << (i & 63) }

// move sets the bit of slot i if slot j of old (the arrays before a
// growth) had it.
func (c *kgChanges[K, V]) move(i, j int, old *kgChanges[K, V]) {
	if old != nil && old.listed[j>>6]&(1<<(j&63)) != 0 {
		c.listed[i>>6] |= 1 << (i & 63)
	}
}

// take returns the changes listed so far and starts a new list.
func (c *kgChanges[K, V]) take() *kgChanges[K, V] {
	out := &kgChanges[K, V]{keys: c.keys, olds: c.olds, withOlds: c.withOlds, deleted: c.deleted, dup: c.dup, changeCounts: c.changeCounts}
	c.reset()
	return out
}

// reset starts a new list.
func (c *kgChanges[K, V]) reset() {
	if len(c.keys) > 0 {
		clear(c.listed)
	}
	c.keys, c.olds, c.deleted, c.dup, c.changeCounts = nil, nil, nil, false, changeCounts{}
}

// restart starts a new list in the arrays of this one, which nothing else
// holds: a capture of changes copied what it needed.
func (c *kgChanges[K, V]) restart() {
	if len(c.keys) > 0 {
		clear(c.listed)
	}
	clear(c.keys)
	clear(c.olds)
	clear(c.deleted)
	c.keys, c.olds, c.deleted, c.dup, c.changeCounts = c.keys[:0], c.olds[:0], c.deleted[:0], false, changeCounts{}
}

// trackChanges implements changeCapturer. Stopped, the key groups hold no
// change lists, and the writes list nothing; started again, each gets an
// empty one the size of its arrays.
func (t *cowTable[K, V]) trackChanges(on bool) {
	t.finishRestore()
	if t.changelog == on {
		return
	}
	t.changelog = on
	// lastSlot's change list is the one dropped or replaced.
	t.lastSlot, t.lastChanges = nil, nil
	for i := range t.shards {
		s := &t.shards[i]
		s.changes = nil
		if on {
			t.growChanges(s, len(s.slots))
		}
	}
}

// growChanges gives s, whose arrays grow to c slots, a change list of that
// size holding the keys listed so far (grow moves their bits).
func (t *cowTable[K, V]) growChanges(s *kgTable[K, V], c int) {
	n := &kgChanges[K, V]{listed: make([]uint64, (c+63)/64), withOlds: t.diff != nil}
	if s.changes != nil {
		n.keys, n.olds, n.deleted, n.dup, n.changeCounts = s.changes.keys, s.changes.olds, s.changes.deleted, s.changes.dup, s.changes.changeCounts
	}
	s.changes = n
}

// Entries in the files of incremental checkpoints are delimited, so that
// base and changes can be merged without the tables' codecs (at restore
// before a table is registered, and in clink state-cat):
//
//	op     1 byte: opPut or opDelete
//	key    uvarint length + the key codec's bytes
//	value  (opPut only) uvarint length + the value codec's bytes
//	time   (opPut only) varint write time, 0 without TTL
//
// A delta section may begin with an entry of op opReset alone: the entries
// after it are all of the table's in that key group, replacing what the
// chain held before. A delta writes a key group so when at least half its
// entries changed: a scan of the slots in order is cheaper than a lookup
// per changed key, and needs no deletions.
const (
	opDelete = 0
	opPut    = 1
	opReset  = 2
)

// changeTable is implemented by the captures of tables of a backend with
// incremental checkpoints: frozen tables (frozenCow) and captures of
// changes (changedCow).
type changeTable interface {
	FrozenTable
	// appendChanges appends the delimited entries of key group kg that
	// changed since the capture before earlier[0] (or before this one if
	// earlier is empty): earlier are the captures of the same table whose
	// changes no checkpoint has written, oldest first. A changed value is
	// written as edits of the value it had before them when the table
	// diffs values. It returns dst with the number of entries appended
	// and the bytes of the chain they make redundant (see diffStats).
	appendChanges(dst []byte, kg int, earlier []changeTable) (out []byte, n int, dead int64)
	// appendDelimited appends every live entry of kg, delimited.
	appendDelimited(dst []byte, kg int) ([]byte, int)
	// hasChanges reports whether any key group has changes listed.
	hasChanges() bool
}

func (f *frozenCow[K, V]) hasChanges() bool {
	for i := range f.shards {
		if c := f.shards[i].changes; c != nil && len(c.keys) > 0 {
			return true
		}
	}
	return false
}

func (f *frozenCow[K, V]) appendChanges(dst []byte, kg int, earlier []changeTable) ([]byte, int, int64) {
	t := f.t
	if !t.rng.Contains(kg) {
		return dst, 0, 0
	}
	g := kg - t.rng.Start
	s := &f.shards[g]
	var buf []byte
	lists := changedLists[K, V](earlier, g, buf)
	listed := 0
	for i := range lists {
		listed += lists[i].size()
	}
	if c := s.changes; c != nil {
		listed += len(c.keys)
	}
	if listed == 0 {
		return dst, 0, 0
	}
	if 2*listed >= s.n && t.diff == nil {
		mark := len(dst)
		dst = append(dst, opReset)
		dst, n := f.appendDelimited(dst, kg)
		return dst, n + 1, int64(len(dst) - mark)
	}
	if len(lists) == 0 {
		// The common case: this capture's changes alone, written as they
		// are looked up.
		return f.appendOwnChanges(dst, g)
	}
	if own, _ := f.changedEntries(g, buf); own.size() > 0 {
		lists = append(lists, own)
	}
	return t.appendMerged(dst, lists)
}

// appendOwnChanges appends the entries of shard g that f's change list
// names, each key once, as they are looked up.
func (f *frozenCow[K, V]) appendOwnChanges(dst []byte, g int) ([]byte, int, int64) {
	n := 0
	var scratch []byte
	var st diffStats
	f.eachChanged(g, nil, func(e *changedEntry[K, V]) {
		var wrote bool
		if dst, scratch, wrote = f.t.appendChanged(dst, e, scratch, &st); wrote {
			n++
		}
	})
	f.t.noteDiffs(&st)
	return dst, n, st.dead
}

func (f *frozenCow[K, V]) appendDelimited(dst []byte, kg int) ([]byte, int) {
	var scratch []byte
	n := f.eachLive(kg, func(e *kv[K, V], w int64) {
		dst, scratch = appendEntryOf(f.t, dst, e.k, &e.v, w, scratch)
	})
	return dst, n
}

// hashKey is cowTable.hashKey for the snapshot worker: HasherFor's hash of
// a key through its codec uses a buffer of the table's, so this one hashes
// such keys with buf.
func (f *frozenCow[K, V]) hashKey(k K, buf []byte) (uint64, []byte) {
	t := f.t
	if t.keyHash != keyHashCodec {
		return t.hashKey(k), buf
	}
	buf = t.keyCodec.Append(buf[:0], k)
	return mix64(HashBytes(buf)), buf
}

// lookup returns the slot of s (a frozen key group) that holds k, as
// cowTable.probe does, reading only the frozen arrays and the table's
// fields that never change, so that it runs beside the task's writes.
func (f *frozenCow[K, V]) lookup(s *kgTable[K, V], k K, buf []byte) (int, bool, []byte) {
	t := f.t
	c := len(s.slots)
	if c == 0 {
		return 0, false, buf
	}
	m, buf := f.hashKey(k, buf)
	for i := home(m, c); ; {
		if !s.isUsed(i) {
			return i, false, buf
		}
		if sk := s.slots[i].k; sk == k && (t.flat || s.tags[i] == tagOf(m)) {
			if t.exact {
				return i, true, buf
			}
			var sm uint64
			if sm, buf = f.hashKey(sk, buf); sm == m {
				return i, true, buf
			}
		}
		if i++; i == c {
			i = 0
		}
	}
}

// A delta may write a changed value as edits of the value the chain held
// before (the value as of the last capture a file of the chain holds),
// when the value's codec can tell them cheaply (Differ): a value that only
// grew by appending then costs the bytes appended, not all of it. Such an
// entry is
//
//	op     1 byte: opSplice
//	key    uvarint length + the key codec's bytes
//	edits  uvarint length + edits, each: uvarint offset into the earlier
//	       value's encoding (ascending, not overlapping), uvarint count
//	       of its bytes replaced, uvarint length + the bytes put there
//	time   varint write time, 0 without TTL
const opSplice = 3

// Differ is implemented by codecs that can encode the change from one
// value to another as edits of the first value's encoding, cheaply for
// the changes a state's values commonly go through (growing by
// appending). Incremental checkpoints of the memory backend then write
// those edits instead of the whole value.
type Differ[V any] interface {
	// AppendDiff appends to dst the edits (AppendEdit) that turn the
	// encoding of old into that of new, or returns ok=false to have new
	// written whole. It may rely on the state's rule that a value held by
	// the state is never changed in place (see WithCopy): bytes reachable
	// from old are as old had them.
	AppendDiff(dst []byte, old, new V) (out []byte, ok bool)
}

// AppendEdit appends one edit: the cut bytes of the earlier encoding at
// off are replaced by ins. Edits of one value are appended in ascending
// order of off and do not overlap.
func AppendEdit(dst []byte, off, cut int, ins []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(off))
	dst = binary.AppendUvarint(dst, uint64(cut))
	dst = binary.AppendUvarint(dst, uint64(len(ins)))
	return append(dst, ins...)
}

// edit is one parsed edit (see AppendEdit): cut bytes of the earlier
// encoding at off replaced by ins.
type edit struct {
	off, cut int
	ins      []byte
}

// parseEdits appends to dst the edits of an earlier encoding of oldLen
// bytes, checking that they are in order and inside it.
func parseEdits(dst []edit, oldLen int, edits []byte) ([]edit, error) {
	pos := 0
	for len(edits) > 0 {
		off, n1 := binary.Uvarint(edits)
		if n1 <= 0 {
			return dst, fmt.Errorf("bad edit offset: %w", ErrShortBuffer)
		}
		cut, n2 := binary.Uvarint(edits[n1:])
		if n2 <= 0 {
			return dst, fmt.Errorf("bad edit length: %w", ErrShortBuffer)
		}
		l, n3 := binary.Uvarint(edits[n1+n2:])
		p := n1 + n2 + n3
		if n3 <= 0 || l > uint64(len(edits)-p) {
			return dst, fmt.Errorf("edit bytes are truncated: %w", ErrShortBuffer)
		}
		if off < uint64(pos) || off > uint64(oldLen) || cut > uint64(oldLen)-off {
			return dst, fmt.Errorf("edit at byte %d of %d replacing %d bytes is out of order or out of the earlier value", off, oldLen, cut)
		}
		dst = append(dst, edit{off: int(off), cut: int(cut), ins: edits[p : p+int(l)]})
		pos = int(off + cut)
		edits = edits[p+int(l):]
	}
	return dst, nil
}

// applyEdits appends to dst the encoding old turns into by edits.
func applyEdits(dst, old, edits []byte) ([]byte, error) {
	var arr [4]edit
	es, err := parseEdits(arr[:0], len(old), edits)
	if err != nil {
		return dst, err
	}
	return appendEdited(dst, old, es), nil
}

// appendEdited appends to dst the encoding old turns into by es.
func appendEdited(dst, old []byte, es []edit) []byte {
	pos := 0
	for _, e := range es {
		dst = append(dst, old[pos:e.off]...)
		dst = append(dst, e.ins...)
		pos = e.off + e.cut
	}
	return append(dst, old[pos:]...)
}

// editValue returns the encoding old turns into by edits. When owned (old
// is a buffer no one else refers to) and the edits leave every byte of old
// at or after its place and fit its capacity, as appending to a value
// does, it edits old in place, moving only the bytes after the first edit
// that changes the length; else it copies into a new buffer with room to
// grow by a quarter, or by four times what the edits added, so that a
// value edited by many deltas in turn is copied a bounded number of times
// per byte.
func editValue(old []byte, owned bool, edits []byte) ([]byte, error) {
	var arr [4]edit
	es, err := parseEdits(arr[:0], len(old), edits)
	if err != nil {
		return nil, err
	}
	n, grows := len(old), true
	for _, e := range es {
		// The bytes after e move by n-len(old): not to the left.
		n += len(e.ins) - e.cut
		grows = grows && n >= len(old)
	}
	if !owned || !grows || n > cap(old) {
		room := max(n/4, 4*(n-len(old)))
		return appendEdited(make([]byte, 0, n+room), old, es), nil
	}
	out := old[:n]
	// Right to left: each kept run moves right (or stays), over bytes
	// already moved or not needed.
	end := len(old) // end of the kept run after edit i, in old
	shift := n - len(old)
	for i := len(es) - 1; i >= 0; i-- {
		e := es[i]
		from := e.off + e.cut
		copy(out[from+shift:end+shift], old[from:end])
		shift -= len(e.ins) - e.cut
		copy(out[e.off+shift:], e.ins)
		end = e.off
	}
	return out, nil
}

// diffFor returns the function that diffs values of codec vc: its own
// (Differ), or, for the reflection codec (CodecFor) of a byte slice or of
// a struct of byte slices only, one that edits the slices that grew by
// appending in place; nil if none.
func diffFor[V any](vc Codec[V]) func(dst []byte, old, new V) ([]byte, bool) {
	if d, ok := vc.(Differ[V]); ok {
		return d.AppendDiff
	}
	if _, ok := vc.(reflectCodec[V]); !ok {
		return nil
	}
	offs, ok := byteSliceFields(reflect.TypeFor[V]())
	if !ok {
		return nil
	}
	return func(dst []byte, old, new V) ([]byte, bool) {
		return appendBytesDiff(dst, unsafe.Pointer(&old), unsafe.Pointer(&new), offs)
	}
}

// byteSliceFields returns the offsets of t's byte slices when t is a byte
// slice or a struct of byte slices only, which the reflection codec
// encodes each as uvarint 0 (nil) or length+1, then the bytes.
func byteSliceFields(t reflect.Type) ([]uintptr, bool) {
	isBytes := func(t reflect.Type) bool {
		return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 && !marshals(t)
	}
	if isBytes(t) {
		return []uintptr{0}, true
	}
	if t.Kind() != reflect.Struct || t.NumField() == 0 || marshals(t) {
		return nil, false
	}
	var offs []uintptr
	for i := range t.NumField() {
		f := t.Field(i)
		if !isBytes(f.Type) {
			return nil, false
		}
		offs = append(offs, f.Offset)
	}
	return offs, true
}

// marshals reports whether the reflection codec encodes t through its
// encoding.BinaryMarshaler (see build).
func marshals(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(binaryUnmarshaler) &&
		(t.Implements(binaryMarshaler) || reflect.PointerTo(t).Implements(binaryMarshaler))
}

// appendBytesDiff diffs two values whose byte slices sit at offs (see
// byteSliceFields): a slice that begins with the earlier one's bytes (it
// kept its array, which the earlier bytes never change in, or its bytes
// compare equal: it was copied into a larger array), or with their end
// (the first ones were cut), gets an edit of its length that cuts those
// and one inserting the bytes appended; any other change of a slice makes
// the value be written whole.
func appendBytesDiff(dst []byte, old, new unsafe.Pointer, offs []uintptr) ([]byte, bool) {
	off := 0 // in old's encoding
	for _, fo := range offs {
		o, n := *(*[]byte)(unsafe.Add(old, fo)), *(*[]byte)(unsafe.Add(new, fo))
		// cut is how many of o's first bytes n lacks.
		cut := 0
		if len(o) > 0 && (len(n) < len(o) || unsafe.SliceData(n) != unsafe.SliceData(o) && !bytes.Equal(n[:len(o)], o)) {
			var ok bool
			if cut, ok = cutPrefix(o, n); !ok {
				return dst, false
			}
		}
		head := 1
		if o != nil {
			head = uvarintLen(uint64(len(o)) + 1)
		}
		if len(n) != len(o) || cut > 0 || (o == nil) != (n == nil) {
			var hb [binary.MaxVarintLen64]byte
			h := hb[:1]
			if n != nil {
				h = binary.AppendUvarint(hb[:0], uint64(len(n))+1)
			}
			dst = AppendEdit(dst, off, head+cut, h)
			if kept := len(o) - cut; len(n) > kept {
				dst = AppendEdit(dst, off+head+len(o), 0, n[kept:])
			}
		}
		off += head + len(o)
	}
	return dst, true
}

// cutPrefix returns the least cut > 0 such that n begins with o[cut:] (n
// is o without its first cut bytes, maybe with more appended) and at
// least minKept bytes of o are left, len(o) for an empty n, or false. A
// few bytes in common are a coincidence of a value rewritten, not a cut:
// such a value is written whole, and counts as rewritten (see appends).
func cutPrefix(o, n []byte) (int, bool) {
	if len(n) == 0 {
		return len(o), true
	}
	if len(n) < minKept {
		return 0, false
	}
	probe := n[:minKept]
	last := len(o) - minKept
	for from := 1; from <= last; {
		i := bytes.Index(o[from:], probe)
		if i < 0 {
			break
		}
		k := from + i
		if bytes.HasPrefix(n, o[k:]) {
			return k, true
		}
		from = k + 1
	}
	return 0, false
}

// minKept is the fewest bytes of an earlier slice a cut keeps.
const minKept = 8

// uvarintLen returns the length of x's uvarint encoding.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }
