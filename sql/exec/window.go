package exec

import (
	"fmt"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// assigner returns the root API's window assigner of a window TVF.
func assigner(w planner.WindowSpec) clink.WindowAssigner {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	switch w.Kind {
	case planner.Hop:
		return clink.SlidingWindows(ms(w.Size), ms(w.Slide))
	case planner.Cumulate:
		return clink.CumulateWindows(ms(w.Step), ms(w.Size))
	case planner.Session:
		return clink.SessionWindows(ms(w.Gap))
	}
	return clink.TumblingWindows(ms(w.Size))
}

// windowValues are window_start, window_end and window_time of win; the
// time has the rowtime's type.
func windowValues(win clink.Window, rowtime types.Type) []types.Value {
	t := types.Timestamp(win.MaxTimestamp(), 0, 3)
	if rowtime.Kind == types.KindTimestampLTZ {
		t = types.TimestampLTZ(win.MaxTimestamp(), 0, 3)
	}
	return []types.Value{types.Timestamp(win.Start, 0, 3), types.Timestamp(win.End, 0, 3), t}
}

func (b *builder) windowTableFunction(n *planner.WindowTableFunction) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	a, col := assigner(n.Window), n.TimeCol
	rowtime := n.Input.Fields()[col].Type
	if n.Window.Kind == planner.Session {
		return sessionTableFunction(in, n, a, rowtime), nil
	}
	return clink.FlatMap(in, n.UID(), func(r types.Row, out *clink.Collector[types.Row]) error {
		v := r.Values[col]
		if v.IsNull() {
			return nil
		}
		for _, win := range a.Assign(v.EpochMillis()) {
			vals := append(append(make([]types.Value, 0, len(r.Values)+3), r.Values...), windowValues(win, rowtime)...)
			out.CollectWithTimestamp(types.Row{Kind: r.Kind, Values: vals}, win.MaxTimestamp())
		}
		return nil
	}), nil
}

// sessionRows are the rows of one open session, encoded: a session's
// bounds are known only when it ends, so SESSION without aggregation keeps
// its rows until then.
type sessionRows struct {
	Rows [][]byte
}

// sessionRowsFunc collects rows into sessionRows; merging two sessions
// joins their rows.
type sessionRowsFunc struct{}

func (sessionRowsFunc) CreateAccumulator() sessionRows { return sessionRows{} }

// Add returns a new sessionRows. The old one may be in a checkpoint, but
// appending leaves the rows it holds as they are (only slots past its
// length are written), and the window operator never adds to a value it
// replaced: so no copy, which would make a session of n rows cost n².
func (sessionRowsFunc) Add(acc sessionRows, r types.Row) sessionRows {
	enc, _ := r.MarshalBinary() // cannot fail
	return sessionRows{Rows: append(acc.Rows, enc)}
}

// Merge joins the rows of two sessions a row bridged (appending to a, as
// Add does).
func (sessionRowsFunc) Merge(a, b sessionRows) sessionRows {
	return sessionRows{Rows: append(a.Rows, b.Rows...)}
}

func (sessionRowsFunc) Result(acc sessionRows) sessionRows { return acc }

// sessionTableFunction runs SESSION on its own: the rows of each
// partition key are held per session in keyed state and emitted, with the
// session's bounds, when the watermark passes its end.
func sessionTableFunction(in clink.Stream[types.Row], n *planner.WindowTableFunction, a clink.WindowAssigner, rowtime types.Type) clink.Stream[types.Row] {
	uid, part, tc := n.UID(), n.Partition, n.TimeCol
	keyOf := func(r types.Row) string {
		var k []byte
		for _, i := range part {
			k = types.AppendKey(k, r.Values[i])
		}
		return string(k)
	}
	in = clink.Filter(in, uid+".rowtime", func(r types.Row) bool { return !r.Values[tc].IsNull() })
	ws := clink.Aggregate(clink.KeyBy(in, keyOf), uid, a, clink.AggregateFunction[types.Row, sessionRows, sessionRows](sessionRowsFunc{}), clink.WindowOptions{})
	return clink.FlatMap(ws.Results(), uid+".rows", func(res clink.WindowResult[string, sessionRows], out *clink.Collector[types.Row]) error {
		wv := windowValues(res.Window, rowtime)
		for _, enc := range res.Value.Rows {
			var r types.Row
			if err := r.UnmarshalBinary(enc); err != nil {
				return fmt.Errorf("operator %s: decoding a row of session %s: %w", uid, res.Window, err)
			}
			out.Collect(types.Row{Kind: r.Kind, Values: append(r.Values, wv...)})
		}
		return nil
	})
}

// windowAcc is the state of one key and window: the encoded accumulators,
// or the error an aggregate gave (reported when the window fires; the
// window operator's functions cannot fail).
type windowAcc struct {
	Accs [][]byte
	Err  string
}

// windowResult is the result of one key and window: the aggregates'
// values, or the error.
type windowResult struct {
	Vals []types.Value
	Err  string
}

// windowAggFunc folds rows into a windowAcc with the aggregates of a
// WindowAggregate.
type windowAggFunc struct {
	aggs []planner.AggCall
	uid  string
}

func (f windowAggFunc) CreateAccumulator() windowAcc {
	acc := windowAcc{Accs: make([][]byte, len(f.aggs))}
	for i, a := range f.aggs {
		enc, err := a.Func.New().MarshalBinary()
		if err != nil {
			return windowAcc{Err: fmt.Sprintf("operator %s: encoding %s: %v", f.uid, a.Text, err)}
		}
		acc.Accs[i] = enc
	}
	return acc
}

func (f windowAggFunc) decode(acc windowAcc) ([]expr.Accumulator, error) {
	accs := make([]expr.Accumulator, len(f.aggs))
	for i, a := range f.aggs {
		x, err := a.Func.Decode(acc.Accs[i])
		if err != nil {
			return nil, fmt.Errorf("operator %s: %w", f.uid, err)
		}
		accs[i] = x
	}
	return accs, nil
}

// Add returns a new windowAcc: the old one may be in a checkpoint.
func (f windowAggFunc) Add(acc windowAcc, r types.Row) windowAcc {
	if acc.Err != "" {
		return acc
	}
	accs, err := f.decode(acc)
	if err != nil {
		return windowAcc{Err: err.Error()}
	}
	next := windowAcc{Accs: make([][]byte, len(accs))}
	for i, a := range f.aggs {
		if a.Filter < 0 || !r.Values[a.Filter].IsNull() && r.Values[a.Filter].Bool() {
			v := types.Null
			if a.Arg >= 0 {
				v = r.Values[a.Arg]
			}
			if err := accs[i].Add(v); err != nil {
				return windowAcc{Err: fmt.Sprintf("operator %s: %s: %v", f.uid, a.Text, err)}
			}
		}
		enc, err := accs[i].MarshalBinary()
		if err != nil {
			return windowAcc{Err: fmt.Sprintf("operator %s: encoding %s: %v", f.uid, a.Text, err)}
		}
		next.Accs[i] = enc
	}
	return next
}

// Merge merges the accumulators of two session windows that a row
// bridged. Every aggregate of sql/expr can merge.
func (f windowAggFunc) Merge(a, b windowAcc) windowAcc {
	switch {
	case a.Err != "":
		return a
	case b.Err != "":
		return b
	}
	as, err := f.decode(a)
	if err != nil {
		return windowAcc{Err: err.Error()}
	}
	bs, err := f.decode(b)
	if err != nil {
		return windowAcc{Err: err.Error()}
	}
	next := windowAcc{Accs: make([][]byte, len(as))}
	for i, agg := range f.aggs {
		if err := as[i].Merge(bs[i]); err != nil {
			return windowAcc{Err: fmt.Sprintf("operator %s: merging sessions of %s: %v", f.uid, agg.Text, err)}
		}
		enc, err := as[i].MarshalBinary()
		if err != nil {
			return windowAcc{Err: fmt.Sprintf("operator %s: encoding %s: %v", f.uid, agg.Text, err)}
		}
		next.Accs[i] = enc
	}
	return next
}

func (f windowAggFunc) Result(acc windowAcc) windowResult {
	if acc.Err != "" {
		return windowResult{Err: acc.Err}
	}
	accs, err := f.decode(acc)
	if err != nil {
		return windowResult{Err: err.Error()}
	}
	vals := make([]types.Value, len(accs))
	for i, a := range accs {
		vals[i] = a.Result()
	}
	return windowResult{Vals: vals}
}

func (b *builder) windowAggregate(n *planner.WindowAggregate) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	if n.Window.Kind != planner.Session {
		return b.fixedWindowAggregate(in, n)
	}
	keys, uid := n.Keys, n.UID()
	rowtime := n.Input.Fields()[n.TimeCol].Type
	keyOf := func(r types.Row) string {
		var k []byte
		for _, i := range keys {
			k = types.AppendKey(k, r.Values[i])
		}
		return string(k)
	}
	// A row without a rowtime belongs to no window (as in the
	// WindowTableFunction); the window operator would refuse it.
	tc := n.TimeCol
	in = clink.Filter(in, uid+".rowtime", func(r types.Row) bool { return !r.Values[tc].IsNull() })
	ws := clink.Aggregate(clink.KeyBy(in, keyOf), uid, assigner(n.Window), clink.AggregateFunction[types.Row, windowAcc, windowResult](windowAggFunc{aggs: n.Aggs, uid: uid}), clink.WindowOptions{})
	return clink.FlatMap(ws.Results(), uid+".rows", func(res clink.WindowResult[string, windowResult], out *clink.Collector[types.Row]) error {
		if res.Value.Err != "" {
			return fmt.Errorf("%s", res.Value.Err)
		}
		vals, err := appendKey(make([]types.Value, 0, len(keys)+len(res.Value.Vals)+3), res.Key, len(keys))
		if err != nil {
			return fmt.Errorf("operator %s: decoding its key: %w", uid, err)
		}
		vals = append(vals, res.Value.Vals...)
		vals = append(vals, windowValues(res.Window, rowtime)...)
		out.Collect(types.Row{Kind: changelog.Insert, Values: vals})
		return nil
	}), nil
}
