package exec

import (
	"slices"
	"strings"
	"testing"

	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/types"
)

// FuzzFileSourceCSV checks that the csv decoder never panics, and that
// fields quoted as a writer quotes them split back into the same fields.
func FuzzFileSourceCSV(f *testing.F) {
	f.Add([]byte(`1,"a,b",,x`), "a\"b", "", byte(','), byte('"'), byte(0))
	f.Add([]byte(`'it''s';\;x`), "p;q", "r'", byte(';'), byte('\''), byte('\\'))
	f.Fuzz(func(t *testing.T, rec []byte, a, b string, delim, quote, escape byte) {
		if delim == 0 || quote == 0 || delim == quote || escape == delim || escape == quote {
			return
		}
		cols := []catalog.Column{{Name: "x", Type: types.StringType}, {Name: "y", Type: types.BigIntType}, {Name: "z", Type: types.DecimalOf(5, 2)}}
		ff := &fileFormat{table: "t", cols: cols, delim: delim, quote: quote, escape: escape}
		_, _, _ = ff.decode(rec)
		ff.ignore = true
		if _, skip, err := ff.decode(rec); err != nil {
			t.Fatalf("ignoring parse errors, decode(%q) failed: %v (skip %v)", rec, err, skip)
		}
		quoted := func(s string) string {
			var sb strings.Builder
			sb.WriteByte(quote)
			for i := 0; i < len(s); i++ {
				if s[i] == quote || escape != 0 && s[i] == escape {
					if escape != 0 {
						sb.WriteByte(escape)
					} else {
						sb.WriteByte(quote)
					}
				}
				sb.WriteByte(s[i])
			}
			sb.WriteByte(quote)
			return sb.String()
		}
		line := quoted(a) + string([]byte{delim}) + quoted(b)
		fields, q, err := ff.splitCSV([]byte(line))
		if err != nil || !slices.Equal(fields, []string{a, b}) || !slices.Equal(q, []bool{true, true}) {
			t.Fatalf("splitCSV(%q) = %q, %v, %v; want %q", line, fields, q, err, []string{a, b})
		}
	})
}
