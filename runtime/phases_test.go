package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/metrics"
)

// slowSnapshotOp is an intOp whose capture takes at least delay.
type slowSnapshotOp struct {
	*intOp
	delay time.Duration
}

func (o *slowSnapshotOp) Snapshot(id checkpoint.ID) ([]store.OperatorSnapshot, error) {
	time.Sleep(o.delay)
	return o.intOp.Snapshot(id)
}

// A completed checkpoint reports where its time went: the task it waited
// for last (a sink whose capture sleeps, behind queued batches of a slow
// input) with its start delay, capture and asynchronous part, and the
// longest of each part over all tasks.
func TestCheckpointReportsItsPhases(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	const capture = 30 * time.Millisecond
	tr := newTracker()
	g := &JobGraph{
		Vertices: []*Vertex{
			sourceVertex("src", 1, func(int) Source { return &intSource{tr: tr, count: -1, batch: 7} }),
			opVertex("sink", 1, func(int) Operator {
				op := &intOp{tr: tr, batch: func(*intOp, int, intBatch) error {
					time.Sleep(time.Millisecond) // the sink's input fills
					return nil
				}}
				return &slowSnapshotOp{intOp: op, delay: capture}
			}),
		},
		Edges: []Edge{{From: 0, To: 1}},
	}
	reg := metrics.New()
	cfg := Config{
		MaxParallelism: 4, CheckpointDir: t.TempDir(), CheckpointInterval: 100 * time.Millisecond,
		ChannelCapacity: 4, Metrics: reg,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Execute(ctx, g, cfg) }()
	deadline := time.Now().Add(20 * time.Second)
	for reg.Summary().CheckpointsCompleted < 2 {
		if time.Now().After(deadline) {
			t.Fatal("two checkpoints did not complete in 20s")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Execute: %v", err)
	}
	p := reg.Summary().LastCheckpointPhases
	t.Logf("last checkpoint: %+v", p)
	if p.Terminal {
		t.Error("a periodic checkpoint of a canceled job is reported terminal")
	}
	if p.Last != "sink-0" {
		t.Errorf("the checkpoint waited last for %q, want sink-0 (its capture takes %v)", p.Last, capture)
	}
	if p.LastParts.Sync < capture {
		t.Errorf("the sink's capture took %v, want at least %v", p.LastParts.Sync, capture)
	}
	if p.LastParts.StartDelay <= 0 {
		t.Errorf("the sink's start delay is %v: its barrier queued behind batches", p.LastParts.StartDelay)
	}
	if p.LastParts.Async <= 0 {
		t.Errorf("the sink's asynchronous part took %v; the snapshot was written", p.LastParts.Async)
	}
	l, q := p.Longest, p.LastParts
	if l.StartDelay < q.StartDelay || l.Alignment < q.Alignment || l.Sync < q.Sync || l.Async < q.Async {
		t.Errorf("longest parts %+v are shorter than the last task's %+v", l, q)
	}
}

// The terminal checkpoint of a bounded job reports itself as such, and the
// periodic ones before it do not.
func TestCheckpointReportsTerminal(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	tr := newTracker()
	g := pipeline(tr, 3000, func(o *intOp) {
		o.batch = func(*intOp, int, intBatch) error {
			time.Sleep(100 * time.Microsecond)
			return nil
		}
	}, nil)
	reg := metrics.New()
	var periodicTerminal []bool
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var seen int64
		for {
			if s := reg.Summary(); s.CheckpointsCompleted > seen {
				seen = s.CheckpointsCompleted
				periodicTerminal = append(periodicTerminal, s.LastCheckpointPhases.Terminal)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	err := Execute(context.Background(), g, Config{MaxParallelism: 4, CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond, Metrics: reg})
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if !reg.Summary().LastCheckpointPhases.Terminal {
		t.Fatal("the last checkpoint of a bounded job is not reported terminal")
	}
	for i, terminal := range periodicTerminal[:max(0, len(periodicTerminal)-1)] {
		if terminal {
			t.Fatalf("checkpoint %d of %d, before the last, is reported terminal", i+1, len(periodicTerminal))
		}
	}
}
