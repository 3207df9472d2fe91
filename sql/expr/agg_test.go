package expr

import (
	"testing"

	"github.com/clinkstream/clink/sql/types"
)

func mustAgg(t *testing.T, spec AggSpec) *AggFunc {
	t.Helper()
	f, err := NewAggregate(spec)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// roundTrip encodes and decodes an accumulator, as keyed state does.
func roundTrip(t *testing.T, f *AggFunc, a Accumulator) Accumulator {
	t.Helper()
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := f.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func ints(vs ...int64) []types.Value {
	out := make([]types.Value, len(vs))
	for i, v := range vs {
		out[i] = types.Int32(int32(v))
	}
	return out
}

func TestAggregateResultTypes(t *testing.T) {
	for _, tc := range []struct {
		spec AggSpec
		want string
	}{
		{AggSpec{Name: "count"}, "BIGINT NOT NULL"},
		{AggSpec{Name: "COUNT", Args: []types.Type{types.StringType}}, "BIGINT NOT NULL"},
		{AggSpec{Name: "SUM", Args: []types.Type{types.IntType.WithNotNull(true)}}, "INT"},
		{AggSpec{Name: "SUM0", Args: []types.Type{types.IntType}}, "INT NOT NULL"},
		{AggSpec{Name: "AVG", Args: []types.Type{types.IntType}}, "INT"},
		{AggSpec{Name: "SUM", Args: []types.Type{types.DecimalOf(10, 2)}}, "DECIMAL(38, 2)"},
		{AggSpec{Name: "AVG", Args: []types.Type{types.DecimalOf(10, 2)}}, "DECIMAL(38, 6)"},
		{AggSpec{Name: "AVG", Args: []types.Type{types.DoubleType}}, "DOUBLE"},
		{AggSpec{Name: "MAX", Args: []types.Type{types.TimestampOf(3).WithNotNull(true)}}, "TIMESTAMP(3)"},
	} {
		if got := mustAgg(t, tc.spec).Result.String(); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.spec, got, tc.want)
		}
	}
	if _, err := NewAggregate(AggSpec{Name: "SUM", Args: []types.Type{types.StringType}}); err == nil {
		t.Error("SUM(STRING) accepted")
	}
}

func TestAggregates(t *testing.T) {
	type step struct {
		retract bool
		v       types.Value
		want    string // Result after the step
	}
	add := func(v types.Value, want string) step { return step{v: v, want: want} }
	ret := func(v types.Value, want string) step { return step{retract: true, v: v, want: want} }
	for _, tc := range []struct {
		spec  AggSpec
		steps []step
	}{
		{AggSpec{Name: "COUNT"}, []step{add(types.Null, "1"), add(types.Int32(1), "2"), ret(types.Null, "1")}},
		{AggSpec{Name: "COUNT", Args: []types.Type{types.IntType}}, []step{add(types.Null, "0"), add(types.Int32(1), "1"), ret(types.Int32(1), "0")}},
		{AggSpec{Name: "COUNT", Distinct: true, Args: []types.Type{types.IntType}, Retract: true}, []step{
			add(types.Int32(1), "1"), add(types.Int32(1), "1"), add(types.Int32(2), "2"), add(types.Null, "2"),
			ret(types.Int32(1), "2"), ret(types.Int32(1), "1"),
		}},
		{AggSpec{Name: "SUM", Args: []types.Type{types.IntType}}, []step{
			add(types.Null, "NULL"), add(types.Int32(5), "5"), add(types.Int32(2147483647), "-2147483644"),
			ret(types.Int32(2147483647), "5"), ret(types.Int32(5), "NULL"),
		}},
		{AggSpec{Name: "SUM0", Args: []types.Type{types.IntType}}, []step{add(types.Null, "0"), add(types.Int32(3), "3")}},
		{AggSpec{Name: "SUM", Args: []types.Type{types.DecimalOf(10, 2)}}, []step{
			add(types.Decimal(150, 10, 2), "1.50"), add(types.Decimal(-25, 10, 2), "1.25"),
		}},
		{AggSpec{Name: "AVG", Args: []types.Type{types.IntType}}, []step{
			add(types.Int32(1), "1"), add(types.Int32(2), "1"), add(types.Int32(4), "2"), ret(types.Int32(1), "3"),
		}},
		{AggSpec{Name: "AVG", Args: []types.Type{types.DoubleType}}, []step{add(types.Float64(1), "1.0"), add(types.Float64(2), "1.5")}},
		{AggSpec{Name: "AVG", Args: []types.Type{types.DecimalOf(10, 2)}}, []step{
			add(types.Decimal(100, 10, 2), "1.000000"), add(types.Decimal(0, 10, 2), "0.500000"), add(types.Decimal(0, 10, 2), "0.333333"),
		}},
		{AggSpec{Name: "MAX", Args: []types.Type{types.StringType}}, []step{
			add(types.String("b"), "b"), add(types.String("a"), "b"), add(types.Null, "b"), add(types.String("c"), "c"),
		}},
		{AggSpec{Name: "MIN", Args: []types.Type{types.IntType}, Retract: true}, []step{
			add(types.Int32(3), "3"), add(types.Int32(1), "1"), add(types.Int32(1), "1"), add(types.Int32(2), "1"),
			ret(types.Int32(1), "1"), ret(types.Int32(1), "2"), ret(types.Int32(2), "3"), ret(types.Int32(3), "NULL"),
		}},
		{AggSpec{Name: "SUM", Distinct: true, Args: []types.Type{types.BigIntType}, Retract: true}, []step{
			add(types.Int64(5), "5"), add(types.Int64(5), "5"), add(types.Int64(7), "12"), ret(types.Int64(5), "12"), ret(types.Int64(5), "7"),
		}},
	} {
		f := mustAgg(t, tc.spec)
		acc := f.New()
		for i, s := range tc.steps {
			var err error
			if s.retract {
				err = acc.Retract(s.v)
			} else {
				err = acc.Add(s.v)
			}
			if err != nil {
				t.Fatalf("%+v step %d: %v", tc.spec, i, err)
			}
			// Every step survives a trip through state.
			acc = roundTrip(t, f, acc)
			if got := acc.Result().String(); got != s.want {
				t.Errorf("%+v step %d: got %s, want %s", tc.spec, i, got, s.want)
			}
		}
	}
}

func TestAggregateMerge(t *testing.T) {
	for _, spec := range []AggSpec{
		{Name: "COUNT"},
		{Name: "SUM", Args: []types.Type{types.IntType}},
		{Name: "AVG", Args: []types.Type{types.IntType}},
		{Name: "MIN", Args: []types.Type{types.IntType}},
		{Name: "MAX", Args: []types.Type{types.IntType}, Retract: true},
		{Name: "COUNT", Distinct: true, Args: []types.Type{types.IntType}},
	} {
		f := mustAgg(t, spec)
		all, a, b := f.New(), f.New(), f.New()
		for i, v := range ints(5, 3, 9, 3, 1, 9, 4) {
			_ = all.Add(v)
			if i%2 == 0 {
				_ = a.Add(v)
			} else {
				_ = b.Add(v)
			}
		}
		if err := a.Merge(b); err != nil {
			t.Fatal(err)
		}
		if a.Result().String() != all.Result().String() {
			t.Errorf("%+v: merged %s, whole %s", spec, a.Result(), all.Result())
		}
	}
	if err := mustAgg(t, AggSpec{Name: "COUNT"}).New().Merge(mustAgg(t, AggSpec{Name: "SUM", Args: []types.Type{types.IntType}}).New()); err == nil {
		t.Error("merged different accumulators")
	}
	if err := mustAgg(t, AggSpec{Name: "MIN", Args: []types.Type{types.IntType}}).New().Retract(types.Int32(1)); err == nil {
		t.Error("MIN without Retract accepted a retraction")
	}
}

// TestAccumulatorClone: a clone and its original change independently,
// the retracting and distinct multisets included.
func TestAccumulatorClone(t *testing.T) {
	for _, spec := range []AggSpec{
		{Name: "COUNT"},
		{Name: "SUM", Args: []types.Type{types.IntType}},
		{Name: "AVG", Args: []types.Type{types.DecimalOf(10, 2)}},
		{Name: "MIN", Args: []types.Type{types.IntType}},
		{Name: "MAX", Args: []types.Type{types.IntType}, Retract: true},
		{Name: "COUNT", Distinct: true, Args: []types.Type{types.IntType}},
		{Name: "SUM", Distinct: true, Args: []types.Type{types.IntType}, Retract: true},
	} {
		f := mustAgg(t, spec)
		a := f.New()
		for _, v := range ints(5, 3, 9) {
			_ = a.Add(v)
		}
		before := a.Result().String()
		c := a.Clone()
		for _, v := range ints(20, 1, 7) {
			_ = a.Add(v)
		}
		if spec.Retract {
			_ = a.Retract(types.Int32(9))
		}
		if got := c.Result().String(); got != before {
			t.Errorf("%+v: the clone changed with its original: %s, was %s", spec, got, before)
		}
		after := a.Result().String()
		_ = c.Add(types.Int32(100))
		_ = c.Add(types.Int32(-100))
		if got := a.Result().String(); got != after {
			t.Errorf("%+v: the original changed with its clone: %s, was %s", spec, got, after)
		}
	}
}

func FuzzAccumulatorDecode(f *testing.F) {
	specs := []AggSpec{
		{Name: "COUNT"},
		{Name: "SUM", Args: []types.Type{types.DecimalOf(10, 2)}},
		{Name: "MIN", Args: []types.Type{types.IntType}, Retract: true},
		{Name: "COUNT", Distinct: true, Args: []types.Type{types.StringType}},
	}
	for i, s := range specs {
		fn, _ := NewAggregate(s)
		acc := fn.New()
		_ = acc.Add(types.Int32(3))
		b, _ := acc.MarshalBinary()
		f.Add(uint8(i), b)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		fn, _ := NewAggregate(specs[int(which)%len(specs)])
		acc, err := fn.Decode(data)
		if err != nil {
			return
		}
		_ = acc.Result()
		if _, err := acc.MarshalBinary(); err != nil {
			t.Fatal(err)
		}
	})
}
