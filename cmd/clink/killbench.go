package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	clinkapi "github.com/clinkstream/clink"
	"github.com/clinkstream/clink/metrics"
)

// childEnv is added to the environment of the job processes --kill-after
// starts; tests set it so that their binary runs main.
var childEnv []string

// newBenchChildCmd is the hidden command a --kill-after run starts twice:
// it runs the job with checkpoints in --dir, optionally restoring the
// newest one, and reports its progress on stdout, one line each:
//
//	emitted N T   the sources emitted N events (per scan) by T
//	output T      the sinks took their first record at T
//	ckpt D P...   a checkpoint completed in D nanoseconds; P are its phases
//	              (phaseFields) and the task it waited for last
//	done N        the job finished after emitting N events (per scan)
//
// T is a Unix time in nanoseconds.
func newBenchChildCmd() *cobra.Command {
	var o benchOptions
	var dir string
	cmd := &cobra.Command{
		Use:    "nexmark-child",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := clinkapi.ParseCheckpointMode(o.checkpointMode)
			if err != nil {
				return err
			}
			o.mode = mode
			return runBenchChild(cmd.Context(), o, dir, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.query, "query", "gen", "")
	f.Int64Var(&o.events, "events", 0, "")
	f.IntVar(&o.parallelism, "parallelism", 1, "")
	f.DurationVar(&o.checkpointInterval, "checkpoint-interval", time.Second, "")
	f.StringVar(&o.checkpointMode, "checkpoint-mode", "aligned", "")
	f.StringVar(&o.restore, "restore", "", "")
	f.StringArrayVar(&o.sets, "set", nil, "")
	f.StringVar(&dir, "dir", "", "")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "")
	f.StringVar(&o.trace, "trace", "", "")
	return cmd
}

func runBenchChild(ctx context.Context, o benchOptions, dir string, w io.Writer) error {
	reg := metrics.New()
	var job *benchJob
	var err error
	if o.query == "gen" {
		job, err = genJob(o, dir, reg)
	} else {
		job, err = queryJob(o, dir, reg)
	}
	if err != nil {
		return err
	}
	// The profiles cover the recovery: they stop when the sinks take
	// their first record, or with the job.
	stopProfiles, err := startProfiles(o)
	if err != nil {
		return err
	}
	var stopOnce sync.Once
	defer stopOnce.Do(stopProfiles)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ckpts, last int64
		output := false
		sample := func() {
			now := time.Now().UnixNano()
			for _, c := range reg.CompletedSince(ckpts) {
				ckpts = c.N
				fmt.Fprintf(w, "ckpt %d %s\n", c.Duration, phaseFields(c.Phases))
			}
			if n := job.emitted() / int64(job.scans); n > last {
				last = n
				fmt.Fprintf(w, "emitted %d %d\n", n, now)
			}
			if !output && job.output() > 0 {
				output = true
				fmt.Fprintf(w, "output %d\n", now)
				stopOnce.Do(stopProfiles)
			}
		}
		t := time.NewTicker(time.Millisecond)
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
	runErr := job.run(ctx)
	close(stop)
	wg.Wait()
	if runErr != nil {
		return runErr
	}
	_, err = fmt.Fprintf(w, "done %d\n", job.emitted()/int64(job.scans))
	return err
}

// phaseFields formats a checkpoint's phases for a ckpt line: start delay,
// alignment, sync and async of the task waited for last, the longest of
// each over all tasks (nanoseconds), 1 for the terminal checkpoint (else
// 0), then that task's name.
func phaseFields(p metrics.CheckpointPhases) string {
	l, m := p.LastParts, p.Longest
	terminal := 0
	if p.Terminal {
		terminal = 1
	}
	return fmt.Sprintf("%d %d %d %d %d %d %d %d %d %s", l.StartDelay, l.Alignment, l.Sync, l.Async,
		m.StartDelay, m.Alignment, m.Sync, m.Async, terminal, p.Last)
}

// parseCheckpoint parses a ckpt line's fields after "ckpt".
func parseCheckpoint(f []string) (checkpointSample, error) {
	if len(f) < 11 {
		return checkpointSample{}, errors.New("too few fields")
	}
	var ns [9]time.Duration
	for i := range ns {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return checkpointSample{}, err
		}
		ns[i] = time.Duration(n)
	}
	terminal, err := strconv.ParseBool(f[9])
	if err != nil {
		return checkpointSample{}, err
	}
	return checkpointSample{duration: ns[0], phases: metrics.CheckpointPhases{
		Terminal:  terminal,
		Last:      strings.Join(f[10:], " "),
		LastParts: metrics.CheckpointParts{StartDelay: ns[1], Alignment: ns[2], Sync: ns[3], Async: ns[4]},
		Longest:   metrics.CheckpointParts{StartDelay: ns[5], Alignment: ns[6], Sync: ns[7], Async: ns[8]},
	}}, nil
}

// benchChild is a running job process of a --kill-after run.
type benchChild struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr bytes.Buffer
	// ckpts are the checkpoints it completed.
	ckpts []checkpointSample
}

func startBenchChild(o benchOptions, dir, restore string) (*benchChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the clink binary to run the job in: %w", err)
	}
	args := []string{"bench", "nexmark-child", "--query", o.query, "--events", strconv.FormatInt(o.events, 10),
		"--parallelism", strconv.Itoa(o.parallelism), "--checkpoint-interval", o.checkpointInterval.String(),
		"--checkpoint-mode", o.mode.String(), "--dir", dir}
	if restore != "" {
		args = append(args, "--restore", restore)
		if o.cpuProfile != "" {
			args = append(args, "--cpuprofile", o.cpuProfile)
		}
		if o.trace != "" {
			args = append(args, "--trace", o.trace)
		}
	}
	for _, kv := range o.sets {
		args = append(args, "--set", kv)
	}
	c := &benchChild{cmd: exec.Command(exe, args...)}
	c.cmd.Env = append(os.Environ(), childEnv...)
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the job process: %w", err)
	}
	c.lines = bufio.NewScanner(out)
	return c, nil
}

// progress is one line of a child's report.
type progress struct {
	kind string // emitted, output, ckpt or done
	n    int64
	at   time.Time
}

// next returns the child's next report; ok is false at the end of its
// output.
func (c *benchChild) next() (p progress, ok bool, err error) {
	for c.lines.Scan() {
		f := strings.Fields(c.lines.Text())
		if len(f) > 0 && f[0] == "ckpt" {
			s, err := parseCheckpoint(f[1:])
			if err != nil {
				return p, false, fmt.Errorf("the job process reported %q: %w", c.lines.Text(), err)
			}
			c.ckpts = append(c.ckpts, s)
			continue
		}
		nums := make([]int64, max(len(f)-1, 0))
		for i := range nums {
			if nums[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
				return p, false, fmt.Errorf("the job process reported %q: %w", c.lines.Text(), err)
			}
		}
		switch {
		case len(f) == 3 && f[0] == "emitted":
			return progress{kind: f[0], n: nums[0], at: time.Unix(0, nums[1])}, true, nil
		case len(f) == 2 && f[0] == "output":
			return progress{kind: f[0], at: time.Unix(0, nums[0])}, true, nil
		case len(f) == 2 && f[0] == "done":
			return progress{kind: f[0], n: nums[0]}, true, nil
		default:
			return p, false, fmt.Errorf("the job process reported %q", c.lines.Text())
		}
	}
	return p, false, c.lines.Err()
}

// wait waits for the child's end and drains its output.
func (c *benchChild) wait() error {
	for c.lines.Scan() {
	}
	return c.cmd.Wait()
}

// usage returns the CPU time and peak RSS of an ended child.
func (c *benchChild) usage() (time.Duration, int64) {
	ps := c.cmd.ProcessState
	var rss int64
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		rss = int64(ru.Maxrss) * 1024
	}
	return ps.UserTime() + ps.SystemTime(), rss
}

// runKillBench runs the job in a process of its own, SIGKILLs it once its
// sources emitted o.killAfter events and a checkpoint completed, and starts a second process that
// restores the newest completed checkpoint and runs to the end. It
// measures, from the kill, the restart (the restored sources emit their
// first event), the recovery (the sinks take their first record) and the
// replay (the sources are back where they were at the kill).
func runKillBench(ctx context.Context, o benchOptions) (*benchResult, error) {
	dir, err := os.MkdirTemp("", "clink-bench-*")
	if err != nil {
		return nil, fmt.Errorf("creating the checkpoint directory: %w", err)
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	first, err := startBenchChild(o, dir, "")
	if err != nil {
		return nil, err
	}
	defer first.cmd.Process.Kill()
	var killedAt time.Time
	var before int64 // events emitted at the kill (per scan)
	for killedAt.IsZero() {
		p, ok, err := first.next()
		if err != nil {
			return nil, err
		}
		if !ok || p.kind == "done" {
			break
		}
		// The kill waits for a completed checkpoint to restore.
		if p.kind == "emitted" && p.n >= o.killAfter && len(first.ckpts) > 0 {
			if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				return nil, fmt.Errorf("killing the job process: %w", err)
			}
			killedAt, before = time.Now(), p.n
		}
	}
	werr := first.wait()
	if killedAt.IsZero() {
		return nil, fmt.Errorf("the job process ended before it emitted --kill-after %d events and completed a checkpoint (%v): %s", o.killAfter, werr, strings.TrimSpace(first.stderr.String()))
	}
	if ws, ok := first.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return nil, fmt.Errorf("the job process was not ended by SIGKILL: %v", first.cmd.ProcessState)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	second, err := startBenchChild(o, dir, "latest")
	if err != nil {
		return nil, err
	}
	defer second.cmd.Process.Kill()
	stopOnCancel := context.AfterFunc(ctx, func() { second.cmd.Process.Signal(syscall.SIGTERM) })
	defer stopOnCancel()
	var running, output time.Time
	var timeline []progress
	var final int64 = -1
	for {
		p, ok, err := second.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		switch p.kind {
		case "emitted":
			if running.IsZero() {
				running = p.at
			}
			timeline = append(timeline, p)
		case "output":
			output = p.at
		case "done":
			final = p.n
		}
	}
	if err := second.wait(); err != nil || final < 0 {
		return nil, fmt.Errorf("the restored job process failed (%v): %s", err, strings.TrimSpace(second.stderr.String()))
	}
	wall := time.Since(t0)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted after %s: %w", wall.Round(time.Millisecond), ctx.Err())
	}
	if output.IsZero() {
		return nil, errors.New("the restored job wrote no record, so its recovery cannot be measured: lower --kill-after")
	}
	// The restored sources start where the checkpoint left them: they
	// emit the events from there to the end, final of them, so the first
	// process's events past o.events-final are replayed.
	replayed := before - (o.events - final)
	replay := running
	for _, p := range timeline {
		if p.n >= replayed {
			replay = p.at
			break
		}
	}

	cpu1, rss1 := first.usage()
	cpu2, rss2 := second.usage()
	cpu := cpu1 + cpu2
	samples := append(slices.Clip(first.ckpts), second.ckpts...)
	res := &benchResult{
		Query:         o.query,
		Events:        o.events,
		WallS:         wall.Seconds(),
		EventsPerS:    float64(o.events) / wall.Seconds(),
		CPUS:          cpu.Seconds(),
		EventsPerCPUS: float64(o.events) / cpu.Seconds(),
		Checkpoints:   int64(len(samples)),
		PeakRSSMB:     float64(max(rss1, rss2)) / (1 << 20),
	}
	res.setCheckpoints(samples, o.details)
	for _, c := range res.CkptDetails[min(len(first.ckpts), len(res.CkptDetails)):] {
		c.Restored = true
	}
	restarts := int64(1)
	rec, rst, rpl := output.Sub(killedAt).Seconds(), running.Sub(killedAt).Seconds(), replay.Sub(killedAt).Seconds()
	res.Restarts, res.RecoveryS, res.RestartS, res.ReplayS = &restarts, &rec, &rst, &rpl
	res.KilledAt, res.ReplayedEvents = &before, &replayed
	return res, nil
}
