package state

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// memoryOf returns the memory backend behind b (also one embedded in
// another type, as tests wrap it), or the byte backend (one
// of the two is nil): the typed states keep their entries in a cowTable on
// the memory backend and in a byte table on a BytesBackend.
func memoryOf(b Backend, name string) (*MemoryBackend, BytesBackend, error) {
	if m, ok := b.(interface{ memoryBackend() *MemoryBackend }); ok {
		return m.memoryBackend(), nil, nil
	}
	if bb, ok := b.(BytesBackend); ok {
		return nil, bb, nil
	}
	return nil, nil, fmt.Errorf("state %q: backend %q does not support this state type", name, b.Name())
}

// ValueState holds one value per key.
//
// On a BytesBackend (Pebble) a state's methods panic with a *StoreError
// when the store fails or holds bytes that do not decode; the runtime turns
// the panic into a job failure. This holds for every typed state.
type ValueState[K comparable, V any] struct {
	t *cowTable[K, V]
	// b is the byte table on a BytesBackend (then t is nil).
	b *bytesValue[K, V]
}

// NewValue registers a value state named name with b.
func NewValue[K comparable, V any](b Backend, name string, kc Codec[K], vc Codec[V], opts ...StateOption) (*ValueState[K, V], error) {
	m, bb, err := memoryOf(b, name)
	if err != nil {
		return nil, err
	}
	if bb != nil {
		bt, err := newBytesValue(bb, name, kc, vc, opts)
		if err != nil {
			return nil, err
		}
		return &ValueState[K, V]{b: bt}, nil
	}
	var cfg stateConfig
	for _, o := range opts {
		o(&cfg)
	}
	var clone func(V) V
	if cfg.copy != nil {
		f, ok := cfg.copy.(func(V) V)
		if !ok {
			return nil, fmt.Errorf("state %q: WithCopy copies %T, the state's values are %s", name, cfg.copy, reflect.TypeFor[V]())
		}
		clone = f
	}
	t, err := newCowTable(m, name, kc, vc, clone, opts)
	if err != nil {
		return nil, err
	}
	return &ValueState[K, V]{t: t}, nil
}

// Update sets the value of k to what f returns for the current one (ok
// false: k has none); f's keep false deletes it. With WithCopy, f may
// change the value it gets in place and return it (see WithCopy); on a
// byte-store backend it always gets a decoded copy.
func (s *ValueState[K, V]) Update(k K, f func(v V, ok bool) (V, bool)) {
	if s.b != nil {
		v, ok := s.b.get(k)
		nv, keep := f(v, ok)
		switch {
		case keep:
			s.b.put(k, nv)
		case ok:
			s.b.delete(k)
		}
		return
	}
	s.t.update(k, f)
}

// Get returns the value of k and whether it is set.
func (s *ValueState[K, V]) Get(k K) (V, bool) {
	// cowTable.get and put written out here (they are too large for the
	// compiler to inline): a call less per access keeps more cache misses
	// of successive records in flight.
	if t := s.t; t != nil {
		if sh, _, i, ok := t.find(k); ok {
			return sh.slots[i].v, true
		}
		var zero V
		return zero, false
	}
	return s.b.get(k)
}

// Put sets the value of k.
func (s *ValueState[K, V]) Put(k K, v V) {
	if t := s.t; t != nil {
		if p := t.lastSlot; p != nil && p.k == k {
			if t.changelog {
				t.recordLast(k)
			}
			p.v = v
			return
		}
		t.putAny(k, v)
		return
	}
	s.b.put(k, v)
}

// Delete clears the value of k.
func (s *ValueState[K, V]) Delete(k K) {
	if s.b != nil {
		s.b.delete(k)
		return
	}
	s.t.del(k)
}

// Len returns the number of keys with a value (expired ones included
// until they are dropped). On a BytesBackend it reads the whole table.
func (s *ValueState[K, V]) Len() int {
	if s.b != nil {
		return s.b.len()
	}
	return s.t.len()
}

// Range calls f for every live entry until f returns false.
func (s *ValueState[K, V]) Range(f func(K, V) bool) {
	if s.b != nil {
		s.b.rangeKeys(f)
		return
	}
	s.t.rangeKeys(f)
}

// ListState holds a list of elements per key.
type ListState[K comparable, E any] struct {
	t *cowTable[K, []E]
	b *bytesList[K, E]
}

// NewList registers a list state named name with b.
func NewList[K comparable, E any](b Backend, name string, kc Codec[K], ec Codec[E], opts ...StateOption) (*ListState[K, E], error) {
	m, bb, err := memoryOf(b, name)
	if err != nil {
		return nil, err
	}
	if bb != nil {
		bt, err := newBytesList(bb, name, kc, ec, opts)
		if err != nil {
			return nil, err
		}
		return &ListState[K, E]{b: bt}, nil
	}
	t, err := newCowTable(m, name, kc, CodecFor[[]E](), slices.Clone[[]E], opts)
	if err != nil {
		return nil, err
	}
	return &ListState[K, E]{t: t}, nil
}

// Get returns the list of k. The caller must not modify it.
func (s *ListState[K, E]) Get(k K) []E {
	if s.b != nil {
		return s.b.get(k)
	}
	v, _ := s.t.get(k)
	return v
}

// Add appends e to the list of k.
func (s *ListState[K, E]) Add(k K, e E) {
	if s.b != nil {
		s.b.add(k, e)
		return
	}
	s.t.update(k, func(v []E, _ bool) ([]E, bool) { return append(v, e), true })
}

// Update replaces the list of k; an empty list clears it.
func (s *ListState[K, E]) Update(k K, list []E) {
	if s.b != nil {
		s.b.update(k, list)
		return
	}
	if len(list) == 0 {
		s.t.del(k)
		return
	}
	s.t.put(k, slices.Clone(list))
}

// Clear removes the list of k.
func (s *ListState[K, E]) Clear(k K) {
	if s.b != nil {
		s.b.clear(k)
		return
	}
	s.t.del(k)
}

// MapState holds a map of user keys to user values per key.
type MapState[K, UK comparable, UV any] struct{ t mapTable[K, UK, UV] }

// mapTable is a map state's table: the embedded cowTable on the memory
// backend, b on a BytesBackend.
type mapTable[K, UK comparable, UV any] struct {
	*cowTable[K, map[UK]UV]
	b *bytesMap[K, UK, UV]
}

// rangeKeys calls f with the map of every key that has one, until f
// returns false (Timers rebuild their heaps with it).
func (t mapTable[K, UK, UV]) rangeKeys(f func(K, map[UK]UV) bool) {
	if t.b != nil {
		t.b.rangeKeys(f)
		return
	}
	t.cowTable.rangeKeys(f)
}

// NewMap registers a map state named name with b.
func NewMap[K, UK comparable, UV any](b Backend, name string, kc Codec[K], opts ...StateOption) (*MapState[K, UK, UV], error) {
	m, bb, err := memoryOf(b, name)
	if err != nil {
		return nil, err
	}
	if bb != nil {
		bt, err := newBytesMap[K, UK, UV](bb, name, kc, opts)
		if err != nil {
			return nil, err
		}
		return &MapState[K, UK, UV]{t: mapTable[K, UK, UV]{b: bt}}, nil
	}
	t, err := newCowTable(m, name, kc, CodecFor[map[UK]UV](), maps.Clone[map[UK]UV], opts)
	if err != nil {
		return nil, err
	}
	return &MapState[K, UK, UV]{t: mapTable[K, UK, UV]{cowTable: t}}, nil
}

// Get returns the value of uk in the map of k.
func (s *MapState[K, UK, UV]) Get(k K, uk UK) (UV, bool) {
	if s.t.b != nil {
		return s.t.b.get(k, uk)
	}
	m, _ := s.t.get(k)
	v, ok := m[uk]
	return v, ok
}

// Put sets uk to uv in the map of k.
func (s *MapState[K, UK, UV]) Put(k K, uk UK, uv UV) {
	if s.t.b != nil {
		s.t.b.put(k, uk, uv)
		return
	}
	s.t.update(k, func(m map[UK]UV, _ bool) (map[UK]UV, bool) {
		if m == nil {
			m = make(map[UK]UV)
		}
		m[uk] = uv
		return m, true
	})
}

// Remove deletes uk from the map of k.
func (s *MapState[K, UK, UV]) Remove(k K, uk UK) {
	if s.t.b != nil {
		s.t.b.remove(k, uk)
		return
	}
	if _, ok := s.Get(k, uk); !ok {
		return
	}
	s.t.update(k, func(m map[UK]UV, _ bool) (map[UK]UV, bool) {
		delete(m, uk)
		return m, len(m) > 0
	})
}

// Range calls f for every entry of the map of k until f returns false.
func (s *MapState[K, UK, UV]) Range(k K, f func(UK, UV) bool) {
	if s.t.b != nil {
		s.t.b.rangeMap(k, f)
		return
	}
	m, _ := s.t.get(k)
	for uk, uv := range m {
		if !f(uk, uv) {
			return
		}
	}
}

// RangeAll calls f for every entry of every key's map until f returns
// false: each key's map in turn, its entries in no set order. f must not
// write the state.
func (s *MapState[K, UK, UV]) RangeAll(f func(K, UK, UV) bool) {
	s.t.rangeKeys(func(k K, m map[UK]UV) bool {
		for uk, uv := range m {
			if !f(k, uk, uv) {
				return false
			}
		}
		return true
	})
}

// Len returns the number of entries in the map of k.
func (s *MapState[K, UK, UV]) Len(k K) int {
	if s.t.b != nil {
		return s.t.b.len(k)
	}
	m, _ := s.t.get(k)
	return len(m)
}

// Clear removes the map of k.
func (s *MapState[K, UK, UV]) Clear(k K) {
	if s.t.b != nil {
		s.t.b.clear(k)
		return
	}
	s.t.del(k)
}

// ReducingState folds the values added for a key with a reduce function.
type ReducingState[K comparable, V any] struct {
	t      *cowTable[K, V]
	b      *bytesValue[K, V]
	reduce func(V, V) V
}

// NewReducing registers a reducing state named name with b.
func NewReducing[K comparable, V any](b Backend, name string, kc Codec[K], vc Codec[V], reduce func(acc, v V) V, opts ...StateOption) (*ReducingState[K, V], error) {
	m, bb, err := memoryOf(b, name)
	if err != nil {
		return nil, err
	}
	if bb != nil {
		bt, err := newBytesValue(bb, name, kc, vc, opts)
		if err != nil {
			return nil, err
		}
		return &ReducingState[K, V]{b: bt, reduce: reduce}, nil
	}
	t, err := newCowTable(m, name, kc, vc, nil, opts)
	if err != nil {
		return nil, err
	}
	return &ReducingState[K, V]{t: t, reduce: reduce}, nil
}

// Add folds v into the value of k.
func (s *ReducingState[K, V]) Add(k K, v V) {
	if s.b != nil {
		s.b.update(k, func(acc V, ok bool) V {
			if ok {
				return s.reduce(acc, v)
			}
			return v
		})
		return
	}
	if acc, ok := s.t.get(k); ok {
		v = s.reduce(acc, v)
	}
	s.t.put(k, v)
}

// Get returns the folded value of k.
func (s *ReducingState[K, V]) Get(k K) (V, bool) {
	if s.b != nil {
		return s.b.get(k)
	}
	return s.t.get(k)
}

// Clear removes the value of k.
func (s *ReducingState[K, V]) Clear(k K) {
	if s.b != nil {
		s.b.delete(k)
		return
	}
	s.t.del(k)
}

// AggregateFunction folds inputs into an accumulator and derives a result,
// as Flink's AggregateFunction.
type AggregateFunction[IN, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(acc ACC, in IN) ACC
	Result(acc ACC) OUT
}

// AggregatingState folds the inputs added for a key into an accumulator.
type AggregatingState[K comparable, IN, ACC, OUT any] struct {
	t   *cowTable[K, ACC]
	b   *bytesValue[K, ACC]
	agg AggregateFunction[IN, ACC, OUT]
}

// NewAggregating registers an aggregating state named name with b. The
// accumulator must not share memory between calls of Add (return a new
// value or a modified copy), because a checkpoint may hold the old one.
func NewAggregating[K comparable, IN, ACC, OUT any](b Backend, name string, kc Codec[K], agg AggregateFunction[IN, ACC, OUT], opts ...StateOption) (*AggregatingState[K, IN, ACC, OUT], error) {
	m, bb, err := memoryOf(b, name)
	if err != nil {
		return nil, err
	}
	if bb != nil {
		bt, err := newBytesValue(bb, name, kc, CodecFor[ACC](), opts)
		if err != nil {
			return nil, err
		}
		return &AggregatingState[K, IN, ACC, OUT]{b: bt, agg: agg}, nil
	}
	t, err := newCowTable(m, name, kc, CodecFor[ACC](), nil, opts)
	if err != nil {
		return nil, err
	}
	return &AggregatingState[K, IN, ACC, OUT]{t: t, agg: agg}, nil
}

// Add folds in into the accumulator of k.
func (s *AggregatingState[K, IN, ACC, OUT]) Add(k K, in IN) {
	if s.b != nil {
		s.b.update(k, func(acc ACC, ok bool) ACC {
			if !ok {
				acc = s.agg.CreateAccumulator()
			}
			return s.agg.Add(acc, in)
		})
		return
	}
	acc, ok := s.t.get(k)
	if !ok {
		acc = s.agg.CreateAccumulator()
	}
	s.t.put(k, s.agg.Add(acc, in))
}

// Get returns the result for k and whether k has an accumulator.
func (s *AggregatingState[K, IN, ACC, OUT]) Get(k K) (OUT, bool) {
	var acc ACC
	var ok bool
	if s.b != nil {
		acc, ok = s.b.get(k)
	} else {
		acc, ok = s.t.get(k)
	}
	if !ok {
		var zero OUT
		return zero, false
	}
	return s.agg.Result(acc), true
}

// Clear removes the accumulator of k.
func (s *AggregatingState[K, IN, ACC, OUT]) Clear(k K) {
	if s.b != nil {
		s.b.delete(k)
		return
	}
	s.t.del(k)
}
