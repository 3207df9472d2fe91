package clink

import (
	"encoding"
	"encoding/binary"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/runtime"
	"github.com/clinkstream/clink/state"
)

// records is the batch type between tasks: values and their timestamps.
type records[T any] struct {
	vals []T
	ts   []int64
}

func (r *records[T]) Len() int { return len(r.vals) }

// out is where a chain member sends its results: the next member's input,
// a fan-out of several, or an exchange writer.
type out[T any] struct {
	rec func(v T, ts int64) error
	wm  func(wm int64) error
}

// member is one operator of a chain, as the chain drives it.
type member interface {
	uid() string
	// open restores the member's state from rs (empty on a fresh start).
	open(tc *runtime.TaskContext, rs restoreState) error
	// snapshot returns the member's state, nil if it keeps none.
	snapshot(id checkpoint.ID) (*store.OperatorSnapshot, error)
	endOfInput() error
	close() error
}

// timedMember is implemented by members with processing-time work
// (periodic watermarks): the chain runs it when its deadline passes.
type timedMember interface {
	deadline() (time.Time, bool)
	onDeadline(now time.Time) error
}

type flusher interface{ flush() error }

type partKind uint8

const (
	partForward partKind = iota
	partRebalance
	partHash
	partBroadcast
)

func (p partKind) String() string {
	return [...]string{"forward", "rebalance", "hash", "broadcast"}[p]
}

type edge struct {
	from, to *node
	input    int
	part     partKind
	// newSelector returns a fresh func(T, targets int) int for hash edges
	// (as any); fresh per writer because key hashers keep scratch space.
	newSelector func() any
}

// portOps does for one record type what the erased plan needs.
type portOps interface {
	fanout(outs []any) any
	writer(bc *buildCtx, edgeIndex int, e *edge) any
	feeder(in any) feedFunc
	watermark(in any) func(int64) error
	// encode appends the encoding of the records of b from index from on.
	encode(b runtime.Batch, from int, dst []byte) []byte
	decode(data []byte) (runtime.Batch, error)
	// encodable: records of this type can be captured in checkpoints.
	encodable() bool
}

// interruptEvery is how many records a feeder pushes between two checks of
// the task's Interrupt.
const interruptEvery = 8

// feedFunc pushes the records of a batch from index from on through a
// chain, stopping before a record when intr (if not nil) requests it; it
// returns the index of the first record not pushed (the batch's length once
// every record was, when the batch has been recycled).
type feedFunc func(b runtime.Batch, from int, intr *runtime.Interrupt) (int, error)

type port[T any] struct {
	codec    state.Codec[T]
	codecErr error
	// appends: T marshals and appends itself, so encode appends a value's
	// codec encoding through AppendBinary (appendValue).
	appends bool
	// batches recycles record batches: a consumer returns each batch after
	// processing it, and producers take their next batch from here.
	batches sync.Pool
}

func newPort[T any]() *port[T] {
	return &port[T]{codec: state.CodecFor[T](), codecErr: state.CheckCodec[T](), appends: marshalsItself[T]()}
}

// marshalsItself reports whether the codec encodes T as the length of its
// MarshalBinary bytes and the bytes (a non-pointer type whose pointer
// unmarshals it; see state.CodecFor), and T appends the same bytes through
// AppendBinary.
func marshalsItself[T any]() bool {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
		return false
	}
	var zero T
	_, appends := any(&zero).(encoding.BinaryAppender)
	_, marshals := any(&zero).(encoding.BinaryMarshaler)
	_, unmarshals := any(&zero).(encoding.BinaryUnmarshaler)
	return appends && marshals && unmarshals && !basicCodec[T]()
}

// basicCodec reports whether state.CodecFor has a codec of its own for T
// (the predeclared types), which does not go through MarshalBinary.
func basicCodec[T any]() bool {
	switch any(*new(T)).(type) {
	case string, []byte, int, int64, int32, int16, int8, uint, uint64, uint32, uint16, uint8, float64, float32, bool:
		return true
	}
	return false
}

func (p *port[T]) encodable() bool { return p.codecErr == nil }

func (p *port[T]) getBatch(size int) *records[T] {
	if b, ok := p.batches.Get().(*records[T]); ok && cap(b.vals) >= size {
		return b
	}
	return &records[T]{vals: make([]T, 0, size), ts: make([]int64, 0, size)}
}

func (p *port[T]) putBatch(b *records[T]) {
	clear(b.vals)
	b.vals, b.ts = b.vals[:0], b.ts[:0]
	p.batches.Put(b)
}

func (p *port[T]) fanout(outs []any) any {
	switch len(outs) {
	case 0:
		return &out[T]{rec: func(T, int64) error { return nil }, wm: func(int64) error { return nil }}
	case 1:
		return outs[0]
	}
	typed := make([]*out[T], len(outs))
	for i, o := range outs {
		typed[i] = o.(*out[T])
	}
	return &out[T]{
		rec: func(v T, ts int64) error {
			for _, o := range typed {
				if err := o.rec(v, ts); err != nil {
					return err
				}
			}
			return nil
		},
		wm: func(wm int64) error {
			for _, o := range typed {
				if err := o.wm(wm); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// writer returns the typed output of an exchange edge: records are
// partitioned into per-target batches pushed when full or flushed.
func (p *port[T]) writer(bc *buildCtx, edgeIndex int, e *edge) any {
	w := &exchangeWriter[T]{
		port:      p,
		outs:      bc.tc.Out,
		edge:      edgeIndex,
		batchSize: bc.batchSize,
		lastWm:    runtime.MinWatermark,
	}
	n := bc.tc.Out.Targets(edgeIndex)
	w.pending = make([]*records[T], n)
	for i := range w.pending {
		w.pending[i] = w.newBatch()
	}
	bc.flushers = append(bc.flushers, w)
	o := &out[T]{wm: w.watermark}
	switch {
	case n == 1:
		o.rec = w.recOne
	case e.part == partHash:
		w.selector = e.newSelector().(func(T, int) int)
		o.rec = w.recHash
	case e.part == partBroadcast:
		o.rec = w.recBroadcast
	default:
		// Forward between different parallelisms degrades to rebalance.
		w.next = bc.tc.Subtask % n
		o.rec = w.recRebalance
	}
	return o
}

func (p *port[T]) feeder(in any) feedFunc {
	o := in.(*out[T])
	return func(b runtime.Batch, from int, intr *runtime.Interrupt) (int, error) {
		r := b.(*records[T])
		rec := o.rec
		vals, ts := r.vals, r.ts
		if intr == nil {
			for i, v := range vals[from:] {
				if err := rec(v, ts[from+i]); err != nil {
					return from + i, err
				}
			}
			from = len(vals)
		}
		for from < len(vals) {
			if intr.Requested() {
				return from, nil
			}
			// A barrier waits for at most this many records: checking
			// before every record would cost a cheap chain a few percent.
			end := min(len(vals), from+interruptEvery)
			for i, v := range vals[from:end] {
				if err := rec(v, ts[from+i]); err != nil {
					return from + i, err
				}
			}
			from = end
		}
		n := len(vals)
		p.putBatch(r)
		return n, nil
	}
}

func (p *port[T]) watermark(in any) func(int64) error { return in.(*out[T]).wm }

func (p *port[T]) encode(b runtime.Batch, from int, dst []byte) []byte {
	r := b.(*records[T])
	dst = binary.AppendUvarint(dst, uint64(len(r.vals)-from))
	for i := from; i < len(r.vals); i++ {
		dst = binary.AppendVarint(dst, r.ts[i])
		dst = p.appendValue(dst, &r.vals[i])
	}
	return dst
}

// appendValue appends the codec's encoding of *v. The codec encodes a type
// that marshals itself as the length of its MarshalBinary bytes and the
// bytes; when the type also appends itself (encoding.BinaryAppender, as SQL
// rows do), the same bytes are appended in place, without the codec's
// reflection and its allocations per value: an unaligned checkpoint encodes
// every record queued at a backpressured task. It may run on another
// goroutine than the task's (runtime.Operator.EncodeBatch): it only reads.
func (p *port[T]) appendValue(dst []byte, v *T) []byte {
	if p.appends {
		start := len(dst)
		out, err := any(v).(encoding.BinaryAppender).AppendBinary(dst)
		if err == nil {
			n := len(out) - start
			var lenBuf [binary.MaxVarintLen64]byte
			k := binary.PutUvarint(lenBuf[:], uint64(n))
			out = append(out, lenBuf[:k]...)
			copy(out[start+k:], out[start:start+n])
			copy(out[start:], lenBuf[:k])
			return out
		}
		dst = out[:start]
	}
	return p.codec.Append(dst, *v)
}

func (p *port[T]) decode(data []byte) (runtime.Batch, error) {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)) {
		return nil, fmt.Errorf("decoding record batch: bad record count")
	}
	data = data[k:]
	r := &records[T]{vals: make([]T, 0, n), ts: make([]int64, 0, n)}
	for i := uint64(0); i < n; i++ {
		ts, k := binary.Varint(data)
		if k <= 0 {
			return nil, fmt.Errorf("decoding timestamp of record %d: %w", i, state.ErrShortBuffer)
		}
		data = data[k:]
		v, k2, err := p.codec.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("decoding record %d: %w", i, err)
		}
		data = data[k2:]
		r.vals = append(r.vals, v)
		r.ts = append(r.ts, ts)
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("decoding record batch: %d bytes left after %d records", len(data), n)
	}
	return r, nil
}

// exchangeWriter batches one chain's output for one outgoing edge.
type exchangeWriter[T any] struct {
	port      *port[T]
	outs      *runtime.Outputs
	edge      int
	batchSize int
	pending   []*records[T]
	selector  func(T, int) int
	next      int
	lastWm    int64
}

func (w *exchangeWriter[T]) newBatch() *records[T] { return w.port.getBatch(w.batchSize) }

func (w *exchangeWriter[T]) add(target int, v T, ts int64) error {
	b := w.pending[target]
	b.vals = append(b.vals, v)
	b.ts = append(b.ts, ts)
	if len(b.vals) >= w.batchSize {
		return w.send(target)
	}
	return nil
}

func (w *exchangeWriter[T]) send(target int) error {
	b := w.pending[target]
	w.pending[target] = w.newBatch()
	return w.outs.Send(w.edge, target, b)
}

func (w *exchangeWriter[T]) recOne(v T, ts int64) error { return w.add(0, v, ts) }

func (w *exchangeWriter[T]) recHash(v T, ts int64) error {
	return w.add(w.selector(v, len(w.pending)), v, ts)
}

func (w *exchangeWriter[T]) recRebalance(v T, ts int64) error {
	t := w.next
	w.next++
	if w.next == len(w.pending) {
		w.next = 0
	}
	return w.add(t, v, ts)
}

func (w *exchangeWriter[T]) recBroadcast(v T, ts int64) error {
	for t := range w.pending {
		if err := w.add(t, v, ts); err != nil {
			return err
		}
	}
	return nil
}

func (w *exchangeWriter[T]) flush() error {
	for t, b := range w.pending {
		if len(b.vals) > 0 {
			if err := w.send(t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *exchangeWriter[T]) watermark(wm int64) error {
	if wm <= w.lastWm {
		return nil
	}
	w.lastWm = wm
	if err := w.flush(); err != nil {
		return err
	}
	return w.outs.EdgeWatermark(w.edge, wm)
}

// restoreState is what a checkpoint holds for one operator of one subtask.
type restoreState struct {
	// own is the operator's snapshot in this subtask, when the
	// parallelism did not change.
	own *store.OperatorSnapshot
	// rescaled are the operator's snapshots in every old subtask, when
	// the parallelism changed.
	rescaled []*store.OperatorSnapshot
	from, to int // old and new parallelism when rescaled
}

func (rs restoreState) empty() bool { return rs.own == nil && rs.rescaled == nil }

// keyGroups returns every key group the checkpoint holds for the operator
// (from all old subtasks when rescaled); the backend keeps its range.
func (rs restoreState) keyGroups() [][]state.KeyGroupData {
	var snaps []*store.OperatorSnapshot
	if rs.own != nil {
		snaps = []*store.OperatorSnapshot{rs.own}
	}
	snaps = append(snaps, rs.rescaled...)
	out := make([][]state.KeyGroupData, 0, len(snaps))
	for _, s := range snaps {
		groups := make([]state.KeyGroupData, len(s.KeyGroups))
		for i, g := range s.KeyGroups {
			groups[i] = state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data}
		}
		out = append(out, groups)
	}
	return out
}

// watermark returns the restored watermark: the lowest over old subtasks.
func (rs restoreState) watermark() int64 {
	if rs.own != nil {
		return rs.own.Watermark
	}
	wm := int64(runtime.MaxWatermark)
	for _, s := range rs.rescaled {
		wm = min(wm, s.Watermark)
	}
	if wm == runtime.MaxWatermark {
		return runtime.MinWatermark
	}
	return wm
}
