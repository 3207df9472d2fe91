package expr

import (
	"testing"

	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/types"
)

// The Nexmark bid projection shapes: q1 (price * 0.908 on BIGINT), a CASE
// (q? price bands), DATE_FORMAT (q10), a filter (q2).
func benchExpr(b *testing.B, sql string) {
	e, err := parser.ParseExpr(sql)
	if err != nil {
		b.Fatal(err)
	}
	c, err := Compile(e, testScope)
	if err != nil {
		b.Fatal(err)
	}
	row := append([]types.Value(nil), testRow...)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		row[1] = types.Int64(int64(i & 1023))
		if _, err := c.Eval(row); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvalColumn(b *testing.B)             { benchExpr(b, "price") }
func BenchmarkEvalPriceTimesDecimal(b *testing.B)  { benchExpr(b, "price * 0.908") }
func BenchmarkEvalDecimalColumnTimes(b *testing.B) { benchExpr(b, "d * 0.908") }
func BenchmarkEvalFilter(b *testing.B)             { benchExpr(b, "auction % 123 = 0 AND price > 10") }
func BenchmarkEvalCase(b *testing.B) {
	benchExpr(b, "CASE WHEN price < 10000 THEN 'low' WHEN price < 1000000 THEN 'mid' ELSE 'high' END")
}
func BenchmarkEvalDateFormat(b *testing.B)   { benchExpr(b, "DATE_FORMAT(dateTime, 'yyyy-MM-dd')") }
func BenchmarkEvalLikeAndUpper(b *testing.B) { benchExpr(b, "UPPER(channel) LIKE 'GOO%'") }
