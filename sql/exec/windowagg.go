package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// The window aggregation of TUMBLE, HOP and CUMULATE runs on
// clink.KeyedProcess rather than clink.Aggregate: the value state of a
// group key holds its open windows (a short slice ordered by end) with live
// accumulators, changed in place and copied once per key and checkpoint;
// and the key has one event-time timer, at the end of its earliest open
// window, not one per window. When it fires, every window of the key the
// watermark has passed fires, and the timer is set again at the end of the
// earliest window left. SESSION windows merge and keep clink.Aggregate.
//
// That per-window layout serves TUMBLE and the aggregates with DISTINCT;
// HOP and CUMULATE windows, which overlap, are sliced instead (see
// windowslice.go): a row updates one slice, and a window merges its slices
// when it fires.

// openWindow is one open window of a group key: its bounds and its live
// accumulators, kept in vals when every aggregate of the window
// aggregation is kept inline (see windowAggs) and in accs otherwise.
type openWindow struct {
	start, end int64
	accs       []expr.Accumulator
	// vals holds the inline accumulators in place: a row that opens a
	// window allocates nothing for them, and firing reads them from the
	// window itself (64 bytes in all, one cache line).
	vals [inlineSlots]int64
}

// inlineSlots is the room of openWindow.vals: COUNT(*) and SUM(x) fit.
const inlineSlots = 3

// windowAggs is the aggregates of a window aggregation and where a
// window keeps their accumulators.
type windowAggs struct {
	calls []planner.AggCall
	// inline says every aggregate is kept in openWindow.vals, aggregate j
	// from slot[j] on; otherwise each has an expr.Accumulator in
	// openWindow.accs.
	inline bool
	slot   []int
	// free holds the *windowState of keys whose windows all fired, for
	// keys that open windows again, with the room they grew: a key's
	// open windows often all fire, and it opens hundreds again before
	// the next watermark.
	free sync.Pool
}

// newWindowAggs lays out the accumulators of aggs: inline when each one
// can be (expr.AggFunc.InlineSlots) and all fit in openWindow.vals.
func newWindowAggs(aggs []planner.AggCall) *windowAggs {
	wa := &windowAggs{calls: aggs, inline: true, slot: make([]int, len(aggs))}
	used := 0
	for j, a := range aggs {
		n := a.Func.InlineSlots()
		if n == 0 || used+n > inlineSlots {
			return &windowAggs{calls: aggs}
		}
		wa.slot[j] = used
		used += n
	}
	return wa
}

// add adds row r to the accumulators of window w.
func (wa *windowAggs) add(w *openWindow, r types.Row, uid string) error {
	if !wa.inline {
		return accumulate(w.accs, wa.calls, r, uid)
	}
	for j, a := range wa.calls {
		if a.Filter >= 0 {
			if f := r.Values[a.Filter]; f.IsNull() || !f.Bool() {
				continue
			}
		}
		v := types.Null
		if a.Arg >= 0 {
			v = r.Values[a.Arg]
		}
		a.Func.AddInline(w.vals[wa.slot[j]:], v)
	}
	return nil
}

// appendResults appends the results of window w's aggregates to dst.
func (wa *windowAggs) appendResults(dst []types.Value, w *openWindow) []types.Value {
	if !wa.inline {
		for _, a := range w.accs {
			dst = append(dst, a.Result())
		}
		return dst
	}
	for j, a := range wa.calls {
		dst = append(dst, a.Func.InlineResult(w.vals[wa.slot[j]:]))
	}
	return dst
}

// before orders windows by end, then start: the order they fire in.
func (w *openWindow) before(start, end int64) bool {
	return w.end < end || w.end == end && w.start < start
}

// windowState is the open windows of one group key, ordered by end then
// start.
type windowState struct {
	wins []openWindow
	// spare is room for the accumulators of windows to come, allocated
	// for as many windows as are open (a key with many open windows
	// opens many), not one slice per window.
	spare []expr.Accumulator
	// first holds the first window of a new state: most keys have one
	// or two windows open.
	first [1]openWindow
	// firstAccs is the spare room of a new state when its windows have
	// at most two aggregates: a key's first window allocates no slice.
	firstAccs [2]expr.Accumulator
}

// newWindowState returns an empty state with room for one window and,
// when they are few, its k accumulators.
func newWindowState(k int) *windowState {
	s := &windowState{}
	s.wins = s.first[:0]
	if k <= len(s.firstAccs) {
		s.spare = s.firstAccs[:k]
	}
	return s
}

// reuseWindowState returns an empty state from free, or a new one for k
// aggregates.
func reuseWindowState(free *sync.Pool, k int) *windowState {
	if s, ok := free.Get().(*windowState); ok {
		// fire left its windows cleared and its accumulator room spare.
		s.wins = s.wins[:0]
		return s
	}
	return newWindowState(k)
}

// clone deep-copies the state: the value state calls it the first time a
// key changes after a checkpoint captured it.
func (s *windowState) clone() *windowState {
	// The copy keeps the room of the original: the key goes on opening
	// windows as fast as before the checkpoint.
	c := &windowState{wins: make([]openWindow, len(s.wins), cap(s.wins))}
	for i, w := range s.wins {
		c.wins[i] = w
		if w.accs == nil {
			continue // inline: copied with the window
		}
		accs := make([]expr.Accumulator, len(w.accs))
		for j, a := range w.accs {
			accs[j] = a.Clone()
		}
		c.wins[i].accs = accs
	}
	return c
}

// window returns the index of the open window [start, end), adding it
// with new accumulators if it is not open (added true).
func (s *windowState) window(start, end int64, wa *windowAggs) (i int, added bool) {
	// Rows come mostly in time order, so their windows are mostly the
	// last ones: search from the end.
	i = len(s.wins)
	for i > 0 && !s.wins[i-1].before(start, end) {
		if w := &s.wins[i-1]; w.start == start && w.end == end {
			return i - 1, false
		}
		i--
	}
	var accs []expr.Accumulator
	if !wa.inline {
		accs = newAccs(&s.spare, wa.calls, len(s.wins))
	}
	s.wins = append(s.wins, openWindow{})
	copy(s.wins[i+1:], s.wins[i:])
	s.wins[i] = openWindow{start: start, end: end, accs: accs}
	return i, true
}

// fire calls emit for each window whose last millisecond the watermark wm
// has reached, in order, and removes them. The open windows left move to
// the front of the slice, which keeps its room; a fired window's
// accumulator room becomes the spare room when that is used up. On an
// error of emit the window it failed on stays.
func (s *windowState) fire(wm int64, emit func(w *openWindow) error) error {
	done := 0
	defer func() {
		left := copy(s.wins, s.wins[done:])
		clear(s.wins[left:])
		s.wins = s.wins[:left]
	}()
	for done < len(s.wins) && s.wins[done].end-1 <= wm {
		w := &s.wins[done]
		if err := emit(w); err != nil {
			return err
		}
		// Its accumulators' room is its own k slots of an array it
		// may share with open windows.
		if w.accs != nil {
			clear(w.accs)
			if len(s.spare) < len(w.accs) {
				s.spare = w.accs
			}
		}
		*w = openWindow{}
		done++
	}
	return nil
}

// newAccs returns new accumulators of aggs in room taken from spare. When
// spare is used up it is refilled with room for as many sets as open
// (at least 1, at most 64): a key with many open windows opens many.
func newAccs(spare *[]expr.Accumulator, aggs []planner.AggCall, open int) []expr.Accumulator {
	k := len(aggs)
	if len(*spare) < k {
		*spare = make([]expr.Accumulator, k*min(max(open, 1), 64))
	}
	accs := (*spare)[:k:k]
	*spare = (*spare)[k:]
	for j, a := range aggs {
		accs[j] = a.Func.New()
	}
	return accs
}

// windowCodec encodes a windowState: the number of windows, then per
// window its start, end and each accumulator's encoding with its length.
// Inline accumulators encode as the expr.Accumulator they stand for
// (expr.AggFunc.AppendInline), so the bytes do not depend on the layout.
type windowCodec struct {
	aggs *windowAggs
	uid  string
}

func (c windowCodec) Append(dst []byte, s *windowState) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s.wins)))
	for i := range s.wins {
		w := &s.wins[i]
		dst = binary.AppendVarint(dst, w.start)
		dst = binary.AppendVarint(dst, w.end)
		if w.accs != nil {
			dst = appendAccs(dst, w.accs, c.uid)
			continue
		}
		for j, a := range c.aggs.calls {
			var buf [32]byte
			enc := a.Func.AppendInline(buf[:0], w.vals[c.aggs.slot[j]:])
			dst = binary.AppendUvarint(dst, uint64(len(enc)))
			dst = append(dst, enc...)
		}
	}
	return dst
}

// decodeInline decodes into w.vals the accumulators of aggs that
// appendAccs or windowCodec.Append wrote at the start of src, and returns
// how many bytes they took.
func decodeInline(w *openWindow, src []byte, aggs *windowAggs, uid string) (int, error) {
	used := 0
	for j, a := range aggs.calls {
		l, m := binary.Uvarint(src[used:])
		if m <= 0 || l > uint64(len(src)-used-m) {
			return 0, fmt.Errorf("operator %s: window state: %s's accumulator is truncated", uid, a.Text)
		}
		used += m
		s := aggs.slot[j]
		if err := a.Func.DecodeInline(src[used:used+int(l)], w.vals[s:s+a.Func.InlineSlots()]); err != nil {
			return 0, fmt.Errorf("operator %s: %w", uid, err)
		}
		used += int(l)
	}
	return used, nil
}

// appendAccs appends each accumulator's encoding with its length.
func appendAccs(dst []byte, accs []expr.Accumulator, uid string) []byte {
	for _, a := range accs {
		enc, err := a.MarshalBinary()
		if err != nil {
			// The accumulators of sql/expr encode without failing; a
			// failure would be a bug, and a checkpoint must not hide it.
			panic(fmt.Sprintf("operator %s: encoding an accumulator: %v", uid, err))
		}
		dst = binary.AppendUvarint(dst, uint64(len(enc)))
		dst = append(dst, enc...)
	}
	return dst
}

// decodeAccs decodes the accumulators of aggs that appendAccs wrote at the
// start of src, and how many bytes they took.
func decodeAccs(src []byte, aggs []planner.AggCall, uid string) ([]expr.Accumulator, int, error) {
	accs := make([]expr.Accumulator, len(aggs))
	used := 0
	for j, a := range aggs {
		l, m := binary.Uvarint(src[used:])
		if m <= 0 || l > uint64(len(src)-used-m) {
			return nil, 0, fmt.Errorf("operator %s: window state: %s's accumulator is truncated", uid, a.Text)
		}
		used += m
		acc, err := a.Func.Decode(src[used : used+int(l)])
		if err != nil {
			return nil, 0, fmt.Errorf("operator %s: %w", uid, err)
		}
		accs[j] = acc
		used += int(l)
	}
	return accs, used, nil
}

func (c windowCodec) Decode(src []byte) (*windowState, int, error) {
	bad := func(what string) (*windowState, int, error) {
		return nil, 0, fmt.Errorf("operator %s: window state: %s", c.uid, what)
	}
	n, used := binary.Uvarint(src)
	if used <= 0 || n > uint64(len(src)) {
		return bad("bad window count")
	}
	s := &windowState{wins: make([]openWindow, n)}
	for i := range s.wins {
		w := &s.wins[i]
		var m int
		if w.start, m = binary.Varint(src[used:]); m <= 0 {
			return bad("bad window start")
		}
		used += m
		if w.end, m = binary.Varint(src[used:]); m <= 0 {
			return bad("bad window end")
		}
		used += m
		var err error
		if c.aggs.inline {
			m, err = decodeInline(w, src[used:], c.aggs, c.uid)
		} else {
			w.accs, m, err = decodeAccs(src[used:], c.aggs.calls, c.uid)
		}
		if err != nil {
			return nil, 0, err
		}
		used += m
	}
	return s, used, nil
}

// windowSpan is the bounds of a window [start, end).
type windowSpan struct{ start, end int64 }

// windowAssigner gives a row's windows as clink.TumblingWindows,
// SlidingWindows and CumulateWindows assign them, into a buffer of the
// caller (no allocation for the few windows of a row).
type windowAssigner struct {
	kind              planner.WindowKind
	size, slide, step int64
}

// assign appends the windows of a row at ts to dst, ordered by end.
func (a windowAssigner) assign(dst []windowSpan, ts int64) []windowSpan {
	switch a.kind {
	case planner.Hop:
		first := floorTo(ts, a.slide) - (a.size-1)/a.slide*a.slide
		for start := first; start <= ts; start += a.slide {
			if start+a.size > ts {
				dst = append(dst, windowSpan{start, start + a.size})
			}
		}
		return dst
	case planner.Cumulate:
		start := floorTo(ts, a.size)
		for end := start + floorTo(ts-start, a.step) + a.step; end <= start+a.size; end += a.step {
			dst = append(dst, windowSpan{start, end})
		}
		return dst
	}
	start := floorTo(ts, a.size)
	return append(dst, windowSpan{start, start + a.size})
}

// checkWindow refuses window sizes the assigners cannot work with (as
// clink's window operator does).
func checkWindow(w planner.WindowSpec) error {
	switch w.Kind {
	case planner.Hop:
		if w.Size <= 0 || w.Slide <= 0 {
			return fmt.Errorf("sliding window size and slide must be at least 1ms, got %dms and %dms", w.Size, w.Slide)
		}
	case planner.Cumulate:
		if w.Step <= 0 || w.Size <= 0 || w.Size%w.Step != 0 {
			return fmt.Errorf("cumulate window size (%dms) must be a positive multiple of its step (%dms)", w.Size, w.Step)
		}
	default:
		if w.Size <= 0 {
			return fmt.Errorf("tumbling window size must be at least 1ms, got %dms", w.Size)
		}
	}
	return nil
}

// fixedWindowAggregate aggregates TUMBLE, HOP and CUMULATE windows per
// group key (see the comment at the top of the file). A row is added to
// each of its windows the watermark has not passed; a row late for all of
// them is dropped, as in Flink. A window's result, +I of the keys, the
// aggregates and window_start, window_end and window_time, is emitted
// when the watermark reaches the window's last millisecond, and the window
// is removed from state.
func (b *builder) fixedWindowAggregate(in clink.Stream[types.Row], n *planner.WindowAggregate) (clink.Stream[types.Row], error) {
	if err := checkWindow(n.Window); err != nil {
		return in, fmt.Errorf("operator %s: %w", n.UID(), err)
	}
	keys, aggs, uid := n.Keys, n.Aggs, n.UID()
	// window_time has the rowtime's type (see windowValues).
	ltz := n.Input.Fields()[n.TimeCol].Type.Kind == types.KindTimestampLTZ
	assign := windowAssigner{kind: n.Window.Kind, size: n.Window.Size, slide: n.Window.Slide, step: n.Window.Step}
	keyOf := func(r types.Row) string {
		var buf [32]byte
		k := buf[:0]
		for _, i := range keys {
			k = types.AppendKey(k, r.Values[i])
		}
		return string(k)
	}
	// A row without a rowtime belongs to no window (as in the
	// WindowTableFunction).
	tc := n.TimeCol
	in = clink.Filter(in, uid+".rowtime", func(r types.Row) bool { return !r.Values[tc].IsNull() })
	sc, ec := n.StartCol, n.EndCol
	if n.Attached {
		in = clink.Filter(in, uid+".bounds", func(r types.Row) bool { return !r.Values[sc].IsNull() && !r.Values[ec].IsNull() })
	}
	// A result row is made for its window alone and kept by no one: the
	// Calc after the window may write its output into it (see
	// ownedInput), so it gets room for the widest.
	b.owned[uid] = true
	width := b.rowCapacity(n)

	if sl, ok := newSlicer(n); ok {
		return slicedWindowAggregate(clink.KeyBy(in, keyOf), n, sl, ltz, width), nil
	}
	wa := newWindowAggs(aggs)

	add := func(ctx *clink.KeyedContext[string, *windowState], r types.Row, _ *clink.Collector[types.Row]) error {
		ts := ctx.Timestamp()
		if ts == clink.NoTimestamp {
			return fmt.Errorf("operator %s: a row without a timestamp reached the window aggregation", uid)
		}
		wm := ctx.CurrentWatermark()
		var buf [8]windowSpan
		var spans []windowSpan
		if n.Attached {
			// The window the row's bounds give (a row of a window
			// aggregation below).
			spans = append(buf[:0], windowSpan{r.Values[sc].EpochMillis(), r.Values[ec].EpochMillis()})
		} else {
			spans = assign.assign(buf[:0], ts)
		}
		var ferr error
		arm, next := false, int64(0)
		ctx.UpdateValue(func(st *windowState, ok bool) (*windowState, bool) {
			for _, sp := range spans {
				if wm != clink.NoTimestamp && sp.end-1 <= wm {
					continue // late: the window fired (or would have)
				}
				if st == nil {
					st = reuseWindowState(&wa.free, len(aggs))
				}
				i, added := st.window(sp.start, sp.end, wa)
				arm = arm || added && i == 0
				if ferr = wa.add(&st.wins[i], r, uid); ferr != nil {
					return st, true
				}
			}
			if st == nil {
				return nil, false
			}
			next = st.wins[0].end - 1
			return st, true
		})
		if ferr != nil {
			return ferr
		}
		if arm {
			// A new earliest window: its end is the key's next timer (one
			// set for a later window stays, and fires what is due then).
			ctx.RegisterEventTimeTimer(next)
		}
		return nil
	}

	fire := func(ctx *clink.KeyedContext[string, *windowState], _ int64, d clink.TimeDomain, out *clink.Collector[types.Row]) error {
		if d != clink.EventTime {
			return nil
		}
		wm := ctx.CurrentWatermark()
		var ferr error
		rearm, next := false, int64(0)
		ctx.UpdateValue(func(st *windowState, ok bool) (*windowState, bool) {
			if !ok {
				return nil, false
			}
			// Every window the watermark passed fires now, not only the
			// one the timer was set for: a watermark that jumps fires a
			// key's windows in one go.
			// The key's values are decoded once for all the windows
			// firing (they share the key's bytes).
			var kbuf [4]types.Value
			var kv []types.Value
			ferr = st.fire(wm, func(w *openWindow) error {
				if kv == nil {
					var err error
					if kv, err = appendKey(kbuf[:0], ctx.Key(), len(keys)); err != nil {
						return fmt.Errorf("operator %s: decoding its key: %w", uid, err)
					}
				}
				vals := append(make([]types.Value, 0, max(len(kv)+len(aggs)+3, width)), kv...)
				emitWindowRow(out, wa.appendResults(vals, w), w.start, w.end, ltz)
				return nil
			})
			if ferr != nil {
				return st, true
			}
			if len(st.wins) == 0 {
				// The state is this call's alone (UpdateValue copies a
				// value a checkpoint holds before handing it out): its
				// room serves the next key that opens a window.
				wa.free.Put(st)
				return nil, false
			}
			rearm, next = true, st.wins[0].end-1
			return st, true
		})
		if ferr != nil {
			return ferr
		}
		if rearm {
			ctx.RegisterEventTimeTimer(next)
		}
		return nil
	}

	return clink.KeyedProcess(clink.KeyBy(in, keyOf), uid, clink.KeyedProcessFunction[string, types.Row, *windowState, types.Row]{
		ProcessElement: add,
		OnTimer:        fire,
		ValueCodec:     windowCodec{aggs: wa, uid: uid},
		ValueCopy:      (*windowState).clone,
	}), nil
}

// accumulate adds row r to the accumulators of one window (or slice).
func accumulate(accs []expr.Accumulator, aggs []planner.AggCall, r types.Row, uid string) error {
	for j, a := range aggs {
		if a.Filter >= 0 {
			if f := r.Values[a.Filter]; f.IsNull() || !f.Bool() {
				continue
			}
		}
		v := types.Null
		if a.Arg >= 0 {
			v = r.Values[a.Arg]
		}
		if err := accs[j].Add(v); err != nil {
			// The accumulators may be half-changed: fail the job (the
			// state is restored from the last checkpoint).
			return fmt.Errorf("operator %s: %s: %w", uid, a.Text, err)
		}
	}
	return nil
}

// emitWindow emits the result row of window [start, end) of the group key
// k (nk values): +I of the keys, the accumulators' results, window_start,
// window_end and window_time, at the window's last millisecond. The row
// has room for at least width values.
func emitWindow(out *clink.Collector[types.Row], k string, nk int, accs []expr.Accumulator, start, end int64, ltz bool, width int, uid string) error {
	vals, err := windowRow(k, nk, len(accs), width, uid)
	if err != nil {
		return err
	}
	for _, a := range accs {
		vals = append(vals, a.Result())
	}
	emitWindowRow(out, vals, start, end, ltz)
	return nil
}

// windowRow returns a new result row of a window of group key k (nk
// values) with na aggregates, holding the key's values so far, with room
// for at least width values.
func windowRow(k string, nk, na, width int, uid string) ([]types.Value, error) {
	vals, err := appendKey(make([]types.Value, 0, max(nk+na+3, width)), k, nk)
	if err != nil {
		return nil, fmt.Errorf("operator %s: decoding its key: %w", uid, err)
	}
	return vals, nil
}

// emitWindowRow appends window_start, window_end and window_time of
// window [start, end) to vals, the keys and results of its row, and
// emits it at the window's last millisecond.
func emitWindowRow(out *clink.Collector[types.Row], vals []types.Value, start, end int64, ltz bool) {
	wt := types.Timestamp(end-1, 0, 3)
	if ltz {
		wt = types.TimestampLTZ(end-1, 0, 3)
	}
	vals = append(vals, types.Timestamp(start, 0, 3), types.Timestamp(end, 0, 3), wt)
	out.CollectWithTimestamp(types.Row{Kind: changelog.Insert, Values: vals}, end-1)
}

// appendKey appends the n values of an encoded group key to dst (they
// share k's bytes: no copy per fired window).
func appendKey(dst []types.Value, k string, n int) ([]types.Value, error) {
	src := k
	for range n {
		v, m, err := types.DecodeKeyValue(src)
		if err != nil {
			return nil, err
		}
		dst = append(dst, v)
		src = src[m:]
	}
	if len(src) != 0 {
		return nil, errors.New("bytes left after the key's values")
	}
	return dst, nil
}
