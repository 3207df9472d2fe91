package sql_test

import (
	"slices"
	"strings"
	"testing"
)

// TestUnionDifferentialSQLite unions three selections of random rows
// whose column types differ (and are widened), keeps duplicates or not,
// and unions updating inputs; the final results are compared with
// SQLite's.
func TestUnionDifferentialSQLite(t *testing.T) {
	d := newRankData(t, 2000, "3")
	for _, tc := range []struct {
		name, sink, clink, sqlite string
		updating                  bool
	}{
		{"three inputs", "(id BIGINT, k BIGINT, x BIGINT)",
			`SELECT id, k, x FROM r WHERE k < 3
UNION ALL SELECT id, CAST(k AS SMALLINT), CAST(x AS INT) FROM r WHERE k > 6
UNION ALL SELECT id + 10000, CAST(k AS BIGINT), x FROM r WHERE x > 40`,
			`SELECT id, k, x FROM r WHERE k < 3
UNION ALL SELECT id, k, x FROM r WHERE k > 6
UNION ALL SELECT id + 10000, k, x FROM r WHERE x > 40`, false},
		{"one input twice", "(k INT, x BIGINT)",
			"SELECT k, x FROM r WHERE k = 1 UNION ALL SELECT k, x FROM r WHERE k = 1",
			"SELECT k, x FROM r WHERE k = 1 UNION ALL SELECT k, x FROM r WHERE k = 1", false},
		{"union without all", "(k INT, s BIGINT)",
			"SELECT k, x / 10 FROM r WHERE x > 0 UNION SELECT k, x / 10 FROM r WHERE x < -30 UNION SELECT k, x / 10 FROM r WHERE k = 4",
			"SELECT k, x / 10 FROM r WHERE x > 0 UNION SELECT k, x / 10 FROM r WHERE x < -30 UNION SELECT k, x / 10 FROM r WHERE k = 4", true},
		{"updating inputs", "(k INT, n BIGINT)",
			`SELECT k, COUNT(*) FROM r GROUP BY k
UNION ALL SELECT k + 100, SUM(x) FROM r WHERE x IS NOT NULL GROUP BY k
UNION ALL SELECT k, id FROM r WHERE id <= 10`,
			`SELECT k, COUNT(*) FROM r GROUP BY k
UNION ALL SELECT k + 100, SUM(x) FROM r WHERE x IS NOT NULL GROUP BY k
UNION ALL SELECT k, id FROM r WHERE id <= 10`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := d.script + "CREATE TABLE p " + tc.sink + " WITH ('connector' = 'print');\nINSERT INTO p " + tc.clink + ";"
			if plan := explain(t, script); !strings.Contains(plan, "Union(all=[true]") {
				t.Fatalf("the plan has no Union:\n%s", plan)
			}
			out := run(t, script, 2)
			if !tc.updating {
				lines(t, out)
			}
			got := materialize(t, out)
			want := queryRows(t, d.db, tc.sqlite)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("clink and SQLite differ (%d and %d rows)\nclink:  %v\nsqlite: %v", len(got), len(want), got, want)
			}
		})
	}
}

// TestUnionRowtime windows the union of three tables with rowtimes: the
// union keeps the rowtime, and its watermark is the least of its inputs'.
func TestUnionRowtime(t *testing.T) {
	table := func(name, start, end, offset string) string {
		return `CREATE TABLE ` + name + ` (id BIGINT, ts AS CAST(TO_TIMESTAMP_LTZ((id + ` + offset + `) * 1000, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '` + start + `', 'fields.id.end' = '` + end + `');
`
	}
	// a: seconds 1..20, b: 5..14 (ids 1..10 plus 4), c: 20..29 as INT ids.
	script := table("a", "1", "20", "0") + table("b", "1", "10", "4") + table("c", "10", "19", "10") + `
CREATE TABLE p (ws TIMESTAMP(3), n BIGINT, s BIGINT) WITH ('connector' = 'print');
CREATE VIEW u AS SELECT id, ts FROM a UNION ALL SELECT id + 100, ts FROM b UNION ALL SELECT CAST(id AS INT), ts FROM c;
INSERT INTO p SELECT window_start, COUNT(*), SUM(id) FROM TABLE(TUMBLE(TABLE u, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end;`
	if plan := explain(t, script); !strings.Contains(plan, "WindowAggregate") || !strings.Contains(plan, "Union(all=[true], union=[id, ts])") {
		t.Fatalf("unexpected plan:\n%s", plan)
	}
	// [0,10): a 1..9 (9 rows, 45), b ids 1..5 at 5..9 (ids 101..105: 515);
	// [10,20): a 10..19 (145), b 6..10 (106..110: 540), c 10 at 20? no:
	// c's ids 10..19 sit at 20..29.
	want := []string{
		"+I[1970-01-01 00:00:00.000, 14, 560]",
		"+I[1970-01-01 00:00:10.000, 15, 685]",
		"+I[1970-01-01 00:00:20.000, 11, 165]",
	}
	for _, par := range []int{1, 2} {
		if got := lines(t, run(t, script, par)); !slices.Equal(got, want) {
			t.Errorf("parallelism %d:\n%s\nwant\n%s", par, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
