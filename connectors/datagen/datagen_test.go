package datagen

import (
	"errors"
	"testing"

	"github.com/clinkstream/clink/sql/types"
)

func TestRowsArePureFunctionsOfTheIndex(t *testing.T) {
	fields := []Field{{"id", types.BigIntType}, {"n", types.IntType}, {"s", types.StringType}, {"d", types.DecimalOf(6, 2)}}
	opts := map[string]string{"fields.id.kind": "sequence", "fields.id.start": "5", "fields.id.end": "14",
		"fields.n.min": "-3", "fields.n.max": "3", "fields.s.length": "4", "fields.d.min": "1.50", "fields.d.max": "2.00"}
	g1, err := New(fields, opts)
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := New(fields, opts)
	if g1.Count() != 10 {
		t.Fatalf("count %d, want 10 (the sequence bounds the table)", g1.Count())
	}
	for i := int64(0); i < g1.Count(); i++ {
		a, b := g1.Row(i), g2.Row(i)
		if a.String() != b.String() {
			t.Fatalf("row %d differs between generators: %s vs %s", i, a, b)
		}
		if got := a.Values[0].Int64(); got != 5+i {
			t.Errorf("row %d: id %d, want %d", i, got, 5+i)
		}
		if n := a.Values[1].Int64(); n < -3 || n > 3 {
			t.Errorf("row %d: n %d outside [-3, 3]", i, n)
		}
		if len(a.Values[2].Str()) != 4 {
			t.Errorf("row %d: s %q, want length 4", i, a.Values[2].Str())
		}
		if u := a.Values[3].Unscaled(); u < 150 || u > 200 {
			t.Errorf("row %d: d %s outside [1.50, 2.00]", i, a.Values[3])
		}
	}
}

func TestOptionErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		opts map[string]string
		key  string
	}{
		{map[string]string{"number-of-rows": "-1"}, "number-of-rows"},
		{map[string]string{"fields.id.kind": "sequence", "fields.id.start": "1"}, "fields.id.end"},
		{map[string]string{"fields.id.kind": "sequence", "fields.id.start": "1", "fields.id.end": "2", "fields.id.min": "0"}, "fields.id.min"},
		{map[string]string{"fields.id.kind": "wild"}, "fields.id.kind"},
		{map[string]string{"fields.id.null-rate": "2"}, "fields.id.null-rate"},
	} {
		_, err := New([]Field{{"id", types.BigIntType}}, tc.opts)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Key != tc.key {
			t.Errorf("%v: error %v, want one about %s", tc.opts, err, tc.key)
		}
	}
}

// TestValuesStayPut pins rows of a seeded table: a restored job, or one
// run by another version, regenerates the same rows for the same indexes.
func TestValuesStayPut(t *testing.T) {
	fields := []Field{{"id", types.BigIntType}, {"k", types.BigIntType}, {"n", types.IntType}, {"t", types.TinyIntType},
		{"u", types.BigIntType}, {"s", types.StringType}, {"d", types.DecimalOf(6, 2)}, {"x", types.IntType}}
	opts := map[string]string{"fields.id.kind": "sequence", "fields.id.start": "5", "fields.id.end": "1000",
		"fields.k.min": "1", "fields.k.max": "1000", "fields.n.min": "-3", "fields.n.max": "3", "fields.s.length": "4",
		"fields.d.min": "1.50", "fields.d.max": "2.00", "fields.x.null-rate": "0.3", "seed": "7"}
	g, err := New(fields, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int64]string{
		0:   "+I[5, 570, 2, 106, -5758178444476089245, 9416, 1.97, 186288020]",
		1:   "+I[6, 952, 3, -8, 534218045281566618, 413a, 1.53, 1717817006]",
		2:   "+I[7, 932, 2, 80, 1804877081964974721, 07eb, 1.58, 652624418]",
		3:   "+I[8, 710, 2, -84, -2992379701617831635, 7a38, 1.76, -1006033874]",
		500: "+I[505, 910, -3, -82, -4051791098869209553, 8ce9, 1.57, NULL]",
		994: "+I[999, 375, -2, 77, 2682204591408891989, b9af, 1.89, 529520926]",
	} {
		if got := g.Row(i).String(); got != want {
			t.Errorf("row %d: %s, want %s", i, got, want)
		}
		vals := make([]types.Value, g.Width())
		g.Fill(i, vals)
		for j := range vals {
			if v := g.value(j, i); !types.Equal(vals[j], v) {
				t.Errorf("row %d, field %s: Fill made %v, the general path %v", i, fields[j].Name, vals[j], v)
			}
		}
	}
}
