package parser

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinkstream/clink/sql/ast"
)

// FuzzParse checks that no input makes the parser panic, that every error
// is a *Error pointing into the input, and that whatever parses survives
// the round trip through the canonical printer.
func FuzzParse(f *testing.F) {
	for _, s := range testdataInputs(f) {
		f.Add(s)
	}
	if dir, ok := findNexmarkDir(); ok {
		for _, name := range nexmarkFiles() {
			f.Add(readNexmark(f, dir, name))
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		stmts, err := Parse(src)
		if err != nil {
			checkErrorPos(t, src, err)
		} else if msg := roundTrip(stmts); msg != "" {
			t.Fatalf("input %q: %s", src, msg)
		}
		e, err := ParseExpr(src)
		if err != nil {
			checkErrorPos(t, src, err)
			return
		}
		again, err := ParseExpr(e.String())
		if err != nil {
			t.Fatalf("input %q printed as %q, which does not parse: %v", src, e.String(), err)
		}
		if !ast.Equal(e, again) || again.String() != e.String() {
			t.Fatalf("input %q printed as %q, which reparses as %q", src, e.String(), again.String())
		}
	})
}

func checkErrorPos(t *testing.T, src string, err error) {
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("input %q: error %T is not a *Error: %v", src, err, err)
	}
	if perr.Pos.Line < 1 || perr.Pos.Col < 1 || perr.Pos.Offset < 0 || perr.Pos.Offset > len(src) {
		t.Fatalf("input %q: error position %+v outside the input: %v", src, perr.Pos, err)
	}
}

// testdataInputs returns the input of every parse and error case under
// testdata, as fuzz seeds.
func testdataInputs(tb testing.TB) []string {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	var inputs []string
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		var cur []string
		in := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case !in && (line == "parse" || line == "error" || line == "expr" || line == "type"):
				in, cur = true, nil
			case in && line == "----":
				inputs = append(inputs, strings.Join(cur, "\n"))
				in = false
			case in:
				cur = append(cur, line)
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	return inputs
}
