package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/internal/fault"
	"github.com/clinkstream/clink/metrics"
)

func TestRestartPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    RestartPolicy
		want string // substring of the error; empty: valid
	}{
		{"zero", RestartPolicy{}, ""},
		{"fixed", RestartPolicy{Attempts: 3, Delay: time.Second}, ""},
		{"fixed multiplier 1", RestartPolicy{Attempts: 3, Delay: time.Second, Multiplier: 1}, ""},
		{"exponential", RestartPolicy{Attempts: 3, Delay: time.Second, Multiplier: 2, MaxDelay: time.Minute}, ""},
		{"exponential max equals initial", RestartPolicy{Attempts: 3, Delay: time.Second, Multiplier: 2, MaxDelay: time.Second}, ""},
		{"negative attempts", RestartPolicy{Attempts: -1}, "attempts must not be negative"},
		{"negative delay", RestartPolicy{Attempts: 1, Delay: -time.Second}, "delay must not be negative"},
		{"negative max delay", RestartPolicy{Attempts: 1, MaxDelay: -1}, "max delay must not be negative"},
		{"negative reset", RestartPolicy{Attempts: 1, ResetAfter: -1}, "reset threshold must not be negative"},
		{"shrinking", RestartPolicy{Attempts: 1, Multiplier: 0.5}, "multiplier must be 0, 1 or above 1"},
		{"negative multiplier", RestartPolicy{Attempts: 1, Multiplier: -2}, "multiplier must be 0, 1 or above 1"},
		{"NaN multiplier", RestartPolicy{Attempts: 1, Multiplier: math.NaN()}, "multiplier"},
		{"infinite multiplier", RestartPolicy{Attempts: 1, Multiplier: math.Inf(1)}, "multiplier"},
		{"uncapped", RestartPolicy{Attempts: 1, Delay: time.Second, Multiplier: 2}, "needs a max delay"},
		{"cap below initial", RestartPolicy{Attempts: 1, Delay: time.Minute, Multiplier: 2, MaxDelay: time.Second}, "below the initial delay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tc.p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate(%+v) = %v, want an error containing %q", tc.p, err, tc.want)
			}
		})
	}
}

func TestRestartPolicyDelayBefore(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    RestartPolicy
		want []time.Duration // for restarts 1, 2, ...
	}{
		{"fixed", RestartPolicy{Attempts: 4, Delay: 3 * time.Second},
			[]time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second, 3 * time.Second}},
		{"fixed multiplier 1", RestartPolicy{Attempts: 3, Delay: time.Second, Multiplier: 1, MaxDelay: time.Hour},
			[]time.Duration{time.Second, time.Second, time.Second}},
		{"no delay", RestartPolicy{Attempts: 2}, []time.Duration{0, 0}},
		{"doubling capped", RestartPolicy{Attempts: 6, Delay: time.Second, Multiplier: 2, MaxDelay: 10 * time.Second},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}},
		{"one and a half", RestartPolicy{Attempts: 4, Delay: 4 * time.Second, Multiplier: 1.5, MaxDelay: time.Minute},
			[]time.Duration{4 * time.Second, 6 * time.Second, 9 * time.Second, 13500 * time.Millisecond}},
		{"exponential without initial delay", RestartPolicy{Attempts: 2, Multiplier: 2, MaxDelay: time.Second},
			[]time.Duration{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.Validate(); err != nil {
				t.Fatal(err)
			}
			var got []time.Duration
			for n := 1; n <= len(tc.want); n++ {
				got = append(got, tc.p.DelayBefore(n))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("delays = %v, want %v", got, tc.want)
			}
		})
	}

	// Far into a long streak the delay saturates at the cap, never wraps.
	p := RestartPolicy{Attempts: math.MaxInt, Delay: time.Second, Multiplier: 3, MaxDelay: time.Hour}
	for _, n := range []int{40, 1000, 1 << 40, math.MaxInt} {
		if d := p.DelayBefore(n); d != time.Hour {
			t.Errorf("DelayBefore(%d) = %v, want the cap %v", n, d, time.Hour)
		}
	}
}

func TestBackoffBudgetAndReset(t *testing.T) {
	type step struct {
		ranFor  time.Duration
		attempt int // 0: budget exhausted
		delay   time.Duration
	}
	for _, tc := range []struct {
		name  string
		p     RestartPolicy
		steps []step
		total int
	}{
		{"never", RestartPolicy{}, []step{{time.Hour, 0, 0}}, 0},
		{"fixed budget counts the whole run", RestartPolicy{Attempts: 2, Delay: time.Second},
			[]step{{time.Hour, 1, time.Second}, {time.Hour, 2, time.Second}, {time.Hour, 0, 0}}, 2},
		{"exponential with reset", RestartPolicy{Attempts: 3, Delay: time.Second, Multiplier: 2, MaxDelay: time.Minute, ResetAfter: time.Minute},
			[]step{
				{time.Second, 1, time.Second},
				{time.Second, 2, 2 * time.Second},
				// Healthy for a minute: the streak starts over.
				{time.Minute, 1, time.Second},
				{59 * time.Second, 2, 2 * time.Second},
				{0, 3, 4 * time.Second},
				{0, 0, 0},
			}, 5},
		{"a reset revives a spent budget", RestartPolicy{Attempts: 1, Delay: time.Second, ResetAfter: time.Minute},
			[]step{{0, 1, time.Second}, {0, 0, 0}, {time.Hour, 1, time.Second}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBackoff(tc.p)
			for i, s := range tc.steps {
				attempt, delay, ok := b.Failed(s.ranFor)
				if ok != (s.attempt != 0) || attempt != s.attempt || delay != s.delay {
					t.Fatalf("step %d: Failed(%v) = %d, %v, %v; want %d, %v, %v",
						i, s.ranFor, attempt, delay, ok, s.attempt, s.delay, s.attempt != 0)
				}
			}
			if b.Restarts() != tc.total {
				t.Errorf("Restarts() = %d, want %d", b.Restarts(), tc.total)
			}
		})
	}
}

// logBuffer is an io.Writer for a test logger, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// scriptedLoop is a restartLoop whose attempts return the given errors in
// turn (nil after the last), and that records when each attempt started.
type scriptedLoop struct {
	restartLoop
	logs    logBuffer
	reg     *metrics.Registry
	starts  []time.Time
	rewinds int
}

func newScriptedLoop(p RestartPolicy, errs ...error) *scriptedLoop {
	s := &scriptedLoop{reg: metrics.New()}
	s.restartLoop = restartLoop{
		policy: p, log: s.logs.logger(), metrics: s.reg,
		attempt: func(context.Context) error {
			s.starts = append(s.starts, time.Now())
			if len(errs) == 0 {
				return nil
			}
			err := errs[0]
			errs = errs[1:]
			return err
		},
		rewind: func() (string, error) {
			s.rewinds++
			return fmt.Sprintf("checkpoint %d", s.rewinds), nil
		},
	}
	return s
}

// gaps returns the time between consecutive attempt starts.
func (s *scriptedLoop) gaps() []time.Duration {
	var d []time.Duration
	for i := 1; i < len(s.starts); i++ {
		d = append(d, s.starts[i].Sub(s.starts[i-1]))
	}
	return d
}

// The loop's waits run on the fake clock of a synctest bubble: the test
// takes no wall time, and the clock shows exactly the delays waited.
func TestRestartLoopWaitsThePolicyDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errTask := &TaskError{Task: "map-1", Err: errors.New("boom")}
		errCkpt := &CheckpointError{ID: 7, Reason: errors.New("disk full")}
		s := newScriptedLoop(RestartPolicy{Attempts: 5, Delay: time.Second, Multiplier: 2, MaxDelay: 3 * time.Second},
			errTask, errCkpt, errors.New("driver trouble"), errTask)
		if err := s.run(context.Background()); err != nil {
			t.Fatalf("run = %v, want nil after the fifth attempt succeeded", err)
		}
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}
		if got := s.gaps(); !slices.Equal(got, want) {
			t.Errorf("waits between attempts = %v, want %v", got, want)
		}
		if s.rewinds != 4 {
			t.Errorf("rewind called %d times, want 4", s.rewinds)
		}
		if got := s.reg.Summary().Restarts; got != 4 {
			t.Errorf("restarts metric = %d, want 4", got)
		}
		logs := s.logs.String()
		for _, want := range []string{
			`msg="task failure -> whole-job restart" task=map-1 err=boom channel=job.restart attempt=1 max_attempts=5 delay=1s restore="checkpoint 1"`,
			`msg="checkpoint failure -> whole-job restart" checkpoint=7 reason="disk full" channel=job.restart attempt=2 max_attempts=5 delay=2s restore="checkpoint 2"`,
			`msg="job failure -> whole-job restart" err="driver trouble" channel=job.restart attempt=3`,
			`msg="task failure -> whole-job restart" task=map-1 err=boom channel=job.restart attempt=4 max_attempts=5 delay=3s`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("log lacks %s\nlog:\n%s", want, logs)
			}
		}
	})
}

func TestRestartLoopExhaustsTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBoom := errors.New("boom")
		var errs []error
		for i := range 5 {
			errs = append(errs, &TaskError{Task: fmt.Sprintf("t-%d", i), Err: errBoom})
		}
		s := newScriptedLoop(RestartPolicy{Attempts: 3, Delay: time.Second}, errs...)
		err := s.run(context.Background())
		if err == nil {
			t.Fatal("run = nil, want the budget exhausted")
		}
		if !errors.Is(err, errBoom) {
			t.Errorf("run = %v, does not wrap the failure", err)
		}
		var te *TaskError
		if !errors.As(err, &te) || te.Task != "t-3" {
			t.Errorf("run = %v, want the last failure (task t-3) wrapped", err)
		}
		for _, want := range []string{"3 restart attempts exhausted", "task t-3: boom"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("run = %q, does not say %q", err, want)
			}
		}
		if len(s.starts) != 4 {
			t.Errorf("%d attempts ran, want 1 + 3 restarts", len(s.starts))
		}
		if !strings.Contains(s.logs.String(), "restart attempts exhausted") {
			t.Errorf("log does not report the exhausted budget:\n%s", s.logs.String())
		}
	})
}

func TestRestartLoopReturnsAtOnce(t *testing.T) {
	errBoom := &TaskError{Task: "t-0", Err: errors.New("boom")}
	t.Run("disabled", func(t *testing.T) {
		s := newScriptedLoop(RestartPolicy{}, errBoom)
		if err := s.run(context.Background()); err != error(errBoom) {
			t.Fatalf("run = %v, want the failure itself", err)
		}
		if len(s.starts) != 1 || s.rewinds != 0 {
			t.Fatalf("%d attempts and %d rewinds, want 1 and 0", len(s.starts), s.rewinds)
		}
	})
	t.Run("fatal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			errRefused := Fatal(errors.New("max parallelism changed"))
			s := newScriptedLoop(RestartPolicy{Attempts: 5, Delay: time.Second}, errBoom, errRefused, errBoom)
			err := s.run(context.Background())
			if !IsFatal(err) || !strings.Contains(err.Error(), "max parallelism changed") {
				t.Fatalf("run = %v, want the fatal error", err)
			}
			if !strings.Contains(err.Error(), "restart 1") {
				t.Errorf("run = %q, does not say it happened on restart 1", err)
			}
			if len(s.starts) != 2 {
				t.Errorf("%d attempts ran, want 2 (no restart after the fatal error)", len(s.starts))
			}
		})
	})
	t.Run("canceled during an attempt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := newScriptedLoop(RestartPolicy{Attempts: 5})
		s.attempt = func(context.Context) error {
			s.starts = append(s.starts, time.Now())
			cancel()
			return errBoom
		}
		if err := s.run(ctx); err != error(errBoom) {
			t.Fatalf("run = %v, want the attempt's own result", err)
		}
		if len(s.starts) != 1 {
			t.Errorf("%d attempts ran after cancel, want 1", len(s.starts))
		}
	})
	t.Run("rewind fails", func(t *testing.T) {
		s := newScriptedLoop(RestartPolicy{Attempts: 5}, errBoom)
		errList := errors.New("listing failed")
		s.rewind = func() (string, error) { return "", errList }
		err := s.run(context.Background())
		if !errors.Is(err, errList) || !errors.Is(err, errBoom) {
			t.Fatalf("run = %v, want both the rewind error and the failure", err)
		}
	})
}

func TestRestartLoopCancelDuringDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBoom := &TaskError{Task: "t-0", Err: errors.New("boom")}
		ctx, cancel := context.WithCancel(context.Background())
		s := newScriptedLoop(RestartPolicy{Attempts: 5, Delay: time.Hour}, errBoom)
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		err := s.run(ctx)
		if elapsed := time.Since(start); elapsed != time.Second {
			t.Errorf("run returned %v after it started, want 1s (at the cancel, not after the 1h delay)", elapsed)
		}
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) {
			t.Errorf("run = %v, want context.Canceled and the failure", err)
		}
		if len(s.starts) != 1 {
			t.Errorf("%d attempts ran, want 1", len(s.starts))
		}
	})
}

// failOnce makes mid-1 fail once, in the whole test, after it saw n
// records and a checkpoint completed; the shared flag survives the restart,
// the operator does not.
func failOnce(n int, reg *metrics.Registry, fired *atomic.Bool, errBoom error) func(o *intOp) {
	return func(o *intOp) {
		o.batch = func(o *intOp, _ int, _ intBatch) error {
			if o.tc.Subtask == 1 && o.seen >= n && reg.Summary().CheckpointsCompleted > 0 && fired.CompareAndSwap(false, true) {
				return errBoom
			}
			return nil
		}
	}
}

// sinkSeen returns the "seen N" the sink reported at its last end of input.
func sinkSeen(tr *tracker) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var last string
	for _, ev := range tr.events["sink-0"] {
		if strings.HasPrefix(ev, "seen ") {
			last = ev
		}
	}
	return last
}

func TestExecuteRestartsFromLatestCheckpoint(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	const count = 3000
	errBoom := errors.New("boom")
	var fired atomic.Bool
	tr := newTracker()
	var logs logBuffer
	reg := metrics.New()
	dir := t.TempDir()
	g := pipeline(tr, count, failOnce(count/2, reg, &fired, errBoom), nil)
	// A slow source, so that checkpoints complete before the failure.
	for _, v := range g.Vertices[:1] {
		v.NewSource = func(int) Source { return &slowSource{intSource{tr: tr, count: count, batch: 7}} }
	}
	err := Execute(context.Background(), g, Config{
		MaxParallelism: 4, CheckpointDir: dir, CheckpointInterval: 2 * time.Millisecond,
		Restart: RestartPolicy{Attempts: 2}, Logger: logs.logger(), Metrics: reg,
	})
	if err != nil {
		t.Fatalf("Execute = %v, want the restarted job to finish\nlog:\n%s", err, logs.String())
	}
	if !fired.Load() {
		t.Fatal("the injected failure never fired")
	}
	// The sink's state counts every record exactly once across the restart.
	if got, want := sinkSeen(tr), fmt.Sprintf("seen %d", 2*count); got != want {
		t.Errorf("sink ended with %q, want %q", got, want)
	}
	if n := reg.Summary().Restarts; n != 1 {
		t.Errorf("restarts metric = %d, want 1", n)
	}
	tr.mu.Lock()
	opened, restored := tr.opened["mid-0"], tr.restored["mid-0"]
	tr.mu.Unlock()
	if opened != 2 {
		t.Errorf("mid-0 opened %d times, want 2 (every task is rebuilt)", opened)
	}
	log := logs.String()
	if !strings.Contains(log, `msg="task failure -> whole-job restart" task=mid-1 err="processing records in mid-1: boom"`) {
		t.Errorf("log lacks the task failure restart line:\n%s", log)
	}
	if restored != strings.Contains(log, "restore=\"checkpoint ") {
		t.Errorf("second attempt restored a snapshot: %v; log:\n%s", restored, log)
	}
	if !restored {
		t.Errorf("the restarted job did not restore the checkpoint that completed before the failure\nlog:\n%s", log)
	}
}

// slowSource is an intSource that pauses between batches.
type slowSource struct{ intSource }

func (s *slowSource) Produce() (ProduceStatus, error) {
	time.Sleep(50 * time.Microsecond)
	return s.intSource.Produce()
}

// A checkpoint whose marker cannot be written fails the job; the restart
// starts over although the directory now holds that checkpoint's snapshot
// files (no completed checkpoint: the first attempt's own start), and the
// log names the cause.
func TestExecuteRestartsAfterCheckpointFailure(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	var calls atomic.Int64
	t.Cleanup(fault.Set("checkpoint.before-marker", func() error {
		if calls.Add(1) == 1 {
			return errors.New("injected marker failure")
		}
		return nil
	}))
	tr := newTracker()
	var logs logBuffer
	dir := t.TempDir()
	const count = 2000
	g := pipeline(tr, count, nil, nil)
	g.Vertices[0].NewSource = func(int) Source { return &slowSource{intSource{tr: tr, count: count, batch: 7}} }
	err := Execute(context.Background(), g, Config{
		MaxParallelism: 4, CheckpointDir: dir, CheckpointInterval: 2 * time.Millisecond,
		Restart: RestartPolicy{Attempts: 1}, Logger: logs.logger(),
	})
	if err != nil {
		t.Fatalf("Execute = %v, want the restarted job to finish\nlog:\n%s", err, logs.String())
	}
	log := logs.String()
	for _, want := range []string{
		`msg="checkpoint failure -> whole-job restart" checkpoint=1 reason=`,
		"injected marker failure",
		`restore="none (no checkpoint completed yet: starting over)"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s\nlog:\n%s", want, log)
		}
	}
	if got, want := sinkSeen(tr), fmt.Sprintf("seen %d", 2*count); got != want {
		t.Errorf("sink ended with %q, want %q", got, want)
	}
}

// rewind picks the newest checkpoint of this job, never one an earlier run
// left above the explicitly restored one.
func TestJobRewindChoosesThisJobsNewestCheckpoint(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{Retain: 100})
	if err != nil {
		t.Fatal(err)
	}
	complete := func(id checkpoint.ID) {
		t.Helper()
		if _, err := st.WriteSnapshot(id, "src-0", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := st.WriteCompleted(id); err != nil {
			t.Fatal(err)
		}
	}
	for id := checkpoint.ID(1); id <= 4; id++ {
		complete(id)
	}
	j := &job{cfg: Config{CheckpointDir: dir, Restore: "2", Retain: 100}, log: slog.New(slog.DiscardHandler)}
	if err := j.openStore(); err != nil {
		t.Fatal(err)
	}
	if j.restore != 2 || j.firstID != 5 {
		t.Fatalf("after open: restore %d, first id %d; want 2 and 5", j.restore, j.firstID)
	}
	// Nothing completed yet: back to the restore point the job was given,
	// not checkpoint 4 of the earlier run.
	if got, err := j.rewind(); err != nil || got != "checkpoint 2" || j.restore != 2 {
		t.Fatalf("rewind = %q, %v (restore %d), want checkpoint 2", got, err, j.restore)
	}
	// An incomplete checkpoint of this job changes nothing.
	if _, err := j.store.WriteSnapshot(5, "src-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, _ := j.rewind(); got != "checkpoint 2" {
		t.Fatalf("rewind = %q, want checkpoint 2", got)
	}
	if _, err := j.store.WriteSnapshot(6, "src-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := j.store.WriteCompleted(6); err != nil {
		t.Fatal(err)
	}
	if got, _ := j.rewind(); got != "checkpoint 6" || j.restore != 6 {
		t.Fatalf("rewind = %q (restore %d), want checkpoint 6", got, j.restore)
	}
}
