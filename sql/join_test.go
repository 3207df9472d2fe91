package sql_test

import (
	"bytes"
	"context"
	dbsql "database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/connectors/datagen"
	"github.com/clinkstream/clink/sql"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// joinTable is a datagen table of a join test, loaded into SQLite too.
type joinTable struct {
	name string
	n    int64
	opts map[string]string
	// cols are the physical columns: k INT, v BIGINT, s STRING, ms BIGINT.
}

// ddl is the table's CREATE TABLE for clink; extra adds columns (a
// rowtime) and a watermark.
func (jt joinTable) ddl(extra string) string {
	var with []string
	keys := make([]string, 0, len(jt.opts))
	for k := range jt.opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		with = append(with, fmt.Sprintf("'%s' = '%s'", k, jt.opts[k]))
	}
	return fmt.Sprintf("CREATE TABLE %s (k INT, v BIGINT, s STRING, ms BIGINT%s) WITH ('connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d', %s);\n",
		jt.name, extra, jt.n, strings.Join(with, ", "))
}

var joinFields = []datagen.Field{{Name: "k", Type: types.IntType}, {Name: "v", Type: types.BigIntType}, {Name: "s", Type: types.StringType}, {Name: "ms", Type: types.BigIntType}}

// load puts the table's rows into db.
func (jt joinTable) load(t *testing.T, db *dbsql.DB) {
	t.Helper()
	gen, err := datagen.New(joinFields, jt.opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf("CREATE TABLE %s (k INTEGER, v INTEGER, s TEXT, ms INTEGER)", jt.name)); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < jt.n; i++ {
		r := gen.Row(i)
		var s any
		if !r.Values[2].IsNull() {
			s = r.Values[2].Str()
		}
		if _, err := tx.Exec("INSERT INTO "+jt.name+" VALUES (?, ?, ?, ?)", nullableInt(r.Values[0]), nullableInt(r.Values[1]), s, r.Values[3].Int64()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// planOf plans a script and returns its EXPLAIN.
func planOf(t *testing.T, script string) string {
	t.Helper()
	job, err := sql.Prepare(script, sql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return planner.Explain(job.Sinks, true, false)
}

// joinTables are two random tables: keys 0..19 (some NULL in q), values
// with NULLs, two-letter strings and times within ten minutes.
func joinTables() (r, q joinTable) {
	r = joinTable{name: "r", n: 300, opts: map[string]string{"seed": "3", "fields.k.min": "0", "fields.k.max": "19",
		"fields.v.min": "-50", "fields.v.max": "50", "fields.v.null-rate": "0.1", "fields.s.length": "1",
		"fields.ms.min": "0", "fields.ms.max": "600000"}}
	q = joinTable{name: "q", n: 250, opts: map[string]string{"seed": "5", "fields.k.min": "0", "fields.k.max": "19", "fields.k.null-rate": "0.05",
		"fields.v.min": "-50", "fields.v.max": "50", "fields.v.null-rate": "0.1", "fields.s.length": "1",
		"fields.ms.min": "0", "fields.ms.max": "600000"}}
	return r, q
}

// TestJoinDifferentialSQLite runs regular joins of every kind over random
// rows through clink (at parallelism 2) and SQLite and compares the final
// results; the outer joins' changelogs retract padded rows when their
// first match arrives.
func TestJoinDifferentialSQLite(t *testing.T) {
	r, q := joinTables()
	db, err := dbsql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r.load(t, db)
	q.load(t, db)
	tables := r.ddl("") + q.ddl("")
	for _, tc := range []struct {
		name, sink, query string
		// node must appear in the plan.
		node string
	}{
		{"inner", "(a BIGINT, b BIGINT, c BIGINT)", "SELECT r.k, r.v, q.v FROM r JOIN q ON r.k = q.k", "Join(joinType=[InnerJoin]"},
		{"left", "(a BIGINT, b BIGINT, c BIGINT, d BIGINT)", "SELECT r.k, r.v, q.k, q.v FROM r LEFT JOIN q ON r.k = q.k AND q.v > r.v", "Join(joinType=[LeftOuterJoin]"},
		{"right", "(a BIGINT, b BIGINT, c BIGINT, d BIGINT)", "SELECT r.k, r.v, q.k, q.v FROM r RIGHT JOIN q ON r.k = q.k AND r.v > 20", "Join(joinType=[RightOuterJoin]"},
		{"full", "(a BIGINT, b BIGINT, c BIGINT, d BIGINT)", "SELECT r.k, r.v, q.k, q.v FROM r FULL OUTER JOIN q ON r.k = q.k AND r.v < q.v - 30", "Join(joinType=[FullOuterJoin]"},
		{"comma join with residual", "(a BIGINT, b STRING, c BIGINT)",
			"SELECT r.k, r.s, r.v + q.v FROM r, q WHERE r.k = q.k AND r.s = q.s AND r.v + q.v > 10 AND q.v <> 0", "where=[r.k = q.k AND r.s = q.s AND r.v + q.v > 10]"},
		{"null-safe key", "(a BIGINT, b BIGINT, c BIGINT)", "SELECT r.k, q.k, q.v FROM r JOIN q ON r.v IS NOT DISTINCT FROM q.v AND r.k < 3 AND q.k < 2",
			"hash[v]"},
		{"expression keys", "(a BIGINT, b BIGINT, c BIGINT, d BIGINT)",
			"SELECT r.k, r.v, q.k, q.v FROM r LEFT JOIN q ON q.k * 2 = r.k + 1 AND r.s = q.s AND ABS(r.v) < 20", "hash[s, $k0]"},
		{"no equality", "(a BIGINT, b BIGINT)", "SELECT r.v, q.v FROM r JOIN q ON r.v + q.v = 7 AND r.k < 3", "Exchange(distribution=[single])"},
		{"nested", "(a BIGINT, b BIGINT, c BIGINT)",
			"SELECT r.v, q.v, r2.v FROM r JOIN q ON r.k = q.k JOIN r AS r2 ON r2.s = q.s AND r2.k = r.k WHERE r.v > 40", "hash[s, k]"},
		{"updating inputs", "(a BIGINT, b BIGINT, c BIGINT)",
			"SELECT g.k, g.n, h.m FROM (SELECT k, COUNT(*) AS n FROM r WHERE v > 0 GROUP BY k) g LEFT JOIN (SELECT k, SUM(v) AS m FROM q GROUP BY k HAVING SUM(v) > 0) h ON g.k = h.k", "GroupAggregate"},
		{"full, pebble state", "(a BIGINT, b BIGINT, c BIGINT, d BIGINT)", "SET 'state.backend.type' = 'pebble';\n" +
			"SELECT r.k, r.v, q.k, q.v FROM r FULL OUTER JOIN q ON r.k = q.k AND r.v < q.v - 30", "Join(joinType=[FullOuterJoin]"},
		// The join keeps only r.v, r.k and h.n: rows of h that differ in
		// s or k alone are held alike, and retracted one at a time.
		{"updating input, columns not read", "(a BIGINT, b BIGINT)",
			"SELECT r.v, h.n FROM r JOIN (SELECT s, k, COUNT(*) AS n FROM q GROUP BY s, k) h ON r.s = h.s AND r.k < h.k + 3", "GroupAggregate"},
		// The Top-1 reads r.k and r.v, and the Calc above it no more:
		// the join keeps neither r.s nor q's columns.
		{"top-1 over a join, columns not read", "(a BIGINT, b BIGINT)",
			"SELECT k, v FROM (SELECT r.k, r.v, q.s, ROW_NUMBER() OVER (PARTITION BY r.k ORDER BY r.v DESC) AS rn FROM r JOIN q ON r.k = q.k WHERE r.v IS NOT NULL) WHERE rn <= 1", "Rank("},
		{"updating inputs full", "(a STRING, b BIGINT, c STRING, d BIGINT)",
			"SELECT g.s, g.n, h.s, h.m FROM (SELECT s, MAX(v) AS n FROM r GROUP BY s) g FULL JOIN (SELECT s, MIN(v) AS m FROM q GROUP BY s) h ON g.s = h.s AND g.n > h.m", "FullOuterJoin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A query may start with a SET statement for the job.
			set, query := "", tc.query
			if strings.HasPrefix(query, "SET ") {
				set, query, _ = strings.Cut(query, "\n")
				set += "\n"
			}
			script := tables + set + "CREATE TABLE p " + tc.sink + " WITH ('connector' = 'print');\nINSERT INTO p " + query + ";"
			if plan := planOf(t, script); !strings.Contains(plan, tc.node) {
				t.Fatalf("the plan has no %s:\n%s", tc.node, plan)
			}
			got := materialize(t, run(t, script, 2))
			want := queryRows(t, db, query)
			if len(want) == 0 {
				t.Fatal("the query selects nothing: the test proves nothing")
			}
			if !slices.Equal(got, want) {
				t.Fatalf("clink and SQLite differ (%d and %d rows)\nclink:  %v\nsqlite: %v", len(got), len(want), got, want)
			}
		})
	}
}

// TestJoinUnderTopNKeepsColumnsRead joins rows carrying 1,000-byte
// strings under a Top-1 whose result selects neither string: the join
// keeps NULL in their place, as Flink projects them away below the join,
// so its checkpoint holds keys and ids (keeping the strings takes over
// 2 MB).
func TestJoinUnderTopNKeepsColumnsRead(t *testing.T) {
	script := `
CREATE TABLE a (id BIGINT, s STRING, k AS id % 40) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '2000', 'fields.s.length' = '1000');
CREATE TABLE c (k BIGINT, name STRING) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
  'fields.k.kind' = 'sequence', 'fields.k.start' = '0', 'fields.k.end' = '39', 'fields.name.length' = '1000');
CREATE TABLE out (k BIGINT, id BIGINT) WITH ('connector' = 'print');
SET 'state.backend.incremental' = 'false';
INSERT INTO out SELECT k, id FROM (
  SELECT a.k, a.id, a.s, c.name, ROW_NUMBER() OVER (PARTITION BY a.k ORDER BY a.id DESC) AS rn
  FROM a JOIN c ON a.k = c.k) WHERE rn <= 1;`
	sizes := &checkpointBytes{}
	var out bytes.Buffer
	err := sql.Run(context.Background(), script, sql.Options{Parallelism: 1, CheckpointDir: t.TempDir(),
		Stdout: &out, Stderr: &out, Logger: slog.New(sizes)})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Each key's last row: ids 1961..2000.
	got := materialize(t, out.String())
	if len(got) != 40 || !slices.Contains(got, "[0, 2000]") || !slices.Contains(got, "[1, 1961]") {
		t.Fatalf("the Top-1 per key is not each key's highest id: %v", got)
	}
	sizes.mu.Lock()
	defer sizes.mu.Unlock()
	if len(sizes.sizes) == 0 {
		t.Fatal("no checkpoint completed")
	}
	if largest := slices.Max(sizes.sizes); largest > 400_000 {
		t.Fatalf("a checkpoint holds %d bytes: the join kept the strings no one reads (sizes %v)", largest, sizes.sizes)
	}
}

// TestJoinChangelog runs a left join of an aggregate at parallelism 1:
// the left rows end padded with NULLs, whatever the order in which the
// padded rows, their matches and the retractions of the matches came.
func TestJoinChangelog(t *testing.T) {
	out := run(t, `
CREATE TABLE l (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '0', 'fields.id.end' = '2');
CREATE TABLE rr (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '4');
CREATE TABLE p (id BIGINT, n BIGINT) WITH ('connector' = 'print');
CREATE VIEW counts AS SELECT id % 2 AS id, COUNT(*) AS n FROM rr GROUP BY id % 2;
INSERT INTO p SELECT l.id, c.n FROM l LEFT JOIN counts c ON l.id = c.id AND c.n < 2;`, 1)
	// Both groups of counts end at 2, which fails the condition.
	if got, want := materialize(t, out), []string{"[0, NULL]", "[1, NULL]", "[2, NULL]"}; !slices.Equal(got, want) {
		t.Fatalf("final result %v, want %v\n%s", got, want, out)
	}
}

// TestJoinBinderErrors checks the errors of malformed joins.
func TestJoinBinderErrors(t *testing.T) {
	r, q := joinTables()
	tables := r.ddl(", ts AS CAST(TO_TIMESTAMP_LTZ(ms, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts") +
		q.ddl(", ts AS CAST(TO_TIMESTAMP_LTZ(ms, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts") +
		"CREATE TABLE p (a BIGINT) WITH ('connector' = 'print');\n"
	for _, tc := range []struct{ query, want string }{
		{"SELECT r.v FROM r JOIN q ON r.k", "the join condition must be BOOLEAN, not INT at line 4, column 43"},
		{"SELECT r.v FROM r JOIN q ON r.k = q.kk", "column 'kk' not found in table 'q'; did you mean 'k'? at line 4, column 49"},
		{"SELECT r.v FROM r JOIN q ON r.k = x.k", "table 'x' not found; did you mean 'q' or 'r'? at line 4, column 49"},
		{"SELECT r.v FROM r JOIN q ON r.ts BETWEEN q.ts - INTERVAL '5' SECOND AND q.ts", "an interval join needs at least one equality condition between columns of its two inputs besides the time bounds at line 4, column 43"},
		{"SELECT r.v FROM r JOIN r ON r.k = r.k", "table name 'r' is used twice in the FROM clause; give one of them an alias at line 4, column 38"},
		{"SELECT r.v FROM r, q WHERE v > 0", "column reference 'v' is ambiguous; it could be r.v or q.v at line 4, column 42"},
		{"SELECT r.v FROM r JOIN q USING (k)", "JOIN ... USING is not supported yet; write the condition with ON at line 4, column 47"},
	} {
		_, err := sql.Prepare(tables+"INSERT INTO p "+tc.query+";", sql.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.query, err, tc.want)
		}
	}
}

// TestIntervalJoinDifferentialSQLite joins rows whose times are within
// bounds of each other through clink's IntervalJoin and through SQLite,
// inner and outer: the outer joins' padded rows are insert-only too.
func TestIntervalJoinDifferentialSQLite(t *testing.T) {
	r, q := joinTables()
	db, err := dbsql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r.load(t, db)
	q.load(t, db)
	// A watermark a full range behind the rows keeps every row on time.
	const rowtime = ", ts AS CAST(TO_TIMESTAMP_LTZ(ms, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts - INTERVAL '700' SECOND"
	tables := r.ddl(rowtime) + q.ddl(rowtime) + "CREATE TABLE p (a BIGINT, b BIGINT, c BIGINT, d BIGINT) WITH ('connector' = 'print');\n"
	for _, tc := range []struct{ clink, sqlite, bounds string }{
		{"SELECT r.k, r.ms, q.ms, q.v FROM r JOIN q ON r.k = q.k AND r.ts BETWEEN q.ts - INTERVAL '20' SECOND AND q.ts",
			"SELECT r.k, r.ms, q.ms, q.v FROM r JOIN q ON r.k = q.k AND r.ms BETWEEN q.ms - 20000 AND q.ms",
			"leftLowerBound=-20000, leftUpperBound=0"},
		{"SELECT r.k, r.ms, q.ms, q.v FROM r LEFT JOIN q ON r.k = q.k AND r.ts BETWEEN q.ts - INTERVAL '20' SECOND AND q.ts + INTERVAL '5' SECOND",
			"SELECT r.k, r.ms, q.ms, q.v FROM r LEFT JOIN q ON r.k = q.k AND r.ms BETWEEN q.ms - 20000 AND q.ms + 5000",
			"leftLowerBound=-20000, leftUpperBound=5000"},
		{"SELECT r.k, r.ms, q.ms, q.v FROM r RIGHT JOIN q ON r.k = q.k AND r.ts > q.ts AND r.ts <= q.ts + INTERVAL '30' SECOND AND r.v < q.v",
			"SELECT r.k, r.ms, q.ms, q.v FROM r RIGHT JOIN q ON r.k = q.k AND r.ms > q.ms AND r.ms <= q.ms + 30000 AND r.v < q.v",
			"leftLowerBound=1, leftUpperBound=30000"},
		{"SELECT r.k, r.ms, q.ms, q.v FROM r FULL JOIN q ON r.k = q.k AND r.ts BETWEEN q.ts - INTERVAL '10' SECOND AND q.ts + INTERVAL '10' SECOND",
			"SELECT r.k, r.ms, q.ms, q.v FROM r FULL JOIN q ON r.k = q.k AND r.ms BETWEEN q.ms - 10000 AND q.ms + 10000",
			"leftLowerBound=-10000, leftUpperBound=10000"},
		{"SELECT r.k, r.ms, q.ms, q.v FROM r, q WHERE r.k = q.k AND q.ts > r.ts - INTERVAL '10' SECOND AND q.ts + INTERVAL '1' MINUTE <= r.ts + INTERVAL '90' SECOND AND r.v > q.v",
			"SELECT r.k, r.ms, q.ms, q.v FROM r, q WHERE r.k = q.k AND q.ms > r.ms - 10000 AND q.ms + 60000 <= r.ms + 90000 AND r.v > q.v",
			"leftLowerBound=-30000, leftUpperBound=9999"},
	} {
		t.Run(tc.bounds, func(t *testing.T) {
			script := tables + "INSERT INTO p " + tc.clink + ";"
			if plan := planOf(t, script); !strings.Contains(plan, "windowBounds=[isRowTime=true, "+tc.bounds) || !strings.Contains(plan, "IntervalJoin") {
				t.Fatalf("no IntervalJoin with %s in the plan:\n%s", tc.bounds, plan)
			}
			out := run(t, script, 2)
			if strings.Contains(out, "-U") || strings.Contains(out, "-D") {
				t.Fatalf("an interval join retracted rows:\n%s", out)
			}
			got := materialize(t, out)
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

// TestWindowJoinDifferentialSQLite joins two window aggregations of the
// same tumbling windows per window and key, inner and outer, and two
// window table functions, and compares with SQLite's joins of the same
// aggregations and windows.
func TestWindowJoinDifferentialSQLite(t *testing.T) {
	r, q := joinTables()
	db, err := dbsql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r.load(t, db)
	q.load(t, db)
	const rowtime = ", ts AS CAST(TO_TIMESTAMP_LTZ(ms, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts - INTERVAL '700' SECOND"
	tables := r.ddl(rowtime) + q.ddl(rowtime) + "CREATE TABLE p (ws BIGINT, a BIGINT, b BIGINT, c BIGINT, d BIGINT) WITH ('connector' = 'print');\n"
	agg := func(t string) string {
		return fmt.Sprintf("SELECT k, COUNT(*) AS n, window_start, window_end FROM TABLE(TUMBLE(TABLE %s, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY k, window_start, window_end", t)
	}
	sqliteAgg := func(t string) string {
		return fmt.Sprintf("SELECT k, COUNT(*) AS n, ms / 60000 * 60000 AS ws FROM %s GROUP BY k, ms / 60000", t)
	}
	tvf := func(t string) string {
		return fmt.Sprintf("TABLE(TUMBLE(TABLE %s, DESCRIPTOR(ts), INTERVAL '1' MINUTE))", t)
	}
	const ws = "CAST(UNIX_TIMESTAMP(CAST(COALESCE(L.window_start, R.window_start) AS STRING)) AS BIGINT) * 1000"
	for _, tc := range []struct{ name, clink, sqlite string }{
		{"JOIN", fmt.Sprintf(`SELECT %s, L.k, L.n, R.k, R.n FROM (%s) L JOIN (%s) R
ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k AND L.n > 1`, ws, agg("r"), agg("q")),
			fmt.Sprintf("SELECT COALESCE(L.ws, R.ws), L.k, L.n, R.k, R.n FROM (%s) L JOIN (%s) R ON L.ws = R.ws AND L.k = R.k AND L.n > 1", sqliteAgg("r"), sqliteAgg("q"))},
		{"FULL JOIN", fmt.Sprintf(`SELECT %s, L.k, L.n, R.k, R.n FROM (%s) L FULL JOIN (%s) R
ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k AND L.n > 1`, ws, agg("r"), agg("q")),
			fmt.Sprintf("SELECT COALESCE(L.ws, R.ws), L.k, L.n, R.k, R.n FROM (%s) L FULL JOIN (%s) R ON L.ws = R.ws AND L.k = R.k AND L.n > 1", sqliteAgg("r"), sqliteAgg("q"))},
		{"LEFT JOIN", fmt.Sprintf(`SELECT %s, L.k, L.n, R.k, R.n FROM (%s) L LEFT JOIN (%s) R
ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k AND L.n > 1`, ws, agg("r"), agg("q")),
			fmt.Sprintf("SELECT COALESCE(L.ws, R.ws), L.k, L.n, R.k, R.n FROM (%s) L LEFT JOIN (%s) R ON L.ws = R.ws AND L.k = R.k AND L.n > 1", sqliteAgg("r"), sqliteAgg("q"))},
		{"window table functions RIGHT JOIN", fmt.Sprintf(`SELECT %s, L.k, L.v, R.k, R.v FROM %s L RIGHT JOIN %s R
ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k AND L.v < R.v`, ws, tvf("r"), tvf("q")),
			"SELECT COALESCE(L.ms / 60000, R.ms / 60000) * 60000, L.k, L.v, R.k, R.v FROM r L RIGHT JOIN q R ON L.ms / 60000 = R.ms / 60000 AND L.k = R.k AND L.v < R.v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := tables + "INSERT INTO p " + tc.clink + ";"
			if plan := planOf(t, script); !strings.Contains(plan, "WindowJoin(leftWindow=[TUMBLE(win_start=[window_start], win_end=[window_end], size=[1 min])]") {
				t.Fatalf("no WindowJoin in the plan:\n%s", plan)
			}
			out := run(t, script, 2)
			if strings.Contains(out, "-U") || strings.Contains(out, "-D") {
				t.Fatalf("a window join retracted rows:\n%s", out)
			}
			got := materialize(t, out)
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

// TestJoinRestore stops a join job after checkpoints and restores it: the
// filesystem sink commits exactly once, so the two runs together commit
// every joined row exactly once, and the restored run did not start over.
func TestJoinRestore(t *testing.T) {
	out := t.TempDir()
	script := fmt.Sprintf(`
CREATE TABLE l (id BIGINT, k AS id %% 50) WITH ('connector' = 'datagen', 'rows-per-second' = '300',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '400');
CREATE TABLE rr (id BIGINT, k AS id %% 50) WITH ('connector' = 'datagen', 'rows-per-second' = '300',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '300');
CREATE TABLE f (a BIGINT, b BIGINT) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO f SELECT l.id, rr.id FROM l JOIN rr ON l.k = rr.k AND l.id < rr.id + 200;`, out)
	var want []string
	for a := int64(1); a <= 400; a++ {
		for b := int64(1); b <= 300; b++ {
			if a%50 == b%50 && a < b+200 {
				want = append(want, fmt.Sprintf("%d,%d", a, b))
			}
		}
	}
	slices.Sort(want)
	checkRestoreMidway(t, script, out, want, 700*time.Millisecond)
}

// timedSequences declares tables l and rr of the restore tests: ids 1 to
// 300 at 300 rows a second, each at event time id * 100 ms (its
// watermark), keyed by id mod lmod and id mod rmod.
func timedSequences(lmod, rmod int) string {
	return fmt.Sprintf(`
CREATE TABLE l (id BIGINT, k AS id %% %d, ts AS CAST(TO_TIMESTAMP_LTZ(id * 100, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen', 'rows-per-second' = '300', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '300');
CREATE TABLE rr (id BIGINT, k AS id %% %d, ts AS CAST(TO_TIMESTAMP_LTZ(id * 100, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen', 'rows-per-second' = '300', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '300');`, lmod, rmod)
}

// TestOuterIntervalJoinRestore runs a LEFT interval join over rows in
// time order, whose watermark expires rows while the job runs, stops it
// after checkpoints and restores it: the exactly-once filesystem sink
// ends with every joined and every padded row once.
func TestOuterIntervalJoinRestore(t *testing.T) {
	out := t.TempDir()
	script := timedSequences(7, 5) + fmt.Sprintf(`
CREATE TABLE f (a BIGINT, b BIGINT) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO f SELECT l.id, rr.id FROM l LEFT JOIN rr ON l.k = rr.k AND l.ts BETWEEN rr.ts - INTERVAL '1' SECOND AND rr.ts + INTERVAL '0.5' SECOND;`, out)
	var want []string
	for a := int64(1); a <= 300; a++ {
		found := false
		for b := int64(1); b <= 300; b++ {
			if d := a - b; a%7 == b%5 && d >= -10 && d <= 5 {
				want = append(want, fmt.Sprintf("%d,%d", a, b))
				found = true
			}
		}
		if !found {
			want = append(want, fmt.Sprintf("%d,", a))
		}
	}
	slices.Sort(want)
	if plan := planOf(t, script); !strings.Contains(plan, "IntervalJoin(joinType=[LeftOuterJoin]") {
		t.Fatalf("no outer IntervalJoin in the plan:\n%s", plan)
	}
	checkRestoreMidway(t, script, out, want, 600*time.Millisecond)
}

// TestWindowOverIntervalJoin aggregates an interval join's output in
// tumbling windows of the left rowtime. The inputs are in time order and
// their watermarks follow them closely, so a joined row whose right row
// comes up to 2 s after its left one would be late for its window were the
// join's watermark not held back by the bound.
func TestWindowOverIntervalJoin(t *testing.T) {
	script := `
CREATE TABLE l (id BIGINT, k AS id % 4, ts AS CAST(TO_TIMESTAMP_LTZ(id * 100, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen', 'rows-per-second' = '1000', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '400');
CREATE TABLE rr (id BIGINT, k AS id % 3, ts AS CAST(TO_TIMESTAMP_LTZ(id * 100, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen', 'rows-per-second' = '1000', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '400');
CREATE TABLE p (we TIMESTAMP(3), n BIGINT, s BIGINT) WITH ('connector' = 'print');
CREATE VIEW j AS SELECT l.ts, l.id AS a, rr.id AS b FROM l JOIN rr ON l.k = rr.k AND l.ts BETWEEN rr.ts - INTERVAL '2' SECOND AND rr.ts;
INSERT INTO p SELECT window_end, COUNT(*), SUM(b) FROM TABLE(TUMBLE(TABLE j, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY window_start, window_end;`
	type agg struct{ n, s int64 }
	wins := map[int64]*agg{}
	for a := int64(1); a <= 400; a++ {
		for b := int64(1); b <= 400; b++ {
			if a%4 == b%3 && a <= b && a >= b-20 {
				end := (a*100/1000 + 1) * 1000
				if wins[end] == nil {
					wins[end] = &agg{}
				}
				wins[end].n++
				wins[end].s += b
			}
		}
	}
	var want []string
	for end, w := range wins {
		want = append(want, fmt.Sprintf("+I[%s, %d, %d]", types.Timestamp(end, 0, 3), w.n, w.s))
	}
	slices.Sort(want)
	got := lines(t, run(t, script, 2))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d windows, want %d\ngot:  %v\nwant: %v", len(got), len(want), got, want)
	}
}

// TestWindowJoinRestore runs a FULL window join of two window
// aggregations over rows in time order, so that windows are joined while
// the job runs, stops it after checkpoints and restores it: the
// exactly-once filesystem sink ends with every window's joined and padded
// rows once.
func TestWindowJoinRestore(t *testing.T) {
	out := t.TempDir()
	script := timedSequences(3, 4) + fmt.Sprintf(`
CREATE TABLE f (ws BIGINT, lk BIGINT, ln BIGINT, rk BIGINT, rn BIGINT) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO f
SELECT CAST(UNIX_TIMESTAMP(CAST(COALESCE(L.window_start, R.window_start) AS STRING)) AS BIGINT) * 1000, L.k, L.n, R.k, R.n
FROM (SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL '2' SECOND)) GROUP BY k, window_start, window_end) L
FULL JOIN (SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE rr, DESCRIPTOR(ts), INTERVAL '2' SECOND)) GROUP BY k, window_start, window_end) R
ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k;`, out)
	// The row count of each side per window start and key.
	count := func(mod int64) map[[2]int64]int64 {
		c := map[[2]int64]int64{}
		for id := int64(1); id <= 300; id++ {
			c[[2]int64{id * 100 / 2000 * 2000, id % mod}]++
		}
		return c
	}
	lc, rc := count(3), count(4)
	var want []string
	for wk, n := range lc {
		if m, ok := rc[wk]; ok {
			want = append(want, fmt.Sprintf("%d,%d,%d,%d,%d", wk[0], wk[1], n, wk[1], m))
		} else {
			want = append(want, fmt.Sprintf("%d,%d,%d,,", wk[0], wk[1], n))
		}
	}
	for wk, m := range rc {
		if _, ok := lc[wk]; !ok {
			want = append(want, fmt.Sprintf("%d,,,%d,%d", wk[0], wk[1], m))
		}
	}
	slices.Sort(want)
	if plan := planOf(t, script); !strings.Contains(plan, "WindowJoin(") {
		t.Fatalf("no WindowJoin in the plan:\n%s", plan)
	}
	checkRestoreMidway(t, script, out, want, 600*time.Millisecond)
}

// TestWindowJoinOfRowsRestore joins the rows of two TUMBLE window table
// functions per window and key (a WindowJoin that buffers each window's
// rows until the watermark passes its end), stops the job after
// checkpoints and restores it: the exactly-once filesystem sink ends with
// every pair once. The windows buffered at the checkpoint fire after the
// restore on timers set again from their rows, which are not
// checkpointed; without them those windows would never be joined.
func TestWindowJoinOfRowsRestore(t *testing.T) {
	out := t.TempDir()
	script := timedSequences(3, 4) + fmt.Sprintf(`
CREATE TABLE f (lid BIGINT, rid BIGINT) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO f
SELECT L.id, R.id
FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL '2' SECOND)) L
JOIN TABLE(TUMBLE(TABLE rr, DESCRIPTOR(ts), INTERVAL '2' SECOND)) R
ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k;`, out)
	var want []string
	for a := int64(1); a <= 300; a++ {
		for b := int64(1); b <= 300; b++ {
			if a*100/2000 == b*100/2000 && a%3 == b%4 {
				want = append(want, fmt.Sprintf("%d,%d", a, b))
			}
		}
	}
	slices.Sort(want)
	if plan := planOf(t, script); !strings.Contains(plan, "WindowJoin(") {
		t.Fatalf("no WindowJoin in the plan:\n%s", plan)
	}
	checkRestoreMidway(t, script, out, want, 600*time.Millisecond)
}

// TestWindowOverOuterIntervalJoin aggregates every type of interval join
// in tumbling windows of the left rowtime. Each left row comes at the
// last millisecond of its second, and the right rows run 5 s ahead in
// event time, so that the join's input watermark is a left row's rowtime
// most of the time. A left row padded with NULLs once its bound has
// passed is then the last row of its window; it must still be ahead of
// the join's watermark, or the window drops it as late. Left rows of key
// 0 meet right rows, of keys 1 and 2 none; right rows of key 3 meet no
// left row and are padded with a NULL rowtime, which no window takes.
func TestWindowOverOuterIntervalJoin(t *testing.T) {
	const n = 12
	bounds := []struct {
		cond   string
		lo, hi int64
	}{
		{"l.ts BETWEEN rr.ts AND rr.ts + INTERVAL '2' SECOND", 0, 2000},
		{"l.ts BETWEEN rr.ts - INTERVAL '2' SECOND AND rr.ts", -2000, 0},
		{"l.ts BETWEEN rr.ts + INTERVAL '1' SECOND AND rr.ts + INTERVAL '3' SECOND", 1000, 3000},
		{"l.ts BETWEEN rr.ts - INTERVAL '3' SECOND AND rr.ts - INTERVAL '1' SECOND", -3000, -1000},
	}
	for _, typ := range []string{"JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"} {
		for _, b := range bounds {
			script := fmt.Sprintf(`
CREATE TABLE l (id BIGINT, k AS id %% 3, ts AS CAST(TO_TIMESTAMP_LTZ(id * 1000 - 1, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen', 'rows-per-second' = '200', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '%d');
CREATE TABLE rr (id BIGINT, k AS id %% 2 * 3 %% 4, ts AS CAST(TO_TIMESTAMP_LTZ(id * 1000 + 5000, 3) AS TIMESTAMP(3)), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen', 'rows-per-second' = '200', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '%d');
CREATE TABLE p (we TIMESTAMP(3), n BIGINT) WITH ('connector' = 'print');
SET 'pipeline.auto-watermark-interval' = '1 ms';
CREATE VIEW j AS SELECT l.ts, l.id AS a, rr.id AS b FROM l %s rr ON l.k = rr.k AND %s;
INSERT INTO p SELECT window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE j, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY window_start, window_end;`,
				n, n, typ, b.cond)
			// Keys: left id%3 (0, 1, 2), right id%2*3%4 (0 or 3).
			wins := map[int64]int64{}
			for a := int64(1); a <= n; a++ {
				met := 0
				for r := int64(1); r <= n; r++ {
					if d := (a*1000 - 1) - (r*1000 + 5000); a%3 == r%2*3%4 && d >= b.lo && d <= b.hi {
						met++
					}
				}
				if met == 0 && (typ == "LEFT JOIN" || typ == "FULL JOIN") {
					met = 1
				}
				if met > 0 {
					wins[(a*1000-1)/1000*1000+1000] += int64(met)
				}
			}
			var want []string
			for end, c := range wins {
				want = append(want, fmt.Sprintf("+I[%s, %d]", types.Timestamp(end, 0, 3), c))
			}
			slices.Sort(want)
			for _, par := range []int{1, 2} {
				got := lines(t, run(t, script, par))
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s ON %s, parallelism %d: got %d windows, want %d\ngot:  %v\nwant: %v", typ, b.cond, par, len(got), len(want), got, want)
				}
			}
		}
	}
}

// checkRestoreMidway runs script at parallelism 2 until stopAfter, checks
// that its exactly-once file sink into out committed part of want, restores
// the job from its latest checkpoint and runs it to the end, and checks
// that out then holds exactly want (sorted).
func checkRestoreMidway(t *testing.T, script, out string, want []string, stopAfter time.Duration) {
	t.Helper()
	dir := t.TempDir()
	var first bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), stopAfter)
	defer cancel()
	if err := sql.Run(ctx, script, sql.Options{Parallelism: 2, CheckpointDir: dir, Stdout: &first, Stderr: &first}); err != nil {
		t.Fatalf("first run: %v\n%s", err, first.String())
	}
	before := len(committedRows(t, out))
	if before == 0 || before == len(want) {
		t.Fatalf("the first run committed %d of %d rows; the test needs a job stopped midway", before, len(want))
	}
	run2(t, script, dir)
	if got := committedRows(t, out); !slices.Equal(got, want) {
		t.Fatalf("after the restore %d rows are committed, want %d (first run: %d)\ngot:  %v\nwant: %v", len(got), len(want), before, got, want)
	}
	t.Logf("the first run committed %d of %d rows", before, len(want))
}

// TestJoinRetractDuplicatesRestore joins rows with an updating input whose
// rows come in duplicates (four groups per join key whose counts move in
// step) and are retracted one at a time; the job is stopped after some
// checkpoints and restored, and the upsert table ends with every join of
// the final rows counted once: a retraction removed one copy of a row,
// before and after the restore.
func TestJoinRetractDuplicatesRestore(t *testing.T) {
	table := fmt.Sprintf("clink_join_dup_%d", time.Now().UnixNano())
	pgTable(t, table, "v bigint PRIMARY KEY, cnt bigint NOT NULL, total bigint")
	script := fmt.Sprintf(`
CREATE TABLE l (id BIGINT, v AS id %% 3) WITH ('connector' = 'datagen', 'rows-per-second' = '300',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '300');
CREATE TABLE rr (id BIGINT, k AS id %% 12) WITH ('connector' = 'datagen', 'rows-per-second' = '300',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '600');
CREATE TABLE pg (v BIGINT, cnt BIGINT, total BIGINT, PRIMARY KEY (v) NOT ENFORCED) WITH (
  'connector' = 'postgres', 'url' = '%s', 'username' = 'postgres', 'table-name' = '%s');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO pg SELECT l.v, COUNT(*), SUM(c.n) FROM l
  LEFT JOIN (SELECT k %% 3 AS j, COUNT(*) AS n FROM rr GROUP BY k) c ON l.v = c.j GROUP BY l.v;`, jdbcURL(), table)
	dir := runStoppedMidway(t, script)
	run2(t, script, dir)
	// Each v has 100 left rows; its key j = v has four groups of 50 rows
	// at the end, so 400 joined rows of n = 50.
	want := []string{"0|400|20000", "1|400|20000", "2|400|20000"}
	if got := pgRows(t, "SELECT v, cnt, total FROM "+table); !slices.Equal(got, want) {
		t.Fatalf("table %v, want %v", got, want)
	}
}

// runStoppedMidway runs script on two subtasks for 800 ms, so that it stops
// midway, and returns its checkpoint directory, which holds at least one
// completed checkpoint.
func runStoppedMidway(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	var first bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	if err := sql.Run(ctx, script, sql.Options{Parallelism: 2, CheckpointDir: dir, Stdout: &first, Stderr: &first}); err != nil {
		t.Fatalf("first run: %v\n%s", err, first.String())
	}
	done, err := filepath.Glob(filepath.Join(dir, "COMPLETED-*"))
	if err != nil || len(done) == 0 {
		t.Fatalf("the first run completed no checkpoint (%v): the test needs a job stopped midway\n%s", err, first.String())
	}
	return dir
}
