package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// TimeDomain says which clock a timer follows.
type TimeDomain uint8

const (
	// EventTime timers fire when the watermark reaches them.
	EventTime TimeDomain = iota
	// ProcessingTime timers fire when the wall clock reaches them.
	ProcessingTime
)

// String returns "event-time" or "processing-time".
func (d TimeDomain) String() string {
	if d == EventTime {
		return "event-time"
	}
	return "processing-time"
}

// Timers holds one keyed operator's timers of both domains. A timer is a
// (key, timestamp) pair; registering it twice keeps one (but see
// UnkeptEventTimers). Timers are keyed
// state (tables "__timers_event" and "__timers_proc", each key's set of
// timestamps), so they are checkpointed with the operator and follow their
// key group on rescale; an in-memory queue per domain orders them for
// firing and is rebuilt from the tables after a restore.
//
// On the memory backend a key's set is one table entry that holds its
// first timestamp in place (most keys have one timer at a time), so
// setting and firing a timer allocate nothing; on a BytesBackend it is a
// map state. The memory backend encodes a set as the map state's codec
// encodes a map[int64]struct{}, so checkpoints taken when it kept the sets
// in a map state restore.
//
// With UnkeptEventTimers on the memory backend, event-time timers are
// queued only (see UnkeptEventTimers).
type Timers[K comparable] struct {
	event, proc *timerDomain[K]
}

// timerDomain is the timers of one domain: the durable sets (mem on the
// memory backend, bytes on a BytesBackend; one is nil) and the queue.
// An unkept domain has neither: its timers are in the queue only, each
// registration is queued and each queued timer fires.
type timerDomain[K comparable] struct {
	mem    *cowTable[K, timerSet]
	bytes  *MapState[K, int64, struct{}]
	unkept bool
	queue  timerQueue[K]
}

// TimersOption configures NewTimers.
type TimersOption func(*timersConfig)

type timersConfig struct {
	unkeptEvent bool
}

// UnkeptEventTimers keeps event-time timers out of the state on the memory
// backend: a timer is queued in memory only, with no table entry to write,
// capture, checkpoint and restore. Registering the same timer twice queues
// it twice (it fires twice), deleting one does nothing, and a restore
// brings back no event-time timer: the operator sets them again from its
// state (Timers.EventUnkept says when it must). It is for operators whose
// state says when each key next needs its timer, such as rows that
// expire, and whose timer callback checks that state. On a BytesBackend
// the option is ignored: rebuilding the timers would read the whole state.
func UnkeptEventTimers() TimersOption {
	return func(c *timersConfig) { c.unkeptEvent = true }
}

// NewTimers registers the timer tables of one keyed operator with b. Call
// it after b.Restore: restored timers are queued here.
func NewTimers[K comparable](b Backend, kc Codec[K], opts ...TimersOption) (*Timers[K], error) {
	var cfg timersConfig
	for _, o := range opts {
		o(&cfg)
	}
	t := &Timers[K]{}
	for _, d := range []struct {
		name   string
		dst    **timerDomain[K]
		unkept bool
	}{{"__timers_event", &t.event, cfg.unkeptEvent}, {"__timers_proc", &t.proc, false}} {
		dom, err := newTimerDomain(b, d.name, kc, d.unkept)
		if err != nil {
			return nil, fmt.Errorf("registering timers: %w", err)
		}
		*d.dst = dom
	}
	return t, nil
}

// EventUnkept reports whether the event-time timers are queued only
// (UnkeptEventTimers on the memory backend): after a restore none is
// queued, and the operator sets them again from its state.
func (t *Timers[K]) EventUnkept() bool { return t.event.unkept }

func newTimerDomain[K comparable](b Backend, name string, kc Codec[K], unkept bool) (*timerDomain[K], error) {
	m, bb, err := memoryOf(b, name)
	if err != nil {
		return nil, err
	}
	dom := &timerDomain[K]{}
	if unkept && bb == nil {
		// The table is registered for what a checkpoint taken with kept
		// timers holds: the operator sets its timers from its state, so
		// those entries are deleted (the next checkpoint writes no timer).
		t, err := newCowTable(m, name, kc, Codec[timerSet](timerSetCodec{}), timerSet.clone, nil)
		if err != nil {
			return nil, err
		}
		var keys []K
		t.rangeKeys(func(k K, _ timerSet) bool {
			keys = append(keys, k)
			return true
		})
		for _, k := range keys {
			t.del(k)
		}
		dom.unkept = true
		return dom, nil
	}
	if bb != nil {
		set, err := NewMap[K, int64, struct{}](b, name, kc)
		if err != nil {
			return nil, err
		}
		dom.bytes = set
		set.t.rangeKeys(func(k K, tss map[int64]struct{}) bool {
			for ts := range tss {
				dom.queue.push(k, ts)
			}
			return true
		})
		return dom, nil
	}
	t, err := newCowTable(m, name, kc, Codec[timerSet](timerSetCodec{}), timerSet.clone, nil)
	if err != nil {
		return nil, err
	}
	dom.mem = t
	t.rangeKeys(func(k K, s timerSet) bool {
		dom.queue.push(k, s.first)
		for _, ts := range s.rest {
			dom.queue.push(k, ts)
		}
		return true
	})
	return dom, nil
}

func (t *Timers[K]) domain(d TimeDomain) *timerDomain[K] {
	if d == EventTime {
		return t.event
	}
	return t.proc
}

// add puts ts into k's set; false if it was there.
func (d *timerDomain[K]) add(k K, ts int64) bool {
	if d.unkept {
		return true
	}
	if d.bytes != nil {
		if _, ok := d.bytes.Get(k, ts); ok {
			return false
		}
		d.bytes.Put(k, ts, struct{}{})
		return true
	}
	// get, then update only when the set changes: the table remembers the
	// slot it found, and a set left as it is is not copied after a capture.
	if s, ok := d.mem.get(k); ok && s.has(ts) {
		return false
	}
	d.mem.update(k, func(s timerSet, ok bool) (timerSet, bool) {
		if !ok {
			return timerSet{first: ts}, true
		}
		s.rest = append(s.rest, ts)
		return s, true
	})
	return true
}

// remove takes ts out of k's set; false if it was not there.
func (d *timerDomain[K]) remove(k K, ts int64) bool {
	if d.unkept {
		return true
	}
	if d.bytes != nil {
		if _, ok := d.bytes.Get(k, ts); !ok {
			return false
		}
		d.bytes.Remove(k, ts)
		return true
	}
	if s, ok := d.mem.get(k); !ok || !s.has(ts) {
		return false
	}
	d.mem.update(k, func(s timerSet, _ bool) (timerSet, bool) { return s.without(ts) })
	return true
}

// has reports whether ts is in k's set.
func (d *timerDomain[K]) has(k K, ts int64) bool {
	if d.unkept {
		return true
	}
	if d.bytes != nil {
		_, ok := d.bytes.Get(k, ts)
		return ok
	}
	s, ok := d.mem.get(k)
	return ok && s.has(ts)
}

// Register sets a timer of key k at ts.
func (t *Timers[K]) Register(d TimeDomain, k K, ts int64) {
	dom := t.domain(d)
	if dom.add(k, ts) {
		dom.queue.push(k, ts)
	}
}

// Delete removes the timer of key k at ts, if set; an unkept timer is not
// removed (see UnkeptEventTimers).
func (t *Timers[K]) Delete(d TimeDomain, k K, ts int64) {
	// The queue's entry stays and is skipped when it comes up.
	t.domain(d).remove(k, ts)
}

// Next returns the earliest timer of domain d, ok=false if none.
func (t *Timers[K]) Next(d TimeDomain) (ts int64, ok bool) {
	dom := t.domain(d)
	q := &dom.queue
	for len(q.times) > 0 {
		ts := q.times[0]
		b := q.buckets[ts]
		for ; b.next < len(b.keys); b.next++ {
			if dom.has(b.keys[b.next], ts) {
				return ts, true
			}
			q.n--
		}
		q.popTime()
		q.drop(ts, b)
	}
	return 0, false
}

// Fire removes every timer of domain d at or before upTo, in timestamp
// order, and calls fire for each. Timers that fire registers are fired in
// the same call if they are due.
func (t *Timers[K]) Fire(d TimeDomain, upTo int64, fire func(k K, ts int64) error) error {
	dom := t.domain(d)
	q := &dom.queue
	for len(q.times) > 0 && q.times[0] <= upTo {
		// The bucket stays in the queue while it fires, so that a timer
		// fire sets at ts joins it (and fires in this loop); one set at
		// another time gets a bucket of its own.
		ts := q.popTime()
		b := q.buckets[ts]
		for b.next < len(b.keys) {
			k := b.keys[b.next]
			b.next++
			q.n--
			if !dom.remove(k, ts) {
				// Deleted, or a duplicate of a timer set again (unkept
				// timers fire every time they were set).
				continue
			}
			if err := fire(k, ts); err != nil {
				q.pushTime(ts) // the bucket's other timers stay queued
				return err
			}
		}
		q.drop(ts, b)
	}
	return nil
}

// Len returns the number of timers of domain d (including deleted ones
// not yet skipped).
func (t *Timers[K]) Len(d TimeDomain) int { return t.domain(d).queue.n }

// timerSet is the timestamps of one key's timers in one domain (never
// empty): first in place, more in rest, unordered.
type timerSet struct {
	first int64
	rest  []int64
}

func (s timerSet) has(ts int64) bool { return s.first == ts || slices.Contains(s.rest, ts) }

// without returns s without ts (which it holds); keep is false when
// nothing is left. It changes rest in place: the table clones a set a
// capture may share before it hands it out (clone).
func (s timerSet) without(ts int64) (_ timerSet, keep bool) {
	if s.first != ts {
		i := slices.Index(s.rest, ts)
		last := len(s.rest) - 1
		s.rest[i] = s.rest[last]
		s.rest = s.rest[:last]
		return s, true
	}
	if len(s.rest) == 0 {
		return timerSet{}, false
	}
	last := len(s.rest) - 1
	s.first = s.rest[last]
	s.rest = s.rest[:last]
	return s, true
}

// clone copies rest (most sets have none, and cost nothing to clone).
func (s timerSet) clone() timerSet {
	if s.rest != nil {
		s.rest = slices.Clone(s.rest)
	}
	return s
}

// timerSetCodec encodes a timerSet as CodecFor[map[int64]struct{}]
// encodes the same set (the map state the timers were kept in before):
// the number of timestamps plus one, then each timestamp as a varint, in
// the order of those bytes.
type timerSetCodec struct{}

func (timerSetCodec) Append(dst []byte, s timerSet) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s.rest))+2)
	if len(s.rest) == 0 {
		return binary.AppendVarint(dst, s.first)
	}
	enc := make([][]byte, 0, 1+len(s.rest))
	enc = append(enc, binary.AppendVarint(nil, s.first))
	for _, ts := range s.rest {
		enc = append(enc, binary.AppendVarint(nil, ts))
	}
	slices.SortFunc(enc, bytes.Compare)
	for _, e := range enc {
		dst = append(dst, e...)
	}
	return dst
}

func (timerSetCodec) Decode(src []byte) (timerSet, int, error) {
	l, used := binary.Uvarint(src)
	if used <= 0 {
		return timerSet{}, 0, fmt.Errorf("decoding a timer set: %w", ErrShortBuffer)
	}
	if l <= 1 {
		// The map state deleted a key whose set emptied, and so do the
		// timers: no checkpoint holds an empty set.
		return timerSet{}, 0, fmt.Errorf("decoding a timer set: it holds no timers")
	}
	n := l - 1
	if n > uint64(len(src)-used) {
		return timerSet{}, 0, fmt.Errorf("decoding a timer set: %d timestamps in %d bytes: %w", n, len(src)-used, ErrShortBuffer)
	}
	var s timerSet
	if n > 1 {
		s.rest = make([]int64, 0, n-1)
	}
	for i := range n {
		ts, m := binary.Varint(src[used:])
		if m <= 0 {
			return timerSet{}, 0, fmt.Errorf("decoding timestamp %d of a timer set: %w", i, ErrShortBuffer)
		}
		used += m
		if i == 0 {
			s.first = ts
		} else {
			s.rest = append(s.rest, ts)
		}
	}
	return s, used, nil
}

// timerQueue orders the timers of one domain for firing: a min-heap of
// the distinct timestamps that have timers, and per timestamp a bucket of
// the keys whose timers are set for it, in the order they were set.
// Timers of many keys share a timestamp (the end of a window), so setting
// one is an append to the bucket of the last timestamp set (or a map
// look-up), and firing one is a step through a slice, not a heap
// operation per timer. Deleted timers stay queued and are skipped when
// they come up (their key's set no longer holds them).
type timerQueue[K comparable] struct {
	times   []int64
	buckets map[int64]*timerBucket[K]
	// last is the bucket of lastTs, the timestamp set last (nil: none).
	last   *timerBucket[K]
	lastTs int64
	// free holds emptied buckets for reuse.
	free []*timerBucket[K]
	// n counts queued timers, deleted ones included.
	n int
}

// timerBucket is the keys with a timer at one timestamp; those before
// next have been fired or skipped.
type timerBucket[K comparable] struct {
	keys []K
	next int
}

// maxFreeBuckets bounds the emptied buckets kept for reuse, and
// maxFreeKeys the room of one (a bucket that held the timers of a million
// keys is let go, not kept for the next).
const (
	maxFreeBuckets = 8
	maxFreeKeys    = 1 << 14
)

func (q *timerQueue[K]) push(k K, ts int64) {
	q.n++
	if q.last != nil && q.lastTs == ts {
		q.last.keys = append(q.last.keys, k)
		return
	}
	b := q.buckets[ts]
	if b == nil {
		if q.buckets == nil {
			q.buckets = make(map[int64]*timerBucket[K])
		}
		if n := len(q.free); n > 0 {
			b, q.free = q.free[n-1], q.free[:n-1]
		} else {
			b = &timerBucket[K]{}
		}
		q.buckets[ts] = b
		q.pushTime(ts)
	}
	b.keys = append(b.keys, k)
	q.last, q.lastTs = b, ts
}

// drop forgets the bucket of ts, whose keys have all fired or been
// skipped (ts is no longer in the heap).
func (q *timerQueue[K]) drop(ts int64, b *timerBucket[K]) {
	delete(q.buckets, ts)
	if q.last == b {
		q.last = nil
	}
	clear(b.keys) // let go of the keys
	b.keys, b.next = b.keys[:0], 0
	if len(q.free) < maxFreeBuckets && cap(b.keys) <= maxFreeKeys {
		q.free = append(q.free, b)
	}
}

// pushTime adds ts to the heap of timestamps.
func (q *timerQueue[K]) pushTime(ts int64) {
	h := append(q.times, ts)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= ts {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = ts
	q.times = h
}

// popTime removes and returns the earliest timestamp of the heap.
func (q *timerQueue[K]) popTime() int64 {
	h := q.times
	top := h[0]
	last := h[len(h)-1]
	h = h[:len(h)-1]
	i := 0
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1] < h[c] {
			c++
		}
		if last <= h[c] {
			break
		}
		h[i] = h[c]
		i = c
	}
	if len(h) > 0 {
		h[i] = last
	}
	q.times = h
	return top
}
