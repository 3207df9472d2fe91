package ast

import "testing"

func TestQuoteIdent(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"price", "price"},
		{"dateTime", "dateTime"},
		{"_x1$", "_x1$"},
		{"value", "`value`"},   // reserved
		{"Select", "`Select`"}, // reserved, any case
		{"key", "`key`"},       // keyword, quoted to be safe everywhere
		{"two words", "`two words`"},
		{"a`b", "`a``b`"},
		{"1abc", "`1abc`"},
		{"héllo", "`héllo`"},
	} {
		if got := QuoteIdent(tc.in); got != tc.want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestEqualIgnoresPositions(t *testing.T) {
	a := &Binary{Pos: Pos{1, 1, 0}, Op: OpAdd, L: &ColumnRef{Pos: Pos{1, 1, 0}, Parts: []string{"a"}}, R: &NumberLit{Pos: Pos{1, 5, 4}, Text: "1"}}
	b := &Binary{Pos: Pos{3, 7, 40}, Op: OpAdd, L: &ColumnRef{Pos: Pos{3, 7, 40}, Parts: []string{"a"}}, R: &NumberLit{Pos: Pos{3, 9, 42}, Text: "1"}}
	if !Equal(a, b) {
		t.Error("trees differing only in positions are not Equal")
	}
	b.R.(*NumberLit).Text = "2"
	if Equal(a, b) {
		t.Error("trees with different literals are Equal")
	}
	if Equal(a, &Unary{Op: OpNeg, X: a.L}) {
		t.Error("trees of different node types are Equal")
	}
}

// The printer adds the parentheses a tree needs even when the parser would
// never build it that way.
func TestFormatParenthesizes(t *testing.T) {
	col := func(parts ...string) *ColumnRef { return &ColumnRef{Parts: parts} }
	num := func(s string) *NumberLit { return &NumberLit{Text: s} }
	for _, tc := range []struct {
		e    Expr
		want string
	}{
		{&Binary{Op: OpMul, L: &Binary{Op: OpAdd, L: col("a"), R: col("b")}, R: col("c")}, "(a + b) * c"},
		{&Binary{Op: OpSub, L: col("a"), R: &Binary{Op: OpSub, L: col("b"), R: col("c")}}, "a - (b - c)"},
		{&Unary{Op: OpNeg, X: &Unary{Op: OpNeg, X: num("1")}}, "-(-1)"},
		{&Unary{Op: OpNeg, X: &Binary{Op: OpAdd, L: col("a"), R: num("1")}}, "-(a + 1)"},
		{&FieldAccess{X: col("t", "r"), Field: "f"}, "(t.r).f"},
		{&FieldAccess{X: num("1"), Field: "f"}, "(1).f"},
		{&Index{X: &Binary{Op: OpConcat, L: col("a"), R: col("b")}, Index: num("1")}, "(a || b)[1]"},
		{&Between{X: col("x"), Lo: num("1"), Hi: &Binary{Op: OpAnd, L: col("a"), R: col("b")}}, "x BETWEEN 1 AND (a AND b)"},
		{&Binary{Op: OpEq, L: col("a"), R: &Unary{Op: OpNot, X: col("b")}}, "a = (NOT b)"},
		{&Call{Name: &ObjectName{Parts: []string{"trim"}}, Args: []Expr{col("x")}}, "`trim`(x)"},
		{&Call{Name: &ObjectName{Parts: []string{"left"}}, Args: []Expr{col("x")}}, "left(x)"},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
}
