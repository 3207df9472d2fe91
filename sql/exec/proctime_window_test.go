package exec

import (
	"bytes"
	"testing"

	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

func procWindowsTestCodec(t testing.TB) procWindowsCodec {
	var aggs []planner.AggCall
	for _, s := range []expr.AggSpec{{Name: "COUNT"}, {Name: "SUM", Args: []types.Type{types.BigIntType}}} {
		fn, err := expr.NewAggregate(s)
		if err != nil {
			t.Fatal(err)
		}
		aggs = append(aggs, planner.AggCall{Func: fn, Arg: -1, Filter: -1, Text: s.Name})
	}
	return procWindowsCodec{aggs: aggs, uid: "w"}
}

// FuzzProcWindowsCodec checks that the processing-time window state
// decodes what it encodes, and that a decoder fed any bytes fails or
// gives state that encodes again, without panicking.
func FuzzProcWindowsCodec(f *testing.F) {
	c := procWindowsTestCodec(f)
	st := &procWindows{keys: []types.Value{types.Int64(7), types.String("k")}}
	for _, start := range []int64{0, 10_000, -5} {
		w := procWindow{start: start, accs: []expr.Accumulator{c.aggs[0].Func.New(), c.aggs[1].Func.New()}}
		_ = w.accs[0].Add(types.Null)
		_ = w.accs[1].Add(types.Int64(start))
		st.wins = append(st.wins, w)
	}
	enc := c.Append(nil, st)
	got, n, err := c.Decode(enc)
	if err != nil || n != len(enc) {
		f.Fatalf("decoding the encoding: %v (used %d of %d bytes)", err, n, len(enc))
	}
	if again := c.Append(nil, got); !bytes.Equal(again, enc) {
		f.Fatalf("round trip changed the state: %x, was %x", again, enc)
	}
	if len(got.wins) != 3 || got.wins[1].start != 10_000 || got.wins[1].accs[1].Result().Int64() != 10_000 {
		f.Fatalf("decoded %+v", got)
	}
	f.Add(enc)
	f.Add(c.Append(nil, &procWindows{}))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, n, err := c.Decode(data)
		if err != nil {
			return
		}
		if n > len(data) {
			t.Fatalf("used %d of %d bytes", n, len(data))
		}
		_ = c.Append(nil, s)
	})
}
