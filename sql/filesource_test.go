package sql_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/sql"
)

// writeFiles writes name -> contents into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// committedRows returns the committed lines of a file sink's output
// directory, sorted (see committedLines).
func committedRows(t *testing.T, dir string) []string {
	t.Helper()
	lines, _ := committedLines(t, dir)
	return lines
}

// runErr runs a script and returns its error.
func runErr(t *testing.T, script string) error {
	var out bytes.Buffer
	return sql.Run(context.Background(), script, sql.Options{Parallelism: 2, CheckpointDir: t.TempDir(), Stdout: &out, Stderr: &out})
}

func TestFilesystemSourceCSV(t *testing.T) {
	in := t.TempDir()
	writeFiles(t, in, map[string]string{
		"a.csv": "# orders of the morning\n" +
			"1;'ann';12.50;true;2024-01-01 10:00:00.123;2024-01-01\n" +
			"2;'bob; jr';-0.5;false;2024-01-01T10:00:01;2024-01-02\n\n",
		"b.csv":    "3;'multi\nline';N/A;TRUE;2024-01-01 10:00:02;N/A\n4;'it''s';7;N/A;2024-01-01 10:00:03.5;2024-01-04\n",
		".hidden":  "9;'never read';0;true;2024-01-01 00:00:00;2024-01-01\n",
		"_staging": "9;'never read';0;true;2024-01-01 00:00:00;2024-01-01\n",
	})
	script := fmt.Sprintf(`
CREATE TABLE src (id INT, name STRING, amount DECIMAL(10, 2), ok BOOLEAN, ts TIMESTAMP(3), d DATE) WITH (
  'connector' = 'filesystem', 'path' = '%s', 'format' = 'csv',
  'csv.field-delimiter' = ';', 'csv.quote-character' = '''', 'csv.allow-comments' = 'true',
  'csv.null-literal' = 'N/A');
CREATE TABLE p (id INT, name STRING, amount DECIMAL(10, 2), ok BOOLEAN, ts TIMESTAMP(3), d DATE) WITH ('connector' = 'print');
INSERT INTO p SELECT * FROM src;`, in)
	want := []string{
		"+I[1, ann, 12.50, TRUE, 2024-01-01 10:00:00.123, 2024-01-01]",
		"+I[2, bob; jr, -0.50, FALSE, 2024-01-01 10:00:01.000, 2024-01-02]",
		"+I[3, multi\nline, NULL, TRUE, 2024-01-01 10:00:02.000, NULL]",
		"+I[4, it's, 7.00, NULL, 2024-01-01 10:00:03.500, 2024-01-04]",
	}
	for _, par := range []int{1, 2} {
		out := run(t, script, par)
		var got []string
		for _, l := range strings.SplitAfter(out, "]\n") {
			if l = strings.TrimSpace(l); l != "" {
				if _, after, ok := strings.Cut(l, "> "); ok {
					l = after
				}
				got = append(got, l)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("parallelism %d: got\n%s\nwant\n%s", par, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestFilesystemSourceJSON(t *testing.T) {
	in := t.TempDir()
	file := filepath.Join(in, "events.json")
	writeFiles(t, in, map[string]string{"events.json": `{"id": 1, "name": "ann", "score": 1.5, "tags": {"a": [1, 2]}, "at": "2024-01-01T10:00:00Z"}
{"id": "2", "score": null, "extra": true, "at": "2024-01-01 10:00:01"}

{"name": "carl", "id": 3, "score": 2e3, "tags": "plain", "at": "2024-01-01 10:00:02.250"}
`})
	script := fmt.Sprintf(`
CREATE TABLE src (id BIGINT, name STRING, score DOUBLE, tags STRING, at TIMESTAMP_LTZ(3)) WITH (
  'connector' = 'filesystem', 'path' = '%s', 'format' = 'json');
CREATE TABLE p (id BIGINT, name STRING, score DOUBLE, tags STRING, at TIMESTAMP_LTZ(3)) WITH ('connector' = 'print');
INSERT INTO p SELECT * FROM src;`, file)
	got := materialize(t, run(t, script, 1))
	want := []string{
		`[1, ann, 1.5, {"a": [1, 2]}, 2024-01-01 10:00:00.000]`,
		`[2, NULL, NULL, NULL, 2024-01-01 10:00:01.000]`,
		`[3, carl, 2000.0, plain, 2024-01-01 10:00:02.250]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// json.fail-on-missing-field makes the second line fail.
	err := runErr(t, strings.Replace(script, "'format' = 'json'", "'format' = 'json', 'json.fail-on-missing-field' = 'true'", 1))
	if err == nil || !strings.Contains(err.Error(), file+":2: the object has no field 'name'") {
		t.Errorf("error %v, want one naming %s:2 and the field", err, file)
	}
}

// TestFilesystemSourceParseErrors checks that a bad record fails the job
// with its table, file, line and column, and that ignore-parse-errors
// makes a bad field NULL and skips a malformed record instead.
func TestFilesystemSourceParseErrors(t *testing.T) {
	in := t.TempDir()
	file := filepath.Join(in, "in.csv")
	writeFiles(t, in, map[string]string{"in.csv": "1,a\n2,b\nthree,c\n4,\"unclosed\n5,e,extra\n6,f\n"})
	ddl := `CREATE TABLE src (id BIGINT NOT NULL, name STRING) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv'%s);
CREATE TABLE p (id BIGINT, name STRING) WITH ('connector' = 'print');
INSERT INTO p SELECT * FROM src;`
	err := runErr(t, fmt.Sprintf(ddl, in, ""))
	want := fmt.Sprintf("reading table 'src': %s:3: column 'id' (field 1): cannot parse 'three' as BIGINT", file)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
	// With errors ignored: 'three' is NULL in a NOT NULL column, so that
	// record is skipped; the unclosed quote runs to the end of the file
	// and is skipped as one malformed record.
	got := materialize(t, run(t, fmt.Sprintf(ddl, in, ", 'csv.ignore-parse-errors' = 'true'"), 1))
	if w := []string{"[1, a]", "[2, b]"}; !slices.Equal(got, w) {
		t.Errorf("with ignored errors got %v, want %v", got, w)
	}
	writeFiles(t, in, map[string]string{"in.csv": "1,a\nx,b\n5,e,extra\n6\n"})
	nullable := strings.Replace(ddl, "NOT NULL", "", 1)
	got = materialize(t, run(t, fmt.Sprintf(nullable, in, ", 'csv.ignore-parse-errors' = 'true'"), 1))
	if w := []string{"[1, a]", "[5, e]", "[6, NULL]", "[NULL, b]"}; !slices.Equal(got, w) {
		t.Errorf("with ignored errors got %v, want %v", got, w)
	}
	writeFiles(t, in, map[string]string{"in.csv": "1,a\n2,b\n5,e,extra\n"})
	err = runErr(t, fmt.Sprintf(nullable, in, ""))
	if want := file + ":3: the record has 3 fields, the table 'src' 2 columns"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}

	writeFiles(t, in, map[string]string{"in.csv": "", "in.json": "{\"id\": 1}\n{\"id\": 2\n{\"id\": [3]}\n"})
	jsonDDL := strings.NewReplacer("'csv'", "'json'", "NOT NULL", "").Replace(ddl)
	err = runErr(t, fmt.Sprintf(jsonDDL, in, ""))
	if want := filepath.Join(in, "in.json") + ":2: decoding a json object"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
	got = materialize(t, run(t, fmt.Sprintf(jsonDDL, in, ", 'json.ignore-parse-errors' = 'true'"), 1))
	if w := []string{"[1, NULL]", "[NULL, NULL]"}; !slices.Equal(got, w) {
		t.Errorf("json with ignored errors got %v, want %v", got, w)
	}
}

func TestFilesystemSourceOptionErrors(t *testing.T) {
	for _, tc := range []struct{ opts, cols, want string }{
		{`, 'csv.field-delimiter' = ';;'`, "id INT", "table 'src': option 'csv.field-delimiter' must be one ASCII character other than a quote or a line break, got ';;' at line 1, column 104"},
		{`, 'json.ignore-parse-errors' = 'true'`, "id INT", "table 'src': option 'json.ignore-parse-errors' is for 'format' = 'json', but the table's format is 'csv'"},
		{`, 'csv.ignore-parse-errors' = 'yes please'`, "id INT", "option 'csv.ignore-parse-errors' must be true or false"},
		{`, 'csv.disable-quote-character' = 'true', 'csv.quote-character' = '|'`, "id INT", "options 'csv.quote-character' and 'csv.disable-quote-character' = 'true' exclude each other"},
		{`, 'source.rows-per-second' = '-1'`, "id INT", "option 'source.rows-per-second' must be a number of at least 0"},
		{`, 'csv.null-lateral' = 'x'`, "id INT", "unsupported option 'csv.null-lateral' for connector 'filesystem'"},
	} {
		script := fmt.Sprintf("CREATE TABLE src (%s) WITH ('connector' = 'filesystem', 'path' = '/nonexistent', 'format' = 'csv'%s);", tc.cols, tc.opts)
		_, err := sql.Prepare(script, sql.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\nerror %v\nwant  %s", script, err, tc.want)
		}
	}
	// A column the formats cannot read is refused when the table is read,
	// not when it is written.
	arrays := `CREATE TABLE src (id INT, xs ARRAY<INT>) WITH ('connector' = 'filesystem', 'path' = '/nonexistent', 'format' = 'csv');
CREATE TABLE p (id INT, xs ARRAY<INT>) WITH ('connector' = 'print');
INSERT INTO p SELECT * FROM src;`
	if err := runErr(t, arrays); err == nil || !strings.Contains(err.Error(), "table 'src': column 'xs' of type ARRAY<INT> cannot be read from csv files at line 1, column 27") {
		t.Errorf("error %v, want one refusing column xs", err)
	}
	// A missing path fails the job when it starts, naming the table.
	err := runErr(t, `CREATE TABLE src (id INT) WITH ('connector' = 'filesystem', 'path' = '/nonexistent/dir', 'format' = 'csv');
CREATE TABLE p (id INT) WITH ('connector' = 'print');
INSERT INTO p SELECT * FROM src;`)
	if err == nil || !strings.Contains(err.Error(), "table 'src'") || !strings.Contains(err.Error(), "/nonexistent/dir") {
		t.Errorf("error %v, want one naming the table and the path", err)
	}
}

// eventFiles writes n events "id,k,ts", one per 100 ms of event time,
// into files files for a job of parallelism par (files a multiple of par):
// the source deals file f to subtask f mod par, so file f holds the ids
// id = f mod par (mod par) of the (f / par)-th contiguous range. Every
// subtask then reads its events in event-time order, and all subtasks go
// through event time side by side, as a window job wants.
func eventFiles(t *testing.T, dir string, files, par, n int) {
	t.Helper()
	blocks := files / par
	per := (n + blocks - 1) / blocks
	for f := 0; f < files; f++ {
		var b strings.Builder
		block, lane := f/par, f%par
		for id := block * per; id < min((block+1)*per, n); id++ {
			if id%par != lane {
				continue
			}
			ts := time.UnixMilli(int64(id) * 100).UTC().Format("2006-01-02 15:04:05.000")
			fmt.Fprintf(&b, "%d,k%d,%s\n", id, id%3, ts)
		}
		writeFiles(t, dir, map[string]string{fmt.Sprintf("part-%02d.csv", f): b.String()})
	}
}

// eventWindows is what a 1-second tumbling count and sum per key of
// eventFiles' events gives, as the csv lines the window job commits.
func eventWindows(n int) []string {
	type key struct {
		w int64
		k int
	}
	count, sum := map[key]int64{}, map[key]int64{}
	for id := 0; id < n; id++ {
		k := key{int64(id) * 100 / 1000, id % 3}
		count[k]++
		sum[k] += int64(id)
	}
	var out []string
	for k, c := range count {
		start := time.UnixMilli(k.w * 1000).UTC().Format("2006-01-02 15:04:05.000")
		end := time.UnixMilli((k.w + 1) * 1000).UTC().Format("2006-01-02 15:04:05.000")
		out = append(out, fmt.Sprintf("%s,%s,k%d,%d,%d", start, end, k.k, c, sum[k]))
	}
	slices.Sort(out)
	return out
}

// windowJob is a filesystem source with a watermark, a tumbling window
// aggregation, and an exactly-once filesystem sink; extra goes into the
// source's options.
func windowJob(in, out, extra string) string {
	return fmt.Sprintf(`
SET 'execution.checkpointing.interval' = '50ms';
CREATE TABLE events (id BIGINT, k STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (
  'connector' = 'filesystem', 'path' = '%s', 'format' = 'csv'%s);
CREATE TABLE windows (window_start TIMESTAMP(3), window_end TIMESTAMP(3), k STRING, n BIGINT, s BIGINT) WITH (
  'connector' = 'filesystem', 'path' = '%s', 'format' = 'csv', 'sink.delivery-guarantee' = 'exactly_once');
INSERT INTO windows
SELECT window_start, window_end, k, COUNT(*), SUM(id)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND))
GROUP BY window_start, window_end, k;
`, in, extra, out)
}

// TestFilesystemSourceWindowRestore runs the window job over files, stops
// it mid-way, restores it from its latest checkpoint, and checks that the
// committed output holds every window exactly once.
func TestFilesystemSourceWindowRestore(t *testing.T) {
	in, out, ckpt := t.TempDir(), t.TempDir(), t.TempDir()
	const n = 3000
	eventFiles(t, in, 4, 2, n)
	script := windowJob(in, out, ", 'source.rows-per-second' = '3000'")
	// Stop the first run once it committed its first windows: at 3000
	// rows per second it is then far from done.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if m, _ := filepath.Glob(filepath.Join(out, "part-*")); len(m) > 0 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var log bytes.Buffer
	if err := sql.Run(ctx, script, sql.Options{Parallelism: 2, CheckpointDir: ckpt, Stdout: &log, Stderr: &log}); err != nil {
		t.Fatalf("first run: %v\n%s", err, log.String())
	}
	first := len(committedRows(t, out))
	if err := sql.Run(context.Background(), windowJob(in, out, ""), sql.Options{Parallelism: 2, CheckpointDir: ckpt, Restore: "latest", Stdout: &log, Stderr: &log}); err != nil {
		t.Fatalf("restored run: %v\n%s", err, log.String())
	}
	got, want := committedRows(t, out), eventWindows(n)
	t.Logf("the first run committed %d of %d windows", first, len(want))
	if first == 0 || first == len(want) {
		t.Errorf("the first run committed %d of %d windows; want some but not all, so that the restore has to continue it", first, len(want))
	}
	if !slices.Equal(got, want) {
		t.Errorf("committed %d lines, want %d:\n got %q\nwant %q", len(got), len(want), got, want)
	}
}

// TestFilesystemSourceFloatOverflow checks that a float literal beyond
// its column's range is a field error, as an integer overflow is: it
// fails the job, or is NULL with csv.ignore-parse-errors.
func TestFilesystemSourceFloatOverflow(t *testing.T) {
	in := t.TempDir()
	file := filepath.Join(in, "in.csv")
	writeFiles(t, in, map[string]string{"in.csv": "1,1.5,2.5\n2,1e400,1\n3,1,1e39\n4,-1e400,-1e39\n5,Infinity,NaN\n"})
	ddl := `CREATE TABLE src (id BIGINT, d DOUBLE, f FLOAT) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv'%s);
CREATE TABLE p (id BIGINT, d DOUBLE, f FLOAT) WITH ('connector' = 'print');
INSERT INTO p SELECT * FROM src;`
	err := runErr(t, fmt.Sprintf(ddl, in, ""))
	want := fmt.Sprintf("%s:2: column 'd' (field 2): cannot parse '1e400' as DOUBLE: value out of range", file)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
	got := materialize(t, run(t, fmt.Sprintf(ddl, in, ", 'csv.ignore-parse-errors' = 'true'"), 1))
	if w := []string{"[1, 1.5, 2.5]", "[2, NULL, 1.0]", "[3, 1.0, NULL]", "[4, NULL, NULL]", "[5, Infinity, NaN]"}; !slices.Equal(got, w) {
		t.Errorf("with ignored errors got %v, want %v", got, w)
	}
	writeFiles(t, in, map[string]string{"in.csv": "1,1,1e39\n"})
	err = runErr(t, fmt.Sprintf(ddl, in, ""))
	want = fmt.Sprintf("%s:1: column 'f' (field 3): cannot parse '1e39' as FLOAT: value out of range", file)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
}

// TestFilesystemSourceJSONNull checks that a json line null is a
// malformed record, not a row of NULLs.
func TestFilesystemSourceJSONNull(t *testing.T) {
	in := t.TempDir()
	file := filepath.Join(in, "in.json")
	writeFiles(t, in, map[string]string{"in.json": "{\"id\": 1, \"name\": \"a\"}\nnull\n {\"id\": 3} \n"})
	ddl := `CREATE TABLE src (id BIGINT, name STRING) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'json'%s);
CREATE TABLE p (id BIGINT, name STRING) WITH ('connector' = 'print');
INSERT INTO p SELECT * FROM src;`
	err := runErr(t, fmt.Sprintf(ddl, in, ""))
	if want := file + ":2: decoding a json object"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
	got := materialize(t, run(t, fmt.Sprintf(ddl, in, ", 'json.ignore-parse-errors' = 'true'"), 1))
	if w := []string{"[1, a]", "[3, NULL]"}; !slices.Equal(got, w) {
		t.Errorf("with ignored errors got %v, want %v", got, w)
	}
}

// TestFilesystemSourceCSVFraming checks that the source ends csv records
// where the field parser does: a stray quote inside a field, an escaped
// quote outside quotes and a quote in a comment line do not carry the
// record over the following lines, and a quoted field still holds a line
// break.
func TestFilesystemSourceCSVFraming(t *testing.T) {
	in := t.TempDir()
	writeFiles(t, in, map[string]string{"in.csv": "# a \"comment\n" +
		"1,12\" pipe\n" +
		"2,a\\\"b\n" +
		"3,\"two\nlines\"\n" +
		"4,\"it\\\"s\"\n" +
		"5,e\n"})
	script := fmt.Sprintf(`CREATE TABLE src (id BIGINT, name STRING) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv',
  'csv.allow-comments' = 'true', 'csv.escape-character' = '\', 'csv.ignore-parse-errors' = 'true');
CREATE TABLE p (id BIGINT, name STRING) WITH ('connector' = 'print');
INSERT INTO p SELECT id, REPLACE(name, '%s', '|') FROM src;`, in, "\n")
	got := materialize(t, run(t, script, 1))
	want := []string{`[1, 12" pipe]`, `[2, a"b]`, "[3, two|lines]", `[4, it"s]`, "[5, e]"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
