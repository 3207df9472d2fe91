package filesystem

import (
	"strings"
	"testing"
)

// TestCSVDelimiter writes records with another field delimiter: fields
// holding it are quoted, commas are not.
func TestCSVDelimiter(t *testing.T) {
	c, err := newCodec[[]string](CSV)
	if err != nil {
		t.Fatal(err)
	}
	c.(*csvCodec[[]string]).comma = ';'
	got, err := c.appendRecord(nil, []string{"a,b", "c;d", `e"f`, ""})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a,b;\"c;d\";\"e\"\"f\";\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	type pair struct {
		A string
		B int
	}
	pc, _ := newCodec[pair](CSV)
	pc.(*csvCodec[pair]).comma = '\t'
	got, _ = pc.appendRecord(nil, pair{A: "x\ty,z", B: 7})
	if want := "\"x\ty,z\"\t7\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, d := range []byte{'"', '\n', '\r'} {
		o := SinkOptions{CSVDelimiter: d}
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "cannot be a quote or a line break") {
			t.Errorf("delimiter %q: %v", d, err)
		}
	}
}
