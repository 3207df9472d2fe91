package sql_test

import (
	"bytes"
	"context"
	dbsql "database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/connectors/datagen"
	"github.com/clinkstream/clink/sql"
	"github.com/clinkstream/clink/sql/types"
)

// run runs a script and returns what its print tables printed.
func run(t *testing.T, script string, parallelism int) string {
	t.Helper()
	var out bytes.Buffer
	err := sql.Run(context.Background(), script, sql.Options{Parallelism: parallelism, CheckpointDir: t.TempDir(), Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("running the script: %v\noutput:\n%s", err, out.String())
	}
	return out.String()
}

// materialize applies a printed changelog: the rows left after every
// retraction, sorted. It fails on a retraction of a row that is not there.
func materialize(t *testing.T, out string) []string {
	t.Helper()
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		if _, after, ok := strings.Cut(line, "> "); ok {
			line = after
		}
		kind, row := line[:2], line[2:]
		switch kind {
		case "+I", "+U":
			rows = append(rows, row)
		case "-U", "-D":
			i := slices.Index(rows, row)
			if i < 0 {
				t.Fatalf("retraction of %s, which is not in %v", row, rows)
			}
			rows = slices.Delete(rows, i, i+1)
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	slices.Sort(rows)
	return rows
}

const ids = `
CREATE TABLE t (id BIGINT, g AS id % 3) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '10');
`

func TestProjectionFilter(t *testing.T) {
	out := run(t, ids+`
CREATE TABLE p (id BIGINT, g BIGINT) WITH ('connector' = 'print');
INSERT INTO p SELECT id, g FROM t WHERE id > 7;`, 1)
	want := "+I[8, 2]\n+I[9, 0]\n+I[10, 1]\n"
	if out != want {
		t.Fatalf("printed\n%s\nwant\n%s", out, want)
	}
}

// TestGroupByRetractions checks the changelog of one group at parallelism
// 1, where it is deterministic, and the final result at parallelism 3.
func TestGroupByRetractions(t *testing.T) {
	script := ids + `
CREATE TABLE p (g BIGINT, n BIGINT, s BIGINT) WITH ('connector' = 'print');
INSERT INTO p SELECT g, COUNT(*), SUM(id) FROM t GROUP BY g;`
	out := run(t, script, 1)
	var g1 []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "[1, ") {
			g1 = append(g1, l)
		}
	}
	want := []string{"+I[1, 1, 1]", "-U[1, 1, 1]", "+U[1, 2, 5]", "-U[1, 2, 5]", "+U[1, 3, 12]", "-U[1, 3, 12]", "+U[1, 4, 22]"}
	if !slices.Equal(g1, want) {
		t.Errorf("changelog of group 1:\n%s\nwant\n%s", strings.Join(g1, "\n"), strings.Join(want, "\n"))
	}
	final := []string{"[0, 3, 18]", "[1, 4, 22]", "[2, 3, 15]"}
	for _, par := range []int{1, 3} {
		if got := materialize(t, run(t, script, par)); !slices.Equal(got, final) {
			t.Errorf("parallelism %d: final result %v, want %v", par, got, final)
		}
	}
}

// TestAggregateOfAggregate feeds updating input into a second aggregation,
// whose accumulators then retract; HAVING filters the updates.
func TestAggregateOfAggregate(t *testing.T) {
	out := run(t, ids+`
CREATE TABLE p (n BIGINT, groups BIGINT) WITH ('connector' = 'print');
CREATE VIEW per_group AS SELECT g, COUNT(*) AS n FROM t GROUP BY g;
INSERT INTO p SELECT n, COUNT(*) FROM per_group GROUP BY n HAVING COUNT(*) > 0;`, 2)
	if got, want := materialize(t, out), []string{"[3, 2]", "[4, 1]"}; !slices.Equal(got, want) {
		t.Fatalf("final result %v, want %v\n%s", got, want, out)
	}
}

func TestFilesystemSinkCommitsCSV(t *testing.T) {
	dir := t.TempDir()
	run(t, ids+fmt.Sprintf(`
CREATE TABLE f (id BIGINT, label STRING) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv', 'delivery_guarantee' = 'exactly_once');
INSERT INTO f SELECT id, CASE WHEN g = 0 THEN 'a,b' ELSE NULL END FROM t WHERE id <= 3;`, dir), 1)
	var lines []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
	slices.Sort(lines)
	want := []string{"1,", "2,", `3,"a,b"`}
	if !slices.Equal(lines, want) {
		t.Fatalf("committed lines %q, want %q", lines, want)
	}
}

func TestErrorsCarryPositions(t *testing.T) {
	for _, tc := range []struct{ script, want string }{
		{"CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen');\nINSERT INTO nope SELECT id FROM t;", "object 'nope' not found; known tables and views: t at line 2, column 13"},
		{"SELECT 1 +;", "line 1, column 11"},
		{"SET 'execution.checkpointing.interval' = 'soon';", "SET 'execution.checkpointing.interval': want a positive duration"},
		{"SET 'pipeline.auto-watermark-interval' = '0';", "SET 'pipeline.auto-watermark-interval': want a positive duration"},
	} {
		_, err := sql.Prepare(tc.script, sql.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.script, err, tc.want)
		}
	}
}

// TestDifferentialSQLite runs projections, filters and grouped aggregates
// over random datagen rows through clink and through SQLite, and compares
// the final results.
func TestDifferentialSQLite(t *testing.T) {
	const n = 2000
	table := fmt.Sprintf(`
CREATE TABLE r (k INT, x BIGINT, s STRING) WITH ('connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d', 'seed' = '7',
  'fields.k.min' = '0', 'fields.k.max' = '9', 'fields.x.min' = '-1000', 'fields.x.max' = '1000',
  'fields.x.null-rate' = '0.1', 'fields.s.length' = '2');
`, n)
	gen, err := datagen.New([]datagen.Field{{Name: "k", Type: types.IntType}, {Name: "x", Type: types.BigIntType}, {Name: "s", Type: types.StringType}},
		map[string]string{"seed": "7", "fields.k.min": "0", "fields.k.max": "9", "fields.x.min": "-1000", "fields.x.max": "1000", "fields.x.null-rate": "0.1", "fields.s.length": "2"})
	if err != nil {
		t.Fatal(err)
	}
	db := loadSQLite(t, gen, n, "CREATE TABLE r (k INTEGER, x INTEGER, s TEXT)", func(r types.Row) []any {
		return []any{r.Values[0].Int64(), nullableInt(r.Values[1]), r.Values[2].Str()}
	})
	for _, tc := range []struct{ sink, query string }{
		{"(k INT, y BIGINT)", "SELECT k, x * 2 + 1 FROM r WHERE x > 500 AND k <> 3"},
		{"(k INT, n BIGINT, c BIGINT, s BIGINT, lo BIGINT, hi BIGINT)", "SELECT k, COUNT(*), COUNT(x), SUM(x), MIN(x), MAX(x) FROM r GROUP BY k"},
		{"(k INT, n BIGINT)", "SELECT k, COUNT(DISTINCT s) FROM r WHERE x IS NOT NULL GROUP BY k HAVING SUM(x) > 0"},
		{"(s STRING)", "SELECT DISTINCT s FROM r WHERE k = 1"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			out := run(t, table+"CREATE TABLE p "+tc.sink+" WITH ('connector' = 'print');\nINSERT INTO p "+tc.query+";", 2)
			got := materialize(t, out)
			rows, err := db.Query(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			var want []string
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
				want = append(want, "["+strings.Join(parts, ", ")+"]")
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("clink and SQLite differ\nclink:  %v\nsqlite: %v", got, want)
			}
		})
	}
}

// loadSQLite returns an in-memory SQLite database whose table r (created
// by ddl) holds rows 0..n-1 of gen, each turned into insert arguments by
// args; a NULL BIGINT column becomes a SQL NULL through nullableInt.
func loadSQLite(t *testing.T, gen *datagen.Generator, n int64, ddl string, args func(r types.Row) []any) *dbsql.DB {
	t.Helper()
	db, err := dbsql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(ddl); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < n; i++ {
		a := args(gen.Row(i))
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(a)), ", ")
		if _, err := tx.Exec("INSERT INTO r VALUES ("+marks+")", a...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return db
}

// nullableInt is v as an insert argument: nil for NULL.
func nullableInt(v types.Value) any {
	if v.IsNull() {
		return nil
	}
	return v.Int64()
}

// TestSetBufferDebloat reads Flink's buffer-debloat keys into the job's
// options: a target, debloating off (a negative target, whatever target
// is set after), and back on at the default; bad values name the key.
func TestSetBufferDebloat(t *testing.T) {
	const target = "SET 'taskmanager.network.memory.buffer-debloat.target' = "
	const enabled = "SET 'taskmanager.network.memory.buffer-debloat.enabled' = "
	for _, tc := range []struct {
		script string
		want   time.Duration
	}{
		{"", 0},
		{target + "'200 ms';", 200 * time.Millisecond},
		{target + "'2s';", 2 * time.Second},
		{enabled + "'false';", -1},
		{enabled + "'false';\n" + target + "'200 ms';", -1},
		{target + "'200 ms';\n" + enabled + "'false';", -1},
		{enabled + "'false';\n" + enabled + "'true';", 0},
		{target + "'300ms';\n" + enabled + "'true';", 300 * time.Millisecond},
	} {
		job, err := sql.Prepare(tc.script, sql.Options{})
		if err != nil {
			t.Fatalf("%q: %v", tc.script, err)
		}
		if got := job.Options.BufferDebloatTarget; got != tc.want {
			t.Errorf("%q: BufferDebloatTarget %v, want %v", tc.script, got, tc.want)
		}
	}
	for _, tc := range []struct{ script, want string }{
		{target + "'0';", "SET 'taskmanager.network.memory.buffer-debloat.target': want a positive duration"},
		{target + "'soon';", "SET 'taskmanager.network.memory.buffer-debloat.target': want a positive duration"},
		{enabled + "'maybe';", "SET 'taskmanager.network.memory.buffer-debloat.enabled': want true or false"},
	} {
		if _, err := sql.Prepare(tc.script, sql.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.script, err, tc.want)
		}
	}
}

// TestSetKeyedChaining: at parallelism 1 a GROUP BY is chained to its
// source's task unless 'clink.operator-chaining.keyed' is false, when it
// gets a task (and a snapshot file) of its own; either way the job's
// result is the same.
func TestSetKeyedChaining(t *testing.T) {
	const script = `SET 'clink.operator-chaining.keyed' = '%s';
CREATE TABLE src (k BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '1000',
  'fields.k.kind' = 'sequence', 'fields.k.start' = '1', 'fields.k.end' = '1000');
CREATE TABLE out (m BIGINT, c BIGINT) WITH ('connector' = 'print');
INSERT INTO out SELECT k %% 4, COUNT(*) FROM src GROUP BY k %% 4;
`
	for _, c := range []struct {
		value string
		tasks int
	}{{"true", 1}, {"false", 2}} {
		dir := t.TempDir()
		var out bytes.Buffer
		if err := sql.Run(context.Background(), fmt.Sprintf(script, c.value), sql.Options{Parallelism: 1, CheckpointDir: dir, Stdout: &out, Stderr: &out}); err != nil {
			t.Fatalf("%s: %v", c.value, err)
		}
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		id, err := st.Resolve("latest")
		if err != nil {
			t.Fatalf("%s: %v", c.value, err)
		}
		names, err := st.TaskNames(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != c.tasks {
			t.Errorf("keyed chaining %s: the checkpoint holds the snapshots of tasks %v, want %d tasks", c.value, names, c.tasks)
		}
		for m := range 4 {
			if want := fmt.Sprintf("+U[%d, 250]", m); !strings.Contains(out.String(), want) {
				t.Errorf("keyed chaining %s: the output lacks %s:\n%s", c.value, want, out.String())
			}
		}
	}
	if _, err := sql.Prepare(fmt.Sprintf(script, "maybe"), sql.Options{}); err == nil || !strings.Contains(err.Error(), "SET 'clink.operator-chaining.keyed': want true or false") {
		t.Errorf("a bad value: error %v, want the key named", err)
	}
}
