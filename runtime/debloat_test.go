package runtime

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A task's channels start at two batches; after one period they hold what
// the task processes in the target time, or their whole capacity when the
// task is no bottleneck.
func TestDebloaterSizesChannelsOfABottleneck(t *testing.T) {
	t0 := time.Unix(0, 0)
	for _, tc := range []struct {
		name     string
		batches  int // processed in the period
		idle     time.Duration
		inputs   int
		capacity int
	}{
		// 10 batches in a busy period of 200ms: 50 a second, 50 in the 1s
		// target.
		{"one input", 10, 0, 1, 50},
		{"split over inputs", 10, 0, 2, 25},
		{"above the capacity", 100, 0, 1, 64},
		{"at least two batches", 0 + 1, 0, 4, 2},
		// Busy for half the period or less: no bottleneck.
		{"mostly idle", 10, 100 * time.Millisecond, 1, 64},
		{"busy for most of the period", 10, 20 * time.Millisecond, 1, 56},
		{"nothing processed", 0, 0, 1, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDebloater(time.Second, 64, t0)
			for range tc.batches {
				d.processed()
			}
			d.idled(tc.idle)
			if n, changed := d.tick(t0.Add(debloatPeriod-time.Millisecond), tc.inputs); changed || n != 2 {
				t.Fatalf("tick before the period ended = %d, %v; want the first 2, false", n, changed)
			}
			n, changed := d.tick(t0.Add(debloatPeriod), tc.inputs)
			if n != tc.capacity || changed != (tc.capacity != 2) {
				t.Fatalf("tick = %d, %v; want %d, %v", n, changed, tc.capacity, tc.capacity != 2)
			}
		})
	}
}

// The throughput is smoothed over samples, so one slow or fast period moves
// the capacity only part of the way, and an idle period resets it.
func TestDebloaterSmoothsSamples(t *testing.T) {
	now := time.Unix(0, 0)
	d := newDebloater(time.Second, 1000, now)
	sample := func(batches int, idle time.Duration) int {
		for range batches {
			d.processed()
		}
		d.idled(idle)
		now = now.Add(debloatPeriod)
		n, _ := d.tick(now, 1)
		return n
	}
	if n := sample(100, 0); n != 500 { // 500 batches a second
		t.Fatalf("first sample: capacity %d, want 500", n)
	}
	if n := sample(200, 0); n != 650 { // 1000 a second weighs 0.3 against 500
		t.Fatalf("second sample: capacity %d, want 650", n)
	}
	if n := sample(200, 150*time.Millisecond); n != 1000 {
		t.Fatalf("idle sample: capacity %d, want 1000", n)
	}
	if n := sample(20, 0); n != 100 {
		t.Fatalf("sample after an idle one: capacity %d, want 100 (the idle one reset the average)", n)
	}
}

func TestChannelSetCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewChannel(8, make(chan struct{}, 1))
		done := make(chan struct{})
		defer close(done)
		mustPush(t, c, rec(1), rec(2), rec(3))
		c.SetCapacity(2)
		if c.Cap() != 2 || c.Pressure() != 1 {
			t.Fatalf("Cap() = %d, Pressure() = %v; want 2 and 1", c.Cap(), c.Pressure())
		}
		pushed := make(chan error, 1)
		go func() { pushed <- c.Push(rec(4), done) }()
		synctest.Wait()
		select {
		case err := <-pushed:
			t.Fatalf("a push over the smaller capacity returned %v", err)
		default:
		}
		// Taking one of the three leaves two: still full.
		c.TryPop()
		synctest.Wait()
		if len(pushed) != 0 {
			t.Fatal("a push went in with the lane at the capacity")
		}
		// Growing the capacity lets the producer in.
		c.SetCapacity(3)
		synctest.Wait()
		if err := <-pushed; err != nil {
			t.Fatal(err)
		}
		expectQueue(t, c, "r2 r3 r4")
		c.SetCapacity(0)
		if c.Cap() != 1 {
			t.Fatalf("SetCapacity(0): Cap() = %d, want 1", c.Cap())
		}
		c.SetCapacity(100)
		if c.Cap() != 8 {
			t.Fatalf("SetCapacity(100): Cap() = %d, want the 8 it was made with", c.Cap())
		}
	})
}

// sleepOp is a bufOp that spends delay on every batch and drops it.
type sleepOp struct {
	bufOp
	delay atomic.Int64
}

func (o *sleepOp) ProcessBatch(int, Batch) error {
	time.Sleep(time.Duration(o.delay.Load()))
	return nil
}

// A task starts with small input channels; being a bottleneck, it sizes
// them to hold about the debloat target of its work, and gives them their
// capacity back once it keeps up with its input.
func TestTaskDebloatsItsInputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wake := make(chan struct{}, 1)
		in := NewChannel(64, wake)
		done := make(chan struct{})
		op := &sleepOp{}
		op.delay.Store(int64(10 * time.Millisecond)) // 10 records in 10ms: 1000 a second
		base := testBase("op", NewChannel(1, make(chan struct{}, 1)), wake, done)
		base.debloatTarget = 100 * time.Millisecond
		ot := &operatorTask{base: base, op: op, inputs: []*Channel{in}, logical: []int{0}}
		ran := make(chan error, 1)
		go func() { ran <- ot.run() }()
		synctest.Wait() // the task waits for input
		var pace atomic.Int64
		produced := make(chan struct{})
		go func() {
			defer close(produced)
			for {
				if err := in.Push(rec(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), done); err != nil {
					return
				}
				time.Sleep(time.Duration(pace.Load()))
			}
		}()

		time.Sleep(debloatPeriod / 2)
		if c, n := in.Cap(), in.Len(); c != 2 || n > 2 {
			t.Errorf("before the first sample the input holds %d batches at a capacity of %d, want at most 2 at a capacity of 2", n, c)
		}
		time.Sleep(2 * time.Second)
		// 1000 records a second for 100ms: 100 records, 10 batches.
		if c := in.Cap(); c != 10 {
			t.Errorf("the input of a task processing 1000 records a second holds %d batches, want 10", c)
		}
		if n := in.Len(); n > 11 {
			t.Errorf("%d batches queued at a capacity of 10", n)
		}
		// The task now keeps up: the producer sends a batch every 10ms.
		op.delay.Store(0)
		pace.Store(int64(10 * time.Millisecond))
		time.Sleep(time.Second)
		if c := in.Cap(); c != 64 {
			t.Errorf("the input of a task that keeps up holds %d batches, want all 64", c)
		}
		close(done)
		if err := <-ran; !errors.Is(err, ErrCanceled) {
			t.Fatalf("run = %v, want ErrCanceled", err)
		}
		<-produced
	})
}
