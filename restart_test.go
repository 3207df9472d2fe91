package clink_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/internal/fault"
	"github.com/clinkstream/clink/metrics"
)

// rsLog collects a job's log lines; safe for concurrent use.
type rsLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *rsLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *rsLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *rsLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// rsExternal is the external system of rsSink: intervals are staged per
// handle and published at commit, once per handle however often it is
// committed. It outlives the job's attempts, as a database would.
type rsExternal struct {
	mu        sync.Mutex
	staged    map[string][]string
	committed map[string]bool
	published []string
}

func newRSExternal() *rsExternal {
	return &rsExternal{staged: map[string][]string{}, committed: map[string]bool{}}
}

func (e *rsExternal) Published() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.published)
}

// rsSink is a tiny committing sink: its handle is the name of a staged
// interval, "<subtask>/<checkpoint>/<run token>".
type rsSink struct {
	ext *rsExternal
	ctx connector.InitContext[string]
	buf []string
}

func (s *rsSink) Open(ctx connector.InitContext[string]) error { s.ctx = ctx; return nil }
func (s *rsSink) Write(v string) error                         { s.buf = append(s.buf, v); return nil }

func (s *rsSink) PrepareCommit(id checkpoint.ID) (string, bool, error) {
	if len(s.buf) == 0 {
		return "", false, nil
	}
	h := fmt.Sprintf("%d/%d/%s", s.ctx.Subtask, id, s.ctx.RunToken)
	s.ext.mu.Lock()
	s.ext.staged[h] = s.buf
	s.ext.mu.Unlock()
	s.buf = nil
	return h, true, nil
}

func (s *rsSink) Commit(h string) error {
	s.ext.mu.Lock()
	defer s.ext.mu.Unlock()
	if s.ext.committed[h] {
		return nil
	}
	recs, ok := s.ext.staged[h]
	if !ok {
		return fmt.Errorf("committing %s: nothing staged under it", h)
	}
	s.ext.committed[h] = true
	delete(s.ext.staged, h)
	s.ext.published = append(s.ext.published, recs...)
	return nil
}

func (s *rsSink) Abort(h string) error {
	s.ext.mu.Lock()
	defer s.ext.mu.Unlock()
	delete(s.ext.staged, h)
	return nil
}

func (s *rsSink) MarshalCommittable(h string) ([]byte, error)   { return []byte(h), nil }
func (s *rsSink) UnmarshalCommittable(b []byte) (string, error) { return string(b), nil }
func (s *rsSink) Close() error                                  { return nil }

const (
	rsRecords = 6000
	rsKeys    = 23
)

// rsJob counts records per key and sends "key=n" to a CollectSink and, with
// ext, to an rsSink. fail runs before each record in the counter; an error
// fails the task.
func rsJob(t *testing.T, opts clink.Options, ext *rsExternal, fail func() error) (*clink.Environment, *clink.CollectSink[string]) {
	t.Helper()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	// The rate keeps the job running long enough for a few checkpoints.
	gen := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: rsRecords, RatePerSecond: 6000},
		func(i int64) int { return int(i) })
	counted := clink.Process(clink.KeyBy(gen, func(v int) int { return v % rsKeys }), "count",
		func(ctx *clink.KeyedContext[int, int], v int, out *clink.Collector[string]) error {
			if fail != nil {
				if err := fail(); err != nil {
					return err
				}
			}
			n, _ := ctx.Value()
			ctx.SetValue(n + 1)
			out.Collect(fmt.Sprintf("%d=%d", v%rsKeys, n+1))
			return nil
		})
	sink := &clink.CollectSink[string]{}
	clink.SinkTo(counted, "collect", sink)
	if ext != nil {
		clink.CommitTo(counted, "commit", func() connector.CommittingSink[string, string] { return &rsSink{ext: ext} })
	}
	return env, sink
}

// rsFinal returns the highest count seen per key: the final keyed state,
// however often the (at-least-once) CollectSink saw a record.
func rsFinal(t *testing.T, items []string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		var n int
		if _, err := fmt.Sscan(v, &n); !ok || err != nil {
			t.Fatalf("bad record %q", it)
		}
		m[k] = max(m[k], n)
	}
	return m
}

// rsReference runs the job without failures once and returns its sorted
// committed output and final counts.
func rsReference(t *testing.T) ([]string, map[string]int) {
	t.Helper()
	ext := newRSExternal()
	env, sink := rsJob(t, clink.Options{Parallelism: 2, CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond}, ext, nil)
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := ext.Published()
	slices.Sort(out)
	if len(out) != rsRecords {
		t.Fatalf("uninterrupted run published %d records, want %d", len(out), rsRecords)
	}
	return out, rsFinal(t, sink.Items())
}

// failAfter fails the user function once, on its n-th call in the whole
// test or the first after it once a checkpoint completed: the flag survives
// the restart, so the second incarnation succeeds.
func failAfter(n int64, reg *metrics.Registry, injected error) func() error {
	var calls atomic.Int64
	var fired atomic.Bool
	return func() error {
		if calls.Add(1) >= n && reg.Summary().CheckpointsCompleted > 0 && fired.CompareAndSwap(false, true) {
			return injected
		}
		return nil
	}
}

func rsCheckSame(t *testing.T, what string, got, want []string) {
	t.Helper()
	got = slices.Clone(got)
	slices.Sort(got)
	if slices.Equal(got, want) {
		return
	}
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	var dup, missing []string
	for _, w := range want {
		if seen[w] == 0 {
			missing = append(missing, w)
		}
		if seen[w] > 1 {
			dup = append(dup, w)
		}
		seen[w] = -1
	}
	t.Errorf("%s: %d records, want %d; %d missing (e.g. %v), %d more than once (e.g. %v)",
		what, len(got), len(want), len(missing), missing[:min(5, len(missing))], len(dup), dup[:min(5, len(dup))])
}

func TestRestartAfterTaskFailureIsExactlyOnce(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	wantOut, wantFinal := rsReference(t)

	errBoom := errors.New("injected user failure")
	ext := newRSExternal()
	var logs rsLog
	reg := metrics.New()
	dir := t.TempDir()
	env, sink := rsJob(t, clink.Options{
		Parallelism: 2, CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond,
		Restart: clink.FixedDelay(3, 10*time.Millisecond), Logger: logs.logger(), Metrics: reg,
	}, ext, failAfter(rsRecords/2, reg, errBoom))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatalf("Execute = %v\nlog:\n%s", err, logs.String())
	}
	log := logs.String()
	if !strings.Contains(log, `msg="task failure -> whole-job restart" task=count-`) || !strings.Contains(log, errBoom.Error()) {
		t.Fatalf("log lacks the restart line naming the task and the failure:\n%s", log)
	}
	if !strings.Contains(log, `restore="checkpoint `) {
		t.Errorf("the restart did not restore a checkpoint (none completed before the failure?):\n%s", log)
	}
	if n := reg.Summary().Restarts; n != 1 {
		t.Errorf("restarts metric = %d, want 1", n)
	}
	if got := rsFinal(t, sink.Items()); !maps.Equal(got, wantFinal) {
		t.Errorf("final counts %v, want %v", got, wantFinal)
	}
	rsCheckSame(t, "committed output", ext.Published(), wantOut)
}

func TestRestartAfterCheckpointFailureIsExactlyOnce(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	wantOut, wantFinal := rsReference(t)

	// The third COMPLETED marker cannot be written: checkpoint 3 fails, and
	// the job rewinds to checkpoint 2.
	var calls atomic.Int64
	t.Cleanup(fault.Set("checkpoint.before-marker", func() error {
		if calls.Add(1) == 3 {
			return errors.New("injected marker write failure")
		}
		return nil
	}))
	ext := newRSExternal()
	var logs rsLog
	env, sink := rsJob(t, clink.Options{
		Parallelism: 2, CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond,
		Restart: clink.ExponentialDelay(3, time.Millisecond, 10*time.Millisecond, 2), Logger: logs.logger(),
	}, ext, nil)
	if err := env.Execute(context.Background()); err != nil {
		t.Fatalf("Execute = %v\nlog:\n%s", err, logs.String())
	}
	log := logs.String()
	for _, want := range []string{
		`msg="checkpoint failure -> whole-job restart" checkpoint=3 reason=`,
		"injected marker write failure",
		`restore="checkpoint 2"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s\nlog:\n%s", want, log)
		}
	}
	if got := rsFinal(t, sink.Items()); !maps.Equal(got, wantFinal) {
		t.Errorf("final counts %v, want %v", got, wantFinal)
	}
	rsCheckSame(t, "committed output", ext.Published(), wantOut)
}

func TestRestartAttemptsExhausted(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	errBoom := errors.New("always failing")
	var runs atomic.Int64
	var logs rsLog
	env, _ := rsJob(t, clink.Options{
		CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond,
		Restart: clink.FixedDelay(2, time.Millisecond), Logger: logs.logger(),
	}, nil, func() error {
		runs.Add(1)
		return errBoom
	})
	err := env.Execute(context.Background())
	if !errors.Is(err, errBoom) {
		t.Fatalf("Execute = %v, want the user error wrapped", err)
	}
	if !strings.Contains(err.Error(), "2 restart attempts exhausted") {
		t.Errorf("Execute = %q, does not say the attempts are exhausted", err)
	}
	if n := runs.Load(); n != 3 {
		t.Errorf("the function failed %d times, want 3 (the first run and 2 restarts)", n)
	}
	if n := strings.Count(logs.String(), "task failure -> whole-job restart"); n != 2 {
		t.Errorf("%d restart log lines, want 2:\n%s", n, logs.String())
	}
}

func TestRestartDoesNotRetryARefusedRestore(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	dir := t.TempDir()
	env, _ := rsJob(t, clink.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond}, nil, nil)
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	var logs rsLog
	env, _ = rsJob(t, clink.Options{
		CheckpointDir: dir, Restore: "latest", MaxParallelism: 64,
		Restart: clink.FixedDelay(5, time.Minute), Logger: logs.logger(),
	}, nil, nil)
	// A retry would wait a minute; the deadline turns that into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := env.Execute(ctx)
	if err == nil || !strings.Contains(err.Error(), "max parallelism") {
		t.Fatalf("Execute = %v, want the max parallelism refused", err)
	}
	if strings.Contains(err.Error(), "restart") || strings.Contains(logs.String(), "whole-job restart") {
		t.Errorf("a refused restore was retried: %v\nlog:\n%s", err, logs.String())
	}
}

func TestRestartOptionsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		s    clink.RestartStrategy
		want string
	}{
		{clink.FixedDelay(-1, time.Second), "attempts must not be negative"},
		{clink.FixedDelay(3, -time.Second), "delay must not be negative"},
		{clink.ExponentialDelay(3, time.Second, 0, 2), "needs a max delay"},
		{clink.ExponentialDelay(3, time.Minute, time.Second, 2), "below the initial delay"},
		{clink.ExponentialDelay(3, time.Second, time.Minute, 0.5), "multiplier"},
	} {
		_, err := clink.NewEnvironment(clink.Options{Restart: tc.s})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewEnvironment with %+v = %v, want an error containing %q", tc.s, err, tc.want)
		}
	}
	for _, s := range []clink.RestartStrategy{clink.NoRestart(), clink.FixedDelay(3, time.Second),
		clink.ExponentialDelay(10, time.Second, time.Minute, 1.5)} {
		if _, err := clink.NewEnvironment(clink.Options{Restart: s}); err != nil {
			t.Errorf("NewEnvironment with %+v = %v", s, err)
		}
	}
}
