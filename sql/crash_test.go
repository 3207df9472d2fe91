package sql_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/internal/crashtest"
	"github.com/clinkstream/clink/sql"
)

// The SQL crash campaigns run a SQL script as a child process (this test
// binary, re-executed to run one of the *JobProcess tests), kill it with
// SIGKILL at random moments and at the commit path's fault points, and
// restart it with --restore latest semantics each time, until it finishes
// on its own. The committed output must then equal what an uninterrupted
// run commits, computed here from the input.

// Environment of a campaign's child process.
const (
	crashCkptEnv    = "CLINK_SQL_CRASH_CKPT"
	crashRestoreEnv = "CLINK_SQL_CRASH_RESTORE"
	crashRateEnv    = "CLINK_SQL_CRASH_RATE"
	crashInEnv      = "CLINK_SQL_CRASH_IN"
	crashOutEnv     = "CLINK_SQL_CRASH_OUT"
	crashTableEnv   = "CLINK_SQL_CRASH_TABLE_SUFFIX"
)

// runCrashChild runs script as a job process: a fresh start or a restore
// of the latest checkpoint, as the harness says.
func runCrashChild(t *testing.T, script string) {
	job, err := sql.Prepare(script, sql.Options{
		Parallelism: 2, CheckpointDir: os.Getenv(crashCkptEnv), Restore: os.Getenv(crashRestoreEnv),
	})
	if err == nil {
		err = job.Run(context.Background())
	}
	if err != nil {
		// The harness shows the child's stderr, not its test output.
		fmt.Fprintln(os.Stderr, "job failed:", err)
		t.Fatal(err)
	}
}

// crashCommand returns the harness's command: this binary running the
// child test, with rate for every run until kills runs were killed and
// lastRate (0: no limit) for the last, so that it finishes fast.
func crashCommand(child, ckpt string, kills int, rate, lastRate string, env ...string) func(string) *exec.Cmd {
	runs := 0
	return func(restore string) *exec.Cmd {
		runs++
		r := rate
		if runs > kills {
			r = lastRate
		}
		cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashCkptEnv+"="+ckpt, crashRestoreEnv+"="+restore, crashRateEnv+"="+r)
		cmd.Env = append(cmd.Env, env...)
		return cmd
	}
}

// crashFaults are the fault points the campaigns with an exactly-once
// sink arm: every step of the commit path, and the moment between a
// checkpoint's COMPLETED marker and its commits.
var crashFaults = []string{
	connector.FaultAfterPrepare, "checkpoint.after-marker", connector.FaultBeforeCommit, connector.FaultAfterCommit,
}

const (
	windowCrashEvents = 30_000
	windowCrashFiles  = 4
	windowCrashKills  = 24
	windowCrashRate   = "2000" // rows per second over both source subtasks, until the last run
	// windowCrashLastRate paces the last run too: the periodic watermark
	// (every 200 ms) then keeps up with the input, so the window operator
	// holds a few open windows per key, not every window of the input.
	windowCrashLastRate = "25000"
)

// TestSQLCrashWindowJobProcess is the job process of
// TestSQLCrashWindowExactlyOnce; it runs only when that test starts it.
func TestSQLCrashWindowJobProcess(t *testing.T) {
	if os.Getenv(crashCkptEnv) == "" || os.Getenv(crashOutEnv) == "" {
		t.Skip("run by TestSQLCrashWindowExactlyOnce")
	}
	rate := os.Getenv(crashRateEnv)
	runCrashChild(t, windowJob(os.Getenv(crashInEnv), os.Getenv(crashOutEnv), ", 'source.rows-per-second' = '"+rate+"'"))
}

// TestSQLCrashWindowExactlyOnce kills a SQL job (filesystem source, event
// time tumbling windows, exactly-once filesystem sink) again and again and
// checks that the committed files hold every window exactly once, with the
// counts and sums the input gives.
func TestSQLCrashWindowExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs subprocesses for several seconds")
	}
	in, out, ckpt := t.TempDir(), t.TempDir(), t.TempDir()
	eventFiles(t, in, windowCrashFiles, 2, windowCrashEvents)
	h := &crashtest.Harness{
		CheckpointDir: ckpt,
		Kills:         windowCrashKills,
		MinDelay:      200 * time.Millisecond,
		MaxDelay:      600 * time.Millisecond,
		Seed:          20261129,
		Deadline:      2 * time.Minute,
		Faults:        crashFaults,
		Command: crashCommand("TestSQLCrashWindowJobProcess", ckpt, windowCrashKills, windowCrashRate, windowCrashLastRate,
			crashInEnv+"="+in, crashOutEnv+"="+out),
	}
	start := time.Now()
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res.Check(t, time.Since(start), crashFaults...)
	if res.Kills < windowCrashKills {
		t.Fatalf("job was killed %d times, want %d (it finished too early: make it slower)", res.Kills, windowCrashKills)
	}
	got, want := committedRows(t, out), eventWindows(windowCrashEvents)
	if !slices.Equal(got, want) {
		lost, twice := diffLines(got, want)
		t.Errorf("committed %d lines, want %d: %d missing or wrong (e.g. %q), %d extra or twice (e.g. %q)",
			len(got), len(want), len(lost), first(lost), len(twice), first(twice))
	}
}

// diffLines returns the lines of want missing from got, and the lines of
// got beyond want's (extra ones and second copies); both are sorted.
func diffLines(got, want []string) (missing, extra []string) {
	n := map[string]int{}
	for _, l := range want {
		n[l]++
	}
	for _, l := range got {
		if n[l] > 0 {
			n[l]--
		} else {
			extra = append(extra, l)
		}
	}
	for l, k := range n {
		for range k {
			missing = append(missing, l)
		}
	}
	slices.Sort(missing)
	return missing, extra
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

const (
	upsertCrashRows  = 60_250
	upsertCrashKeys  = 500
	upsertCrashKills = 24
	upsertCrashRate  = "3000" // rows per second over both source subtasks, until the last run
)

// upsertCrashScript counts and sums the rows per key into one Postgres
// table, and counts the keys per count into another: the second one's
// rows are inserted, updated and deleted as the counts grow.
// The tables carry the test process's id (crashTableEnv in the job
// processes), so that runs of the suite side by side on one database do
// not share them.
func upsertCrashScript(rate, suffix string) string {
	return fmt.Sprintf(`
SET 'execution.checkpointing.interval' = '50ms';
CREATE TABLE t (id BIGINT) WITH (
  'connector' = 'datagen', 'rows-per-second' = '%s',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '%d');
CREATE VIEW per_key AS SELECT id %% %d AS k, COUNT(*) AS n, SUM(id) AS s FROM t GROUP BY id %% %d;
CREATE TABLE keys_pg (k BIGINT, n BIGINT, s BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH (
  'connector' = 'postgres', 'url' = '%s', 'table-name' = 'clink_sql_crash_keys_%s');
CREATE TABLE counts_pg (n BIGINT, keys BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH (
  'connector' = 'postgres', 'url' = '%s', 'table-name' = 'clink_sql_crash_counts_%s', 'sink.buffer-flush.max-rows' = '50');
EXECUTE STATEMENT SET BEGIN
INSERT INTO keys_pg SELECT k, n, s FROM per_key;
INSERT INTO counts_pg SELECT n, COUNT(*) FROM per_key GROUP BY n;
END;
`, rate, upsertCrashRows, upsertCrashKeys, upsertCrashKeys, jdbcURL(), suffix, pgURL(), suffix)
}

// upsertCrashExpected is what an uninterrupted run leaves in the two
// tables, computed from the rows.
func upsertCrashExpected() (keys, counts []string) {
	n, s := map[int64]int64{}, map[int64]int64{}
	for id := int64(1); id <= upsertCrashRows; id++ {
		n[id%upsertCrashKeys]++
		s[id%upsertCrashKeys] += id
	}
	perCount := map[int64]int64{}
	for k := range n {
		keys = append(keys, fmt.Sprintf("%d|%d|%d", k, n[k], s[k]))
		perCount[n[k]]++
	}
	for c, k := range perCount {
		counts = append(counts, fmt.Sprintf("%d|%d", c, k))
	}
	slices.Sort(keys)
	slices.Sort(counts)
	return keys, counts
}

// TestSQLCrashUpsertJobProcess is the job process of
// TestSQLCrashUpsertConverges; it runs only when that test starts it.
func TestSQLCrashUpsertJobProcess(t *testing.T) {
	if os.Getenv(crashCkptEnv) == "" || os.Getenv(crashOutEnv) != "postgres" {
		t.Skip("run by TestSQLCrashUpsertConverges")
	}
	runCrashChild(t, upsertCrashScript(os.Getenv(crashRateEnv), os.Getenv(crashTableEnv)))
}

// TestSQLCrashUpsertConverges kills a SQL job of grouped aggregates into
// Postgres upsert tables again and again, and checks that the tables end
// as an uninterrupted run leaves them.
func TestSQLCrashUpsertConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs subprocesses for several seconds")
	}
	suffix := strconv.Itoa(os.Getpid())
	pgTable(t, "clink_sql_crash_keys_"+suffix, "k bigint PRIMARY KEY, n bigint NOT NULL, s bigint NOT NULL")
	pgTable(t, "clink_sql_crash_counts_"+suffix, "n bigint PRIMARY KEY, keys bigint NOT NULL")
	ckpt := t.TempDir()
	h := &crashtest.Harness{
		CheckpointDir: ckpt,
		Kills:         upsertCrashKills,
		MinDelay:      200 * time.Millisecond,
		MaxDelay:      700 * time.Millisecond,
		Seed:          20261130,
		Deadline:      2 * time.Minute,
		Faults:        []string{"checkpoint.after-marker"},
		Command:       crashCommand("TestSQLCrashUpsertJobProcess", ckpt, upsertCrashKills, upsertCrashRate, "0", crashOutEnv+"=postgres", crashTableEnv+"="+suffix),
	}
	start := time.Now()
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res.Check(t, time.Since(start))
	if res.Kills < upsertCrashKills {
		t.Fatalf("job was killed %d times, want %d (it finished too early: make it slower)", res.Kills, upsertCrashKills)
	}
	wantKeys, wantCounts := upsertCrashExpected()
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"SELECT k, n, s FROM clink_sql_crash_keys_" + suffix, wantKeys},
		{"SELECT n, keys FROM clink_sql_crash_counts_" + suffix, wantCounts},
	} {
		got := pgRows(t, tc.query)
		if !slices.Equal(got, tc.want) {
			missing, extra := diffLines(got, tc.want)
			t.Errorf("%s: %d rows, want %d: %d missing or wrong (e.g. %q), %d extra (e.g. %q)",
				tc.query, len(got), len(tc.want), len(missing), first(missing), len(extra), first(extra))
		}
	}
}
