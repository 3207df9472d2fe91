package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/metrics"
)

// RestartPolicy says whether Execute restarts a failed job, how often, and
// after what delay. A restart rebuilds every task from the job graph and
// restores the newest checkpoint the job completed (see Execute). The zero
// value never restarts: Execute returns the first failure, unchanged.
//
// With Multiplier at most 1 the policy is Flink's fixed-delay strategy
// (restart-strategy.fixed-delay.attempts and .delay); above 1 it is the
// exponential-delay strategy: restart n of a streak waits
// Delay·Multiplier^(n-1), at most MaxDelay.
type RestartPolicy struct {
	// Attempts is the restart budget: the most restarts of one streak of
	// failures. A streak runs from the start of the job, or from the last
	// reset (ResetAfter). Zero never restarts.
	Attempts int
	// Delay is the wait before the first restart of a streak, and before
	// every restart when the delay is fixed.
	Delay time.Duration
	// Multiplier grows the delay from one restart of a streak to the next.
	// Zero and 1 keep it fixed; values between 0 and 1 are refused.
	Multiplier float64
	// MaxDelay caps a growing delay. It is required when Multiplier is
	// above 1 and must not be below Delay.
	MaxDelay time.Duration
	// ResetAfter ends a streak: an attempt that ran at least this long
	// before it failed counts as healthy, so the next restart waits Delay
	// again and the whole budget is available again. Zero never resets,
	// so Attempts bounds the restarts of the whole run.
	ResetAfter time.Duration
}

// Validate reports settings that cannot work.
func (p RestartPolicy) Validate() error {
	var errs []error
	if p.Attempts < 0 {
		errs = append(errs, fmt.Errorf("restart attempts must not be negative, got %d", p.Attempts))
	}
	if p.Delay < 0 {
		errs = append(errs, fmt.Errorf("restart delay must not be negative, got %v", p.Delay))
	}
	if p.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("restart max delay must not be negative, got %v", p.MaxDelay))
	}
	if p.ResetAfter < 0 {
		errs = append(errs, fmt.Errorf("restart reset threshold must not be negative, got %v", p.ResetAfter))
	}
	switch m := p.Multiplier; {
	case math.IsNaN(m) || math.IsInf(m, 0) || m < 0 || (m > 0 && m < 1):
		errs = append(errs, fmt.Errorf("restart delay multiplier must be 0, 1 or above 1, got %v", m))
	case m > 1 && p.MaxDelay == 0:
		errs = append(errs, errors.New("an exponential restart delay (multiplier above 1) needs a max delay"))
	case m > 1 && p.MaxDelay < p.Delay:
		errs = append(errs, fmt.Errorf("restart max delay %v is below the initial delay %v", p.MaxDelay, p.Delay))
	}
	return errors.Join(errs...)
}

// Enabled reports whether the policy restarts at all.
func (p RestartPolicy) Enabled() bool { return p.Attempts > 0 }

// DelayBefore returns the wait before restart n (1, 2, ...) of a streak.
func (p RestartPolicy) DelayBefore(n int) time.Duration {
	if n < 1 || p.Delay <= 0 {
		return max(p.Delay, 0)
	}
	if p.Multiplier <= 1 {
		return p.Delay
	}
	d := float64(p.Delay) * math.Pow(p.Multiplier, float64(n-1))
	if math.IsInf(d, 0) || d >= float64(p.MaxDelay) {
		return p.MaxDelay
	}
	return time.Duration(d)
}

// Backoff applies a RestartPolicy to one job: it counts restarts and
// decides, failure by failure, whether the job restarts and after what
// delay. It reads no clock (the caller measures how long each attempt ran),
// so one Backoff serves the in-process executor and a cluster driver alike.
// It is not safe for concurrent use.
type Backoff struct {
	policy RestartPolicy
	streak int // restarts since the last reset
	total  int // restarts since the job started
}

// NewBackoff returns the Backoff of a job that has not failed yet.
func NewBackoff(p RestartPolicy) *Backoff { return &Backoff{policy: p} }

// Failed records that an attempt failed after running for ranFor. When the
// budget allows a restart, it returns its number within the current streak
// (1 to Attempts) and the delay to wait first; otherwise ok is false.
func (b *Backoff) Failed(ranFor time.Duration) (attempt int, delay time.Duration, ok bool) {
	if b.policy.ResetAfter > 0 && ranFor >= b.policy.ResetAfter {
		b.streak = 0
	}
	if b.streak >= b.policy.Attempts {
		return 0, 0, false
	}
	b.streak++
	b.total++
	return b.streak, b.policy.DelayBefore(b.streak), true
}

// Restarts returns the number of restarts Failed allowed so far.
func (b *Backoff) Restarts() int { return b.total }

// fatalError marks an error a restart cannot fix.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// Fatal marks err as one that restarting the job cannot fix, so that the
// restart loop returns it at once instead of spending its budget: invalid
// configuration, a job graph that cannot be built, and a refused restore
// (a changed max parallelism, a missing or corrupt snapshot) are fatal;
// Execute marks them so itself. The message is err's. Fatal(nil) is nil.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &fatalError{err: err}
}

// IsFatal reports whether err, or an error it wraps, was marked by Fatal.
func IsFatal(err error) bool {
	var f *fatalError
	return errors.As(err, &f)
}

// TaskError is the failure of one task: an error its operators returned,
// or a panic in user code.
type TaskError struct {
	// Task names the subtask, "<vertex uid>-<subtask>".
	Task string
	Err  error
}

func (e *TaskError) Error() string { return fmt.Sprintf("task %s: %v", e.Task, e.Err) }

// Unwrap returns Err.
func (e *TaskError) Unwrap() error { return e.Err }

// CheckpointError is a failed checkpoint: a task declined it, it timed out,
// or its COMPLETED marker could not be written. The coordinator then rewinds
// the whole job to its last completed checkpoint.
type CheckpointError struct {
	ID     checkpoint.ID
	Reason error
	// Final is set for the terminal checkpoint of a bounded job.
	Final bool
}

func (e *CheckpointError) Error() string {
	if e.Final {
		return fmt.Sprintf("final checkpoint %d aborted: %v", e.ID, e.Reason)
	}
	return fmt.Sprintf("checkpoint %d failed: %v", e.ID, e.Reason)
}

// Unwrap returns Reason.
func (e *CheckpointError) Unwrap() error { return e.Reason }

// restartLoop runs one job under a RestartPolicy. The loop owns no
// goroutine; attempt must return only when everything the attempt started
// has stopped, so that the next attempt's restore point sees every marker
// the previous one wrote.
type restartLoop struct {
	policy  RestartPolicy
	log     *slog.Logger
	metrics *metrics.Registry
	// attempt runs the job once, from the restore point rewind chose last
	// (the configured one for the first attempt).
	attempt func(ctx context.Context) error
	// rewind chooses the restore point of the next attempt and describes
	// it for the log.
	rewind func() (string, error)
}

// run runs attempts until one ends cleanly, ctx is canceled, a fatal error
// occurs, or the budget is spent.
func (l *restartLoop) run(ctx context.Context) error {
	b := NewBackoff(l.policy)
	for {
		started := time.Now()
		err := l.attempt(ctx)
		if err == nil || ctx.Err() != nil || !l.policy.Enabled() {
			// A canceled job stopped on purpose: nothing to restart.
			return err
		}
		if IsFatal(err) {
			if n := b.Restarts(); n > 0 {
				return fmt.Errorf("restarting job (restart %d): %w", n, err)
			}
			return err
		}
		attempt, delay, ok := b.Failed(time.Since(started))
		if !ok {
			l.log.Error("restart attempts exhausted", "channel", "job.restart",
				"restarts", b.Restarts(), "max_attempts", l.policy.Attempts, "err", err)
			if b.Restarts() != l.policy.Attempts {
				// ResetAfter renewed the budget on the way.
				return fmt.Errorf("restarting job: %d restart attempts exhausted (%d restarts in all): %w",
					l.policy.Attempts, b.Restarts(), err)
			}
			return fmt.Errorf("restarting job: %d restart attempts exhausted: %w", l.policy.Attempts, err)
		}
		restore, rerr := l.rewind()
		if rerr != nil {
			return fmt.Errorf("choosing the restore point of restart %d: %w (after: %w)", b.Restarts(), rerr, err)
		}
		l.metrics.JobRestarted(l.logRestart(err, attempt, delay, restore))
		if cerr := wait(ctx, delay); cerr != nil {
			return fmt.Errorf("restarting job: stopped during the %v restart delay (%w) after: %w", delay, cerr, err)
		}
	}
}

// logRestart logs the restart and returns its cause for the metrics.
func (l *restartLoop) logRestart(err error, attempt int, delay time.Duration, restore string) string {
	common := []any{"channel", "job.restart", "attempt", attempt, "max_attempts", l.policy.Attempts,
		"delay", delay, "restore", restore}
	var ce *CheckpointError
	var te *TaskError
	switch {
	case errors.As(err, &ce):
		l.log.Warn("checkpoint failure -> whole-job restart",
			append([]any{"checkpoint", ce.ID, "reason", ce.Reason}, common...)...)
		return metrics.CauseCheckpoint
	case errors.As(err, &te):
		l.log.Warn("task failure -> whole-job restart",
			append([]any{"task", te.Task, "err", te.Err}, common...)...)
		return metrics.CauseTask
	default:
		l.log.Warn("job failure -> whole-job restart", append([]any{"err", err}, common...)...)
		return metrics.CauseOther
	}
}

// wait sleeps for d. It returns ctx's error, at once if ctx ends first.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		// Both may be ready: a canceled job must not start again.
		return ctx.Err()
	}
}
