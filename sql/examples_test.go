package sql_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinkstream/clink/sql"
)

// TestExamplesRun runs every script of examples/sql: each must plan, run
// to its end and print something.
func TestExamplesRun(t *testing.T) {
	files, err := filepath.Glob("../examples/sql/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			script, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := sql.Run(context.Background(), string(script), sql.Options{CheckpointDir: t.TempDir(), Stdout: &out, Stderr: &out}); err != nil {
				t.Fatalf("%s: %v\n%s", f, err, out.String())
			}
			if !strings.Contains(out.String(), "+I[") {
				t.Errorf("%s printed no rows:\n%s", f, out.String())
			}
		})
	}
}
