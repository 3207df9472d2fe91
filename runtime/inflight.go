package runtime

import (
	"encoding/binary"
	"slices"
	"sync/atomic"

	"github.com/clinkstream/clink/checkpoint/store"
)

// overtakenEncoding encodes, on a goroutine of its own, the record batches
// that an unaligned barrier overtook on one input: they are the last
// in-flight records of that input in the barrier's checkpoint. Under
// backpressure they are a whole channel's worth, and encoding them on the
// task goroutine delayed the task's next barrier and the snapshot; this way
// the inputs' queues encode in parallel and the task goes on processing.
//
// The batches stay queued in the channel while they are encoded, and the
// task processes them later: a chain may recycle or change a batch once it
// has processed it, so before the task processes one of them it waits
// (wait) until the encoding is past it. EncodeBatch only reads a batch.
//
// The task owns the goroutine: it starts it (start) and, before its chain
// is closed, waits for every one it started (operatorTask.encoders). The
// goroutine's work is bounded by the elements captured; it never blocks.
type overtakenEncoding struct {
	input int
	// first is the position of the first captured element among the
	// non-barrier elements the task pops from the input's channel; n is
	// how many were captured.
	first int64
	n     int
	// elems are the captured elements; only the encoding goroutine reads
	// them, and drops them when it is done.
	elems []Element
	// encoded counts the elements encoded so far, and progress (1-buffered)
	// is signalled after each: the task, its only waiter, rechecks encoded.
	// done is closed after the last one, when data and records are
	// complete.
	encoded  atomic.Int64
	progress chan struct{}
	done     chan struct{}
	// data holds the length-prefixed encoded batches (appendFrame), records
	// their record count; read only after done is closed. They start with
	// what the task had captured of the input's records for the checkpoint
	// before the barrier arrived there (head), so that the snapshot has
	// the input's records in one buffer without copying them again.
	data    []byte
	records int
}

// start encodes e.elems through op's EncodeBatch for logical input logical
// on a new goroutine, after head (records of head encoded records, which it
// copies), calling finished when it is done.
func (e *overtakenEncoding) start(op Operator, logical int, head []byte, records int, finished func()) {
	e.done = make(chan struct{})
	e.progress = make(chan struct{}, 1)
	go func() {
		defer finished()
		defer close(e.done)
		var scratch []byte
		batches, total := 0, 0
		for _, el := range e.elems {
			if el.Kind == KindRecords {
				batches++
				total += el.Batch.Len()
			}
		}
		e.records = records
		for k, el := range e.elems {
			if el.Kind == KindRecords {
				scratch = op.EncodeBatch(logical, el.Batch, scratch[:0])
				if e.data == nil {
					// Room for the head and as many records of about
					// this size, with a margin: the queue of a
					// backpressured channel is megabytes, and growing
					// the buffer copies it.
					perRecord := len(scratch) / max(el.Batch.Len(), 1)
					room := total*perRecord + total*perRecord/8 + batches*binary.MaxVarintLen64
					e.data = append(make([]byte, 0, len(head)+room), head...)
				}
				e.data = appendFrame(e.data, scratch)
				e.records += el.Batch.Len()
			}
			e.encoded.Store(int64(k + 1))
			select {
			case e.progress <- struct{}{}:
			default:
			}
		}
		if e.data == nil {
			e.data = head
		}
		e.elems = nil
	}()
}

// covers reports whether the element at position pos of the input's
// non-barrier elements is one of the captured ones.
func (e *overtakenEncoding) covers(pos int64) bool {
	return pos >= e.first && pos < e.first+int64(e.n)
}

// wait returns once the element at position pos (covered by e) is encoded,
// so that the task may process it.
func (e *overtakenEncoding) wait(pos int64) {
	for e.encoded.Load() <= pos-e.first {
		select {
		case <-e.progress:
		case <-e.done:
			return
		}
	}
}

// appendTails appends the encoded tails to the in-flight records of their
// inputs in inflight, waiting for each encoding to end, and returns the
// records ordered by input. A tail follows whatever inflight still holds
// for its input (captureOvertaken normally moved that into the tail).
func appendTails(inflight []store.InFlight, tails []*overtakenEncoding) []store.InFlight {
	for _, tl := range tails {
		<-tl.done
		if tl.records == 0 {
			continue
		}
		k := slices.IndexFunc(inflight, func(f store.InFlight) bool { return f.Input == tl.input })
		if k < 0 {
			inflight = append(inflight, store.InFlight{Input: tl.input})
			k = len(inflight) - 1
		}
		if len(inflight[k].Data) == 0 {
			inflight[k].Data = tl.data
		} else {
			inflight[k].Data = append(inflight[k].Data, tl.data...)
		}
		inflight[k].Records += tl.records
	}
	slices.SortStableFunc(inflight, func(a, b store.InFlight) int { return a.Input - b.Input })
	return inflight
}
