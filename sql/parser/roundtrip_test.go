package parser

import (
	"testing"

	"github.com/clinkstream/clink/sql/ast"
)

// checkRoundTrip checks that printing stmts and parsing the result gives
// the same trees, and that printing is a fixed point.
func checkRoundTrip(t testing.TB, src string, stmts []ast.Statement) {
	t.Helper()
	if err := roundTrip(stmts); err != "" {
		t.Fatalf("round trip of %q: %s", src, err)
	}
}

func roundTrip(stmts []ast.Statement) string {
	printed := ast.FormatScript(stmts)
	again, err := Parse(printed)
	if err != nil {
		return "reparsing the printed form failed: " + err.Error() + "\nprinted:\n" + printed
	}
	if len(again) != len(stmts) {
		return "reparsing the printed form gave a different number of statements\nprinted:\n" + printed
	}
	for i := range stmts {
		if !ast.Equal(stmts[i], again[i]) {
			return "reparsed tree differs\nprinted:  " + stmts[i].String() + "\nreprinted: " + again[i].String()
		}
	}
	if p2 := ast.FormatScript(again); p2 != printed {
		return "printing is not a fixed point:\n" + printed + "\n" + p2
	}
	return ""
}
