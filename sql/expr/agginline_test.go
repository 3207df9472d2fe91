package expr

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/clinkstream/clink/sql/types"
)

// inlineSpecs are the aggregates kept inline, with a value maker of their
// argument type.
var inlineSpecs = []struct {
	spec AggSpec
	val  func(int64) types.Value
}{
	{AggSpec{Name: "COUNT"}, nil},
	{AggSpec{Name: "COUNT", Args: []types.Type{types.StringType}}, func(x int64) types.Value { return types.String(string(rune('a' + x%26))) }},
	{AggSpec{Name: "SUM", Args: []types.Type{types.BigIntType}}, types.Int64},
	{AggSpec{Name: "SUM", Args: []types.Type{types.TinyIntType}}, func(x int64) types.Value { return types.IntOf(types.KindTinyInt, x%100) }},
	{AggSpec{Name: "SUM0", Args: []types.Type{types.IntType}}, func(x int64) types.Value { return types.Int32(int32(x)) }},
	{AggSpec{Name: "AVG", Args: []types.Type{types.SmallIntType}}, func(x int64) types.Value { return types.IntOf(types.KindSmallInt, x%30000) }},
	{AggSpec{Name: "AVG", Args: []types.Type{types.BigIntType}}, types.Int64},
}

// TestInlineMatchesAccumulator feeds the same values to an Accumulator and
// to its inline slots and compares, after every value, the results, the
// encodings (which must be the same bytes: state written by either layout
// restores in the other) and each one decoded from the other's bytes.
func TestInlineMatchesAccumulator(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range inlineSpecs {
		f := mustAgg(t, tc.spec)
		n := f.InlineSlots()
		if n == 0 {
			t.Fatalf("%+v is not kept inline", tc.spec)
		}
		acc := f.New()
		slots := make([]int64, n)
		// A new accumulator is zero slots.
		if got, want := f.InlineResult(slots), acc.Result(); got.String() != want.String() {
			t.Errorf("%+v empty: inline %s, accumulator %s", tc.spec, got, want)
		}
		for i := range 300 {
			v := types.Null
			if tc.val != nil && rng.IntN(5) > 0 {
				x := rng.Int64N(2000) - 1000
				if rng.IntN(50) == 0 {
					x = 1 << 62 // wraps the sum as Java's long does
				}
				v = tc.val(x)
			}
			if err := acc.Add(v); err != nil {
				t.Fatal(err)
			}
			f.AddInline(slots, v)
			got, want := f.InlineResult(slots), acc.Result()
			if got.String() != want.String() || got.Kind() != want.Kind() {
				t.Fatalf("%+v after %d values: inline %s (%v), accumulator %s (%v)", tc.spec, i+1, got, got.Kind(), want, want.Kind())
			}
			enc, err := acc.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			inl := f.AppendInline([]byte{0xee}, slots)
			if !bytes.Equal(inl[1:], enc) || inl[0] != 0xee {
				t.Fatalf("%+v after %d values: inline encodes %x, accumulator %x", tc.spec, i+1, inl[1:], enc)
			}
			back := make([]int64, n)
			if err := f.DecodeInline(enc, back); err != nil {
				t.Fatalf("%+v: decoding an accumulator's bytes inline: %v", tc.spec, err)
			}
			if f.InlineResult(back).String() != want.String() {
				t.Fatalf("%+v: decoded inline %s, want %s", tc.spec, f.InlineResult(back), want)
			}
			a2, err := f.Decode(inl[1:])
			if err != nil || a2.Result().String() != want.String() {
				t.Fatalf("%+v: inline bytes decoded as an accumulator: %v, %v", tc.spec, a2, err)
			}
		}
	}
}

// TestInlineNotFor: aggregates whose state is not a count and an int64
// are not kept inline, and DecodeInline refuses them.
func TestInlineNotFor(t *testing.T) {
	for _, spec := range []AggSpec{
		{Name: "COUNT", Distinct: true, Args: []types.Type{types.IntType}},
		{Name: "SUM", Distinct: true, Args: []types.Type{types.BigIntType}},
		{Name: "SUM", Args: []types.Type{types.DecimalOf(10, 2)}},
		{Name: "SUM0", Args: []types.Type{types.DoubleType}},
		{Name: "AVG", Args: []types.Type{types.FloatType}},
		{Name: "MIN", Args: []types.Type{types.BigIntType}},
		{Name: "MAX", Args: []types.Type{types.StringType}},
	} {
		f := mustAgg(t, spec)
		if n := f.InlineSlots(); n != 0 {
			t.Errorf("%+v: kept inline in %d slots", spec, n)
		}
		if err := f.DecodeInline([]byte{0}, make([]int64, 2)); err == nil {
			t.Errorf("%+v: DecodeInline accepted", spec)
		}
	}
}

// TestDecodeInlineCorrupt: a float or DECIMAL part in an integer sum's
// encoding, a truncated one or bytes left over are errors naming the
// aggregate.
func TestDecodeInlineCorrupt(t *testing.T) {
	f := mustAgg(t, AggSpec{Name: "SUM", Args: []types.Type{types.BigIntType}})
	good := f.AppendInline(nil, []int64{2, 7})
	dec := mustAgg(t, AggSpec{Name: "SUM", Args: []types.Type{types.DecimalOf(10, 2)}})
	acc := dec.New()
	_ = acc.Add(types.Decimal(5, 10, 2))
	withDecimal, _ := acc.MarshalBinary()
	withFloat := bytes.Clone(good)
	withFloat[2] = 1
	for name, b := range map[string][]byte{
		"truncated":     good[:len(good)-1],
		"trailing":      append(bytes.Clone(good), 0),
		"empty":         nil,
		"DECIMAL sum":   withDecimal,
		"float sum set": withFloat,
	} {
		err := f.DecodeInline(b, make([]int64, 2))
		if err == nil {
			t.Errorf("%s: decoded", name)
			continue
		}
		if !bytes.Contains([]byte(err.Error()), []byte("SUM accumulator")) {
			t.Errorf("%s: error %q does not name the aggregate", name, err)
		}
	}
}

func FuzzDecodeInline(f *testing.F) {
	for i, tc := range inlineSpecs {
		fn, _ := NewAggregate(tc.spec)
		slots := make([]int64, fn.InlineSlots())
		fn.AddInline(slots, types.Int64(3))
		f.Add(uint8(i), fn.AppendInline(nil, slots))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		fn, _ := NewAggregate(inlineSpecs[int(which)%len(inlineSpecs)].spec)
		slots := make([]int64, fn.InlineSlots())
		if err := fn.DecodeInline(data, slots); err != nil {
			return
		}
		_ = fn.InlineResult(slots)
		// What decodes inline decodes as an accumulator, to the same
		// result, and the inline encoding is the accumulator's.
		acc, err := fn.Decode(data)
		if err != nil {
			t.Fatalf("decoded inline but not as an accumulator: %v", err)
		}
		if got, want := fn.InlineResult(slots), acc.Result(); got.String() != want.String() {
			t.Fatalf("inline %s, accumulator %s", got, want)
		}
		inl := fn.AppendInline(nil, slots)
		again, err := fn.Decode(inl)
		if err != nil {
			t.Fatal(err)
		}
		if enc, _ := again.MarshalBinary(); !bytes.Equal(inl, enc) {
			t.Fatalf("inline %x, accumulator %x", inl, enc)
		}
	})
}
