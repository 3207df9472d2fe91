// Package nexmark holds clink's copies of the Nexmark benchmark's SQL
// queries q0..q22 (the query files of this directory) and builds runnable
// scripts from them: the source DDL of ddl.sql with its placeholders
// filled in, followed by one query file. `clink bench nexmark --query qN`
// runs such a script; the tests of this package check the queries' output
// against references computed in Go.
//
// The files adapt only the DDL of Flink's Nexmark benchmark, where clink
// lacks a feature or names options differently; each such file says how in
// its header.
//
// A caller must:
//
//  1. Build the script with Script, naming the query and the Params.
//  2. Prepare it with sql.Prepare, passing Functions() as
//     sql.Options.Functions (q14 calls count_char).
package nexmark

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/types"
)

//go:embed ddl.sql q*.sql
var files embed.FS

// Params fill the placeholders of ddl.sql and the query files.
type Params struct {
	// Events is the number of events ('events.num'); 0 is unbounded.
	Events int64
	// Rate is the events per second of event time ('first-event.rate');
	// 0 means Nexmark's default, 10000.
	Rate int
	// BaseTime is the start of the timeline in ms since 1970; 0 is when
	// the job starts.
	BaseTime int64
	// OutputDir is the directory q10 writes its files under (q10 needs
	// it).
	OutputDir string
	// SideInput is the csv file of q13's side input (q13 needs it).
	SideInput string
}

// Queries returns the names of the query files, q0..q22, in numeric order.
func Queries() []string {
	names, _ := fs.Glob(files, "q*.sql")
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".sql")
	}
	slices.SortFunc(names, func(a, b string) int {
		x, _ := strconv.Atoi(a[1:])
		y, _ := strconv.Atoi(b[1:])
		return x - y
	})
	return names
}

// Query returns the text of one query file ("q0".."q22").
func Query(name string) (string, error) {
	b, err := files.ReadFile(name + ".sql")
	if err != nil {
		return "", fmt.Errorf("unknown Nexmark query %q: want one of %s", name, strings.Join(Queries(), ", "))
	}
	return string(b), nil
}

// Script returns ddl.sql followed by the query file, placeholders filled
// in. A query that needs a parameter that p leaves empty is an error.
func Script(name string, p Params) (string, error) {
	q, err := Query(name)
	if err != nil {
		return "", err
	}
	ddl, err := files.ReadFile("ddl.sql")
	if err != nil {
		return "", err
	}
	rate := p.Rate
	if rate == 0 {
		rate = 10000
	}
	for _, need := range []struct{ key, val, field string }{
		{"${OUTPUT_DIR}", p.OutputDir, "OutputDir"},
		{"${SIDE_INPUT}", p.SideInput, "SideInput"},
	} {
		if strings.Contains(q, need.key) && need.val == "" {
			return "", fmt.Errorf("Nexmark query %s needs Params.%s", name, need.field)
		}
	}
	r := strings.NewReplacer(
		"${EVENTS_NUM}", strconv.FormatInt(p.Events, 10),
		"${TPS}", strconv.Itoa(rate),
		"${BASE_TIME}", strconv.FormatInt(p.BaseTime, 10),
		"${OUTPUT_DIR}", p.OutputDir,
		"${SIDE_INPUT}", p.SideInput,
	)
	return r.Replace(string(ddl)) + "\n" + r.Replace(q), nil
}

// Locate rewrites the position of an error that sql.Prepare reported for
// Script(name, ...) so that it names the file and the line in it:
// "no function named PROCTIME at q12.sql line 12, column 28". Other errors
// are returned as they are.
func Locate(name string, err error) error {
	ddl, _ := files.ReadFile("ddl.sql")
	lines := strings.Count(string(ddl), "\n") + 1 // Script adds a newline
	var pos *ast.Pos
	var msg string
	var te *types.Error
	var pe *parser.Error
	switch {
	case errors.As(err, &te):
		pos, msg = &te.Pos, te.Msg
	case errors.As(err, &pe):
		pos, msg = &pe.Pos, pe.Msg
	default:
		return err
	}
	if !pos.IsValid() {
		return err
	}
	if pos.Line > lines {
		return fmt.Errorf("%s at %s.sql line %d, column %d", msg, name, pos.Line-lines, pos.Col)
	}
	return fmt.Errorf("%s at ddl.sql line %d, column %d", msg, pos.Line, pos.Col)
}

// CountChar is q14's count_char(s, c): how many times the first character
// of c occurs in s, as the benchmark's Java function counts (0 when c is
// empty).
func CountChar(s, c string) int64 {
	first, _ := utf8.DecodeRuneInString(c)
	if c == "" {
		return 0
	}
	var n int64
	for _, r := range s {
		if r == first {
			n++
		}
	}
	return n
}

// Functions returns a registry with the Go functions the queries call:
// count_char(VARCHAR, VARCHAR) BIGINT.
func Functions() *expr.Registry {
	r := expr.NewRegistry()
	err := r.RegisterScalar("count_char", expr.ScalarFunction{
		Args:   []types.Type{types.StringType, types.StringType},
		Result: types.BigIntType,
		Eval: func(args []types.Value) (types.Value, error) {
			// Like the Java function, a NULL string has no characters.
			if args[0].IsNull() || args[1].IsNull() {
				return types.Int64(0), nil
			}
			return types.Int64(CountChar(args[0].Str(), args[1].Str())), nil
		},
	})
	if err != nil {
		panic(err) // a fresh registry has no functions to clash with
	}
	return r
}

// SideInputKeys is the number of keys of q13's side input: q13 looks up
// auction ids modulo 10000.
const SideInputKeys = 10000

// WriteSideInput writes a side input for q13 to path: a csv file of
// SideInputKeys rows `key,value`, keys 0 to SideInputKeys - 1 and the
// value of key k "side-k". Nexmark leaves the file to the user; this one
// makes every bid find one row.
func WriteSideInput(path string) error {
	var b strings.Builder
	for k := range SideInputKeys {
		fmt.Fprintf(&b, "%d,side-%d\n", k, k)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing the side input: %w", err)
	}
	return nil
}
