package sql_test

import (
	"bytes"
	"context"
	dbsql "database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink/sql"
)

// retentionRows is the input of the join retention tests: rows 1..n in
// time order, 250 ms apart, with a price that repeats irregularly and a
// 100-byte string, and a watermark 1 s behind; so every window of a
// window aggregation fires while the job runs and no row is late.
func retentionRows(n, perSecond int) string {
	return fmt.Sprintf(`
CREATE TABLE b (id BIGINT, s STRING, p AS (id * 7919) %% 31, ms AS id * 250,
  ts AS CAST(TO_TIMESTAMP_LTZ(id * 250, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'datagen', 'rows-per-second' = '%d', 'fields.id.kind' = 'sequence',
  'fields.id.start' = '1', 'fields.id.end' = '%d', 'fields.s.length' = '100');
`, perSecond, n)
}

// loadRetentionRows puts retentionRows' rows (without their strings) into
// SQLite as b(id, p, ms).
func loadRetentionRows(t *testing.T, db *dbsql.DB, n int) {
	t.Helper()
	if _, err := db.Exec("CREATE TABLE b (id INTEGER, p INTEGER, ms INTEGER)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for id := 1; id <= n; id++ {
		if _, err := tx.Exec("INSERT INTO b VALUES (?, ?, ?)", id, id*7919%31, id*250); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestJoinRetentionDifferentialSQLite runs regular joins whose condition
// bounds a side's time column by the window_end or window_time of a
// window aggregation on the other side (Nexmark q7's shape), so that the
// join drops that side's rows once no window still to come can meet them
// (JoinRetention), and compares the results with SQLite's: dropping them
// changes nothing, at the bounds included (rows fall on window ends).
func TestJoinRetentionDifferentialSQLite(t *testing.T) {
	const n = 1000
	db, err := dbsql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadRetentionRows(t, db, n)
	// Paced, with a watermark after about every row, so that the join's
	// watermark moves past each window's end in steps of a row: a row
	// dropped before its last window arrived would be missed.
	tables := retentionRows(n, 1000) + "CREATE TABLE out (a BIGINT, b BIGINT, c BIGINT) WITH ('connector' = 'print');\n" +
		"SET 'pipeline.auto-watermark-interval' = '1ms';\n"
	win := func(size string) string {
		return fmt.Sprintf("(SELECT MAX(p) AS maxp, window_end AS we, window_time AS wt FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '%s' SECOND)) GROUP BY window_start, window_end, window_time)", size)
	}
	sqliteWin := func(ms int) string {
		return fmt.Sprintf("(SELECT MAX(p) AS maxp, (ms / %[1]d + 1) * %[1]d AS we, (ms / %[1]d + 1) * %[1]d - 1 AS wt FROM b GROUP BY ms / %[1]d)", ms)
	}
	for _, tc := range []struct {
		name, clink, sqlite string
		// retains are the EXPLAIN texts of the retentions the join has.
		retains []string
	}{
		{"q7, BETWEEN window_end",
			"SELECT b.id, b.p, w.maxp FROM b JOIN " + win("10") + " w ON b.p = w.maxp WHERE b.ts BETWEEN w.we - INTERVAL '10' SECOND AND w.we",
			"SELECT b.id, b.p, w.maxp FROM b JOIN " + sqliteWin(10000) + " w ON b.p = w.maxp WHERE b.ms BETWEEN w.we - 10000 AND w.we",
			[]string{"leftRetention=[watermark >= `ts` + 10000 ms]"}},
		{"q7, pebble state (durable timers)",
			"SELECT b.id, b.p, w.maxp FROM b JOIN " + win("10") + " w ON b.p = w.maxp WHERE b.ts BETWEEN w.we - INTERVAL '10' SECOND AND w.we",
			"SELECT b.id, b.p, w.maxp FROM b JOIN " + sqliteWin(10000) + " w ON b.p = w.maxp WHERE b.ms BETWEEN w.we - 10000 AND w.we",
			[]string{"leftRetention=[watermark >= `ts` + 10000 ms]"}},
		{"flipped and strict",
			"SELECT b.id, b.p, w.maxp FROM b JOIN " + win("5") + " w ON b.p = w.maxp AND w.we >= b.ts AND w.we < b.ts + INTERVAL '7' SECOND",
			"SELECT b.id, b.p, w.maxp FROM b JOIN " + sqliteWin(5000) + " w ON b.p = w.maxp AND w.we >= b.ms AND w.we < b.ms + 7000",
			[]string{"leftRetention=[watermark >= `ts` + 7000 ms]"}},
		{"LEFT JOIN",
			"SELECT b.id, b.p, w.maxp FROM b LEFT JOIN " + win("10") + " w ON b.p = w.maxp AND b.ts BETWEEN w.we - INTERVAL '10' SECOND AND w.we",
			"SELECT b.id, b.p, w.maxp FROM b LEFT JOIN " + sqliteWin(10000) + " w ON b.p = w.maxp AND b.ms BETWEEN w.we - 10000 AND w.we",
			[]string{"leftRetention=[watermark >= `ts` + 10000 ms]"}},
		{"two window aggregations, both sides",
			"SELECT x.maxp, CAST(UNIX_TIMESTAMP(CAST(x.we AS STRING)) AS BIGINT), CAST(UNIX_TIMESTAMP(CAST(y.we AS STRING)) AS BIGINT) FROM " + win("10") + " x FULL JOIN " + win("4") + " y ON x.maxp = y.maxp AND y.we BETWEEN x.we - INTERVAL '10' SECOND AND x.we",
			"SELECT x.maxp, x.we / 1000, y.we / 1000 FROM " + sqliteWin(10000) + " x FULL JOIN " + sqliteWin(4000) + " y ON x.maxp = y.maxp AND y.we BETWEEN x.we - 10000 AND x.we",
			[]string{"leftRetention=[watermark >= `we`]", "rightRetention=[watermark >= `we` + 10000 ms]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := tables + "INSERT INTO out " + tc.clink + ";"
			if strings.Contains(tc.name, "pebble") {
				script = "SET 'state.backend.type' = 'pebble';\n" + script
			}
			plan := planOf(t, script)
			for _, r := range tc.retains {
				if !strings.Contains(plan, r) {
					t.Fatalf("no %s in the plan:\n%s", r, plan)
				}
			}
			got := materialize(t, run(t, script, 2))
			want := queryRows(t, db, tc.sqlite)
			if len(want) == 0 {
				t.Fatal("the query selects nothing: the test proves nothing")
			}
			if !slices.Equal(got, want) {
				t.Fatalf("clink and SQLite differ (%d and %d rows)\nclink:  %v\nsqlite: %v", len(got), len(want), got, want)
			}
		})
	}
}

// checkpointBytes collects the bytes of every completed checkpoint from
// the job's "checkpoint completed" log lines.
type checkpointBytes struct {
	mu    sync.Mutex
	sizes []int64
}

func (c *checkpointBytes) Enabled(context.Context, slog.Level) bool { return true }
func (c *checkpointBytes) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *checkpointBytes) WithGroup(string) slog.Handler            { return c }
func (c *checkpointBytes) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "checkpoint completed" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "bytes" {
			c.mu.Lock()
			c.sizes = append(c.sizes, a.Value.Int64())
			c.mu.Unlock()
		}
		return true
	})
	return nil
}

// boundedJoinScript is q7's shape over n rows of retentionRows at
// 10,000 rows a second, to a blackhole, with watermarks every 10 ms and
// full checkpoints every 20 ms (see TestJoinRetentionBoundsState).
func boundedJoinScript(n int) string {
	return retentionRows(n, 10000) + `
CREATE TABLE out (a BIGINT, b BIGINT, s STRING) WITH ('connector' = 'blackhole');
SET 'state.backend.incremental' = 'false';
SET 'execution.checkpointing.interval' = '20ms';
SET 'pipeline.auto-watermark-interval' = '10ms';
INSERT INTO out SELECT b.id, b.p, b.s FROM b JOIN (
  SELECT MAX(p) AS maxp, window_end AS we FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end) w
ON b.p = w.maxp WHERE b.ts BETWEEN w.we - INTERVAL '10' SECOND AND w.we;`
}

// checkBoundedJoin fails the test unless sizes holds several checkpoints
// and none larger than 200,000 bytes (100 rows of ~120 bytes and the
// windows' rows, with room to spare; keeping every row takes megabytes).
func checkBoundedJoin(t *testing.T, sizes *checkpointBytes) {
	t.Helper()
	sizes.mu.Lock()
	defer sizes.mu.Unlock()
	if len(sizes.sizes) < 3 {
		t.Fatalf("only %d checkpoints completed: the test needs the job to run through several", len(sizes.sizes))
	}
	largest := slices.Max(sizes.sizes)
	if largest > 200_000 {
		t.Fatalf("the largest of %d checkpoints holds %d bytes: the join kept rows no window can meet (sizes %v)", len(sizes.sizes), largest, sizes.sizes)
	}
	t.Logf("%d checkpoints, the largest %d bytes", len(sizes.sizes), largest)
}

// TestJoinRetentionBoundsState runs q7's shape over 20,000 rows of 100
// bytes and more (40 rows per 10 s window), paced over two seconds, with
// watermarks every 10 ms and full checkpoints every 20 ms: the join holds
// the rows that arrived since the watermark passed them by 10 s, those of
// the last watermark interval at most (100 rows), so no checkpoint comes
// near the 2.4 MB that keeping every row takes.
func TestJoinRetentionBoundsState(t *testing.T) {
	sizes := &checkpointBytes{}
	var out bytes.Buffer
	err := sql.Run(context.Background(), boundedJoinScript(20000), sql.Options{Parallelism: 1, CheckpointDir: t.TempDir(),
		Stdout: &out, Stderr: &out, Logger: slog.New(sizes)})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	checkBoundedJoin(t, sizes)
}

// TestJoinRetentionBoundsStateAfterRestore stops TestJoinRetentionBoundsState's
// job midway and restores it: the join's timers are not checkpointed but
// set again from the rows it restores, so the rows it held at the
// checkpoint go as they expire and its checkpoints stay as small after the
// restore as before (without timers for the restored keys, every later
// row of those keys would be kept).
func TestJoinRetentionBoundsStateAfterRestore(t *testing.T) {
	script := boundedJoinScript(20000)
	dir := t.TempDir()
	var first bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	if err := sql.Run(ctx, script, sql.Options{Parallelism: 1, CheckpointDir: dir, Stdout: &first, Stderr: &first}); err != nil {
		t.Fatalf("first run: %v\n%s", err, first.String())
	}
	sizes := &checkpointBytes{}
	var out bytes.Buffer
	err := sql.Run(context.Background(), script, sql.Options{Parallelism: 1, CheckpointDir: dir, Restore: "latest",
		Stdout: &out, Stderr: &out, Logger: slog.New(sizes)})
	if err != nil {
		t.Fatalf("restored run: %v\n%s", err, out.String())
	}
	checkBoundedJoin(t, sizes)
}

// TestJoinRetentionRestore stops q7's shape midway, after checkpoints
// that hold the join's retention timers and the rows still kept, and
// restores it: the exactly-once filesystem sink ends with every joined
// row once, so the restored join dropped no row a window still met and
// kept meeting the rows it held.
func TestJoinRetentionRestore(t *testing.T) {
	const n = 6000
	out := t.TempDir()
	script := retentionRows(n, 4000) + fmt.Sprintf(`
CREATE TABLE f (a BIGINT, b BIGINT) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv');
SET 'execution.checkpointing.interval' = '50ms';
SET 'pipeline.auto-watermark-interval' = '5ms';
INSERT INTO f SELECT b.id, w.maxp FROM b JOIN (
  SELECT MAX(p) AS maxp, window_end AS we FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end) w
ON b.p = w.maxp WHERE b.ts BETWEEN w.we - INTERVAL '10' SECOND AND w.we;`, out)
	// The windows' highest prices, by window end (ms), then the rows
	// between a window's end - 10 s and its end with that price.
	price := func(id int64) int64 { return id * 7919 % 31 }
	highest := map[int64]int64{}
	for id := int64(1); id <= n; id++ {
		e := id*250/10000*10000 + 10000
		highest[e] = max(highest[e], price(id))
	}
	var want []string
	for id := int64(1); id <= n; id++ {
		ms := id * 250
		for e := ms/10000*10000 + 10000; e >= ms && e-10000 <= ms; e -= 10000 {
			if highest[e] == price(id) {
				want = append(want, fmt.Sprintf("%d,%d", id, price(id)))
			}
		}
	}
	slices.Sort(want)
	checkRestoreMidway(t, script, out, want, 700*time.Millisecond)
}
