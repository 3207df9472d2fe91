package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
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

// A group key's open windows lie one after the other in windowState.wins,
// windowAggs.stride words each: a window is the view of its words, w[0]
// its start, w[1] its end when windows differ in length (see
// windowAggs.size), then the aggregates' inline accumulators when every
// aggregate of the window aggregation is kept inline (see windowAggs).
// Other accumulators live in windowState.accs beside the windows.
//
// A window takes only the words it needs: with many keys, the store of a
// key's new window is mostly a cache miss (the key's windows were last
// touched when they fired), the largest single cost of a row, and a
// TUMBLE window with COUNT(*) is 16 bytes, four to a cache line.

// maxWindowWords is the most words a window with inline accumulators
// takes; aggregates that would need more keep an expr.Accumulator each.
const maxWindowWords = 16

// windowAggs is the aggregates of a window aggregation and where a
// window keeps their accumulators.
type windowAggs struct {
	calls []planner.AggCall
	// size is the length of every window when they all have one (TUMBLE
	// and HOP): a window's end is start + size and is not stored. It is 0
	// when the end is stored, in w[1].
	size int64
	// base is where the inline slots start in a window: after the start,
	// and after the end when it is stored.
	base int
	// stride is the words of a window.
	stride int
	// inline says every aggregate is kept in the window, aggregate j from
	// w[slot[j]] on; otherwise each has an expr.Accumulator in
	// windowState.accs.
	inline bool
	slot   []int
	// free holds the *windowState of keys whose windows all fired, for
	// keys that open windows again, with the room they grew: a key's
	// open windows often all fire, and it opens hundreds again before
	// the next watermark.
	free sync.Pool
}

// newWindowAggs lays out the accumulators of aggs for windows of length
// size (0 when their lengths differ): inline when each one can be
// (expr.AggFunc.InlineSlots) and a window fits maxWindowWords.
func newWindowAggs(aggs []planner.AggCall, size int64) *windowAggs {
	base := 1
	if size <= 0 {
		size, base = 0, 2
	}
	wa := &windowAggs{calls: aggs, size: size, base: base, stride: base, inline: true, slot: make([]int, len(aggs))}
	for j, a := range aggs {
		n := a.Func.InlineSlots()
		if n == 0 || wa.stride+n > maxWindowWords {
			return &windowAggs{calls: aggs, size: size, base: base, stride: base}
		}
		wa.slot[j] = wa.stride
		wa.stride += n
	}
	return wa
}

// count returns the number of open windows of s.
func (wa *windowAggs) count(s *windowState) int { return len(s.wins) / wa.stride }

// win returns window i of s.
func (wa *windowAggs) win(s *windowState, i int) []int64 {
	return s.wins[i*wa.stride : (i+1)*wa.stride : (i+1)*wa.stride]
}

// end returns the end of window w.
func (wa *windowAggs) end(w []int64) int64 {
	if wa.size > 0 {
		return w[0] + wa.size
	}
	return w[1]
}

// add adds row r to the accumulators of window i of st.
func (wa *windowAggs) add(st *windowState, i int, r types.Row, uid string) error {
	if !wa.inline {
		return accumulate(st.accs[i], wa.calls, r, uid)
	}
	w := wa.win(st, i)
	for j := range wa.calls {
		a := &wa.calls[j]
		v, ok := aggInput(a, r)
		if !ok {
			continue
		}
		a.Func.AddInline(w[wa.slot[j]:], v)
	}
	return nil
}

// appendResults appends the results of the aggregates of window w, whose
// accumulators are accs when they are not inline, to dst.
func (wa *windowAggs) appendResults(dst []types.Value, w []int64, accs []expr.Accumulator) []types.Value {
	if !wa.inline {
		for _, a := range accs {
			dst = append(dst, a.Result())
		}
		return dst
	}
	for j := range wa.calls {
		dst = append(dst, wa.calls[j].Func.InlineResult(w[wa.slot[j]:]))
	}
	return dst
}

// windowState is the open windows of one group key, ordered by end then
// start.
type windowState struct {
	wins []int64
	// accs[i] is the accumulators of window i when they are not inline
	// (accs is empty otherwise).
	accs [][]expr.Accumulator
	// spare is room for the accumulators of windows to come, allocated
	// for as many windows as are open (a key with many open windows
	// opens many), not one slice per window.
	spare []expr.Accumulator
	// first is the room of a new state's first windows: most keys have
	// one or two open.
	first [4]int64
	// firstAccs is the spare room of a new state when its windows have
	// at most two aggregates: a key's first window allocates no slice.
	firstAccs [2]expr.Accumulator
}

// newWindowState returns an empty state with room for a window and,
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
		s.accs = s.accs[:0]
		return s
	}
	return newWindowState(k)
}

// clone deep-copies the state: the value state calls it the first time a
// key changes after a checkpoint captured it.
func (s *windowState) clone() *windowState {
	// The copy keeps the room of the original: the key goes on opening
	// windows as fast as before the checkpoint.
	c := &windowState{wins: make([]int64, len(s.wins), cap(s.wins))}
	copy(c.wins, s.wins) // inline accumulators are copied with the windows
	if len(s.accs) > 0 {
		c.accs = make([][]expr.Accumulator, len(s.accs), cap(s.accs))
		for i, accs := range s.accs {
			cl := make([]expr.Accumulator, len(accs))
			for j, a := range accs {
				cl[j] = a.Clone()
			}
			c.accs[i] = cl
		}
	}
	return c
}

// window returns the index of the open window [start, end), adding it
// with new accumulators if it is not open (added true).
func (s *windowState) window(start, end int64, wa *windowAggs) (i int, added bool) {
	// Rows come mostly in time order, so their windows are mostly the
	// last ones: search from the end.
	st := wa.stride
	i = len(s.wins) / st
	for ; i > 0; i-- {
		w := s.wins[(i-1)*st:]
		we := wa.end(w)
		if we < end || we == end && w[0] < start {
			break // window i-1 fires before [start, end)
		}
		if w[0] == start && we == end {
			return i - 1, false
		}
	}
	n := len(s.wins)
	s.wins = slices.Grow(s.wins, st)[:n+st]
	copy(s.wins[(i+1)*st:], s.wins[i*st:n])
	w := s.wins[i*st : (i+1)*st]
	w[0] = start
	if wa.base > 1 {
		w[1] = end
	}
	clear(w[wa.base:])
	if !wa.inline {
		accs := newAccs(&s.spare, wa.calls, len(s.accs))
		s.accs = append(s.accs, nil)
		copy(s.accs[i+1:], s.accs[i:])
		s.accs[i] = accs
	}
	return i, true
}

// fire calls emit for each window whose last millisecond the watermark wm
// has reached, in order, with its accumulators when they are not inline,
// and removes them. The open windows left move to the front of the slice,
// which keeps its room; a fired window's accumulator room becomes the
// spare room when that is used up. On an error of emit the window it
// failed on stays.
func (s *windowState) fire(wm int64, wa *windowAggs, emit func(w []int64, accs []expr.Accumulator) error) error {
	done, n := 0, wa.count(s)
	defer func() {
		left := copy(s.wins, s.wins[done*wa.stride:])
		s.wins = s.wins[:left]
		if len(s.accs) > 0 {
			left := copy(s.accs, s.accs[done:])
			clear(s.accs[left:])
			s.accs = s.accs[:left]
		}
	}()
	for done < n && wa.end(wa.win(s, done))-1 <= wm {
		var accs []expr.Accumulator
		if len(s.accs) > 0 {
			accs = s.accs[done]
		}
		if err := emit(wa.win(s, done), accs); err != nil {
			return err
		}
		// Its accumulators' room is its own k slots of an array it
		// may share with open windows.
		if accs != nil {
			clear(accs)
			if len(s.spare) < len(accs) {
				s.spare = accs
			}
			s.accs[done] = nil
		}
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
	n := c.aggs.count(s)
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range n {
		w := c.aggs.win(s, i)
		dst = binary.AppendVarint(dst, w[0])
		dst = binary.AppendVarint(dst, c.aggs.end(w))
		if !c.aggs.inline {
			dst = appendAccs(dst, s.accs[i], c.uid)
			continue
		}
		for j, a := range c.aggs.calls {
			var buf [32]byte
			enc := a.Func.AppendInline(buf[:0], w[c.aggs.slot[j]:])
			dst = binary.AppendUvarint(dst, uint64(len(enc)))
			dst = append(dst, enc...)
		}
	}
	return dst
}

// decodeInline decodes into window w the accumulators of aggs that
// appendAccs or windowCodec.Append wrote at the start of src, and returns
// how many bytes they took.
func decodeInline(w []int64, src []byte, aggs *windowAggs, uid string) (int, error) {
	used := 0
	for j, a := range aggs.calls {
		l, m := binary.Uvarint(src[used:])
		if m <= 0 || l > uint64(len(src)-used-m) {
			return 0, fmt.Errorf("operator %s: window state: %s's accumulator is truncated", uid, a.Text)
		}
		used += m
		s := aggs.slot[j]
		if err := a.Func.DecodeInline(src[used:used+int(l)], w[s:s+a.Func.InlineSlots()]); err != nil {
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
	// A window takes at least a byte for its start, one for its end and
	// one for each accumulator's length.
	n, used := binary.Uvarint(src)
	if used <= 0 || n > uint64(len(src)/(2+len(c.aggs.calls))) {
		return bad("bad window count")
	}
	s := &windowState{wins: make([]int64, int(n)*c.aggs.stride)}
	if !c.aggs.inline {
		s.accs = make([][]expr.Accumulator, n)
	}
	for i := range int(n) {
		var start, end int64
		var m int
		if start, m = binary.Varint(src[used:]); m <= 0 {
			return bad(fmt.Sprintf("window %d: bad start", i))
		}
		used += m
		if end, m = binary.Varint(src[used:]); m <= 0 {
			return bad(fmt.Sprintf("window %d: bad end", i))
		}
		used += m
		if c.aggs.size > 0 && end-start != c.aggs.size {
			return bad(fmt.Sprintf("window %d: [%d, %d) is not %d ms long", i, start, end, c.aggs.size))
		}
		w := c.aggs.win(s, i)
		w[0] = start
		if c.aggs.base > 1 {
			w[1] = end
		}
		var err error
		if c.aggs.inline {
			m, err = decodeInline(w, src[used:], c.aggs, c.uid)
		} else {
			s.accs[i], m, err = decodeAccs(src[used:], c.aggs.calls, c.uid)
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
	// windowRowtime: a row without a rowtime belongs to no window (as in
	// the WindowTableFunction). The window's ProcessElement drops it: a
	// Filter before the exchange would cost every row a call, for rows
	// that are rare.
	sc, ec := n.StartCol, n.EndCol
	if n.Attached {
		in = clink.Filter(in, uid+".bounds", func(r types.Row) bool { return !r.Values[sc].IsNull() && !r.Values[ec].IsNull() })
	}
	// A result row is made for its window alone and kept by no one: the
	// Calc after the window may write its output into it (see
	// ownedInput), so it gets room for the widest.
	b.owned[uid] = true
	wo := windowOutput{width: b.rowCapacity(n), ltz: ltz}
	if p := b.windowProj[uid]; p != nil {
		wo.cols, wo.width, p.used = p.cols, p.width, true
	}

	if sl, ok := newSlicer(n); ok {
		return slicedWindowAggregate(clink.KeyBy(in, keyOf), n, sl, wo), nil
	}
	// TUMBLE and HOP windows all have the window's size; the bounds of an
	// attached window come from its rows.
	size := int64(0)
	if !n.Attached && (n.Window.Kind == planner.Tumble || n.Window.Kind == planner.Hop) {
		size = n.Window.Size
	}
	wa := newWindowAggs(aggs, size)

	tc := n.TimeCol
	add := func(ctx *clink.KeyedContext[string, *windowState], r types.Row, _ *clink.Collector[types.Row]) error {
		if r.Values[tc].IsNull() {
			return nil // no rowtime: in no window (see windowRowtime)
		}
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
				if ferr = wa.add(st, i, r, uid); ferr != nil {
					return st, true
				}
			}
			if st == nil {
				return nil, false
			}
			next = wa.end(st.wins) - 1
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
			// The result rows of the windows firing are cut from blocks
			// of up to rowBlock rows, each row capped at its own room.
			var block []types.Value
			rowCap, due := 0, 0
			ferr = st.fire(wm, wa, func(w []int64, accs []expr.Accumulator) error {
				if kv == nil {
					var err error
					if kv, err = appendKey(kbuf[:0], ctx.Key(), len(keys)); err != nil {
						return fmt.Errorf("operator %s: decoding its key: %w", uid, err)
					}
					rowCap = wo.rowCap(len(kv) + len(aggs))
					for n := wa.count(st); due < n && wa.end(wa.win(st, due))-1 <= wm; {
						due++
					}
				}
				if len(block) < rowCap {
					block = make([]types.Value, rowCap*min(max(due, 1), rowBlock))
				}
				due--
				dst := block[:0:rowCap]
				block = block[rowCap:]
				start, end := w[0], wa.end(w)
				if wo.cols == nil {
					vals := wa.appendResults(append(dst, kv...), w, accs)
					emitWindowRow(out, wo.appendBounds(vals, start, end), end)
					return nil
				}
				var buf [16]types.Value
				full := wa.appendResults(append(buf[:0], kv...), w, accs)
				emitWindowRow(out, wo.pick(dst, wo.appendBounds(full, start, end)), end)
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
			rearm, next = true, wa.end(st.wins)-1
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

// rowBlock is the most rows cut from one allocation, the result rows of a
// firing key or the rows of a datagen source: fewer allocations, while a
// row kept downstream (by a join, say) keeps at most rowBlock-1 others'
// values alive with it.
const rowBlock = 16

// accumulate adds row r to the accumulators of one window (or slice).
func accumulate(accs []expr.Accumulator, aggs []planner.AggCall, r types.Row, uid string) error {
	for j, a := range aggs {
		v, ok := aggInput(&a, r)
		if !ok {
			continue
		}
		if err := accs[j].Add(v); err != nil {
			// The accumulators may be half-changed: fail the job (the
			// state is restored from the last checkpoint).
			return fmt.Errorf("operator %s: %s: %w", uid, a.Text, err)
		}
	}
	return nil
}

// windowOutput is the layout of a window aggregation's result rows. A
// row is the aggregation's output, the keys, the aggregates' results,
// window_start, window_end and window_time, unless cols is set: a Calc
// after the aggregation that only picks columns of it is folded into it
// (see builder.calc), and a row is then those columns, in cols order (one
// operator fewer per row, and smaller rows).
type windowOutput struct {
	cols []int
	// width is the room of a new row: a Calc after the aggregation may
	// write a wider row into it (see ownedInput).
	width int
	// ltz: window_time is a TIMESTAMP_LTZ (the rowtime's type).
	ltz bool
}

// windowProjection is what builder.calc asks of the window aggregation
// below a Calc it folds into it: rows of cols with room for width values;
// used says the aggregation took it.
type windowProjection struct {
	cols  []int
	width int
	used  bool
}

// rowCap is the room of a result row of a window with n key values and
// results.
func (wo *windowOutput) rowCap(n int) int {
	if wo.cols != nil {
		return wo.width
	}
	return max(n+3, wo.width)
}

// appendBounds appends window_start, window_end and window_time of
// window [start, end) to vals, the keys and results of its row.
func (wo *windowOutput) appendBounds(vals []types.Value, start, end int64) []types.Value {
	wt := types.Timestamp(end-1, 0, 3)
	if wo.ltz {
		wt = types.TimestampLTZ(end-1, 0, 3)
	}
	return append(vals, types.Timestamp(start, 0, 3), types.Timestamp(end, 0, 3), wt)
}

// pick appends the columns wo keeps of full, a whole result row, to dst.
func (wo *windowOutput) pick(dst, full []types.Value) []types.Value {
	for _, c := range wo.cols {
		dst = append(dst, full[c])
	}
	return dst
}

// emitWindow emits the result row of window [start, end) of the group key
// k (nk values) with the accumulators' results, in the layout wo, at the
// window's last millisecond.
func emitWindow(out *clink.Collector[types.Row], k string, nk int, accs []expr.Accumulator, start, end int64, wo *windowOutput, uid string) error {
	dst := make([]types.Value, 0, wo.rowCap(nk+len(accs)))
	if wo.cols == nil {
		vals, err := appendResults(dst, k, nk, accs, uid)
		if err != nil {
			return err
		}
		emitWindowRow(out, wo.appendBounds(vals, start, end), end)
		return nil
	}
	var buf [16]types.Value
	full, err := appendResults(buf[:0], k, nk, accs, uid)
	if err != nil {
		return err
	}
	emitWindowRow(out, wo.pick(dst, wo.appendBounds(full, start, end)), end)
	return nil
}

// appendResults appends the nk values of the group key k and the
// accumulators' results to dst.
func appendResults(dst []types.Value, k string, nk int, accs []expr.Accumulator, uid string) ([]types.Value, error) {
	dst, err := appendKey(dst, k, nk)
	if err != nil {
		return nil, fmt.Errorf("operator %s: decoding its key: %w", uid, err)
	}
	for _, a := range accs {
		dst = append(dst, a.Result())
	}
	return dst, nil
}

// emitWindowRow emits the result row vals of a window that ends at end,
// at the window's last millisecond.
func emitWindowRow(out *clink.Collector[types.Row], vals []types.Value, end int64) {
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
