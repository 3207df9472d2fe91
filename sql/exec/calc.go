package exec

import (
	"fmt"
	"slices"
	"sync"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// Row ownership. A Calc makes one new row per input row, unless it may
// write its output into the input row's own storage: that is allowed when
// the input row was made for this record alone and nothing else reads or
// keeps it. builder.owned records the streams whose rows are such (the
// scans that make a fresh row per record, the TUMBLE, HOP and CUMULATE
// aggregations, which make one per fired window, and the operators that
// pass an owned row on unchanged or write into it); an owned row is
// handed to the stream's one consumer, which runs chained in the same task
// (a forward edge between equal parallelisms), so no channel, in-flight
// capture or other operator sees the row before that consumer is done
// with it. Rows that operators keep in state (Rank, joins, OVER) or that
// a stream hands to two consumers are never owned, so a Calc after them
// copies.

// ownedInput reports whether n's rows may be overwritten by n's one
// consumer.
func (b *builder) ownedInput(n planner.Node) bool {
	return b.owned[n.UID()] && b.consumers[n.UID()] == 1
}

// rowCapacity returns how many values a fresh row made by n (a scan)
// should have room for: its width, or more when a Calc downstream will
// write a wider row into the same storage.
func (b *builder) rowCapacity(n planner.Node) int {
	return max(len(n.Fields()), b.reuseWidth(n))
}

// reuseWidth is the widest row that the operators reading n's rows may
// write into their storage: along the single-consumer Calcs and watermark
// assigners below n.
func (b *builder) reuseWidth(n planner.Node) int {
	rs := b.readers[n.UID()]
	if len(rs) != 1 {
		return 0
	}
	switch r := rs[0].(type) {
	case *planner.Calc:
		if w, ok := b.calcWidth[r.UID()]; ok {
			return w // its projections picked (see foldThroughWatermark)
		}
		return max(len(r.Projs), b.reuseWidth(r))
	case *planner.WatermarkAssigner:
		return b.reuseWidth(r)
	}
	return 0
}

// calcLevel is one Calc of a merged chain, prepared for evaluation.
type calcLevel struct {
	uid        string // the Calc's, for errors
	filter     *expr.Compiled
	filterText string
	projs      []*expr.Compiled
	projText   []string
	// cols[j] is the input column that projection j copies, -1 when it is
	// computed.
	cols []int
	// prefix: projection j is column j for every j, so that an input row
	// of exactly len(c.Projs) values passes unchanged.
	prefix bool
	// inPlace: writing projection j into slot j of the input row, in
	// order, reads no slot already changed (every projection after j is a
	// column other than j, unless projection j is column j itself), so the
	// output may overwrite the input directly, leaving such slots as they
	// are: a scan's computed column (ts AS f(a)) writes one slot.
	inPlace bool
	// computed is the one projection that is computed when there is one
	// alone (-1 otherwise); movesFirst says that, with its value in hand,
	// the output may overwrite the input directly: no column projection
	// reads a slot an earlier one wrote, and the computed value is
	// written last (a rowtime computed from a column the picks drop).
	computed   int
	movesFirst bool
}

func newCalcLevel(c *planner.Calc) calcLevel {
	return newLevel(c.UID(), c.Filter, c.FilterText, c.Projs, c.ProjText)
}

// picked returns the level with only the projections cols, in that order.
func (l calcLevel) picked(cols []int) calcLevel {
	projs, text := make([]*expr.Compiled, len(cols)), make([]string, len(cols))
	for j, c := range cols {
		projs[j], text[j] = l.projs[c], l.projText[c]
	}
	return newLevel(l.uid, l.filter, l.filterText, projs, text)
}

func newLevel(uid string, filter *expr.Compiled, filterText string, projs []*expr.Compiled, projText []string) calcLevel {
	l := calcLevel{uid: uid, filter: filter, filterText: filterText, projs: projs, projText: projText,
		cols: make([]int, len(projs)), prefix: true, inPlace: true}
	for j, p := range projs {
		i, ok := p.Column()
		if !ok {
			i = -1
		}
		l.cols[j] = i
		l.prefix = l.prefix && i == j
	}
	for j := range l.cols {
		if l.cols[j] == j {
			continue // slot j keeps its value
		}
		for _, i := range l.cols[j+1:] {
			if i < 0 || i == j {
				l.inPlace = false
			}
		}
	}
	l.computed, l.movesFirst = -1, false
	if n := len(projs) - countColumns(l.cols); n == 1 {
		l.computed, l.movesFirst = slices.Index(l.cols, -1), true
		for j, i := range l.cols {
			for w, iw := range l.cols[:j] {
				if i >= 0 && iw >= 0 && iw != w && i == w {
					l.movesFirst = false // column j reads slot w, which moved
				}
			}
		}
	}
	return l
}

// countColumns counts the projections that copy a column.
func countColumns(cols []int) int {
	n := 0
	for _, i := range cols {
		if i >= 0 {
			n++
		}
	}
	return n
}

// project writes the level's projections of row into dst. When dst is
// row's own storage (same), a projection of column j into slot j is left
// as it is.
func (l *calcLevel) project(kind changelog.RowKind, row, dst []types.Value, same bool) error {
	for j, p := range l.projs {
		if i := l.cols[j]; i >= 0 {
			if !same || i != j {
				dst[j] = row[i]
			}
			continue
		}
		v, err := p.Eval(row)
		if err != nil {
			return fmt.Errorf("operator %s: evaluating %s on %s: %w", l.uid, l.projText[j], types.Row{Kind: kind, Values: row}, err)
		}
		dst[j] = v
	}
	return nil
}

// stackWidth is the widest output that a Calc evaluates in a buffer on
// the stack before copying it into its input row's storage.
const stackWidth = 8

// calc builds n together with the Calcs below it that feed n alone, as one
// FlatMap (Flink merges such Calcs in the planner): a row passes every
// filter and projection in turn, the intermediate rows in a scratch buffer,
// so that at most the output row is allocated; none is when the input row
// is owned (see ownedInput) and has room for the output, or when every
// level passes its input through unchanged.
func (b *builder) calc(n *planner.Calc) (clink.Stream[types.Row], error) {
	chain := b.calcChain(n)
	if s, ok, err := b.foldIntoWindow(n, chain); ok || err != nil {
		return s, err
	}
	if s, ok, err := b.foldThroughWatermark(n, chain); ok || err != nil {
		return s, err
	}
	levels := make([]calcLevel, len(chain))
	for i, c := range chain {
		levels[i] = newCalcLevel(c)
	}
	return b.calcLevels(n.UID(), chain, levels)
}

// calcChain returns n and the Calcs below it that feed n alone and are
// not built yet, bottom first.
func (b *builder) calcChain(n *planner.Calc) []*planner.Calc {
	chain := []*planner.Calc{n} // bottom first
	for {
		in, ok := chain[0].Input.(*planner.Calc)
		if !ok || b.consumers[in.UID()] != 1 {
			break
		}
		if _, built := b.streams[in.UID()]; built {
			break
		}
		chain = append([]*planner.Calc{in}, chain...)
	}
	return chain
}

// calcLevels builds the levels of chain (one per Calc, as prepared by the
// caller) as one FlatMap named uid, the top Calc's; its rows are owned
// under uid as ownedInput says.
func (b *builder) calcLevels(uid string, chain []*planner.Calc, levels []calcLevel) (clink.Stream[types.Row], error) {
	in, err := b.stream(chain[0].Input)
	if err != nil {
		return in, err
	}
	reuse := b.ownedInput(chain[0].Input)
	passes := false // some level may pass its input row on unchanged
	for i := range levels {
		passes = passes || levels[i].prefix
	}
	// The output is a new row, or the owned input row: owned either way,
	// unless a level passes a row this operator does not own.
	b.owned[uid] = reuse || !passes
	// Level i < last writes its row into scratch[off[i]:off[i+1]].
	off := make([]int, len(levels))
	for i := 1; i < len(levels); i++ {
		off[i] = off[i-1] + len(levels[i-1].projs)
	}
	scratchLen := off[len(levels)-1]
	pool := sync.Pool{New: func() any { s := make([]types.Value, scratchLen); return &s }}
	eval := func(r types.Row, scratch []types.Value, out *clink.Collector[types.Row]) error {
		row := r.Values
		fromScratch := false // row lies in scratch, which must not escape
		for i := range levels {
			l := &levels[i]
			if l.filter != nil {
				v, err := l.filter.Eval(row)
				if err != nil {
					return fmt.Errorf("operator %s: evaluating %s on %s: %w", l.uid, l.filterText, types.Row{Kind: r.Kind, Values: row}, err)
				}
				if v.IsNull() || !v.Bool() {
					return nil
				}
			}
			w := len(l.projs)
			if l.prefix && len(row) == w {
				continue
			}
			kind := r.Kind
			switch {
			case i < len(levels)-1:
				dst := scratch[off[i] : off[i]+w]
				if err := l.project(kind, row, dst, false); err != nil {
					return err
				}
				row, fromScratch = dst, true
			case reuse && cap(r.Values) >= w && (fromScratch || l.inPlace):
				dst := r.Values[:w]
				if err := l.project(kind, row, dst, !fromScratch); err != nil {
					return err
				}
				row, fromScratch = dst, false
			case reuse && cap(r.Values) >= w && l.movesFirst:
				// The one computed value first, then the columns in
				// place, then the value: no copy of the row.
				c := l.computed
				v, err := l.projs[c].Eval(row)
				if err != nil {
					return fmt.Errorf("operator %s: evaluating %s on %s: %w", l.uid, l.projText[c], types.Row{Kind: kind, Values: row}, err)
				}
				dst := r.Values[:w]
				for j, src := range l.cols {
					if src >= 0 && src != j {
						dst[j] = row[src]
					}
				}
				dst[c] = v
				row = dst
			case reuse && cap(r.Values) >= w && w <= stackWidth:
				// A projection may read a slot an earlier one wrote:
				// evaluate all of them first.
				var tmp [stackWidth]types.Value
				if err := l.project(kind, row, tmp[:w], false); err != nil {
					return err
				}
				row = r.Values[:w]
				copy(row, tmp[:w])
			default:
				dst := make([]types.Value, w)
				if err := l.project(kind, row, dst, false); err != nil {
					return err
				}
				row, fromScratch = dst, false
			}
		}
		if fromScratch {
			// The last level passed a scratch row on unchanged.
			var dst []types.Value
			if reuse && cap(r.Values) >= len(row) {
				dst = r.Values[:len(row)]
			} else {
				dst = make([]types.Value, len(row))
			}
			copy(dst, row)
			row = dst
		}
		out.Collect(types.Row{Kind: r.Kind, Values: row})
		return nil
	}
	if len(levels) == 1 {
		return clink.FlatMap(in, uid, func(r types.Row, out *clink.Collector[types.Row]) error {
			return eval(r, nil, out)
		}), nil
	}
	return clink.FlatMap(in, uid, func(r types.Row, out *clink.Collector[types.Row]) error {
		sp := pool.Get().(*[]types.Value)
		err := eval(r, *sp, out)
		pool.Put(sp)
		return err
	}), nil
}

// foldIntoWindow builds the Calcs of chain (n on top) as part of the
// window aggregation below them, when they only pick its columns and the
// aggregation is theirs alone: it then makes its result rows in n's
// layout (see windowOutput), and ok is true. Otherwise it builds nothing,
// unless the aggregation, which declined the projection, is built.
func (b *builder) foldIntoWindow(n *planner.Calc, chain []*planner.Calc) (s clink.Stream[types.Row], ok bool, err error) {
	w, isWin := chain[0].Input.(*planner.WindowAggregate)
	if !isWin || b.consumers[w.UID()] != 1 {
		return s, false, nil
	}
	if _, built := b.streams[w.UID()]; built {
		return s, false, nil
	}
	cols, picks := pickedColumns(chain)
	if !picks {
		return s, false, nil
	}
	p := &windowProjection{cols: cols, width: max(len(cols), b.reuseWidth(n))}
	b.windowProj[w.UID()] = p
	s, err = b.stream(w)
	delete(b.windowProj, w.UID())
	if err != nil || !p.used {
		// The Calcs run on the built stream as usual.
		return s, false, err
	}
	// Each row is made for its window alone, as the aggregation's are.
	b.owned[n.UID()] = true
	return s, true, nil
}

// pickedColumns returns the input columns that the Calcs of chain (bottom
// first) output, when none filters and every projection is a column.
func pickedColumns(chain []*planner.Calc) ([]int, bool) {
	var cols []int
	for _, c := range chain {
		if c.Filter != nil {
			return nil, false
		}
		next := make([]int, len(c.Projs))
		for j, p := range c.Projs {
			i, ok := p.Column()
			if !ok {
				return nil, false
			}
			if cols != nil {
				i = cols[i]
			}
			next[j] = i
		}
		cols = next
	}
	return cols, true
}

// foldThroughWatermark builds the Calcs of chain (n on top), when they
// only pick columns of a watermark assigner's rows, into the Calc below
// the assigner: Calc(picks) over WatermarkAssigner over Calc(c) runs as
// WatermarkAssigner over Calc(c's projections picked), the assigner
// reading the rowtime where the picks put it. The assigner sees the same
// rows with the same rowtimes, so it emits the same watermarks, and n's
// rows are the same; one operator fewer per row, and a scan below makes
// narrower rows. The picks must keep the rowtime; none may filter (that
// would change the rows the assigner sees). ok is false, and nothing is
// built, when the plan is not of that shape.
func (b *builder) foldThroughWatermark(n *planner.Calc, chain []*planner.Calc) (s clink.Stream[types.Row], ok bool, err error) {
	w, isWm := chain[0].Input.(*planner.WatermarkAssigner)
	if !isWm || b.consumers[w.UID()] != 1 {
		return s, false, nil
	}
	low, isCalc := w.Input.(*planner.Calc)
	if !isCalc || b.consumers[low.UID()] != 1 {
		return s, false, nil
	}
	for _, u := range []string{w.UID(), low.UID()} {
		if _, built := b.streams[u]; built {
			return s, false, nil
		}
	}
	cols, picks := pickedColumns(chain)
	if !picks {
		return s, false, nil
	}
	rowtime := slices.Index(cols, w.Rowtime())
	if rowtime < 0 {
		return s, false, nil
	}
	lower := b.calcChain(low)
	levels := make([]calcLevel, len(lower))
	for i, c := range lower {
		levels[i] = newCalcLevel(c)
	}
	top := len(levels) - 1
	levels[top] = levels[top].picked(cols)
	// The widest row written into a scan's below is the picked one, or
	// what the Calcs above n write.
	b.calcWidth[low.UID()] = max(len(cols), b.reuseWidth(n))
	s, err = b.calcLevels(low.UID(), lower, levels)
	if err != nil {
		return s, true, err
	}
	// The assigner passes the rows on unchanged.
	b.owned[n.UID()] = b.owned[low.UID()]
	return b.assignTimestamps(s, w, rowtime), true, nil
}
