package parquet_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connectors/filesystem"
	"github.com/clinkstream/clink/connectors/parquet"
	"github.com/clinkstream/clink/internal/crashtest"
)

// crashInput is the crash job's input.
var crashInput = crashtest.CountInput{Files: 5, Records: 150_000, Keys: 500}

const (
	crashKills = 50
	// crashRate paces the killed runs (records per second for the whole
	// process), so that 50 kills come before the input ends; the last run
	// is not paced.
	crashRate = 5_000
)

// countRec is what the crash job commits: a count, and a timestamp column
// derived from the id so that the Parquet files carry one.
type countRec struct {
	Key string
	N   int64
	ID  int64
	At  time.Time
}

// TestCrashJobProcess is the job process of TestCrashExactlyOnce: a csv
// file source at parallelism 2, keyed by the record's key, counting per
// key, into the Parquet sink. It runs only when that test starts it.
func TestCrashJobProcess(t *testing.T) {
	ckpt := os.Getenv("CLINK_PQ_CRASH_CKPT")
	if ckpt == "" {
		t.Skip("run by TestCrashExactlyOnce")
	}
	sink, err := parquet.NewSink[countRec](os.Getenv("CLINK_PQ_CRASH_OUT"), parquet.Options{RowGroupRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	rate := 0.0
	if os.Getenv("CLINK_PQ_CRASH_PACED") == "1" {
		rate = crashRate
	}
	env, err := crashtest.CountJob(clink.Options{
		Parallelism: 2, CheckpointDir: ckpt, CheckpointInterval: 50 * time.Millisecond,
		Restore: os.Getenv("CLINK_PQ_CRASH_RESTORE"), BatchSize: 64,
	}, os.Getenv("CLINK_PQ_CRASH_IN"), rate, func(c crashtest.Count) countRec {
		return countRec{Key: c.Key, N: c.N, ID: c.ID, At: time.UnixMicro(c.ID).UTC()}
	}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// crashFaults are the fault points the crash test arms: every step of the
// commit path, and the moment between a checkpoint's COMPLETED marker and
// its commits.
var crashFaults = []string{
	connector.FaultAfterPrepare, "checkpoint.after-marker", connector.FaultBeforeCommit,
	connector.FaultAfterCommit, connector.FaultRecover,
}

// TestCrashExactlyOnce kills the Parquet job with SIGKILL at random moments
// and at the commit path's fault points, restores it each time from its
// latest checkpoint, and checks that the committed Parquet files hold every
// input record exactly once, with every key's counts 1..n exactly once.
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
		Seed:     20261205, // arms every fault point at least 4 times
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
			cmd.Env = append(os.Environ(), "CLINK_PQ_CRASH_CKPT="+ckpt, "CLINK_PQ_CRASH_OUT="+out,
				"CLINK_PQ_CRASH_IN="+in, "CLINK_PQ_CRASH_RESTORE="+restore, "CLINK_PQ_CRASH_PACED="+paced)
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
	checkCounts(t, readCounts(t, out))
}

// readCounts decodes every committed Parquet file of the crash job.
func readCounts(t *testing.T, dir string) []countRec {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []countRec
	for _, e := range entries {
		if !filesystem.Committed(e.Name()) {
			continue
		}
		tbl := readTable(t, filepath.Join(dir, e.Name()))
		rr := array.NewTableReader(tbl, 0)
		for rr.Next() {
			rec := rr.RecordBatch()
			keys := rec.Column(0).(*array.String)
			ns := rec.Column(1).(*array.Int64)
			ids := rec.Column(2).(*array.Int64)
			ats := rec.Column(3).(*array.Timestamp)
			for i := 0; i < int(rec.NumRows()); i++ {
				out = append(out, countRec{Key: keys.Value(i), N: ns.Value(i), ID: ids.Value(i), At: ats.Value(i).ToTime(arrow.Microsecond)})
			}
		}
		rr.Release()
		tbl.Release()
	}
	return out
}

// checkCounts checks the committed output: each row's timestamp column
// matches its id, and the counts pass the campaign's check.
func checkCounts(t *testing.T, got []countRec) {
	t.Helper()
	counts := make([]crashtest.Count, 0, len(got))
	bad := 0
	for _, r := range got {
		if r.At.UnixMicro() != r.ID {
			if bad++; bad <= 10 {
				t.Errorf("committed record %+v has a timestamp that is not its id's", r)
			}
		}
		counts = append(counts, crashtest.Count{Key: r.Key, N: r.N, ID: r.ID})
	}
	crashInput.Check(t, counts)
}

// reportRuns logs what the harness did and checks that the runs restored
// and that every armed fault point fired.
func reportRuns(t *testing.T, res crashtest.Result, took time.Duration) {
	t.Helper()
	res.Check(t, took, crashFaults...)
}
