package clink_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/internal/fault"
)

// memPublisher is an external system for committing-sink tests: intervals
// are staged under their stage names and published at commit.
type memPublisher struct {
	mu        sync.Mutex
	staged    map[string][]int64
	published []int64
	// recovered counts recoveries at open per handle name.
	recovered map[string]int
}

func newMemPublisher() *memPublisher {
	return &memPublisher{staged: map[string][]int64{}, recovered: map[string]int{}}
}

type memHandle struct {
	Name string
}

type memCommitSink struct {
	connector.StateCodec[memHandle]
	p   *memPublisher
	ctx connector.InitContext[memHandle]
	buf []int64
}

func (p *memPublisher) sink() connector.CommittingSink[int64, memHandle] { return &memCommitSink{p: p} }

func (s *memCommitSink) Open(ctx connector.InitContext[memHandle]) error { s.ctx = ctx; return nil }
func (s *memCommitSink) Write(v int64) error                             { s.buf = append(s.buf, v); return nil }
func (s *memCommitSink) PrepareCommit(id checkpoint.ID) (memHandle, bool, error) {
	if len(s.buf) == 0 {
		return memHandle{}, false, nil
	}
	h := memHandle{Name: s.ctx.StageName(id)}
	s.p.mu.Lock()
	s.p.staged[h.Name] = s.buf
	s.p.mu.Unlock()
	s.buf = nil
	return h, true, nil
}
func (s *memCommitSink) Commit(h memHandle) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if recs, ok := s.p.staged[h.Name]; ok {
		s.p.published = append(s.p.published, recs...)
		delete(s.p.staged, h.Name)
	}
	return nil
}
func (s *memCommitSink) Recover(h memHandle) error {
	s.p.mu.Lock()
	s.p.recovered[h.Name]++
	s.p.mu.Unlock()
	return s.Commit(h)
}
func (s *memCommitSink) Abort(h memHandle) error {
	s.p.mu.Lock()
	delete(s.p.staged, h.Name)
	s.p.mu.Unlock()
	return nil
}
func (s *memCommitSink) Close() error { return nil }

func (p *memPublisher) sorted() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.published)
	slices.Sort(out)
	return out
}

func commitJob(t *testing.T, opts clink.Options, p int, n int64, rate float64, pub *memPublisher) *clink.Environment {
	t.Helper()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: n, RatePerSecond: rate / float64(p)},
		func(i int64) int64 { return i }).SetParallelism(p)
	doubled := clink.Map(src, "double", func(i int64) int64 { return 2 * i })
	clink.CommitTo(doubled, "sink", pub.sink)
	return env
}

func expectEachOnce(t *testing.T, got []int64, n int64) {
	t.Helper()
	if int64(len(got)) != n {
		t.Fatalf("published %d records, want %d", len(got), n)
	}
	for i, v := range got {
		if v != 2*int64(i) {
			t.Fatalf("published record #%d is %d, want %d (lost or duplicated output)", i, v, 2*i)
		}
	}
}

// TestCommitToEndToEnd runs a bounded job into a committing sink: output
// appears only through commits, exactly once, and the terminal checkpoint
// commits the tail before Execute returns.
func TestCommitToEndToEnd(t *testing.T) {
	for _, withCheckpoints := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoints=%v", withCheckpoints), func(t *testing.T) {
			pub := newMemPublisher()
			opts := clink.Options{}
			if withCheckpoints {
				opts.CheckpointDir, opts.CheckpointInterval = t.TempDir(), 10*time.Millisecond
			}
			env := commitJob(t, opts, 2, 20_000, 200_000, pub)
			if err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			expectEachOnce(t, pub.sorted(), 20_000)
		})
	}
}

// TestCommitToRescaleWithPendingHandles stops a job right after COMPLETED-N
// is durable and before any sink commits N, so every subtask's handle of N
// is pending in the checkpoint; it then restores at another parallelism.
// Each pending handle must be recovered by exactly one new subtask, and the
// output must hold every record exactly once.
func TestCommitToRescaleWithPendingHandles(t *testing.T) {
	const n = 30_000
	for _, c := range []struct{ from, to int }{{4, 2}, {2, 4}, {3, 2}, {1, 3}} {
		t.Run(fmt.Sprintf("%d->%d", c.from, c.to), func(t *testing.T) {
			dir := t.TempDir()
			pub := newMemPublisher()
			var markers atomic.Int64
			restore := fault.Set("checkpoint.after-marker", func() error {
				if markers.Add(1) == 4 {
					return errors.New("injected: the process dies after COMPLETED-4")
				}
				return nil
			})
			opts := clink.Options{CheckpointDir: dir, CheckpointInterval: 20 * time.Millisecond, Retain: 10, MaxParallelism: 64}
			err := commitJob(t, opts, c.from, n, 60_000, pub).Execute(context.Background())
			restore()
			if err == nil {
				t.Fatal("the first run ended before its fourth checkpoint")
			}
			before := len(pub.sorted())
			if before >= n {
				t.Fatalf("the first run published everything (%d) before it failed", before)
			}
			opts.Restore = "latest"
			if err := commitJob(t, opts, c.to, n, 0, pub).Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			expectEachOnce(t, pub.sorted(), n)
			pub.mu.Lock()
			left := len(pub.staged)
			recovered := maps.Clone(pub.recovered)
			pub.mu.Unlock()
			if len(recovered) == 0 {
				t.Fatal("no handle was pending at the restore")
			}
			authors := map[string]bool{}
			for name, k := range recovered {
				if k != 1 {
					t.Fatalf("handle %s recovered %d times", name, k)
				}
				sub, _, _ := strings.Cut(name, "-")
				authors[sub] = true
			}
			if len(authors) != c.from {
				t.Fatalf("handles of %d old subtasks recovered (%v), want all %d", len(authors), recovered, c.from)
			}
			if left != 0 {
				t.Fatalf("%d staged intervals left uncommitted", left)
			}
		})
	}
}

// slowCommitSink commits after a delay, as a remote store under load does.
type slowCommitSink struct {
	*memCommitSink
	delay time.Duration
}

func (s *slowCommitSink) Commit(h memHandle) error {
	time.Sleep(s.delay)
	return s.memCommitSink.Commit(h)
}

// TestCommitToWaitsForTheFinalCommit: the final checkpoint's commit runs
// on the dispatch goroutine after the checkpoint completed; a bounded job
// must not close its sink under it, nor report success before it ran.
func TestCommitToWaitsForTheFinalCommit(t *testing.T) {
	pub := newMemPublisher()
	env, err := clink.NewEnvironment(clink.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 20 * time.Millisecond, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Commits are slower than checkpoints, so handles queue up: when the
	// input ends, several are still waiting for the dispatcher.
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: 5000, RatePerSecond: 10_000}, func(i int64) int64 { return 2 * i })
	clink.CommitTo(src, "sink", func() connector.CommittingSink[int64, memHandle] {
		return &slowCommitSink{memCommitSink: &memCommitSink{p: pub}, delay: 60 * time.Millisecond}
	})
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectEachOnce(t, pub.sorted(), 5000)
}
