package sql_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/sql"
)

// TestOverAggregateDifferentialSQLite runs OVER aggregates with ROWS and
// RANGE frames, bounded and unbounded, through clink (at parallelism 2)
// and SQLite over the same rows (none late, no equal times within a
// key) and compares every output row with its aggregates.
func TestOverAggregateDifferentialSQLite(t *testing.T) {
	d := newRankData(t, 1500, "7")
	for _, tc := range []struct {
		name, sink, clink, sqlite, window string
	}{
		{"rows 3 preceding", "(k INT, id BIGINT, x BIGINT, c BIGINT, s BIGINT, lo BIGINT, hi BIGINT, a BIGINT, n BIGINT)",
			"SELECT k, id, x, COUNT(x) OVER w3, SUM(x) OVER w3, MIN(x) OVER w3, MAX(x) OVER w3, AVG(x) OVER w3, COUNT(*) OVER w3 FROM r",
			"SELECT k, id, x, COUNT(x) OVER w3, SUM(x) OVER w3, MIN(x) OVER w3, MAX(x) OVER w3, CAST(AVG(x) OVER w3 AS INTEGER), COUNT(*) OVER w3 FROM r",
			"window=[ROWS BETWEEN 3 PRECEDING AND CURRENT ROW]"},
		{"rows current row", "(id BIGINT, s BIGINT, n BIGINT)",
			"SELECT id, SUM(x) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN CURRENT ROW AND CURRENT ROW), COUNT(*) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN CURRENT ROW AND CURRENT ROW) FROM r",
			"SELECT id, SUM(x) OVER (PARTITION BY k ORDER BY ms ROWS BETWEEN CURRENT ROW AND CURRENT ROW), COUNT(*) OVER (PARTITION BY k ORDER BY ms ROWS BETWEEN CURRENT ROW AND CURRENT ROW) FROM r",
			"window=[ROWS BETWEEN CURRENT ROW AND CURRENT ROW]"},
		{"range interval", "(k INT, id BIGINT, lo BIGINT, hi BIGINT, n BIGINT, s BIGINT)",
			"SELECT k, id, MIN(x) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '2000' SECOND PRECEDING AND CURRENT ROW), MAX(x) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '2000' SECOND PRECEDING AND CURRENT ROW), COUNT(*) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '2000' SECOND PRECEDING AND CURRENT ROW), SUM(x) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '2000' SECOND PRECEDING AND CURRENT ROW) FROM r WHERE id % 5 <> 0",
			"SELECT k, id, MIN(x) OVER w, MAX(x) OVER w, COUNT(*) OVER w, SUM(x) OVER w FROM r WHERE id % 5 <> 0 WINDOW w AS (PARTITION BY k ORDER BY ms RANGE BETWEEN 2000000 PRECEDING AND CURRENT ROW)",
			"window=[RANGE BETWEEN 2000000 PRECEDING AND CURRENT ROW]"},
		{"rows unbounded", "(k INT, id BIGINT, s BIGINT, hi BIGINT)",
			"SELECT k, id, SUM(x) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), MAX(x) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM r",
			"SELECT k, id, SUM(x) OVER w, MAX(x) OVER w FROM r WINDOW w AS (PARTITION BY k ORDER BY ms ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
			"window=[ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW]"},
		{"expression arguments", "(id BIGINT, s BIGINT, hi BIGINT)",
			"SELECT id, SUM(x * 2 + id) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW), MAX(-x) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW) FROM r",
			"SELECT id, SUM(x * 2 + id) OVER w, MAX(-x) OVER w FROM r WINDOW w AS (PARTITION BY k ORDER BY ms ROWS BETWEEN 5 PRECEDING AND CURRENT ROW)",
			"window=[ROWS BETWEEN 5 PRECEDING AND CURRENT ROW]"},
		{"range unbounded, no partition, in an expression", "(id BIGINT, n BIGINT)",
			"SELECT id, COUNT(x) OVER (ORDER BY ts) * 2 + 1 FROM r",
			"SELECT id, COUNT(x) OVER (ORDER BY ms RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) * 2 + 1 FROM r",
			"window=[RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := strings.ReplaceAll(tc.clink, "OVER w3", "OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)")
			script := d.script + "CREATE TABLE p " + tc.sink + " WITH ('connector' = 'print');\nINSERT INTO p " + q + ";"
			if plan := explain(t, script); !strings.Contains(plan, "OverAggregate(") || !strings.Contains(plan, tc.window) {
				t.Fatalf("no OverAggregate with %s in the plan:\n%s", tc.window, plan)
			}
			out := run(t, script, 2)
			if strings.Contains(out, "-U") || strings.Contains(out, "-D") || strings.Contains(out, "+U") {
				t.Fatalf("an OVER aggregate updated rows:\n%s", out)
			}
			got := materialize(t, out)
			sq := strings.ReplaceAll(tc.sqlite, "OVER w3", "OVER (PARTITION BY k ORDER BY ms ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)")
			want := queryRows(t, d.db, sq)
			if len(want) < 100 {
				t.Fatalf("the query selects %d rows: too few to prove anything", len(want))
			}
			if !slices.Equal(got, want) {
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						t.Fatalf("clink and SQLite differ (%d and %d rows); first difference: clink %s, sqlite %s", len(got), len(want), got[i], want[i])
					}
				}
				t.Fatalf("clink and SQLite differ: %d and %d rows", len(got), len(want))
			}
		})
	}
}

// TestOverAggregateRestore stops an OVER aggregation after a checkpoint,
// restores it and checks that both runs together print every row with
// the sum and count of its key's last three rows.
func TestOverAggregateRestore(t *testing.T) {
	script := `
CREATE TABLE t (id BIGINT, k AS id % 3, ts AS CAST(TO_TIMESTAMP_LTZ(id * 1000, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts) WITH (
  'connector' = 'datagen', 'rows-per-second' = '200',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '400');
CREATE TABLE p (k BIGINT, id BIGINT, s BIGINT, n BIGINT) WITH ('connector' = 'print');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO p
SELECT k, id, SUM(id) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),
  COUNT(*) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)
FROM t;`
	want := map[string]bool{}
	for id := int64(1); id <= 400; id++ {
		s, n := id, int64(1)
		for j := id - 3; j >= max(1, id-6); j -= 3 {
			s, n = s+j, n+1
		}
		want[fmt.Sprintf("+I[%d, %d, %d, %d]", id%3, id, s, n)] = true
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
			t.Errorf("printed %s, which is not a row with its aggregates", l)
		}
		got[l] = true
	}
	if len(got) != len(want) {
		t.Errorf("printed %d distinct rows, want %d", len(got), len(want))
	}
	t.Logf("first run printed %d rows, the restored one %d, of %d", len(lines(t, first.String())), len(lines(t, second)), len(want))
	if n := len(lines(t, second)); n == len(want) || n == 0 {
		t.Errorf("the restored run printed %d rows of %d: it did not restore from the middle", n, len(want))
	}
}

// TestOverAggregateDropsLateRows sends every 50th row with a time 100
// rows (half a second of arrival) behind: the watermark has passed it,
// so it is dropped, and the other rows' frames do not see it.
func TestOverAggregateDropsLateRows(t *testing.T) {
	script := `
CREATE TABLE t (id BIGINT, k AS id % 2,
  ts AS CAST(TO_TIMESTAMP_LTZ(CASE WHEN id % 50 = 0 THEN id - 100 ELSE id END * 1000, 3) AS TIMESTAMP(3)),
  WATERMARK FOR ts AS ts) WITH (
  'connector' = 'datagen', 'rows-per-second' = '200',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '101', 'fields.id.end' = '500');
CREATE TABLE p (k BIGINT, id BIGINT, s BIGINT) WITH ('connector' = 'print');
SET 'pipeline.auto-watermark-interval' = '10 ms';
INSERT INTO p
SELECT k, id, SUM(id) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t;`
	var want []string
	last := map[int64][]int64{}
	for id := int64(101); id <= 500; id++ {
		if id%50 == 0 {
			continue
		}
		k := id % 2
		last[k] = append(last[k], id)
		s := int64(0)
		for _, v := range last[k][max(0, len(last[k])-3):] {
			s += v
		}
		want = append(want, fmt.Sprintf("[%d, %d, %d]", k, id, s))
	}
	slices.Sort(want)
	got := materialize(t, run(t, script, 2))
	if !slices.Equal(got, want) {
		t.Fatalf("got %d rows, want %d:\n%v\nwant\n%v", len(got), len(want), got, want)
	}
}
