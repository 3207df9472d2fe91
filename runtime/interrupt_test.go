package runtime

import (
	"encoding/binary"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// stepOp is a resumable operator over intBatch that processes one record
// at a time: it appends each value to seen (its state), runs the hook
// registered for that value, and with send pushes the value on to its only
// output as a batch of its own.
type stepOp struct {
	tc         *TaskContext
	seen       []int
	after      map[int]func()
	send       bool
	canUnalign bool
	// stops counts the ProcessBatchFrom calls that returned before the end
	// of their batch.
	stops int
	// encode, if set, runs before EncodeBatch encodes a batch, on
	// whatever goroutine calls it.
	encode func(intBatch)
	// clobber negates a batch's values once it is processed, as a chain
	// that recycles its batches reuses them.
	clobber bool
}

func (o *stepOp) Open(tc *TaskContext) error { o.tc = tc; return nil }
func (o *stepOp) ProcessBatch(input int, b Batch) error {
	_, err := o.ProcessBatchFrom(input, b, 0, nil)
	return err
}

func (o *stepOp) ProcessBatchFrom(_ int, b Batch, from int, in *Interrupt) (int, error) {
	ib := b.(intBatch)
	for i := from; i < len(ib); i++ {
		if in != nil && in.Requested() {
			o.stops++
			return i, nil
		}
		o.seen = append(o.seen, ib[i])
		if o.send {
			if err := o.tc.Out.Send(0, 0, intBatch{ib[i]}); err != nil {
				return i, err
			}
		}
		if f := o.after[ib[i]]; f != nil {
			f()
		}
	}
	if o.clobber {
		for i := range ib {
			ib[i] = -ib[i]
		}
	}
	return len(ib), nil
}

func (o *stepOp) EncodeBatchFrom(_ int, b Batch, from int, dst []byte) []byte {
	return encodeInts(dst, b.(intBatch)[from:])
}
func (o *stepOp) ProcessWatermark(int64) error { return nil }
func (o *stepOp) EndOfInput() error            { return nil }
func (o *stepOp) Flush() error                 { return nil }
func (o *stepOp) Close() error                 { return nil }
func (o *stepOp) CanUnalign() bool             { return o.canUnalign }
func (o *stepOp) EncodeBatch(_ int, b Batch, dst []byte) []byte {
	if o.encode != nil {
		o.encode(b.(intBatch))
	}
	return encodeInts(dst, b.(intBatch))
}
func (o *stepOp) DecodeBatch(_ int, data []byte) (Batch, error) { return decodeInts(data) }
func (o *stepOp) Snapshot(checkpoint.ID) ([]store.OperatorSnapshot, error) {
	return []store.OperatorSnapshot{{
		UID: o.tc.Vertex, Watermark: store.NoWatermark,
		OperatorState: []store.NamedState{{Name: "seen", Data: encodeInts(nil, slices.Clone(o.seen))}},
	}}, nil
}

// ackRecorder is the acker of a task run alone: it collects the acked ids.
type ackRecorder struct {
	acked    chan checkpoint.ID
	declined chan error
}

func (a *ackRecorder) ack(id checkpoint.ID, _ checkpoint.ParticipantID, _ checkpoint.AckInfo) {
	a.acked <- id
}
func (a *ackRecorder) decline(_ checkpoint.ID, _ checkpoint.ParticipantID, err error) {
	a.declined <- err
}

// runStepTask runs op as a task over inputs until every input ended, with a
// snapshot worker writing into a fresh store, and returns the store. during,
// if not nil, runs on the test goroutine while the task runs.
func runStepTask(t *testing.T, op *stepOp, inputs []*Channel, wake chan struct{}, out *Channel, during func()) *store.Store {
	t.Helper()
	return runStepTaskRestored(t, op, nil, inputs, wake, out, during)
}

// runStepTaskRestored is runStepTask for a task that first restores
// restored (nil: none).
func runStepTaskRestored(t *testing.T, op *stepOp, restored *store.TaskSnapshot, inputs []*Channel, wake chan struct{}, out *Channel, during func()) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer close(done)
	var outs [][]*Channel
	if out != nil {
		outs = [][]*Channel{{out}}
	}
	tc := &TaskContext{Vertex: "op", Name: "op-0", Parallelism: 1, MaxParallelism: 1,
		Out: NewOutputs(outs, done), Done: done, Restored: restored}
	final := make(chan struct{})
	close(final)
	acks := &ackRecorder{acked: make(chan checkpoint.ID, 16), declined: make(chan error, 16)}
	b := &taskBase{name: tc.Name, participant: "op-0", tc: tc, wake: wake, done: done, final: final, bufferTimeout: -1}
	b.worker = newSnapshotWorker(b.name, tc.Vertex, b.participant, st, tc.Shared, acks)
	logical := make([]int, len(inputs))
	ot := &operatorTask{base: b, op: op, inputs: inputs, logical: logical}
	ot.intr = tc.Out.interruptible(inputs)
	ran := make(chan error, 1)
	go func() { ran <- ot.run() }()
	if during != nil {
		during()
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the task did not end within 10s")
	}
	select {
	case err := <-acks.declined:
		t.Fatalf("the task declined a checkpoint: %v", err)
	default:
	}
	return st
}

// stepSnapshot returns what checkpoint id holds for the task: the values
// it had processed, and the in-flight values of each input in order.
func stepSnapshot(t *testing.T, st *store.Store, id checkpoint.ID, inputs int) (seen []int, inflight [][]int) {
	t.Helper()
	snap, err := st.ReadTaskSnapshot(id, "op-0")
	if err != nil {
		t.Fatal(err)
	}
	op := snap.Operators[0]
	for _, ns := range op.OperatorState {
		if ns.Name == "seen" {
			b, err := decodeInts(ns.Data)
			if err != nil {
				t.Fatal(err)
			}
			seen = b
		}
	}
	inflight = make([][]int, inputs)
	for _, f := range op.InFlight {
		data := f.Data
		for len(data) > 0 {
			n, k := binary.Uvarint(data)
			if k <= 0 || n > uint64(len(data)-k) {
				t.Fatalf("input %d: truncated in-flight frame", f.Input)
			}
			b, err := decodeInts(data[k : k+int(n)])
			if err != nil {
				t.Fatal(err)
			}
			inflight[f.Input] = append(inflight[f.Input], b...)
			data = data[k+int(n):]
		}
		if len(inflight[f.Input]) != f.Records {
			t.Errorf("input %d: the snapshot says %d in-flight records, its frames hold %d", f.Input, f.Records, len(inflight[f.Input]))
		}
	}
	return seen, inflight
}

func ints(from, to int) []int {
	var vs []int
	for v := from; v <= to; v++ {
		vs = append(vs, v)
	}
	return vs
}

// A priority barrier that arrives while the task is inside a batch is taken
// before the batch's next record: the snapshot holds the records processed
// so far as state and the rest of the batch, then what the barrier overtook,
// as in-flight records, each once; processing then goes on with the rest.
// Restoring that snapshot (state, then in-flight replayed) processes every
// record before the barrier exactly once.
func TestTaskTakesUnalignedBarrierInsideBatch(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	for _, tc := range []struct {
		name string
		// setup queues the inputs' elements and registers the hooks that
		// deliver the barrier while op processes a batch.
		setup        func(ins []*Channel, op *stepOp)
		inputs       int
		wantSeen     []int
		wantInflight [][]int
		wantAll      [][]int // values processed, by input of origin
		wantStops    int
	}{
		{
			name:   "on the batch's own input, overtaking queued batches",
			inputs: 1,
			setup: func(ins []*Channel, op *stepOp) {
				mustPush(t, ins[0], rec(ints(1, 8)...), rec(9, 10), rec(11))
				op.after[3] = func() {
					ins[0].PushPriority(bar(1))
					mustPush(t, ins[0], rec(12), EndElement())
				}
			},
			wantSeen:     ints(1, 3),
			wantInflight: [][]int{ints(4, 11)},
			wantAll:      [][]int{ints(1, 12)},
			wantStops:    1,
		},
		{
			name:   "first on another input, the batch's input still owing it",
			inputs: 2,
			setup: func(ins []*Channel, op *stepOp) {
				mustPush(t, ins[0], rec(ints(1, 8)...), rec(9), bar(1), rec(10), EndElement())
				mustPush(t, ins[1], rec(100))
				op.after[3] = func() {
					ins[1].PushPriority(bar(1))
					mustPush(t, ins[1], rec(101), EndElement())
				}
			},
			wantSeen:     ints(1, 3),
			wantInflight: [][]int{ints(4, 9), {100}},
			wantAll:      [][]int{ints(1, 10), {100, 101}},
			wantStops:    1,
		},
		{
			// The batch was captured whole when it was popped (input 0
			// owed the barrier then); its rest must not be captured again.
			name:   "on the batch's input after it arrived first on another",
			inputs: 2,
			setup: func(ins []*Channel, op *stepOp) {
				mustPush(t, ins[0], wmark(0), rec(ints(1, 8)...), rec(9))
				mustPush(t, ins[1], bar(1), rec(100), EndElement())
				op.after[3] = func() {
					ins[0].PushPriority(bar(1))
					mustPush(t, ins[0], rec(10), EndElement())
				}
			},
			wantSeen:     nil,
			wantInflight: [][]int{ints(1, 9), nil},
			wantAll:      [][]int{ints(1, 10), {100}},
			wantStops:    1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wake := make(chan struct{}, 1)
			ins := make([]*Channel, tc.inputs)
			for i := range ins {
				ins[i] = NewChannel(16, wake)
			}
			op := &stepOp{after: map[int]func(){}, canUnalign: true}
			tc.setup(ins, op)
			st := runStepTask(t, op, ins, wake, nil, nil)
			seen, inflight := stepSnapshot(t, st, 1, tc.inputs)
			if !slices.Equal(seen, tc.wantSeen) {
				t.Errorf("checkpoint 1 holds %v as processed, want %v", seen, tc.wantSeen)
			}
			for i := range tc.inputs {
				if !slices.Equal(inflight[i], tc.wantInflight[i]) {
					t.Errorf("checkpoint 1 holds %v in flight on input %d, want %v", inflight[i], i, tc.wantInflight[i])
				}
			}
			// Every value processed once, each input's in order.
			for i, want := range tc.wantAll {
				var got []int
				for _, v := range op.seen {
					if slices.Contains(want, v) {
						got = append(got, v)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("processed %v of input %d, want %v (all: %v)", got, i, want, op.seen)
				}
			}
			if n := len(slices.Concat(tc.wantAll...)); len(op.seen) != n {
				t.Errorf("processed %d values, want %d: %v", len(op.seen), n, op.seen)
			}
			if op.stops != tc.wantStops {
				t.Errorf("the chain stopped inside a batch %d times, want %d", op.stops, tc.wantStops)
			}
		})
	}
}

// A task whose chain cannot capture in-flight records handles unaligned
// barriers as aligned: it finishes the batch and what the barrier overtook
// before the snapshot, and the checkpoint holds nothing in flight.
func TestTaskFinishesBatchBeforeBarrierItAligns(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	wake := make(chan struct{}, 1)
	in := NewChannel(16, wake)
	mustPush(t, in, rec(ints(1, 8)...), rec(9, 10))
	op := &stepOp{after: map[int]func(){}}
	op.after[3] = func() {
		in.PushPriority(bar(1))
		mustPush(t, in, rec(11), EndElement())
	}
	st := runStepTask(t, op, []*Channel{in}, wake, nil, nil)
	seen, inflight := stepSnapshot(t, st, 1, 1)
	if !slices.Equal(seen, ints(1, 10)) || len(inflight[0]) != 0 {
		t.Errorf("checkpoint 1 holds %v as processed and %v in flight, want %v and nothing", seen, inflight[0], ints(1, 10))
	}
	if !slices.Equal(op.seen, ints(1, 11)) {
		t.Errorf("processed %v, want %v", op.seen, ints(1, 11))
	}
}

// A task blocked inside a batch on a full output takes a priority barrier
// that reaches its input only then: the blocked push goes over the capacity,
// the batch stops after that record, and the barrier overtakes the output.
func TestTaskBlockedOnFullOutputTakesArrivingBarrier(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	out := NewChannel(1, make(chan struct{}, 1))
	mustPush(t, out, rec(100))
	wake := make(chan struct{}, 1)
	in := NewChannel(4, wake)
	mustPush(t, in, rec(1, 2, 3))
	op := &stepOp{after: map[int]func(){}, send: true, canUnalign: true}
	consumed := make(chan struct{})
	st := runStepTask(t, op, []*Channel{in}, wake, out, func() {
		// Let the task block pushing r1 into the full output.
		time.Sleep(50 * time.Millisecond)
		in.PushPriority(bar(1))
		waitBarrier(t, out, 2*time.Second)
		var got []Element
		for range 3 {
			e, _ := out.TryPop()
			got = append(got, e)
		}
		if got, want := describeAll(got), "b1/2 r100 r1"; got != want {
			t.Errorf("output = %q, want %q", got, want)
		}
		mustPush(t, in, EndElement())
		go func() {
			defer close(consumed)
			for {
				if e, ok := out.TryPop(); ok && e.Kind == KindEnd {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	})
	<-consumed
	seen, inflight := stepSnapshot(t, st, 1, 1)
	if !slices.Equal(seen, []int{1}) || !slices.Equal(inflight[0], []int{2, 3}) {
		t.Errorf("checkpoint 1 holds %v as processed and %v in flight, want [1] and [2 3]", seen, inflight[0])
	}
	if !slices.Equal(op.seen, ints(1, 3)) {
		t.Errorf("processed %v, want [1 2 3]", op.seen)
	}
}

// Interrupt.Requested reports a queued priority barrier until the task pops
// it or declines it.
func TestInterruptCountsQueuedPriorityBarriers(t *testing.T) {
	wake := make(chan struct{}, 1)
	a, b := NewChannel(4, wake), NewChannel(4, wake)
	in := NewOutputs(nil, nil).interruptible([]*Channel{a, b})
	mustPush(t, a, rec(1), bar(1)) // a plain barrier does not interrupt
	if in.Requested() {
		t.Fatal("Requested without a priority barrier queued")
	}
	b.PushPriority(bar(1))
	a.PushPriority(bar(2))
	if !in.Requested() {
		t.Fatal("not Requested with two priority barriers queued")
	}
	in.declined = 2
	if in.Requested() {
		t.Fatal("Requested after both queued barriers were declined")
	}
	if e, ok := b.PeekPriority(); !ok || describe(e) != "b1/0" {
		t.Fatalf("PeekPriority = %s, %v; want b1/0", describe(e), ok)
	}
	b.TryPop()
	// Popping one makes the task look at the other again.
	if !in.Requested() {
		t.Fatal("not Requested after one of two priority barriers was popped")
	}
	if _, ok := a.PeekPriority(); ok {
		t.Fatal("PeekPriority reported a barrier queued behind a record batch")
	}
	for range a.Drain() {
	}
	if in.Requested() || in.queued.Load() != 0 {
		t.Fatalf("Requested with every barrier popped (queued %d)", in.queued.Load())
	}
}

// The batches an unaligned barrier overtook are encoded off the task
// goroutine: the task goes on processing the ones already encoded while a
// later one is still being encoded, but processes none before its encoding
// is past it (the chain may recycle a processed batch). The checkpoint holds
// exactly the overtaken records, in order, and restoring it replays them.
func TestTaskEncodesOvertakenBatchesOffItsGoroutine(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	wake := make(chan struct{}, 1)
	in := NewChannel(16, wake)
	mustPush(t, in, rec(1, 2), wmark(0), rec(3, 4), rec(5, 6), rec(7, 8))
	in.PushPriority(bar(1))
	mustPush(t, in, rec(9), EndElement())

	gate := make(chan struct{})
	reached4 := make(chan struct{})
	var early atomic.Bool // 5 was processed before its batch was encoded
	var encodedFive atomic.Bool
	op := &stepOp{after: map[int]func(){}, canUnalign: true, clobber: true}
	op.encode = func(b intBatch) {
		if b[0] == 5 {
			<-gate
			encodedFive.Store(true)
		}
	}
	op.after[4] = func() { close(reached4) }
	op.after[5] = func() { early.Store(!encodedFive.Load()) }
	st := runStepTask(t, op, []*Channel{in}, wake, nil, func() {
		defer close(gate)
		select {
		case <-reached4:
		case <-time.After(5 * time.Second):
			t.Error("the task processed no overtaken batch while a later one was being encoded")
		}
	})
	if early.Load() {
		t.Error("the task processed a batch before its encoding was past it")
	}
	seen, inflight := stepSnapshot(t, st, 1, 1)
	if len(seen) != 0 || !slices.Equal(inflight[0], ints(1, 8)) {
		t.Errorf("checkpoint 1 holds %v as processed and %v in flight, want nothing and %v", seen, inflight[0], ints(1, 8))
	}
	if !slices.Equal(op.seen, ints(1, 9)) {
		t.Errorf("processed %v, want %v", op.seen, ints(1, 9))
	}

	snap, err := st.ReadTaskSnapshot(1, "op-0")
	if err != nil {
		t.Fatal(err)
	}
	again := NewChannel(16, wake)
	mustPush(t, again, rec(9), EndElement())
	restored := &stepOp{after: map[int]func(){}, canUnalign: true}
	runStepTaskRestored(t, restored, snap, []*Channel{again}, wake, nil, nil)
	if !slices.Equal(restored.seen, ints(1, 9)) {
		t.Errorf("the restored task processed %v, want %v", restored.seen, ints(1, 9))
	}
}

// When a task captured records of an input for an unaligned checkpoint
// before that input's barrier arrived, and the barrier then overtook queued
// batches, the snapshot holds the captured records and then the overtaken
// ones, in order, as the input's in-flight records.
func TestTaskCapturedRecordsPrecedeOvertakenOnes(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	wake := make(chan struct{}, 1)
	in0 := NewChannel(16, wake)
	in1 := NewChannel(16, wake)
	in0.PushPriority(bar(1))
	mustPush(t, in0, EndElement())
	mustPush(t, in1, rec(1, 2), rec(3, 4), rec(5))
	op := &stepOp{after: map[int]func(){}, canUnalign: true, clobber: true}
	// Once 1,2 (popped after the barrier on input 0) is processed, the
	// barrier arrives on input 1 and overtakes 3,4 and 5.
	op.after[2] = func() {
		in1.PushPriority(bar(1))
		if err := in1.Push(EndElement(), never); err != nil {
			t.Error(err)
		}
	}
	st := runStepTask(t, op, []*Channel{in0, in1}, wake, nil, nil)
	seen, inflight := stepSnapshot(t, st, 1, 2)
	if len(seen) != 0 || len(inflight[0]) != 0 || !slices.Equal(inflight[1], ints(1, 5)) {
		t.Errorf("checkpoint 1 holds %v as processed and %v in flight, want nothing and [[] %v]", seen, inflight, ints(1, 5))
	}
	if !slices.Equal(op.seen, ints(1, 5)) {
		t.Errorf("processed %v, want %v", op.seen, ints(1, 5))
	}
}

// The encoding of what a barrier overtook takes over the records the task
// had captured of that input before (the head) and appends to them, so
// that the input's in-flight records reach the snapshot file in one buffer,
// which MarshalParts passes on without another copy.
func TestOvertakenEncodingHoldsTheHead(t *testing.T) {
	head := appendFrame(nil, encodeInts(nil, intBatch{1, 2}))
	var big []int
	for v := 3; v < 3+store.PartMin; v++ {
		big = append(big, v)
	}
	enc := &overtakenEncoding{input: 1, n: 2, elems: []Element{rec(big...), wmark(7), rec(-1)}}
	ended := make(chan struct{})
	enc.start(&stepOp{}, 0, head, 2, func() { close(ended) })
	<-ended
	inflight := appendTails([]store.InFlight{{Input: 0, Records: 1, Data: appendFrame(nil, encodeInts(nil, intBatch{0}))}}, []*overtakenEncoding{enc})
	if len(inflight) != 2 || inflight[1].Input != 1 || inflight[1].Records != 3+len(big) {
		t.Fatalf("in-flight records %+v, want input 0 and input 1 with %d records", inflight, 3+len(big))
	}
	want := appendFrame(appendFrame(slices.Clone(head), encodeInts(nil, big)), encodeInts(nil, intBatch{-1}))
	if got := inflight[1].Data; !slices.Equal(got, want) || &got[0] != &enc.data[0] {
		t.Fatal("input 1's in-flight records are not the encoding's buffer of the head and then the overtaken batches")
	}
	snap := &store.TaskSnapshot{Checkpoint: 1, Task: "op-0", Parallelism: 1, MaxParallelism: 1,
		Operators: []store.OperatorSnapshot{{UID: "op", Watermark: store.NoWatermark, InFlight: inflight}}}
	found := false
	for _, p := range snap.MarshalParts() {
		found = found || &p[0] == &enc.data[0]
	}
	if !found {
		t.Fatal("MarshalParts copied the in-flight records of input 1")
	}
}
