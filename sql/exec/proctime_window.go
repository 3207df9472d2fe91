package exec

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// procWindowAggregate builds a WindowAggregate over processing-time
// TUMBLE windows (Window.ProcTime): clink.KeyBy on the encoded group key
// and clink.KeyedProcess. A row goes into the window of the wall clock
// when the operator processes it (the value of the PROCTIME() column is
// not read), aligned to the window size since the epoch (UTC). Each key
// keeps its open windows' accumulators in value state and a
// processing-time timer at every window's end, which emits
// the window's row and drops it. Rows are never late.
//
// At the end of a bounded input every open window fires at once (an
// event-time timer at the final watermark), so that no row is lost; Flink
// fires them so in batch mode. A restored job fires the windows whose end
// passed while it was down as soon as it runs.
func (b *builder) procWindowAggregate(n *planner.WindowAggregate) (clink.Stream[types.Row], error) {
	if n.Window.Kind != planner.Tumble {
		return clink.Stream[types.Row]{}, fmt.Errorf("operator %s: processing-time %s windows are not supported", n.UID(), n.Window.Kind)
	}
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	keys, aggs, uid, size := n.Keys, n.Aggs, n.UID(), n.Window.Size
	ltz := n.Fields()[len(n.Fields())-1].Type.Kind == types.KindTimestampLTZ
	keyOf := func(r types.Row) string {
		var k []byte
		for _, i := range keys {
			k = types.AppendKey(k, r.Values[i])
		}
		return string(k)
	}
	emit := func(st *procWindows, w procWindow, out *clink.Collector[types.Row]) {
		vals := make([]types.Value, 0, len(keys)+len(aggs)+3)
		vals = append(vals, st.keys...)
		for _, a := range w.accs {
			vals = append(vals, a.Result())
		}
		end := w.start + size
		t := types.Timestamp(end-1, 0, 3)
		if ltz {
			t = types.TimestampLTZ(end-1, 0, 3)
		}
		vals = append(vals, types.Timestamp(w.start, 0, 3), types.Timestamp(end, 0, 3), t)
		out.Collect(types.Row{Kind: changelog.Insert, Values: vals})
	}
	f := clink.KeyedProcessFunction[string, types.Row, *procWindows, types.Row]{
		ProcessElement: func(ctx *clink.KeyedContext[string, *procWindows], r types.Row, _ *clink.Collector[types.Row]) error {
			start := floorTo(ctx.CurrentProcessingTime(), size)
			var ferr error
			ctx.UpdateValue(func(st *procWindows, ok bool) (*procWindows, bool) {
				if !ok {
					st = &procWindows{}
					for _, i := range keys {
						st.keys = append(st.keys, r.Values[i])
					}
					// The end of a bounded input fires what is open.
					ctx.RegisterEventTimeTimer(math.MaxInt64)
				}
				i := slices.IndexFunc(st.wins, func(w procWindow) bool { return w.start == start })
				if i < 0 {
					w := procWindow{start: start, accs: make([]expr.Accumulator, len(aggs))}
					for j, a := range aggs {
						w.accs[j] = a.Func.New()
					}
					st.wins = append(st.wins, w)
					i = len(st.wins) - 1
					ctx.RegisterProcessingTimeTimer(start + size)
				}
				ferr = accumulate(st.wins[i].accs, aggs, r, uid)
				return st, true
			})
			return ferr
		},
		OnTimer: func(ctx *clink.KeyedContext[string, *procWindows], ts int64, d clink.TimeDomain, out *clink.Collector[types.Row]) error {
			st, ok := ctx.Value()
			if !ok {
				return nil
			}
			var open []procWindow
			for _, w := range st.wins {
				if d == clink.EventTime || w.start+size <= ts {
					emit(st, w, out)
				} else {
					open = append(open, w)
				}
			}
			if len(open) == 0 {
				ctx.Clear()
				return nil
			}
			st = st.clone()
			st.wins = open
			ctx.SetValue(st)
			return nil
		},
		ValueCodec: procWindowsCodec{aggs: aggs, uid: uid},
		ValueCopy:  (*procWindows).clone,
	}
	return clink.KeyedProcess(clink.KeyBy(in, keyOf), uid, f), nil
}

// procWindows is a key's state: its key values and open windows.
type procWindows struct {
	keys []types.Value
	wins []procWindow
}

// procWindow is one open window: its start and accumulators.
type procWindow struct {
	start int64
	accs  []expr.Accumulator
}

func (s *procWindows) clone() *procWindows {
	c := &procWindows{keys: s.keys, wins: make([]procWindow, len(s.wins))}
	for i, w := range s.wins {
		c.wins[i] = procWindow{start: w.start, accs: make([]expr.Accumulator, len(w.accs))}
		for j, a := range w.accs {
			c.wins[i].accs[j] = a.Clone()
		}
	}
	return c
}

// procWindowsCodec encodes procWindows: the key values as a row, the
// number of windows, and per window its start and each accumulator's
// encoding with its length.
type procWindowsCodec struct {
	aggs []planner.AggCall
	uid  string
}

func (c procWindowsCodec) Append(dst []byte, s *procWindows) []byte {
	dst, err := types.Row{Kind: changelog.Insert, Values: s.keys}.AppendBinary(dst)
	if err != nil {
		panic(fmt.Sprintf("operator %s: encoding a window key: %v", c.uid, err))
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.wins)))
	for _, w := range s.wins {
		dst = binary.AppendVarint(dst, w.start)
		for _, a := range w.accs {
			enc, err := a.MarshalBinary()
			if err != nil {
				// The accumulators of sql/expr encode without failing.
				panic(fmt.Sprintf("operator %s: encoding an accumulator: %v", c.uid, err))
			}
			dst = binary.AppendUvarint(dst, uint64(len(enc)))
			dst = append(dst, enc...)
		}
	}
	return dst
}

func (c procWindowsCodec) Decode(src []byte) (*procWindows, int, error) {
	bad := func(what string) (*procWindows, int, error) {
		return nil, 0, fmt.Errorf("operator %s: window state: %s", c.uid, what)
	}
	row, used, err := types.DecodeRow(src)
	if err != nil {
		return nil, 0, fmt.Errorf("operator %s: window state: %w", c.uid, err)
	}
	s := &procWindows{keys: row.Values}
	nw, m := binary.Uvarint(src[used:])
	if m <= 0 || nw > uint64(len(src)) {
		return bad("bad window count")
	}
	used += m
	for range nw {
		start, m := binary.Varint(src[used:])
		if m <= 0 {
			return bad("bad window start")
		}
		used += m
		w := procWindow{start: start, accs: make([]expr.Accumulator, len(c.aggs))}
		for j, a := range c.aggs {
			l, m := binary.Uvarint(src[used:])
			if m <= 0 || l > uint64(len(src)-used-m) {
				return bad(a.Text + "'s accumulator is truncated")
			}
			acc, err := a.Func.Decode(src[used+m : used+m+int(l)])
			if err != nil {
				return nil, 0, fmt.Errorf("operator %s: %w", c.uid, err)
			}
			w.accs[j] = acc
			used += m + int(l)
		}
		s.wins = append(s.wins, w)
	}
	return s, used, nil
}
