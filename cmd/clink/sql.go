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
}

func newSQLCmd() *cobra.Command {
	var o sqlOptions
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
	st := newStatus(stderr, reg, o.quiet)
	err = job.Run(ctx)
	st.stop()
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// SIGINT or SIGTERM: a clean stop of an unbounded job.
		err = nil
	}
	if !o.quiet {
		s := reg.Summary()
		how := "finished"
		if ctx.Err() != nil {
			how = "stopped"
		} else if err != nil {
			how = "failed"
		}
		fmt.Fprintf(stderr, "job %s after %s: %d records in, %d out; %d checkpoints completed\n",
			how, time.Since(start).Round(time.Millisecond), s.RecordsIn, s.RecordsOut, s.CheckpointsCompleted)
	}
	return err
}

// status prints the status line every half second while a job runs. Only
// on a terminal: a log file would fill with lines.
type status struct {
	w    io.Writer
	reg  *metrics.Registry
	done chan struct{}
	wg   sync.WaitGroup
}

func newStatus(w io.Writer, reg *metrics.Registry, quiet bool) *status {
	s := &status{w: w, reg: reg, done: make(chan struct{})}
	f, ok := w.(*os.File)
	if quiet || !ok || !isTerminal(f) {
		return s
	}
	s.wg.Add(1)
	go func() {
		// Owned by status: stop closes done and waits.
		defer s.wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				fmt.Fprint(s.w, "\r\033[K")
				return
			case <-t.C:
				m := s.reg.Summary()
				fmt.Fprintf(s.w, "\r\033[Krunning: %d records in, %d out; %d checkpoints", m.RecordsIn, m.RecordsOut, m.CheckpointsCompleted)
			}
		}
	}()
	return s
}

func (s *status) stop() {
	close(s.done)
	s.wg.Wait()
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
