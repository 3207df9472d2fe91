package runtime

import (
	"github.com/clinkstream/clink/checkpoint"
)

// Outputs is a task's view of its downstream channels: one slice of
// channels per outgoing edge, one channel per downstream subtask.
type Outputs struct {
	edges [][]*Channel
	done  <-chan struct{}
}

// NewOutputs wraps the channels of a task's outgoing edges.
func NewOutputs(edges [][]*Channel, done <-chan struct{}) *Outputs {
	return &Outputs{edges: edges, done: done}
}

// Edges returns the number of outgoing edges.
func (o *Outputs) Edges() int { return len(o.edges) }

// Targets returns the number of downstream subtasks of edge e.
func (o *Outputs) Targets(e int) int { return len(o.edges[e]) }

// Send pushes a record batch to one downstream subtask of edge e, blocking
// while its channel is full.
func (o *Outputs) Send(e, target int, b Batch) error {
	return o.edges[e][target].Push(RecordsElement(b), o.done)
}

// Watermark sends wm to every downstream subtask.
func (o *Outputs) Watermark(wm int64) error {
	return o.broadcast(WatermarkElement(wm))
}

// Barrier forwards b to every downstream subtask. An unaligned barrier takes
// the priority lane and overtakes queued record batches.
func (o *Outputs) Barrier(b checkpoint.Barrier) error {
	if b.Mode == checkpoint.Unaligned && !b.Terminal {
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
