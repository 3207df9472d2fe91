// Command clink runs stream processing jobs written in SQL or Go and
// inspects their checkpoints.
//
// Each subcommand lives in its own file with one newXxxCmd constructor;
// newRootCmd wires them together. The CLI contract (flags, exit codes, what
// goes to stdout and stderr) is in DESIGN.md; scripts and tests depend on it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/clinkstream/clink/internal/gctune"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A job's live heap is often a few tens of megabytes: without
	// headroom the collector would run every few milliseconds (GOGC in
	// the environment overrides this).
	stopGC := gctune.Start(gctune.DefaultHeadroom)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopGC()
	stop()
	os.Exit(code)
}

// run executes the CLI with args and returns the process exit code. Every
// error is printed once on stderr, prefixed with the command that failed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
		return 1
	}
	return 0
}

// newRootCmd returns the clink command with every subcommand attached.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "clink",
		Short: "clink runs stream processing jobs with exactly-once checkpoints",
		Long: `clink runs stream processing jobs defined in SQL (the Flink dialect) or in Go,
checkpoints their state with in-band barriers, and delivers output exactly once.`,
		// run prints errors itself, once, naming the command. A usage dump
		// after a run error would push the message off the screen; flag
		// errors instead carry a pointer to --help (see flagError).
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
	}
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newVersionCmd(),
		newSQLCmd(),
		newStateCatCmd(),
		newBenchCmd(),
	)
	return root
}

// flagError adds a pointer to the command's help to a flag parsing error.
func flagError(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())
}
