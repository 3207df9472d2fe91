package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// BytesStore is an ordered key-value store of byte strings: what a backend
// that keeps keyed state outside the Go heap (Pebble) gives the typed
// states. It is used by the task goroutine only.
type BytesStore interface {
	// Get returns the value of key. The value is valid until the next call
	// of a method of the store and must not be modified.
	Get(key []byte) (value []byte, ok bool, err error)
	// Set sets the value of key. The store copies key and value.
	Set(key, value []byte) error
	// Delete removes key, if present.
	Delete(key []byte) error
	// Scan calls f for every key in [lower, upper) in ascending order, until
	// f returns false. key and value are valid during the call only. f may
	// call Get, Set and Delete; the scan does not see what they change.
	Scan(lower, upper []byte, f func(key, value []byte) bool) error
}

// BytesBackend is a backend whose tables live in a BytesStore. The typed
// states (NewValue, NewList, ...) detect it and keep their entries in its
// store, under the keys described at KeyGroupPrefix; Register receives
// their tables, which implement BytesTable.
type BytesBackend interface {
	Backend
	// Store returns the backend's store; valid once the backend is open.
	Store() BytesStore
	// Range returns the key groups the backend holds.
	Range() KeyGroupRange
	// MaxParallelism returns the number of key groups of the job.
	MaxParallelism() int
}

// BytesTable is the Table of a typed state on a BytesBackend. Its Freeze
// and RestoreGroup are not used: the backend captures and restores the
// store as a whole.
type BytesTable interface {
	Table
	// PrepareCapture writes what the table must add to the store before
	// the backend captures it: with a TTL, the capture time of every key
	// group (entries that expired by then count as dropped from the
	// checkpoint), and the deletion of a bounded number of expired entries.
	PrepareCapture() error
	// Check verifies every entry of the table in the store: that keys and
	// values decode and that each key lies in the key group it is stored
	// under. A backend calls it at registration when the store holds data
	// it has not verified (key-group data given to Restore).
	Check() error
}

// Storage keys of byte tables. Every key starts with the key group, so that
// a key group is one contiguous key range:
//
//	key group   2 bytes, big-endian
//	table name  uvarint length + bytes (never empty)
//	key         the key codec's encoding (self-delimiting)
//	[map only]  0x00 for the map's header, or 0x01 + the user key's encoding
//
// Values:
//
//	value, reducing, aggregating  varint write time + the value's encoding
//	list                          varint write time + uvarint length + the elements' encodings
//	map header                    varint write time + uvarint entry count
//	map entry                     the user value's encoding
//
// The write time is 0 without TTL. A key-group prefix followed by an empty
// name (0x00) holds the key group's metadata: 0x00, uvarint length + a
// table's name → the clock (8 bytes, big-endian, offset by 2^63) of the
// last capture that dropped the table's expired entries.
const keyGroupPrefixLen = 2

// KeyGroupPrefix appends the 2-byte prefix of the storage keys of key group
// kg to dst: the keys of key groups [a, b) are the keys from
// KeyGroupPrefix(nil, a) (inclusive) to KeyGroupPrefix(nil, b) (exclusive).
func KeyGroupPrefix(dst []byte, kg int) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(kg))
}

// KeyGroupOfKey returns the key group of a storage key, -1 if it is too
// short to have one.
func KeyGroupOfKey(key []byte) int {
	if len(key) < keyGroupPrefixLen {
		return -1
	}
	return int(binary.BigEndian.Uint16(key))
}

// PrefixEnd returns the least key greater than every key with the prefix,
// nil if there is none (the prefix is all 0xff).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

const (
	mapHeader = 0x00
	mapEntry  = 0x01
	// sweepBudget bounds the entries one capture examines for expiry.
	sweepBudget = 16 << 10
)

// tableKind says how a byte table lays out its values.
type tableKind uint8

const (
	kindValue tableKind = iota // one value per key (value, reducing, aggregating)
	kindList                   // a list of elements per key
	kindMap                    // a header per key, one entry per user key
)

// StoreError is what the typed states of a BytesBackend panic with when
// their store fails or holds bytes they cannot decode: their methods have no
// error result, and the runtime turns a task's panic into a job failure.
type StoreError struct {
	State string
	Op    string
	Err   error
}

// Error says which state failed, doing what.
func (e *StoreError) Error() string {
	return fmt.Sprintf("state %q: %s: %v", e.State, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *StoreError) Unwrap() error { return e.Err }

// TaskFailure marks a StoreError as a task's failure, not a bug
// (runtime.Failure): the task fails with it as its error.
func (e *StoreError) TaskFailure() {}

// errCorrupt is wrapped when stored bytes do not decode.
var errCorrupt = errors.New("stored bytes do not decode")

// bytesCore is what every byte table has: its name and key layout, the
// key-group range check, and TTL.
type bytesCore[K comparable] struct {
	name   string
	kind   tableKind
	store  BytesStore
	kc     Codec[K]
	hash   func(K) uint64
	maxPar int
	rng    KeyGroupRange
	ttl    int64 // milliseconds; 0: no TTL
	now    func() int64
	// born is the clock at registration: entries written without TTL
	// (write time 0) count as written then, as the memory backend's
	// restore does.
	born int64
	// horizon holds, per key group of the range, the clock of the capture
	// the group was restored from (0: none): entries that had expired by
	// then were dropped from that checkpoint.
	horizon []int64
	// prefix is uvarint length + name, as in storage keys.
	prefix []byte
	kbuf   []byte
	vbuf   []byte
	// sweep is where the next capture's expiry sweep starts: an index into
	// the range and the key after which to go on (nil: the group's start).
	sweepKG    int
	sweepAfter []byte
}

func newBytesCore[K comparable](b BytesBackend, name string, kind tableKind, kc Codec[K], opts []StateOption) (*bytesCore[K], error) {
	if name == "" {
		return nil, errors.New("a state needs a name")
	}
	if err := CheckCodec[K](); err != nil {
		return nil, fmt.Errorf("state %q: its key cannot be checkpointed: %w", name, err)
	}
	cfg := stateConfig{now: wallMillis}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.ttl < 0 {
		return nil, fmt.Errorf("state %q: negative TTL %v", name, cfg.ttl)
	}
	rng := b.Range()
	t := &bytesCore[K]{
		name: name, kind: kind, kc: kc, hash: HasherFor(kc),
		maxPar: b.MaxParallelism(), rng: rng,
		ttl: cfg.ttl.Milliseconds(), now: cfg.now,
		prefix: append(binary.AppendUvarint(nil, uint64(len(name))), name...),
	}
	if cfg.ttl > 0 && t.ttl == 0 {
		t.ttl = 1
	}
	return t, nil
}

// register registers tbl (whose core is t) with b and loads what the table
// needs from the store.
func (t *bytesCore[K]) register(b BytesBackend, tbl BytesTable) error {
	// The store is valid once the backend is open, which Register checks;
	// Check (called by Register) needs it.
	t.store = b.Store()
	if err := b.Register(tbl); err != nil {
		t.store = nil
		return err
	}
	if t.ttl > 0 {
		t.born = t.now()
		t.horizon = make([]int64, t.rng.End-t.rng.Start)
		var k []byte
		for kg := t.rng.Start; kg < t.rng.End; kg++ {
			k = t.metaKey(k[:0], kg)
			v, ok, err := t.store.Get(k)
			if err != nil {
				return fmt.Errorf("state %q: reading the capture time of key group %d: %w", t.name, kg, err)
			}
			if !ok {
				continue
			}
			if len(v) != 8 {
				return fmt.Errorf("state %q: the capture time of key group %d has %d bytes, want 8", t.name, kg, len(v))
			}
			t.horizon[kg-t.rng.Start] = int64(binary.BigEndian.Uint64(v) ^ 1<<63)
		}
	}
	return nil
}

// Name implements Table.
func (t *bytesCore[K]) Name() string { return t.name }

// Freeze implements Table; a BytesBackend does not call it.
func (t *bytesCore[K]) Freeze() FrozenTable { return noFrozen{} }

// RestoreGroup implements Table; a BytesBackend does not call it.
func (t *bytesCore[K]) RestoreGroup(kg int, entries int, data []byte) error {
	return fmt.Errorf("state %q: key-group data is restored by its backend, not by the table", t.name)
}

type noFrozen struct{}

func (noFrozen) AppendGroup(dst []byte, kg int) ([]byte, int) { return dst, 0 }

// fail panics with a StoreError: see StoreError.
func (t *bytesCore[K]) fail(op string, err error) {
	panic(&StoreError{State: t.name, Op: op, Err: err})
}

// key encodes the storage key of k into t.kbuf and returns it with k's key
// group, refusing keys outside the subtask's range.
func (t *bytesCore[K]) key(k K) ([]byte, int) {
	kg := KeyGroupFor(t.hash(k), t.maxPar)
	if !t.rng.Contains(kg) {
		panic(fmt.Sprintf("state %q: key %v is in key group %d, outside this subtask's range %v (was the stream keyed by the same key?)", t.name, k, kg, t.rng))
	}
	b := append(t.kbuf[:0], byte(kg>>8), byte(kg))
	b = append(b, t.prefix...)
	t.kbuf = t.kc.Append(b, k)
	return t.kbuf, kg
}

// tablePrefix appends the prefix of the table's keys in key group kg.
func (t *bytesCore[K]) tablePrefix(dst []byte, kg int) []byte {
	return append(KeyGroupPrefix(dst, kg), t.prefix...)
}

// metaKey appends the key of the table's capture time in key group kg.
func (t *bytesCore[K]) metaKey(dst []byte, kg int) []byte {
	return append(append(KeyGroupPrefix(dst, kg), 0), t.prefix...)
}

// stamp appends the write time of a value written now.
func (t *bytesCore[K]) stamp(dst []byte) []byte {
	if t.ttl == 0 {
		return append(dst, 0)
	}
	return binary.AppendVarint(dst, t.now())
}

// expired reports whether an entry of key group kg written at w has
// expired: now, or by the capture its group was restored from.
func (t *bytesCore[K]) expired(w int64, kg int) bool {
	if t.ttl == 0 {
		return false
	}
	if w == 0 {
		w = t.born
	}
	if t.now()-w >= t.ttl {
		return true
	}
	h := t.horizon[kg-t.rng.Start]
	return h != 0 && h-w >= t.ttl
}

// get returns the stored value of key, panicking on a store error.
func (t *bytesCore[K]) get(key []byte) ([]byte, bool) {
	v, ok, err := t.store.Get(key)
	if err != nil {
		t.fail("reading", err)
	}
	return v, ok
}

func (t *bytesCore[K]) set(key, value []byte) {
	if err := t.store.Set(key, value); err != nil {
		t.fail("writing", err)
	}
}

func (t *bytesCore[K]) del(key []byte) {
	if err := t.store.Delete(key); err != nil {
		t.fail("deleting", err)
	}
}

func (t *bytesCore[K]) scan(lower, upper []byte, f func(key, value []byte) bool) {
	if err := t.store.Scan(lower, upper, f); err != nil {
		t.fail("scanning", err)
	}
}

// read returns the payload (after the write time) of a value-like entry,
// ok=false if it is absent or expired.
func (t *bytesCore[K]) read(key []byte, kg int) ([]byte, bool) {
	v, ok := t.get(key)
	if !ok {
		return nil, false
	}
	w, n := binary.Varint(v)
	if n <= 0 {
		t.fail("reading", fmt.Errorf("write time: %w", errCorrupt))
	}
	if t.expired(w, kg) {
		t.del(key) // dropped on access, as in the memory backend
		return nil, false
	}
	return v[n:], true
}

// scanTable calls f with the key group, the decoded key, its encoding, the
// bytes after it and the value of every entry of the table, key group by
// key group, until f returns false.
func (t *bytesCore[K]) scanTable(f func(kg int, k K, enc, rest, value []byte) bool) {
	var lower []byte
	for kg := t.rng.Start; kg < t.rng.End; kg++ {
		lower = t.tablePrefix(lower[:0], kg)
		stop := false
		t.scan(lower, PrefixEnd(lower), func(key, value []byte) bool {
			k, n, err := t.kc.Decode(key[len(lower):])
			if err != nil {
				t.fail("scanning", fmt.Errorf("key group %d: key: %w", kg, err))
			}
			end := len(lower) + n
			if !f(kg, k, key[len(lower):end], key[end:], value) {
				stop = true
				return false
			}
			return true
		})
		if stop {
			return
		}
	}
}

// recoverStoreError turns a StoreError panic into *err.
func recoverStoreError(err *error) {
	if r := recover(); r != nil {
		se, ok := r.(*StoreError)
		if !ok {
			panic(r)
		}
		*err = se
	}
}

// PrepareCapture implements BytesTable.
func (t *bytesCore[K]) PrepareCapture() (err error) {
	if t.ttl == 0 {
		return nil
	}
	defer recoverStoreError(&err)
	var k []byte
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(t.now())^1<<63)
	for kg := t.rng.Start; kg < t.rng.End; kg++ {
		k = t.metaKey(k[:0], kg)
		t.set(k, v[:])
	}
	t.sweep()
	return nil
}

// sweep deletes expired entries, examining about sweepBudget of them from
// where the last sweep stopped, so that entries nobody reads again do not
// stay in the store for good.
func (t *bytesCore[K]) sweep() {
	n := t.rng.End - t.rng.Start
	budget := sweepBudget
	var lower []byte
	for visited := 0; visited < n && budget > 0; visited++ {
		kg := t.rng.Start + t.sweepKG
		lower = t.tablePrefix(lower[:0], kg)
		from := lower
		if t.sweepAfter != nil {
			// The callback rewrites sweepAfter: resume from a copy.
			from = append(bytes.Clone(t.sweepAfter), 0)
		}
		// expiredMap is the key part of the expired map whose entries are
		// being deleted; a sweep never stops inside one.
		var expiredMap []byte
		done := true
		t.scan(from, PrefixEnd(lower), func(key, value []byte) bool {
			rest := key[len(lower):]
			if t.kind == kindMap {
				_, m, err := t.kc.Decode(rest)
				if err != nil || m >= len(rest) {
					return true // Check reports it; the sweep leaves it
				}
				if rest[m] == mapEntry {
					if expiredMap != nil && bytes.Equal(rest[:m], expiredMap) {
						t.del(key)
					}
					return true
				}
				expiredMap = nil
			}
			if budget == 0 {
				done = false
				return false
			}
			budget--
			t.sweepAfter = append(t.sweepAfter[:0], key...)
			w, m := binary.Varint(value)
			if m > 0 && t.expired(w, kg) {
				t.del(key)
				if t.kind == kindMap {
					_, kn, _ := t.kc.Decode(rest)
					expiredMap = append(expiredMap[:0], rest[:kn]...)
				}
			}
			return true
		})
		if !done {
			return
		}
		t.sweepAfter = nil
		t.sweepKG = (t.sweepKG + 1) % n
	}
}

// checkTable verifies that every key of the table decodes and lies in the
// key group it is stored under, that entry accepts the rest of it, and
// that the capture times are well formed.
func (t *bytesCore[K]) checkTable(entry func(enc, rest, value []byte) error) (err error) {
	defer recoverStoreError(&err)
	var lower []byte
	for kg := t.rng.Start; kg < t.rng.End; kg++ {
		lower = t.tablePrefix(lower[:0], kg)
		t.scan(lower, PrefixEnd(lower), func(key, value []byte) bool {
			k, n, derr := t.kc.Decode(key[len(lower):])
			if derr != nil {
				err = fmt.Errorf("state %q, key group %d: decoding a key: %w", t.name, kg, derr)
				return false
			}
			if got := KeyGroupFor(t.hash(k), t.maxPar); got != kg {
				err = fmt.Errorf("state %q, key group %d: key %v belongs to key group %d (was the max parallelism or the key type changed?)", t.name, kg, k, got)
				return false
			}
			end := len(lower) + n
			if e := entry(key[len(lower):end], key[end:], value); e != nil {
				err = fmt.Errorf("state %q, key group %d, key %v: %w", t.name, kg, k, e)
				return false
			}
			return true
		})
		if err != nil {
			return err
		}
		if t.ttl > 0 {
			if v, ok := t.get(t.metaKey(lower[:0], kg)); ok && len(v) != 8 {
				return fmt.Errorf("state %q: the capture time of key group %d has %d bytes, want 8", t.name, kg, len(v))
			}
		}
	}
	return nil
}

// splitStamp splits a value into its write time and the rest.
func splitStamp(value []byte) (int64, []byte, error) {
	w, n := binary.Varint(value)
	if n <= 0 {
		return 0, nil, fmt.Errorf("write time: %w", ErrShortBuffer)
	}
	return w, value[n:], nil
}

// decodeAll decodes exactly one value from b.
func decodeAll[V any](c Codec[V], b []byte) (V, error) {
	v, n, err := c.Decode(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%d bytes after the value: %w", len(b)-n, errCorrupt)
	}
	return v, err
}

// bytesValue is the byte table of value, reducing and aggregating states.
type bytesValue[K comparable, V any] struct {
	*bytesCore[K]
	vc Codec[V]
}

func newBytesValue[K comparable, V any](b BytesBackend, name string, kc Codec[K], vc Codec[V], opts []StateOption) (*bytesValue[K, V], error) {
	c, err := newBytesCore(b, name, kindValue, kc, opts)
	if err != nil {
		return nil, err
	}
	if err := codecError(vc); err != nil {
		return nil, fmt.Errorf("state %q: its value cannot be checkpointed: %w", name, err)
	}
	t := &bytesValue[K, V]{bytesCore: c, vc: vc}
	if err := c.register(b, t); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *bytesValue[K, V]) decode(raw []byte) V {
	v, err := decodeAll(t.vc, raw)
	if err != nil {
		t.fail("decoding a value", err)
	}
	return v
}

func (t *bytesValue[K, V]) get(k K) (V, bool) {
	key, kg := t.key(k)
	raw, ok := t.read(key, kg)
	if !ok {
		var zero V
		return zero, false
	}
	return t.decode(raw), true
}

func (t *bytesValue[K, V]) put(k K, v V) {
	key, _ := t.key(k)
	t.putKey(key, v)
}

func (t *bytesValue[K, V]) putKey(key []byte, v V) {
	t.vbuf = t.vc.Append(t.stamp(t.vbuf[:0]), v)
	t.set(key, t.vbuf)
}

func (t *bytesValue[K, V]) delete(k K) {
	key, _ := t.key(k)
	t.del(key)
}

// update sets the value of k to f of the live value (ok=false if none).
func (t *bytesValue[K, V]) update(k K, f func(v V, ok bool) V) {
	key, kg := t.key(k)
	raw, ok := t.read(key, kg)
	var v V
	if ok {
		v = t.decode(raw)
	}
	t.putKey(key, f(v, ok))
}

func (t *bytesValue[K, V]) len() int {
	n := 0
	t.scanTable(func(int, K, []byte, []byte, []byte) bool { n++; return true })
	return n
}

func (t *bytesValue[K, V]) rangeKeys(f func(K, V) bool) {
	t.scanTable(func(kg int, k K, _, _, value []byte) bool {
		w, raw, err := splitStamp(value)
		if err != nil {
			t.fail("scanning", err)
		}
		if t.expired(w, kg) {
			return true
		}
		return f(k, t.decode(raw))
	})
}

// Check implements BytesTable.
func (t *bytesValue[K, V]) Check() error {
	return t.checkTable(func(_, rest, value []byte) error {
		if len(rest) != 0 {
			return fmt.Errorf("%d bytes after the key", len(rest))
		}
		_, raw, err := splitStamp(value)
		if err == nil {
			_, err = decodeAll(t.vc, raw)
		}
		return err
	})
}

// bytesList is the byte table of list states; a list is stored as its
// write time, its length and its elements.
type bytesList[K comparable, E any] struct {
	*bytesCore[K]
	ec Codec[E]
}

func newBytesList[K comparable, E any](b BytesBackend, name string, kc Codec[K], ec Codec[E], opts []StateOption) (*bytesList[K, E], error) {
	c, err := newBytesCore(b, name, kindList, kc, opts)
	if err != nil {
		return nil, err
	}
	if err := codecError(ec); err != nil {
		return nil, fmt.Errorf("state %q: its value cannot be checkpointed: %w", name, err)
	}
	t := &bytesList[K, E]{bytesCore: c, ec: ec}
	if err := c.register(b, t); err != nil {
		return nil, err
	}
	return t, nil
}

// decodeList decodes the length and elements of a stored list.
func decodeList[E any](c Codec[E], raw []byte) ([]E, error) {
	n, m := binary.Uvarint(raw)
	if m <= 0 || n > math.MaxInt32 {
		return nil, fmt.Errorf("list length: %w", errCorrupt)
	}
	raw = raw[m:]
	out := make([]E, 0, min(n, 1024))
	for i := uint64(0); i < n; i++ {
		e, k, err := c.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out = append(out, e)
		raw = raw[k:]
	}
	if len(raw) != 0 {
		return nil, fmt.Errorf("%d bytes after %d elements: %w", len(raw), n, errCorrupt)
	}
	return out, nil
}

func (t *bytesList[K, E]) get(k K) []E {
	key, kg := t.key(k)
	raw, ok := t.read(key, kg)
	if !ok {
		return nil
	}
	l, err := decodeList(t.ec, raw)
	if err != nil {
		t.fail("decoding a list", err)
	}
	return l
}

func (t *bytesList[K, E]) add(k K, e E) {
	key, kg := t.key(k)
	raw, ok := t.read(key, kg)
	var n uint64
	if ok {
		c, m := binary.Uvarint(raw)
		if m <= 0 {
			t.fail("decoding a list", fmt.Errorf("list length: %w", errCorrupt))
		}
		n, raw = c, raw[m:]
	} else {
		raw = nil
	}
	t.vbuf = binary.AppendUvarint(t.stamp(t.vbuf[:0]), n+1)
	t.vbuf = t.ec.Append(append(t.vbuf, raw...), e)
	t.set(key, t.vbuf)
}

func (t *bytesList[K, E]) update(k K, list []E) {
	key, _ := t.key(k)
	if len(list) == 0 {
		t.del(key)
		return
	}
	t.vbuf = binary.AppendUvarint(t.stamp(t.vbuf[:0]), uint64(len(list)))
	for _, e := range list {
		t.vbuf = t.ec.Append(t.vbuf, e)
	}
	t.set(key, t.vbuf)
}

func (t *bytesList[K, E]) clear(k K) {
	key, _ := t.key(k)
	t.del(key)
}

// Check implements BytesTable.
func (t *bytesList[K, E]) Check() error {
	return t.checkTable(func(_, rest, value []byte) error {
		if len(rest) != 0 {
			return fmt.Errorf("%d bytes after the key", len(rest))
		}
		_, raw, err := splitStamp(value)
		if err == nil {
			_, err = decodeList(t.ec, raw)
		}
		return err
	})
}

// bytesMap is the byte table of map states: a header per key (write time
// and entry count) and an entry per user key. The TTL covers a key's whole
// map, as in the memory backend: every write to the map renews it.
type bytesMap[K, UK comparable, UV any] struct {
	*bytesCore[K]
	ukc Codec[UK]
	uvc Codec[UV]
}

func newBytesMap[K, UK comparable, UV any](b BytesBackend, name string, kc Codec[K], opts []StateOption) (*bytesMap[K, UK, UV], error) {
	c, err := newBytesCore(b, name, kindMap, kc, opts)
	if err != nil {
		return nil, err
	}
	if err := CheckCodec[UK](); err != nil {
		return nil, fmt.Errorf("state %q: its user key cannot be checkpointed: %w", name, err)
	}
	if err := CheckCodec[UV](); err != nil {
		return nil, fmt.Errorf("state %q: its value cannot be checkpointed: %w", name, err)
	}
	t := &bytesMap[K, UK, UV]{bytesCore: c, ukc: CodecFor[UK](), uvc: CodecFor[UV]()}
	if err := c.register(b, t); err != nil {
		return nil, err
	}
	return t, nil
}

// decodeHeader decodes a map header.
func decodeHeader(v []byte) (written int64, count int, err error) {
	w, n := binary.Varint(v)
	if n <= 0 {
		return 0, 0, fmt.Errorf("map header: %w", errCorrupt)
	}
	c, m := binary.Uvarint(v[n:])
	if m <= 0 || n+m != len(v) || c == 0 || c > math.MaxInt32 {
		return 0, 0, fmt.Errorf("map header: %w", errCorrupt)
	}
	return w, int(c), nil
}

// header reads the header of k's map, leaving k's key in t.kbuf[:klen],
// and returns the entry count and whether the map exists and is live. An
// expired map is deleted (and reported as not existing).
func (t *bytesMap[K, UK, UV]) header(k K) (klen, count int, exists, live bool) {
	key, kg := t.key(k)
	klen = len(key)
	t.kbuf = append(key, mapHeader)
	v, ok := t.bytesCore.get(t.kbuf)
	if !ok {
		return klen, 0, false, false
	}
	w, c, err := decodeHeader(v)
	if err != nil {
		t.fail("reading a map", err)
	}
	if t.expired(w, kg) {
		t.deleteMap(klen) // dropped on access, as in the memory backend
		return klen, 0, false, false
	}
	return klen, c, true, true
}

// entryKey sets t.kbuf to the key of uk in the map of t.kbuf[:klen].
func (t *bytesMap[K, UK, UV]) entryKey(klen int, uk UK) []byte {
	t.kbuf = t.ukc.Append(append(t.kbuf[:klen], mapEntry), uk)
	return t.kbuf
}

func (t *bytesMap[K, UK, UV]) writeHeader(klen, count int) {
	t.kbuf = append(t.kbuf[:klen], mapHeader)
	t.vbuf = binary.AppendUvarint(t.stamp(t.vbuf[:0]), uint64(count))
	t.set(t.kbuf, t.vbuf)
}

func (t *bytesMap[K, UK, UV]) decodeValue(raw []byte) UV {
	v, err := decodeAll(t.uvc, raw)
	if err != nil {
		t.fail("decoding a map value", err)
	}
	return v
}

func (t *bytesMap[K, UK, UV]) get(k K, uk UK) (UV, bool) {
	var zero UV
	var klen int
	if t.ttl > 0 {
		var live bool
		if klen, _, _, live = t.header(k); !live {
			return zero, false
		}
	} else {
		// Entries exist only under a header, and without TTL a header is
		// always live.
		key, _ := t.key(k)
		klen = len(key)
	}
	raw, ok := t.bytesCore.get(t.entryKey(klen, uk))
	if !ok {
		return zero, false
	}
	return t.decodeValue(raw), true
}

func (t *bytesMap[K, UK, UV]) put(k K, uk UK, uv UV) {
	// An expired map is gone after header: a write after expiry starts
	// afresh.
	klen, count, _, live := t.header(k)
	key := t.entryKey(klen, uk)
	if _, ok := t.bytesCore.get(key); !ok || !live {
		count++
	}
	t.vbuf = t.uvc.Append(t.vbuf[:0], uv)
	t.set(key, t.vbuf)
	t.writeHeader(klen, count)
}

func (t *bytesMap[K, UK, UV]) remove(k K, uk UK) {
	klen, count, _, live := t.header(k)
	if !live {
		return
	}
	key := t.entryKey(klen, uk)
	if _, ok := t.bytesCore.get(key); !ok {
		return
	}
	t.del(key)
	if count--; count <= 0 {
		t.kbuf = append(t.kbuf[:klen], mapHeader)
		t.del(t.kbuf)
		return
	}
	t.writeHeader(klen, count)
}

// deleteMap deletes the header and the entries of the map of t.kbuf[:klen].
func (t *bytesMap[K, UK, UV]) deleteMap(klen int) {
	lower := bytes.Clone(t.kbuf[:klen])
	t.scan(lower, PrefixEnd(lower), func(key, _ []byte) bool {
		t.del(key)
		return true
	})
}

func (t *bytesMap[K, UK, UV]) rangeMap(k K, f func(UK, UV) bool) {
	klen, _, _, live := t.header(k)
	if !live {
		return
	}
	// f may use the table, and so t.kbuf: scan with a copy.
	lower := append(t.kbuf[:klen:klen], mapEntry)
	t.scan(lower, PrefixEnd(lower), func(key, value []byte) bool {
		uk, err := decodeAll(t.ukc, key[len(lower):])
		if err != nil {
			t.fail("decoding a map key", err)
		}
		return f(uk, t.decodeValue(value))
	})
}

func (t *bytesMap[K, UK, UV]) len(k K) int {
	_, count, _, live := t.header(k)
	if !live {
		return 0
	}
	return count
}

func (t *bytesMap[K, UK, UV]) clear(k K) {
	if klen, _, exists, _ := t.header(k); exists {
		t.deleteMap(klen)
	}
}

// rangeKeys calls f with the map of every key that has a live one, until f
// returns false.
func (t *bytesMap[K, UK, UV]) rangeKeys(f func(K, map[UK]UV) bool) {
	var cur K
	var curEnc []byte
	var m map[UK]UV
	live, stopped := false, false
	t.scanTable(func(kg int, k K, enc, rest, value []byte) bool {
		if len(rest) == 0 {
			t.fail("scanning", fmt.Errorf("a map key without a suffix: %w", errCorrupt))
		}
		if rest[0] == mapHeader {
			if m != nil && !f(cur, m) {
				stopped = true
				return false
			}
			w, _, err := decodeHeader(value)
			if err != nil {
				t.fail("scanning", err)
			}
			cur, curEnc, m, live = k, append(curEnc[:0], enc...), nil, !t.expired(w, kg)
			return true
		}
		if !live || !bytes.Equal(enc, curEnc) {
			return true
		}
		uk, err := decodeAll(t.ukc, rest[1:])
		if err != nil {
			t.fail("decoding a map key", err)
		}
		if m == nil {
			m = make(map[UK]UV)
		}
		m[uk] = t.decodeValue(value)
		return true
	})
	if !stopped && m != nil {
		f(cur, m)
	}
}

// Check implements BytesTable: headers and entries decode, every entry is
// under a header, and each header counts its map's entries.
func (t *bytesMap[K, UK, UV]) Check() error {
	var cur []byte // the key part of the last header
	want, got := 0, 0
	closeMap := func() error {
		if cur != nil && got != want {
			return fmt.Errorf("the map header counts %d entries, the map has %d", want, got)
		}
		return nil
	}
	err := t.checkTable(func(enc, rest, value []byte) error {
		if len(rest) == 0 {
			return errors.New("no header or entry suffix")
		}
		switch rest[0] {
		case mapHeader:
			if err := closeMap(); err != nil {
				return err
			}
			if len(rest) != 1 {
				return fmt.Errorf("%d bytes after the header suffix", len(rest)-1)
			}
			_, c, err := decodeHeader(value)
			if err != nil {
				return err
			}
			cur, want, got = append(cur[:0], enc...), c, 0
		case mapEntry:
			if cur == nil || !bytes.Equal(enc, cur) {
				return errors.New("a map entry without a header")
			}
			if _, err := decodeAll(t.ukc, rest[1:]); err != nil {
				return fmt.Errorf("user key: %w", err)
			}
			if _, err := decodeAll(t.uvc, value); err != nil {
				return fmt.Errorf("user value: %w", err)
			}
			got++
		default:
			return fmt.Errorf("unknown suffix %#x", rest[0])
		}
		return nil
	})
	if err == nil {
		err = closeMap()
	}
	return err
}
