package runtime

import "github.com/clinkstream/clink/checkpoint"

// Kind says what an Element carries.
type Kind uint8

const (
	// KindRecords is a batch of records.
	KindRecords Kind = iota
	// KindWatermark is an event-time watermark.
	KindWatermark
	// KindBarrier is a checkpoint barrier.
	KindBarrier
	// KindEnd is end-of-input: the producer will push nothing more.
	KindEnd
)

// String names the kind for logs and panics.
func (k Kind) String() string {
	switch k {
	case KindRecords:
		return "records"
	case KindWatermark:
		return "watermark"
	case KindBarrier:
		return "barrier"
	case KindEnd:
		return "end"
	}
	return "kind(?)"
}

// Batch is a non-empty slice of records of one type. The runtime never looks
// inside; the typed layer that produced it knows the element type and how to
// encode it (see Operator.EncodeBatch).
type Batch interface {
	Len() int
}

// Element is what travels on a Channel: a record batch, a watermark, a
// barrier or end-of-input. It is a small value type so channels hold it
// without allocation.
type Element struct {
	Kind      Kind
	Batch     Batch
	Watermark int64
	Barrier   checkpoint.Barrier
	// Overtaken is set on a barrier that took a channel's priority lane: the
	// number of elements queued ahead of it that it overtook. The consumer
	// must treat those elements as preceding the barrier.
	Overtaken int
	// priority: the barrier was pushed with PushPriority (it counts in the
	// consumer's Interrupt while queued).
	priority bool
}

// RecordsElement wraps a batch.
func RecordsElement(b Batch) Element { return Element{Kind: KindRecords, Batch: b} }

// WatermarkElement wraps a watermark.
func WatermarkElement(ts int64) Element { return Element{Kind: KindWatermark, Watermark: ts} }

// BarrierElement wraps a barrier.
func BarrierElement(b checkpoint.Barrier) Element { return Element{Kind: KindBarrier, Barrier: b} }

// EndElement is end-of-input.
func EndElement() Element { return Element{Kind: KindEnd} }
