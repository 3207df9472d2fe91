package sql_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestCalcWritesIntoOwnedRows runs Calcs of every shape over datagen rows,
// which a Calc may overwrite with its output (the row is made for that
// record alone): permutations that read a slot an earlier projection
// wrote, one computed value among columns that move, outputs wider than
// the input, merged Calcs with scratch rows, a Calc after a watermark
// assigner. The output must be what the query
// says, at parallelism 1 and 2.
func TestCalcWritesIntoOwnedRows(t *testing.T) {
	const table = `
CREATE TABLE t (a BIGINT, b BIGINT, ts AS TO_TIMESTAMP_LTZ(a, 3), WATERMARK FOR ts AS ts) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0',
  'fields.a.kind' = 'sequence', 'fields.a.start' = '1', 'fields.a.end' = '20',
  'fields.b.kind' = 'sequence', 'fields.b.start' = '101', 'fields.b.end' = '120');
CREATE TABLE u (a BIGINT, b BIGINT) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0',
  'fields.a.kind' = 'sequence', 'fields.a.start' = '1', 'fields.a.end' = '20',
  'fields.b.kind' = 'sequence', 'fields.b.start' = '101', 'fields.b.end' = '120');
`
	for _, tc := range []struct {
		name, sink, query string
		want              func(a, b int64) []int64 // nil: filtered out
	}{
		{"swap", "(x BIGINT, y BIGINT)", "SELECT b, a FROM u",
			func(a, b int64) []int64 { return []int64{b, a} }},
		{"computed first", "(x BIGINT, y BIGINT)", "SELECT a + b, b FROM u",
			func(a, b int64) []int64 { return []int64{a + b, b} }},
		{"reads a written slot", "(x BIGINT, y BIGINT, z BIGINT)", "SELECT b, a * 2, b - a FROM u",
			func(a, b int64) []int64 { return []int64{b, a * 2, b - a} }},
		{"wider, filtered", "(w BIGINT, x BIGINT, y BIGINT, z BIGINT)", "SELECT a, b, a + b, a * b FROM u WHERE a > 3",
			func(a, b int64) []int64 {
				if a <= 3 {
					return nil
				}
				return []int64{a, b, a + b, a * b}
			}},
		{"narrower", "(y BIGINT)", "SELECT b FROM u WHERE a % 3 = 0",
			func(a, b int64) []int64 {
				if a%3 != 0 {
					return nil
				}
				return []int64{b}
			}},
		{"merged", "(y BIGINT, c BIGINT)", "SELECT b, c FROM (SELECT b, a, a * 2 AS c FROM u WHERE a % 2 = 0) WHERE c > 10",
			func(a, b int64) []int64 {
				if a%2 != 0 || a*2 <= 10 {
					return nil
				}
				return []int64{b, a * 2}
			}},
		{"merged, then unchanged", "(x BIGINT, y BIGINT)", "SELECT * FROM (SELECT b AS x, a AS y FROM u) WHERE y > 15",
			func(a, b int64) []int64 {
				if a <= 15 {
					return nil
				}
				return []int64{b, a}
			}},
		{"columns kept in place, one computed", "(x BIGINT, y BIGINT, z BIGINT)", "SELECT a, b, a * 10 + b FROM u",
			func(a, b int64) []int64 { return []int64{a, b, a*10 + b} }},
		{"a copied column over a slot read later", "(x BIGINT, y BIGINT, z BIGINT)", "SELECT a, a, a * 10 + b FROM u",
			func(a, b int64) []int64 { return []int64{a, a, a*10 + b} }},
		{"a computed column over a slot read later", "(x BIGINT, y BIGINT, z BIGINT)", "SELECT a, b + 1, a * 10 + b FROM u",
			func(a, b int64) []int64 { return []int64{a, b + 1, a*10 + b} }},
		{"one computed from a slot a column overwrites", "(x BIGINT, y BIGINT)", "SELECT b, a * 10 FROM u",
			func(a, b int64) []int64 { return []int64{b, a * 10} }},
		{"one computed after a column copied twice", "(x BIGINT, y BIGINT, z BIGINT)", "SELECT b, b, a * 10 FROM u",
			func(a, b int64) []int64 { return []int64{b, b, a * 10} }},
		{"one computed after a swap", "(x BIGINT, y BIGINT, z BIGINT)", "SELECT b, a, b * 10 FROM u",
			func(a, b int64) []int64 { return []int64{b, a, b * 10} }},
		{"after a watermark assigner", "(x BIGINT, y BIGINT, z BIGINT)", "SELECT b, a, a * 10 FROM t WHERE b <> 110",
			func(a, b int64) []int64 {
				if b == 110 {
					return nil
				}
				return []int64{b, a, a * 10}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for a := int64(1); a <= 20; a++ {
				if vs := tc.want(a, a+100); vs != nil {
					want = append(want, strings.ReplaceAll(fmt.Sprint(vs), " ", ", "))
				}
			}
			slices.Sort(want)
			script := table + "CREATE TABLE p " + tc.sink + " WITH ('connector' = 'print');\nINSERT INTO p " + tc.query + ";"
			for _, par := range []int{1, 2} {
				if got := materialize(t, run(t, script, par)); !slices.Equal(got, want) {
					t.Errorf("parallelism %d:\ngot  %v\nwant %v", par, got, want)
				}
			}
		})
	}
}

// TestCalcLeavesSharedAndKeptRows checks that a Calc does not write into
// rows that others still read: rows a scan hands to two queries, and rows
// a deduplication keeps in state and retracts later (a Calc that wrote its
// output into the kept row would turn the retraction into a different
// row).
func TestCalcLeavesSharedAndKeptRows(t *testing.T) {
	const table = `
CREATE TABLE t (id BIGINT, k AS id % 2, ts AS TO_TIMESTAMP_LTZ(id, 3), WATERMARK FOR ts AS ts) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '4');
`
	t.Run("shared scan", func(t *testing.T) {
		out := run(t, table+`
CREATE TABLE a (x BIGINT, y BIGINT) WITH ('connector' = 'print', 'print-identifier' = 'a');
CREATE TABLE b (x BIGINT, y BIGINT, z BIGINT) WITH ('connector' = 'print', 'print-identifier' = 'b');
INSERT INTO a SELECT k, id FROM t;
INSERT INTO b SELECT id * 100, k, id FROM t;`, 1)
		a, b := printedAB(t, out)
		if want := []string{"+I[1, 1]", "+I[0, 2]", "+I[1, 3]", "+I[0, 4]"}; !slices.Equal(a, want) {
			t.Errorf("a printed %v, want %v", a, want)
		}
		if want := []string{"+I[100, 1, 1]", "+I[200, 0, 2]", "+I[300, 1, 3]", "+I[400, 0, 4]"}; !slices.Equal(b, want) {
			t.Errorf("b printed %v, want %v", b, want)
		}
	})
	t.Run("kept by a deduplication", func(t *testing.T) {
		out := run(t, table+`
CREATE TABLE p (x BIGINT, y BIGINT) WITH ('connector' = 'print');
INSERT INTO p SELECT k * 10, id FROM (
  SELECT id, k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1;`, 1)
		want := "+I[10, 1]\n+I[0, 2]\n-U[10, 1]\n+U[10, 3]\n-U[0, 2]\n+U[0, 4]\n"
		if out != want {
			t.Errorf("printed\n%s\nwant\n%s", out, want)
		}
	})
}

// printedAB splits the output of print tables with the identifiers a and
// b into each one's lines, without the prefix; any other line fails t.
func printedAB(t *testing.T, out string) (a, b []string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(l, "a> "):
			a = append(a, strings.TrimPrefix(l, "a> "))
		case strings.HasPrefix(l, "b> "):
			b = append(b, strings.TrimPrefix(l, "b> "))
		default:
			t.Fatalf("unexpected line %q", l)
		}
	}
	return a, b
}
