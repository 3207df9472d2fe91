package sql_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestCalcWritesIntoWindowRows runs Calcs of several shapes after a TUMBLE
// and a HOP (sliced) aggregation, whose result rows a Calc may overwrite
// with its output (a row is made for its window alone): a permutation that
// reads slots an earlier projection wrote, a filter with computed values,
// an output wider than the window's row, and a window result read by two
// queries, which neither may write into, and rows a Rank keeps; with a
// watermark that lets one key fire many windows at once, their rows cut
// from shared blocks. The output must be what the query says, at
// parallelism 1 and 2.
func TestCalcWritesIntoWindowRows(t *testing.T) {
	for _, win := range []struct {
		name, tvf string
		starts    func(a int64) []int64 // the starts of a's windows
		wm        string                // the watermark of ts
		n         int64                 // rows
	}{
		{"tumble", "TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '0.005' SECOND)",
			func(a int64) []int64 { return []int64{a / 5 * 5} }, "ts", 40},
		{"hop", "HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '0.005' SECOND, INTERVAL '0.01' SECOND)",
			func(a int64) []int64 { return []int64{a/5*5 - 5, a / 5 * 5} }, "ts", 40},
		{"tumble, fired together", "TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '0.005' SECOND)",
			func(a int64) []int64 { return []int64{a / 5 * 5} }, "ts - INTERVAL '1' SECOND", 400},
	} {
		t.Run(win.name, func(t *testing.T) { testCalcIntoWindowRows(t, win.tvf, win.starts, win.wm, win.n) })
	}
}

func testCalcIntoWindowRows(t *testing.T, tvf string, starts func(a int64) []int64, wm string, n int64) {
	table := `
CREATE TABLE t (a BIGINT, k AS a % 3, ts AS TO_TIMESTAMP_LTZ(a, 3), WATERMARK FOR ts AS ` + wm + `) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0',
  'fields.a.kind' = 'sequence', 'fields.a.start' = '1', 'fields.a.end' = '` + fmt.Sprint(n) + `');
CREATE VIEW w AS SELECT k, COUNT(*) AS c, SUM(a) AS s, window_start AS ws
  FROM TABLE(` + tvf + `)
  GROUP BY k, window_start, window_end;
`
	// Per key and window start, the count and the sum of a.
	type win struct{ k, ws int64 }
	type agg struct{ c, s int64 }
	wins := map[win]agg{}
	for a := int64(1); a <= n; a++ {
		for _, ws := range starts(a) {
			w := win{a % 3, ws}
			g := wins[w]
			wins[w] = agg{g.c + 1, g.s + a}
		}
	}
	// row formats values as the print sink does; rows lists f's row of
	// every window ("" when f filters the window out), sorted.
	row := func(vs ...any) string {
		s := make([]string, len(vs))
		for i, v := range vs {
			s[i] = fmt.Sprint(v)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	rows := func(f func(w win, g agg) string) []string {
		var out []string
		for w, g := range wins {
			if r := f(w, g); r != "" {
				out = append(out, r)
			}
		}
		slices.Sort(out)
		return out
	}
	ts := func(ms int64) string {
		if ms < 0 {
			return fmt.Sprintf("1969-12-31 23:59:59.%03d", 1000+ms)
		}
		return fmt.Sprintf("1970-01-01 00:00:00.%03d", ms) // ms < 1000
	}
	// latest[k] is the second latest window start of key k.
	latest := map[int64][2]int64{}
	for w := range wins {
		l, ok := latest[w.k]
		switch {
		case !ok:
			l = [2]int64{w.ws, w.ws - 1000}
		case w.ws > l[0]:
			l = [2]int64{w.ws, l[0]}
		case w.ws > l[1]:
			l[1] = w.ws
		}
		latest[w.k] = l
	}
	for _, tc := range []struct {
		name, sink, query string
		want              func(w win, g agg) string
	}{
		{"kept by a rank", "(x BIGINT, y BIGINT, z BIGINT, v TIMESTAMP(3))",
			"SELECT k, c, s, ws FROM (SELECT k, c, s, ws, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ws DESC) AS rn FROM w) WHERE rn <= 2",
			func(w win, g agg) string {
				if w.ws < latest[w.k][1] {
					return ""
				}
				return row(w.k, g.c, g.s, ts(w.ws))
			}},
		{"permuted", "(x BIGINT, y BIGINT, z BIGINT, v TIMESTAMP(3))", "SELECT s, k, c, ws FROM w",
			func(w win, g agg) string { return row(g.s, w.k, g.c, ts(w.ws)) }},
		{"computed, filtered", "(x BIGINT, v TIMESTAMP(3))", "SELECT c * 100 + k, ws FROM w WHERE s > 20",
			func(w win, g agg) string {
				if g.s <= 20 {
					return ""
				}
				return row(g.c*100+w.k, ts(w.ws))
			}},
		{"wider", "(a BIGINT, b BIGINT, c BIGINT, d BIGINT, e BIGINT, f BIGINT, g BIGINT, h BIGINT, v TIMESTAMP(3))",
			"SELECT k, c, s, c + s, c * s, s - c, k * 1000, s * 2, ws FROM w",
			func(w win, g agg) string {
				return row(w.k, g.c, g.s, g.c+g.s, g.c*g.s, g.s-g.c, w.k*1000, g.s*2, ts(w.ws))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := rows(tc.want)
			script := table + "CREATE TABLE p " + tc.sink + " WITH ('connector' = 'print');\nINSERT INTO p " + tc.query + ";"
			for _, par := range []int{1, 2} {
				if got := materialize(t, run(t, script, par)); !slices.Equal(got, want) {
					t.Errorf("parallelism %d:\ngot  %v\nwant %v", par, got, want)
				}
			}
		})
	}
	t.Run("read by two queries", func(t *testing.T) {
		out := run(t, table+`
CREATE TABLE a (x BIGINT, y BIGINT) WITH ('connector' = 'print', 'print-identifier' = 'a');
CREATE TABLE b (x BIGINT, y BIGINT, z BIGINT) WITH ('connector' = 'print', 'print-identifier' = 'b');
INSERT INTO a SELECT s, k FROM w;
INSERT INTO b SELECT c * 1000, s, k FROM w;`, 1)
		a, b := printedAB(t, out)
		slices.Sort(a)
		slices.Sort(b)
		wantA := rows(func(w win, g agg) string { return "+I" + row(g.s, w.k) })
		wantB := rows(func(w win, g agg) string { return "+I" + row(g.c*1000, g.s, w.k) })
		if !slices.Equal(a, wantA) {
			t.Errorf("a printed %v, want %v", a, wantA)
		}
		if !slices.Equal(b, wantB) {
			t.Errorf("b printed %v, want %v", b, wantB)
		}
	})
}
