package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
)

// store is the state.BytesStore of a Backend: a cache of hot entries in
// front of a Pebble DB. Writes stay in the cache (dirty) until their entry
// is evicted, a Scan needs the DB complete, or the backend is captured;
// then they reach Pebble in one batch. Without it, every read-modify-write
// of a key would pay a Pebble lookup and a batch commit.
//
// The cache also remembers absent keys, so that the first write of a new
// key (read, then write) looks it up in Pebble once.
//
// A store is used by the task goroutine only.
type store struct {
	db      *pebble.DB
	entries map[string]*entry
	// dirty lists the entries written since they were last flushed (and
	// some that have been flushed by an eviction since: their flag says).
	dirty []*entry
	size  int64 // estimated bytes held by entries
	// limit bounds size; it changes when the process's entry-cache budget
	// is shared anew (see joinBudget), from another goroutine.
	limit atomic.Int64
	// last is the entry of the last Get or Set: operators read a key and
	// then write it, and the second lookup would miss the CPU caches.
	// Evictions forget it.
	last *entry
	vbuf []byte
	// it serves lookups of keys the cache does not hold: seeking an open
	// iterator is cheaper than a Get, which builds one every time. It sees
	// the DB as of its creation, so every write to the DB closes it.
	it *pebble.Iterator
}

// entry is one cached key. Its key string is also its map key.
type entry struct {
	key   string
	val   []byte
	flags uint8
}

const (
	present    uint8 = 1 << iota // the key has a value; otherwise it is absent
	dirty                        // changed since it was written to Pebble
	referenced                   // used since the last eviction pass
)

// entryOverhead estimates the bytes an entry costs beyond its key and
// value: the entry, the map slot, the string header.
const entryOverhead = 96

func newStore(limit int64) *store {
	s := &store{entries: make(map[string]*entry)}
	s.limit.Store(limit)
	return s
}

func (s *store) cost(e *entry) int64 { return int64(len(e.key)+cap(e.val)) + entryOverhead }

// Get implements state.BytesStore. Pebble panics when a read finds a
// corrupt block (a restored file damaged on disk); that becomes an error.
func (s *store) Get(key []byte) (val []byte, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, isErr := r.(error); isErr && pebble.IsCorruptionError(e) {
				if s.it != nil {
					_ = s.it.Close()
					s.it = nil
				}
				val, ok, err = nil, false, fmt.Errorf("reading from pebble: %w", e)
				return
			}
			panic(r)
		}
	}()
	if e := s.lookup(key); e != nil {
		e.flags |= referenced
		return e.val, e.flags&present != 0, nil
	}
	if s.it == nil {
		it, err := s.db.NewIter(nil)
		if err != nil {
			return nil, false, fmt.Errorf("reading from pebble: %w", err)
		}
		s.it = it
	}
	if !s.it.SeekPrefixGE(key) || !bytes.Equal(s.it.Key(), key) {
		if err := s.it.Error(); err != nil {
			return nil, false, fmt.Errorf("reading from pebble: %w", err)
		}
		if _, err := s.add(key, nil, 0); err != nil {
			return nil, false, err
		}
		return nil, false, nil
	}
	v, err := s.it.ValueAndErr()
	if err != nil {
		return nil, false, fmt.Errorf("reading from pebble: %w", err)
	}
	// add may write to the DB (evicting), which closes the iterator, and
	// v with it: copy v first.
	s.vbuf = append(s.vbuf[:0], v...)
	e, err := s.add(key, s.vbuf, present)
	if err != nil {
		return nil, false, err
	}
	return e.val, true, nil
}

// closeIter closes the lookup iterator; the DB is about to change (or to
// be closed).
func (s *store) closeIter() error {
	if s.it == nil {
		return nil
	}
	err := s.it.Close()
	s.it = nil
	if err != nil {
		return fmt.Errorf("reading from pebble: %w", err)
	}
	return nil
}

// commit writes b to the DB.
func (s *store) commit(b *pebble.Batch) error {
	if err := s.closeIter(); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("writing to pebble: %w", err)
	}
	return nil
}

// add caches a key read from Pebble, making room first.
func (s *store) add(key, val []byte, flags uint8) (*entry, error) {
	if s.size > s.limit.Load() {
		if err := s.evict(); err != nil {
			return nil, err
		}
	}
	e := &entry{key: string(key), flags: flags | referenced}
	if val != nil {
		e.val = bytes.Clone(val)
	}
	s.entries[e.key] = e
	s.size += s.cost(e)
	s.last = e
	return e, nil
}

// lookup returns the cached entry of key, nil if none.
func (s *store) lookup(key []byte) *entry {
	if s.last != nil && s.last.key == string(key) {
		return s.last
	}
	e := s.entries[string(key)]
	if e != nil {
		s.last = e
	}
	return e
}

// Set implements state.BytesStore.
func (s *store) Set(key, value []byte) error {
	e := s.lookup(key)
	if e == nil {
		var err error
		if e, err = s.add(key, nil, 0); err != nil {
			return err
		}
	}
	before := cap(e.val)
	e.val = append(e.val[:0], value...)
	s.size += int64(cap(e.val) - before)
	s.markDirty(e, present)
	return nil
}

// Delete implements state.BytesStore.
func (s *store) Delete(key []byte) error {
	e := s.lookup(key)
	if e == nil {
		var err error
		if e, err = s.add(key, nil, 0); err != nil {
			return err
		}
	} else if e.flags&(present|dirty) == 0 {
		return nil // known to be absent from Pebble
	}
	e.val = e.val[:0]
	s.markDirty(e, 0)
	return nil
}

func (s *store) markDirty(e *entry, p uint8) {
	if e.flags&dirty == 0 {
		s.dirty = append(s.dirty, e)
	}
	e.flags = p | dirty | referenced
}

// Scan implements state.BytesStore: it flushes the dirty entries and
// iterates over Pebble.
func (s *store) Scan(lower, upper []byte, f func(key, value []byte) bool) error {
	if err := s.flush(); err != nil {
		return err
	}
	// Pebble keeps the bounds while iterating, and f may change the
	// caller's copies.
	o := &pebble.IterOptions{LowerBound: bytes.Clone(lower)}
	if upper != nil {
		o.UpperBound = bytes.Clone(upper)
	}
	it, err := s.db.NewIter(o)
	if err != nil {
		return fmt.Errorf("scanning pebble: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return fmt.Errorf("scanning pebble: %w", err)
		}
		if !f(it.Key(), v) {
			break
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("scanning pebble: %w", err)
	}
	return nil
}

// keyBytes returns the bytes of an entry's key without copying; Pebble
// only reads them.
func keyBytes(e *entry) []byte { return unsafe.Slice(unsafe.StringData(e.key), len(e.key)) }

func (s *store) write(b *pebble.Batch, e *entry) error {
	if e.flags&present != 0 {
		return b.Set(keyBytes(e), e.val, nil)
	}
	return b.Delete(keyBytes(e), nil)
}

// flush writes every dirty entry to Pebble in one batch.
func (s *store) flush() error {
	if len(s.dirty) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, e := range s.dirty {
		if e.flags&dirty == 0 {
			continue
		}
		if err := s.write(b, e); err != nil {
			return fmt.Errorf("writing to pebble: %w", err)
		}
	}
	if err := s.commit(b); err != nil {
		return err
	}
	for _, e := range s.dirty {
		e.flags &^= dirty
	}
	clear(s.dirty)
	s.dirty = s.dirty[:0]
	return nil
}

// evict drops about a quarter of the cache: entries not used since the last
// pass (a second chance, as CLOCK), in the random order Go iterates maps
// in. Dirty entries it drops are written to Pebble in one batch.
func (s *store) evict() error {
	limit := s.limit.Load()
	target := limit - limit/4
	s.last = nil
	b := s.db.NewBatch()
	defer b.Close()
	var dropped []*entry
	for pass := 0; pass < 2 && s.size > target; pass++ {
		for k, e := range s.entries {
			if s.size <= target {
				break
			}
			if e.flags&referenced != 0 {
				e.flags &^= referenced
				continue
			}
			if e.flags&dirty != 0 {
				if err := s.write(b, e); err != nil {
					return fmt.Errorf("writing to pebble: %w", err)
				}
				dropped = append(dropped, e)
			}
			delete(s.entries, k)
			s.size -= s.cost(e)
		}
	}
	if b.Empty() {
		return nil
	}
	if err := s.commit(b); err != nil {
		return err
	}
	for _, e := range dropped {
		e.flags &^= dirty
	}
	s.dirty = slices.DeleteFunc(s.dirty, func(e *entry) bool { return e.flags&dirty == 0 })
	return nil
}

// reset forgets every cached entry; the caller has flushed them or does
// not want them.
func (s *store) reset() {
	s.last = nil
	clear(s.entries)
	clear(s.dirty)
	s.dirty = s.dirty[:0]
	s.size = 0
}
