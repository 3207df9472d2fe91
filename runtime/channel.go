package runtime

import (
	"errors"
	"fmt"
	"sync"
)

// ErrCanceled is returned by a blocking Push when the task was canceled.
var ErrCanceled = errors.New("task canceled")

// Channel is the bounded single-producer single-consumer queue between one
// upstream subtask and one downstream subtask. Record batches block the
// producer while the queue holds Cap elements (this is the backpressure;
// the consumer may lower Cap below the capacity the channel was made with,
// see SetCapacity),
// except while an unaligned barrier is pending at the producer's task,
// which will overtake them (Outputs.Send); watermarks, barriers and end-of-input never block, so control elements
// cannot deadlock a paused input. A barrier may take the priority lane
// (PushPriority): it is placed ahead of the queued record batches, behind any
// queued barrier, and carries the number of elements it overtook.
//
// Channel is the in-process implementation of the runtime's channel
// contract; a network channel implements the same methods.
type Channel struct {
	// max is the capacity the channel was made with.
	max int
	// wake is the consumer's wake-up signal, shared by all inputs of one task.
	wake chan struct{}
	// intr counts the priority barriers queued for the consumer, shared by
	// all inputs of one task; nil when the consumer cannot be interrupted
	// inside a batch. Set before either end uses the channel.
	intr *Interrupt

	mu struct {
		sync.Mutex
		// ring buffer of queued elements; guarded by mu.
		buf     []Element
		head, n int
		records int // queued record batches, the part bounded by capacity
		// capacity bounds records: max, or less while the consumer has it
		// smaller (SetCapacity).
		capacity int
		// protected counts the non-barrier elements at the head that a
		// popped priority barrier overtook: they are still owed to that
		// barrier's region, so a later priority barrier goes behind them.
		protected  int
		waitSpace  bool
		spaceReady chan struct{}
	}
}

// NewChannel returns a channel holding at most capacity record batches,
// signalling wake (a 1-buffered channel owned by the consumer task) whenever
// an element is pushed.
func NewChannel(capacity int, wake chan struct{}) *Channel {
	if capacity < 1 {
		capacity = 1
	}
	c := &Channel{max: capacity, wake: wake}
	c.mu.capacity = capacity
	c.mu.buf = make([]Element, capacity+4)
	c.mu.spaceReady = make(chan struct{}, 1)
	return c
}

// Cap returns the capacity in record batches.
func (c *Channel) Cap() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.capacity
}

// SetCapacity bounds the record lane to n batches, between 1 and the
// capacity the channel was made with, from the next push on; batches
// queued beyond a smaller bound stay, and the producer waits until the
// consumer has taken them. The consumer calls it (see debloater).
func (c *Channel) SetCapacity(n int) {
	n = min(max(n, 1), c.max)
	c.mu.Lock()
	grew := n > c.mu.capacity && c.mu.waitSpace
	c.mu.capacity = n
	if grew {
		c.mu.waitSpace = false
	}
	c.mu.Unlock()
	if grew {
		select {
		case c.mu.spaceReady <- struct{}{}:
		default:
		}
	}
}

// Len returns the number of queued elements.
func (c *Channel) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.n
}

// Pressure returns the occupancy of the record lane, between 0 and 1 (a
// lane filled beyond its capacity, see push, counts as 1).
func (c *Channel) Pressure() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return min(1, float64(c.mu.records)/float64(c.mu.capacity))
}

func (c *Channel) grow() {
	nb := make([]Element, 2*len(c.mu.buf))
	for i := 0; i < c.mu.n; i++ {
		nb[i] = c.mu.buf[(c.mu.head+i)%len(c.mu.buf)]
	}
	c.mu.buf = nb
	c.mu.head = 0
}

func (c *Channel) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Push appends e. A record batch blocks while the record lane is full, until
// the consumer makes room or done is closed (then ErrCanceled).
func (c *Channel) Push(e Element, done <-chan struct{}) error {
	return c.push(e, done, nil, nil)
}

// push is Push that also stops waiting for room once over reports true: it
// rechecks over whenever kick fires, and then appends the batch beyond the
// capacity. The producer's Outputs uses it while an unaligned barrier is
// pending at its task (see Outputs.overtaking).
func (c *Channel) push(e Element, done <-chan struct{}, kick <-chan struct{}, over func() bool) error {
	c.mu.Lock()
	if e.Kind == KindRecords {
		for c.mu.records >= c.mu.capacity && (over == nil || !over()) {
			c.mu.waitSpace = true
			c.mu.Unlock()
			select {
			case <-c.mu.spaceReady:
			case <-kick:
			case <-done:
				return ErrCanceled
			}
			c.mu.Lock()
		}
		c.mu.records++
	}
	if c.mu.n == len(c.mu.buf) {
		c.grow()
	}
	c.mu.buf[(c.mu.head+c.mu.n)%len(c.mu.buf)] = e
	c.mu.n++
	c.mu.Unlock()
	c.signal()
	return nil
}

// PushPriority places barrier b ahead of every queued element that is not a
// barrier or end-of-input, and records in the element how many it overtook.
// It never blocks.
func (c *Channel) PushPriority(b Element) {
	if b.Kind != KindBarrier {
		panic("runtime: PushPriority of a " + b.Kind.String())
	}
	c.mu.Lock()
	if c.mu.n == len(c.mu.buf) {
		c.grow()
	}
	// Find the insertion point: after the last queued barrier or end, and
	// never inside the region a popped priority barrier overtook (the first
	// protected non-barrier elements), so regions stay nested prefixes.
	size := len(c.mu.buf)
	pos, skip := 0, c.mu.protected
	for i := 0; i < c.mu.n; i++ {
		k := c.mu.buf[(c.mu.head+i)%size].Kind
		if k == KindBarrier || k == KindEnd {
			pos = i + 1
		} else if skip > 0 {
			skip--
			pos = i + 1
		}
	}
	b.Overtaken = c.mu.n - pos
	b.priority = true
	if c.intr != nil {
		// Counted before the consumer can pop it.
		c.intr.noteQueued()
	}
	// Shift elements [pos, n) one slot back.
	for i := c.mu.n; i > pos; i-- {
		c.mu.buf[(c.mu.head+i)%size] = c.mu.buf[(c.mu.head+i-1)%size]
	}
	c.mu.buf[(c.mu.head+pos)%size] = b
	c.mu.n++
	c.mu.Unlock()
	c.signal()
}

// PeekOvertaken returns, without removing them, the first n queued
// elements that are not barriers: called right after a priority barrier
// that overtook n elements was popped, those elements (a later priority
// barrier may have been placed in front of them, never among them). The
// caller has captured them into the barrier's checkpoint, so they are no
// longer owed to its region: their protection ends, and a later priority
// barrier may overtake them too. It panics when fewer are queued, which
// would break the channel's contract.
func (c *Channel) PeekOvertaken(n int) []Element {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.protected = 0
	out := make([]Element, 0, n)
	for i := 0; i < c.mu.n && len(out) < n; i++ {
		if e := c.mu.buf[(c.mu.head+i)%len(c.mu.buf)]; e.Kind != KindBarrier {
			out = append(out, e)
		}
	}
	if len(out) < n {
		panic(fmt.Sprintf("runtime: a barrier overtook %d elements, but %d are queued", n, len(out)))
	}
	return out
}

// PeekPriority returns, without removing it, the oldest element when it is
// a barrier pushed with PushPriority; ok=false otherwise. Only the consumer
// calls it, so the element stays at the head until the consumer pops it.
func (c *Channel) PeekPriority() (e Element, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.n == 0 {
		return Element{}, false
	}
	e = c.mu.buf[c.mu.head]
	return e, e.Kind == KindBarrier && e.priority
}

// TryPop removes and returns the oldest element, or ok=false when empty.
func (c *Channel) TryPop() (e Element, ok bool) {
	c.mu.Lock()
	if c.mu.n == 0 {
		c.mu.Unlock()
		return Element{}, false
	}
	e = c.mu.buf[c.mu.head]
	c.mu.buf[c.mu.head] = Element{}
	c.mu.head = (c.mu.head + 1) % len(c.mu.buf)
	c.mu.n--
	switch {
	case e.Kind == KindBarrier:
		c.mu.protected = max(c.mu.protected, e.Overtaken)
		if e.priority && c.intr != nil {
			c.intr.notePopped()
		}
	case c.mu.protected > 0:
		c.mu.protected--
	}
	wakeProducer := false
	if e.Kind == KindRecords {
		c.mu.records--
		if c.mu.waitSpace {
			c.mu.waitSpace = false
			wakeProducer = true
		}
	}
	c.mu.Unlock()
	if wakeProducer {
		select {
		case c.mu.spaceReady <- struct{}{}:
		default:
		}
	}
	return e, true
}

// Drain removes and returns every queued element in order. Used by tests and
// by teardown.
func (c *Channel) Drain() []Element {
	var out []Element
	for {
		e, ok := c.TryPop()
		if !ok {
			return out
		}
		out = append(out, e)
	}
}
