package expr

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/types"
)

// The differential test evaluates random expressions with clink and with
// SQLite over the same rows and compares the results. The generator stays
// inside the part of SQL where the two agree:
//
//   - integers are BIGINT columns and small literals (SQLite integers are
//     64-bit; clink's INT literals wrap at 32 bits as Java's do, so values
//     stay small); no division or modulo by an expression that may be zero
//     (Flink fails, SQLite gives NULL);
//   - booleans print as 1/0 (SQLite has none);
//   - LIKE runs with case_sensitive_like (SQLite folds ASCII case
//     otherwise), patterns without ESCAPE;
//   - SUBSTR starts at 1 or later with a non-negative length (the two
//     disagree on start <= 0);
//   - CHAR_LENGTH is SQLite's LENGTH, IS DISTINCT FROM is IS NOT;
//   - strings are compared in UTF-8 byte order in both.
//
// Excluded: DECIMAL and DOUBLE arithmetic (SQLite computes in double),
// CAST (different rules), date/time functions, REGEXP_EXTRACT, SPLIT_INDEX,
// CONCAT (SQLite's CONCAT skips NULLs; clink's, as Flink's, does not).

type gen struct {
	r     *rand.Rand
	depth int
}

// pair is one expression in both dialects.
type pair struct{ flink, lite string }

func same(s string) pair { return pair{s, s} }

func (g *gen) pick(n int) int { return g.r.IntN(n) }

func (g *gen) intExpr(d int) pair {
	if d <= 0 || g.pick(3) == 0 {
		switch g.pick(3) {
		case 0:
			return same([]string{"a", "b"}[g.pick(2)])
		case 1:
			return same(fmt.Sprint(g.pick(10)))
		default:
			return same("CHAR_LENGTH(s)").lite2("LENGTH(s)")
		}
	}
	x, y := g.intExpr(d-1), g.intExpr(d-1)
	switch g.pick(10) {
	case 0:
		return bin(x, "+", y)
	case 1:
		return bin(x, "-", y)
	case 2:
		return bin(x, "*", y)
	case 3:
		return bin(x, "/", same(fmt.Sprint([]int{1, 2, 3, -4, 7}[g.pick(5)])))
	case 4:
		return bin(x, "%", same(fmt.Sprint([]int{1, 2, 3, -4, 7}[g.pick(5)])))
	case 5:
		return call("ABS", x)
	case 6:
		return call("COALESCE", x, y)
	case 7:
		return call("NULLIF", x, y)
	case 8:
		c := g.boolExpr(d - 1)
		return pair{"CASE WHEN " + c.flink + " THEN " + x.flink + " ELSE " + y.flink + " END",
			"CASE WHEN " + c.lite + " THEN " + x.lite + " ELSE " + y.lite + " END"}
	default:
		return pair{"(-" + x.flink + ")", "(-" + x.lite + ")"}
	}
}

func (p pair) lite2(l string) pair { return pair{p.flink, l} }

func bin(x pair, op string, y pair) pair {
	return pair{"(" + x.flink + " " + op + " " + y.flink + ")", "(" + x.lite + " " + op + " " + y.lite + ")"}
}

func call(name string, args ...pair) pair {
	var f, l []string
	for _, a := range args {
		f, l = append(f, a.flink), append(l, a.lite)
	}
	return pair{name + "(" + strings.Join(f, ", ") + ")", name + "(" + strings.Join(l, ", ") + ")"}
}

func (g *gen) strExpr(d int) pair {
	if d <= 0 || g.pick(3) == 0 {
		switch g.pick(3) {
		case 0, 1:
			return same([]string{"s", "t"}[g.pick(2)])
		default:
			return same("'" + g.word() + "'")
		}
	}
	x := g.strExpr(d - 1)
	switch g.pick(8) {
	case 0:
		return call("UPPER", x)
	case 1:
		return call("LOWER", x)
	case 2:
		return call("SUBSTR", x, same(fmt.Sprint(1+g.pick(3))), same(fmt.Sprint(g.pick(4))))
	case 3:
		return bin(x, "||", g.strExpr(d-1))
	case 4:
		return call("REPLACE", x, same("'"+g.word()+"x'"), same("'"+g.word()+"'"))
	case 5:
		return call([]string{"TRIM", "LTRIM", "RTRIM"}[g.pick(3)], x)
	case 6:
		return call("COALESCE", x, g.strExpr(d-1))
	default:
		c := g.boolExpr(d - 1)
		y := g.strExpr(d - 1)
		return pair{"CASE WHEN " + c.flink + " THEN " + x.flink + " ELSE " + y.flink + " END",
			"CASE WHEN " + c.lite + " THEN " + x.lite + " ELSE " + y.lite + " END"}
	}
}

func (g *gen) word() string {
	const alphabet = "abAB "
	n := g.pick(4)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(alphabet[g.pick(len(alphabet))])
	}
	return b.String()
}

func (g *gen) boolExpr(d int) pair {
	cmp := []string{"=", "<>", "<", "<=", ">", ">="}[g.pick(6)]
	if d <= 0 {
		return bin(g.intExpr(0), cmp, g.intExpr(0))
	}
	switch g.pick(10) {
	case 0:
		return bin(g.intExpr(d-1), cmp, g.intExpr(d-1))
	case 1:
		return bin(g.strExpr(d-1), cmp, g.strExpr(d-1))
	case 2:
		return bin(g.boolExpr(d-1), "AND", g.boolExpr(d-1))
	case 3:
		return bin(g.boolExpr(d-1), "OR", g.boolExpr(d-1))
	case 4:
		x := g.boolExpr(d - 1)
		return pair{"(NOT " + x.flink + ")", "(NOT " + x.lite + ")"}
	case 5:
		x, lo, hi := g.intExpr(d-1), g.intExpr(0), g.intExpr(0)
		not := []string{"", " NOT"}[g.pick(2)]
		return pair{"(" + x.flink + not + " BETWEEN " + lo.flink + " AND " + hi.flink + ")",
			"(" + x.lite + not + " BETWEEN " + lo.lite + " AND " + hi.lite + ")"}
	case 6:
		x, a, b := g.intExpr(d-1), g.intExpr(0), g.intExpr(0)
		not := []string{"", " NOT"}[g.pick(2)]
		return pair{"(" + x.flink + not + " IN (" + a.flink + ", " + b.flink + ", NULL, 3))",
			"(" + x.lite + not + " IN (" + a.lite + ", " + b.lite + ", NULL, 3))"}
	case 7:
		x := g.intExpr(d - 1)
		not := []string{"", " NOT"}[g.pick(2)]
		return pair{"(" + x.flink + " IS" + not + " NULL)", "(" + x.lite + " IS" + not + " NULL)"}
	case 8:
		x := g.strExpr(d - 1)
		pat := strings.NewReplacer("A", "%", "B", "_").Replace(g.word())
		not := []string{"", " NOT"}[g.pick(2)]
		return pair{"(" + x.flink + not + " LIKE '" + pat + "')", "(" + x.lite + not + " LIKE '" + pat + "')"}
	default:
		x, y := g.intExpr(d-1), g.intExpr(d-1)
		if g.pick(2) == 0 {
			return pair{"(" + x.flink + " IS DISTINCT FROM " + y.flink + ")", "(" + x.lite + " IS NOT " + y.lite + ")"}
		}
		return pair{"(" + x.flink + " IS NOT DISTINCT FROM " + y.flink + ")", "(" + x.lite + " IS " + y.lite + ")"}
	}
}

func TestDifferentialSQLite(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("PRAGMA case_sensitive_like = ON; CREATE TABLE r (id INTEGER, a INTEGER, b INTEGER, s TEXT, t TEXT)"); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	g := &gen{r: rng}
	var rows [][]types.Value
	for id := 0; id < 12; id++ {
		row := []types.Value{types.Int64(int64(id))}
		var args []any
		for c := 0; c < 2; c++ {
			if rng.IntN(5) == 0 {
				row, args = append(row, types.Null), append(args, nil)
			} else {
				v := int64(rng.IntN(41) - 20)
				row, args = append(row, types.Int64(v)), append(args, v)
			}
		}
		for c := 0; c < 2; c++ {
			if rng.IntN(5) == 0 {
				row, args = append(row, types.Null), append(args, nil)
			} else {
				w := g.word()
				row, args = append(row, types.String(w)), append(args, w)
			}
		}
		if _, err := db.Exec("INSERT INTO r VALUES (?, ?, ?, ?, ?)", append([]any{id}, args...)...); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	scope := NewTable("r",
		types.Field{Name: "id", Type: types.BigIntType}, types.Field{Name: "a", Type: types.BigIntType},
		types.Field{Name: "b", Type: types.BigIntType}, types.Field{Name: "s", Type: types.StringType},
		types.Field{Name: "t", Type: types.StringType})
	n := 1500
	if testing.Short() {
		n = 200
	}
	compared := 0
	for i := 0; i < n; i++ {
		var p pair
		switch i % 3 {
		case 0:
			p = g.intExpr(3)
		case 1:
			p = g.strExpr(3)
		default:
			p = g.boolExpr(3)
		}
		e, err := parser.ParseExpr(p.flink)
		if err != nil {
			t.Fatalf("%s: %v", p.flink, err)
		}
		c, err := Compile(e, scope)
		if err != nil {
			t.Fatalf("%s: %v", p.flink, err)
		}
		res, err := db.Query("SELECT id, " + p.lite + " FROM r ORDER BY id")
		if err != nil {
			t.Fatalf("sqlite %s: %v", p.lite, err)
		}
		for res.Next() {
			var id int64
			var lite any
			if err := res.Scan(&id, &lite); err != nil {
				t.Fatal(err)
			}
			v, err := c.Eval(rows[id])
			if err != nil {
				t.Fatalf("%s on row %d: %v", p.flink, id, err)
			}
			got := liteString(v)
			want := "NULL"
			switch x := lite.(type) {
			case int64:
				want = fmt.Sprint(x)
			case string:
				want = x
			case []byte:
				want = string(x)
			case nil:
			default:
				want = fmt.Sprint(x)
			}
			if got != want {
				t.Fatalf("row %d: %s\n clink:  %s\n sqlite: %s (%s)", id, p.flink, got, want, p.lite)
			}
			compared++
		}
		res.Close()
	}
	t.Logf("compared %d results of %d expressions", compared, n)
}

func liteString(v types.Value) string {
	if v.IsNull() {
		return "NULL"
	}
	if v.Kind() == types.KindBoolean {
		if v.Bool() {
			return "1"
		}
		return "0"
	}
	return v.String()
}
