package parser

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/clinkstream/clink/sql/ast"
)

// TestDataDriven runs the scripts under testdata. Commands:
//
//	parse   parse a script; print each statement's canonical form. The
//	        round trip and positions are checked on the way.
//	error   parse a script that must fail; print the error and a caret
//	        under the position it names.
//	expr    parse an expression; print its shape as an S-expression and
//	        its canonical form.
//	type    parse a data type; print its canonical form.
func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) { runDataDriven(t, path) })
	}
}

func runDataDriven(t *testing.T, path string) {
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "parse":
			stmts, err := Parse(d.Input)
			if err != nil {
				t.Fatalf("%s: unexpected error: %v", d.Pos, err)
			}
			checkRoundTrip(t, d.Input, stmts)
			for _, s := range stmts {
				checkPositions(t, s)
			}
			return ast.FormatScript(stmts)
		case "error":
			stmts, err := Parse(d.Input)
			if err == nil {
				t.Fatalf("%s: parsed without error:\n%s", d.Pos, ast.FormatScript(stmts))
			}
			return describeError(t, d.Input, err)
		case "expr":
			e, err := ParseExpr(d.Input)
			if err != nil {
				return describeError(t, d.Input, err)
			}
			checkPositions(t, e)
			again, err := ParseExpr(e.String())
			if err != nil || !ast.Equal(e, again) {
				t.Fatalf("%s: expression round trip failed: %s -> %v", d.Pos, e, err)
			}
			return sexpr(e) + "\n" + e.String() + "\n"
		case "type":
			dt, err := ParseDataType(d.Input)
			if err != nil {
				return describeError(t, d.Input, err)
			}
			again, err := ParseDataType(dt.String())
			if err != nil || !ast.Equal(dt, again) {
				t.Fatalf("%s: type round trip failed: %s -> %v", d.Pos, dt, err)
			}
			return dt.String() + "\n"
		default:
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			return ""
		}
	})
}

// describeError prints the error, then the source line it points into
// with a caret under the column.
func describeError(t *testing.T, src string, err error) string {
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("error is %T, want *parser.Error: %v", err, err)
	}
	lines := strings.Split(src, "\n")
	if perr.Pos.Line < 1 || perr.Pos.Line > len(lines) {
		t.Fatalf("error line %d outside the input: %v", perr.Pos.Line, err)
	}
	line := lines[perr.Pos.Line-1]
	caret := strings.Repeat(" ", max(perr.Pos.Col-1, 0)) + "^"
	return err.Error() + "\n" + line + "\n" + caret + "\n"
}

// checkPositions fails if any node in the tree has no position.
func checkPositions(t *testing.T, n ast.Node) {
	t.Helper()
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem(), path)
			}
		case reflect.Struct:
			if p, ok := v.Interface().(ast.Pos); ok {
				if !p.IsValid() {
					t.Errorf("node at %s has no position in %s", path, n)
				}
				return
			}
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(reflect.ValueOf(n), reflect.TypeOf(n).String())
}

// sexpr prints the operator structure of e, so precedence is visible.
func sexpr(e ast.Expr) string {
	not := func(b bool) string {
		if b {
			return "NOT "
		}
		return ""
	}
	switch e := e.(type) {
	case *ast.Binary:
		return fmt.Sprintf("(%s %s %s)", e.Op, sexpr(e.L), sexpr(e.R))
	case *ast.Unary:
		return fmt.Sprintf("(%s %s)", e.Op, sexpr(e.X))
	case *ast.Is:
		return fmt.Sprintf("(IS %s%s %s)", not(e.Not), e.Test, sexpr(e.X))
	case *ast.IsDistinctFrom:
		return fmt.Sprintf("(IS %sDISTINCT FROM %s %s)", not(e.Not), sexpr(e.L), sexpr(e.R))
	case *ast.Between:
		return fmt.Sprintf("(%sBETWEEN %s %s %s)", not(e.Not), sexpr(e.X), sexpr(e.Lo), sexpr(e.Hi))
	case *ast.InList:
		items := make([]string, len(e.List))
		for i, it := range e.List {
			items[i] = sexpr(it)
		}
		return fmt.Sprintf("(%sIN %s [%s])", not(e.Not), sexpr(e.X), strings.Join(items, " "))
	case *ast.Like:
		op := "LIKE"
		if e.Similar {
			op = "SIMILAR TO"
		}
		s := fmt.Sprintf("(%s%s %s %s", not(e.Not), op, sexpr(e.X), sexpr(e.Pattern))
		if e.Escape != nil {
			s += " ESCAPE " + sexpr(e.Escape)
		}
		return s + ")"
	case *ast.Index:
		return fmt.Sprintf("(INDEX %s %s)", sexpr(e.X), sexpr(e.Index))
	case *ast.FieldAccess:
		return fmt.Sprintf("(FIELD %s %s)", sexpr(e.X), e.Field)
	case *ast.ColumnRef:
		return strings.Join(e.Parts, ".")
	default:
		return e.String()
	}
}

func TestErrorPosition(t *testing.T) {
	src := "CREATE TABLE t (\n  a INT,\n  b AS f(a, (1 + 2)\n)"
	_, err := Parse(src)
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("got %v, want a *Error", err)
	}
	want := ast.Pos{Line: 4, Col: 2, Offset: len(src)}
	if perr.Pos != want {
		t.Errorf("error at %+v, want %+v (%v)", perr.Pos, want, err)
	}
	wantMsg := "expected ')' to close the column list opened at line 1, column 16, found end of input"
	if perr.Msg != wantMsg {
		t.Errorf("message %q, want %q", perr.Msg, wantMsg)
	}
}

func TestPositionsCountCharacters(t *testing.T) {
	e, err := ParseExpr("'héllo' || x")
	if err != nil {
		t.Fatal(err)
	}
	x := e.(*ast.Binary).R
	if got, want := x.Position(), (ast.Pos{Line: 1, Col: 12, Offset: 12}); got != want {
		t.Errorf("x at %+v, want %+v", got, want)
	}
}

func TestParseStatementRejectsTrailingInput(t *testing.T) {
	if _, err := ParseStatement("SELECT 1; SELECT 2"); err == nil {
		t.Fatal("ParseStatement accepted two statements")
	}
	s, err := ParseStatement("SET 'parallelism.default' = '4';")
	if err != nil {
		t.Fatal(err)
	}
	if set := s.(*ast.Set); set.Key != "parallelism.default" || set.Value != "4" {
		t.Errorf("got %+v", set)
	}
}

func TestNestingLimit(t *testing.T) {
	deep := strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000)
	_, err := ParseExpr(deep)
	if err == nil || !strings.Contains(err.Error(), "nesting deeper than") {
		t.Fatalf("got %v, want a nesting error", err)
	}
	_, err = ParseExpr(strings.Repeat("- ", 10000) + "1")
	if err == nil || !strings.Contains(err.Error(), "nesting deeper than") {
		t.Fatalf("got %v, want a nesting error", err)
	}
	ok := strings.Repeat("(", 50) + "1" + strings.Repeat(")", 50)
	if _, err := ParseExpr(ok); err != nil {
		t.Fatalf("50 levels: %v", err)
	}
}
