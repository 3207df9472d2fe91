package postgres

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/internal/crashtest"
)

const (
	xaCrashRows  = 200_000
	xaCrashRate  = 2_500 // rows per second per source subtask, until the last run
	xaCrashKills = 60
)

// xaCrashRun names the table and sink uid of one run of the XA crash
// test: the test process's pid, handed to its job processes, so that runs
// on one database at the same time keep apart their rows and their
// prepared transactions.
func xaCrashRun() (table, uid string) {
	run := os.Getenv("CLINK_PG_XA_CRASH_RUN")
	if run == "" {
		run = strconv.Itoa(os.Getpid())
	}
	return "clink_xa_crash_" + run, "xa_crash_" + run
}

// xaCrashJob is the job the XA crash test kills: a rate-limited generator
// at parallelism 2, mapped to rows, into the XA sink.
func xaCrashJob(opts clink.Options, rate float64) (*clink.Environment, error) {
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		return nil, err
	}
	xaCrashTable, xaCrashUID := xaCrashRun()
	cfg := xaConfig(xaCrashTable)
	cfg.BatchRows = 256
	newSink, err := XAFactory(cfg)
	if err != nil {
		return nil, err
	}
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: xaCrashRows, RatePerSecond: rate},
		func(i int64) int64 { return i })
	rows := clink.Map(src, "row", func(i int64) row { return row{ID: i, Name: "r" + strconv.FormatInt(i, 10)} })
	clink.CommitTo(rows, xaCrashUID, newSink)
	return env, nil
}

// TestXACrashJobProcess is the job process of TestXACrashExactlyOnce; it
// runs only when that test starts it.
func TestXACrashJobProcess(t *testing.T) {
	dir := os.Getenv("CLINK_PG_XA_CRASH_CKPT")
	if dir == "" {
		t.Skip("run by TestXACrashExactlyOnce")
	}
	env, err := xaCrashJob(clink.Options{
		Parallelism: 2, CheckpointDir: dir, CheckpointInterval: 50 * time.Millisecond,
		Restore: os.Getenv("CLINK_PG_XA_CRASH_RESTORE"), BatchSize: 64,
	}, crashRate(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// crashRateEnv carries the generator's rate to a job process.
const crashRateEnv = "CLINK_PG_CRASH_RATE"

// crashRate is the rate the test gave the job process.
func crashRate(t *testing.T) float64 {
	r, err := strconv.ParseFloat(os.Getenv(crashRateEnv), 64)
	if err != nil {
		t.Fatalf("%s: %v", crashRateEnv, err)
	}
	return r
}

// lastRunUnlimited wraps a harness command: the runs that will be killed
// generate at rate, which bounds how far they get, and the last one (every
// run before it was killed, so it is run number kills+1) as fast as it
// can, so that the test does not wait for the rest of the input at that
// rate.
func lastRunUnlimited(kills int, rate float64, command func(restore string) *exec.Cmd) func(string) *exec.Cmd {
	runs := 0
	return func(restore string) *exec.Cmd {
		runs++
		r := rate
		if runs > kills {
			r = 0
		}
		cmd := command(restore)
		cmd.Env = append(cmd.Env, crashRateEnv+"="+strconv.FormatFloat(r, 'f', -1, 64))
		return cmd
	}
}

// xaCrashFaults are the fault points the crash test arms: every step of
// the commit path, and the moment between a checkpoint's COMPLETED marker
// and its commits.
var xaCrashFaults = []string{
	connector.FaultAfterPrepare, connector.FaultBeforeCommit, connector.FaultAfterCommit,
	connector.FaultRecover, "checkpoint.after-marker",
}

// TestXACrashExactlyOnce kills the XA job with SIGKILL at random moments
// and at the commit path's fault points, restores it each time from its
// latest checkpoint, and checks that the table ends up with every row
// exactly once and that no prepared transaction of the job is left.
func TestXACrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs subprocesses for several seconds")
	}
	xaCrashTable, xaCrashUID := xaCrashRun()
	newTable(t, xaCrashTable, "id bigint NOT NULL, name text NOT NULL", xaCrashUID)
	ckpt := t.TempDir()
	h := &crashtest.Harness{
		CheckpointDir: ckpt,
		Kills:         xaCrashKills,
		MinDelay:      150 * time.Millisecond,
		MaxDelay:      650 * time.Millisecond,
		Seed:          20261201,
		Deadline:      3 * time.Minute,
		Faults:        xaCrashFaults,
		Command: lastRunUnlimited(xaCrashKills, xaCrashRate, func(restore string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^TestXACrashJobProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CLINK_PG_XA_CRASH_CKPT="+ckpt, "CLINK_PG_XA_CRASH_RESTORE="+restore,
				"CLINK_PG_XA_CRASH_RUN="+strconv.Itoa(os.Getpid()))
			return cmd
		}),
	}
	start := time.Now()
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reportRuns(t, res, time.Since(start))
	if res.Kills < xaCrashKills {
		t.Fatalf("job was killed %d times, want %d (it finished too early: make it slower)", res.Kills, xaCrashKills)
	}
	conn := admin(t)
	var n, distinct, lo, hi int64
	if err := conn.QueryRow(testCtx(t), "SELECT count(*), count(DISTINCT id), coalesce(min(id), -1), coalesce(max(id), -1) FROM "+xaCrashTable).
		Scan(&n, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if n != xaCrashRows || distinct != xaCrashRows || lo != 0 || hi != xaCrashRows-1 {
		t.Errorf("table holds %d rows, %d distinct ids in [%d, %d]; want %d, ids 0..%d: %d lost, %d duplicated",
			n, distinct, lo, hi, xaCrashRows, xaCrashRows-1, xaCrashRows-distinct, n-distinct)
	}
	var badNames int64
	if err := conn.QueryRow(testCtx(t), "SELECT count(*) FROM "+xaCrashTable+" WHERE name <> 'r' || id").Scan(&badNames); err != nil {
		t.Fatal(err)
	}
	if badNames > 0 {
		t.Errorf("%d rows carry another row's name", badNames)
	}
	if left := preparedOf(t, conn, xaCrashUID); len(left) > 0 {
		t.Errorf("prepared transactions of the job left after it ended: %v", left)
	}
}

// reportRuns logs what the harness did and checks that the runs restored.
func reportRuns(t *testing.T, res crashtest.Result, took time.Duration) {
	t.Helper()
	res.Check(t, took)
}

const (
	upsertCrashTable = "clink_upsert_crash"
	upsertCrashKeys  = 500
	upsertCrashCount = 300   // records per key, on average
	upsertCrashRate  = 1_200 // records per second per source subtask, until the last run
	upsertCrashKills = 50
)

// upsertCrashRecords is the job's input size.
const upsertCrashRecords = upsertCrashKeys * upsertCrashCount

// upsertCrashKey is the key of record i. The first tenth of the records
// goes to every key, the rest to the lower half of the keys only: the
// upper half's rows reach their final value early, in runs that are
// killed later, so they must have been flushed at a barrier.
func upsertCrashKey(i int64) string {
	if i < upsertCrashRecords/10 {
		return fmt.Sprintf("k%03d", i%upsertCrashKeys)
	}
	return fmt.Sprintf("k%03d", i%(upsertCrashKeys/2))
}

// upsertDeletes reports whether the n-th record of key j deletes the key's
// row instead of counting it up; the next record inserts it again.
func upsertDeletes(j int, n int64) bool { return (n+int64(j))%7 == 0 }

// upsertCrashJob keeps a running count per key: the first record of a key
// inserts its row (+I), later ones retract and update it (-U, +U), and
// every seventh (shifted by the key) deletes it (-D).
func upsertCrashJob(opts clink.Options, rate float64) (*clink.Environment, error) {
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		return nil, err
	}
	sink, err := NewUpsertSink(upsertConfig(upsertCrashTable))
	if err != nil {
		return nil, err
	}
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: upsertCrashRecords, RatePerSecond: rate},
		func(i int64) int64 { return i })
	keyed := clink.KeyBy(src, upsertCrashKey)
	changes := clink.Process(keyed, "count", func(ctx *clink.KeyedContext[string, int64], _ int64, out *clink.Collector[kv]) error {
		n, _ := ctx.Value()
		j, _ := strconv.Atoi(ctx.Key()[1:])
		present := n > 0 && !upsertDeletes(j, n)
		n++
		ctx.SetValue(n)
		switch {
		case upsertDeletes(j, n):
			if present {
				out.Collect(kv{Kind: connector.Delete, Key: ctx.Key(), N: n - 1})
			}
		case present:
			out.Collect(kv{Kind: connector.UpdateBefore, Key: ctx.Key(), N: n - 1})
			out.Collect(kv{Kind: connector.UpdateAfter, Key: ctx.Key(), N: n})
		default:
			out.Collect(kv{Kind: connector.Insert, Key: ctx.Key(), N: n})
		}
		return nil
	})
	clink.SinkTo(changes, "upsert", clink.Sink[kv](sink))
	return env, nil
}

// upsertExpected is the table an uninterrupted run leaves.
func upsertExpected() []string {
	counts := map[string]int64{}
	for i := range int64(upsertCrashRecords) {
		counts[upsertCrashKey(i)]++
	}
	var want []string
	for j := range upsertCrashKeys {
		k := fmt.Sprintf("k%03d", j)
		if n := counts[k]; !upsertDeletes(j, n) {
			want = append(want, fmt.Sprintf("%s=%d", k, n))
		}
	}
	return want
}

// TestUpsertCrashJobProcess is the job process of
// TestUpsertCrashConverges; it runs only when that test starts it.
func TestUpsertCrashJobProcess(t *testing.T) {
	dir := os.Getenv("CLINK_PG_UPSERT_CRASH_CKPT")
	if dir == "" {
		t.Skip("run by TestUpsertCrashConverges")
	}
	env, err := upsertCrashJob(clink.Options{
		Parallelism: 2, CheckpointDir: dir, CheckpointInterval: 50 * time.Millisecond,
		Restore: os.Getenv("CLINK_PG_UPSERT_CRASH_RESTORE"), BatchSize: 64,
	}, crashRate(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestUpsertCrashConverges kills the running-count job into the upsert
// sink at random moments and checks that the table ends equal to what an
// uninterrupted run leaves.
func TestUpsertCrashConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs subprocesses for several seconds")
	}
	newTable(t, upsertCrashTable, "k text PRIMARY KEY, n bigint NOT NULL", "upsert_crash")
	ckpt := t.TempDir()
	h := &crashtest.Harness{
		CheckpointDir: ckpt,
		Kills:         upsertCrashKills,
		MinDelay:      300 * time.Millisecond,
		MaxDelay:      1200 * time.Millisecond,
		Seed:          20261202,
		Deadline:      3 * time.Minute,
		Faults:        []string{"checkpoint.after-marker"},
		Command: lastRunUnlimited(upsertCrashKills, upsertCrashRate, func(restore string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^TestUpsertCrashJobProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CLINK_PG_UPSERT_CRASH_CKPT="+ckpt, "CLINK_PG_UPSERT_CRASH_RESTORE="+restore)
			return cmd
		}),
	}
	start := time.Now()
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reportRuns(t, res, time.Since(start))
	if res.Kills < upsertCrashKills {
		t.Fatalf("job was killed %d times, want %d (it finished too early: make it slower)", res.Kills, upsertCrashKills)
	}
	got := tableKV(t, admin(t), upsertCrashTable)
	want := upsertExpected()
	if !slices.Equal(got, want) {
		t.Errorf("table differs from an uninterrupted run's: got %d rows, want %d\n got %s\nwant %s",
			len(got), len(want), abbrevRows(got), abbrevRows(want))
	}
}

func abbrevRows(s []string) string {
	if len(s) > 10 {
		return fmt.Sprintf("%q ... %q", s[:5], s[len(s)-5:])
	}
	return fmt.Sprintf("%q", s)
}
