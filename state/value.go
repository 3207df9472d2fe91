package state

import (
	"fmt"
	"sort"
)

// KeyGroupData is the snapshot of one key group of one keyed state table:
// Entries key/value pairs encoded back to back in Data.
type KeyGroupData struct {
	KeyGroup int
	Entries  int
	Data     []byte
}

// ValueTable is keyed value state: one value per key, owned by one task and
// touched only by its goroutine.
type ValueTable[K comparable, V any] struct {
	m              map[K]V
	keyCodec       Codec[K]
	valueCodec     Codec[V]
	hash           func(K) uint64
	maxParallelism int
}

// NewValueTable returns an empty table whose snapshot is split into
// maxParallelism key groups.
func NewValueTable[K comparable, V any](keyCodec Codec[K], valueCodec Codec[V], maxParallelism int) *ValueTable[K, V] {
	return &ValueTable[K, V]{
		m:              make(map[K]V),
		keyCodec:       keyCodec,
		valueCodec:     valueCodec,
		hash:           HasherFor(keyCodec),
		maxParallelism: maxParallelism,
	}
}

// Get returns the value of k and whether it is set.
func (t *ValueTable[K, V]) Get(k K) (V, bool) {
	v, ok := t.m[k]
	return v, ok
}

// Put sets the value of k.
func (t *ValueTable[K, V]) Put(k K, v V) { t.m[k] = v }

// Delete clears the value of k.
func (t *ValueTable[K, V]) Delete(k K) { delete(t.m, k) }

// Len returns the number of keys with a value.
func (t *ValueTable[K, V]) Len() int { return len(t.m) }

// Range calls f for every entry, in no particular order, until f returns false.
func (t *ValueTable[K, V]) Range(f func(K, V) bool) {
	for k, v := range t.m {
		if !f(k, v) {
			return
		}
	}
}

// Snapshot encodes the table into per-key-group blobs, ascending by key
// group. The result shares nothing with the table: later writes do not
// change it.
func (t *ValueTable[K, V]) Snapshot() []KeyGroupData {
	groups := make(map[int]*KeyGroupData)
	for k, v := range t.m {
		kg := KeyGroupFor(t.hash(k), t.maxParallelism)
		g := groups[kg]
		if g == nil {
			g = &KeyGroupData{KeyGroup: kg}
			groups[kg] = g
		}
		g.Data = t.keyCodec.Append(g.Data, k)
		g.Data = t.valueCodec.Append(g.Data, v)
		g.Entries++
	}
	out := make([]KeyGroupData, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].KeyGroup < out[j].KeyGroup })
	return out
}

// Restore adds the entries of the key groups in r from a snapshot. Key
// groups outside r are skipped (they belong to another subtask). An entry
// whose key hashes to a different key group than the one it is stored under
// means the snapshot was written with another hash or max parallelism, and
// is refused.
func (t *ValueTable[K, V]) Restore(groups []KeyGroupData, r KeyGroupRange) error {
	for _, g := range groups {
		if !r.Contains(g.KeyGroup) {
			continue
		}
		data := g.Data
		for i := 0; i < g.Entries; i++ {
			k, n, err := t.keyCodec.Decode(data)
			if err != nil {
				return fmt.Errorf("decoding key %d of key group %d: %w", i, g.KeyGroup, err)
			}
			data = data[n:]
			v, n, err := t.valueCodec.Decode(data)
			if err != nil {
				return fmt.Errorf("decoding value %d of key group %d: %w", i, g.KeyGroup, err)
			}
			data = data[n:]
			if kg := KeyGroupFor(t.hash(k), t.maxParallelism); kg != g.KeyGroup {
				return fmt.Errorf("restoring key group %d: entry %d belongs to key group %d (max parallelism changed?)", g.KeyGroup, i, kg)
			}
			t.m[k] = v
		}
		if len(data) != 0 {
			return fmt.Errorf("restoring key group %d: %d bytes left after %d entries", g.KeyGroup, len(data), g.Entries)
		}
	}
	return nil
}
