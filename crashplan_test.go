package clink_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connectors/filesystem"
	"github.com/clinkstream/clink/internal/crashtest"
)

// The churning and counting crash tests run their job in a process of
// this test binary (a test that skips unless its checkpoint directory's
// variable is set), kill it at random moments and read what its
// filesystem sink committed.

// crashProcess returns the options and output directory of a job process
// run by runCrash: ok is false, and the test skipped, when the test was
// not started by runCrash (ckptVar unset).
func crashProcess(t *testing.T, ckptVar string, interval time.Duration) (opts clink.Options, out string, ok bool) {
	dir := os.Getenv(ckptVar)
	if dir == "" {
		t.Skip("run by its crash test")
		return opts, "", false
	}
	p, err := strconv.Atoi(os.Getenv("CLINK_CRASH_PARALLELISM"))
	if err != nil {
		t.Fatalf("CLINK_CRASH_PARALLELISM: %v", err)
	}
	return clink.Options{
		Parallelism: p, CheckpointDir: dir, CheckpointInterval: interval,
		Restore: os.Getenv("CLINK_CRASH_RESTORE"),
	}, os.Getenv("CLINK_CRASH_OUT"), true
}

// executeCrashJob runs the job process's job to its end.
func executeCrashJob(t *testing.T, env *clink.Environment, err error) {
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// eachParallelism runs crash(t, parallelism, seed) as a subtest at
// parallelism 1 and 2, seeded seed and seed+1; not with -short.
func eachParallelism(t *testing.T, seed uint64, crash func(t *testing.T, parallelism int, seed uint64)) {
	if testing.Short() {
		t.Skip("crash test runs subprocesses for several seconds")
	}
	for i, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism-%d", par), func(t *testing.T) { crash(t, par, seed+uint64(i)) })
	}
}

// runCrash kills the job process test proc p.kills times and lets it
// finish, and returns its checkpoint and output directories and the
// harness's result.
func runCrash(t *testing.T, proc, ckptVar string, p churnPlan, parallelism int, seed uint64) (ckpt, out string, res crashtest.Result) {
	ckpt, out = t.TempDir(), t.TempDir()
	h := &crashtest.Harness{
		CheckpointDir: ckpt,
		Kills:         p.kills,
		MinDelay:      p.minDelay,
		MaxDelay:      p.maxDelay,
		Seed:          seed,
		Deadline:      4 * time.Minute,
		Command: func(restore string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^"+proc+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), ckptVar+"="+ckpt, "CLINK_CRASH_OUT="+out,
				"CLINK_CRASH_RESTORE="+restore, fmt.Sprintf("CLINK_CRASH_PARALLELISM=%d", parallelism))
			return cmd
		},
	}
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Kills != p.kills {
		t.Fatalf("job was killed %d times, want %d (it finished too early: make it slower)", res.Kills, p.kills)
	}
	return ckpt, out, res
}

// committedPairs calls f with the two integers of each line of the CSV
// files the filesystem sink committed in dir; a line that is not two
// integers is reported (the first ten) and counted.
func committedPairs(t *testing.T, dir string, f func(file string, a, b int64)) (bad int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !filesystem.Committed(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if line == "" {
				continue
			}
			parts := strings.Split(line, ",")
			a, err1 := strconv.ParseInt(parts[0], 10, 64)
			b, err2 := strconv.ParseInt(parts[len(parts)-1], 10, 64)
			if len(parts) != 2 || err1 != nil || err2 != nil {
				if bad++; bad <= 10 {
					t.Errorf("%s: committed line %q is not two integers", e.Name(), line)
				}
				continue
			}
			f(e.Name(), a, b)
		}
	}
	return bad
}
