// Package clink is the typed Go API of the clink stream processing engine.
//
// A job is built on an Environment: sources create streams (FromSlice,
// FromGenerator, FromLines), transformations derive new streams (Map,
// FlatMap, Filter, KeyBy + Process, Union, Connect + CoProcess,
// AssignTimestamps), and SinkTo ends them. Execute runs the job in this
// process with checkpoints taken by in-band barriers, so a job killed at
// any moment and restored from its latest checkpoint continues with exactly
// the state an uninterrupted run would have.
//
//	env, _ := clink.NewEnvironment(clink.Options{CheckpointDir: dir, CheckpointInterval: time.Second})
//	words := clink.FromSlice(env, "words", []string{"a", "b", "a"})
//	counts := clink.Process(clink.KeyBy(words, func(w string) string { return w }), "count",
//		func(ctx *clink.KeyedContext[string, int], w string, out *clink.Collector[string]) error {
//			n, _ := ctx.Value()
//			ctx.SetValue(n + 1)
//			out.Collect(fmt.Sprintf("%s=%d", w, n+1))
//			return nil
//		})
//	clink.SinkTo(counts, "print", clink.PrintSink[string](os.Stdout))
//	err := env.Execute(ctx)
//
// Operators are identified in checkpoints by their names, which must be
// unique within a job and stable across runs of it.
package clink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/metrics"
	"github.com/clinkstream/clink/runtime"
	"github.com/clinkstream/clink/state"
)

// CheckpointMode is the job-wide checkpoint alignment policy.
type CheckpointMode uint8

const (
	// Aligned checkpoints pause each input of a multi-input task at the
	// barrier until every input delivered it.
	Aligned CheckpointMode = iota
	// Unaligned checkpoints let barriers overtake queued records and store
	// the overtaken records in the checkpoint.
	Unaligned
	// Adaptive chooses per checkpoint from measured backpressure.
	Adaptive
)

// String returns "aligned", "unaligned" or "adaptive".
func (m CheckpointMode) String() string {
	switch m {
	case Aligned:
		return "aligned"
	case Unaligned:
		return "unaligned"
	case Adaptive:
		return "adaptive"
	}
	return fmt.Sprintf("CheckpointMode(%d)", uint8(m))
}

// ParseCheckpointMode parses "aligned", "unaligned" or "adaptive".
func ParseCheckpointMode(s string) (CheckpointMode, error) {
	switch s {
	case "aligned":
		return Aligned, nil
	case "unaligned":
		return Unaligned, nil
	case "adaptive":
		return Adaptive, nil
	}
	return 0, fmt.Errorf("unknown checkpoint mode %q (want aligned, unaligned or adaptive)", s)
}

// Options configures an Environment. The zero value runs a job at
// parallelism 1 without checkpoints.
type Options struct {
	// Parallelism is the default parallelism of operators (default 1).
	Parallelism int
	// MaxParallelism is the number of key groups keyed state is split
	// into, the upper bound of any operator's parallelism (default 128).
	// It cannot change between a checkpoint and its restore.
	MaxParallelism int

	// CheckpointDir enables checkpointing into this directory.
	CheckpointDir string
	// CheckpointInterval is the period of checkpoints; 0 takes only the
	// final checkpoint of a bounded job.
	CheckpointInterval time.Duration
	// CheckpointMode is the alignment policy (default Aligned).
	CheckpointMode CheckpointMode
	// CheckpointTimeout aborts a checkpoint that has not completed in time
	// (default 10 minutes). A timed-out checkpoint fails the job.
	CheckpointTimeout time.Duration
	// Retain is how many completed checkpoints are kept (default 3).
	Retain int
	// Restore resumes from "latest" or a checkpoint id in CheckpointDir.
	// Without it, a CheckpointDir that already holds checkpoints is refused.
	Restore string
	// Restart says what Execute does when a task or a checkpoint fails:
	// return the error (NoRestart, the zero value and default), or restart
	// the whole job in this process from its latest completed checkpoint
	// (FixedDelay, ExponentialDelay). See RestartStrategy.
	Restart RestartStrategy

	// BatchSize is the number of records per batch between tasks
	// (default 512).
	BatchSize int
	// BufferTimeout is the longest a partially filled batch waits before
	// it is sent (default 10ms). A negative value sends batches only when
	// full or when the task has nothing else to do.
	BufferTimeout time.Duration
	// ChannelCapacity is the number of batches a channel between two tasks
	// holds before the producer blocks (default 16).
	ChannelCapacity int
	// BufferDebloatTarget is how long the batches queued in front of a
	// task should take it to process: a task that is a bottleneck holds
	// its input channels below ChannelCapacity (at two batches or more) so
	// that they hold about that much of its work, and checkpoints under
	// backpressure have less to wait for (aligned) or to write (unaligned).
	// Default 1s, as Flink's taskmanager.network.memory.buffer-debloat.target;
	// a negative value keeps every channel at ChannelCapacity.
	BufferDebloatTarget time.Duration
	// WatermarkInterval is the period of watermarks generated by
	// AssignTimestamps (default 200ms; Flink's pipeline.auto-watermark-interval).
	// A negative value emits a watermark after every batch.
	WatermarkInterval time.Duration

	// KeyedChaining chains a keyed operator (KeyBy) of parallelism 1 to
	// its input's task when that has parallelism 1 too (nil: on): the
	// exchange would send every record to the one subtask anyway, and
	// chained, records cross no channel and no core. Off, the keyed
	// operator runs in a task of its own, as at higher parallelisms: the
	// job keeps two cores busy at parallelism 1, each less efficiently
	// (clink.operator-chaining.keyed in SQL).
	KeyedChaining *bool

	// StateBackend keeps keyed state: "memory" (default; copy-on-write
	// maps, fastest, state must fit in memory) or "pebble" (an LSM tree on
	// local disk, incremental checkpoints).
	StateBackend string
	// StateIncremental turns the memory backend's incremental checkpoints
	// on or off (Flink's state.backend.incremental; nil: on). With them a
	// checkpoint writes only the entries changed since the previous one,
	// and a new full base is written in the background now and then; the
	// files are shared between checkpoints under the checkpoint
	// directory's shared/. The Pebble backend's checkpoints are always
	// incremental. Without a CheckpointDir the memory backend's tables
	// record no changes, whatever this says: no checkpoint would take them.
	StateIncremental *bool
	// StateMaterializeBytes is the volume of the memory backend's
	// incremental checkpoints after which a new full base is written in
	// the background, when it also exceeds twice the last base (default
	// state.DefaultMaterializeBytes).
	StateMaterializeBytes int64
	// StateDir is where file-based state backends keep their working
	// files (default: a new directory under the system temp directory).
	StateDir string

	// OnRestore, if set, is called when a run of the job (the first or a
	// restart) begins restoring a checkpoint, before its tasks open; the
	// function it returns is called once every task holds its restored
	// state and runs, or the run ended first. A program may change its
	// own pacing for the restore in between: the clink binary pauses its
	// garbage collector, since a restore allocates the state it reads and
	// frees little. Execute itself never changes the program's collector.
	OnRestore func() (restored func())

	// Logger receives the job's logs (default: warnings to stderr).
	Logger *slog.Logger
	// Metrics receives the job's metrics (default: a private registry).
	Metrics *metrics.Registry
}

// Validate checks the options and fills in defaults.
func (o *Options) Validate() error {
	if o.Parallelism == 0 {
		o.Parallelism = 1
	}
	if o.MaxParallelism == 0 {
		o.MaxParallelism = state.DefaultMaxParallelism
	}
	if o.CheckpointTimeout == 0 {
		o.CheckpointTimeout = 10 * time.Minute
	}
	if o.Retain == 0 {
		o.Retain = 3
	}
	if o.BatchSize == 0 {
		o.BatchSize = 512
	}
	if o.BufferTimeout == 0 {
		o.BufferTimeout = 10 * time.Millisecond
	}
	if o.ChannelCapacity == 0 {
		o.ChannelCapacity = 16
	}
	if o.StateBackend == "" {
		o.StateBackend = "memory"
	}
	if o.WatermarkInterval == 0 {
		o.WatermarkInterval = 200 * time.Millisecond
	}
	var errs []error
	if o.Parallelism < 1 {
		errs = append(errs, fmt.Errorf("parallelism must be at least 1, got %d", o.Parallelism))
	}
	if o.MaxParallelism < 1 || o.MaxParallelism > state.MaxMaxParallelism {
		errs = append(errs, fmt.Errorf("max parallelism must be between 1 and %d, got %d", state.MaxMaxParallelism, o.MaxParallelism))
	} else if o.Parallelism > o.MaxParallelism {
		errs = append(errs, fmt.Errorf("parallelism %d exceeds max parallelism %d", o.Parallelism, o.MaxParallelism))
	}
	if o.CheckpointInterval < 0 {
		errs = append(errs, fmt.Errorf("checkpoint interval must not be negative, got %v", o.CheckpointInterval))
	}
	if o.CheckpointTimeout < 0 {
		errs = append(errs, fmt.Errorf("checkpoint timeout must not be negative, got %v", o.CheckpointTimeout))
	}
	if o.CheckpointMode > Adaptive {
		errs = append(errs, fmt.Errorf("unknown checkpoint mode %d", o.CheckpointMode))
	}
	if o.Retain < 1 {
		errs = append(errs, fmt.Errorf("retain must be at least 1, got %d", o.Retain))
	}
	if o.StateMaterializeBytes < 0 {
		errs = append(errs, fmt.Errorf("state materialization volume must not be negative, got %d", o.StateMaterializeBytes))
	}
	if o.Restore != "" && o.CheckpointDir == "" {
		errs = append(errs, errors.New("restore needs a checkpoint directory"))
	}
	if (o.CheckpointInterval > 0) && o.CheckpointDir == "" {
		errs = append(errs, errors.New("a checkpoint interval needs a checkpoint directory"))
	}
	if o.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch size must be at least 1, got %d", o.BatchSize))
	}
	if _, ok := stateBackends[o.StateBackend]; !ok {
		errs = append(errs, fmt.Errorf("unknown state backend %q (want memory or pebble)", o.StateBackend))
	}
	if o.ChannelCapacity < 1 {
		errs = append(errs, fmt.Errorf("channel capacity must be at least 1, got %d", o.ChannelCapacity))
	}
	if err := o.Restart.policy().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RestartStrategy says whether and when a failed job restarts, like
// Flink's restart-strategy option. A task error (including a panic in a
// user function) or a failed checkpoint then stops every task and runs the
// whole job again in this process: every operator is rebuilt and restored
// from the newest checkpoint the job completed (before the first one, from
// Options.Restore, or from the start). Committing sinks (CommitTo) finish
// the commits of that checkpoint when they open, so their output stays
// exactly once; other sinks see the records after the checkpoint again
// (at least once), and without a CheckpointDir every restart starts over.
//
// Errors a restart cannot fix are returned at once: invalid options or
// job, a refused restore (e.g. a changed MaxParallelism, a corrupt
// snapshot). When the budget is spent, Execute returns the last failure,
// wrapped with the number of attempts. Canceling Execute's context stops
// the job at once, also while it waits to restart.
//
// The zero value is NoRestart, the default: a library call should not loop
// on a deterministic bug behind its caller's back, and only a job with
// checkpoints and committing sinks keeps exactly-once output across a
// restart. (Flink's default with checkpointing is an unbounded fixed-delay
// restart.) Use the constructors; the fields are for tuning.
type RestartStrategy struct {
	// Attempts is the most restarts of one streak of failures (the whole
	// run, unless ResetAfter ends streaks); 0 never restarts.
	Attempts int
	// Delay is the wait before a restart (the first one of a streak when
	// the delay grows).
	Delay time.Duration
	// Multiplier grows the delay from one restart of a streak to the next;
	// 0 or 1 keeps it fixed.
	Multiplier float64
	// MaxDelay caps a growing delay (required when Multiplier > 1).
	MaxDelay time.Duration
	// ResetAfter, when positive, ends a streak: a run that lasted at least
	// this long before it failed starts the delay and the attempt count
	// over (Flink's reset-backoff-threshold).
	ResetAfter time.Duration
}

// NoRestart returns the strategy that never restarts: Execute returns the
// first failure.
func NoRestart() RestartStrategy { return RestartStrategy{} }

// FixedDelay restarts a failed job up to attempts times in all, waiting
// delay before each restart (Flink's fixed-delay strategy).
func FixedDelay(attempts int, delay time.Duration) RestartStrategy {
	return RestartStrategy{Attempts: attempts, Delay: delay}
}

// ExponentialDelay restarts a failed job up to attempts times, waiting
// initial before the first restart and multiplier times longer before each
// next one, at most maxDelay (Flink's exponential-delay strategy). Set
// ResetAfter on the result to forgive a job that ran well for a while.
func ExponentialDelay(attempts int, initial, maxDelay time.Duration, multiplier float64) RestartStrategy {
	return RestartStrategy{Attempts: attempts, Delay: initial, MaxDelay: maxDelay, Multiplier: multiplier}
}

func (s RestartStrategy) policy() runtime.RestartPolicy {
	return runtime.RestartPolicy{
		Attempts: s.Attempts, Delay: s.Delay, Multiplier: s.Multiplier,
		MaxDelay: s.MaxDelay, ResetAfter: s.ResetAfter,
	}
}

// Environment collects the operators of one job and executes it.
type Environment struct {
	opts     Options
	nodes    []*node
	err      error
	executed bool
}

// NewEnvironment returns an empty job with the given options.
func NewEnvironment(opts Options) (*Environment, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid options: %w", err)
	}
	return &Environment{opts: opts}, nil
}

// Options returns the environment's options with defaults filled in.
func (env *Environment) Options() Options { return env.opts }

// fail records the first job-construction error; Execute returns it.
func (env *Environment) fail(err error) {
	if env.err == nil {
		env.err = err
	}
}

var uidPattern = regexp.MustCompile(`^[A-Za-z0-9_.]+$`)

// Execute runs the job until its bounded sources are exhausted and the final
// checkpoint completed, until ctx is canceled (nil), or until it fails and
// Options.Restart allows no further restart.
func (env *Environment) Execute(ctx context.Context) error {
	if env.err != nil {
		return env.err
	}
	if env.executed {
		return errors.New("environment already executed")
	}
	env.executed = true
	g, err := env.plan()
	if err != nil {
		return err
	}
	mode := runtime.ModeAligned
	switch env.opts.CheckpointMode {
	case Unaligned:
		mode = runtime.ModeUnaligned
	case Adaptive:
		mode = runtime.ModeAdaptive
	}
	return runtime.Execute(ctx, g, runtime.Config{
		MaxParallelism:     env.opts.MaxParallelism,
		CheckpointDir:      env.opts.CheckpointDir,
		CheckpointInterval: env.opts.CheckpointInterval,
		CheckpointTimeout:  env.opts.CheckpointTimeout,
		CheckpointMode:     mode,
		Adaptive:           checkpoint.AdaptiveConfig{},
		Retain:             env.opts.Retain,
		Restore:            env.opts.Restore,
		Restart:            env.opts.Restart.policy(),
		ChannelCapacity:    env.opts.ChannelCapacity,
		DebloatTarget:      env.opts.BufferDebloatTarget,
		BufferTimeout:      env.opts.BufferTimeout,
		OnRestore:          env.opts.OnRestore,
		Logger:             env.opts.Logger,
		Metrics:            env.opts.Metrics,
	})
}
