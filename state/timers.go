package state

import (
	"container/heap"
	"fmt"
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
// (key, timestamp) pair; registering it twice keeps one. Timers are keyed
// state (tables "__timers_event" and "__timers_proc"), so they are
// checkpointed with the operator and follow their key group on rescale;
// an in-memory heap per domain orders them for firing and is rebuilt from
// the tables after a restore.
type Timers[K comparable] struct {
	event, proc *timerDomain[K]
}

type timerDomain[K comparable] struct {
	set  *MapState[K, int64, struct{}]
	heap timerHeap[K]
}

type timerEntry[K comparable] struct {
	ts  int64
	key K
}

type timerHeap[K comparable] []timerEntry[K]

func (h timerHeap[K]) Len() int           { return len(h) }
func (h timerHeap[K]) Less(i, j int) bool { return h[i].ts < h[j].ts }
func (h timerHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap[K]) Push(x any)        { *h = append(*h, x.(timerEntry[K])) }
func (h *timerHeap[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// NewTimers registers the timer tables of one keyed operator with b. Call
// it after b.Restore: restored timers are loaded into the heaps here.
func NewTimers[K comparable](b Backend, kc Codec[K]) (*Timers[K], error) {
	t := &Timers[K]{}
	for _, d := range []struct {
		name string
		dst  **timerDomain[K]
	}{{"__timers_event", &t.event}, {"__timers_proc", &t.proc}} {
		set, err := NewMap[K, int64, struct{}](b, d.name, kc)
		if err != nil {
			return nil, fmt.Errorf("registering timers: %w", err)
		}
		dom := &timerDomain[K]{set: set}
		set.t.rangeKeys(func(k K, tss map[int64]struct{}) bool {
			for ts := range tss {
				dom.heap = append(dom.heap, timerEntry[K]{ts: ts, key: k})
			}
			return true
		})
		heap.Init(&dom.heap)
		*d.dst = dom
	}
	return t, nil
}

func (t *Timers[K]) domain(d TimeDomain) *timerDomain[K] {
	if d == EventTime {
		return t.event
	}
	return t.proc
}

// Register sets a timer of key k at ts.
func (t *Timers[K]) Register(d TimeDomain, k K, ts int64) {
	dom := t.domain(d)
	if _, ok := dom.set.Get(k, ts); ok {
		return
	}
	dom.set.Put(k, ts, struct{}{})
	heap.Push(&dom.heap, timerEntry[K]{ts: ts, key: k})
}

// Delete removes the timer of key k at ts, if set.
func (t *Timers[K]) Delete(d TimeDomain, k K, ts int64) {
	// The heap entry stays and is skipped when it comes up.
	t.domain(d).set.Remove(k, ts)
}

// Next returns the earliest timer of domain d, ok=false if none.
func (t *Timers[K]) Next(d TimeDomain) (ts int64, ok bool) {
	dom := t.domain(d)
	for len(dom.heap) > 0 {
		e := dom.heap[0]
		if _, live := dom.set.Get(e.key, e.ts); live {
			return e.ts, true
		}
		heap.Pop(&dom.heap)
	}
	return 0, false
}

// Fire removes every timer of domain d at or before upTo, in timestamp
// order, and calls fire for each. Timers that fire registers are fired in
// the same call if they are due.
func (t *Timers[K]) Fire(d TimeDomain, upTo int64, fire func(k K, ts int64) error) error {
	dom := t.domain(d)
	for len(dom.heap) > 0 && dom.heap[0].ts <= upTo {
		e := heap.Pop(&dom.heap).(timerEntry[K])
		if _, live := dom.set.Get(e.key, e.ts); !live {
			continue
		}
		dom.set.Remove(e.key, e.ts)
		if err := fire(e.key, e.ts); err != nil {
			return err
		}
	}
	return nil
}

// Len returns the number of timers of domain d (including deleted ones
// not yet skipped).
func (t *Timers[K]) Len(d TimeDomain) int { return len(t.domain(d).heap) }
