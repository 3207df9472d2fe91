package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// clink runs the CLI in-process and returns its exit code and output.
func clink(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	code, out, errs := clink(t, "version")
	if code != 0 || errs != "" {
		t.Fatalf("clink version: exit %d, stderr %q", code, errs)
	}
	want := fmt.Sprintf("clink dev (%s, %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if out != want {
		t.Fatalf("clink version printed %q, want %q", out, want)
	}
}

func TestVersionFromLinkerFlag(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3"
	_, out, _ := clink(t, "version")
	if !strings.HasPrefix(out, "clink v1.2.3 (go") {
		t.Fatalf("clink version printed %q, want it to start with %q", out, "clink v1.2.3 (go")
	}
}

// TestVersionLdflags builds the binary the way a release does and checks
// that -X main.version reaches the output, so a rename of the variable is
// caught.
func TestVersionLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "clink")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X main.version=v9.8.7", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("clink version: %v", err)
	}
	want := fmt.Sprintf("clink v9.8.7 (%s, %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if string(out) != want {
		t.Fatalf("clink version printed %q, want %q", out, want)
	}

	// The exit code contract: any error is non-zero, with the message on
	// stderr only.
	cmd := exec.Command(bin, "sql", "-f", filepath.Join(t.TempDir(), "missing.sql"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("clink sql with a missing file: err %v, want a non-zero exit", err)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "missing.sql") {
		t.Fatalf("stdout %q, stderr %q; want nothing and the file name", stdout.String(), stderr.String())
	}
}

// TestSQLRunsExample runs the README's example script with the contract's
// flags and checks what it prints.
func TestSQLRunsExample(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := clink(t, "sql", "-f", "../../examples/sql/datagen_print.sql",
		"--checkpoint-dir", dir, "--checkpoint-interval", "500ms", "--parallelism", "1", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	if errs != "checkpoints: "+dir+"\n" {
		t.Errorf("stderr %q, want only the checkpoint directory", errs)
	}
	for _, want := range []string{"== Physical Plan ==", "GroupAggregate(groupBy=[product]",
		"big> +I[2, 96, 5, 1970-01-01 00:00:02.000]", "totals> -U[2, 1, 70]", "totals> +U[2, 2, 150]"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// The directory now holds checkpoints: a second run without --restore
	// is refused, with --restore latest it resumes after the end.
	if code, _, errs := clink(t, "sql", "-f", "../../examples/sql/datagen_print.sql", "--checkpoint-dir", dir, "--quiet"); code == 0 {
		t.Errorf("a second run into a used directory exited 0; stderr %q", errs)
	}
	code, out, errs = clink(t, "sql", "-f", "../../examples/sql/datagen_print.sql", "--checkpoint-dir", dir, "--restore", "latest", "--quiet")
	if code != 0 || strings.Contains(out, "big>") {
		t.Errorf("restored run: exit %d, stdout %q, stderr %q; want exit 0 and no rows again", code, out, errs)
	}
}

func TestSQLPlanErrorsExitNonZero(t *testing.T) {
	script := filepath.Join(t.TempDir(), "job.sql")
	src := "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '3');\n" +
		"CREATE TABLE f (id BIGINT, n BIGINT) WITH ('connector' = 'filesystem', 'path' = '" + t.TempDir() + "', 'format' = 'csv');\n" +
		"INSERT INTO f SELECT id, COUNT(*) FROM t GROUP BY id;\n"
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := clink(t, "sql", "-f", script, "--quiet")
	want := "doesn't support consuming update changes which is produced by node GroupAggregate(groupBy=[id], select=[id, COUNT(*) AS EXPR$1]) at line 3, column 1\n"
	if code == 0 || out != "" || !strings.HasPrefix(errs, "clink sql: "+script+": table sink 'f'") || !strings.HasSuffix(errs, want) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestSQLErrors(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sql")
	if err := os.WriteFile(script, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nope.sql")
	for _, tc := range []struct {
		name string
		args []string
		want string // substring of stderr
	}{
		{"missing file", []string{"sql", "-f", missing}, "clink sql: reading SQL script: stat " + missing + ": no such file or directory"},
		{"directory", []string{"sql", "-f", dir}, dir + " is a directory"},
		{"no file flag", []string{"sql"}, `clink sql: required flag(s) "file" not set`},
		{"unknown flag", []string{"sql", "-f", script, "--bogus"}, "clink sql: unknown flag: --bogus (see 'clink sql --help')"},
		{"unknown root flag", []string{"--bogus"}, "clink: unknown flag: --bogus"},
		{"unknown command", []string{"frobnicate"}, `clink: unknown command "frobnicate" for "clink"`},
		{"bad mode", []string{"sql", "-f", script, "--checkpoint-mode", "sometimes"}, `--checkpoint-mode must be aligned, unaligned or adaptive, got "sometimes"`},
		{"bad interval", []string{"sql", "-f", script, "--checkpoint-interval", "0s"}, "--checkpoint-interval must be positive"},
		{"unparsable interval", []string{"sql", "-f", script, "--checkpoint-interval", "soon"}, `invalid argument "soon" for "--checkpoint-interval"`},
		{"bad parallelism", []string{"sql", "-f", script, "--parallelism", "0"}, "--parallelism must be at least 1"},
		{"bad restore", []string{"sql", "-f", script, "--checkpoint-dir", dir, "--restore", "newest"}, `--restore must be "latest" or a checkpoint id`},
		{"restore zero", []string{"sql", "-f", script, "--checkpoint-dir", dir, "--restore", "0"}, `--restore must be "latest" or a checkpoint id`},
		{"restore without dir", []string{"sql", "-f", script, "--restore", "3"}, "--restore needs --checkpoint-dir"},
		{"stray argument", []string{"sql", "-f", script, "extra"}, `clink sql: unknown command "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := clink(t, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, want non-zero; stdout %q", out)
			}
			if !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr %q, want it to contain %q", errs, tc.want)
			}
			// The error must stand out: no usage dump, one line.
			if strings.Contains(errs, "Usage:") || strings.Count(errs, "\n") != 1 {
				t.Errorf("stderr is not a single error line:\n%s", errs)
			}
			if strings.Contains(out, "Usage:") {
				t.Errorf("usage printed on stdout:\n%s", out)
			}
		})
	}
}

func TestHelpListsSubcommands(t *testing.T) {
	code, out, errs := clink(t, "--help")
	if code != 0 || errs != "" {
		t.Fatalf("clink --help: exit %d, stderr %q", code, errs)
	}
	for _, sub := range []string{"sql", "state-cat", "version"} {
		if !strings.Contains(out, "  "+sub+" ") {
			t.Errorf("help does not list %q:\n%s", sub, out)
		}
	}
}

func TestSQLHelpListsContractFlags(t *testing.T) {
	_, out, _ := clink(t, "sql", "--help")
	for _, flag := range []string{"--file", "--checkpoint-dir", "--checkpoint-interval", "--restore",
		"--parallelism", "--checkpoint-mode", "--quiet"} {
		if !strings.Contains(out, flag) {
			t.Errorf("clink sql --help lacks %s", flag)
		}
	}
}
