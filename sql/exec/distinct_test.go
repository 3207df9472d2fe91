package exec

import (
	"strings"
	"testing"

	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

func distinctAggs(t testing.TB) []planner.AggCall {
	t.Helper()
	count, err := expr.NewAggregate(expr.AggSpec{Name: "COUNT"})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := expr.NewAggregate(expr.AggSpec{Name: "COUNT", Distinct: true, Args: []types.Type{types.BigIntType}})
	if err != nil {
		t.Fatal(err)
	}
	return []planner.AggCall{
		{Func: count, Arg: -1, Filter: -1, Text: "COUNT(*)"},
		{Func: dc, Arg: 0, Filter: -1, Text: "COUNT(DISTINCT a)"},
	}
}

// FuzzDistinctDecoders feeds arbitrary bytes to the decoders of the
// DISTINCT entries and of the group state that goes with them: they fail
// or decode, never panic, and what they decode comes back the same from
// its encoding.
func FuzzDistinctDecoders(f *testing.F) {
	kc, cc := distinctKeyCodec{maxPar: 128}, distinctCountsCodec{}
	f.Add(kc.Append(nil, distinctKey{group: "g", slot: 1, num: -5, str: "x"}))
	f.Add(cc.Append(nil, distinctCounts{1, 0, 3, 0}))
	aggs := distinctAggs(f)
	_, distinct := planDistinct(aggs)
	gc := groupCodec{aggs: aggs, distinct: distinct, uid: "agg"}
	g := &groupState{count: 2, accs: []expr.Accumulator{aggs[0].Func.New(), aggs[1].Func.NewDeduplicated()}}
	g.accs[1].Add(types.Int64(7))
	f.Add(gc.Append(nil, g))
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, _, err := kc.Decode(b); err == nil {
			enc := kc.Append(nil, k)
			if back, n, err := kc.Decode(enc); err != nil || back != k || n != len(enc) {
				t.Fatalf("key %+v encodes as %x, which decodes as %+v, %d, %v", k, enc, back, n, err)
			}
		}
		if c, _, err := cc.Decode(b); err == nil {
			enc := cc.Append(nil, c)
			if back, n, err := cc.Decode(enc); err != nil || back != c || n != len(enc) {
				t.Fatalf("counts %v encode as %x, which decode as %v, %d, %v", c, enc, back, n, err)
			}
		}
		gc.Decode(b)
	})
}

// TestDistinctGroupStateOldFormat restores the group state of a DISTINCT
// aggregation written before its values were entries of their own: the
// error says so, naming the operator.
func TestDistinctGroupStateOldFormat(t *testing.T) {
	aggs := distinctAggs(t)
	_, distinct := planDistinct(aggs)
	old := groupCodec{aggs: aggs, uid: "agg"}
	g := &groupState{count: 1, accs: []expr.Accumulator{aggs[0].Func.New(), aggs[1].Func.New()}}
	g.accs[1].Add(types.Int64(7))
	enc := old.Append(nil, g)
	_, _, err := groupCodec{aggs: aggs, distinct: distinct, uid: "agg"}.Decode(enc)
	if err == nil || !strings.Contains(err.Error(), "operator agg") || !strings.Contains(err.Error(), "older version") {
		t.Fatalf("decoding the old format: %v", err)
	}
	// The new format round-trips.
	nc := groupCodec{aggs: aggs, distinct: distinct, uid: "agg"}
	g.accs[1] = aggs[1].Func.NewDeduplicated()
	g.accs[1].Add(types.Int64(7))
	back, n, err := nc.Decode(nc.Append(nil, g))
	if err != nil || n != len(nc.Append(nil, g)) || back.count != 1 || back.accs[1].Result().Int64() != 1 {
		t.Fatalf("round trip: %+v, %d, %v", back, n, err)
	}
}

// TestPlanDistinctSlots shares an entry between up to distinctLanes
// aggregates over one column and gives more of them further slots.
func TestPlanDistinctSlots(t *testing.T) {
	base := distinctAggs(t)
	aggs := []planner.AggCall{base[0]}
	for i := range 6 {
		a := base[1]
		a.Filter = i
		aggs = append(aggs, a)
	}
	other := base[1]
	other.Arg = 3
	aggs = append(aggs, other)
	slots, distinct := planDistinct(aggs)
	if distinct[0] || !distinct[1] || !distinct[7] {
		t.Fatalf("distinct %v", distinct)
	}
	if len(slots) != 3 || len(slots[0].aggs) != 4 || slots[0].col != 0 || slots[1].col != 0 || len(slots[1].aggs) != 2 || slots[2].col != 3 {
		t.Fatalf("slots %+v", slots)
	}
	if !slots[0].num {
		t.Fatal("a BIGINT column is not keyed by its integer")
	}
}
