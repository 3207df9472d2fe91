package runtime

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/metrics"
)

// Once the consumer has captured what a popped priority barrier overtook,
// those elements are no longer protected: a later priority barrier
// overtakes them too, and PeekOvertaken skips a barrier queued in front of
// them.
func TestChannelPeekOvertakenEndsProtection(t *testing.T) {
	c := NewChannel(8, make(chan struct{}, 1))
	mustPush(t, c, rec(1), rec(2))
	c.PushPriority(bar(1))
	c.PushPriority(bar(2))
	mustPush(t, c, wmark(5))
	if e, _ := c.TryPop(); describe(e) != "b1/2" {
		t.Fatalf("popped %s, want b1/2", describe(e))
	}
	if got := describeAll(c.PeekOvertaken(2)); got != "r1 r2" {
		t.Fatalf("PeekOvertaken(2) = %s, want r1 r2", got)
	}
	if e, _ := c.TryPop(); describe(e) != "b2/2" {
		t.Fatalf("popped %s, want b2/2", describe(e))
	}
	if got := describeAll(c.PeekOvertaken(2)); got != "r1 r2" {
		t.Fatalf("PeekOvertaken(2) = %s, want r1 r2", got)
	}
	// Without the capture, b3 would queue behind r1 r2 (see
	// TestChannelBackToBackPriorityBarriers).
	c.PushPriority(bar(3))
	expectQueue(t, c, "b3/3 r1 r2 w5")

	mustPush(t, c, rec(4))
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "overtook 2 elements, but 1 are queued") {
			t.Errorf("PeekOvertaken(2) of 1 element: recovered %v, want a panic", r)
		}
	}()
	c.PeekOvertaken(2)
}

// An unaligned checkpoint captures the records its barriers overtook when
// the barriers are popped, so it completes while those records still wait
// in the channels of a slow task: at its completion the sink has not yet
// processed every record the checkpoint holds as processed or in flight.
// (When the capture waited for the overtaken records to be processed, the
// checkpoint took as long as an aligned one under backpressure.)
func TestExecuteUnalignedCheckpointDoesNotWaitForOvertakenRecords(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	var processed atomic.Int64
	g := pipeline(newTracker(), -1, nil, func(o *intOp) {
		o.batch = func(_ *intOp, _ int, b intBatch) error {
			time.Sleep(5 * time.Millisecond) // a slow sink: its input channels fill
			processed.Add(int64(len(b)))
			return nil
		}
	})
	dir := t.TempDir()
	reg := metrics.New()
	cfg := Config{
		MaxParallelism: 4, CheckpointDir: dir, CheckpointInterval: 300 * time.Millisecond,
		CheckpointMode: ModeUnaligned, ChannelCapacity: 16, Retain: 100, Metrics: reg,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	atCompletion := make(chan int64, 1)
	go func() {
		defer cancel()
		deadline := time.Now().Add(15 * time.Second)
		for reg.Summary().CheckpointsCompleted == 0 {
			if time.Now().After(deadline) {
				atCompletion <- -1
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
		atCompletion <- processed.Load()
	}()
	if err := Execute(ctx, g, cfg); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	seenThen := <-atCompletion
	if seenThen < 0 {
		t.Fatal("no checkpoint completed in 15s")
	}
	st, err := store.Open(dir, store.Options{Retain: 100})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := st.Completed()
	if err != nil || len(ids) == 0 {
		t.Fatalf("completed checkpoints %v, %v", ids, err)
	}
	seen, inflight := taskCounts(t, st, ids[0], "sink-0")
	t.Logf("checkpoint %d: the sink had processed %d records and held %d in flight; %d were processed at its completion", ids[0], seen, inflight, seenThen)
	if inflight == 0 {
		t.Fatalf("checkpoint %d captured no in-flight records at the sink; the channels were not full", ids[0])
	}
	if seenThen >= int64(seen+inflight) {
		t.Errorf("checkpoint %d completed only after the sink processed the %d records it captured in flight (%d processed then, %d before the barrier)", ids[0], inflight, seenThen, seen)
	}
}
