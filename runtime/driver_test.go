package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/internal/fault"
	"github.com/clinkstream/clink/metrics"
)

// stagedMarkers records, each time the driver is about to write a
// COMPLETED marker, whether that marker is staged in dir already (the
// temp file that store.Prepare leaves).
type stagedMarkers struct {
	dir string
	mu  sync.Mutex
	// unstaged lists the markers that were not staged.
	unstaged []string
	markers  int
}

func (s *stagedMarkers) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markers++
	temps, _ := filepath.Glob(filepath.Join(s.dir, ".COMPLETED-*.part"))
	if len(temps) != 1 {
		s.unstaged = append(s.unstaged, fmt.Sprintf("marker %d (staged: %q)", s.markers, temps))
		return nil
	}
	var id uint64
	fmt.Sscanf(filepath.Base(temps[0]), ".COMPLETED-%d.part", &id)
	if _, err := os.Stat(filepath.Join(s.dir, fmt.Sprintf("COMPLETED-%d", id))); err == nil {
		s.unstaged = append(s.unstaged, fmt.Sprintf("marker %d: %s staged for a completed checkpoint", s.markers, temps[0]))
	}
	return nil
}

// The driver prepares every checkpoint before it starts (store.Prepare):
// when it writes the COMPLETED marker, the marker's synced temp file is
// staged already, so that the checkpoint waits only for its rename and a
// directory sync. This holds for periodic checkpoints, each prepared
// after the one before completed, and for the terminal checkpoint of a
// bounded job, prepared when the driver starts.
func TestDriverPreparesEachCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		count    int
		interval time.Duration
	}{
		{"periodic", -1, 20 * time.Millisecond},
		{"terminal", 500, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rec := &stagedMarkers{dir: dir}
			defer fault.Set("checkpoint.before-marker", rec.check)()
			reg := metrics.New()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.count < 0 {
				go func() {
					defer cancel()
					for reg.Summary().CheckpointsCompleted < 4 {
						time.Sleep(time.Millisecond)
					}
				}()
			}
			err := Execute(ctx, pipeline(newTracker(), tc.count, nil, nil), Config{
				MaxParallelism: 4, CheckpointDir: dir, CheckpointInterval: tc.interval, Metrics: reg,
			})
			if err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.markers == 0 {
				t.Fatal("no marker was written")
			}
			if len(rec.unstaged) > 0 {
				t.Fatalf("%d of %d markers were not staged ahead: %v", len(rec.unstaged), rec.markers, rec.unstaged)
			}
			st, err := store.Open(dir, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if ids, err := st.Completed(); err != nil || len(ids) == 0 {
				t.Fatalf("completed checkpoints %v, %v", ids, err)
			}
			// The checkpoint prepared after the last one is gone with
			// the job: no staged marker, no directory without a marker.
			if temps, _ := filepath.Glob(filepath.Join(dir, ".COMPLETED-*.part")); len(temps) > 0 {
				t.Errorf("staged markers left after the job: %q", temps)
			}
			chks, _ := filepath.Glob(filepath.Join(dir, "chk-*"))
			for _, c := range chks {
				if _, err := os.Stat(filepath.Join(dir, "COMPLETED-"+filepath.Base(c)[len("chk-"):])); err != nil {
					t.Errorf("%s left without its COMPLETED marker", filepath.Base(c))
				}
			}
		})
	}
}

// slowOpen is an intOp whose Open waits for release, as an operator
// restoring a large state does.
type slowOpen struct {
	*intOp
	opened  chan struct{}
	release chan struct{}
}

func (o *slowOpen) Open(tc *TaskContext) error {
	close(o.opened)
	<-o.release
	return o.intOp.Open(tc)
}

// triggered returns how many checkpoints the driver triggered.
func triggered(t *testing.T, reg *metrics.Registry) float64 {
	t.Helper()
	mfs, err := reg.Prometheus().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == metrics.NameModeTotal {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// The driver triggers no periodic checkpoint while a task is still opening
// (restoring its state): the barrier would wait behind the restore and
// the checkpoint would take as long. Once every task runs, checkpoints
// follow at the interval.
func TestDriverWaitsForTasksToRun(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	tr := newTracker()
	slow := &slowOpen{intOp: &intOp{tr: tr}, opened: make(chan struct{}), release: make(chan struct{})}
	g := pipeline(tr, -1, nil, nil)
	g.Vertices[2].NewOperator = func(int) Operator { return slow }
	reg := metrics.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- Execute(ctx, g, Config{MaxParallelism: 4, CheckpointDir: t.TempDir(), CheckpointInterval: 5 * time.Millisecond, Metrics: reg})
	}()
	<-slow.opened
	// Forty intervals with the sink still opening.
	time.Sleep(200 * time.Millisecond)
	if n := triggered(t, reg); n != 0 {
		t.Fatalf("%v checkpoints triggered while a task was opening", n)
	}
	close(slow.release)
	for reg.Summary().CheckpointsCompleted < 3 {
		select {
		case err := <-errc:
			t.Fatalf("job ended before three checkpoints: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
