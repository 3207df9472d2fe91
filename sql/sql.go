// Package sql runs SQL scripts (Flink's dialect) as clink jobs: it parses
// a script, executes its DDL and SET statements in order against a fresh
// catalog, prints its EXPLAINs, plans every INSERT INTO (and every
// statement set) as one job, and runs that job.
//
//	job, err := sql.Prepare(script, sql.Options{CheckpointDir: dir, CheckpointInterval: time.Second})
//	// job.Warnings, job.Explain() ...
//	err = job.Run(ctx)
//
// SET statements take Flink's option names (see Settings) and win over
// the Options passed in: the script is the job's own definition. Errors
// carry the line and column of the statement part they are about.
//
// Callers' duties:
//
//  1. Show Job.Warnings to the user before running the job.
//  2. Run a Job once.
package sql

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/metrics"
	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/exec"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// Options configures a job. Fields mirror the CLI contract's flags; SET
// statements of the script override them.
type Options struct {
	Parallelism        int
	MaxParallelism     int
	CheckpointDir      string
	CheckpointInterval time.Duration
	CheckpointMode     clink.CheckpointMode
	Restore            string
	StateBackend       string
	// StateIncremental is state.backend.incremental (nil: the default).
	StateIncremental *bool
	// KeyedChaining is clink.operator-chaining.keyed (nil: the default,
	// on; see clink.Options.KeyedChaining).
	KeyedChaining *bool
	// WatermarkInterval is the period of the sources' watermarks (0: the
	// runtime's default, 200ms).
	WatermarkInterval time.Duration
	// BufferDebloatTarget is how long the records queued in front of a
	// task should take it to process (0: the runtime's default, 1s;
	// negative: no debloating), Flink's
	// taskmanager.network.memory.buffer-debloat.target.
	BufferDebloatTarget time.Duration
	// Stdout receives EXPLAIN output and print tables; Stderr print tables
	// with 'standard-error' = 'true'. Defaults: os.Stdout, os.Stderr.
	Stdout, Stderr io.Writer
	Logger         *slog.Logger
	Metrics        *metrics.Registry
	// Functions are the Go scalar functions the script may call; nil is
	// none.
	Functions *expr.Registry
	// Restart is what the job does when a task or a checkpoint fails (see
	// clink.RestartStrategy); the zero value returns the error.
	Restart clink.RestartStrategy
	// OnRestore is called around the restore of a checkpoint (see
	// clink.Options.OnRestore); nil is nothing.
	OnRestore func() (restored func())
}

// Job is a planned script.
type Job struct {
	// Options are the job's options after the script's SET statements.
	Options Options
	// Sinks are the planned INSERTs; empty when the script has none.
	Sinks []*planner.Sink
	// Warnings are messages for the user that do not stop the job.
	Warnings []string
}

// Prepare runs the script's statements up to planning: DDL, SET, EXPLAIN
// (printed to Options.Stdout), and plans its INSERTs.
func Prepare(script string, opts Options) (*Job, error) {
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	stmts, err := parser.Parse(script)
	if err != nil {
		return nil, err
	}
	cat := catalog.New(exec.Connectors()...)
	compiler := cat.Compiler
	compiler.Functions = opts.Functions
	pl := planner.New(cat, compiler)
	job := &Job{Options: opts}
	for _, st := range stmts {
		if err := job.statement(st, cat, pl, compiler); err != nil {
			return nil, err
		}
	}
	job.Sinks = pl.Sinks()
	job.Warnings = append(job.Warnings, pl.Warnings()...)
	return job, nil
}

func (j *Job) statement(st ast.Statement, cat *catalog.Catalog, pl *planner.Planner, compiler *expr.Compiler) error {
	switch st := st.(type) {
	case *ast.CreateTable:
		return cat.CreateTable(st)
	case *ast.CreateView:
		// The query is validated before the view exists, so a view
		// cannot read itself.
		cols, err := pl.BindView(st)
		if err != nil {
			return err
		}
		return cat.CreateView(st, cols)
	case *ast.Drop:
		return cat.Drop(st)
	case *ast.Set:
		if st.Key == "" {
			return errorf(st.Pos, "SET without a key (listing options) is for interactive sessions; give 'key' = 'value'")
		}
		return j.set(st, compiler)
	case *ast.Reset:
		return errorf(st.Pos, "RESET is not supported in a script")
	case *ast.Insert:
		_, err := pl.PlanInsert(st)
		return err
	case *ast.StatementSet:
		for _, ins := range st.Inserts {
			if _, err := pl.PlanInsert(ins); err != nil {
				return err
			}
		}
		return nil
	case *ast.Explain:
		return j.explain(st, cat, compiler)
	case *ast.Query:
		return errorf(st.Pos, "a bare SELECT has nowhere to go in a job; write INSERT INTO a print table ... SELECT")
	case *ast.CreateFunction:
		return errorf(st.Pos, "CREATE FUNCTION is not supported: clink runs no Java classes; register Go functions through the Go API")
	}
	return errorf(st.Position(), "unsupported statement")
}

// explain plans the statement with a planner of its own (an EXPLAIN does
// not add to the job) and prints the plan.
func (j *Job) explain(st *ast.Explain, cat *catalog.Catalog, compiler *expr.Compiler) error {
	pl := planner.New(cat, compiler)
	switch s := st.Stmt.(type) {
	case *ast.Insert:
		if _, err := pl.PlanInsert(s); err != nil {
			return err
		}
	case *ast.StatementSet:
		for _, ins := range s.Inserts {
			if _, err := pl.PlanInsert(ins); err != nil {
				return err
			}
		}
	default:
		return errorf(st.Pos, "EXPLAIN of a bare query is not supported yet; EXPLAIN the INSERT INTO")
	}
	changelog := slices.Contains(st.Details, "CHANGELOG_MODE")
	_, err := io.WriteString(j.Options.Stdout, planner.Explain(pl.Sinks(), changelog, false))
	return err
}

func errorf(pos ast.Pos, format string, args ...any) error {
	return &types.Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// Settings lists the SET keys clink reads, with what they do.
var Settings = map[string]string{
	"execution.checkpointing.interval":                  "time between checkpoints, e.g. '1s', '10 s', '1 min' (flag --checkpoint-interval)",
	"execution.checkpointing.unaligned":                 "true: unaligned checkpoints (flag --checkpoint-mode unaligned)",
	"execution.checkpointing.unaligned.enabled":         "same as execution.checkpointing.unaligned",
	"execution.checkpointing.mode":                      "EXACTLY_ONCE (the only mode clink has)",
	"execution.checkpointing.dir":                       "checkpoint directory (flag --checkpoint-dir)",
	"state.checkpoints.dir":                             "same as execution.checkpointing.dir",
	"clink.checkpointing.mode":                          "aligned, unaligned or adaptive (flag --checkpoint-mode)",
	"parallelism.default":                               "default parallelism of operators (flag --parallelism)",
	"pipeline.auto-watermark-interval":                  "period of the sources' watermarks, e.g. '200 ms' (the default)",
	"pipeline.max-parallelism":                          "number of key groups (default 128); fixed for a job's checkpoints",
	"taskmanager.network.memory.buffer-debloat.target":  "how long the records queued in front of a task should take it to process, e.g. '200 ms' (default '1 s')",
	"taskmanager.network.memory.buffer-debloat.enabled": "true (the default) or false: a bottleneck task's input channels keep their full capacity",
	"state.backend.type":                                "memory (Flink's hashmap) or pebble (Flink's rocksdb)",
	"state.backend.incremental":                         "true (the default) or false: the memory backend's checkpoints write only what changed",
	"table.local-time-zone":                             "session time zone for TIMESTAMP_LTZ, e.g. 'Europe/Berlin' (default UTC)",
	"execution.runtime-mode":                            "streaming (the only mode clink has)",
	"pipeline.name":                                     "the job's name (accepted, not used yet)",
}

func (j *Job) set(st *ast.Set, compiler *expr.Compiler) error {
	o := &j.Options
	v := strings.TrimSpace(st.Value)
	bad := func(want string) error {
		return errorf(st.Pos, "SET '%s': %s, got '%s'", st.Key, want, st.Value)
	}
	switch st.Key {
	case "execution.checkpointing.interval":
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return bad("want a positive duration such as '1s' or '10 s'")
		}
		o.CheckpointInterval = d
	case "execution.checkpointing.unaligned", "execution.checkpointing.unaligned.enabled":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return bad("want true or false")
		}
		if b {
			o.CheckpointMode = clink.Unaligned
		} else {
			o.CheckpointMode = clink.Aligned
		}
	case "clink.checkpointing.mode":
		m, err := clink.ParseCheckpointMode(strings.ToLower(v))
		if err != nil {
			return bad("want aligned, unaligned or adaptive")
		}
		o.CheckpointMode = m
	case "execution.checkpointing.mode":
		if !strings.EqualFold(v, "EXACTLY_ONCE") {
			return bad("clink checkpoints exactly once; want EXACTLY_ONCE")
		}
	case "execution.checkpointing.dir", "state.checkpoints.dir":
		o.CheckpointDir = strings.TrimPrefix(v, "file://")
	case "parallelism.default":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return bad("want a positive integer")
		}
		o.Parallelism = n
	case "pipeline.auto-watermark-interval":
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return bad("want a positive duration such as '200 ms'")
		}
		o.WatermarkInterval = d
	case "taskmanager.network.memory.buffer-debloat.target":
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return bad("want a positive duration such as '1 s' or '200 ms'")
		}
		if o.BufferDebloatTarget >= 0 {
			o.BufferDebloatTarget = d
		}
	case "taskmanager.network.memory.buffer-debloat.enabled":
		b, err := strconv.ParseBool(strings.ToLower(v))
		if err != nil {
			return bad("want true or false")
		}
		switch {
		case !b:
			o.BufferDebloatTarget = -1
		case o.BufferDebloatTarget < 0:
			o.BufferDebloatTarget = 0
		}
	case "pipeline.max-parallelism":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return bad("want a positive integer")
		}
		o.MaxParallelism = n
	case "state.backend.type", "state.backend":
		switch strings.ToLower(v) {
		case "memory", "hashmap":
			o.StateBackend = "memory"
		case "pebble", "rocksdb":
			o.StateBackend = "pebble"
		default:
			return bad("want memory (hashmap) or pebble (rocksdb)")
		}
	case "state.backend.incremental", "state.backend.changelog.enabled":
		b, err := strconv.ParseBool(strings.ToLower(v))
		if err != nil {
			return bad("want true or false")
		}
		o.StateIncremental = &b
	case "clink.operator-chaining.keyed":
		b, err := strconv.ParseBool(strings.ToLower(v))
		if err != nil {
			return bad("want true or false")
		}
		o.KeyedChaining = &b
	case "table.local-time-zone":
		loc, err := time.LoadLocation(v)
		if err != nil {
			return bad("want a time zone name such as 'UTC' or 'Europe/Berlin'")
		}
		compiler.Location = loc
	case "execution.runtime-mode":
		if !strings.EqualFold(v, "streaming") {
			return bad("clink runs streaming jobs only; want streaming")
		}
	case "pipeline.name":
	default:
		j.Warnings = append(j.Warnings, fmt.Sprintf("SET '%s' at %s: clink does not use this option", st.Key, st.Pos))
	}
	return nil
}

// ParseDuration reads a duration as Flink writes them ('10 s', '1min',
// '500 ms', '2 h') or as Go does ('1m30s'). A bare number is milliseconds.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("parsing duration %q: no number", s)
	}
	units := map[string]time.Duration{
		"": time.Millisecond, "ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
		"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
		"min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute, "m": time.Minute,
		"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
		"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	}
	u, ok := units[strings.ToLower(strings.TrimSpace(s[i:]))]
	if !ok {
		return 0, fmt.Errorf("parsing duration %q: unknown unit", s)
	}
	return time.Duration(n * float64(u)), nil
}

// Run runs the job until its bounded sources are exhausted and the final
// checkpoint committed, or until ctx is canceled.
func (j *Job) Run(ctx context.Context) error {
	if len(j.Sinks) == 0 {
		return nil
	}
	o := j.Options
	env, err := clink.NewEnvironment(clink.Options{
		Parallelism:         o.Parallelism,
		MaxParallelism:      o.MaxParallelism,
		CheckpointDir:       o.CheckpointDir,
		CheckpointInterval:  o.CheckpointInterval,
		CheckpointMode:      o.CheckpointMode,
		Restore:             o.Restore,
		StateBackend:        o.StateBackend,
		StateIncremental:    o.StateIncremental,
		KeyedChaining:       o.KeyedChaining,
		WatermarkInterval:   o.WatermarkInterval,
		BufferDebloatTarget: o.BufferDebloatTarget,
		Logger:              o.Logger,
		Metrics:             o.Metrics,
		Restart:             o.Restart,
		OnRestore:           o.OnRestore,
	})
	if err != nil {
		return err
	}
	if err := exec.Build(env, j.Sinks, exec.Options{Stdout: o.Stdout, Stderr: o.Stderr}); err != nil {
		return err
	}
	return env.Execute(ctx)
}

// Run prepares and runs a script; warnings go to opts.Stderr.
func Run(ctx context.Context, script string, opts Options) error {
	job, err := Prepare(script, opts)
	if err != nil {
		return err
	}
	for _, w := range job.Warnings {
		fmt.Fprintln(job.Options.Stderr, "warning:", w)
	}
	return job.Run(ctx)
}
