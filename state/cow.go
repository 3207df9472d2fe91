package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// StateOption configures a keyed state.
type StateOption func(*stateConfig)

type stateConfig struct {
	ttl time.Duration
	now func() int64
	// copy is WithCopy's function, a func(V) V of the state's value type.
	copy any
}

// WithTTL expires an entry ttl after its last write (Flink's
// OnCreateAndWrite update type): an expired entry is never returned, and it
// is dropped from the next checkpoint and on access.
func WithTTL(ttl time.Duration) StateOption { return func(c *stateConfig) { c.ttl = ttl } }

// WithClock sets the processing-time clock TTL reads, in milliseconds
// (default: the wall clock).
func WithClock(now func() int64) StateOption { return func(c *stateConfig) { c.now = now } }

// WithCopy gives a value state a deep copy of its values, so that
// ValueState.Update may hand out values for change in place: on the memory
// backend, a value the last checkpoint capture may still hold reaches
// Update's function as a copy (once per key and checkpoint), and any other
// as itself. Without it, Update's function must not change the value it
// gets. Only NewValue takes it.
func WithCopy[V any](copy func(V) V) StateOption { return func(c *stateConfig) { c.copy = copy } }

func wallMillis() int64 { return time.Now().UnixMilli() }

// The memory backend keeps a table's entries in one open-addressing hash
// table per key group (kgTable): linear probing over an array of key-value
// slots, with a bitmap of the slots in use. The bitmap is 1/128 of the
// slots' size for 8-byte keys and values, so it stays in the core's cache
// and a read-modify-write of such a key misses the cache once, on its
// slot. Keys that == cannot compare in place (strings, whose bytes are
// elsewhere) get a byte of tag per slot as well, compared first. The write
// time (with TTL) and the epoch (for values that are cloned before they
// are changed in place) live in parallel arrays that exist only when the
// table needs them.
//
// A key's stable hash (HasherFor) is mixed once (mix64): the mix gives the
// key group (as KeyGroupFor does), the home slot (its top 32 bits) and the
// tag (bits 16 to 22), so an update hashes its key once.
//
// Copy-on-write is per key group: Freeze marks every kgTable shared and
// hands its arrays to the capture; the first write to a shared kgTable
// copies its arrays, so the capture's arrays are never written again.

// kv is one slot of a kgTable.
type kv[K comparable, V any] struct {
	k K
	v V
}

// kgTable holds the entries of one key group.
type kgTable[K comparable, V any] struct {
	slots []kv[K, V]
	// used has bit i%64 of word i/64 set when slots[i] holds an entry.
	used []uint64
	// tags[i] is 7 bits of the hash of slots[i]'s key (| 0x80); only for
	// keys that are not flat (flatKey).
	tags []uint8
	// written[i] is when slots[i] was last written; only with TTL.
	written []int64
	// epochs[i] is the epoch slots[i] was last written in; only for tables
	// whose values are cloned before they are changed in place.
	epochs []uint64
	n      int // entries
	// shared: a capture holds the arrays; the next write copies them.
	shared bool
	// slab is the slab slots was carved from (nil: none, see slab.go).
	slab *slotSlab[K, V]
	// changes holds the keys written or deleted since the last capture,
	// for incremental checkpoints (see changelog.go); nil without them.
	changes *kgChanges[K, V]
}

// The load factor at which a kgTable grows, and by how much. Most keys
// (about 70% at 1M keys) sit in their home slot, so that a lookup's branch
// on the key it compares is predicted right while the slot's cache line is
// still on its way, and the core goes on to the next record: misses of
// successive updates overlap. (Comparing a bucket of 4 slots without a
// branch was slower: the slot index then depends on the loaded keys.)
// Growing by half keeps the average load (and so the memory per entry)
// higher than doubling would.
const (
	maxLoadNum, maxLoadDen = 4, 5
	minSlots               = 8
)

// home returns the slot where a key whose mixed hash is m starts probing in
// a table of c slots.
func home(m uint64, c int) int { return int((m >> 32) * uint64(c) >> 32) }

// tagOf returns the tag of a key whose mixed hash is m (never 0).
func tagOf(m uint64) uint8 { return uint8(m>>16) | 0x80 }

// cowTable is the memory backend's table: a kgTable per key group, copied
// on the first write after a capture.
type cowTable[K comparable, V any] struct {
	name       string
	keyCodec   Codec[K]
	valueCodec Codec[V]
	// appendValue is valueCodec's Append of the value at a pointer
	// (appenderOf).
	appendValue func(dst []byte, v *V) []byte
	// refs are the offsets in a kv of the pointers to the bytes an
	// entry's encoding reads (refOffsets), valueRefs those in a V.
	refs, valueRefs []uintptr
	hash            func(K) uint64
	keyHash         keyHash
	maxPar          int
	// kgMask is maxPar-1 when maxPar is a power of two, else 0.
	kgMask uint64
	rng    KeyGroupRange
	shards []kgTable[K, V]
	// epoch counts captures; an entry written in an earlier epoch may be
	// shared with a capture and is copied (clone) before it is changed in
	// place.
	epoch uint64
	clone func(V) V
	ttl   int64 // milliseconds; 0: no TTL
	now   func() int64
	// flat: K holds no pointers and == implies equal encodings (flatKey),
	// so probing compares keys in their slots without tags.
	flat bool
	// changelog: the table records its changes per capture (incremental
	// checkpoints, changelog.go).
	changelog bool
	// exact: == on K implies equal encodings (exactEqual), so a key found
	// by == has the hash of the key looked up, and the lookup cache below
	// may be used. Otherwise (floats: +0 == -0) a slot matches only if its
	// key also has the same hash.
	exact bool
	// slabbed: slot arrays are carved from slabs (slab.go); slab is the
	// current one.
	slabbed bool
	slab    *slotSlab[K, V]
	// inPlace: entries carry no write time and no epoch, and == on keys
	// is exact, so a found slot whose arrays no capture holds may be
	// overwritten as it is (lastSlot; with a changelog, the write is
	// recorded in lastChanges at lastIndex).
	inPlace bool
	// fast: find's inline path applies (flat keys hashed as 8 bytes, a
	// power-of-two max parallelism above 1, no TTL).
	fast bool
	// lastSlot is the slot the last lookup found, if it may be overwritten
	// in place (else nil), so that the write that follows a read of the
	// same key (lastSlot.k == k) does not probe again. Anything that moves
	// entries or lets a capture or an iteration hold the arrays clears it.
	lastSlot *kv[K, V]
	// lastChanges and lastIndex are the change list of lastSlot's key
	// group and lastSlot's index, set with lastSlot when the table keeps
	// a changelog.
	lastChanges *kgChanges[K, V]
	lastIndex   int
	// background is the restore still decoding key groups in the
	// background (background.go), nil when none is.
	background *backgroundRestore
	// diff, with a changelog and without TTL, encodes a changed value as
	// edits of an earlier one (diffFor), for deltas; nil: written whole.
	diff func(dst []byte, old, new V) ([]byte, bool)
	// spliced and rewritten count the changed values deltas wrote as
	// edits and whole (see diffStats); the snapshot worker and preemptive
	// persists add to them.
	spliced, rewritten atomic.Int64
	// once and again count, over the captures of changes, the keys they
	// listed that a delta writes once (inserted in their interval, or
	// deleted in it after a value written before) and the others (see
	// appends); only the task goroutine adds to them.
	once, again atomic.Int64
	// born counts the keys inserted, over the captures of changes;
	// bornAtCheckpoint is born at the last checkpoint's capture and
	// bornPerCheckpoint how many the interval before it inserted (see
	// appends). Only the task goroutine uses them.
	born, bornAtCheckpoint, bornPerCheckpoint int64
	// inserted counts the keys written that were not there (not those
	// restored), whether the table tracks its changes or not, and
	// insertedAtCapture is inserted at the last checkpoint's capture
	// (see MemoryBackend.churns). Only the task goroutine uses them.
	inserted, insertedAtCapture int64
	// batches holds the batches of restore decoders (entryDecoder) between
	// key groups, for the goroutines that decode them.
	batches sync.Pool
}

func newCowTable[K comparable, V any](b *MemoryBackend, name string, kc Codec[K], vc Codec[V], clone func(V) V, opts []StateOption) (*cowTable[K, V], error) {
	if name == "" {
		return nil, errors.New("a state needs a name")
	}
	if err := CheckCodec[K](); err != nil {
		return nil, fmt.Errorf("state %q: its key cannot be checkpointed: %w", name, err)
	}
	if err := codecError(vc); err != nil {
		return nil, fmt.Errorf("state %q: its value cannot be checkpointed: %w", name, err)
	}
	cfg := stateConfig{now: wallMillis}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.ttl < 0 {
		return nil, fmt.Errorf("state %q: negative TTL %v", name, cfg.ttl)
	}
	t := &cowTable[K, V]{
		name: name, keyCodec: kc, valueCodec: vc, appendValue: appenderOf(vc), refs: refOffsets[K, V](), valueRefs: valueRefOffsets[V](), hash: HasherFor(kc), keyHash: keyHashOf[K](),
		maxPar: b.maxParallelism, rng: b.rng, clone: clone, exact: exactEqual(reflect.TypeFor[K]()), flat: flatKey(reflect.TypeFor[K]()),
		shards: make([]kgTable[K, V], b.rng.End-b.rng.Start), slabbed: slabbed[K, V](),
		ttl: cfg.ttl.Milliseconds(), now: cfg.now, changelog: b.incremental,
	}
	if mp := uint64(b.maxParallelism); mp&(mp-1) == 0 {
		t.kgMask = mp - 1
	}
	if cfg.ttl > 0 && t.ttl == 0 {
		t.ttl = 1
	}
	t.inPlace = t.exact && t.ttl == 0 && clone == nil
	t.fast = t.flat && t.keyHash == keyHash64 && t.kgMask != 0 && t.ttl == 0
	if t.changelog && t.ttl == 0 {
		t.diff = diffFor(vc)
	}
	if err := b.Register(t); err != nil {
		return nil, err
	}
	return t, nil
}

// Name implements Table.
func (t *cowTable[K, V]) Name() string { return t.name }

// hashKey returns mix64 of k's stable hash: HasherFor's hash, computed
// inline for strings and integers.
func (t *cowTable[K, V]) hashKey(k K) uint64 {
	var h uint64
	switch t.keyHash {
	case keyHash64:
		h = HashUint64(*(*uint64)(unsafe.Pointer(&k)))
	case keyHashString:
		h = HashString(*(*string)(unsafe.Pointer(&k)))
	case keyHashInt32:
		h = HashUint64(uint64(*(*int32)(unsafe.Pointer(&k))))
	case keyHashUint32:
		h = HashUint64(uint64(*(*uint32)(unsafe.Pointer(&k))))
	default:
		h = t.hash(k)
	}
	return mix64(h)
}

// keyGroup returns the key group of a key whose mixed hash is m, as
// KeyGroupFor does.
func (t *cowTable[K, V]) keyGroup(m uint64) int {
	if t.kgMask != 0 || t.maxPar == 1 {
		return int(m & t.kgMask)
	}
	return int(m % uint64(t.maxPar))
}

// find returns the kgTable of k, k's mixed hash, and the slot that holds k
// (found) or the empty slot where it would be inserted (-1 if the table
// has no slots). An expired entry is dropped and not found. It refuses keys outside the subtask's range (a keyed
// operator fed with records partitioned by another key).
//
// find is the hot path of every access. At 1M keys each lookup misses the
// cache once, and the fewer instructions (and stores, and spills around
// calls) lie between two lookups, the more of their misses the core
// overlaps. So the common case (flat 8-byte integer keys, a power-of-two
// max parallelism) is written out here without a call; findAny does the
// rest.
func (t *cowTable[K, V]) find(k K) (*kgTable[K, V], uint64, int, bool) {
	if !t.fast {
		return t.findAny(k)
	}
	m := mix64(HashUint64(*(*uint64)(unsafe.Pointer(&k))))
	g := int(m&t.kgMask) - t.rng.Start
	if uint(g) >= uint(len(t.shards)) {
		return t.findAny(k)
	}
	s := &t.shards[g]
	slots, used := s.slots, s.used
	c := len(slots)
	if c == 0 {
		t.lastSlot = nil
		return s, m, -1, false
	}
	// The load factor is below 1: an empty slot ends every probe.
	i := home(m, c)
	for used[i>>6]&(1<<(i&63)) != 0 {
		if slots[i].k == k {
			// Operators read and then write the same key: remember the
			// slot.
			if t.inPlace && !s.shared {
				t.lastSlot = &slots[i]
				if t.changelog {
					t.lastChanges, t.lastIndex = s.changes, i
				}
			} else {
				t.lastSlot = nil
			}
			return s, m, i, true
		}
		if i++; i == c {
			i = 0
		}
	}
	t.lastSlot = nil
	return s, m, i, false
}

// findAny is find for any table.
func (t *cowTable[K, V]) findAny(k K) (s *kgTable[K, V], m uint64, i int, found bool) {
	if t.background != nil {
		// find's inline path is off until the restore is over.
		t.awaitKey(k)
	}
	m = t.hashKey(k)
	kg := t.keyGroup(m)
	if !t.rng.Contains(kg) {
		t.outOfRange(k, kg)
	}
	s = &t.shards[kg-t.rng.Start]
	i, found = t.probe(s, k, m)
	if found && t.ttl > 0 && !t.live(s, i) {
		// Expired: drop it (as WithTTL says) and find where k would go
		// now that entries moved.
		t.drop(s, i)
		i, found = t.probe(s, k, m)
	}
	if found && t.inPlace && !s.shared {
		t.lastSlot = &s.slots[i]
		if t.changelog {
			t.lastChanges, t.lastIndex = s.changes, i
		}
	} else {
		t.lastSlot = nil
	}
	return s, m, i, found
}

// outOfRange panics: key k of key group kg is not in the subtask's range.
func (t *cowTable[K, V]) outOfRange(k K, kg int) {
	panic(fmt.Sprintf("state %q: key %v is in key group %d, outside this subtask's range %v (was the stream keyed by the same key?)", t.name, k, kg, t.rng))
}

// probe returns the slot of s that holds k, whose mixed hash is m, or the
// empty slot where k would be inserted (-1 if s has no slots).
func (t *cowTable[K, V]) probe(s *kgTable[K, V], k K, m uint64) (int, bool) {
	slots, used := s.slots, s.used
	c := len(slots)
	if c == 0 {
		return -1, false
	}
	// The load factor is below 1: an empty slot ends every probe.
	i := home(m, c)
	if t.flat {
		for {
			if used[i>>6]&(1<<(i&63)) == 0 {
				return i, false
			}
			if slots[i].k == k {
				return i, true
			}
			if i++; i == c {
				i = 0
			}
		}
	}
	tag := tagOf(m)
	for {
		if used[i>>6]&(1<<(i&63)) == 0 {
			return i, false
		}
		if s.tags[i] == tag {
			if sk := slots[i].k; sk == k && (t.exact || t.hashKey(sk) == m) {
				return i, true
			}
		}
		if i++; i == c {
			i = 0
		}
	}
}

// bit returns 1 for true and 0 for false.
func bit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// isUsed reports whether slot i of s holds an entry.
func (s *kgTable[K, V]) isUsed(i int) bool { return s.used[i>>6]&(1<<(i&63)) != 0 }

// writable makes s's arrays the table's own, copying them first if a
// capture holds them.
func (t *cowTable[K, V]) writable(s *kgTable[K, V]) {
	if !s.shared {
		return
	}
	t.lastSlot = nil
	t.writableShard(s)
}

// writableShard is writable but for lastSlot, which the caller clears. In
// a table that is not slabbed it changes nothing but s.
func (t *cowTable[K, V]) writableShard(s *kgTable[K, V]) {
	if !s.shared {
		return
	}
	slots, slab := t.newSlots(len(s.slots))
	copySlots(slots, s.slots)
	t.setSlots(s, slots, slab)
	s.used = slices.Clone(s.used)
	s.tags = slices.Clone(s.tags)
	s.written = slices.Clone(s.written)
	s.epochs = slices.Clone(s.epochs)
	s.shared = false
}

// grow replaces s's arrays (shared or not) by larger ones that fit need
// entries, holding the same entries.
func (t *cowTable[K, V]) grow(s *kgTable[K, V], need int) {
	t.lastSlot = nil
	t.growShard(s, need)
}

// growShard is grow but for lastSlot, which the caller clears. In a table
// that is not slabbed it changes nothing but s, and calls only the key
// hash beyond it: restoreGroups grows shards so in parallel.
func (t *cowTable[K, V]) growShard(s *kgTable[K, V], need int) {
	c := max(minSlots, len(s.slots)+len(s.slots)/2)
	for need*maxLoadDen > c*maxLoadNum {
		c += c / 2
	}
	old := *s
	slots, slab := t.newSlots(c)
	t.setSlots(s, slots, slab)
	s.used = make([]uint64, (c+63)/64)
	s.tags, s.written, s.epochs = nil, nil, nil
	if !t.flat {
		s.tags = make([]uint8, c)
	}
	if t.ttl > 0 {
		s.written = make([]int64, c)
	}
	if t.clone != nil {
		s.epochs = make([]uint64, c)
	}
	s.shared = false
	if t.changelog {
		t.growChanges(s, c)
	}
	for j := range old.slots {
		if !old.isUsed(j) {
			continue
		}
		m := t.hashKey(old.slots[j].k)
		i := home(m, c)
		for s.isUsed(i) {
			if i++; i == c {
				i = 0
			}
		}
		s.used[i>>6] |= 1 << (i & 63)
		s.slots[i] = old.slots[j]
		if s.tags != nil {
			s.tags[i] = tagOf(m)
		}
		if s.written != nil {
			s.written[i] = old.written[j]
		}
		if s.epochs != nil {
			s.epochs[i] = old.epochs[j]
		}
		if s.changes != nil {
			s.changes.move(i, j, old.changes)
		}
	}
}

// insert adds k, whose mixed hash is m, to s, which does not hold it; i is
// the empty slot probe returned for it. It returns k's slot, holding the
// zero value; the caller sets the value and the entry's write time and
// epoch.
func (t *cowTable[K, V]) insert(s *kgTable[K, V], k K, m uint64, i int) int {
	if (s.n+1)*maxLoadDen > len(s.slots)*maxLoadNum {
		t.grow(s, s.n+1)
		i, _ = t.probe(s, k, m)
	} else {
		t.writable(s)
	}
	s.used[i>>6] |= 1 << (i & 63)
	if s.tags != nil {
		s.tags[i] = tagOf(m)
	}
	s.slots[i].k = k
	s.n++
	if s.changes != nil {
		s.changes.inserted++
	}
	return i
}

// touch records a write of slot i of s (which is writable).
func (t *cowTable[K, V]) touch(s *kgTable[K, V], i int) {
	if s.written != nil {
		s.written[i] = t.now()
	}
	if s.epochs != nil {
		s.epochs[i] = t.epoch
	}
	if s.changes != nil {
		s.changes.record(i, s.slots[i].k)
	}
}

// deleteAt removes the entry in slot i of s (which is writable), moving
// back the entries after it that probing would otherwise no longer reach.
func (t *cowTable[K, V]) deleteAt(s *kgTable[K, V], i int) {
	if s.changes != nil {
		s.changes.recordDelete(i, s.slots[i].k, s.slots[i].v)
	}
	t.removeAt(s, i)
	t.lastSlot = nil
}

// removeAt is deleteAt without listing the delete among the changes, and
// without clearing lastSlot: like growShard it changes nothing but s in a
// table that is not slabbed, so that restoreGroups may remove entries of
// several shards at once (it clears lastSlot before).
func (t *cowTable[K, V]) removeAt(s *kgTable[K, V], i int) {
	c := len(s.slots)
	for j := i; ; {
		if j++; j == c {
			j = 0
		}
		if !s.isUsed(j) {
			break
		}
		// The entry at j may move to i unless its home lies in (i, j]
		// cyclically: then i is before its home.
		h := home(t.hashKey(s.slots[j].k), c)
		if i < j && (h <= i || h > j) || j < i && h <= i && h > j {
			s.slots[i] = s.slots[j]
			if s.tags != nil {
				s.tags[i] = s.tags[j]
			}
			if s.written != nil {
				s.written[i] = s.written[j]
			}
			if s.epochs != nil {
				s.epochs[i] = s.epochs[j]
			}
			if s.changes != nil {
				s.changes.shift(i, j)
			}
			i = j
		}
	}
	s.used[i>>6] &^= 1 << (i & 63)
	if s.changes != nil {
		s.changes.clear(i)
	}
	s.slots[i] = kv[K, V]{}
	s.n--
}

// expiringTable is implemented by the tables whose entries may expire.
type expiringTable interface {
	// expiryAt returns the table's TTL and its clock now, or false if
	// its entries do not expire.
	expiryAt() (expiryAt, bool)
}

// expiryAt is a table's TTL and a reading of its clock, in milliseconds.
type expiryAt struct{ ttl, now int64 }

// expired reports whether an entry written at w has expired.
func (x expiryAt) expired(w int64) bool { return x.now-w >= x.ttl }

// expiryAt implements expiringTable.
func (t *cowTable[K, V]) expiryAt() (expiryAt, bool) {
	if t.ttl == 0 {
		return expiryAt{}, false
	}
	return expiryAt{ttl: t.ttl, now: t.now()}, true
}

// live reports whether slot i of s has not expired.
func (t *cowTable[K, V]) live(s *kgTable[K, V], i int) bool {
	return t.ttl == 0 || t.now()-s.written[i] < t.ttl
}

// drop deletes the expired entry in slot i of s, as WithTTL says.
func (t *cowTable[K, V]) drop(s *kgTable[K, V], i int) {
	t.writable(s)
	t.deleteAt(s, i)
}

// get returns the value of k.
func (t *cowTable[K, V]) get(k K) (v V, ok bool) {
	if s, _, i, found := t.find(k); found {
		v, ok = s.slots[i].v, true
	}
	return v, ok
}

// exactEqual reports whether == on values of t implies equal encodings,
// and so equal key groups: not for floats (+0 == -0), nor for pointers and
// interfaces, nor for types holding them.
func exactEqual(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.Interface, reflect.Pointer:
		return false
	case reflect.Array:
		return exactEqual(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !exactEqual(t.Field(i).Type) {
				return false
			}
		}
	}
	return true
}

// put sets the value of k.
func (t *cowTable[K, V]) put(k K, v V) {
	if p := t.lastSlot; p != nil && p.k == k {
		// The read before found k, and nothing has moved it since.
		if t.changelog {
			t.recordLast(k)
		}
		p.v = v
	} else {
		t.putAny(k, v)
	}
}

// recordLast records in the changelog (t.changelog) a write of k through
// lastSlot that is about to happen.
func (t *cowTable[K, V]) recordLast(k K) {
	if t.lastChanges != nil {
		if t.diff != nil {
			t.lastChanges.recordOld(t.lastIndex, k, t.lastSlot.v, true)
		} else {
			t.lastChanges.record(t.lastIndex, k)
		}
	}
}

// putAny is put without lastSlot.
func (t *cowTable[K, V]) putAny(k K, v V) {
	s, m, i, ok := t.find(k)
	if ok {
		t.writable(s)
	} else {
		i = t.insert(s, k, m, i)
		t.inserted++
	}
	if t.diff != nil {
		t.recordOld(s, i, ok)
	}
	s.slots[i].v = v
	t.touch(s, i)
}

// recordOld lists the key in slot i of s (writable) with the value it is
// about to lose (had: it had one), when the table's deltas write values
// as edits of the old ones.
func (t *cowTable[K, V]) recordOld(s *kgTable[K, V], i int, had bool) {
	if t.diff != nil && s.changes != nil {
		s.changes.recordOld(i, s.slots[i].k, s.slots[i].v, had)
	}
}

func (t *cowTable[K, V]) del(k K) {
	s, _, i, ok := t.find(k)
	if !ok {
		return
	}
	t.writable(s)
	t.deleteAt(s, i)
}

// update changes the value of k in place through f, which gets a value
// it may modify (cloned first if a capture may share it) and whether k had
// one; f returns the new value, or keep=false to delete k.
func (t *cowTable[K, V]) update(k K, f func(v V, ok bool) (V, bool)) {
	s, m, i, ok := t.find(k)
	var v V
	if ok {
		v = s.slots[i].v
		if t.clone != nil && s.epochs[i] != t.epoch {
			v = t.clone(v)
		}
	}
	nv, keep := f(v, ok)
	if !keep {
		if ok {
			t.writable(s)
			t.deleteAt(s, i)
		}
		return
	}
	if ok {
		t.writable(s)
	} else {
		i = t.insert(s, k, m, i)
		t.inserted++
	}
	if t.diff != nil {
		t.recordOld(s, i, ok)
	}
	s.slots[i].v = nv
	t.touch(s, i)
}

// rangeKeys calls f for every live entry until f returns false. f may
// write the table: each key group is iterated as it was when its turn
// came (a write during the iteration copies it first, as after a capture).
func (t *cowTable[K, V]) rangeKeys(f func(K, V) bool) {
	t.finishRestore()
	for g := range t.shards {
		s := &t.shards[g]
		if s.n == 0 {
			continue
		}
		slots, used, written := s.slots, s.used, s.written
		wasShared, epoch := s.shared, t.epoch
		s.shared = true
		t.lastSlot = nil
		now := int64(0)
		if t.ttl > 0 {
			now = t.now()
		}
		stop := false
		for i := range slots {
			if used[i>>6]&(1<<(i&63)) == 0 || t.ttl > 0 && now-written[i] >= t.ttl {
				continue
			}
			if !f(slots[i].k, slots[i].v) {
				stop = true
				break
			}
		}
		// Unless f wrote this key group (which copied it) or captured the
		// state, it is as it was.
		if t.epoch == epoch && &s.slots[0] == &slots[0] {
			s.shared = wasShared
		}
		if stop {
			return
		}
	}
}

func (t *cowTable[K, V]) len() int {
	t.finishRestore()
	n := 0
	for i := range t.shards {
		n += t.shards[i].n
	}
	return n
}

// Freeze implements Table: every key group becomes shared, and entries
// written from now on belong to a new epoch.
func (t *cowTable[K, V]) Freeze() FrozenTable {
	t.finishRestore()
	f := &frozenCow[K, V]{t: t, shards: make([]kgTable[K, V], len(t.shards))}
	if t.ttl > 0 {
		f.now = t.now()
	}
	for i := range t.shards {
		t.shards[i].shared = true
		f.shards[i] = t.shards[i]
		if c := t.shards[i].changes; c != nil {
			f.shards[i].changes = c.take()
		}
	}
	t.lastSlot = nil
	t.epoch++
	return f
}

// frozenCow holds the arrays of every key group at a capture; the table
// never writes them again (it copies a shared kgTable first).
type frozenCow[K comparable, V any] struct {
	t      *cowTable[K, V]
	shards []kgTable[K, V]
	now    int64
}

// AppendGroup implements FrozenTable. An entry's encoding is its key, its
// value and its write time (0 without TTL, so that adding or removing a
// TTL keeps snapshots readable); expired entries are left out.
func (f *frozenCow[K, V]) AppendGroup(dst []byte, kg int) ([]byte, int) {
	t := f.t
	n := f.eachLive(kg, func(e *kv[K, V], w int64) {
		dst = t.keyCodec.Append(dst, e.k)
		dst = t.appendValue(dst, &e.v)
		dst = binary.AppendVarint(dst, w)
	})
	return dst, n
}

// eachLive calls fn with every entry of key group kg at the capture that
// has not expired, and its write time (0 without TTL), and returns how
// many there were (none for a key group outside the range).
func (f *frozenCow[K, V]) eachLive(kg int, fn func(e *kv[K, V], written int64)) int {
	t := f.t
	if !t.rng.Contains(kg) {
		return 0
	}
	s := &f.shards[kg-t.rng.Start]
	n := 0
	for i := range s.slots {
		prefetchAheadOf(s.slots, i, t.refs)
		if !s.isUsed(i) {
			continue
		}
		var w int64
		if t.ttl > 0 {
			if w = s.written[i]; f.now-w >= t.ttl {
				continue
			}
		}
		fn(&s.slots[i], w)
		n++
	}
	return n
}

// RestoreGroup implements Table.
func (t *cowTable[K, V]) RestoreGroup(kg int, entries int, data []byte) error {
	if err := t.settle(); err != nil {
		return err
	}
	if !t.rng.Contains(kg) {
		return nil
	}
	s := t.restoreShard(kg, entries, len(data))
	now := t.restoreNow()
	decodeKey, decodeValue := decoderOf(t.keyCodec), decoderOf(t.valueCodec)
	for i := 0; i < entries; i++ {
		k, n, err := decodeKey(data)
		if err != nil {
			return fmt.Errorf("key group %d, entry %d: decoding key: %w", kg, i, err)
		}
		data = data[n:]
		v, n, err := decodeValue(data)
		if err != nil {
			return fmt.Errorf("key group %d, entry %d: decoding value: %w", kg, i, err)
		}
		data = data[n:]
		w, n := binary.Varint(data)
		if n <= 0 {
			return fmt.Errorf("key group %d, entry %d: decoding write time: %w", kg, i, ErrShortBuffer)
		}
		data = data[n:]
		if err := t.restoreEntry(s, kg, i, k, v, w, now); err != nil {
			return err
		}
	}
	if len(data) != 0 {
		return fmt.Errorf("key group %d: %d bytes left after %d entries", kg, len(data), entries)
	}
	return nil
}

// restoreGroup restores one group of any form; merged entries are decoded
// key and value from their own bytes (restoreEntries).
func (t *cowTable[K, V]) restoreGroup(g restoredGroup) error {
	if err := t.settle(); err != nil {
		return err
	}
	if !g.delimited() {
		return t.RestoreGroup(g.kg, g.entries, g.data)
	}
	if g.lazy != nil {
		if !t.rng.Contains(g.kg) {
			return nil
		}
		return t.decodeLazy(t.restoreShard(g.kg, g.entries, g.entries), g.kg, g.lazy, t.restoreNow())
	}
	es, err := g.mergedEntries()
	if err != nil {
		return err
	}
	return t.restoreEntries(g.kg, es)
}

// restoreEntries decodes each key and value of merged entries from its own
// bytes, so that no copy of the key group in RestoreGroup's encoding is
// built for it.
func (t *cowTable[K, V]) restoreEntries(kg int, entries []mergedEntry) error {
	if err := t.settle(); err != nil {
		return err
	}
	if !t.rng.Contains(kg) {
		return nil
	}
	return t.decodeEntries(t.restoreShard(kg, len(entries), len(entries)), kg, entries, t.restoreNow())
}

// restoreNow is the write time of restored entries written without TTL:
// their TTL clock starts at the restore. It reads the table's clock only
// when the table has a TTL.
func (t *cowTable[K, V]) restoreNow() int64 {
	if t.ttl == 0 {
		return 0
	}
	return t.now()
}

// restoreGroups implements groupsRestorer. Groups of distinct key groups
// from the files of incremental checkpoints are decoded on up to workers
// goroutines, each into its key group's shard, made large enough for them
// beforehand so that no insert grows a shard (growing takes from the
// table's shared slab). Any other mix of groups, and the groups of a table
// whose keys are hashed from their encoding (HasherFor's hash of them
// reuses one buffer), are restored one by one.
func (t *cowTable[K, V]) restoreGroups(groups []restoredGroup, workers int) error {
	if err := t.settle(); err != nil {
		return err
	}
	seen := make(map[int]bool, len(groups))
	_, ownHash := t.keyCodec.(KeyHasher[K])
	parallel := workers > 1 && len(groups) > 1 && (t.keyHash != keyHashCodec || ownHash)
	for _, g := range groups {
		if !g.delimited() || !t.rng.Contains(g.kg) || seen[g.kg] {
			parallel = false
			break
		}
		seen[g.kg] = true
	}
	if !parallel {
		for i, g := range groups {
			if err := t.restoreGroup(g); err != nil {
				return err
			}
			groups[i] = restoredGroup{}
		}
		return nil
	}
	// The shards are grown before the decode, which then writes nothing
	// of the table outside a shard. A table that is not slabbed (its
	// slots hold pointers) grows each shard in the worker that decodes
	// it, which changes nothing else (growShard): the fresh memory's page
	// faults are then taken on every core, and each shard's arrays just
	// before they are filled.
	t.lastSlot = nil
	shards := make([]*kgTable[K, V], len(groups))
	for i, g := range groups {
		shards[i] = &t.shards[g.kg-t.rng.Start]
		if t.slabbed {
			t.restoreShard(g.kg, g.entries, g.entries)
			t.writable(shards[i])
		}
	}
	now := t.restoreNow()
	decode := func(i int) error {
		g := groups[i]
		groups[i] = restoredGroup{}
		if s := shards[i]; !t.slabbed {
			t.growRestored(s, s.n+g.entries)
			t.writableShard(s)
		}
		if g.lazy != nil {
			return t.decodeLazy(shards[i], g.kg, g.lazy, now)
		}
		es, err := g.mergedEntries()
		if err != nil {
			return err
		}
		if len(es) != g.entries {
			return fmt.Errorf("key group %d: %d entries, %d counted", g.kg, len(es), g.entries)
		}
		return t.decodeEntries(shards[i], g.kg, es, now)
	}
	entries := 0
	for _, g := range groups {
		entries += g.entries
	}
	if t.slabbed || entries < backgroundMinEntries {
		return forEach(len(groups), workers, decode)
	}
	shardOf := make([]int, len(groups))
	for i, g := range groups {
		shardOf[i] = g.kg - t.rng.Start
	}
	t.background = newBackgroundRestore(t.name, len(t.shards), shardOf, decode)
	t.background.fast, t.fast = t.fast, false
	t.background.start(workers)
	return nil
}

// decodeEntries decodes the entries of key group kg into its shard s,
// those written without TTL at now. Beyond s, it calls the table's codecs
// and key hash only, and changes nothing of the table outside s while s
// has room for the entries.
func (t *cowTable[K, V]) decodeEntries(s *kgTable[K, V], kg int, entries []mergedEntry, now int64) error {
	d := t.newEntryDecoder(s, kg, now)
	defer d.release()
	for _, e := range entries {
		if err := d.entry(e.key, e.value, e.w); err != nil {
			return err
		}
	}
	d.flush()
	return nil
}

// decodeLazy is decodeEntries for a merge not done yet: a key its changes
// write again is written again, as placeRestored writes a key it holds.
func (t *cowTable[K, V]) decodeLazy(s *kgTable[K, V], kg int, c *chainMerge, now int64) error {
	d := t.newEntryDecoder(s, kg, now)
	defer d.release()
	d.fresh = s.n == 0
	baseDone := func() {
		d.flush()
		d.fresh = false
	}
	if err := c.replay(d.entry, d.remove, baseDone); err != nil {
		return err
	}
	d.flush()
	return nil
}

// entryDecoder decodes the restored entries of one key group into its
// shard, with one run of each codec's decoder (RunDecoder). It gathers
// the entries it decoded, with their hashes, in a batch, and writes them
// into the shard in the order of their home slots (flush), so that the
// writes sweep the shard's arrays instead of landing at random in them (a
// restored shard is larger than the core's caches): BENCHMARKS.md has
// what it saved. A delete, and the end of the entries, writes the batch
// first.
type entryDecoder[K comparable, V any] struct {
	t           *cowTable[K, V]
	s           *kgTable[K, V]
	kg, i       int
	now         int64
	decodeKey   func([]byte) (K, int, error)
	decodeValue func([]byte) (V, int, error)
	batch       *restoreBatch[K, V]
	// batchMax is how many entries the batch holds at most
	// (restoreBatchBytes).
	batchMax int
	// fresh: the entries staged are a base's, each key once, into a
	// shard that held none of them: flush places each in the first free
	// slot from its home without looking for it.
	fresh bool
}

// restoreBatch is what an entryDecoder gathers: entries decoded, their
// mixed hashes and (with TTL) write times, and the order flush writes
// them in (perm, sorted through tmp).
type restoreBatch[K comparable, V any] struct {
	kvs  []kv[K, V]
	ms   []uint64
	ws   []int64
	perm []int32
	tmp  []int32
}

// restoreBatchBytes bounds the entries a batch holds before it is
// written (at least homeBuckets of them): a few MB, which the writes read
// back from cache.
const restoreBatchBytes = 4 << 20

// homeBuckets is the number of buckets of each counting pass of flush's
// sort, on one byte of the hash.
const homeBuckets = 256

func (t *cowTable[K, V]) newEntryDecoder(s *kgTable[K, V], kg int, now int64) *entryDecoder[K, V] {
	d := &entryDecoder[K, V]{t: t, s: s, kg: kg, now: now, decodeKey: decoderOf(t.keyCodec), decodeValue: decoderOf(t.valueCodec),
		batchMax: max(homeBuckets, restoreBatchBytes/int(unsafe.Sizeof(kv[K, V]{})))}
	if b, ok := t.batches.Get().(*restoreBatch[K, V]); ok {
		d.batch = b
	} else {
		d.batch = &restoreBatch[K, V]{}
	}
	return d
}

// release gives the decoder's batch back for another key group's decode,
// dropping what a failed decode left in it.
func (d *entryDecoder[K, V]) release() {
	b := d.batch
	clear(b.kvs[:cap(b.kvs)])
	b.kvs, b.ms, b.ws = b.kvs[:0], b.ms[:0], b.ws[:0]
	d.t.batches.Put(b)
	d.batch = nil
}

// stage adds entry k, v (of mixed hash m, written at w) to the batch,
// writing the batch when it is full.
func (d *entryDecoder[K, V]) stage(k K, m uint64, v V, w int64) {
	b := d.batch
	b.kvs = append(b.kvs, kv[K, V]{k: k, v: v})
	b.ms = append(b.ms, m)
	if d.t.ttl > 0 {
		b.ws = append(b.ws, w)
	}
	if len(b.kvs) >= d.batchMax {
		d.flush()
	}
}

// flush writes the batch's entries into the shard, sorted by the top 16
// bits of their hashes: by their home slots (home is monotonic in the top
// 32 bits of the hash, whatever the shard's size) to within a slot or two
// in a shard of up to about 100,000 slots, so that the writes sweep its
// arrays in order, as the core's prefetcher follows, where writes in the
// order of a range of slots held in cache still missed once per line. The
// sort is stable, and the entries of one key share their hash, so a key
// written twice ends with the value it was written last, as writing the
// entries in their order would.
func (d *entryDecoder[K, V]) flush() {
	b := d.batch
	n := len(b.kvs)
	if n == 0 {
		return
	}
	t, s := d.t, d.s
	// Write times are kept with TTL only; else every entry's is 0.
	written := func(i int32) int64 {
		if len(b.ws) == 0 {
			return 0
		}
		return b.ws[i]
	}
	b.perm = slices.Grow(b.perm[:0], n)[:n]
	if n < homeBuckets {
		// Too few to sort: in their order.
		for i := range b.perm {
			b.perm[i] = int32(i)
		}
	} else {
		// Two stable counting passes, on the hash's second byte and then
		// on its top one.
		b.tmp = slices.Grow(b.tmp[:0], n)[:n]
		var starts [homeBuckets]int32
		for _, m := range b.ms {
			starts[m>>48&0xff]++
		}
		bucketStarts(&starts)
		for i, m := range b.ms {
			j := &starts[m>>48&0xff]
			b.tmp[*j] = int32(i)
			*j++
		}
		starts = [homeBuckets]int32{}
		for _, m := range b.ms {
			starts[m>>56]++
		}
		bucketStarts(&starts)
		for _, i := range b.tmp {
			j := &starts[b.ms[i]>>56]
			b.perm[*j] = i
			*j++
		}
	}
	if d.fresh {
		for _, i := range b.perm {
			t.placeFresh(s, b.kvs[i].k, b.ms[i], b.kvs[i].v, written(i), d.now)
		}
	} else {
		for _, i := range b.perm {
			t.placeRestored(s, b.kvs[i].k, b.ms[i], b.kvs[i].v, written(i), d.now)
		}
	}
	clear(b.kvs)
	b.kvs, b.ms, b.ws = b.kvs[:0], b.ms[:0], b.ws[:0]
}

// bucketStarts turns the counts of a counting sort's buckets into the
// index each bucket starts at.
func bucketStarts(counts *[homeBuckets]int32) {
	at := int32(0)
	for i, c := range counts {
		counts[i] = at
		at += c
	}
}

// key numbers the next entry, i, and decodes its key.
func (d *entryDecoder[K, V]) key(key []byte) (i int, k K, err error) {
	i = d.i
	d.i++
	k, n, err := d.decodeKey(key)
	if err == nil && n != len(key) {
		err = fmt.Errorf("%d bytes after the key", len(key)-n)
	}
	if err != nil {
		return i, k, fmt.Errorf("key group %d, entry %d: decoding key: %w", d.kg, i, err)
	}
	return i, k, nil
}

// entry decodes the next entry, written at w, into the shard.
func (d *entryDecoder[K, V]) entry(key, value []byte, w int64) error {
	i, k, err := d.key(key)
	if err != nil {
		return err
	}
	v, n, err := d.decodeValue(value)
	if err == nil && n != len(value) {
		err = fmt.Errorf("%d bytes after the value", len(value)-n)
	}
	if err != nil {
		return fmt.Errorf("key group %d, entry %d: decoding value: %w", d.kg, i, err)
	}
	m, err := d.t.restoredHash(d.kg, i, k)
	if err != nil {
		return err
	}
	d.stage(k, m, v, w)
	return nil
}

// remove decodes the key of a delete the restore replays and deletes it
// from the shard, if it holds it.
func (d *entryDecoder[K, V]) remove(key []byte) error {
	i, k, err := d.key(key)
	if err != nil {
		return err
	}
	d.flush()
	t, s := d.t, d.s
	m, err := t.restoredHash(d.kg, i, k)
	if err != nil {
		return err
	}
	if j, ok := t.probe(s, k, m); ok {
		// The chain holds the delete: the next delta need not write it.
		t.writable(s)
		t.removeAt(s, j)
	}
	return nil
}

// restoreShard returns the shard of key group kg, with room made for the
// entries of a restore up front; every entry takes at least one byte, so
// size (the bytes they are decoded from) bounds what a corrupt count can
// reserve.
func (t *cowTable[K, V]) restoreShard(kg, entries, size int) *kgTable[K, V] {
	t.lastSlot = nil
	s := &t.shards[kg-t.rng.Start]
	t.growRestored(s, s.n+min(entries, size))
	return s
}

// growRestored grows s, if need be, to fit need entries of a restore,
// which fills its slots at once: fresh slots that hold pointers are
// mapped first (prefault). Like growShard it changes nothing but s in a
// table that is not slabbed.
func (t *cowTable[K, V]) growRestored(s *kgTable[K, V], need int) {
	if need*maxLoadDen <= len(s.slots)*maxLoadNum {
		return
	}
	n := s.n
	t.growShard(s, need)
	if !t.slabbed && n == 0 && len(s.slots)*int(unsafe.Sizeof(s.slots[0])) >= faultedBytes {
		// Empty, the grown slots were not written: they are make's.
		prefault(s.slots)
	}
}

// restoreEntry puts the restored entry i of key group kg, written at w
// (0: without TTL, now then), into its shard s.
func (t *cowTable[K, V]) restoreEntry(s *kgTable[K, V], kg, i int, k K, v V, w, now int64) error {
	m, err := t.restoredHash(kg, i, k)
	if err != nil {
		return err
	}
	t.placeRestored(s, k, m, v, w, now)
	return nil
}

// restoredHash returns the mixed hash of k, restored as entry i of key
// group kg, checking that k belongs to kg.
func (t *cowTable[K, V]) restoredHash(kg, i int, k K) (uint64, error) {
	m := t.hashKey(k)
	if got := t.keyGroup(m); got != kg {
		return 0, fmt.Errorf("key group %d, entry %d: the key belongs to key group %d (was the max parallelism or the key type changed?)", kg, i, got)
	}
	return m, nil
}

// placeFresh is placeRestored for a key the shard does not hold (an
// entry of a base, which holds each key once, into a shard that held
// none of its keys): it takes the first free slot from the key's home,
// reading neither tags nor keys.
func (t *cowTable[K, V]) placeFresh(s *kgTable[K, V], k K, m uint64, v V, w, now int64) {
	c := len(s.slots)
	if c == 0 {
		t.placeRestored(s, k, m, v, w, now)
		return
	}
	i := home(m, c)
	for s.used[i>>6]&(1<<(i&63)) != 0 {
		if i++; i == c {
			i = 0
		}
	}
	t.setRestored(s, t.insertRestored(s, k, m, i), v, w, now)
}

// placeRestored puts restored entry k, v (k's mixed hash m, written at w;
// 0: without TTL, now then) into its shard s.
func (t *cowTable[K, V]) placeRestored(s *kgTable[K, V], k K, m uint64, v V, w, now int64) {
	j, ok := t.probe(s, k, m)
	if ok {
		t.writable(s)
	} else {
		j = t.insertRestored(s, k, m, j)
	}
	t.setRestored(s, j, v, w, now)
}

// insertRestored inserts restored key k (mixed hash m) into s at free
// slot i, or where it goes once s grew, and returns its slot.
func (t *cowTable[K, V]) insertRestored(s *kgTable[K, V], k K, m uint64, i int) int {
	j := t.insert(s, k, m, i)
	if s.changes != nil {
		// A restored key is state the checkpoint holds, not a change
		// of the interval: counted, it would make every restored key
		// look written once (appends) at the first capture.
		s.changes.inserted--
	}
	return j
}

// setRestored sets the value of the restored entry in slot j of s,
// written at w (0: without TTL, now then).
func (t *cowTable[K, V]) setRestored(s *kgTable[K, V], j int, v V, w, now int64) {
	s.slots[j].v = v
	if s.written != nil {
		if w == 0 {
			// Written without TTL: the clock starts at the restore.
			w = now
		}
		s.written[j] = w
	}
	if s.epochs != nil {
		s.epochs[j] = t.epoch
	}
}

// flatKey reports whether keys of type t compare with == in their slots
// alone: they hold no pointers (a string's bytes are elsewhere) and ==
// implies equal encodings (exactEqual).
func flatKey(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	case reflect.Array:
		return flatKey(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !flatKey(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
