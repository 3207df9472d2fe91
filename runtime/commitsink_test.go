package runtime

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// countSource emits 0..n-1, one record per Produce, offset = next.
type countSource struct {
	n, next int
	tc      *TaskContext
	buf     intBatch
	onDone  func()
}

func (s *countSource) Open(tc *TaskContext) error {
	s.tc = tc
	if tc.Restored != nil {
		v, _ := binary.Varint(tc.Restored.Operators[0].Offset)
		s.next = int(v)
	}
	return nil
}
func (s *countSource) Snapshot(id checkpoint.ID) ([]store.OperatorSnapshot, error) {
	return []store.OperatorSnapshot{{UID: s.tc.Vertex, Offset: binary.AppendVarint(nil, int64(s.next)), Watermark: MinWatermark}}, nil
}
func (s *countSource) Flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	b := s.buf
	s.buf = nil
	for t := 0; t < s.tc.Out.Targets(0); t++ {
		if err := s.tc.Out.Send(0, t, b); err != nil {
			return err
		}
	}
	return nil
}
func (s *countSource) Close() error { return nil }
func (s *countSource) Produce() (ProduceStatus, error) {
	if s.next >= s.n {
		return Done, nil
	}
	s.buf = append(s.buf, s.next)
	s.next++
	return Produced, nil
}
func (s *countSource) EndOfInput() error { return s.tc.Out.Watermark(MaxWatermark) }

// sumOp sums its input and emits the sum at end of input (like a window
// fired by the final watermark, or a bounded aggregate).
type sumOp struct {
	tc  *TaskContext
	sum int
}

func (o *sumOp) Open(tc *TaskContext) error {
	o.tc = tc
	if tc.Restored != nil && len(tc.Restored.Operators[0].Offset) > 0 {
		v, _ := binary.Varint(tc.Restored.Operators[0].Offset)
		o.sum = int(v)
	}
	return nil
}
func (o *sumOp) Snapshot(id checkpoint.ID) ([]store.OperatorSnapshot, error) {
	return []store.OperatorSnapshot{{UID: o.tc.Vertex, Offset: binary.AppendVarint(nil, int64(o.sum)), Watermark: MinWatermark}}, nil
}
func (o *sumOp) Flush() error { return nil }
func (o *sumOp) Close() error { return nil }
func (o *sumOp) ProcessBatch(_ int, b Batch) error {
	for _, v := range b.(intBatch) {
		o.sum += v
	}
	return nil
}
func (o *sumOp) ProcessWatermark(int64) error { return nil }
func (o *sumOp) EndOfInput() error {
	return o.tc.Out.Send(0, 0, intBatch{1000000 + o.sum})
}
func (o *sumOp) CanUnalign() bool { return true }
func (o *sumOp) EncodeBatch(_ int, b Batch, dst []byte) []byte {
	for _, v := range b.(intBatch) {
		dst = binary.AppendVarint(dst, int64(v))
	}
	return dst
}
func (o *sumOp) DecodeBatch(_ int, data []byte) (Batch, error) {
	var out intBatch
	for len(data) > 0 {
		v, k := binary.Varint(data)
		if k <= 0 {
			return nil, fmt.Errorf("bad")
		}
		out = append(out, int(v))
		data = data[k:]
	}
	return out, nil
}

// txSink is a two-phase-commit sink: records are staged per checkpoint at
// the barrier and published when that checkpoint completes.
type txSink struct {
	sumOp
	mu        sync.Mutex
	open      []int
	staged    map[checkpoint.ID][]int
	committed *[]int
	closed    bool
	lateNotes *int
}

func (s *txSink) ProcessBatch(_ int, b Batch) error {
	s.mu.Lock()
	s.open = append(s.open, b.(intBatch)...)
	s.mu.Unlock()
	return nil
}
func (s *txSink) EndOfInput() error { return nil }
func (s *txSink) Snapshot(id checkpoint.ID) ([]store.OperatorSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.staged == nil {
		s.staged = map[checkpoint.ID][]int{}
	}
	s.staged[id] = s.open
	s.open = nil
	return []store.OperatorSnapshot{{UID: s.tc.Vertex, Watermark: MinWatermark}}, nil
}
func (s *txSink) NotifyCheckpointComplete(id checkpoint.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed && s.lateNotes != nil {
		*s.lateNotes++
	}
	for k, v := range s.staged {
		if k <= id {
			*s.committed = append(*s.committed, v...)
			delete(s.staged, k)
		}
	}
	return nil
}
func (s *txSink) NotifyCheckpointAborted(checkpoint.ID) {}
func (s *txSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if len(s.open) > 0 || len(s.staged) > 0 {
		fmt.Printf("txSink closing with uncommitted output: open=%v staged=%v\n", s.open, s.staged)
	}
	return nil
}
