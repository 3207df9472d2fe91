package parser

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinkstream/clink/sql/ast"
)

// nexmarkDir is where the Nexmark reference queries live: the shared
// directory beside the repository, or CLINK_NEXMARK_DIR.
func nexmarkDir(t testing.TB) string {
	dir, ok := findNexmarkDir()
	if !ok {
		t.Skipf("Nexmark reference queries not found in %s (set CLINK_NEXMARK_DIR)", dir)
	}
	return dir
}

func findNexmarkDir() (string, bool) {
	dir := os.Getenv("CLINK_NEXMARK_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "nexmark")
	}
	_, err := os.Stat(filepath.Join(dir, "q0.sql"))
	return dir, err == nil
}

// nexmarkFiles are the DDL and query files the parser must accept.
func nexmarkFiles() []string {
	files := []string{"ddl_gen.sql", "ddl_views.sql"}
	for i := 0; i <= 23; i++ {
		files = append(files, fmt.Sprintf("q%d.sql", i))
	}
	return files
}

// readNexmark returns the file with the harness's table placeholder
// substituted, as the reference harness does before submitting it.
func readNexmark(t testing.TB, dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "${NEXMARK_TABLE}", "datagen")
}

func TestNexmarkReferenceQueries(t *testing.T) {
	dir := nexmarkDir(t)
	for _, name := range nexmarkFiles() {
		t.Run(name, func(t *testing.T) {
			src := readNexmark(t, dir, name)
			stmts, err := Parse(src)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(stmts) == 0 {
				t.Fatalf("%s: no statements", name)
			}
			checkRoundTrip(t, src, stmts)
			// Every query file ends with the INSERT that forms the job.
			if strings.HasPrefix(name, "q") {
				if _, ok := stmts[len(stmts)-1].(*ast.Insert); !ok {
					t.Errorf("%s: last statement is %T, want *ast.Insert", name, stmts[len(stmts)-1])
				}
			}
		})
	}
}
