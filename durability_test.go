package clink_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/internal/fault"
)

// durTasks are the tasks of durJob: the generator and the keyed counter
// (with its sink chained), two subtasks each.
var durTasks = []string{"count-0", "count-1", "gen-0", "gen-1"}

// durJob is a keyed counting job. count < 0 makes its source unbounded.
func durJob(t *testing.T, opts clink.Options, count int64) *clink.Environment {
	t.Helper()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	gen := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: count}, func(i int64) int { return int(i) })
	counted := clink.Process(clink.KeyBy(gen, func(v int) int { return v % 53 }), "count",
		func(ctx *clink.KeyedContext[int, int], _ int, out *clink.Collector[int]) error {
			n, _ := ctx.Value()
			ctx.SetValue(n + 1)
			out.Collect(n + 1)
			return nil
		})
	clink.SinkTo(counted, "sink", clink.SinkFunc(func(int) error { return nil }))
	return env
}

// durFaultAt installs a hook on the named fault point that fails its k-th
// call with injected, and calls after() on its (k+after)-th call, so that a
// job that ignored the failure is stopped and shows it. It returns the
// number of calls so far.
func durFaultAt(t *testing.T, point string, k int64, injected error, guard int64, after func()) *atomic.Int64 {
	t.Helper()
	var calls atomic.Int64
	var once sync.Once
	restore := fault.Set(point, func() error {
		n := calls.Add(1)
		if n == k {
			return injected
		}
		if guard > 0 && n >= k+guard {
			once.Do(after)
		}
		return nil
	})
	t.Cleanup(restore)
	return &calls
}

// durCheckCompleted checks the ack-after-durable invariant on a checkpoint
// directory: every checkpoint with a COMPLETED marker has the snapshot file
// of every task, each decodes, and there is no other.
func durCheckCompleted(t *testing.T, dir string) []checkpoint.ID {
	t.Helper()
	st, err := store.Open(dir, store.Options{Retain: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := st.Completed()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		files, err := st.Snapshots(id)
		if err != nil {
			t.Errorf("COMPLETED-%d, but its snapshots cannot be listed: %v", id, err)
			continue
		}
		var names []string
		for _, f := range files {
			names = append(names, strings.TrimSuffix(f.Name, ".snap"))
		}
		if !slices.Equal(names, durTasks) {
			t.Errorf("COMPLETED-%d names snapshots %v, want exactly %v", id, names, durTasks)
		}
		for _, task := range durTasks {
			snap, err := st.ReadTaskSnapshot(id, task)
			if err != nil {
				t.Errorf("COMPLETED-%d: %v", id, err)
				continue
			}
			if err := snap.Validate(); err != nil {
				t.Errorf("COMPLETED-%d: snapshot of %s: %v", id, task, err)
			}
		}
	}
	return ids
}

// A fault anywhere in a durable write (snapshot or marker) fails the job,
// and never leaves a COMPLETED-N marker whose checkpoint is missing a
// snapshot: a task acknowledges only what is on disk, and the marker is
// written only after every acknowledgement.
func TestFaultInDurableWriteNeverCompletesPartialCheckpoint(t *testing.T) {
	for _, point := range []string{store.FaultBeforeRename, store.FaultBeforeSync, store.FaultAfterRename} {
		t.Run(point, func(t *testing.T) {
			// Periodic checkpoints of an unbounded job: each checkpoint
			// makes five durable writes (four snapshots, one marker), so
			// these hit snapshots and markers of the first few.
			for _, k := range []int64{1, 2, 4, 5, 6, 8, 10, 13, 17} {
				t.Run(fmt.Sprintf("periodic/write-%d", k), func(t *testing.T) {
					durRunFaulted(t, point, k, -1, 2*time.Millisecond)
				})
			}
			// The terminal checkpoint of a bounded job without periodic
			// ones: five writes in all.
			for k := int64(1); k <= 5; k++ {
				t.Run(fmt.Sprintf("terminal/write-%d", k), func(t *testing.T) {
					durRunFaulted(t, point, k, 2000, 0)
				})
			}
		})
	}
}

func durRunFaulted(t *testing.T, point string, k, count int64, interval time.Duration) {
	dir := t.TempDir()
	injected := fmt.Errorf("injected fault at %s call %d", point, k)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := durFaultAt(t, point, k, injected, 200, cancel)
	env := durJob(t, clink.Options{
		Parallelism: 2, CheckpointDir: dir, CheckpointInterval: interval,
		Retain: 1000, BatchSize: 16, ChannelCapacity: 4,
	}, count)
	err := env.Execute(ctx)
	if calls.Load() < k {
		t.Fatalf("the job made only %d durable writes; the fault at write %d never fired (Execute: %v)", calls.Load(), k, err)
	}
	if err == nil {
		t.Fatalf("Execute returned nil although durable write %d failed", k)
	}
	if !errors.Is(err, injected) {
		t.Errorf("Execute error %q does not wrap the injected fault", err)
	}
	if !strings.Contains(err.Error(), "checkpoint") {
		t.Errorf("Execute error %q does not mention the checkpoint", err)
	}
	durCheckCompleted(t, dir)
}

var completedRE = regexp.MustCompile(`COMPLETED-(\d+)`)

// A fault just before the driver writes COMPLETED-N fails the job and leaves
// no COMPLETED-N: a checkpoint whose marker was not written is no restore
// point.
func TestFaultBeforeMarkerLeavesNoMarker(t *testing.T) {
	for _, tc := range []struct {
		name     string
		k        int64
		count    int64
		interval time.Duration
	}{
		{"periodic/first", 1, -1, 2 * time.Millisecond},
		{"periodic/second", 2, -1, 2 * time.Millisecond},
		{"periodic/fifth", 5, -1, 2 * time.Millisecond},
		{"terminal", 1, 2000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			injected := errors.New("injected fault before the marker")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := durFaultAt(t, "checkpoint.before-marker", tc.k, injected, 50, cancel)
			env := durJob(t, clink.Options{
				Parallelism: 2, CheckpointDir: dir, CheckpointInterval: tc.interval,
				Retain: 1000, BatchSize: 16, ChannelCapacity: 4,
			}, tc.count)
			err := env.Execute(ctx)
			if calls.Load() < tc.k {
				t.Fatalf("only %d markers were about to be written; the fault at %d never fired (Execute: %v)", calls.Load(), tc.k, err)
			}
			if err == nil {
				t.Fatalf("Execute returned nil although marker %d could not be written", tc.k)
			}
			if !errors.Is(err, injected) {
				t.Errorf("Execute error %q does not wrap the injected fault", err)
			}
			m := completedRE.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("Execute error %q does not name the marker it could not write", err)
			}
			failed, _ := strconv.ParseUint(m[1], 10, 64)
			ids := durCheckCompleted(t, dir)
			for _, id := range ids {
				if uint64(id) >= failed {
					t.Errorf("COMPLETED-%d exists, but the marker of checkpoint %d failed and nothing may complete after it", id, failed)
				}
			}
			if int64(len(ids)) != tc.k-1 {
				t.Errorf("completed checkpoints %v: want the %d whose markers were written before the fault", ids, tc.k-1)
			}
		})
	}
}
