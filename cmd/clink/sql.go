package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// errNoSQL is what clink sql reports until the SQL layer lands.
var errNoSQL = errors.New("the SQL layer is not implemented yet; use the Go API (see README)")

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
			return errNoSQL
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
