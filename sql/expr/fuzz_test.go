package expr

import (
	"testing"

	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/types"
)

// FuzzCompileEval compiles and evaluates any expression the parser
// accepts: errors are fine, panics are not.
func FuzzCompileEval(f *testing.F) {
	for _, s := range []string{
		"price * 0.908", "CASE WHEN price > 10 THEN 'a' ELSE channel END", "DATE_FORMAT(dateTime, 'yyyy-MM-dd HH:mm')",
		"CAST(channel AS DECIMAL(5, 2))", "TRY_CAST(d AS TINYINT)", "SUBSTRING(channel FROM -2 FOR 9)", "channel LIKE '%a_b%'",
		"ROUND(f, -3)", "EXTRACT(WEEK FROM dt)", "FLOOR(ltz TO QUARTER)", "price IN (1, nb, 3)", "d / (d - d)",
		"-9223372036854775808", "CAST(99999999999999999999999999999999999999 AS DECIMAL(38, 0)) * 10",
		"REGEXP_EXTRACT(channel, '(o+)', 1)", "TO_TIMESTAMP('2020-01-01', 'yyyy-MM-dd')", "COALESCE(nb, i, 1) % 0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		e, err := parser.ParseExpr(sql)
		if err != nil {
			return
		}
		c, err := Compile(e, testScope)
		if err != nil {
			return
		}
		v, err := c.Eval(testRow)
		if err != nil {
			return
		}
		nulls := make([]types.Value, len(testRow))
		for i := range nulls {
			nulls[i] = types.Null
		}
		nulls[0] = types.Int64(0) // auction is NOT NULL
		_, _ = c.Eval(nulls)
		if !v.IsNull() && c.Type.Kind != types.KindNull {
			_ = v.String()
		}
		if v.IsNull() && c.Type.NotNull && c.Type.Kind != types.KindDecimal {
			t.Fatalf("%s: NOT NULL type %s gave NULL", sql, c.Type)
		}
	})
}
