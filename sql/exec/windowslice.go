package exec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// HOP and CUMULATE windows overlap: a row of HOP(2 s, 10 s) is in five
// windows. Kept per window (windowagg.go), the row updates five sets of
// accumulators. Sliced, as Flink's slicing window operator does, the
// timeline is cut into slices (HOP's slide, CUMULATE's step), a row
// updates the accumulators of its one slice, and a window's result is
// the merge of the slices it covers, made when it fires. A slice is freed
// once the last window that covers it has fired.
//
// A group key's value state holds its slices, ordered by start, and the
// end of the earliest window that may still fire (next): windows that
// ended before are fired or were late when their first row came. The key
// has one event-time timer, at the end of its earliest window with rows.
//
// Aggregates with DISTINCT (whose merge would copy their sets) stay per
// window, and so would HOP windows whose size is not a multiple of the
// slide (the planner refuses them, as Flink does).

// slicer cuts the timeline into the slices of HOP or CUMULATE windows.
type slicer struct {
	kind planner.WindowKind
	// size is the window size (CUMULATE's largest window), g the slice
	// length; window ends are the multiples of g.
	size, g int64
}

// newSlicer returns the slicer of n's windows, or false when they stay
// per window.
func newSlicer(n *planner.WindowAggregate) (slicer, bool) {
	if n.Attached {
		return slicer{}, false // a row is in the one window its columns give
	}
	for _, a := range n.Aggs {
		if a.Func.Spec.Distinct {
			return slicer{}, false
		}
	}
	w := n.Window
	switch w.Kind {
	case planner.Hop:
		if w.Size%w.Slide != 0 {
			return slicer{}, false
		}
		return slicer{kind: planner.Hop, size: w.Size, g: w.Slide}, true
	case planner.Cumulate:
		return slicer{kind: planner.Cumulate, size: w.Size, g: w.Step}, true
	}
	return slicer{}, false
}

// lastEnd is the end of the last window that covers the slice at start.
func (s slicer) lastEnd(start int64) int64 {
	if s.kind == planner.Cumulate {
		return floorTo(start, s.size) + s.size
	}
	return start + s.size
}

// windowStart is the start of the window that ends at end.
func (s slicer) windowStart(end int64) int64 {
	if s.kind == planner.Cumulate {
		return floorTo(end-1, s.size)
	}
	return end - s.size
}

// firstEnd is the end of the earliest window with rows that may still
// fire: at least next, and not before the first slice's own end.
func (s slicer) firstEnd(st *sliceState) int64 {
	return max(st.next, st.slices[0].start+s.g)
}

// windowSlice is one slice of a group key: its start and its live
// accumulators.
type windowSlice struct {
	start int64
	accs  []expr.Accumulator
}

// sliceState is the slices of one group key, ordered by start, and the
// end of its earliest window that may still fire.
type sliceState struct {
	next   int64
	slices []windowSlice
	// spare is room for the accumulators of slices to come (see
	// windowState.spare).
	spare []expr.Accumulator
	first [1]windowSlice
}

func newSliceState() *sliceState {
	s := &sliceState{next: math.MinInt64}
	s.slices = s.first[:0]
	return s
}

// clone deep-copies the state (the value state's copy on first change
// after a checkpoint).
func (s *sliceState) clone() *sliceState {
	c := &sliceState{next: s.next, slices: make([]windowSlice, len(s.slices))}
	for i, sl := range s.slices {
		accs := make([]expr.Accumulator, len(sl.accs))
		for j, a := range sl.accs {
			accs[j] = a.Clone()
		}
		c.slices[i] = windowSlice{start: sl.start, accs: accs}
	}
	return c
}

// slice returns the index of the slice at start, adding it with new
// accumulators if there is none (added true).
func (s *sliceState) slice(start int64, aggs []planner.AggCall) (i int, added bool) {
	// Rows come mostly in time order: search from the end.
	i = len(s.slices)
	for i > 0 && s.slices[i-1].start >= start {
		if s.slices[i-1].start == start {
			return i - 1, false
		}
		i--
	}
	accs := newAccs(&s.spare, aggs, len(s.slices))
	s.slices = append(s.slices, windowSlice{})
	copy(s.slices[i+1:], s.slices[i:])
	s.slices[i] = windowSlice{start: start, accs: accs}
	return i, true
}

// dropBefore frees the slices that no window ending at end or later
// covers.
func (s *sliceState) dropBefore(end int64, sl slicer) {
	n := 0
	for n < len(s.slices) && sl.lastEnd(s.slices[n].start) < end {
		clear(s.slices[n].accs) // it may share its array with other slices
		s.slices[n] = windowSlice{}
		n++
	}
	s.slices = s.slices[n:]
}

// sliceStateTag starts every encoded sliceState. A windowState encoding
// starts with its window count, never 0 (an empty state is removed), so
// a checkpoint written with the per-window layout is refused, not
// misread.
const sliceStateTag = 0

// sliceCodec encodes a sliceState: the tag, next, the number of slices,
// then per slice its start and each accumulator's encoding with its
// length.
type sliceCodec struct {
	aggs []planner.AggCall
	uid  string
}

func (c sliceCodec) Append(dst []byte, s *sliceState) []byte {
	dst = append(dst, sliceStateTag)
	dst = binary.AppendVarint(dst, s.next)
	dst = binary.AppendUvarint(dst, uint64(len(s.slices)))
	for _, sl := range s.slices {
		dst = binary.AppendVarint(dst, sl.start)
		dst = appendAccs(dst, sl.accs, c.uid)
	}
	return dst
}

func (c sliceCodec) Decode(src []byte) (*sliceState, int, error) {
	bad := func(what string) (*sliceState, int, error) {
		return nil, 0, fmt.Errorf("operator %s: window slice state: %s", c.uid, what)
	}
	if len(src) == 0 || src[0] != sliceStateTag {
		return bad("not in the sliced layout (written by another version of the operator?)")
	}
	used := 1
	next, m := binary.Varint(src[used:])
	if m <= 0 || next != math.MinInt64 && !inTimeRange(next) {
		return bad("bad next window end")
	}
	used += m
	n, m := binary.Uvarint(src[used:])
	if m <= 0 || n > uint64(len(src)) {
		return bad("bad slice count")
	}
	used += m
	s := &sliceState{next: next, slices: make([]windowSlice, n)}
	for i := range s.slices {
		sl := &s.slices[i]
		if sl.start, m = binary.Varint(src[used:]); m <= 0 || !inTimeRange(sl.start) {
			return bad("bad slice start")
		}
		used += m
		if i > 0 && sl.start <= s.slices[i-1].start {
			return bad("slices out of order")
		}
		var err error
		if sl.accs, m, err = decodeAccs(src[used:], c.aggs, c.uid); err != nil {
			return nil, 0, err
		}
		used += m
	}
	return s, used, nil
}

// add adds row r at time ts to its slice, under watermark wm (or
// clink.NoTimestamp), and returns the key's timer to register, if the
// row opened a new earliest slice (a timer set for a later window stays,
// and fires what is due then). The caller drops rows that sl.late calls
// late before it makes a state for them.
func (st *sliceState) add(sl slicer, ts, wm int64, aggs []planner.AggCall, r types.Row, uid string) (timer int64, arm bool, err error) {
	if wm != clink.NoTimestamp {
		// Every window that ended by the watermark has fired or, without
		// rows then, is late now.
		st.next = max(st.next, floorTo(wm+1, sl.g)+sl.g)
	}
	start := floorTo(ts, sl.g)
	i, added := st.slice(start, aggs)
	if added && i == 0 {
		timer, arm = sl.firstEnd(st)-1, true
	}
	return timer, arm, accumulate(st.slices[i].accs, aggs, r, uid)
}

// late reports whether a row at ts is late for every window of its slice.
func (sl slicer) late(ts, wm int64) bool {
	return wm != clink.NoTimestamp && sl.lastEnd(floorTo(ts, sl.g))-1 <= wm
}

// fire emits every window with rows that the watermark wm passed, in
// order of end, with the merge of its slices, and frees the slices no
// window to come covers. It returns the key's next timer, or false when
// no slice is left (the caller removes the state).
func (st *sliceState) fire(sl slicer, wm int64, uid string, emit func(start, end int64, accs []expr.Accumulator) error) (timer int64, left bool, err error) {
	for {
		st.dropBefore(st.next, sl)
		if len(st.slices) == 0 {
			return 0, false, nil
		}
		e := sl.firstEnd(st)
		if e-1 > wm {
			return e - 1, true, nil
		}
		// The first slice is in the window (dropBefore kept only slices
		// that a window ending at e or later covers); so are those after
		// it up to the window's end.
		accs := st.slices[0].accs
		if len(st.slices) > 1 && st.slices[1].start+sl.g <= e {
			accs = make([]expr.Accumulator, len(accs))
			for j, a := range st.slices[0].accs {
				accs[j] = a.Clone()
			}
			for k := 1; k < len(st.slices) && st.slices[k].start+sl.g <= e; k++ {
				for j, a := range st.slices[k].accs {
					if err := accs[j].Merge(a); err != nil {
						return 0, true, fmt.Errorf("operator %s: merging slices: %w", uid, err)
					}
				}
			}
		}
		if err := emit(sl.windowStart(e), e, accs); err != nil {
			return 0, true, err
		}
		st.next = e + sl.g
	}
}

// inTimeRange reports whether t is a time (ms since the epoch) far enough
// from the ends of int64 that window ends computed from it do not wrap
// (a decoded state that says otherwise is corrupt).
func inTimeRange(t int64) bool { return t > math.MinInt64/4 && t < math.MaxInt64/4 }

// slicedWindowAggregate is fixedWindowAggregate for the windows sl
// slices; its result rows are laid out as wo says.
func slicedWindowAggregate(in clink.KeyedStream[string, types.Row], n *planner.WindowAggregate, sl slicer, wo windowOutput) clink.Stream[types.Row] {
	nk, aggs, uid, tc := len(n.Keys), n.Aggs, n.UID(), n.TimeCol

	add := func(ctx *clink.KeyedContext[string, *sliceState], r types.Row, _ *clink.Collector[types.Row]) error {
		if r.Values[tc].IsNull() {
			return nil // no rowtime: in no window (see windowRowtime)
		}
		ts := ctx.Timestamp()
		if ts == clink.NoTimestamp {
			return fmt.Errorf("operator %s: a row without a timestamp reached the window aggregation", uid)
		}
		wm := ctx.CurrentWatermark()
		if sl.late(ts, wm) {
			return nil // its windows fired (or would have), as in Flink
		}
		var (
			timer int64
			arm   bool
			err   error
		)
		ctx.UpdateValue(func(st *sliceState, ok bool) (*sliceState, bool) {
			if st == nil {
				st = newSliceState()
			}
			// On an error the accumulators may be half-changed: the job
			// fails and restores the last checkpoint.
			timer, arm, err = st.add(sl, ts, wm, aggs, r, uid)
			return st, true
		})
		if err != nil {
			return err
		}
		if arm {
			ctx.RegisterEventTimeTimer(timer)
		}
		return nil
	}

	fire := func(ctx *clink.KeyedContext[string, *sliceState], _ int64, d clink.TimeDomain, out *clink.Collector[types.Row]) error {
		if d != clink.EventTime {
			return nil
		}
		wm := ctx.CurrentWatermark()
		emit := func(start, end int64, accs []expr.Accumulator) error {
			return emitWindow(out, ctx.Key(), nk, accs, start, end, &wo, uid)
		}
		var (
			timer int64
			left  bool
			err   error
		)
		ctx.UpdateValue(func(st *sliceState, ok bool) (*sliceState, bool) {
			if !ok {
				return nil, false
			}
			timer, left, err = st.fire(sl, wm, uid, emit)
			return st, left
		})
		if err != nil {
			return err
		}
		if left {
			ctx.RegisterEventTimeTimer(timer)
		}
		return nil
	}

	return clink.KeyedProcess(in, uid, clink.KeyedProcessFunction[string, types.Row, *sliceState, types.Row]{
		ProcessElement: add,
		OnTimer:        fire,
		ValueCodec:     sliceCodec{aggs: aggs, uid: uid},
		ValueCopy:      (*sliceState).clone,
	})
}
