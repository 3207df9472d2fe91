package sql_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clinkstream/clink/sql"
)

// committedLines reads every committed file under dir (names not starting
// with . or _) and returns their lines sorted, and the number of files.
func committedLines(t *testing.T, dir string) ([]string, int) {
	t.Helper()
	var lines []string
	files := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n := d.Name(); path != dir && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines, files
}

// TestFileSinkOptions writes csv with Flink's sink options: another field
// delimiter (a field holding it is quoted), a NULL literal, a rolling file
// size of one byte (a part file per row), the rolling intervals (accepted),
// and a sink parallelism above the job's.
func TestFileSinkOptions(t *testing.T) {
	out := t.TempDir()
	script := `
CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '6');
CREATE TABLE f (id BIGINT, s STRING, n STRING) WITH ('connector' = 'filesystem', 'path' = '` + out + `', 'format' = 'csv',
  'csv.field-delimiter' = ';', 'csv.null-literal' = 'N/A', 'sink.rolling-policy.file-size' = '1 b',
  'sink.rolling-policy.rollover-interval' = '30 min', 'sink.rolling-policy.check-interval' = '1 min',
  'sink.rolling-policy.inactivity-interval' = '10s', 'sink.parallelism' = '2');
INSERT INTO f SELECT id, CASE WHEN id % 2 = 0 THEN 'a;b' ELSE 'c,d' END, CASE WHEN id > 3 THEN 'x' END FROM t;`
	var log bytes.Buffer
	if err := sql.Run(context.Background(), script, sql.Options{Parallelism: 1, CheckpointDir: t.TempDir(), Stdout: &log, Stderr: &log}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	got, files := committedLines(t, out)
	want := []string{`1;c,d;N/A`, `2;"a;b";N/A`, `3;c,d;N/A`, `4;"a;b";x`, `5;c,d;x`, `6;"a;b";x`}
	if !slices.Equal(got, want) {
		t.Errorf("committed lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if files != 6 {
		t.Errorf("%d part files, want one per row (file-size 1 b)", files)
	}

	// A tab, written as Flink's '\t', and json with the rolling size.
	out2 := t.TempDir()
	script = `
CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '0', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '2');
CREATE TABLE f (id BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '` + out2 + `', 'format' = 'csv', 'csv.field-delimiter' = '\t');
CREATE TABLE j (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '` + filepath.Join(out2, "j") + `', 'format' = 'json', 'sink.rolling-policy.file-size' = '128MB');
INSERT INTO f SELECT id, 'a,b' FROM t;
INSERT INTO j SELECT id FROM t;`
	if err := sql.Run(context.Background(), script, sql.Options{Parallelism: 1, CheckpointDir: t.TempDir(), Stdout: &log, Stderr: &log}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	got, _ = committedLines(t, out2)
	if want := []string{"1\ta,b", "2\ta,b", `{"id":1}`, `{"id":2}`}; !slices.Equal(got, want) {
		t.Errorf("committed lines %q, want %q", got, want)
	}
}

// TestPrintSinkParallelism prints at a sink parallelism above the job's:
// the lines carry the subtask numbers of two subtasks (Flink's "N> "
// prefix), and an updating query with the option is refused.
func TestPrintSinkParallelism(t *testing.T) {
	out := run(t, `
CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '0', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '40');
CREATE TABLE p (id BIGINT) WITH ('connector' = 'print', 'print-identifier' = 'ids', 'sink.parallelism' = '2', 'standard-error' = 'false');
INSERT INTO p SELECT id FROM t;`, 1)
	subtasks := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		prefix, _, ok := strings.Cut(l, "> ")
		if !ok {
			t.Fatalf("line %q has no prefix", l)
		}
		subtasks[prefix]++
	}
	if len(subtasks) != 2 || subtasks["ids:1"]+subtasks["ids:2"] != 40 {
		t.Errorf("lines per prefix %v; want 40 lines over ids:1 and ids:2", subtasks)
	}

	var log bytes.Buffer
	err := sql.Run(context.Background(), `
CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '4');
CREATE TABLE p (id BIGINT, n BIGINT) WITH ('connector' = 'print',
  'sink.parallelism' = '2');
INSERT INTO p SELECT id, COUNT(*) FROM t GROUP BY id;`, sql.Options{Parallelism: 1, CheckpointDir: t.TempDir(), Stdout: &log, Stderr: &log})
	want := "table 'p' sets 'sink.parallelism', but the query produces update changes and the table has no PRIMARY KEY"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "line 4, column 3") {
		t.Errorf("got %v, want %q at line 4, column 3", err, want)
	}
}

// TestPrintSinkParallelismUpdating prints an updating query at a sink
// parallelism above the job's into a table with a PRIMARY KEY: every change
// of one key goes to one subtask, in order, so each key's last line there
// is its final count.
func TestPrintSinkParallelismUpdating(t *testing.T) {
	out := run(t, `
CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '0', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '300');
CREATE TABLE p (k BIGINT, n BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'print', 'print-identifier' = 'c', 'sink.parallelism' = '2', 'standard-error' = 'false');
INSERT INTO p SELECT id % 7, COUNT(*) FROM t GROUP BY id % 7;`, 1)
	subtaskOf := map[string]string{}
	last := map[string]string{}
	subtasks := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		prefix, change, ok := strings.Cut(l, "> ")
		if !ok {
			t.Fatalf("line %q has no prefix", l)
		}
		subtasks[prefix] = true
		// change is like "+U[3, 12]".
		open := strings.IndexByte(change, '[')
		k, n, ok := strings.Cut(strings.Trim(change[open:], "[]"), ", ")
		if open < 0 || !ok {
			t.Fatalf("line %q is not a change of two columns", l)
		}
		if s, seen := subtaskOf[k]; seen && s != prefix {
			t.Errorf("key %s printed by %s and %s", k, s, prefix)
		}
		subtaskOf[k] = prefix
		if strings.HasPrefix(change, "+") {
			last[k] = n
		}
	}
	if len(subtasks) != 2 {
		t.Errorf("subtasks %v; want two", subtasks)
	}
	for k := 0; k < 7; k++ {
		want := 300 / 7
		if k >= 1 && k <= 300%7 {
			want++
		}
		if got := last[strconv.Itoa(k)]; got != strconv.Itoa(want) {
			t.Errorf("key %d: last count %s, want %d", k, got, want)
		}
	}
}

// TestSinkOptionErrors: bad and unknown sink options are refused at the
// option's position, naming it.
func TestSinkOptionErrors(t *testing.T) {
	dir := t.TempDir()
	fs := func(opts string) string {
		return "CREATE TABLE f (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '" + dir + "',\n  " + opts + ");"
	}
	for _, tc := range []struct{ ddl, want string }{
		{fs("'format' = 'csv', 'sink.rolling-policy.file-sise' = '1mb'"), "unsupported option 'sink.rolling-policy.file-sise' for connector 'filesystem'; supported options: "},
		{fs("'format' = 'csv', 'sink.rolling-policy.file-size' = 'big'"), "option 'sink.rolling-policy.file-size' must be a positive memory size such as '128MB', got 'big' at line 2, column 21"},
		{fs("'format' = 'csv', 'sink.rolling-policy.file-size' = '0'"), "option 'sink.rolling-policy.file-size' must be a positive memory size"},
		{fs("'format' = 'csv', 'sink.rolling-policy.rollover-interval' = '5 fortnights'"), "option 'sink.rolling-policy.rollover-interval' must be a positive duration such as '30 min', got '5 fortnights' at line 2, column 21"},
		{fs("'format' = 'json', 'csv.field-delimiter' = ';'"), "option 'csv.field-delimiter' applies to the format 'csv', not 'json' at line 2, column 22"},
		{fs("'format' = 'csv', 'csv.field-delimiter' = ';;'"), "option 'csv.field-delimiter' must be one ASCII character other than a quote or a line break, got ';;'"},
		{fs("'format' = 'csv', 'csv.field-delimiter' = '\"'"), "option 'csv.field-delimiter' must be one ASCII character other than a quote or a line break"},
		{fs("'format' = 'csv', 'sink.parallelism' = '0'"), "option 'sink.parallelism' must be a positive integer, got '0' at line 2, column 21"},
		{"CREATE TABLE p (id BIGINT) WITH ('connector' = 'print', 'sink.parallelism' = 'two');", "option 'sink.parallelism' must be a positive integer, got 'two' at line 1, column 57"},
		{"CREATE TABLE p (id BIGINT) WITH ('connector' = 'print', 'print-identifer' = 'x');", "unsupported option 'print-identifer' for connector 'print'; supported options: delivery_guarantee, print-identifier, sink.parallelism, standard-error at line 1, column 57"},
		{"CREATE TABLE p (id BIGINT) WITH ('connector' = 'print', 'standard-error' = 'yes');", "option 'standard-error' must be true or false, got 'yes' at line 1, column 57"},
	} {
		_, err := sql.Prepare(tc.ddl, sql.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\ngot  %v\nwant %s", tc.ddl, err, tc.want)
		}
	}
}
