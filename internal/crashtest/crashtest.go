// Package crashtest runs a job as a subprocess, kills it with SIGKILL at
// random moments, restarts it from its latest completed checkpoint, and
// repeats until the job finishes on its own. Tests then compare what the job
// left behind with what an uninterrupted run produces.
package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint/store"
)

// Harness describes one crash test.
type Harness struct {
	// Command returns the job's command; restore is "" for a fresh start
	// or "latest" when the directory holds a completed checkpoint.
	Command func(restore string) *exec.Cmd
	// CheckpointDir is the job's checkpoint directory.
	CheckpointDir string
	// Kills is how many times the job is killed before it may finish.
	Kills int
	// MinDelay and MaxDelay bound the random time from a start to its kill.
	MinDelay, MaxDelay time.Duration
	// Seed makes the kill moments reproducible.
	Seed uint64
	// Deadline bounds the whole test.
	Deadline time.Duration
	// Faults names fault points (see internal/fault). When set, every
	// other incarnation is armed with CLINK_FAULT=<point>@<K> for a point
	// and a K in [1, MaxHit] drawn at random, instead of a timed kill; the
	// job kills itself when it reaches the point, or is killed at twice
	// the random delay if it has not reached it by then.
	Faults []string
	// MaxHit bounds K for Faults (default 3).
	MaxHit int
}

// Run is the record of one incarnation.
type Run struct {
	Restore string
	// Fault is the CLINK_FAULT value the incarnation ran with, if any.
	Fault   string
	Killed  bool
	Elapsed time.Duration
	Stderr  string
}

// Result is what Harness.Run observed.
type Result struct {
	Runs []Run
	// Kills counts incarnations that were killed while still running.
	Kills int
}

// Run executes the crash test. It returns an error if an incarnation fails
// on its own (exits non-zero without being killed), or the deadline passes.
func (h *Harness) Run(ctx context.Context) (Result, error) {
	if h.Deadline == 0 {
		h.Deadline = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, h.Deadline)
	defer cancel()
	rng := rand.New(rand.NewPCG(h.Seed, h.Seed^0x9e3779b97f4a7c15))
	var res Result
	for {
		restore := ""
		var newest uint64
		if ids, err := completed(h.CheckpointDir); err != nil {
			return res, err
		} else if len(ids) > 0 {
			restore = "latest"
			newest = ids[len(ids)-1]
		}
		cmd := h.Command(restore)
		fault := ""
		if len(h.Faults) > 0 && res.Kills < h.Kills && len(res.Runs)%2 == 1 {
			maxHit := h.MaxHit
			if maxHit <= 0 {
				maxHit = 3
			}
			fault = fmt.Sprintf("%s@%d", h.Faults[rng.IntN(len(h.Faults))], 1+rng.IntN(maxHit))
			if cmd.Env == nil {
				cmd.Env = os.Environ()
			}
			cmd.Env = append(cmd.Env, "CLINK_FAULT="+fault)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			return res, fmt.Errorf("starting job: %w", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var timer <-chan time.Time
		if res.Kills < h.Kills {
			d := h.MinDelay
			if h.MaxDelay > h.MinDelay {
				d += time.Duration(rng.Int64N(int64(h.MaxDelay - h.MinDelay)))
			}
			switch {
			case fault != "":
				// An armed incarnation is killed only 2d after it
				// completed a checkpoint of its own: its fault point lies
				// on the checkpoint and commit path, which a loaded
				// machine may not reach within a fixed delay of the start.
				timer = h.afterProgress(ctx, newest, 2*d, exited)
			case len(res.Runs)%4 == 0:
				// Every fourth run is killed only after it completed a
				// checkpoint of its own, so that the job makes progress
				// however slowly a loaded machine starts it.
				timer = h.afterProgress(ctx, newest, d, exited)
			default:
				timer = time.After(d)
			}
		}
		run := Run{Restore: restore, Fault: fault}
		var werr error
		select {
		case werr = <-exited:
		case <-timer:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			werr = <-exited
			run.Killed = true
			res.Kills++
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			return res, fmt.Errorf("crash test deadline passed after %d runs: %w", len(res.Runs), ctx.Err())
		}
		run.Elapsed = time.Since(start)
		run.Stderr = stderr.String()
		res.Runs = append(res.Runs, run)
		if run.Killed {
			var ee *exec.ExitError
			if werr != nil && !errors.As(werr, &ee) {
				return res, fmt.Errorf("waiting for killed job: %w", werr)
			}
			continue
		}
		if werr != nil {
			// A job that exits because of a fault point it was told to
			// hit was killed by itself: treat it like a kill.
			var ee *exec.ExitError
			if errors.As(werr, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
					run.Killed = true
					res.Runs[len(res.Runs)-1] = run
					res.Kills++
					continue
				}
			}
			return res, fmt.Errorf("job run %d (restore %q) failed: %v\nstderr:\n%s", len(res.Runs), restore, werr, run.Stderr)
		}
		return res, nil
	}
}

// afterProgress returns a channel that fires d after the checkpoint
// directory holds a completed checkpoint above newest.
func (h *Harness) afterProgress(ctx context.Context, newest uint64, d time.Duration, exited <-chan error) <-chan time.Time {
	fire := make(chan time.Time, 1)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if len(exited) > 0 {
				return
			}
			ids, err := completed(h.CheckpointDir)
			if err == nil && len(ids) > 0 && ids[len(ids)-1] > newest {
				break
			}
		}
		select {
		case <-time.After(d):
			fire <- time.Now()
		case <-ctx.Done():
		}
	}()
	return fire
}

func completed(dir string) ([]uint64, error) {
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		return nil, err
	}
	ids, err := st.Completed()
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = uint64(id)
	}
	return out, nil
}

// Check logs what a crash test's runs did and reports, through t, the
// verdicts every campaign shares: at least half the runs restored from a
// checkpoint (so the kills exercised recovery, not only fresh starts),
// every fault point in mustFire fired at least once, and the last run
// printed no panic.
func (r Result) Check(t testing.TB, took time.Duration, mustFire ...string) {
	t.Helper()
	restored, armed, fired := 0, map[string]int{}, map[string]int{}
	for _, run := range r.Runs {
		if run.Restore != "" {
			restored++
		}
		if run.Fault != "" {
			point, _, _ := strings.Cut(run.Fault, "@")
			armed[point]++
			if strings.Contains(run.Stderr, "fault point "+point+" reached") {
				fired[point]++
			}
		}
	}
	if len(r.Runs) == 0 {
		t.Errorf("the crash test ran nothing")
		return
	}
	last := r.Runs[len(r.Runs)-1]
	t.Logf("%d runs in %v: %d killed, %d restored from a checkpoint, the last ran %v; armed fault points %v, fired %v",
		len(r.Runs), took.Round(time.Millisecond), r.Kills, restored, last.Elapsed.Round(time.Millisecond), armed, fired)
	if restored < len(r.Runs)/2 {
		t.Errorf("only %d of %d runs restored from a checkpoint", restored, len(r.Runs))
	}
	for _, p := range mustFire {
		if fired[p] == 0 {
			t.Errorf("fault point %s never fired (armed %d times)", p, armed[p])
		}
	}
	if strings.Contains(last.Stderr, "panic") {
		t.Errorf("the last run printed a panic:\n%s", last.Stderr)
	}
}
