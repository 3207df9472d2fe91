package state

import "encoding/binary"

// With incremental checkpoints (MemoryOptions.Incremental), a cowTable
// records per key group the keys written or deleted since the last capture
// (kgChanges), so that a checkpoint writes only those entries: their value
// as of the capture, or a deletion. A key enters the list once per capture
// interval: a bit per slot says that the slot's key is listed, and it moves
// with the entry when growth or a deletion moves it. A deleted key leaves
// its slot, so a key deleted and written again in one interval may be
// listed twice (dup); Persist then removes the repeats.

// kgChanges is the change list of one key group of a table.
type kgChanges[K comparable] struct {
	// listed has bit i%64 of word i/64 set when the key in slot i is in
	// keys.
	listed []uint64
	keys   []K
	// dup: a listed key was deleted, so keys may hold it twice.
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

// recordDelete lists the key k of slot i, which is being deleted.
func (c *kgChanges[K]) recordDelete(i int, k K) {
	if c.listed[i>>6]&(1<<(i&63)) != 0 {
		c.dup = true
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
	// in captures whose changes no checkpoint has written. It returns dst
	// with the number of entries appended.
	appendChanges(dst []byte, kg int, earlier []changeTable) ([]byte, int)
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

func (f *frozenCow[K, V]) appendChanges(dst []byte, kg int, earlier []changeTable) ([]byte, int) {
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
	if 2*listed >= s.n {
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
