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
