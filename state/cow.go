package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"time"
)

// StateOption configures a keyed state.
type StateOption func(*stateConfig)

type stateConfig struct {
	ttl time.Duration
	now func() int64
}

// WithTTL expires an entry ttl after its last write (Flink's
// OnCreateAndWrite update type): an expired entry is never returned, and it
// is dropped from the next checkpoint and on access.
func WithTTL(ttl time.Duration) StateOption { return func(c *stateConfig) { c.ttl = ttl } }

// WithClock sets the processing-time clock TTL reads, in milliseconds
// (default: the wall clock).
func WithClock(now func() int64) StateOption { return func(c *stateConfig) { c.now = now } }

func wallMillis() int64 { return time.Now().UnixMilli() }

// cowEntry is one value with the epoch it was last written in (to know
// whether a capture shares it) and, with TTL, when.
type cowEntry[V any] struct {
	v       V
	epoch   uint64
	written int64
}

type cowShard[K comparable, V any] struct {
	m map[K]cowEntry[V]
	// shared: a capture holds m; the next write copies it.
	shared bool
}

// cowTable is the memory backend's table: a map per key group, copied on
// the first write after a capture.
type cowTable[K comparable, V any] struct {
	name       string
	keyCodec   Codec[K]
	valueCodec Codec[V]
	hash       func(K) uint64
	maxPar     int
	rng        KeyGroupRange
	shards     []cowShard[K, V]
	// epoch counts captures; an entry written in an earlier epoch may be
	// shared with a capture and is copied (clone) before it is changed in
	// place.
	epoch uint64
	clone func(V) V
	ttl   int64 // milliseconds; 0: no TTL
	now   func() int64
	// lastKey's shard is lastShard (nil until the first lookup); only
	// used when == on K implies equal encodings (cacheKey).
	cacheKey  bool
	lastKey   K
	lastShard *cowShard[K, V]
}

func newCowTable[K comparable, V any](b *MemoryBackend, name string, kc Codec[K], vc Codec[V], clone func(V) V, opts []StateOption) (*cowTable[K, V], error) {
	if name == "" {
		return nil, errors.New("a state needs a name")
	}
	if err := CheckCodec[K](); err != nil {
		return nil, fmt.Errorf("state %q: its key cannot be checkpointed: %w", name, err)
	}
	if err := CheckCodec[V](); err != nil {
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
		name: name, keyCodec: kc, valueCodec: vc, hash: HasherFor(kc),
		maxPar: b.maxParallelism, rng: b.rng, clone: clone, cacheKey: exactEqual(reflect.TypeFor[K]()),
		shards: make([]cowShard[K, V], b.rng.End-b.rng.Start),
		ttl:    cfg.ttl.Milliseconds(), now: cfg.now,
	}
	if cfg.ttl > 0 && t.ttl == 0 {
		t.ttl = 1
	}
	if err := b.Register(t); err != nil {
		return nil, err
	}
	return t, nil
}

// Name implements Table.
func (t *cowTable[K, V]) Name() string { return t.name }

// shard returns the shard of k, refusing keys outside the subtask's range
// (a keyed operator fed with records partitioned by another key).
func (t *cowTable[K, V]) shard(k K) *cowShard[K, V] {
	// Operators read and then write the same key: remember the last one.
	if t.cacheKey && t.lastShard != nil && t.lastKey == k {
		return t.lastShard
	}
	kg := KeyGroupFor(t.hash(k), t.maxPar)
	if !t.rng.Contains(kg) {
		panic(fmt.Sprintf("state %q: key %v is in key group %d, outside this subtask's range %v (was the stream keyed by the same key?)", t.name, k, kg, t.rng))
	}
	t.lastKey, t.lastShard = k, &t.shards[kg-t.rng.Start]
	return t.lastShard
}

func (t *cowTable[K, V]) expired(e cowEntry[V]) bool {
	return t.ttl > 0 && t.now()-e.written >= t.ttl
}

func (t *cowTable[K, V]) get(k K) (V, bool) {
	s := t.shard(k)
	e, ok := s.m[k]
	if ok && t.expired(e) {
		// Dropped on access, as WithTTL says.
		delete(t.writable(s), k)
		ok = false
	}
	if !ok {
		var zero V
		return zero, false
	}
	return e.v, true
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

// writable returns the shard's map, copying it first if a capture holds it.
func (t *cowTable[K, V]) writable(s *cowShard[K, V]) map[K]cowEntry[V] {
	if s.m == nil {
		s.m = make(map[K]cowEntry[V])
	} else if s.shared {
		s.m = maps.Clone(s.m)
	}
	s.shared = false
	return s.m
}

func (t *cowTable[K, V]) put(k K, v V) {
	s := t.shard(k)
	m := t.writable(s)
	e := cowEntry[V]{v: v, epoch: t.epoch}
	if t.ttl > 0 {
		e.written = t.now()
	}
	m[k] = e
}

func (t *cowTable[K, V]) del(k K) {
	s := t.shard(k)
	if _, ok := s.m[k]; !ok {
		return
	}
	delete(t.writable(s), k)
}

// update changes the value of k in place through f, which gets a value
// it may modify (cloned first if a capture may share it) and whether k had
// one; f returns the new value, or keep=false to delete k.
func (t *cowTable[K, V]) update(k K, f func(v V, ok bool) (V, bool)) {
	s := t.shard(k)
	e, ok := s.m[k]
	if ok && t.expired(e) {
		ok = false
		var zero V
		e.v = zero
	}
	v := e.v
	if ok && e.epoch != t.epoch && t.clone != nil {
		v = t.clone(v)
	}
	nv, keep := f(v, ok)
	if !keep {
		if ok {
			delete(t.writable(s), k)
		}
		return
	}
	m := t.writable(s)
	ne := cowEntry[V]{v: nv, epoch: t.epoch}
	if t.ttl > 0 {
		ne.written = t.now()
	}
	m[k] = ne
}

func (t *cowTable[K, V]) rangeKeys(f func(K, V) bool) {
	for i := range t.shards {
		for k, e := range t.shards[i].m {
			if t.expired(e) {
				continue
			}
			if !f(k, e.v) {
				return
			}
		}
	}
}

func (t *cowTable[K, V]) len() int {
	n := 0
	for i := range t.shards {
		n += len(t.shards[i].m)
	}
	return n
}

// Freeze implements Table: every shard becomes shared, and entries written
// from now on belong to a new epoch.
func (t *cowTable[K, V]) Freeze() FrozenTable {
	f := &frozenCow[K, V]{t: t, shards: make([]map[K]cowEntry[V], len(t.shards))}
	if t.ttl > 0 {
		f.now = t.now()
	}
	for i := range t.shards {
		f.shards[i] = t.shards[i].m
		t.shards[i].shared = true
	}
	t.epoch++
	return f
}

type frozenCow[K comparable, V any] struct {
	t      *cowTable[K, V]
	shards []map[K]cowEntry[V]
	now    int64
}

// AppendGroup implements FrozenTable. An entry's encoding is its key, its
// value and its write time (0 without TTL, so that adding or removing a
// TTL keeps snapshots readable); expired entries are left out.
func (f *frozenCow[K, V]) AppendGroup(dst []byte, kg int) ([]byte, int) {
	t := f.t
	if !t.rng.Contains(kg) {
		return dst, 0
	}
	n := 0
	for k, e := range f.shards[kg-t.rng.Start] {
		if t.ttl > 0 && f.now-e.written >= t.ttl {
			continue
		}
		dst = t.keyCodec.Append(dst, k)
		dst = t.valueCodec.Append(dst, e.v)
		dst = binary.AppendVarint(dst, e.written)
		n++
	}
	return dst, n
}

// RestoreGroup implements Table.
func (t *cowTable[K, V]) RestoreGroup(kg int, entries int, data []byte) error {
	if !t.rng.Contains(kg) {
		return nil
	}
	s := &t.shards[kg-t.rng.Start]
	m := t.writable(s)
	for i := 0; i < entries; i++ {
		k, n, err := t.keyCodec.Decode(data)
		if err != nil {
			return fmt.Errorf("key group %d, entry %d: decoding key: %w", kg, i, err)
		}
		data = data[n:]
		v, n, err := t.valueCodec.Decode(data)
		if err != nil {
			return fmt.Errorf("key group %d, entry %d: decoding value: %w", kg, i, err)
		}
		data = data[n:]
		w, n := binary.Varint(data)
		if n <= 0 {
			return fmt.Errorf("key group %d, entry %d: decoding write time: %w", kg, i, ErrShortBuffer)
		}
		data = data[n:]
		e := cowEntry[V]{v: v, epoch: t.epoch, written: w}
		if t.ttl > 0 && e.written == 0 {
			// Written without TTL: the clock starts at the restore.
			e.written = t.now()
		}
		if got := KeyGroupFor(t.hash(k), t.maxPar); got != kg {
			return fmt.Errorf("key group %d, entry %d: the key belongs to key group %d (was the max parallelism or the key type changed?)", kg, i, got)
		}
		m[k] = e
	}
	if len(data) != 0 {
		return fmt.Errorf("key group %d: %d bytes left after %d entries", kg, len(data), entries)
	}
	return nil
}
