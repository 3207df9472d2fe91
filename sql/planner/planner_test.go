package planner_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/exec"
	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/planner"
)

// TestPlanner runs the scripts in testdata: `ddl` runs CREATE TABLE/VIEW
// and DROP statements, `plan` plans INSERTs as one job and prints EXPLAIN
// with changelog modes (or the error), `uids` prints the plan with the
// operators' uids.
func TestPlanner(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		cat := catalog.New(exec.Connectors()...)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			stmts, err := parser.Parse(d.Input)
			if err != nil {
				return "parse error: " + err.Error() + "\n"
			}
			switch d.Cmd {
			case "ddl":
				pl := planner.New(cat, nil)
				for _, st := range stmts {
					var err error
					switch st := st.(type) {
					case *ast.CreateTable:
						err = cat.CreateTable(st)
					case *ast.CreateView:
						cols, berr := pl.BindView(st)
						if err = berr; err == nil {
							err = cat.CreateView(st, cols)
						}
					case *ast.Drop:
						err = cat.Drop(st)
					default:
						t.Fatalf("%s: ddl takes CREATE and DROP statements, got %T", d.Pos, st)
					}
					if err != nil {
						return "error: " + err.Error() + "\n"
					}
				}
				return "ok\n"
			case "plan", "uids":
				pl := planner.New(cat, nil)
				for _, st := range stmts {
					ins, ok := st.(*ast.Insert)
					if !ok {
						t.Fatalf("%s: plan takes INSERT statements, got %T", d.Pos, st)
					}
					if _, err := pl.PlanInsert(ins); err != nil {
						return "error: " + err.Error() + "\n"
					}
				}
				out := planner.Explain(pl.Sinks(), d.Cmd == "plan", d.Cmd == "uids")
				if ws := pl.Warnings(); len(ws) > 0 {
					out += "warning: " + strings.Join(ws, "\nwarning: ") + "\n"
				}
				return out
			}
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			return ""
		})
	})
}
