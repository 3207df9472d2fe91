package filesystem_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connectors/filesystem"
	"github.com/clinkstream/clink/internal/crashtest"
)

const (
	crashFiles   = 7
	crashRecords = 150_000
	crashKeys    = 500
	crashKills   = 50
	// crashRate paces the killed runs (records per second for the whole
	// process), so that 50 kills come before the input ends; the last run
	// is not paced.
	crashRate = 5_000
)

// inRec is a record of the crash job's input files.
type inRec struct {
	ID  int64
	Key string
}

// countRec is what the crash job commits: the N-th record of Key was ID.
type countRec struct {
	Key string
	N   int64
	ID  int64
}

func crashKey(id int64) string { return "k" + strconv.FormatInt(id*7919%crashKeys, 10) }

// writeCrashInput writes the input files: record i goes to file i mod
// crashFiles, so that every file holds a different share.
func writeCrashInput(t *testing.T, dir string) {
	t.Helper()
	ws := make([]*bufio.Writer, crashFiles)
	fs := make([]*os.File, crashFiles)
	for i := range ws {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("in-%02d.csv", i)))
		if err != nil {
			t.Fatal(err)
		}
		fs[i], ws[i] = f, bufio.NewWriter(f)
	}
	for i := int64(0); i < crashRecords; i++ {
		fmt.Fprintf(ws[i%crashFiles], "%d,%s\n", i, crashKey(i))
	}
	for i := range ws {
		if err := ws[i].Flush(); err != nil {
			t.Fatal(err)
		}
		if err := fs[i].Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// pacer holds the process to rate records per second.
type pacer struct {
	rate  float64
	start time.Time
	n     atomic.Int64
}

func (p *pacer) wait() {
	if p == nil {
		return
	}
	n := p.n.Add(1)
	if n%64 != 0 {
		return
	}
	due := p.start.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
}

// crashJob is the job the crash tests kill: a file source at parallelism
// 2, keyed by the record's key, counting per key, into sink.
func crashJob[C any](opts clink.Options, in string, paced bool, sink func() connector.CommittingSink[countRec, C]) (*clink.Environment, error) {
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		return nil, err
	}
	src, err := filesystem.NewSource[inRec](in, filesystem.CSV)
	if err != nil {
		return nil, err
	}
	var p *pacer
	if paced {
		p = &pacer{rate: crashRate, start: time.Now()}
	}
	recs := clink.FromSource(env, "files", 2, src)
	recs = clink.Map(recs, "pace", func(r inRec) inRec { p.wait(); return r })
	keyed := clink.KeyBy(recs, func(r inRec) string { return r.Key })
	counts := clink.Process(keyed, "count", func(ctx *clink.KeyedContext[string, int64], r inRec, out *clink.Collector[countRec]) error {
		n, _ := ctx.Value()
		n++
		ctx.SetValue(n)
		out.Collect(countRec{Key: r.Key, N: n, ID: r.ID})
		return nil
	})
	clink.CommitTo(counts, "out", sink)
	return env, nil
}

// TestCrashJobProcess is the job process of TestCrashExactlyOnce; it runs
// only when that test starts it.
func TestCrashJobProcess(t *testing.T) {
	ckpt := os.Getenv("CLINK_FS_CRASH_CKPT")
	if ckpt == "" {
		t.Skip("run by TestCrashExactlyOnce")
	}
	sink, err := filesystem.NewSink[countRec](os.Getenv("CLINK_FS_CRASH_OUT"), filesystem.CSV, filesystem.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env, err := crashJob(clink.Options{
		Parallelism: 2, CheckpointDir: ckpt, CheckpointInterval: 50 * time.Millisecond,
		Restore: os.Getenv("CLINK_FS_CRASH_RESTORE"), BatchSize: 64,
	}, os.Getenv("CLINK_FS_CRASH_IN"), os.Getenv("CLINK_FS_CRASH_PACED") == "1", sink)
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
	writeCrashInput(t, in)
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
	checkCounts(t, readCommitted[countRec](t, out, filesystem.CSV))
}

// checkCounts checks the crash job's committed output: every input id
// exactly once, under its key, and every key's counts exactly 1..n.
func checkCounts(t *testing.T, got []countRec) {
	t.Helper()
	seen := make([]int, crashRecords)
	counts := map[string][]int{}
	bad := 0
	for _, r := range got {
		if r.ID < 0 || r.ID >= crashRecords || r.Key != crashKey(r.ID) {
			if bad++; bad <= 10 {
				t.Errorf("committed record %+v is not one of the input's", r)
			}
			continue
		}
		seen[r.ID]++
		counts[r.Key] = append(counts[r.Key], int(r.N))
	}
	lost, dup := 0, 0
	for id, n := range seen {
		switch {
		case n == 0:
			if lost++; lost <= 5 {
				t.Errorf("record %d is missing", id)
			}
		case n > 1:
			if dup++; dup <= 5 {
				t.Errorf("record %d is committed %d times", id, n)
			}
		}
	}
	if lost+dup > 0 {
		t.Errorf("%d committed records for %d inputs: %d lost, %d duplicated", len(got), crashRecords, lost, dup)
	}
	want := map[string]int{}
	for id := int64(0); id < crashRecords; id++ {
		want[crashKey(id)]++
	}
	for k, n := range want {
		ns := counts[k]
		has := make([]bool, n+1)
		ok := len(ns) == n
		for _, x := range ns {
			if x < 1 || x > n || has[x] {
				ok = false
				break
			}
			has[x] = true
		}
		if !ok {
			if bad++; bad <= 10 {
				t.Errorf("key %s: counts %d values, want exactly 1..%d", k, len(ns), n)
			}
		}
	}
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
