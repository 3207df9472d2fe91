package runtime

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

type failAfterBarrier struct {
	sumOp
	snapped bool
}

func (o *failAfterBarrier) Snapshot(id checkpoint.ID) ([]store.OperatorSnapshot, error) {
	o.snapped = true
	return o.sumOp.Snapshot(id)
}
func (o *failAfterBarrier) ProcessBatch(_ int, b Batch) error {
	if o.snapped {
		return errors.New("boom")
	}
	return o.tc.Out.Send(0, 0, b)
}
func (o *failAfterBarrier) Flush() error { return nil }

type slowSnapSink struct {
	txSink
	done     <-chan struct{}
	notified *atomic.Int32
}

func (s *slowSnapSink) Open(tc *TaskContext) error { s.done = tc.Done; return s.txSink.Open(tc) }
func (s *slowSnapSink) Snapshot(id checkpoint.ID) ([]store.OperatorSnapshot, error) {
	time.Sleep(2 * time.Millisecond)
	return s.txSink.Snapshot(id)
}
func (s *slowSnapSink) NotifyCheckpointComplete(id checkpoint.ID) error {
	select {
	case <-s.done:
		s.notified.Add(1)
	default:
	}
	return s.txSink.NotifyCheckpointComplete(id)
}

// A job that failed must not commit checkpoints into half-torn-down sinks.
func TestNoCommitAfterJobFailed(t *testing.T) {
	var notified atomic.Int32
	late := 0
	for i := 0; i < 200; i++ {
		var committed []int
		g := &JobGraph{
			Vertices: []*Vertex{
				{UID: "src", Parallelism: 1, NewSource: func(int) Source { return &countSource{n: 1 << 30} }},
				{UID: "x", Parallelism: 1, NewOperator: func(int) Operator { return &failAfterBarrier{} }},
				{UID: "sink", Parallelism: 1, NewOperator: func(int) Operator {
					return &slowSnapSink{txSink: txSink{committed: &committed, lateNotes: &late}, notified: &notified}
				}},
			},
			Edges: []Edge{{From: 0, To: 1}, {From: 1, To: 2}},
		}
		err := Execute(context.Background(), g, Config{MaxParallelism: 8, CheckpointDir: t.TempDir(), CheckpointInterval: time.Millisecond, Logger: nil})
		if err == nil {
			t.Fatal("job did not fail")
		}
	}
	t.Logf("runs that committed a checkpoint after the job failed: %d (after the sink closed: %d)", notified.Load(), late)
	if notified.Load() > 0 {
		t.Fail()
	}
}
