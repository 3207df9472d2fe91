package sql_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/connectors/datagen"
	"github.com/clinkstream/clink/sql"
	"github.com/clinkstream/clink/sql/types"
)

// seconds is a table of ids 1..30 at second id of the epoch, in order.
const seconds = `
CREATE TABLE t (id BIGINT, k AS id % 2, ts AS CAST(TO_TIMESTAMP_LTZ(id * 1000, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '30');
CREATE TABLE p (ws TIMESTAMP(3), we TIMESTAMP(3), k BIGINT, n BIGINT, s BIGINT) WITH ('connector' = 'print');
`

// lines returns the printed rows sorted, and fails on any row that is not
// an insert: window aggregation is append-only.
func lines(t *testing.T, out string) []string {
	t.Helper()
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if _, after, ok := strings.Cut(l, "> "); ok {
			l = after
		}
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, "+I") {
			t.Fatalf("window aggregation printed %q; want +I rows only\n%s", l, out)
		}
		rows = append(rows, l)
	}
	slices.Sort(rows)
	return rows
}

func TestWindowTumble(t *testing.T) {
	script := seconds + `INSERT INTO p
SELECT window_start, window_end, k, COUNT(*), SUM(id)
FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, k;`
	want := []string{
		"+I[1970-01-01 00:00:00.000, 1970-01-01 00:00:10.000, 0, 4, 20]",
		"+I[1970-01-01 00:00:00.000, 1970-01-01 00:00:10.000, 1, 5, 25]",
		"+I[1970-01-01 00:00:10.000, 1970-01-01 00:00:20.000, 0, 5, 70]",
		"+I[1970-01-01 00:00:10.000, 1970-01-01 00:00:20.000, 1, 5, 75]",
		"+I[1970-01-01 00:00:20.000, 1970-01-01 00:00:30.000, 0, 5, 120]",
		"+I[1970-01-01 00:00:20.000, 1970-01-01 00:00:30.000, 1, 5, 125]",
		"+I[1970-01-01 00:00:30.000, 1970-01-01 00:00:40.000, 0, 1, 30]",
	}
	for _, par := range []int{1, 3} {
		if got := lines(t, run(t, script, par)); !slices.Equal(got, want) {
			t.Errorf("parallelism %d:\n%s\nwant\n%s", par, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestWindowNullRowtime: a row whose rowtime is NULL belongs to no
// window, per-window (TUMBLE) and sliced (HOP) alike, at any parallelism.
func TestWindowNullRowtime(t *testing.T) {
	table := `
CREATE TABLE t (id BIGINT,
  ts AS CASE WHEN id % 3 = 0 THEN CAST(NULL AS TIMESTAMP(3)) ELSE CAST(TO_TIMESTAMP_LTZ(id * 1000, 3) AS TIMESTAMP(3)) END,
  WATERMARK FOR ts AS ts) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '20');
CREATE TABLE p (ws TIMESTAMP(3), we TIMESTAMP(3), n BIGINT, s BIGINT) WITH ('connector' = 'print');
`
	for _, tc := range []struct {
		tvf  string
		want []string
	}{
		{"TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND)", []string{
			"+I[1970-01-01 00:00:00.000, 1970-01-01 00:00:10.000, 6, 27]",
			"+I[1970-01-01 00:00:10.000, 1970-01-01 00:00:20.000, 7, 100]",
			"+I[1970-01-01 00:00:20.000, 1970-01-01 00:00:30.000, 1, 20]",
		}},
		{"HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '20' SECOND)", []string{
			"+I[1969-12-31 23:59:50.000, 1970-01-01 00:00:10.000, 6, 27]",
			"+I[1970-01-01 00:00:00.000, 1970-01-01 00:00:20.000, 13, 127]",
			"+I[1970-01-01 00:00:10.000, 1970-01-01 00:00:30.000, 8, 120]",
			"+I[1970-01-01 00:00:20.000, 1970-01-01 00:00:40.000, 1, 20]",
		}},
	} {
		script := table + "INSERT INTO p SELECT window_start, window_end, COUNT(*), SUM(id) FROM TABLE(" + tc.tvf + ") GROUP BY window_start, window_end;"
		for _, par := range []int{1, 3} {
			if got := lines(t, run(t, script, par)); !slices.Equal(got, tc.want) {
				t.Errorf("%s, parallelism %d:\n%s\nwant\n%s", tc.tvf, par, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		}
	}
}

// TestWindowRowtimeAfterPicks runs window aggregations whose input Calc
// picks columns of the watermark assigner's rows, which the operators run
// in the Calc below the assigner (foldThroughWatermark in sql/exec): the
// assigner must read the rowtime where the picks put it. Rows of ids 3000
// and up with ids divisible by 50 come with a rowtime of 1 s, long after
// the watermark passed it: they are late and dropped. A watermark taken
// from another column would fail the job (a column the picks dropped),
// make every row late (big) or keep the late ones (id).
func TestWindowRowtimeAfterPicks(t *testing.T) {
	const n, lateFrom = 4000, 3000
	// Two tables: a source read by two queries is not folded.
	var script string
	for _, name := range []string{"t1", "t2"} {
		script += fmt.Sprintf(`
CREATE TABLE %s (id BIGINT, big AS id + 1000000000000,
  ts AS TO_TIMESTAMP_LTZ(CASE WHEN id >= %d AND id %% 50 = 0 THEN 1000 ELSE id * 100 END, 3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (
  'connector' = 'datagen', 'rows-per-second' = '2000',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '%d');`, name, lateFrom, n)
	}
	script += `
CREATE TABLE p1 (ws TIMESTAMP(3), c BIGINT, s BIGINT) WITH ('connector' = 'print', 'print-identifier' = 'ids');
CREATE TABLE p2 (ws TIMESTAMP(3), c BIGINT, b BIGINT) WITH ('connector' = 'print', 'print-identifier' = 'big');
INSERT INTO p1 SELECT window_start, COUNT(*), SUM(id) FROM TABLE(TUMBLE(TABLE t1, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end;
INSERT INTO p2 SELECT window_start, COUNT(*), MAX(big) FROM TABLE(TUMBLE(TABLE t2, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end;
`
	type agg struct{ c, s, b int64 }
	wins := map[int64]agg{}
	for id := int64(1); id <= n; id++ {
		if id >= lateFrom && id%50 == 0 {
			continue // late
		}
		ws := id * 100 / 10000 * 10000
		a := wins[ws]
		wins[ws] = agg{a.c + 1, a.s + id, max(a.b, id+1_000_000_000_000)}
	}
	var want []string
	for ws, a := range wins {
		stamp := time.UnixMilli(ws).UTC().Format("2006-01-02 15:04:05.000")
		want = append(want, fmt.Sprintf("ids> +I[%s, %d, %d]", stamp, a.c, a.s), fmt.Sprintf("big> +I[%s, %d, %d]", stamp, a.c, a.b))
	}
	slices.Sort(want)
	got := strings.Split(strings.TrimSpace(run(t, script, 1)), "\n")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWindowHopCumulateNamedArgs(t *testing.T) {
	hop := run(t, seconds+`INSERT INTO p
SELECT window_start, window_end, CAST(NULL AS BIGINT), COUNT(*), MAX(id)
FROM TABLE(HOP(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), SLIDE => INTERVAL '10' SECOND, SIZE => INTERVAL '20' SECOND))
WHERE id > 5
GROUP BY window_start, window_end HAVING COUNT(*) > 1;`, 2)
	want := []string{
		"+I[1969-12-31 23:59:50.000, 1970-01-01 00:00:10.000, NULL, 4, 9]",
		"+I[1970-01-01 00:00:00.000, 1970-01-01 00:00:20.000, NULL, 14, 19]",
		"+I[1970-01-01 00:00:10.000, 1970-01-01 00:00:30.000, NULL, 20, 29]",
		"+I[1970-01-01 00:00:20.000, 1970-01-01 00:00:40.000, NULL, 11, 30]",
	}
	if got := lines(t, hop); !slices.Equal(got, want) {
		t.Errorf("HOP:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cum := run(t, seconds+`INSERT INTO p
SELECT window_start, window_end, k, COUNT(*), SUM(id)
FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
WHERE id <= 14 AND k = 0
GROUP BY k, window_start, window_end;`, 2)
	want = []string{
		"+I[1970-01-01 00:00:00.000, 1970-01-01 00:00:05.000, 0, 2, 6]",
		"+I[1970-01-01 00:00:00.000, 1970-01-01 00:00:10.000, 0, 4, 20]",
		"+I[1970-01-01 00:00:00.000, 1970-01-01 00:00:15.000, 0, 7, 56]",
	}
	if got := lines(t, cum); !slices.Equal(got, want) {
		t.Errorf("CUMULATE:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWindowTableFunctionRows selects from a window TVF without
// aggregating: a row per window it falls in.
func TestWindowTableFunctionRows(t *testing.T) {
	out := run(t, seconds+`INSERT INTO p
SELECT window_start, window_end, id, 0, 0
FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)) WHERE id = 7;`, 1)
	want := []string{
		"+I[1970-01-01 00:00:00.000, 1970-01-01 00:00:10.000, 7, 0, 0]",
		"+I[1970-01-01 00:00:05.000, 1970-01-01 00:00:15.000, 7, 0, 0]",
	}
	if got := lines(t, out); !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWindowDifferentialSQLite aggregates random rows in TUMBLE, HOP and
// CUMULATE windows through clink and through SQLite, which computes the
// windows as (ts_ms / size) * size.
func TestWindowDifferentialSQLite(t *testing.T) {
	const n = 3000
	opts := map[string]string{"seed": "11", "fields.k.min": "0", "fields.k.max": "4", "fields.x.min": "-100", "fields.x.max": "100",
		"fields.x.null-rate": "0.1", "fields.ms.min": "0", "fields.ms.max": "600000"}
	var with []string
	for _, k := range []string{"seed", "fields.k.min", "fields.k.max", "fields.x.min", "fields.x.max", "fields.x.null-rate", "fields.ms.min", "fields.ms.max"} {
		with = append(with, fmt.Sprintf("'%s' = '%s'", k, opts[k]))
	}
	// A watermark a full range behind the rows keeps every row on time.
	table := fmt.Sprintf(`
CREATE TABLE r (k INT, x BIGINT, ms BIGINT, ts AS CAST(TO_TIMESTAMP_LTZ(ms, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts - INTERVAL '700' SECOND) WITH ('connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d', %s);
CREATE TABLE p (ws BIGINT, we BIGINT, k INT, n BIGINT, c BIGINT, s BIGINT, lo BIGINT, hi BIGINT) WITH ('connector' = 'print');
`, n, strings.Join(with, ", "))
	gen, err := datagen.New([]datagen.Field{{Name: "k", Type: types.IntType}, {Name: "x", Type: types.BigIntType}, {Name: "ms", Type: types.BigIntType}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	db := loadSQLite(t, gen, n, "CREATE TABLE r (k INTEGER, x INTEGER, ms INTEGER)", func(r types.Row) []any {
		return []any{r.Values[0].Int64(), nullableInt(r.Values[1]), r.Values[2].Int64()}
	})
	const aggs = "COUNT(*), COUNT(x), SUM(x), MIN(x), MAX(x)"
	const epochMs = "CAST(UNIX_TIMESTAMP(CAST(%s AS STRING)) AS BIGINT) * 1000"
	for _, tc := range []struct{ name, clink, sqlite string }{
		{"TUMBLE", "TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '7' SECOND))",
			"SELECT (ms / 7000) * 7000 AS ws, (ms / 7000) * 7000 + 7000, k, " + aggs + " FROM r GROUP BY ws, k"},
		{"HOP", "TABLE(HOP(TABLE r, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND))",
			"SELECT (ms / 10000 - o) * 10000 AS ws, (ms / 10000 - o) * 10000 + 30000, k, " + aggs +
				" FROM r, (SELECT 0 AS o UNION ALL SELECT 1 UNION ALL SELECT 2) GROUP BY ws, k"},
		{"CUMULATE", "TABLE(CUMULATE(TABLE r, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND))",
			"SELECT (ms / 30000) * 30000 AS ws, (ms / 10000 + 1 + o) * 10000 AS we, k, " + aggs +
				" FROM r, (SELECT 0 AS o UNION ALL SELECT 1 UNION ALL SELECT 2) WHERE (ms / 10000 + 1 + o) * 10000 <= (ms / 30000) * 30000 + 30000 GROUP BY ws, we, k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := fmt.Sprintf("INSERT INTO p SELECT %s, %s, k, %s FROM %s GROUP BY window_start, window_end, k;",
				fmt.Sprintf(epochMs, "window_start"), fmt.Sprintf(epochMs, "window_end"), aggs, tc.clink)
			got := lines(t, run(t, table+q, 2))
			for i, l := range got {
				got[i] = strings.TrimPrefix(l, "+I")
			}
			want := queryRows(t, db, tc.sqlite)
			if len(got) == 0 || !slices.Equal(got, want) {
				t.Fatalf("clink and SQLite differ (%d and %d rows)\nclink:  %v\nsqlite: %v", len(got), len(want), got, want)
			}
		})
	}
}

// TestWindowCascadeDifferentialSQLite aggregates the result of a HOP
// aggregation again by its window_start and window_end, and joins the two
// as Nexmark q5 does, through clink and SQLite. Grouped so, the second
// aggregation is a window aggregation of the same windows (insert-only),
// and the join a window join.
func TestWindowCascadeDifferentialSQLite(t *testing.T) {
	const n = 3000
	opts := map[string]string{"seed": "23", "fields.k.min": "0", "fields.k.max": "9", "fields.x.min": "-100", "fields.x.max": "100",
		"fields.ms.min": "0", "fields.ms.max": "300000"}
	var with []string
	for _, k := range []string{"seed", "fields.k.min", "fields.k.max", "fields.x.min", "fields.x.max", "fields.ms.min", "fields.ms.max"} {
		with = append(with, fmt.Sprintf("'%s' = '%s'", k, opts[k]))
	}
	table := fmt.Sprintf(`
CREATE TABLE r (k INT, x BIGINT, ms BIGINT, ts AS CAST(TO_TIMESTAMP_LTZ(ms, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts - INTERVAL '400' SECOND) WITH ('connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d', %s);
CREATE TABLE p (ws BIGINT, we BIGINT, a BIGINT, b BIGINT, c BIGINT) WITH ('connector' = 'print');
CREATE VIEW per_key AS SELECT k, COUNT(*) AS num, SUM(x) AS total, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE r, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND))
  GROUP BY k, window_start, window_end;
`, n, strings.Join(with, ", "))
	gen, err := datagen.New([]datagen.Field{{Name: "k", Type: types.IntType}, {Name: "x", Type: types.BigIntType}, {Name: "ms", Type: types.BigIntType}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	db := loadSQLite(t, gen, n, "CREATE TABLE r (k INTEGER, x INTEGER, ms INTEGER)", func(r types.Row) []any {
		return []any{r.Values[0].Int64(), r.Values[1].Int64(), r.Values[2].Int64()}
	})
	const perKey = "(SELECT k, COUNT(*) AS num, SUM(x) AS total, (ms / 10000 - o) * 10000 AS starttime, (ms / 10000 - o) * 10000 + 30000 AS endtime" +
		" FROM r, (SELECT 0 AS o UNION ALL SELECT 1 UNION ALL SELECT 2) GROUP BY k, starttime)"
	const epochMs = "CAST(UNIX_TIMESTAMP(CAST(%s AS STRING)) AS BIGINT) * 1000"
	ms := func(col string) string { return fmt.Sprintf(epochMs, col) }
	// Grouped by window_start alone, the result is no window's: a
	// regular, updating aggregation.
	if plan := explain(t, table+"INSERT INTO p SELECT "+ms("starttime")+", 0, COUNT(*), MAX(num), SUM(total) FROM per_key GROUP BY starttime;"); !strings.Contains(plan, "GroupAggregate(groupBy=[starttime]") {
		t.Errorf("want a GroupAggregate by starttime:\n%s", plan)
	}
	for _, tc := range []struct{ name, clink, sqlite, plan string }{
		{"aggregate",
			"SELECT " + ms("starttime") + ", " + ms("endtime") + ", COUNT(*), MAX(num), SUM(total) FROM per_key GROUP BY starttime, endtime",
			"SELECT starttime, endtime, COUNT(*), MAX(num), SUM(total) FROM " + perKey + " GROUP BY starttime, endtime",
			"WindowAggregate(window=[HOP(win_start=[starttime], win_end=[endtime]"},
		{"join",
			"SELECT " + ms("A.starttime") + ", " + ms("A.endtime") + ", A.k, A.num, M.maxn FROM per_key AS A JOIN " +
				"(SELECT MAX(num) AS maxn, starttime, endtime FROM per_key GROUP BY starttime, endtime) AS M " +
				"ON A.starttime = M.starttime AND A.endtime = M.endtime AND A.num >= M.maxn",
			"SELECT A.starttime, A.endtime, A.k, A.num, M.maxn FROM " + perKey + " AS A JOIN " +
				"(SELECT MAX(num) AS maxn, starttime, endtime FROM " + perKey + " GROUP BY starttime, endtime) AS M " +
				"ON A.starttime = M.starttime AND A.endtime = M.endtime AND A.num >= M.maxn",
			"WindowJoin("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := table + "INSERT INTO p " + tc.clink + ";"
			if plan := explain(t, script); !strings.Contains(plan, tc.plan) {
				t.Errorf("want %s in the plan:\n%s", tc.plan, plan)
			}
			got := lines(t, run(t, script, 2))
			for i, l := range got {
				got[i] = strings.TrimPrefix(l, "+I")
			}
			want := queryRows(t, db, tc.sqlite)
			if len(got) == 0 || !slices.Equal(got, want) {
				t.Fatalf("clink and SQLite differ (%d and %d rows)\nclink:  %v\nsqlite: %v", len(got), len(want), got, want)
			}
		})
	}
}

// TestWindowRestore stops a windowed job mid-run and restores it from its
// latest checkpoint: together the two runs print every window once with
// its full result (print is at-least-once: a window that fired after the
// checkpoint prints again, with the same values), and never a partial one.
func TestWindowRestore(t *testing.T) {
	script := `
CREATE TABLE t (id BIGINT, k AS id % 2, ts AS CAST(TO_TIMESTAMP_LTZ(id * 1000, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts) WITH (
  'connector' = 'datagen', 'rows-per-second' = '200',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '400');
CREATE TABLE p (we TIMESTAMP(3), k BIGINT, n BIGINT, s BIGINT) WITH ('connector' = 'print');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO p
SELECT window_end, k, COUNT(*), SUM(id)
FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, k;`
	want := map[string]bool{}
	for start := int64(0); start <= 400; start += 10 {
		for k := int64(0); k < 2; k++ {
			var n, s int64
			for id := max(start, 1); id < start+10 && id <= 400; id++ {
				if id%2 == k {
					n, s = n+1, s+id
				}
			}
			if n > 0 {
				end := types.Timestamp((start+10)*1000, 0, 3)
				want[fmt.Sprintf("+I[%s, %d, %d, %d]", end, k, n, s)] = true
			}
		}
	}
	dir := t.TempDir()
	var first bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	if err := sql.Run(ctx, script, sql.Options{Parallelism: 2, CheckpointDir: dir, Stdout: &first, Stderr: &first}); err != nil {
		t.Fatalf("first run: %v", err)
	}
	second := run2(t, script, dir)
	got := map[string]bool{}
	for _, l := range append(lines(t, first.String()), lines(t, second)...) {
		if !want[l] {
			t.Errorf("printed %s, which is no full window", l)
		}
		got[l] = true
	}
	if len(got) != len(want) {
		t.Errorf("printed %d distinct windows, want %d", len(got), len(want))
	}
	t.Logf("first run printed %d windows, the restored one %d, of %d", len(lines(t, first.String())), len(lines(t, second)), len(want))
	if n := len(lines(t, second)); n == len(want) {
		t.Errorf("the restored run printed every window: it did not restore")
	}
}

func run2(t *testing.T, script, dir string) string {
	t.Helper()
	var out bytes.Buffer
	if err := sql.Run(context.Background(), script, sql.Options{Parallelism: 2, CheckpointDir: dir, Restore: "latest", Stdout: &out, Stderr: &out}); err != nil {
		t.Fatalf("restored run: %v\n%s", err, out.String())
	}
	return out.String()
}

// TestWindowExample runs examples/sql/window_tvf.sql: its plan, and one
// row per auction and tumbling window and per sliding window.
func TestWindowExample(t *testing.T) {
	b, err := os.ReadFile("../examples/sql/window_tvf.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := run(t, string(b), 2)
	if !strings.Contains(out, "WindowAggregate(window=[TUMBLE(time_col=[ts], size=[10 s])], groupBy=[auction]") {
		t.Errorf("no WindowAggregate in the plan:\n%s", out)
	}
	// ids 1..60 at seconds 1..60: windows [0,10) .. [60,70), three
	// auctions each but [60,70) (id 60 only); HOP windows end at 10..80.
	if n, want := strings.Count(out, "\ntumble"), 6*3+1; n != want {
		t.Errorf("printed %d tumbling rows, want %d:\n%s", n, want, out)
	}
	if n, want := strings.Count(out, "\nhop"), 8; n != want {
		t.Errorf("printed %d sliding rows, want %d:\n%s", n, want, out)
	}
}

// TestSessionDifferentialSQLite aggregates random rows in SESSION windows
// through clink (the window TVF, positional and by key, named and over all
// rows, the TVF on its own, and the legacy GROUP BY k, SESSION(...))
// and through SQLite (rows at whole seconds, bounds compared in seconds),
// which finds the sessions with window functions: a
// row starts a new session of its key when it is more than the gap after
// the key's previous row (rows exactly the gap apart share a session, as
// in Flink), and a session spans [first row, last row + gap). The rows
// arrive out of order, so clink merges sessions that a late row bridges.
func TestSessionDifferentialSQLite(t *testing.T) {
	const n = 3000
	opts := map[string]string{"seed": "5", "fields.k.min": "0", "fields.k.max": "4", "fields.x.min": "-100", "fields.x.max": "100",
		"fields.x.null-rate": "0.1", "fields.ms.min": "0", "fields.ms.max": "6000"}
	var with []string
	for _, k := range []string{"seed", "fields.k.min", "fields.k.max", "fields.x.min", "fields.x.max", "fields.x.null-rate", "fields.ms.min", "fields.ms.max"} {
		with = append(with, fmt.Sprintf("'%s' = '%s'", k, opts[k]))
	}
	table := fmt.Sprintf(`
CREATE TABLE r (k INT, x BIGINT, ms BIGINT, ts AS CAST(TO_TIMESTAMP_LTZ(ms * 1000, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts - INTERVAL '7000' SECOND) WITH ('connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d', %s);
CREATE TABLE p (ws BIGINT, we BIGINT, k INT, n BIGINT, c BIGINT, s BIGINT, lo BIGINT, hi BIGINT, d BIGINT, f BIGINT) WITH ('connector' = 'print');
CREATE TABLE rows_out (ws BIGINT, we BIGINT, k INT, ms BIGINT, x BIGINT) WITH ('connector' = 'print');
`, n, strings.Join(with, ", "))
	gen, err := datagen.New([]datagen.Field{{Name: "k", Type: types.IntType}, {Name: "x", Type: types.BigIntType}, {Name: "ms", Type: types.BigIntType}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	db := loadSQLite(t, gen, n, "CREATE TABLE r (k INTEGER, x INTEGER, ms INTEGER)", func(r types.Row) []any {
		return []any{r.Values[0].Int64(), nullableInt(r.Values[1]), r.Values[2].Int64()}
	})
	const gap = 10
	// sessions(p) finds the sessions of the rows of each value of p.
	sessions := func(p string) string {
		return fmt.Sprintf(`WITH a AS (
  SELECT k, x, ms, CASE WHEN ms - LAG(ms) OVER (PARTITION BY %[2]s ORDER BY ms) <= %[1]d THEN 0 ELSE 1 END AS new FROM r),
b AS (SELECT k, x, ms, SUM(new) OVER (PARTITION BY %[2]s ORDER BY ms, new DESC ROWS UNBOUNDED PRECEDING) AS sid FROM a),
s AS (SELECT k, x, ms, MIN(ms) OVER (PARTITION BY %[2]s, sid) AS ws, MAX(ms) OVER (PARTITION BY %[2]s, sid) + %[1]d AS we FROM b)
`, gap, p)
	}
	// Every kind of accumulator merges: counts, sums, extremes, distinct
	// sets and filtered ones.
	const aggs = "COUNT(*), COUNT(x), SUM(x), MIN(x), MAX(x), COUNT(DISTINCT x), SUM(x) FILTER (WHERE x > 0)"
	const epoch = "CAST(UNIX_TIMESTAMP(CAST(%s AS STRING)) AS BIGINT)"
	ws, we := fmt.Sprintf(epoch, "window_start"), fmt.Sprintf(epoch, "window_end")
	wantAgg := queryRows(t, db, sessions("k")+"SELECT ws, we, k, "+aggs+" FROM s GROUP BY k, ws, we")
	wantRows := queryRows(t, db, sessions("k")+"SELECT ws, we, k, ms, x FROM s")
	wantAll := queryRows(t, db, sessions("0")+"SELECT ws, we, NULL, "+aggs+" FROM s GROUP BY ws, we")
	if len(wantAgg) < 100 || len(wantAgg) > n/2 || len(wantAll) < 10 {
		t.Fatalf("SQLite found %d sessions by key and %d of all rows: the data does not test merging", len(wantAgg), len(wantAll))
	}
	t.Logf("%d rows in %d sessions by key, %d of all rows", n, len(wantAgg), len(wantAll))
	for _, tc := range []struct{ name, query string }{
		{"TVF", fmt.Sprintf("INSERT INTO p SELECT %s, %s, k, %s FROM TABLE(SESSION(TABLE r PARTITION BY k, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k;", ws, we, aggs)},
		{"TVF named, no PARTITION BY", fmt.Sprintf("INSERT INTO p SELECT %s, %s, CAST(NULL AS INT), %s FROM TABLE(SESSION(DATA => TABLE r, TIMECOL => DESCRIPTOR(ts), GAP => INTERVAL '10' SECOND)) GROUP BY window_start, window_end;", ws, we, aggs)},
		{"legacy", "INSERT INTO p SELECT " + strings.ReplaceAll(ws, "window_start", "SESSION_START(ts, INTERVAL '10' SECOND)") +
			", " + strings.ReplaceAll(we, "window_end", "SESSION_END(ts, INTERVAL '10' SECOND)") + ", k, " + aggs + " FROM r GROUP BY k, SESSION(ts, INTERVAL '10' SECOND);"},
		{"rows", fmt.Sprintf("INSERT INTO rows_out SELECT %s, %s, k, ms, x FROM TABLE(SESSION(TABLE r PARTITION BY k, DESCRIPTOR(ts), INTERVAL '10' SECOND));", ws, we)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lines(t, run(t, table+tc.query, 2))
			for i, l := range got {
				got[i] = strings.TrimPrefix(l, "+I")
			}
			want := wantAgg
			switch tc.name {
			case "rows":
				want = wantRows
			case "TVF named, no PARTITION BY":
				want = wantAll
			}
			if !slices.Equal(got, want) {
				t.Fatalf("clink and SQLite differ (%d and %d rows)\nclink:  %v\nsqlite: %v", len(got), len(want), head(got), head(want))
			}
		})
	}
}

func head(s []string) []string {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

// TestSessionRestore stops jobs with SESSION windows mid-run and restores
// them from their latest checkpoint: the open sessions (accumulators, or
// the rows of the TVF on its own) come back from the checkpoint, so
// together the two runs print every session's result, or every row with
// its session's bounds, with nothing partial (a session that closed after
// the checkpoint prints again, with the same values: print is
// at-least-once).
func TestSessionRestore(t *testing.T) {
	// Rows of one key are 2 s apart, and 7 s apart where id crosses a
	// multiple of 10: with a 3 s gap, a session of key k holds the ids of
	// parity k in one decade.
	const table = `
CREATE TABLE t (id BIGINT, k AS id % 2, ts AS CAST(TO_TIMESTAMP_LTZ(id * 1000 + id / 10 * 5000, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts) WITH (
  'connector' = 'datagen', 'rows-per-second' = '200',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '400');
SET 'execution.checkpointing.interval' = '50ms';
`
	// The sessions, found from the rows' times alone.
	type session struct{ start, end, k, n, sum int64 }
	var sessions []session
	of := map[int64]int{} // id -> its session
	for k := int64(0); k < 2; k++ {
		var cur *session
		var last int64
		for id := int64(1); id <= 400; id++ {
			if id%2 != k {
				continue
			}
			ts := id*1000 + id/10*5000
			if cur == nil || ts-last > 3000 {
				sessions = append(sessions, session{start: ts, k: k})
				cur = &sessions[len(sessions)-1]
			}
			last, cur.end, cur.n, cur.sum = ts, ts+3000, cur.n+1, cur.sum+id
			of[id] = len(sessions) - 1
		}
	}
	ts := func(ms int64) types.Value { return types.Timestamp(ms, 0, 3) }
	aggWant, rowWant := map[string]bool{}, map[string]bool{}
	for _, s := range sessions {
		aggWant[fmt.Sprintf("+I[%s, %s, %d, %d, %d]", ts(s.start), ts(s.end), s.k, s.n, s.sum)] = true
	}
	for id, i := range of {
		rowWant[fmt.Sprintf("+I[%d, %s, %s]", id, ts(sessions[i].start), ts(sessions[i].end))] = true
	}
	for _, tc := range []struct {
		name, script string
		want         map[string]bool
	}{
		{"aggregate", table + `CREATE TABLE p (ws TIMESTAMP(3), we TIMESTAMP(3), k BIGINT, n BIGINT, s BIGINT) WITH ('connector' = 'print');
INSERT INTO p
SELECT window_start, window_end, k, COUNT(*), SUM(id)
FROM TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY window_start, window_end, k;`, aggWant},
		{"rows", table + `CREATE TABLE p (id BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3)) WITH ('connector' = 'print');
INSERT INTO p
SELECT id, window_start, window_end
FROM TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND));`, rowWant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var first bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
			defer cancel()
			if err := sql.Run(ctx, tc.script, sql.Options{Parallelism: 2, CheckpointDir: dir, Stdout: &first, Stderr: &first}); err != nil {
				t.Fatalf("first run: %v", err)
			}
			second := run2(t, tc.script, dir)
			got := map[string]bool{}
			for _, l := range append(lines(t, first.String()), lines(t, second)...) {
				if !tc.want[l] {
					t.Errorf("printed %s, which is not in the full sessions", l)
				}
				got[l] = true
			}
			if len(got) != len(tc.want) {
				t.Errorf("printed %d distinct lines, want %d", len(got), len(tc.want))
			}
			n1, n2 := len(lines(t, first.String())), len(lines(t, second))
			t.Logf("first run printed %d lines, the restored one %d, of %d", n1, n2, len(tc.want))
			if n1 == 0 {
				t.Errorf("the first run printed nothing: it was not stopped mid-run")
			}
			if n2 == len(tc.want) {
				t.Errorf("the restored run printed everything: it did not restore")
			}
		})
	}
}

// TestGroupWindowLegacy runs the group window functions of GROUP BY
// (TUMBLE, HOP, SESSION with their _START and _END) and the window TVF
// form of the same windows: the results must be the same.
func TestGroupWindowLegacy(t *testing.T) {
	for _, tc := range []struct{ name, legacy, tvf string }{
		{"TUMBLE",
			`SELECT TUMBLE_START(ts, INTERVAL '10' SECOND), TUMBLE_END(ts, INTERVAL '10' SECOND), k, COUNT(*), SUM(id) FROM t
GROUP BY TUMBLE(ts, INTERVAL '10' SECOND), k`,
			`SELECT window_start, window_end, k, COUNT(*), SUM(id) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, k`},
		{"HOP",
			`SELECT HOP_START(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND), HOP_END(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND), k, COUNT(*), MAX(id) FROM t
WHERE id <> 12 GROUP BY k, HOP(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) HAVING COUNT(*) > 2`,
			`SELECT window_start, window_end, k, COUNT(*), MAX(id) FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
WHERE id <> 12 GROUP BY window_start, window_end, k HAVING COUNT(*) > 2`},
		// Rows of a key are 2 s apart (touching sessions merge); without
		// ids 14..16 each key has two sessions.
		{"SESSION",
			`SELECT SESSION_START(ts, INTERVAL '2' SECOND), SESSION_END(ts, INTERVAL '2' SECOND), k, COUNT(*), SUM(id) FROM t
WHERE id NOT IN (14, 15, 16) GROUP BY k, SESSION(ts, INTERVAL '2' SECOND)`,
			`SELECT window_start, window_end, k, COUNT(*), SUM(id) FROM TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '2' SECOND))
WHERE id NOT IN (14, 15, 16) GROUP BY window_start, window_end, k`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			legacy := lines(t, run(t, seconds+"INSERT INTO p "+tc.legacy+";", 2))
			tvf := lines(t, run(t, seconds+"INSERT INTO p "+tc.tvf+";", 2))
			if len(legacy) == 0 || !slices.Equal(legacy, tvf) {
				t.Errorf("group window:\n%s\nwindow TVF:\n%s", strings.Join(legacy, "\n"), strings.Join(tvf, "\n"))
			}
			if tc.name == "SESSION" && len(legacy) != 4 {
				t.Errorf("want 4 sessions (ids 1..13 and 17..30 per parity), got\n%s", strings.Join(legacy, "\n"))
			}
		})
	}
}

// lateEventFiles writes the events of ids from..to-1 ("id,k,ts", one per
// 100 ms of event time, k0..k2) into two files, one per source subtask of
// a job of parallelism 2 (file f holds the ids = f mod 2). From id lateFrom
// on, every 100th event is followed by a late one: id 900000+id at 10.0 to
// 10.6 s, long behind the watermark by then (tens of seconds of event time
// and over a second of wall time at 1000 rows per second), whose windows
// have all fired. It returns the on-time events as (id, k, ms) triples.
func lateEventFiles(t *testing.T, dir string, from, to, lateFrom int) [][3]int64 {
	t.Helper()
	var files [2]strings.Builder
	var onTime [][3]int64
	stamp := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") }
	for id := from; id < to; id++ {
		b := &files[id%2]
		fmt.Fprintf(b, "%d,k%d,%s\n", id, id%3, stamp(int64(id)*100))
		onTime = append(onTime, [3]int64{int64(id), int64(id % 3), int64(id) * 100})
		if id >= lateFrom && id%100 == 0 {
			fmt.Fprintf(b, "%d,k%d,%s\n", 900000+id, id%3, stamp(10_000+int64(id%7)*100))
		}
	}
	writeFiles(t, dir, map[string]string{"part-00.csv": files[0].String(), "part-01.csv": files[1].String()})
	return onTime
}

// TestWindowAggregateLateRowsRestore runs HOP and CUMULATE aggregations
// (and a HOP aggregation aggregated again by its windows) over files with
// late events, stops each job mid-way and restores it from its latest
// checkpoint: the exactly-once output must hold every window
// of the on-time events once with its full count and sum, and nothing of
// the late ones (dropped: their windows fired before they came).
func TestWindowAggregateLateRowsRestore(t *testing.T) {
	const from, to, lateFrom = 100, 3000, 1600
	for _, tc := range []struct {
		name, tvf string
		windows   func(ms int64) [][2]int64
		// cascade runs the aggregation in two steps: the per-window
		// result aggregated again by its window_start and window_end.
		cascade bool
	}{
		{"HOP", "HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' SECOND)", func(ms int64) [][2]int64 {
			var ws [][2]int64
			for start := ms / 1000 * 1000; start > ms-2000; start -= 1000 {
				ws = append(ws, [2]int64{start, start + 2000})
			}
			return ws
		}, false},
		{"CUMULATE", "CUMULATE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '3' SECOND)", func(ms int64) [][2]int64 {
			var ws [][2]int64
			start := ms / 3000 * 3000
			for end := ms/1000*1000 + 1000; end <= start+3000; end += 1000 {
				ws = append(ws, [2]int64{start, end})
			}
			return ws
		}, false},
		{"HOP-cascade", "HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' SECOND)", func(ms int64) [][2]int64 {
			var ws [][2]int64
			for start := ms / 1000 * 1000; start > ms-2000; start -= 1000 {
				ws = append(ws, [2]int64{start, start + 2000})
			}
			return ws
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out, ckpt := t.TempDir(), t.TempDir(), t.TempDir()
			events := lateEventFiles(t, in, from, to, lateFrom)
			type win struct {
				start, end, k int64
			}
			count, sum := map[win]int64{}, map[win]int64{}
			for _, e := range events {
				for _, w := range tc.windows(e[2]) {
					count[win{w[0], w[1], e[1]}]++
					sum[win{w[0], w[1], e[1]}] += e[0]
				}
			}
			stamp := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") }
			query := fmt.Sprintf(`SELECT window_start, window_end, k, COUNT(*), SUM(id)
FROM TABLE(%s)
GROUP BY window_start, window_end, k`, tc.tvf)
			if tc.cascade {
				query = fmt.Sprintf(`SELECT ws, we, k, SUM(n), SUM(s) FROM (
  SELECT window_start AS ws, window_end AS we, k, COUNT(*) AS n, SUM(id) AS s FROM TABLE(%s)
  GROUP BY window_start, window_end, k)
GROUP BY ws, we, k`, tc.tvf)
			}
			var want []string
			for w, c := range count {
				want = append(want, fmt.Sprintf("%s,%s,k%d,%d,%d", stamp(w.start), stamp(w.end), w.k, c, sum[w]))
			}
			slices.Sort(want)
			script := fmt.Sprintf(`
SET 'execution.checkpointing.interval' = '50ms';
CREATE TABLE events (id BIGINT, k STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (
  'connector' = 'filesystem', 'path' = '%s', 'format' = 'csv', 'source.rows-per-second' = '1000');
CREATE TABLE windows (window_start TIMESTAMP(3), window_end TIMESTAMP(3), k STRING, n BIGINT, s BIGINT) WITH (
  'connector' = 'filesystem', 'path' = '%s', 'format' = 'csv', 'sink.delivery-guarantee' = 'exactly_once');
INSERT INTO windows
%s;
`, in, out, query)
			// Stop the first run once it committed its first windows.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				for ctx.Err() == nil {
					if m, _ := filepath.Glob(filepath.Join(out, "part-*")); len(m) > 0 {
						cancel()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			var log bytes.Buffer
			if err := sql.Run(ctx, script, sql.Options{Parallelism: 2, CheckpointDir: ckpt, Stdout: &log, Stderr: &log}); err != nil {
				t.Fatalf("first run: %v\n%s", err, log.String())
			}
			first := len(committedRows(t, out))
			if err := sql.Run(context.Background(), script, sql.Options{Parallelism: 2, CheckpointDir: ckpt, Restore: "latest", Stdout: &log, Stderr: &log}); err != nil {
				t.Fatalf("restored run: %v\n%s", err, log.String())
			}
			got := committedRows(t, out)
			t.Logf("the first run committed %d of %d windows", first, len(want))
			if first == 0 || first == len(want) {
				t.Errorf("the first run committed %d of %d windows; want some but not all, so that the restore has to continue it", first, len(want))
			}
			if !slices.Equal(got, want) {
				t.Errorf("committed %d lines, want %d:\n got %q\nwant %q", len(got), len(want), got, want)
			}
		})
	}
}
