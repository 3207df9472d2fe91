package runtime

import (
	"errors"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// bufSource emits 0, 1, 2, ... in batches of two values, round the clock;
// Flush sends the partly filled batch.
type bufSource struct {
	tc      *TaskContext
	partial intBatch
	next    int
}

func (s *bufSource) Open(tc *TaskContext) error { s.tc = tc; return nil }

func (s *bufSource) Produce() (ProduceStatus, error) {
	s.partial = append(s.partial, s.next)
	s.next++
	if len(s.partial) < 2 {
		return Produced, nil
	}
	return Produced, s.Flush()
}

func (s *bufSource) Flush() error {
	if len(s.partial) == 0 {
		return nil
	}
	b := s.partial
	s.partial = nil
	return s.tc.Out.Send(0, 0, b)
}

func (s *bufSource) Snapshot(checkpoint.ID) ([]store.OperatorSnapshot, error) { return nil, nil }
func (s *bufSource) EndOfInput() error                                        { return nil }
func (s *bufSource) Close() error                                             { return nil }

// bufOp buffers what it processes until Flush sends it to its only output.
type bufOp struct {
	tc  *TaskContext
	buf intBatch
}

func (o *bufOp) Open(tc *TaskContext) error { o.tc = tc; return nil }
func (o *bufOp) ProcessBatch(_ int, b Batch) error {
	o.buf = append(o.buf, b.(intBatch)...)
	return nil
}
func (o *bufOp) ProcessWatermark(int64) error { return nil }
func (o *bufOp) EndOfInput() error            { return nil }
func (o *bufOp) Flush() error {
	if len(o.buf) == 0 {
		return nil
	}
	b := o.buf
	o.buf = nil
	return o.tc.Out.Send(0, 0, b)
}
func (o *bufOp) Snapshot(checkpoint.ID) ([]store.OperatorSnapshot, error) { return nil, nil }
func (o *bufOp) Close() error                                             { return nil }
func (o *bufOp) CanUnalign() bool                                         { return true }
func (o *bufOp) EncodeBatch(_ int, b Batch, dst []byte) []byte {
	return encodeInts(dst, b.(intBatch))
}
func (o *bufOp) DecodeBatch(_ int, data []byte) (Batch, error) { return decodeInts(data) }

// queuedBarrier reports whether c holds a barrier, without popping.
func queuedBarrier(c *Channel) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i < c.mu.n; i++ {
		if c.mu.buf[(c.mu.head+i)%len(c.mu.buf)].Kind == KindBarrier {
			return true
		}
	}
	return false
}

func waitBarrier(t *testing.T, c *Channel, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !queuedBarrier(c) {
		if time.Now().After(deadline) {
			t.Fatalf("no barrier forwarded within %v while the channel stayed full (queue holds %d elements)", within, c.Len())
		}
		time.Sleep(time.Millisecond)
	}
}

func testBase(name string, out *Channel, wake chan struct{}, done chan struct{}) *taskBase {
	tc := &TaskContext{Vertex: name, Name: name + "-0", Parallelism: 1, MaxParallelism: 1,
		Out: NewOutputs([][]*Channel{{out}}, done), Done: done}
	return &taskBase{name: tc.Name, tc: tc, wake: wake, done: done, bufferTimeout: -1}
}

// A source blocked on a full channel when an unaligned barrier is injected
// forwards it at once, without waiting for the consumer to make room: its
// blocked batch and its partly filled one go over the channel's capacity,
// and the barrier overtakes them.
func TestSourceForwardsUnalignedBarrierFromFullChannel(t *testing.T) {
	out := NewChannel(1, make(chan struct{}, 1))
	done := make(chan struct{})
	st := &sourceTask{base: testBase("src", out, nil, done), src: &bufSource{}, inject: make(chan struct{}, 1)}
	ran := make(chan error, 1)
	go func() { ran <- st.run() }()
	// Let it fill the channel and block on the next batch.
	time.Sleep(50 * time.Millisecond)
	st.Inject(checkpoint.Barrier{ID: 1, Mode: checkpoint.Unaligned})
	waitBarrier(t, out, 2*time.Second)
	close(done)
	if err := <-ran; !errors.Is(err, ErrCanceled) {
		t.Fatalf("run = %v, want ErrCanceled", err)
	}
	q := out.Drain()
	if len(q) == 0 || q[0].Kind != KindBarrier {
		t.Fatalf("queue = %s, want the barrier first", describeAll(q))
	}
	if q[0].Overtaken != len(q)-1 {
		t.Fatalf("queue = %s: the barrier overtook %d of the %d elements behind it", describeAll(q), q[0].Overtaken, len(q)-1)
	}
	if len(q) < 3 {
		t.Fatalf("queue = %s, want the full channel's batch and the blocked one behind the barrier", describeAll(q))
	}
	want := 0
	for _, e := range q[1:] {
		for _, v := range e.Batch.(intBatch) {
			if v != want {
				t.Fatalf("queue = %s: value %d where %d was due", describeAll(q), v, want)
			}
			want++
		}
	}
	if want == 0 {
		t.Fatalf("queue = %s holds no record behind the barrier", describeAll(q))
	}
}

// An operator task whose output channel is full forwards an unaligned
// barrier without waiting for room: the batch it flushes ahead of the
// barrier goes over the capacity, and the barrier overtakes it.
func TestOperatorForwardsUnalignedBarrierPastFullOutput(t *testing.T) {
	out := NewChannel(1, make(chan struct{}, 1))
	mustPush(t, out, rec(100))
	wake := make(chan struct{}, 1)
	in := NewChannel(4, wake)
	mustPush(t, in, rec(1, 2), bar(1)) // the task buffers r1,2, then takes b1
	done := make(chan struct{})
	ot := &operatorTask{base: testBase("op", out, wake, done), op: &bufOp{}, inputs: []*Channel{in}, logical: []int{0}}
	ran := make(chan error, 1)
	go func() { ran <- ot.run() }()
	waitBarrier(t, out, 2*time.Second)
	close(done)
	if err := <-ran; !errors.Is(err, ErrCanceled) {
		t.Fatalf("run = %v, want ErrCanceled", err)
	}
	if got, want := describeAll(out.Drain()), "b1/2 r100 r1,2"; got != want {
		t.Fatalf("output = %q, want %q", got, want)
	}
}
