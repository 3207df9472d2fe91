package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	clinkapi "github.com/clinkstream/clink"
	"github.com/clinkstream/clink/internal/gctune"
	"github.com/clinkstream/clink/metrics"
	"github.com/clinkstream/clink/sql"
)

// sqlOptions are the flags of clink sql (DESIGN.md, "The CLI contract").
type sqlOptions struct {
	file               string
	checkpointDir      string
	checkpointInterval time.Duration
	restore            string
	parallelism        int
	checkpointMode     string
	quiet              bool
	// terminal reports whether stderr is a terminal, where the status
	// line is shown (tests replace it); statusEvery is the status line's
	// refresh period.
	terminal    func(io.Writer) bool
	statusEvery time.Duration
}

func newSQLCmd() *cobra.Command {
	o := sqlOptions{terminal: isTerminal, statusEvery: 500 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "sql -f JOB.sql",
		Short: "Run every INSERT INTO of a SQL script as one job",
		Long: `Run every INSERT INTO of a SQL script (Flink dialect) as one job in this process.

A job whose sources are all bounded exits 0 after its final checkpoint has
committed all output; an unbounded job runs until SIGINT or SIGTERM. SET
statements in the script set the same options as the flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "SQL script to run (required)")
	f.StringVar(&o.checkpointDir, "checkpoint-dir", "", "directory for this job's checkpoints (default: a fresh directory under the system temp directory)")
	f.DurationVar(&o.checkpointInterval, "checkpoint-interval", time.Second, "time between checkpoint triggers")
	f.StringVar(&o.restore, "restore", "", `resume from a checkpoint in --checkpoint-dir: "latest" or a checkpoint id`)
	f.IntVar(&o.parallelism, "parallelism", 1, "default parallelism of the job's operators")
	f.StringVar(&o.checkpointMode, "checkpoint-mode", "aligned", "checkpoint mode: aligned, unaligned or adaptive")
	f.BoolVar(&o.quiet, "quiet", false, "do not print the status line")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "sql")
	_ = cmd.MarkFlagDirname("checkpoint-dir")
	return cmd
}

// validate checks the flags and that the script exists, so that a mistake
// is reported before any job starts.
func (o *sqlOptions) validate() error {
	if o.checkpointInterval <= 0 {
		return fmt.Errorf("--checkpoint-interval must be positive, got %s", o.checkpointInterval)
	}
	if o.parallelism < 1 {
		return fmt.Errorf("--parallelism must be at least 1, got %d", o.parallelism)
	}
	switch o.checkpointMode {
	case "aligned", "unaligned", "adaptive":
	default:
		return fmt.Errorf("--checkpoint-mode must be aligned, unaligned or adaptive, got %q", o.checkpointMode)
	}
	if o.restore != "" {
		if o.restore != "latest" {
			if id, err := strconv.ParseUint(o.restore, 10, 64); err != nil || id == 0 {
				return fmt.Errorf(`--restore must be "latest" or a checkpoint id of at least 1, got %q`, o.restore)
			}
		}
		if o.checkpointDir == "" {
			return errors.New("--restore needs --checkpoint-dir to name the directory to restore from")
		}
	}
	fi, err := os.Stat(o.file)
	if err != nil {
		return fmt.Errorf("reading SQL script: %w", err)
	}
	if fi.IsDir() {
		return fmt.Errorf("reading SQL script: %s is a directory", o.file)
	}
	return nil
}

// run plans the script, runs its job and reports on stderr: the checkpoint
// directory at start, a status line while it runs (refreshed in place on a
// terminal), a summary at the end. --quiet keeps only the directory line
// and errors.
func (o *sqlOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	script, err := os.ReadFile(o.file)
	if err != nil {
		return fmt.Errorf("reading SQL script: %w", err)
	}
	mode, err := clinkapi.ParseCheckpointMode(o.checkpointMode)
	if err != nil {
		return err
	}
	reg := metrics.New()
	job, err := sql.Prepare(string(script), sql.Options{
		Parallelism:        o.parallelism,
		CheckpointDir:      o.checkpointDir,
		CheckpointInterval: o.checkpointInterval,
		CheckpointMode:     mode,
		Restore:            o.restore,
		Stdout:             stdout,
		Stderr:             stderr,
		Logger:             slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Metrics:            reg,
		OnRestore:          gctune.Pause,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	for _, w := range job.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if len(job.Sinks) == 0 {
		return nil
	}
	if job.Options.CheckpointDir == "" {
		dir, err := os.MkdirTemp("", "clink-sql-")
		if err != nil {
			return fmt.Errorf("creating a checkpoint directory: %w", err)
		}
		job.Options.CheckpointDir = dir
	}
	fmt.Fprintf(stderr, "checkpoints: %s\n", job.Options.CheckpointDir)

	start := time.Now()
	st := newStatus(stderr, reg, !o.quiet && o.terminal(stderr), o.statusEvery)
	err = job.Run(ctx)
	st.stop()
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// SIGINT or SIGTERM: a clean stop of an unbounded job.
		err = nil
	}
	if !o.quiet {
		how := "finished"
		if ctx.Err() != nil {
			how = "stopped"
		} else if err != nil {
			how = "failed"
		}
		fmt.Fprintln(stderr, summaryLine(how, time.Since(start), reg.Summary()))
	}
	return err
}

// summaryLine is the line printed when a job ends.
func summaryLine(how string, took time.Duration, s metrics.Summary) string {
	line := fmt.Sprintf("job %s after %s: %d records in, %d out; %d checkpoints completed",
		how, took.Round(time.Millisecond), s.RecordsIn, s.RecordsOut, s.CheckpointsCompleted)
	if s.CheckpointsCompleted > 0 {
		line += fmt.Sprintf(", the last in %s", s.LastCheckpointDuration.Round(time.Millisecond))
	}
	return line
}

// summarizer is what the status line reads: *metrics.Registry.
type summarizer interface {
	Summary() metrics.Summary
}

// status rewrites one line on a terminal while a job runs: the record
// rates since the last refresh, the checkpoints completed and how long
// the last one took. Only on a terminal: a log file would fill with lines.
type status struct {
	w     io.Writer
	reg   summarizer
	every time.Duration
	done  chan struct{}
	wg    sync.WaitGroup
	// prev and at are the figures of the last refresh and its time, read
	// and written by the refreshing goroutine only.
	prev metrics.Summary
	at   time.Time
}

// newStatus starts refreshing the status line every period when show is
// set; otherwise the status prints nothing.
func newStatus(w io.Writer, reg summarizer, show bool, every time.Duration) *status {
	s := &status{w: w, reg: reg, every: every, done: make(chan struct{})}
	if !show {
		return s
	}
	s.prev, s.at = reg.Summary(), time.Now()
	s.wg.Add(1)
	go func() {
		// Owned by status: stop closes done and waits.
		defer s.wg.Done()
		t := time.NewTicker(s.every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				fmt.Fprint(s.w, "\r\033[K")
				return
			case now := <-t.C:
				fmt.Fprint(s.w, s.line(now))
			}
		}
	}()
	return s
}

// line returns the status line at now, starting with a carriage return
// and an erase-line sequence so that it replaces the one before.
func (s *status) line(now time.Time) string {
	m := s.reg.Summary()
	secs := now.Sub(s.at).Seconds()
	rate := func(cur, prev int64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(cur-prev) / secs
	}
	in, out := rate(m.RecordsIn, s.prev.RecordsIn), rate(m.RecordsOut, s.prev.RecordsOut)
	s.prev, s.at = m, now
	line := fmt.Sprintf("\r\033[Krunning: %.0f records/s in, %.0f out (%d, %d in total); %d checkpoints",
		in, out, m.RecordsIn, m.RecordsOut, m.CheckpointsCompleted)
	if m.CheckpointsCompleted > 0 {
		line += fmt.Sprintf(", the last in %s", m.LastCheckpointDuration.Round(time.Millisecond))
	}
	return line
}

func (s *status) stop() {
	close(s.done)
	s.wg.Wait()
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
