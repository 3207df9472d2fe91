package filesystem

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinkstream/clink/connector"
)

// readRecords reads every record of r, k records per Read, and returns
// them with the offset after each Read.
func readRecords(t *testing.T, r connector.SourceReader[string], k int) ([]string, [][]byte) {
	t.Helper()
	var out []string
	var offsets [][]byte
	for {
		st, err := r.Read(k, func(v string, _ int64) error { out = append(out, v); return nil })
		if err != nil {
			t.Fatal(err)
		}
		off, _ := r.Offset()
		offsets = append(offsets, off)
		if st == connector.Done {
			return out, offsets
		}
	}
}

// TestRecordSourceFramesAndSkips frames records by the caller's quote and
// escape characters, leaves out what Decode skips, and resumes after a
// skipped record at its offset.
func TestRecordSourceFramesAndSkips(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), "'x\ny'\n#skip\n\n'p\\'\nq'\nlast")
	f := RecordFormat[string]{Quote: '\'', Escape: '\\', SkipBlank: true, Decode: func(rec []byte) (string, bool, error) {
		if strings.HasPrefix(string(rec), "#") {
			return "", true, nil
		}
		if string(rec) == "bad" {
			return "", false, errors.New("a bad record")
		}
		return string(rec), false, nil
	}}
	src, err := NewRecordSource(dir, f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.Open(ctxOf(0, 1), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, offsets := readRecords(t, r, 1)
	want := []string{"'x\ny'", "'p\\'\nq'", "last"}
	if !slices.Equal(got, want) {
		t.Fatalf("records %q, want %q", got, want)
	}
	// Resuming after the first record skips the comment and reads on.
	src2, _ := NewRecordSource(dir, f)
	r2, err := src2.Open(ctxOf(0, 1), offsets[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readRecords(t, r2, 5); !slices.Equal(got, want[1:]) {
		t.Fatalf("resumed records %q, want %q", got, want[1:])
	}

	// Without a quote character every line is a record, and an error
	// names the file and line.
	writeFile(t, filepath.Join(dir, "a.txt"), "'a\nbad\n")
	f.Quote, f.Escape = 0, 0
	src3, _ := NewRecordSource(dir, f)
	r3, _ := src3.Open(ctxOf(0, 1), nil, nil)
	_, err = r3.Read(10, func(string, int64) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "a.txt:2: a bad record") {
		t.Fatalf("error %v, want one naming a.txt:2", err)
	}
	if _, err := NewRecordSource(dir, RecordFormat[string]{}); err == nil {
		t.Fatal("a record source without Decode was accepted")
	}
}

// TestRecordSourceCSVFraming frames csv records as a field parser reads
// them: a quote opens a field only at its start, an escape takes the
// next character literally inside quotes and out, and a comment line
// ends at its line break whatever quotes it holds.
func TestRecordSourceCSVFraming(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		f    RecordFormat[string]
		in   string
		want []string
	}{
		{"a quote mid-field", RecordFormat[string]{Quote: '"'}, "1,12\" pipe\n2,b\n3,c\n", []string{`1,12" pipe`, "2,b", "3,c"}},
		{"a quote after a space", RecordFormat[string]{Quote: '"', Delimiter: ';'}, "1; \"x\n2;\"y\n z\"\n", []string{`1; "x`, "2;\"y\n z\""}},
		{"an escaped quote outside quotes", RecordFormat[string]{Quote: '"', Escape: '\\'}, "a\\\"b,1\n\\\"c,2\n3,\"d\\\"\ne\"\n", []string{`a\"b,1`, `\"c,2`, "3,\"d\\\"\ne\""}},
		{"an escaped delimiter", RecordFormat[string]{Quote: '"', Escape: '\\'}, "a\\,\"b\nc\n", []string{`a\,"b`, "c"}},
		{"an escape before the line break", RecordFormat[string]{Quote: '"', Escape: '\\'}, "a\\\nb\n\"c\\\nd\"\n", []string{`a\`, "b", "\"c\\\nd\""}},
		{"a doubled quote", RecordFormat[string]{Quote: '"'}, "\"a\"\"\nb\",1\n\"\"\n\"x\"y,\"z\nw\"\n", []string{"\"a\"\"\nb\",1", `""`, "\"x\"y,\"z\nw\""}},
		{"a comment", RecordFormat[string]{Quote: '"', Comment: '#'}, "# it's \"quoted\n1,a\n#,\"x\n2,\"b\n#c\"\n", []string{`# it's "quoted`, "1,a", `#,"x`, "2,\"b\n#c\""}},
		{"no comments", RecordFormat[string]{Quote: '"'}, "#,\"x\n1\"\n2\n", []string{"#,\"x\n1\"", "2"}},
		{"a line break in quotes", RecordFormat[string]{Quote: '\'', Delimiter: ';'}, "1;'multi\r\nline';x\r\n2;y\r\n", []string{"1;'multi\r\nline';x", "2;y"}},
	} {
		writeFile(t, filepath.Join(dir, "a.txt"), tc.in)
		tc.f.Decode = func(rec []byte) (string, bool, error) { return string(rec), false, nil }
		src, err := NewRecordSource(dir, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := src.Open(ctxOf(0, 1), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := readRecords(t, r, 10); !slices.Equal(got, tc.want) {
			t.Errorf("%s: records %q, want %q", tc.name, got, tc.want)
		}
		r.Close()
	}
}
