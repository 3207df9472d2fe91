package filesystem_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connectors/filesystem"
	"github.com/clinkstream/clink/internal/crashtest"
)

// crashInput is the crash job's input.
var crashInput = crashtest.CountInput{Files: 7, Records: 150_000, Keys: 500}

const (
	crashKills = 50
	// crashRate paces the killed runs (records per second for the whole
	// process), so that 50 kills come before the input ends; the last run
	// is not paced.
	crashRate = 5_000
)

// TestCrashJobProcess is the job process of TestCrashExactlyOnce; it runs
// only when that test starts it.
func TestCrashJobProcess(t *testing.T) {
	ckpt := os.Getenv("CLINK_FS_CRASH_CKPT")
	if ckpt == "" {
		t.Skip("run by TestCrashExactlyOnce")
	}
	sink, err := filesystem.NewSink[crashtest.Count](os.Getenv("CLINK_FS_CRASH_OUT"), filesystem.CSV, filesystem.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rate := 0.0
	if os.Getenv("CLINK_FS_CRASH_PACED") == "1" {
		rate = crashRate
	}
	env, err := crashtest.CountJob(clink.Options{
		Parallelism: 2, CheckpointDir: ckpt, CheckpointInterval: 50 * time.Millisecond,
		Restore: os.Getenv("CLINK_FS_CRASH_RESTORE"), BatchSize: 64,
	}, os.Getenv("CLINK_FS_CRASH_IN"), rate, func(c crashtest.Count) crashtest.Count { return c }, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// crashFaults are the fault points the crash tests arm: every step of the
// commit path, and the moment between a checkpoint's COMPLETED marker and
// its commits.
var crashFaults = []string{
	connector.FaultAfterPrepare, "checkpoint.after-marker", connector.FaultBeforeCommit,
	connector.FaultAfterCommit, connector.FaultRecover,
}

// TestCrashExactlyOnce kills the file job with SIGKILL at random moments
// and at the commit path's fault points, restores it each time from its
// latest checkpoint, and checks that the committed files hold every input
// record exactly once, with every key's counts 1..n exactly once.
func TestCrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs subprocesses for several seconds")
	}
	in, out, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "out"), t.TempDir()
	crashInput.Write(t, in)
	runs := 0
	h := &crashtest.Harness{
		CheckpointDir: ckpt,
		Kills:         crashKills,
		MinDelay:      250 * time.Millisecond,
		MaxDelay:      650 * time.Millisecond,
		// The first hit of a point: the soonest, so that an armed run
		// rarely outlives its timer. With two subtasks it still cuts a
		// commit between them.
		MaxHit:   1,
		Seed:     20261142, // arms every fault point at least 4 times
		Deadline: 3 * time.Minute,
		Faults:   crashFaults,
		Command: func(restore string) *exec.Cmd {
			// Every run but the last is killed: pace all before it.
			paced := "1"
			if runs >= crashKills {
				paced = "0"
			}
			runs++
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashJobProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CLINK_FS_CRASH_CKPT="+ckpt, "CLINK_FS_CRASH_OUT="+out,
				"CLINK_FS_CRASH_IN="+in, "CLINK_FS_CRASH_RESTORE="+restore, "CLINK_FS_CRASH_PACED="+paced)
			return cmd
		},
	}
	start := time.Now()
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reportRuns(t, res, time.Since(start))
	if res.Kills < crashKills {
		t.Fatalf("job was killed %d times, want %d (it finished too early: make it slower)", res.Kills, crashKills)
	}
	crashInput.Check(t, readCommitted[crashtest.Count](t, out, filesystem.CSV))
}

// reportRuns logs what the harness did and checks that the runs restored
// and that every armed fault point fired.
func reportRuns(t *testing.T, res crashtest.Result, took time.Duration) {
	t.Helper()
	if os.Getenv("CLINK_FS_CRASH_DEBUG") != "" {
		for i, r := range res.Runs {
			t.Logf("run %d: restore=%q fault=%q killed=%v elapsed=%v stderr=%q", i, r.Restore, r.Fault, r.Killed, r.Elapsed, r.Stderr)
		}
	}
	res.Check(t, took, crashFaults...)
}
