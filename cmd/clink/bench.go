package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	clinkapi "github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connectors/nexmark"
	nexmarksql "github.com/clinkstream/clink/examples/nexmark"
	"github.com/clinkstream/clink/internal/gctune"
	"github.com/clinkstream/clink/metrics"
	"github.com/clinkstream/clink/sql"
	"github.com/clinkstream/clink/sql/planner"
)

// benchOptions are the flags of clink bench nexmark.
type benchOptions struct {
	query              string
	events             int64
	parallelism        int
	checkpointInterval time.Duration
	json               bool
	cpuProfile         string
	trace              string
	killAfter          int64
	restore            string // the checkpoint a --kill-after child restores
	backpressure       bool
	duration           time.Duration
	eventsSet          bool     // --events was given
	sets               []string // --set key=value: SET statements ahead of the query
	checkpointMode     string   // --checkpoint-mode, parsed into mode by validate
	modeSet            bool     // --checkpoint-mode was given
	details            bool     // --checkpoint-details

	// mode is --checkpoint-mode's; --backpressure sets it per run, and
	// slow, the sink that replaces the query's.
	mode clinkapi.CheckpointMode
	slow *slowSink
}

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run built-in benchmarks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("name a benchmark: clink bench nexmark")
		},
	}
	cmd.AddCommand(newBenchNexmarkCmd(), newBenchChildCmd())
	return cmd
}

func newBenchNexmarkCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "nexmark --query gen|q0..q22 --events N",
		Short: "Run a Nexmark query on generated events and report throughput per CPU-second",
		Long: `Run a Nexmark query on the Nexmark generator's events in this process, with
checkpoints into a temporary directory, and report events, wall time, events
per second, process CPU time (user + system), events per CPU-second,
checkpoints completed with their p50/p99 durations, and peak RSS. The
terminal checkpoint of the bounded input completes only once every task
processed the end of its input (every window and timer fired), so it is
also reported on its own (ckpt_final_ms, and ckpt_periodic_p99_ms the p99
of the checkpoints before it). Then where the slowest checkpoint's time went: the task it waited for last, with that
task's start delay (trigger until the first barrier reached it), alignment,
capture on the task goroutine (sync) and the time until its snapshot was
durable (async), and the longest of each over all tasks (ckpt_slowest in
the JSON object). --checkpoint-details reports the same for every
checkpoint, in order (ckpt_details in the JSON object; with --kill-after,
both processes', the restored job's marked). --cpuprofile and
--trace write a CPU profile and an execution trace of the run (with
--kill-after, of the restored job's process from its start until its
sinks take their first record: the recovery).
--checkpoint-interval 0 runs the job without checkpoints (no directory, no
snapshots, not even a final one, and state tables that record no changes
for incremental checkpoints), to measure what checkpointing costs.
--checkpoint-mode aligned|unaligned|adaptive chooses the barriers, as for
clink sql (default aligned).

--query gen runs the generator alone into a sink that discards the events.
--query qN runs clink's copy of Nexmark query N (examples/nexmark: the source
DDL, then the query file) with its sink tables discarding their rows; q10
writes its files into a temporary directory. Queries whose operators clink
lacks fail at planning with the planner's error.

--kill-after N runs the job in a child process (this binary), kills it with
SIGKILL once its sources emitted N events, and starts a second one that
restores the newest completed checkpoint and runs to the end. The result
adds, from the kill: recovery (until the restored job's sinks take their
first record), restart (until its sources emit their first event) and
replay (until they are back at the events the killed job had emitted).
A large keyed state may still be decoding in the background when the first
record comes out (each record waits for its own key group); replay covers
the rest of it.

--backpressure runs the job twice, with aligned and with unaligned
checkpoints, for --duration each (default 10s) on an unbounded generator,
into a slow sink instead of the query's: a single subtask behind a
round-robin exchange that spends 200 µs per record, so the channels in
front of it fill and every barrier is queued behind buffered records. For
each mode it reports the events emitted, the checkpoints completed, their
durations (p50, p99, max: from the trigger until the COMPLETED marker is
written) and the records the sink took. --events, --kill-after,
--cpuprofile and --trace cannot be combined with it, and a query must write its rows
to blackhole tables and produce no updates.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.eventsSet = cmd.Flags().Changed("events")
			o.modeSet = cmd.Flags().Changed("checkpoint-mode")
			if err := o.validate(); err != nil {
				return err
			}
			if o.backpressure {
				res, err := runBackpressureBench(cmd.Context(), o)
				if err != nil {
					return err
				}
				return res.print(cmd.OutOrStdout(), o.json)
			}
			run := runNexmarkBench
			if o.killAfter > 0 {
				run = runKillBench
			}
			res, err := run(cmd.Context(), o)
			if err != nil {
				return err
			}
			return res.print(cmd.OutOrStdout(), o.json)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.query, "query", "gen", "what to run: gen (the generator alone) or a Nexmark query q0..q22")
	f.Int64Var(&o.events, "events", 10_000_000, "number of events to generate")
	f.IntVar(&o.parallelism, "parallelism", 1, "parallelism of the job")
	f.DurationVar(&o.checkpointInterval, "checkpoint-interval", time.Second, "time between checkpoints (into a temporary directory); 0 runs without checkpoints")
	f.StringVar(&o.checkpointMode, "checkpoint-mode", "aligned", "checkpoint mode: aligned, unaligned or adaptive (as clink sql's)")
	f.BoolVar(&o.json, "json", false, "print one JSON object instead of text")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run (go tool pprof) to this file")
	f.StringVar(&o.trace, "trace", "", "write an execution trace of the run (go tool trace) to this file")
	f.Int64Var(&o.killAfter, "kill-after", 0, "run the job in a child process, SIGKILL it after N events, restore it and report its recovery")
	f.BoolVar(&o.backpressure, "backpressure", false, "run aligned and then unaligned checkpoints into a sink that takes 200µs per record, and compare their durations")
	f.DurationVar(&o.duration, "duration", 0, "with --backpressure: how long each of the two runs lasts (default 10s)")
	f.BoolVar(&o.details, "checkpoint-details", false, "also report where each checkpoint's time went, not only the slowest's")
	f.StringArrayVar(&o.sets, "set", nil, "key=value: run SET 'key' = 'value' ahead of the query, e.g. --set taskmanager.network.memory.buffer-debloat.target=200ms (repeatable)")
	return cmd
}

// checkpointModeKeys are the SET keys that choose the checkpoint mode: a
// --set of one would override the modes --backpressure compares.
var checkpointModeKeys = []string{"clink.checkpointing.mode", "execution.checkpointing.unaligned", "execution.checkpointing.unaligned.enabled"}

func (o *benchOptions) validate() error {
	if o.events < 1 {
		return fmt.Errorf("--events must be at least 1, got %d", o.events)
	}
	if o.parallelism < 1 {
		return fmt.Errorf("--parallelism must be at least 1, got %d", o.parallelism)
	}
	if o.checkpointInterval < 0 {
		return fmt.Errorf("--checkpoint-interval must be positive, or 0 for no checkpoints, got %s", o.checkpointInterval)
	}
	if o.checkpointInterval == 0 && o.backpressure {
		return errors.New("--checkpoint-interval 0 cannot be combined with --backpressure, which measures checkpoints")
	}
	if o.checkpointInterval == 0 && o.killAfter != 0 {
		return errors.New("--checkpoint-interval 0 cannot be combined with --kill-after, which restores a checkpoint")
	}
	mode, err := clinkapi.ParseCheckpointMode(o.checkpointMode)
	if err != nil {
		return fmt.Errorf("--checkpoint-mode must be aligned, unaligned or adaptive, got %q", o.checkpointMode)
	}
	o.mode = mode
	if o.backpressure && o.modeSet {
		return errors.New("--checkpoint-mode cannot be combined with --backpressure, which runs aligned and then unaligned checkpoints")
	}
	for _, kv := range o.sets {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("--set %q: want key=value", kv)
		}
		if o.backpressure && slices.Contains(checkpointModeKeys, strings.TrimSpace(k)) {
			return fmt.Errorf("--set %q cannot be combined with --backpressure, which runs aligned and then unaligned checkpoints", kv)
		}
	}
	if o.duration < 0 || o.duration > 0 && !o.backpressure {
		return fmt.Errorf("--duration needs --backpressure and must be positive, got %s", o.duration)
	}
	if o.backpressure && o.eventsSet {
		return errors.New("--events cannot be combined with --backpressure, which runs for --duration")
	}
	if o.backpressure && o.duration == 0 {
		o.duration = defaultBackpressureDuration
	}
	if o.backpressure && o.killAfter != 0 {
		return errors.New("--kill-after cannot be combined with --backpressure")
	}
	if o.details && o.backpressure {
		return errors.New("--checkpoint-details cannot be combined with --backpressure")
	}
	for _, p := range []struct{ flag, file string }{{"--cpuprofile", o.cpuProfile}, {"--trace", o.trace}} {
		if o.backpressure && p.file != "" {
			return fmt.Errorf("%s cannot be combined with --backpressure (it runs two jobs)", p.flag)
		}
	}
	if o.killAfter < 0 || o.killAfter >= o.events {
		return fmt.Errorf("--kill-after must be between 1 and --events - 1 (0: never), got %d", o.killAfter)
	}
	if o.query == "gen" {
		return nil
	}
	if slices.Contains(nexmarksql.Queries(), o.query) {
		return nil
	}
	return fmt.Errorf("unknown query %q: want gen or one of q0..q22", o.query)
}

// benchResult is what clink bench nexmark reports; the JSON keys are a
// contract for scripts.
type benchResult struct {
	Query         string  `json:"query"`
	Events        int64   `json:"events"`
	WallS         float64 `json:"wall_s"`
	EventsPerS    float64 `json:"events_per_s"`
	CPUS          float64 `json:"cpu_s"`
	EventsPerCPUS float64 `json:"events_per_cpu_s"`
	Checkpoints   int64   `json:"checkpoints"`
	CkptP50Ms     float64 `json:"ckpt_p50_ms"`
	CkptP99Ms     float64 `json:"ckpt_p99_ms"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	// CkptFinalMs is the terminal checkpoint's duration, for a run that
	// ended with one: it completes only once every task processed the end
	// of its input, so it holds the end of the job's work (every window
	// and timer firing), not only a checkpoint's. CkptPeriodicP99Ms is
	// then the p99 of the other checkpoints, if there were any.
	CkptPeriodicP99Ms *float64 `json:"ckpt_periodic_p99_ms,omitempty"`
	CkptFinalMs       *float64 `json:"ckpt_final_ms,omitempty"`
	// CkptSlowest is where the slowest checkpoint's time went.
	CkptSlowest *checkpointReport `json:"ckpt_slowest,omitempty"`
	// CkptDetails is where each checkpoint's time went, in order
	// (--checkpoint-details).
	CkptDetails []*checkpointReport `json:"ckpt_details,omitempty"`
	// durations are the checkpoints' durations as the sampler saw them.
	durations []time.Duration
	// The rest is reported with --kill-after only: the restores after a
	// SIGKILL (1), the times from the kill until the restored job's sinks
	// took a record, its sources emitted an event and its sources were back
	// where the killed job's were, the events the killed job had emitted
	// and those of them the restored job emitted again.
	Restarts       *int64   `json:"restarts,omitempty"`
	RecoveryS      *float64 `json:"recovery_s,omitempty"`
	RestartS       *float64 `json:"restart_s,omitempty"`
	ReplayS        *float64 `json:"replay_s,omitempty"`
	KilledAt       *int64   `json:"killed_at_events,omitempty"`
	ReplayedEvents *int64   `json:"replayed_events,omitempty"`
}

// checkpointReport is where a checkpoint of a run spent its time: the
// parts of the task whose acknowledgement it waited for last, and the
// longest of each part over all its tasks (milliseconds).
type checkpointReport struct {
	DurationMs      float64 `json:"duration_ms"`
	LastTask        string  `json:"last_task"`
	StartDelayMs    float64 `json:"start_delay_ms"`
	AlignmentMs     float64 `json:"alignment_ms"`
	SyncMs          float64 `json:"sync_ms"`
	AsyncMs         float64 `json:"async_ms"`
	MaxStartDelayMs float64 `json:"max_start_delay_ms"`
	MaxAlignmentMs  float64 `json:"max_alignment_ms"`
	MaxSyncMs       float64 `json:"max_sync_ms"`
	MaxAsyncMs      float64 `json:"max_async_ms"`
	// Restored marks, in a --kill-after run, the restored job's
	// checkpoints.
	Restored bool `json:"restored,omitempty"`
	// Terminal marks the terminal checkpoint (see
	// benchResult.CkptFinalMs).
	Terminal bool `json:"terminal,omitempty"`
}

// checkpointSample is one completed checkpoint as the sampler saw it.
type checkpointSample struct {
	duration time.Duration
	phases   metrics.CheckpointPhases
}

// slowest describes the longest of samples, nil for none.
func slowest(samples []checkpointSample) *checkpointReport {
	if len(samples) == 0 {
		return nil
	}
	return checkpointReportOf(slices.MaxFunc(samples, func(a, b checkpointSample) int { return cmp.Compare(a.duration, b.duration) }))
}

// checkpointReportOf describes one checkpoint.
func checkpointReportOf(s checkpointSample) *checkpointReport {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	last, long := s.phases.LastParts, s.phases.Longest
	return &checkpointReport{
		DurationMs: ms(s.duration), LastTask: s.phases.Last,
		StartDelayMs: ms(last.StartDelay), AlignmentMs: ms(last.Alignment), SyncMs: ms(last.Sync), AsyncMs: ms(last.Async),
		MaxStartDelayMs: ms(long.StartDelay), MaxAlignmentMs: ms(long.Alignment), MaxSyncMs: ms(long.Sync), MaxAsyncMs: ms(long.Async),
		Terminal: s.phases.Terminal,
	}
}

// String formats a checkpoint for the text report.
func (s *checkpointReport) String() string {
	terminal := ""
	if s.Terminal {
		terminal = " (terminal)"
	}
	return fmt.Sprintf("%.1f ms%s, waited last for %s: start delay %.1f, alignment %.1f, sync %.1f, async %.1f ms (longest of any task: %.1f, %.1f, %.1f, %.1f ms)",
		s.DurationMs, terminal, s.LastTask, s.StartDelayMs, s.AlignmentMs, s.SyncMs, s.AsyncMs,
		s.MaxStartDelayMs, s.MaxAlignmentMs, s.MaxSyncMs, s.MaxAsyncMs)
}

func (r *benchResult) print(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	_, err := fmt.Fprintf(w, `query        %s
events       %d
wall         %.3f s (%.0f events/s)
cpu          %.3f s (%.0f events per CPU-second)
checkpoints  %d (p50 %.1f ms, p99 %.1f ms)
peak RSS     %.1f MB
`, r.Query, r.Events, r.WallS, r.EventsPerS, r.CPUS, r.EventsPerCPUS, r.Checkpoints, r.CkptP50Ms, r.CkptP99Ms, r.PeakRSSMB)
	if err == nil && r.CkptFinalMs != nil {
		periodic := "no periodic checkpoint"
		if r.CkptPeriodicP99Ms != nil {
			periodic = fmt.Sprintf("periodic p99 %.1f ms", *r.CkptPeriodicP99Ms)
		}
		_, err = fmt.Fprintf(w, "terminal     %.1f ms, after the end of input's work (%s)\n", *r.CkptFinalMs, periodic)
	}
	if err == nil && r.CkptSlowest != nil {
		_, err = fmt.Fprintf(w, "slowest ckpt %s\n", r.CkptSlowest)
	}
	for i, c := range r.CkptDetails {
		if err != nil {
			break
		}
		if c.Restored && (i == 0 || !r.CkptDetails[i-1].Restored) {
			if _, err = fmt.Fprintln(w, "restored     the checkpoints below are the restored job's"); err != nil {
				break
			}
		}
		_, err = fmt.Fprintf(w, "ckpt %-7d %s\n", i+1, c)
	}
	if err == nil && r.RecoveryS != nil {
		_, err = fmt.Fprintf(w, "killed       after %d events (SIGKILL), restored from the newest checkpoint\nrecovery     %.3f s to the first output record (restart %.3f s, replay of %d events %.3f s)\n",
			*r.KilledAt, *r.RecoveryS, *r.RestartS, *r.ReplayedEvents, *r.ReplayS)
	}
	return err
}

// rusage returns the process's user+system CPU time and peak RSS in bytes.
func rusage() (time.Duration, int64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, fmt.Errorf("reading the process's resource usage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Maxrss) * 1024, nil // Maxrss is in KiB on Linux
}

// checkpointDir is where the job's checkpoints go under the run's
// temporary directory dir: none ("", checkpointing off) at a
// --checkpoint-interval of 0.
func (o *benchOptions) checkpointDir(dir string) string {
	if o.checkpointInterval == 0 {
		return ""
	}
	return filepath.Join(dir, "checkpoints")
}

// sourceEvents is the number of events the generator emits: 0, unbounded,
// when the job runs for a --duration.
func (o *benchOptions) sourceEvents() int64 {
	if o.duration > 0 {
		return 0
	}
	return o.events
}

// benchJob is a job ready to run and how to count the events its
// sources emitted.
type benchJob struct {
	run     func(context.Context) error
	emitted func() int64
	// output counts the records the sinks took.
	output func() int64
	// scans is how many sources read the generator's events (a query
	// may scan them more than once); emitted counts each scan's.
	scans int
}

// genJob runs the generator alone into a sink that discards the events.
func genJob(o benchOptions, dir string, reg *metrics.Registry) (*benchJob, error) {
	cfg := nexmark.DefaultConfig()
	cfg.Events = o.sourceEvents()
	src, err := nexmark.NewSource(cfg)
	if err != nil {
		return nil, err
	}
	env, err := clinkapi.NewEnvironment(clinkapi.Options{
		Parallelism:        o.parallelism,
		CheckpointDir:      o.checkpointDir(dir),
		CheckpointInterval: o.checkpointInterval,
		CheckpointMode:     o.mode,
		BatchSize:          1024,
		Metrics:            reg,
		Restart:            clinkapi.NoRestart(),
		Restore:            o.restore,
		OnRestore:          gctune.Pause,
	})
	if err != nil {
		return nil, err
	}
	events := clinkapi.FromSource(env, "nexmark", o.parallelism, connector.Source[nexmark.Event](src))
	if o.slow != nil {
		slow := clinkapi.Rebalance(events).SetParallelism(1)
		clinkapi.SinkTo(slow, "slow", clinkapi.SinkFunc(func(nexmark.Event) error { return o.slow.record() }))
	} else {
		clinkapi.SinkTo(events, "discard", clinkapi.SinkFunc(func(nexmark.Event) error { return nil }))
	}
	return &benchJob{
		run:     env.Execute,
		emitted: func() int64 { return reg.Summary().RecordsOut },
		output:  func() int64 { return reg.Summary().RecordsIn },
		scans:   1,
	}, nil
}

// queryJob plans clink's copy of a Nexmark query over o.events events.
func queryJob(o benchOptions, dir string, reg *metrics.Registry) (*benchJob, error) {
	side := filepath.Join(dir, "side_input.csv")
	if o.query == "q13" {
		// q13 joins the bids with a side input file (keys 0..9999), made
		// here in the run's temporary directory.
		if err := nexmarksql.WriteSideInput(side); err != nil {
			return nil, err
		}
	}
	script, err := nexmarksql.Script(o.query, nexmarksql.Params{
		Events:    o.sourceEvents(),
		OutputDir: filepath.Join(dir, "output"),
		SideInput: side,
	})
	if err != nil {
		return nil, err
	}
	script = setStatements(o.sets) + script
	stdout := io.Discard
	if o.slow != nil {
		if script, err = slowSinks(o.query, script); err != nil {
			return nil, err
		}
		stdout = o.slow
	}
	job, err := sql.Prepare(script, sql.Options{
		Parallelism:        o.parallelism,
		CheckpointDir:      o.checkpointDir(dir),
		CheckpointInterval: o.checkpointInterval,
		CheckpointMode:     o.mode,
		Stdout:             stdout,
		Stderr:             io.Discard,
		Metrics:            reg,
		Functions:          nexmarksql.Functions(),
		Restart:            clinkapi.NoRestart(),
		Restore:            o.restore,
		OnRestore:          gctune.Pause,
	})
	if err != nil {
		return nil, fmt.Errorf("planning Nexmark %s: %w", o.query, nexmarksql.Locate(o.query, err))
	}
	if o.slow != nil {
		for _, s := range job.Sinks {
			if s.Input.Updating() {
				return nil, fmt.Errorf("--backpressure needs a query without updates: Nexmark %s writes update changes into %s", o.query, s.Table.Name)
			}
		}
	}
	// The events are what the nexmark scans emitted.
	var scans []string
	var walk func(n planner.Node)
	walk = func(n planner.Node) {
		if s, ok := n.(*planner.Scan); ok && s.Table.Connector.Name == "nexmark" && !slices.Contains(scans, s.UID()) {
			scans = append(scans, s.UID())
		}
		for _, in := range n.Inputs() {
			walk(in)
		}
	}
	for _, s := range job.Sinks {
		walk(s)
	}
	emitted := func() int64 {
		var n int64
		for _, uid := range scans {
			for sub := range o.parallelism {
				n += reg.Operator(uid, sub).Out.Load()
			}
		}
		return n
	}
	output := func() int64 {
		var n int64
		for _, s := range job.Sinks {
			for sub := range o.parallelism {
				n += reg.Operator(s.UID(), sub).In.Load()
			}
		}
		return n
	}
	return &benchJob{run: job.Run, emitted: emitted, output: output, scans: max(len(scans), 1)}, nil
}

func runNexmarkBench(ctx context.Context, o benchOptions) (*benchResult, error) {
	dir, err := os.MkdirTemp("", "clink-bench-*")
	if err != nil {
		return nil, fmt.Errorf("creating the checkpoint directory: %w", err)
	}
	defer os.RemoveAll(dir)
	reg := metrics.New()
	var job *benchJob
	if o.query == "gen" {
		job, err = genJob(o, dir, reg)
	} else {
		job, err = queryJob(o, dir, reg)
	}
	if err != nil {
		return nil, err
	}

	// A sampler collects the checkpoints completed since its last look
	// (the registry keeps the last 1,024 of them).
	var samples []checkpointSample
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var seen int64
		sample := func() {
			for _, c := range reg.CompletedSince(seen) {
				seen = c.N
				samples = append(samples, checkpointSample{duration: c.Duration, phases: c.Phases})
			}
		}
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()

	cpu0, _, err := rusage()
	if err != nil {
		return nil, err
	}
	stopProfiles, err := startProfiles(o)
	if err != nil {
		return nil, err
	}
	defer stopProfiles()
	runCtx := ctx
	if o.duration > 0 {
		// The job ends when the context does, without a final checkpoint.
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	t0 := time.Now()
	runErr := job.run(runCtx)
	wall := time.Since(t0)
	cpu1, rss, err := rusage()
	close(stop)
	wg.Wait()
	if runErr != nil {
		return nil, runErr
	}
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted after %s: %w", wall.Round(time.Millisecond), ctx.Err())
	}
	events := job.emitted()
	if o.duration == 0 {
		if events < o.events {
			return nil, fmt.Errorf("the job emitted %d events, want %d", events, o.events)
		}
		events = o.events
	}
	cpu := cpu1 - cpu0
	res := &benchResult{
		Query:         o.query,
		Events:        events,
		WallS:         wall.Seconds(),
		EventsPerS:    float64(events) / wall.Seconds(),
		CPUS:          cpu.Seconds(),
		EventsPerCPUS: float64(events) / cpu.Seconds(),
		Checkpoints:   reg.Summary().CheckpointsCompleted,
		PeakRSSMB:     float64(rss) / (1 << 20),
	}
	res.setCheckpoints(samples, o.details)
	return res, nil
}

// setCheckpoints reports samples, the run's completed checkpoints in
// order: their durations and percentiles, the slowest, and with details
// each of them.
func (r *benchResult) setCheckpoints(samples []checkpointSample, details bool) {
	r.durations = make([]time.Duration, len(samples))
	for i, s := range samples {
		r.durations[i] = s.duration
	}
	r.CkptP50Ms, r.CkptP99Ms = percentileMs(r.durations, 0.50), percentileMs(r.durations, 0.99)
	var periodic []time.Duration
	for _, s := range samples {
		if s.phases.Terminal {
			final := float64(s.duration) / float64(time.Millisecond)
			r.CkptFinalMs = &final
			continue
		}
		periodic = append(periodic, s.duration)
	}
	if r.CkptFinalMs != nil && len(periodic) > 0 {
		p99 := percentileMs(periodic, 0.99)
		r.CkptPeriodicP99Ms = &p99
	}
	r.CkptSlowest = slowest(samples)
	if details {
		for _, s := range samples {
			r.CkptDetails = append(r.CkptDetails, checkpointReportOf(s))
		}
	}
}

// percentileMs is the nearest-rank q-quantile of ds in milliseconds, 0
// for none.
func percentileMs(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(q*float64(len(s))+0.999999) - 1
	k = min(max(k, 0), len(s)-1)
	return float64(s[k]) / float64(time.Millisecond)
}

// setStatements returns the SET statements of --set key=value flags, one
// per line, quoted as SQL string literals.
func setStatements(sets []string) string {
	var b strings.Builder
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	for _, kv := range sets {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "SET %s = %s;\n", quote(strings.TrimSpace(k)), quote(strings.TrimSpace(v)))
	}
	return b.String()
}

// startProfiles starts the CPU profile and the execution trace o asks
// for; stop ends them and closes their files.
func startProfiles(o benchOptions) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	for _, p := range []struct {
		file, what string
		start      func(io.Writer) error
		stop       func()
	}{
		{o.cpuProfile, "the CPU profile", pprof.StartCPUProfile, pprof.StopCPUProfile},
		{o.trace, "the execution trace", trace.Start, trace.Stop},
	} {
		if p.file == "" {
			continue
		}
		f, err := os.Create(p.file)
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", p.what, err)
		}
		stops = append(stops, func() { f.Close() })
		if err := p.start(f); err != nil {
			return nil, fmt.Errorf("starting %s: %w", p.what, err)
		}
		stops = append(stops, p.stop)
	}
	return stop, nil
}
