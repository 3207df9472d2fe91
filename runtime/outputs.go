package runtime

import (
	"sync/atomic"

	"github.com/clinkstream/clink/checkpoint"
)

// Outputs is a task's view of its downstream channels: one slice of
// channels per outgoing edge, one channel per downstream subtask.
type Outputs struct {
	edges [][]*Channel
	done  <-chan struct{}
	// overtaking counts the unaligned barriers pending at the task: while
	// it is positive a record batch is pushed even into a full channel.
	// The barrier will take the priority lane and overtake that batch, and
	// the consumer captures what it overtook as in-flight records, so the
	// batch need not wait for room; waiting would hold the barrier back
	// for as long as the consumer takes to free a slot.
	overtaking atomic.Int32
	// kick wakes a Send blocked on a full channel when overtaking rises or
	// a priority barrier reaches the task's inputs (intr).
	kick chan struct{}
	// intr is the task's Interrupt when its chain can stop a batch between
	// records: while a priority barrier it will take is queued, a Send in
	// that batch goes over the capacity too (Interrupt.overCapacity).
	intr *Interrupt
}

// NewOutputs wraps the channels of a task's outgoing edges.
func NewOutputs(edges [][]*Channel, done <-chan struct{}) *Outputs {
	return &Outputs{edges: edges, done: done, kick: make(chan struct{}, 1)}
}

// beginOvertake notes an unaligned barrier pending at the task (it may be
// called from another goroutine than the task's) and wakes a Send blocked
// on a full channel so that it goes over the capacity.
func (o *Outputs) beginOvertake() {
	o.overtaking.Add(1)
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// endOvertake notes that a barrier counted by beginOvertake was forwarded.
func (o *Outputs) endOvertake() { o.overtaking.Add(-1) }

func (o *Outputs) overtakes() bool {
	return o.overtaking.Load() > 0 || o.intr != nil && o.intr.overCapacity()
}

// interruptible makes the task's inputs count their priority barriers in
// a new Interrupt that also wakes a Send blocked on a full output. Call it
// before the task and its producers start.
func (o *Outputs) interruptible(inputs []*Channel) *Interrupt {
	in := &Interrupt{kick: o.kick}
	o.intr = in
	for _, c := range inputs {
		c.intr = in
	}
	return in
}

// overtakes reports whether barrier b takes the priority lane (Barrier).
func overtakes(b checkpoint.Barrier) bool {
	return b.Mode == checkpoint.Unaligned && !b.Terminal
}

// Edges returns the number of outgoing edges.
func (o *Outputs) Edges() int { return len(o.edges) }

// Targets returns the number of downstream subtasks of edge e.
func (o *Outputs) Targets(e int) int { return len(o.edges[e]) }

// Send pushes a record batch to one downstream subtask of edge e, blocking
// while its channel is full, unless an unaligned barrier is pending at the
// task (see overtaking).
func (o *Outputs) Send(e, target int, b Batch) error {
	return o.edges[e][target].push(RecordsElement(b), o.done, o.kick, o.overtakes)
}

// Watermark sends wm to every downstream subtask.
func (o *Outputs) Watermark(wm int64) error {
	return o.broadcast(WatermarkElement(wm))
}

// Barrier forwards b to every downstream subtask. An unaligned barrier takes
// the priority lane and overtakes queued record batches.
func (o *Outputs) Barrier(b checkpoint.Barrier) error {
	if overtakes(b) {
		for _, chans := range o.edges {
			for _, c := range chans {
				c.PushPriority(BarrierElement(b))
			}
		}
		return nil
	}
	return o.broadcast(BarrierElement(b))
}

// End sends end-of-input to every downstream subtask.
func (o *Outputs) End() error { return o.broadcast(EndElement()) }

func (o *Outputs) broadcast(e Element) error {
	for _, chans := range o.edges {
		for _, c := range chans {
			if err := c.Push(e, o.done); err != nil {
				return err
			}
		}
	}
	return nil
}

// Pressure returns the highest occupancy of any output channel.
func (o *Outputs) Pressure() float64 {
	p := 0.0
	for _, chans := range o.edges {
		for _, c := range chans {
			p = max(p, c.Pressure())
		}
	}
	return p
}
