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

// kgChanges is the change list of one key group of a table.
type kgChanges[K comparable] struct {
	// listed has bit i%64 of word i/64 set when the key in slot i is in
	// keys.
	listed []uint64
	keys   []K
	// dup: a key was deleted, so keys may hold it twice.
	dup bool
}

// record lists the key k of slot i, unless it is listed.
func (c *kgChanges[K]) record(i int, k K) {
	w := &c.listed[i>>6]
	if b := uint64(1) << (i & 63); *w&b == 0 {
		*w |= b
		c.keys = append(c.keys, k)
	}
}

// recordDelete lists the key k of slot i, which is being deleted. Its
// slot no longer says so, so a write of k after this lists it again: dup.
func (c *kgChanges[K]) recordDelete(i int, k K) {
	c.dup = true
	if c.listed[i>>6]&(1<<(i&63)) != 0 {
		return
	}
	c.keys = append(c.keys, k)
}

// shift moves the bit of slot j to slot i (deleteAt moved its entry).
func (c *kgChanges[K]) shift(i, j int) {
	if c.listed[j>>6]&(1<<(j&63)) != 0 {
		c.listed[i>>6] |= 1 << (i & 63)
	} else {
		c.listed[i>>6] &^= 1 << (i & 63)
	}
}

// clear clears the bit of slot i, now empty.
func (c *kgChanges[K]) clear(i int) { c.listed[i>>6] &^= 1 << (i & 63) }

// move sets the bit of slot i if slot j of old (the arrays before a
// growth) had it.
func (c *kgChanges[K]) move(i, j int, old *kgChanges[K]) {
	if old != nil && old.listed[j>>6]&(1<<(j&63)) != 0 {
		c.listed[i>>6] |= 1 << (i & 63)
	}
}

// take returns the changes listed so far and starts a new list.
func (c *kgChanges[K]) take() *kgChanges[K] {
	out := &kgChanges[K]{keys: c.keys, dup: c.dup}
	if len(c.keys) > 0 {
		clear(c.listed)
	}
	c.keys, c.dup = nil, false
	return out
}

// growChanges gives s, whose arrays grow to c slots, a change list of that
// size holding the keys listed so far (grow moves their bits).
func (t *cowTable[K, V]) growChanges(s *kgTable[K, V], c int) {
	n := &kgChanges[K]{listed: make([]uint64, (c+63)/64)}
	if s.changes != nil {
		n.keys, n.dup = s.changes.keys, s.changes.dup
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

// changeTable is implemented by the frozen tables of a backend with
// incremental checkpoints.
type changeTable interface {
	FrozenTable
	// appendChanges appends the delimited entries of key group kg that
	// changed since the capture before earlier[0] (or before this one if
	// earlier is empty): earlier are the frozen tables of the same table
	// in captures whose changes no checkpoint has written. prev, if not
	// nil, is the frozen table of that capture before, whose values the
	// chain holds: a changed value may be written as edits of its value
	// there. It returns dst with the number of entries appended.
	appendChanges(dst []byte, kg int, earlier []changeTable, prev changeTable) ([]byte, int)
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

// appendEntry appends key k with its value v and write time w (put) or
// its deletion.
func (f *frozenCow[K, V]) appendEntry(dst []byte, k K, v *V, w int64, scratch []byte) ([]byte, []byte) {
	t := f.t
	if v == nil {
		dst = append(dst, opDelete)
	} else {
		dst = append(dst, opPut)
	}
	scratch = t.keyCodec.Append(scratch[:0], k)
	dst = binary.AppendUvarint(dst, uint64(len(scratch)))
	dst = append(dst, scratch...)
	if v != nil {
		scratch = t.valueCodec.Append(scratch[:0], *v)
		dst = binary.AppendUvarint(dst, uint64(len(scratch)))
		dst = append(dst, scratch...)
		dst = binary.AppendVarint(dst, w)
	}
	return dst, scratch
}

func (f *frozenCow[K, V]) appendChanges(dst []byte, kg int, earlier []changeTable, prevTable changeTable) ([]byte, int) {
	t := f.t
	if !t.rng.Contains(kg) {
		return dst, 0
	}
	g := kg - t.rng.Start
	s := &f.shards[g]
	var lists [][]K
	dup := false
	for _, e := range earlier {
		if c := e.(*frozenCow[K, V]).shards[g].changes; c != nil && len(c.keys) > 0 {
			lists = append(lists, c.keys)
			dup = dup || c.dup
		}
	}
	if s.changes != nil && len(s.changes.keys) > 0 {
		lists = append(lists, s.changes.keys)
		dup = dup || s.changes.dup
	}
	listed := 0
	for _, l := range lists {
		listed += len(l)
	}
	if listed == 0 {
		return dst, 0
	}
	// prev is the key group at the capture whose values the chain holds,
	// when values can be written as edits of those.
	var prev *kgTable[K, V]
	if p, ok := prevTable.(*frozenCow[K, V]); ok && p.t == t && t.diff != nil {
		prev = &p.shards[g]
	}
	if 2*listed >= s.n && prev == nil {
		dst = append(dst, opReset)
		dst, n := f.appendDelimited(dst, kg)
		return dst, n + 1
	}
	// Repeats are removed by key, or by encoding where == is not
	// equality of entries (floats: +0 and -0 are two entries).
	var seen map[K]struct{}
	var seenEnc map[string]struct{}
	if dup || len(lists) > 1 {
		if t.exact {
			seen = make(map[K]struct{})
		} else {
			seenEnc = make(map[string]struct{})
		}
	}
	n := 0
	var scratch, hbuf []byte
	for _, keys := range lists {
		for _, k := range keys {
			if seen != nil {
				if _, ok := seen[k]; ok {
					continue
				}
				seen[k] = struct{}{}
			} else if seenEnc != nil {
				scratch = t.keyCodec.Append(scratch[:0], k)
				if _, ok := seenEnc[string(scratch)]; ok {
					continue
				}
				seenEnc[string(scratch)] = struct{}{}
			}
			var i int
			var found bool
			i, found, hbuf = f.lookup(s, k, hbuf)
			var w int64
			if found && t.ttl > 0 {
				if w = s.written[i]; f.now-w >= t.ttl {
					found = false
				}
			}
			if found && prev != nil {
				var j int
				var had, ok bool
				j, had, hbuf = f.lookup(prev, k, hbuf)
				if had {
					mark := len(dst)
					dst = append(dst, opSplice)
					scratch = t.keyCodec.Append(scratch[:0], k)
					dst = binary.AppendUvarint(dst, uint64(len(scratch)))
					dst = append(dst, scratch...)
					if scratch, ok = t.diff(scratch[:0], prev.slots[j].v, s.slots[i].v); ok {
						if len(scratch) == 0 {
							// Unchanged since the chain's value.
							dst = dst[:mark]
							continue
						}
						dst = binary.AppendUvarint(dst, uint64(len(scratch)))
						dst = append(dst, scratch...)
						dst = binary.AppendVarint(dst, 0)
						n++
						continue
					}
					dst = dst[:mark]
				}
			}
			if found {
				dst, scratch = f.appendEntry(dst, k, &s.slots[i].v, w, scratch)
			} else {
				dst, scratch = f.appendEntry(dst, k, nil, 0, scratch)
			}
			n++
		}
	}
	return dst, n
}

func (f *frozenCow[K, V]) appendDelimited(dst []byte, kg int) ([]byte, int) {
	var scratch []byte
	n := f.eachLive(kg, func(e *kv[K, V], w int64) {
		dst, scratch = f.appendEntry(dst, e.k, &e.v, w, scratch)
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

// applyEdits appends to dst the encoding old turns into by edits.
func applyEdits(dst, old, edits []byte) ([]byte, error) {
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
		if off < uint64(pos) || off > uint64(len(old)) || cut > uint64(len(old))-off {
			return dst, fmt.Errorf("edit at byte %d of %d replacing %d bytes is out of order or out of the earlier value", off, len(old), cut)
		}
		dst = append(dst, old[pos:off]...)
		dst = append(dst, edits[p:p+int(l)]...)
		pos = int(off + cut)
		edits = edits[p+int(l):]
	}
	return append(dst, old[pos:]...), nil
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
// compare equal: it was copied into a larger array) gets an edit of its
// length and one inserting the bytes appended; any other change of a
// slice makes the value be written whole.
func appendBytesDiff(dst []byte, old, new unsafe.Pointer, offs []uintptr) ([]byte, bool) {
	off := 0 // in old's encoding
	for _, fo := range offs {
		o, n := *(*[]byte)(unsafe.Add(old, fo)), *(*[]byte)(unsafe.Add(new, fo))
		if len(o) > 0 && (len(n) < len(o) || unsafe.SliceData(n) != unsafe.SliceData(o) && !bytes.Equal(n[:len(o)], o)) {
			return dst, false
		}
		head := 1
		if o != nil {
			head = uvarintLen(uint64(len(o)) + 1)
		}
		if len(n) != len(o) || (o == nil) != (n == nil) {
			var hb [binary.MaxVarintLen64]byte
			h := hb[:1]
			if n != nil {
				h = binary.AppendUvarint(hb[:0], uint64(len(n))+1)
			}
			dst = AppendEdit(dst, off, head, h)
			if len(n) > len(o) {
				dst = AppendEdit(dst, off+head+len(o), 0, n[len(o):])
			}
		}
		off += head + len(o)
	}
	return dst, true
}

// uvarintLen returns the length of x's uvarint encoding.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }
