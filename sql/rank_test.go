package sql_test

import (
	"bufio"
	"bytes"
	"context"
	dbsql "database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/connectors/datagen"
	"github.com/clinkstream/clink/sql"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// queryRows runs a query on SQLite and prints its rows as clink's print
// sink does (without the kind), sorted.
func queryRows(t *testing.T, db *dbsql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("sqlite: %v\n%s", err, query)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				parts[i] = "NULL"
			} else {
				parts[i] = fmt.Sprint(v)
			}
		}
		out = append(out, "["+strings.Join(parts, ", ")+"]")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// explain plans a script's INSERTs and prints the plan.
func explain(t *testing.T, script string) string {
	t.Helper()
	job, err := sql.Prepare(script, sql.Options{})
	if err != nil {
		t.Fatalf("planning: %v", err)
	}
	return planner.Explain(job.Sinks, false, false)
}

// rankData is a table r of n rows: id 1..n in order, a key k in 0..9, a
// value x in -50..50 (10% NULL, many ties) and a time ms; ts is ms as a
// rowtime whose watermark lags far enough behind that no row is late.
type rankData struct {
	n      int64
	script string
	db     *dbsql.DB
}

func newRankData(t *testing.T, n int64, seed string) rankData {
	t.Helper()
	opts := map[string]string{"seed": seed, "fields.id.kind": "sequence", "fields.id.start": "1", "fields.id.end": fmt.Sprint(n),
		"fields.k.min": "0", "fields.k.max": "9", "fields.x.min": "-50", "fields.x.max": "50", "fields.x.null-rate": "0.1",
		"fields.ms.min": "0", "fields.ms.max": "100000000"}
	var with []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range opts {
			if !yield(k) {
				return
			}
		}
	}) {
		with = append(with, fmt.Sprintf("'%s' = '%s'", k, opts[k]))
	}
	script := fmt.Sprintf(`
CREATE TABLE r (id BIGINT, k INT, x BIGINT, ms BIGINT, ts AS CAST(TO_TIMESTAMP_LTZ(ms, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts - INTERVAL '100000' SECOND) WITH ('connector' = 'datagen', 'rows-per-second' = '0', %s);
`, strings.Join(with, ", "))
	gen, err := datagen.New([]datagen.Field{{Name: "id", Type: types.BigIntType}, {Name: "k", Type: types.IntType},
		{Name: "x", Type: types.BigIntType}, {Name: "ms", Type: types.BigIntType}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	db := loadSQLite(t, gen, n, "CREATE TABLE r (id INTEGER, k INTEGER, x INTEGER, ms INTEGER)", func(r types.Row) []any {
		return []any{r.Values[0].Int64(), r.Values[1].Int64(), nullableInt(r.Values[2]), r.Values[3].Int64()}
	})
	// Deduplication by time is deterministic only without ties.
	if dup := queryRows(t, db, "SELECT k, ms FROM r GROUP BY k, ms HAVING COUNT(*) > 1"); len(dup) > 0 {
		t.Fatalf("the generated rows have equal times within a key: %v", dup)
	}
	return rankData{n: n, script: script, db: db}
}

// TestTopNDifferentialSQLite runs Top-N queries over random rows through
// clink (the materialized changelog at the end) and through SQLite.
func TestTopNDifferentialSQLite(t *testing.T) {
	d := newRankData(t, 2000, "5")
	for _, tc := range []struct {
		name, sink, clink, sqlite, node string
	}{
		{"top3 with row number", "(k INT, x BIGINT, id BIGINT, rn BIGINT)",
			"SELECT k, x, id, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY x DESC, id) AS rn FROM r) WHERE rn <= 3",
			"SELECT k, x, id, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY x DESC, id) AS rn FROM r) WHERE rn <= 3",
			"Rank(strategy=[AppendFastStrategy]"},
		{"top3 without row number", "(k INT, x BIGINT, id BIGINT)",
			"SELECT k, x, id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY x, id DESC) AS rn FROM r) WHERE rn < 4",
			"SELECT k, x, id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY x, id DESC) AS rn FROM r) WHERE rn < 4",
			"select=[id, k, x, ms, ts])"},
		{"rows 2 to 4 of all, nulls first", "(id BIGINT, x BIGINT, rn BIGINT)",
			"SELECT id, x, rn FROM (SELECT id, x, ROW_NUMBER() OVER (ORDER BY x DESC NULLS FIRST, id) AS rn FROM r WHERE k <> 3) WHERE rn BETWEEN 2 AND 4",
			"SELECT id, x, rn FROM (SELECT id, x, ROW_NUMBER() OVER (ORDER BY x IS NOT NULL, x DESC, id) AS rn FROM r WHERE k <> 3) WHERE rn BETWEEN 2 AND 4",
			"rankRange=[rankStart=2, rankEnd=4]"},
		{"top3 of an aggregate", "(k INT, total BIGINT, rn BIGINT)",
			"SELECT k, total, rn FROM (SELECT k, total, ROW_NUMBER() OVER (ORDER BY total DESC, k) AS rn FROM (SELECT k, SUM(x) AS total FROM r WHERE x IS NOT NULL GROUP BY k)) WHERE rn <= 3",
			"SELECT k, total, rn FROM (SELECT k, total, ROW_NUMBER() OVER (ORDER BY total DESC, k) AS rn FROM (SELECT k, SUM(x) AS total FROM r WHERE x IS NOT NULL GROUP BY k)) WHERE rn <= 3",
			"Rank(strategy=[RetractStrategy]"},
		{"top2 of an aggregate without row number", "(m BIGINT, k INT, n BIGINT)",
			"SELECT m, k, n FROM (SELECT m, k, n, ROW_NUMBER() OVER (PARTITION BY m ORDER BY n DESC, k) AS rn FROM (SELECT id % 4 AS m, k, COUNT(*) AS n FROM r GROUP BY id % 4, k)) WHERE rn <= 2",
			"SELECT m, k, n FROM (SELECT m, k, n, ROW_NUMBER() OVER (PARTITION BY m ORDER BY n DESC, k) AS rn FROM (SELECT id % 4 AS m, k, COUNT(*) AS n FROM r GROUP BY id % 4, k)) WHERE rn <= 2",
			"Rank(strategy=[RetractStrategy]"},
		{"rank with ties", "(k INT, x BIGINT, id BIGINT, r BIGINT)",
			"SELECT k, x, id, r FROM (SELECT *, RANK() OVER (PARTITION BY k ORDER BY x DESC) AS r FROM r) WHERE r <= 3",
			"SELECT k, x, id, r FROM (SELECT *, RANK() OVER (PARTITION BY k ORDER BY x DESC) AS r FROM r) WHERE r <= 3",
			"rankType=[RANK]"},
		{"dense rank 2 to 3 without the number", "(k INT, x BIGINT, id BIGINT)",
			"SELECT k, x, id FROM (SELECT *, DENSE_RANK() OVER (PARTITION BY k ORDER BY x) AS r FROM r) WHERE r BETWEEN 2 AND 3",
			"SELECT k, x, id FROM (SELECT *, DENSE_RANK() OVER (PARTITION BY k ORDER BY x) AS r FROM r) WHERE r BETWEEN 2 AND 3",
			"rankType=[DENSE_RANK]"},
		{"rank of an aggregate", "(m BIGINT, n BIGINT, k INT, r BIGINT)",
			"SELECT m, n, k, r FROM (SELECT m, k, n, RANK() OVER (PARTITION BY m ORDER BY n DESC) AS r FROM (SELECT id % 4 AS m, k, COUNT(*) AS n FROM r GROUP BY id % 4, k)) WHERE r <= 2",
			"SELECT m, n, k, r FROM (SELECT m, k, n, RANK() OVER (PARTITION BY m ORDER BY n DESC) AS r FROM (SELECT id % 4 AS m, k, COUNT(*) AS n FROM r GROUP BY id % 4, k)) WHERE r <= 2",
			"Rank(strategy=[RetractStrategy], rankType=[RANK]"},
		{"every row numbered", "(id BIGINT, x BIGINT, rn BIGINT)",
			"SELECT id, x, ROW_NUMBER() OVER (ORDER BY x DESC, id) FROM r WHERE k = 1",
			"SELECT id, x, ROW_NUMBER() OVER (ORDER BY x DESC, id) FROM r WHERE k = 1",
			"rankEnd=unbounded"},
		{"first row by time", "(k INT, id BIGINT, x BIGINT)",
			"SELECT k, id, x FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM r) WHERE rn = 1",
			"SELECT k, id, x FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ms) AS rn FROM r) WHERE rn = 1",
			"Deduplicate(keep=[FirstRow]"},
		{"last row by time", "(k INT, id BIGINT, x BIGINT)",
			"SELECT k, id, x FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM r) WHERE rn <= 1",
			"SELECT k, id, x FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ms DESC) AS rn FROM r) WHERE rn = 1",
			"Deduplicate(keep=[LastRow]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := d.script + "CREATE TABLE p " + tc.sink + " WITH ('connector' = 'print');\nINSERT INTO p " + tc.clink + ";"
			if plan := explain(t, script); !strings.Contains(plan, tc.node) {
				t.Fatalf("the plan has no %s:\n%s", tc.node, plan)
			}
			got := materialize(t, run(t, script, 2))
			want := queryRows(t, d.db, tc.sqlite)
			t.Logf("%d rows", len(want))
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("clink and SQLite differ (%d and %d rows)\nclink:  %v\nsqlite: %v", len(got), len(want), got, want)
			}
		})
	}
}

// TestTopNChangelog checks the exact changelog of one partition at
// parallelism 1: row numbers shift with -U/+U, and without the row
// number a row pushed out of the top N is deleted.
func TestTopNChangelog(t *testing.T) {
	// x: 3, 1, 4, 1, 5 (ids 1..5) in one partition.
	table := `
CREATE TABLE t (id BIGINT, x AS CASE id WHEN 1 THEN 3 WHEN 2 THEN 1 WHEN 3 THEN 4 WHEN 4 THEN 1 ELSE 5 END) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '5');
`
	out := run(t, table+`
CREATE TABLE p (id BIGINT, x INT, rn BIGINT) WITH ('connector' = 'print');
INSERT INTO p SELECT * FROM (SELECT id, x, ROW_NUMBER() OVER (ORDER BY x DESC) AS rn FROM t) WHERE rn <= 2;`, 1)
	want := "+I[1, 3, 1]\n+I[2, 1, 2]\n-U[1, 3, 1]\n+U[3, 4, 1]\n-U[2, 1, 2]\n+U[1, 3, 2]\n-U[3, 4, 1]\n+U[5, 5, 1]\n-U[1, 3, 2]\n+U[3, 4, 2]\n"
	if out != want {
		t.Errorf("with the row number printed\n%s\nwant\n%s", out, want)
	}
	out = run(t, table+`
CREATE TABLE p (id BIGINT, x INT) WITH ('connector' = 'print');
INSERT INTO p SELECT id, x FROM (SELECT id, x, ROW_NUMBER() OVER (ORDER BY x DESC) AS rn FROM t) WHERE rn <= 2;`, 1)
	want = "+I[1, 3]\n+I[2, 1]\n-D[2, 1]\n+I[3, 4]\n-D[1, 3]\n+I[5, 5]\n"
	if out != want {
		t.Errorf("without the row number printed\n%s\nwant\n%s", out, want)
	}
}

// TestWindowTopNDifferentialSQLite ranks the results of a window
// aggregation and the rows of a window TVF per window, and deduplicates
// per window: append-only output, compared with SQLite.
func TestWindowTopNDifferentialSQLite(t *testing.T) {
	d := newRankData(t, 2000, "9")
	const ms = "CAST(UNIX_TIMESTAMP(CAST(%s AS STRING)) AS BIGINT) * 1000"
	ws, we := fmt.Sprintf(ms, "window_start"), fmt.Sprintf(ms, "window_end")
	const size = 7000000 // 7000 s
	tumble := "TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '7000' SECOND))"
	for _, tc := range []struct {
		name, sink, clink, sqlite, node string
	}{
		{"top3 of a window aggregation", "(ws BIGINT, we BIGINT, k INT, total BIGINT, rn BIGINT)",
			fmt.Sprintf(`SELECT %s, %s, k, total, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY total DESC, k) AS rn FROM (
    SELECT window_start, window_end, k, SUM(x) AS total FROM %s GROUP BY window_start, window_end, k))
WHERE rn <= 3`, ws, we, tumble),
			fmt.Sprintf(`SELECT ws, ws + %d, k, total, rn FROM (
  SELECT ws, k, total, ROW_NUMBER() OVER (PARTITION BY ws ORDER BY total DESC, k) AS rn FROM (
    SELECT (ms / %d) * %d AS ws, k, SUM(x) AS total FROM r GROUP BY ws, k))
WHERE rn <= 3`, size, size, size),
			"WindowRank("},
		{"top2 of a window TVF per key", "(ws BIGINT, k INT, x BIGINT, id BIGINT)",
			fmt.Sprintf(`SELECT %s, k, x, id FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY x DESC, id) AS rn FROM %s)
WHERE rn <= 2`, ws, tumble),
			fmt.Sprintf(`SELECT ws, k, x, id FROM (
  SELECT (ms / %d) * %d AS ws, k, x, id, ROW_NUMBER() OVER (PARTITION BY ms / %d, k ORDER BY x DESC, id) AS rn FROM r)
WHERE rn <= 2`, size, size, size),
			"WindowRank("},
		{"dense rank per window", "(ws BIGINT, k INT, x BIGINT, id BIGINT, r BIGINT)",
			fmt.Sprintf(`SELECT %s, k, x, id, r FROM (
  SELECT *, DENSE_RANK() OVER (PARTITION BY window_start, window_end ORDER BY x DESC) AS r FROM %s)
WHERE r <= 2`, ws, tumble),
			fmt.Sprintf(`SELECT ws, k, x, id, r FROM (
  SELECT (ms / %d) * %d AS ws, k, x, id, DENSE_RANK() OVER (PARTITION BY ms / %d ORDER BY x DESC) AS r FROM r)
WHERE r <= 2`, size, size, size),
			"WindowRank(window=[TUMBLE(time_col=[ts], size=[7000 s])], rankType=[DENSE_RANK]"},
		{"last row per key and window", "(ws BIGINT, k INT, id BIGINT)",
			fmt.Sprintf(`SELECT %s, k, id FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY ts DESC) AS rn FROM %s)
WHERE rn <= 1`, ws, tumble),
			fmt.Sprintf(`SELECT ws, k, id FROM (
  SELECT (ms / %d) * %d AS ws, k, id, ROW_NUMBER() OVER (PARTITION BY ms / %d, k ORDER BY ms DESC) AS rn FROM r)
WHERE rn = 1`, size, size, size),
			"WindowDeduplicate(window=[TUMBLE(time_col=[ts], size=[7000 s])], keep=[LastRow]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := d.script + "CREATE TABLE p " + tc.sink + " WITH ('connector' = 'print');\nINSERT INTO p " + tc.clink + ";"
			if plan := explain(t, script); !strings.Contains(plan, tc.node) {
				t.Fatalf("the plan has no %s:\n%s", tc.node, plan)
			}
			got := lines(t, run(t, script, 2))
			for i, l := range got {
				got[i] = strings.TrimPrefix(l, "+I")
			}
			want := queryRows(t, d.db, tc.sqlite)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("clink and SQLite differ (%d and %d rows)\nclink:  %v\nsqlite: %v", len(got), len(want), got, want)
			}
		})
	}
}

// bySubtask splits printed lines by the print sink's subtask prefix.
func bySubtask(out string) map[string][]string {
	m := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		prefix, row, ok := strings.Cut(sc.Text(), "> ")
		if !ok {
			continue
		}
		m[prefix] = append(m[prefix], row)
	}
	return m
}

// TestTopNRestore stops a Top-N job after a checkpoint and restores it.
// The source runs in one subtask, so each ranking subtask sees its rows
// in one order and a restored run prints again exactly what the first
// run printed after the checkpoint (print is at-least-once): per
// subtask, the first run's output up to some line and then the restored
// run's output must be the full changelog, whose end is the right Top-N.
func TestTopNRestore(t *testing.T) {
	script := `
CREATE TABLE t (id BIGINT, k AS id % 3, x AS (id * 37) % 101) WITH (
  'connector' = 'datagen', 'rows-per-second' = '300', 'scan.parallelism' = '1',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '600');
CREATE TABLE p (k BIGINT, x BIGINT, id BIGINT, rn BIGINT) WITH ('connector' = 'print');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO p SELECT k, x, id, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY x DESC, id) AS rn FROM t) WHERE rn <= 3;`
	var want []string
	for k := int64(0); k < 3; k++ {
		type row struct{ x, id int64 }
		var rows []row
		for id := int64(1); id <= 600; id++ {
			if id%3 == k {
				rows = append(rows, row{(id * 37) % 101, id})
			}
		}
		slices.SortFunc(rows, func(a, b row) int {
			if a.x != b.x {
				return int(b.x - a.x)
			}
			return int(a.id - b.id)
		})
		for i, r := range rows[:3] {
			want = append(want, fmt.Sprintf("[%d, %d, %d, %d]", k, r.x, r.id, i+1))
		}
	}
	slices.Sort(want)
	dir := t.TempDir()
	var first bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if err := sql.Run(ctx, script, sql.Options{Parallelism: 2, CheckpointDir: dir, Stdout: &first, Stderr: &first}); err != nil {
		t.Fatalf("first run: %v", err)
	}
	second := run2(t, script, dir)
	firstBy, secondBy := bySubtask(first.String()), bySubtask(second)
	var combined strings.Builder
	replayed := 0
	subs := map[string]bool{}
	for sub := range firstBy {
		subs[sub] = true
	}
	for sub := range secondBy {
		subs[sub] = true
	}
	for sub := range subs {
		done, rows := firstBy[sub], secondBy[sub]
		// The longest tail of the first run that the restored run
		// printed again.
		cut := len(done)
		for j := 0; j <= len(done); j++ {
			tail := done[j:]
			if len(tail) <= len(rows) && slices.Equal(tail, rows[:len(tail)]) {
				cut = j
				break
			}
		}
		replayed += cut
		for _, r := range append(slices.Clone(done[:cut]), rows...) {
			combined.WriteString(r + "\n")
		}
	}
	if got := materialize(t, combined.String()); !slices.Equal(got, want) {
		t.Fatalf("final Top-3 %v, want %v\nfirst run:\n%s\nrestored run:\n%s", got, want, first.String(), second)
	}
	if replayed == 0 {
		t.Errorf("the first run printed nothing before its last checkpoint: the restore was not tested\n%s", first.String())
	}
	t.Logf("the first run printed %d lines, %d of them before the checkpoint the restored run started from, which printed %d", strings.Count(first.String(), "\n"), replayed, strings.Count(second, "\n"))
}

// TestWindowTopNRestore stops a window Top-N mid-run and restores it from
// its latest checkpoint: together the two runs print each window's top
// rows with their right numbers (a window that fired after the
// checkpoint prints again, the same), and never a partial window's.
func TestWindowTopNRestore(t *testing.T) {
	script := `
CREATE TABLE t (id BIGINT, x AS (id * 37) % 101, ts AS CAST(TO_TIMESTAMP_LTZ(id * 1000, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts) WITH (
  'connector' = 'datagen', 'rows-per-second' = '200',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '400');
CREATE TABLE p (we TIMESTAMP(3), id BIGINT, x BIGINT, rn BIGINT) WITH ('connector' = 'print');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO p SELECT window_end, id, x, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY x DESC, id) AS rn
  FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND)))
WHERE rn <= 2;`
	want := map[string]bool{}
	for start := int64(0); start <= 400; start += 10 {
		var ids []int64
		for id := max(start, 1); id < start+10 && id <= 400; id++ {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b int64) int {
			if xa, xb := (a*37)%101, (b*37)%101; xa != xb {
				return int(xb - xa)
			}
			return int(a - b)
		})
		for i, id := range ids[:min(2, len(ids))] {
			want[fmt.Sprintf("+I[%s, %d, %d, %d]", types.Timestamp((start+10)*1000, 0, 3), id, (id*37)%101, i+1)] = true
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
			t.Errorf("printed %s, which is no window's top row", l)
		}
		got[l] = true
	}
	if len(got) != len(want) {
		t.Errorf("printed %d distinct rows, want %d", len(got), len(want))
	}
	if n := len(lines(t, second)); n == len(want) || len(lines(t, first.String())) == 0 {
		t.Errorf("the first run printed %d rows, the restored one %d of %d: nothing was restored", len(lines(t, first.String())), n, len(want))
	}
}
