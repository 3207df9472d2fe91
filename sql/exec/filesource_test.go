package exec

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connectors/filesystem"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/types"
)

// FuzzFileSourceCSV checks that the csv decoder never panics, that fields
// quoted as a writer quotes them split back into the same fields, and
// that the file source frames records where the decoder's splitCSV reads
// them (see checkFraming).
func FuzzFileSourceCSV(f *testing.F) {
	f.Add([]byte(`1,"a,b",,x`), "a\"b", "", byte(','), byte('"'), byte(0))
	f.Add([]byte(`'it''s';\;x`), "p;q", "r'", byte(';'), byte('\''), byte('\\'))
	f.Add([]byte("# a \"comment\n1,12\" pipe\n2,a\\\"b\n3,\"two\nlines\"\n\"x\"y,\"z\r\nw\"\n4,\"\\\n\""), "", "", byte(','), byte('"'), byte('\\'))
	f.Fuzz(func(t *testing.T, rec []byte, a, b string, delim, quote, escape byte) {
		if delim == 0 || quote == 0 || delim == quote || escape == delim || escape == quote {
			return
		}
		cols := []catalog.Column{{Name: "x", Type: types.StringType}, {Name: "y", Type: types.BigIntType}, {Name: "z", Type: types.DecimalOf(5, 2)}}
		ff := &fileFormat{table: "t", cols: cols, delim: delim, quote: quote, escape: escape}
		_, _, _ = ff.decode(rec)
		ff.ignore = true
		if _, skip, err := ff.decode(rec); err != nil {
			t.Fatalf("ignoring parse errors, decode(%q) failed: %v (skip %v)", rec, err, skip)
		}
		quoted := func(s string) string {
			var sb strings.Builder
			sb.WriteByte(quote)
			for i := 0; i < len(s); i++ {
				if s[i] == quote || escape != 0 && s[i] == escape {
					if escape != 0 {
						sb.WriteByte(escape)
					} else {
						sb.WriteByte(quote)
					}
				}
				sb.WriteByte(s[i])
			}
			sb.WriteByte(quote)
			return sb.String()
		}
		line := quoted(a) + string([]byte{delim}) + quoted(b)
		fields, q, err := ff.splitCSV([]byte(line))
		if err != nil || !slices.Equal(fields, []string{a, b}) || !slices.Equal(q, []bool{true, true}) {
			t.Fatalf("splitCSV(%q) = %q, %v, %v; want %q", line, fields, q, err, []string{a, b})
		}
		if !bytes.ContainsAny([]byte{delim, quote, escape}, "\r\n#") {
			checkFraming(t, ff, rec, false)
			checkFraming(t, ff, rec, true)
		}
	})
}

// checkFraming reads data through the file source framed as fileSource
// frames csv, and checks each record against splitCSV: a record but the
// last does not end inside a quoted field, and every line break within a
// record is inside one (the text before it is an unclosed quoted field,
// or malformed otherwise). A comment line is one line.
func checkFraming(t *testing.T, ff *fileFormat, data []byte, comments bool) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.csv"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rf := filesystem.RecordFormat[[]byte]{Quote: ff.quote, Escape: ff.escape, Delimiter: ff.delim, Decode: func(rec []byte) ([]byte, bool, error) {
		return bytes.Clone(rec), false, nil
	}}
	if comments {
		rf.Comment = '#'
	}
	src, err := filesystem.NewRecordSource(dir, rf)
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.Open(connector.SourceContext{UID: "src", Parallelism: 1, MaxParallelism: 128}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs [][]byte
	for {
		st, err := r.Read(100, func(rec []byte, _ int64) error { recs = append(recs, rec); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if st == connector.Done {
			break
		}
	}
	unclosed := func(err error) bool { return err != nil && strings.Contains(err.Error(), "is not closed") }
	for i, rec := range recs {
		if comments && len(rec) > 0 && rec[0] == '#' {
			if bytes.IndexByte(rec, '\n') >= 0 {
				t.Fatalf("comments %v: the comment record %q of %q spans lines", comments, rec, data)
			}
			continue
		}
		if _, _, err := ff.splitCSV(rec); i < len(recs)-1 && unclosed(err) {
			t.Fatalf("comments %v: record %q of %q ends inside a quoted field: %v", comments, rec, data, err)
		}
		for j, c := range rec {
			if c != '\n' {
				continue
			}
			before := bytes.TrimSuffix(rec[:j], []byte{'\r'})
			if _, _, err := ff.splitCSV(before); err == nil {
				t.Fatalf("comments %v: record %q of %q runs on past the line break after %q, which splitCSV reads as a whole record", comments, rec, data, before)
			}
		}
	}
}
