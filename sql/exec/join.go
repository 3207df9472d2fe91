package exec

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// The join nodes:
//
//	Join          clink.Connect of both inputs keyed by the join key (an
//	              int64, or the encoded key) + clink.CoProcess; both sides'
//	              rows, encoded (joinState), in the key's value state
//	IntervalJoin  like WindowJoin, rows stamped with their rowtime column
//	              and kept until their last matching time, one cleanup
//	              timer per key; clink.DelayWatermarks behind it
//	WindowJoin    clink.Union of both inputs (tagged with their side) keyed
//	              by join key and window + clink.KeyedProcess with an
//	              event-time timer at the window's end
func init() {
	registerNode(func(b *builder, n *planner.Join) (clink.Stream[types.Row], error) { return b.join(n) })
	registerNode(func(b *builder, n *planner.IntervalJoin) (clink.Stream[types.Row], error) { return b.intervalJoin(n) })
	registerNode(func(b *builder, n *planner.WindowJoin) (clink.Stream[types.Row], error) { return b.windowJoin(n) })
}

// joinKeyOf returns the function that encodes the join key of a row of
// one side (left or not), each value in the type both sides compare it in.
// The conversions widen (INT to BIGINT, a decimal to DOUBLE) and do not
// fail; were one to, its value is encoded behind a tag no converted key
// has, so that it cannot meet a converted one.
func joinKeyOf(keys []planner.JoinKey, left bool) func(types.Row) string {
	return func(r types.Row) string {
		var k []byte
		for _, key := range keys {
			col, cast := key.Right, key.RightCast
			if left {
				col, cast = key.Left, key.LeftCast
			}
			v := r.Values[col]
			if cast != nil {
				c, err := cast.Eval(r.Values)
				if err != nil {
					k = types.AppendKey(append(k, 0xff), v)
					continue
				}
				v = c
			}
			if v.IsNull() {
				// One NULL for every type: IS NOT DISTINCT FROM matches it.
				v = types.Null
			}
			k = types.AppendKey(k, v)
		}
		return string(k)
	}
}

// nullKey reports a row whose join key has a NULL where NULL equals
// nothing (all but IS NOT DISTINCT FROM).
func nullKey(keys []planner.JoinKey, left bool, r types.Row) bool {
	for _, key := range keys {
		col := key.Right
		if left {
			col = key.Left
		}
		if !key.NullSafe && r.Values[col].IsNull() {
			return true
		}
	}
	return false
}

// regularJoin is the logic of a Join node, Flink's StreamingJoinOperator
// without state TTL. A key's rows are a joinState.
type regularJoin struct {
	n      *planner.Join
	uid    string
	nl, nr int
	// nullsL and nullsR pad a row of the other side.
	nullsL, nullsR []types.Value
	// keepL and keepR are the columns of each side that the join keeps in
	// its state (nil: all): those that its condition or a node above it
	// reads (builder.outputReads). The others are kept as NULL, which no
	// node above reads, as Flink projects them away below the join.
	keepL, keepR []bool
	// scratch holds *joinScratch: the function runs in every subtask.
	scratch sync.Pool
}

// joinScratch is the buffers one call of processJoin reuses.
type joinScratch struct {
	// pair is a joined row (left columns, then right) on which the
	// condition is evaluated.
	pair []types.Value
	// enc is the encoding of the row being processed.
	enc []byte
	// matched are the offsets of the other side's records that the row
	// joins with.
	matched []int
}

func nullsOf(fs []types.Field) []types.Value {
	vs := make([]types.Value, len(fs))
	for i, f := range fs {
		vs[i] = types.NullOf(f.Type.Kind)
	}
	return vs
}

// joined lays a row of each side out as the join's output.
func (j *regularJoin) joined(kind changelog.RowKind, l, r []types.Value) types.Row {
	vals := make([]types.Value, 0, j.nl+j.nr)
	return types.Row{Kind: kind, Values: append(append(vals, l...), r...)}
}

// matches reports whether the condition holds for a pair of rows.
func (j *regularJoin) matches(l, r []types.Value) (bool, error) {
	if j.n.Condition == nil {
		return true, nil
	}
	row := j.joined(changelog.Insert, l, r)
	return j.holds(row.Values)
}

// holds reports whether the condition holds for a joined row.
func (j *regularJoin) holds(pair []types.Value) (bool, error) {
	v, err := j.n.Condition.Eval(pair)
	if err != nil {
		return false, fmt.Errorf("operator %s: evaluating %s on %s: %w", j.uid, j.n.Text, types.RowString(pair), err)
	}
	return !v.IsNull() && v.Bool(), nil
}

// stateError names the operator and key of a join state that does not
// decode.
func (j *regularJoin) stateError(key any, err error) error {
	return fmt.Errorf("operator %s: reading the rows of join key %q: %w", j.uid, fmt.Sprint(key), err)
}

// pairOf returns a joined row of r (of the left side or not) and the
// other side's stored row. The stored row's strings share the state's
// bytes, which never change (see joinRows): a row emitted keeps them
// alive only while it is held downstream.
func (j *regularJoin) pairOf(kind changelog.RowKind, r []types.Value, left bool, other []byte) (types.Row, error) {
	vals := make([]types.Value, j.nl+j.nr)
	var err error
	if left {
		copy(vals, r)
		err = decodeJoinRow(vals[j.nl:], other)
	} else {
		copy(vals[j.nl:], r)
		err = decodeJoinRow(vals[:j.nl], other)
	}
	return types.Row{Kind: kind, Values: vals}, err
}

// padded returns a stored row of one side padded with NULLs for the other.
func (j *regularJoin) padded(kind changelog.RowKind, left bool, row []byte) (types.Row, error) {
	vals := make([]types.Value, j.nl+j.nr)
	var err error
	if left {
		err = decodeJoinRow(vals[:j.nl], row)
		copy(vals[j.nl:], j.nullsR)
	} else {
		copy(vals, j.nullsL)
		err = decodeJoinRow(vals[j.nl:], row)
	}
	return types.Row{Kind: kind, Values: vals}, err
}

// encode appends the encoding of a row of one side (left or not) as the
// state keeps it: the columns it does not keep as NULLs.
func (j *regularJoin) encode(dst []byte, vals []types.Value, left bool) []byte {
	keep, nulls := j.keepL, j.nullsL
	if !left {
		keep, nulls = j.keepR, j.nullsR
	}
	if keep == nil {
		return types.AppendValues(dst, vals)
	}
	for i, v := range vals {
		if !keep[i] {
			v = nulls[i]
		}
		dst = types.AppendKey(dst, v)
	}
	return dst
}

// sameKept reports whether two rows agree on the columns in keep (nil:
// all).
func sameKept(a, b []types.Value, keep []bool) bool {
	for i := range a {
		if keep != nil && !keep[i] {
			continue
		}
		if !sameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

// sameValue compares two values, NULL equal to NULL.
func sameValue(a, b types.Value) bool {
	return a.IsNull() == b.IsNull() && (a.IsNull() || types.Equal(a, b))
}

// find returns the offset of the record in rs whose row equals values
// on the columns in keep (nil: all), whose encoding is enc, or -1. Equal
// values encode alike but for a few (a DECIMAL's scale, a TIMESTAMP's
// precision, -0.0): only when no record has the same bytes are the rows
// decoded (into tmp) and compared.
func (j *regularJoin) find(rs joinRows, values []types.Value, keep []bool, enc []byte, tmp []types.Value) (int, error) {
	for pass := 0; pass < 2; pass++ {
		for off := 0; off < len(rs); {
			r, err := rs.rec(off)
			if err != nil {
				return -1, err
			}
			if pass == 0 {
				if string(r.row) == string(enc) {
					return off, nil
				}
			} else {
				if err := decodeJoinRow(tmp, r.row); err != nil {
					return -1, err
				}
				if sameKept(tmp, values, keep) {
					return off, nil
				}
			}
			off = r.end
		}
	}
	return -1, nil
}

// width returns the number of columns of one side (left or not).
func (j *regularJoin) width(left bool) int {
	if left {
		return j.nl
	}
	return j.nr
}

// processJoin handles a row of one side (left or not) of j: Flink's rules
// for each kind of row and each side's outerness. K is the type of the
// join key (see intJoinKey).
func processJoin[K comparable](j *regularJoin, ctx *clink.KeyedContext[K, joinState], r types.Row, out *clink.Collector[types.Row], left bool) error {
	sc, _ := j.scratch.Get().(*joinScratch)
	if sc == nil {
		sc = &joinScratch{pair: make([]types.Value, j.nl+j.nr)}
	}
	defer j.scratch.Put(sc)
	if want := j.width(left); len(r.Values) != want {
		return fmt.Errorf("operator %s: a row of %d columns on an input of %d", j.uid, len(r.Values), want)
	}
	st, _ := ctx.Value()
	mineRows, otherRows := st.Left, st.Right
	mineOuter, otherOuter := j.n.Type.LeftOuter(), j.n.Type.RightOuter()
	// mine and other are where this side's and the other side's columns
	// sit in a joined row.
	mine, other := sc.pair[:j.nl], sc.pair[j.nl:]
	if !left {
		mineRows, otherRows = otherRows, mineRows
		mineOuter, otherOuter = otherOuter, mineOuter
		mine, other = other, mine
	}
	copy(mine, r.Values)
	nullKey := nullKey(j.n.Keys, left, r)
	matched := sc.matched[:0]
	// An inner join emits what a new row joins as it finds it, from the
	// joined row the condition saw: it has no padded rows to emit first,
	// and the row is kept whatever it meets.
	inline := !mineOuter && !otherOuter && r.Kind.IsAccumulate()
	if !nullKey {
		for off := 0; off < len(otherRows); {
			o, err := otherRows.rec(off)
			if err != nil {
				return j.stateError(ctx.Key(), err)
			}
			if o.flags&joinNullKey == 0 {
				ok := true
				decoded := false
				if j.n.Condition != nil {
					if err := decodeJoinRow(other, o.row); err != nil {
						return j.stateError(ctx.Key(), err)
					}
					decoded = true
					if ok, err = j.holds(sc.pair); err != nil {
						return err
					}
				}
				if ok {
					matched = append(matched, off)
					if inline {
						if !decoded {
							if err := decodeJoinRow(other, o.row); err != nil {
								return j.stateError(ctx.Key(), err)
							}
						}
						out.Collect(types.Row{Kind: r.Kind, Values: slices.Clone(sc.pair)})
					}
				}
			}
			off = o.end
		}
	}
	sc.matched = matched
	n := int64(len(matched))
	// emit emits r joined with each matched row, as kind.
	emit := func(kind changelog.RowKind) error {
		for _, off := range matched {
			o, _ := otherRows.rec(off)
			row, err := j.pairOf(kind, r.Values, left, o.row)
			if err != nil {
				return j.stateError(ctx.Key(), err)
			}
			out.Collect(row)
		}
		return nil
	}
	// padOthers emits, as kind, the matched rows whose association count
	// is at, padded with NULLs for this side.
	padOthers := func(kind changelog.RowKind, at int64) error {
		for _, off := range matched {
			o, _ := otherRows.rec(off)
			if o.assoc != at {
				continue
			}
			row, err := j.padded(kind, !left, o.row)
			if err != nil {
				return j.stateError(ctx.Key(), err)
			}
			out.Collect(row)
		}
		return nil
	}
	padMine := func(kind changelog.RowKind) {
		if left {
			out.Collect(j.joined(kind, r.Values, j.nullsR))
		} else {
			out.Collect(j.joined(kind, j.nullsL, r.Values))
		}
	}
	sc.enc = j.encode(sc.enc[:0], r.Values, left)
	var err error
	if r.Kind.IsAccumulate() {
		if mineOuter && n == 0 {
			padMine(changelog.Insert)
		}
		if otherOuter && n > 0 {
			if err := padOthers(changelog.Delete, 0); err != nil {
				return err
			}
		}
		if !inline {
			if err := emit(changelog.Insert); err != nil {
				return err
			}
		}
		if otherOuter && n > 0 {
			// A new slice: the held one may be in a checkpoint.
			if otherRows, err = otherRows.rewrite(-1, matched, 1); err != nil {
				return j.stateError(ctx.Key(), err)
			}
		}
		flags := byte(0)
		if nullKey {
			flags = joinNullKey
		}
		// Appending writes past the end of the slice the state holds,
		// which a checkpoint may be encoding, and never into it. A row
		// that no row still to come can meet is not kept.
		keep, exp := true, int64(0)
		if ret := j.retention(left); ret != nil {
			var ok bool
			exp, ok = expiry(r.Values[ret.Col], ret.AfterMs)
			if keep = ok && exp > ctx.CurrentWatermark(); keep && len(mineRows) == 0 {
				// The key's first row sets its timer; rows after it go
				// when it fires or later (see expire).
				ctx.RegisterEventTimeTimer(exp)
			}
			flags |= joinExpires
		}
		if keep {
			mineRows = appendJoinRecExpiring(mineRows, flags, exp, n, sc.enc)
		}
	} else {
		keep := j.keepL
		if !left {
			keep = j.keepR
		}
		at, err := j.find(mineRows, r.Values, keep, sc.enc, mine)
		if err != nil {
			return j.stateError(ctx.Key(), err)
		}
		if at < 0 {
			// A retraction of a row this side does not hold (its +I was
			// filtered out upstream): there is nothing to retract.
			return nil
		}
		if n == 0 {
			if mineOuter {
				padMine(changelog.Delete)
			}
		} else {
			kind := r.Kind
			if mineOuter {
				kind = changelog.Delete
			}
			if err := emit(kind); err != nil {
				return err
			}
			if otherOuter {
				if err := padOthers(changelog.Insert, 1); err != nil {
					return err
				}
				if otherRows, err = otherRows.rewrite(-1, matched, -1); err != nil {
					return j.stateError(ctx.Key(), err)
				}
			}
		}
		// New slices: the held ones may be in a checkpoint.
		if mineRows, err = mineRows.rewrite(at, nil, 0); err != nil {
			return j.stateError(ctx.Key(), err)
		}
	}
	if left {
		st = joinState{Left: mineRows, Right: otherRows}
	} else {
		st = joinState{Left: otherRows, Right: mineRows}
	}
	if len(st.Left) == 0 && len(st.Right) == 0 {
		ctx.Clear()
	} else {
		ctx.SetValue(st)
	}
	return nil
}

func (b *builder) join(n *planner.Join) (clink.Stream[types.Row], error) {
	l, err := b.stream(n.Left)
	if err != nil {
		return l, err
	}
	r, err := b.stream(n.Right)
	if err != nil {
		return r, err
	}
	j := &regularJoin{n: n, uid: n.UID(), nl: len(n.Left.Fields()), nr: len(n.Right.Fields()),
		nullsL: nullsOf(n.Left.Fields()), nullsR: nullsOf(n.Right.Fields())}
	if reads := b.outputReads(n); reads != nil && (n.Condition == nil || n.CondReads != nil) {
		keep := slices.Clone(reads)
		for i, c := range n.CondReads {
			keep[i] = keep[i] || c
		}
		if slices.Contains(keep, false) {
			j.keepL, j.keepR = keep[:j.nl], keep[j.nl:]
		}
	}
	if intJoinKey(n.Keys, n.Left.Fields(), n.Right.Fields()) {
		k := n.Keys[0]
		return joinOn(j, l, r, intKeyOf(k.Left, k.LeftCast), intKeyOf(k.Right, k.RightCast)), nil
	}
	return joinOn(j, l, r, joinKeyOf(n.Keys, true), joinKeyOf(n.Keys, false)), nil
}

// joinOn runs j over both inputs keyed by keyL and keyR.
func joinOn[K comparable](j *regularJoin, l, r clink.Stream[types.Row], keyL, keyR func(types.Row) K) clink.Stream[types.Row] {
	cs := clink.Connect(clink.KeyBy(l, keyL), clink.KeyBy(r, keyR))
	f := clink.KeyedCoProcessFunction[K, types.Row, types.Row, joinState, types.Row]{
		ProcessElement1: func(ctx *clink.KeyedContext[K, joinState], row types.Row, out *clink.Collector[types.Row]) error {
			return processJoin(j, ctx, row, out, true)
		},
		ProcessElement2: func(ctx *clink.KeyedContext[K, joinState], row types.Row, out *clink.Collector[types.Row]) error {
			return processJoin(j, ctx, row, out, false)
		},
	}
	if j.n.LeftRetain != nil || j.n.RightRetain != nil {
		f.OnTimer = func(ctx *clink.KeyedContext[K, joinState], _ int64, _ clink.TimeDomain, _ *clink.Collector[types.Row]) error {
			return expire(j, ctx)
		}
		// The rows say when their key next needs its timer: the timers
		// are not written to the state (nor checkpointed).
		f.EventTimerOf = func(_ K, st joinState) (int64, bool) { return j.restoreExpiry(st) }
	}
	return clink.KeyedCoProcess(cs, j.uid, f)
}

// retention returns the JoinRetention of one side (left or not), or nil.
func (j *regularJoin) retention(left bool) *planner.JoinRetention {
	if left {
		return j.n.LeftRetain
	}
	return j.n.RightRetain
}

// expiry returns the watermark at which a row whose retention column is v
// (see planner.JoinRetention) can meet no more rows: v plus afterMs,
// rounded up to the next millisecond; false for NULL, which meets
// nothing.
func expiry(v types.Value, afterMs int64) (int64, bool) {
	if v.IsNull() {
		return 0, false
	}
	ms := v.EpochMillis()
	if v.NanoOfMilli() > 0 {
		ms++
	}
	e := ms + afterMs
	// Saturate: a bound past either end of time.
	if afterMs > 0 && e < ms {
		e = math.MaxInt64
	} else if afterMs < 0 && e > ms {
		e = math.MinInt64
	}
	return e, true
}

// expire runs when a key's retention timer fires: it drops the rows of
// each side with a JoinRetention that the watermark has passed (no row
// still to come can meet them; Flink's join would keep them for good) and,
// for each side that lost rows, sets a timer at the earliest expiry of its
// rows left.
//
// The timers are not kept in the state (clink.EventTimerOf), so a key may
// have more than one, and some that no longer apply. What keeps every row
// going once it expires is that each side of a key that holds rows has a
// timer at or after the earliest expiry of its rows, which drops that row
// when it fires (the watermark is then past it): the first row of a side
// sets one at its own expiry (rows after it only lower the earliest), a
// firing that drops rows of a side sets one at the earliest expiry of
// that side's rows left, a restore sets one at or after both sides'
// earliest (restoreExpiry), and no row goes otherwise (the planner sets a
// JoinRetention only where both inputs are insert-only: no retraction
// takes a row a timer was for). A firing that drops nothing of a side was
// not that side's timer (its earliest row would have gone) and sets none
// for it. So a side's surplus timers fire once each and are gone: a timer
// is set only when a side gets its first row or loses rows (at most once
// per side and watermark), never again for a firing that dropped nothing.
func expire[K comparable](j *regularJoin, ctx *clink.KeyedContext[K, joinState]) error {
	st, ok := ctx.Value()
	if !ok {
		return nil
	}
	wm := ctx.CurrentWatermark()
	var timers [2]int64
	n := 0
	changed := false
	for _, left := range []bool{true, false} {
		ret := j.retention(left)
		rows := &st.Right
		if left {
			rows = &st.Left
		}
		if ret == nil || len(*rows) == 0 {
			continue
		}
		// A record says when it expires; one written before records did
		// is decoded up to the retention's column.
		next, has := int64(math.MaxInt64), false
		kept, dropped, err := rows.retained(ret.Col+1, func(row []types.Value) (int64, bool) {
			return expiry(row[ret.Col], ret.AfterMs)
		}, func(e int64) bool {
			if e <= wm {
				return false
			}
			next, has = min(next, e), true
			return true
		})
		if err != nil {
			return j.stateError(ctx.Key(), err)
		}
		*rows = kept
		if dropped {
			changed = true
			if has {
				timers[n], n = next, n+1
			}
		}
	}
	switch {
	case !changed:
	case len(st.Left) == 0 && len(st.Right) == 0:
		ctx.Clear()
	default:
		ctx.SetValue(st)
		for _, ts := range timers[:n] {
			ctx.RegisterEventTimeTimer(ts)
		}
	}
	return nil
}

// restoreExpiry returns when a restored key needs its timer (ok false:
// no side with a JoinRetention holds rows): the later of its sides'
// earliest expiries, so that its firing drops rows of both sides and sets
// each side's own timer (see expire). Rows it cannot read give the
// earliest time there is, so that the timer fires at once and expire
// reports what is wrong with them.
func (j *regularJoin) restoreExpiry(st joinState) (int64, bool) {
	at, has := int64(math.MinInt64), false
	for _, left := range []bool{true, false} {
		ret := j.retention(left)
		rows := st.Right
		if left {
			rows = st.Left
		}
		if ret == nil || len(rows) == 0 {
			continue
		}
		first, some := int64(math.MaxInt64), false
		_, _, err := rows.retained(ret.Col+1, func(row []types.Value) (int64, bool) {
			return expiry(row[ret.Col], ret.AfterMs)
		}, func(e int64) bool {
			first, some = min(first, e), true
			return true
		})
		if err != nil {
			return math.MinInt64, true
		}
		if some {
			at, has = max(at, first), true
		}
	}
	return at, has
}

// intJoinKey reports whether a join's keys are one integer on each side,
// compared as integers (any cast widens one integer type to another) and
// where NULL equals nothing. Such a join keys its state by the int64
// itself rather than by an encoded string: no string per row, and a
// key's slot in the state table holds no pointer. A row whose key is
// NULL goes under key 0, flagged as meeting no row (joinNullKey).
func intJoinKey(keys []planner.JoinKey, lf, rf []types.Field) bool {
	if len(keys) != 1 || keys[0].NullSafe {
		return false
	}
	k := keys[0]
	if !lf[k.Left].Type.Kind.IsInteger() || !rf[k.Right].Type.Kind.IsInteger() {
		return false
	}
	for _, c := range []*expr.Compiled{k.LeftCast, k.RightCast} {
		if c != nil && !c.Type.Kind.IsInteger() {
			return false
		}
	}
	return true
}

// intKeyOf returns the function that gives the join key of a row whose
// key is column col (converted by cast, if not nil), for intJoinKey's
// joins: 0 for NULL, and for a conversion that fails (widening integers
// does not).
func intKeyOf(col int, cast *expr.Compiled) func(types.Row) int64 {
	return func(r types.Row) int64 {
		v := r.Values[col]
		if cast != nil {
			c, err := cast.Eval(r.Values)
			if err != nil {
				return 0
			}
			v = c
		}
		if v.IsNull() {
			return 0
		}
		return v.Int64()
	}
}

// byRowtime stamps each row with its rowtime column, dropping rows
// without one (they meet no time bound).
func byRowtime(s clink.Stream[types.Row], name string, col int) clink.Stream[types.Row] {
	return clink.FlatMap(s, name, func(r types.Row, out *clink.Collector[types.Row]) error {
		if v := r.Values[col]; !v.IsNull() {
			out.CollectWithTimestamp(r, v.EpochMillis())
		}
		return nil
	})
}

func (b *builder) intervalJoin(n *planner.IntervalJoin) (clink.Stream[types.Row], error) {
	l, err := b.stream(n.Left)
	if err != nil {
		return l, err
	}
	r, err := b.stream(n.Right)
	if err != nil {
		return r, err
	}
	uid := n.UID()
	l = byRowtime(l, uid+".left_rowtime", n.LeftTime)
	r = byRowtime(r, uid+".right_rowtime", n.RightTime)
	j := &regularJoin{uid: uid, n: &planner.Join{JoinSpec: n.JoinSpec}, nl: len(n.Left.Fields()), nr: len(n.Right.Fields()),
		nullsL: nullsOf(n.Left.Fields()), nullsR: nullsOf(n.Right.Fields())}
	s := intervalJoin(n, j, l, r)
	// A joined row carries its left rowtime, which may be behind the
	// watermark when the right row arrives: hold the watermark back.
	if d := n.WatermarkDelayMs(); d > 0 {
		s = clink.DelayWatermarks(s, uid+".watermark_delay", time.Duration(d)*time.Millisecond)
	}
	return s, nil
}

// timedRow is a row of an interval join: its rowtime, and whether it has
// met a row of the other side.
type timedRow struct {
	Row     types.Row
	Ts      int64
	Matched bool
}

// intervalSides is one join key's rows of an interval join, and the
// earliest cleanup timer set for them.
type intervalSides struct {
	Left, Right []timedRow
	Timer       int64
	HasTimer    bool
}

// tagSides unions both inputs of a join into one stream, each row with
// its side as a last BOOLEAN column (true: left), so that both can share
// one keyed operator with timers; key keys a row of either side.
func tagSides(l, r clink.Stream[types.Row], uid string, keys []planner.JoinKey) (clink.KeyedStream[string, types.Row], func(types.Row) bool) {
	tag := func(s clink.Stream[types.Row], name string, left bool) clink.Stream[types.Row] {
		return clink.Map(s, name, func(r types.Row) types.Row {
			vals := append(append(make([]types.Value, 0, len(r.Values)+1), r.Values...), types.Bool(left))
			return types.Row{Kind: r.Kind, Values: vals}
		})
	}
	u := clink.Union(uid+".union", tag(l, uid+".left", true), tag(r, uid+".right", false))
	keyL, keyR := joinKeyOf(keys, true), joinKeyOf(keys, false)
	isLeft := func(r types.Row) bool { return r.Values[len(r.Values)-1].Bool() }
	return clink.KeyBy(u, func(r types.Row) string {
		if isLeft(r) {
			return keyL(r)
		}
		return keyR(r)
	}), isLeft
}

// intervalJoin runs an interval join of any type, as Flink's
// TimeIntervalJoin: a row meets the other side's rows of its key within
// the bounds, and waits in keyed state until the watermark passes the
// last time the other side can match it (a left row at t until right rows
// at t - LowerMs, a right row at t until left rows at t + UpperMs); then
// a row of an outer side that met nothing is emitted padded. A row that
// arrives after its last matching time meets what is still held and is
// not kept. One cleanup timer per key is set, at the earliest such time,
// and the key's value says which (a timer it no longer names does
// nothing).
// A row with a left row carries its rowtime.
func intervalJoin(n *planner.IntervalJoin, j *regularJoin, l, r clink.Stream[types.Row]) clink.Stream[types.Row] {
	ks, isLeft := tagSides(l, r, n.UID(), n.Keys)
	keys, typ, lo, hi := n.Keys, n.Type, n.LowerMs, n.UpperMs
	// expiry is the watermark at which a row stops matching: a left row at
	// t matches right rows up to t - lo, a right row left rows up to t + hi.
	expiry := func(left bool, ts int64) int64 {
		if left {
			return ts - lo + 1
		}
		return ts + hi + 1
	}
	setTimer := func(ctx *clink.KeyedContext[string, intervalSides], st *intervalSides, at int64) {
		if !st.HasTimer || at < st.Timer {
			ctx.RegisterEventTimeTimer(at)
			st.Timer, st.HasTimer = at, true
		}
	}
	return clink.KeyedProcess(ks, n.UID(), clink.KeyedProcessFunction[string, types.Row, intervalSides, types.Row]{
		ProcessElement: func(ctx *clink.KeyedContext[string, intervalSides], r types.Row, out *clink.Collector[types.Row]) error {
			ts := ctx.Timestamp()
			left := isLeft(r)
			row := types.Row{Values: r.Values[:len(r.Values)-1]}
			st, _ := ctx.Value()
			mine, other := st.Left, st.Right
			if !left {
				mine, other = st.Right, st.Left
			}
			me := timedRow{Row: row, Ts: ts}
			copied := false
			if !nullKey(keys, left, row) {
				for i, o := range other {
					// left.ts - right.ts must lie in [lo, hi].
					d := ts - o.Ts
					if !left {
						d = o.Ts - ts
					}
					if d < lo || d > hi {
						continue
					}
					a, c, lts := row.Values, o.Row.Values, ts
					if !left {
						a, c, lts = c, a, o.Ts
					}
					ok, err := j.matches(a, c)
					if err != nil {
						return err
					}
					if !ok {
						continue
					}
					me.Matched = true
					if !o.Matched {
						if !copied {
							// The held list may be in a checkpoint.
							other, copied = append([]timedRow(nil), other...), true
						}
						other[i].Matched = true
					}
					out.CollectWithTimestamp(j.joined(changelog.Insert, a, c), lts)
				}
			}
			if e := expiry(left, ts); e > ctx.CurrentWatermark() {
				// Appending writes past the end of the held list, never
				// into it.
				mine = append(mine, me)
				setTimer(ctx, &st, e)
			} else if !me.Matched {
				// Too late to be met by rows still to come.
				if left && typ.LeftOuter() {
					out.CollectWithTimestamp(j.joined(changelog.Insert, row.Values, j.nullsR), ts)
				} else if !left && typ.RightOuter() {
					out.Collect(j.joined(changelog.Insert, j.nullsL, row.Values))
				}
			}
			if left {
				st.Left, st.Right = mine, other
			} else {
				st.Left, st.Right = other, mine
			}
			if len(st.Left) > 0 || len(st.Right) > 0 {
				ctx.SetValue(st)
			}
			return nil
		},
		OnTimer: func(ctx *clink.KeyedContext[string, intervalSides], now int64, _ clink.TimeDomain, out *clink.Collector[types.Row]) error {
			st, ok := ctx.Value()
			if !ok || !st.HasTimer || now != st.Timer {
				// Not the key's timer: one set before a lower one
				// replaced it, or before the rows it was for went. The
				// key's own timer comes no later than its rows expire.
				return nil
			}
			wm := ctx.CurrentWatermark()
			next := &intervalSides{}
			for _, x := range st.Left {
				switch {
				case expiry(true, x.Ts) > wm:
					next.Left = append(next.Left, x)
				case !x.Matched && typ.LeftOuter():
					out.CollectWithTimestamp(j.joined(changelog.Insert, x.Row.Values, j.nullsR), x.Ts)
				}
			}
			for _, x := range st.Right {
				switch {
				case expiry(false, x.Ts) > wm:
					next.Right = append(next.Right, x)
				case !x.Matched && typ.RightOuter():
					out.Collect(j.joined(changelog.Insert, j.nullsL, x.Row.Values))
				}
			}
			if len(next.Left) == 0 && len(next.Right) == 0 {
				ctx.Clear()
				return nil
			}
			// A timer at the earliest expiry of what is left.
			first := int64(math.MaxInt64)
			for _, x := range next.Left {
				first = min(first, expiry(true, x.Ts))
			}
			for _, x := range next.Right {
				first = min(first, expiry(false, x.Ts))
			}
			setTimer(ctx, next, first)
			ctx.SetValue(*next)
			return nil
		},
		// The value says when the key's timer is due: the timers are not
		// written to the state (nor checkpointed).
		EventTimerOf: func(_ string, st intervalSides) (int64, bool) { return st.Timer, st.HasTimer },
	})
}

// windowSides is one join key's and window's rows of a window join.
type windowSides struct {
	Left, Right []types.Row
}

func (b *builder) windowJoin(n *planner.WindowJoin) (clink.Stream[types.Row], error) {
	l, err := b.stream(n.Left)
	if err != nil {
		return l, err
	}
	r, err := b.stream(n.Right)
	if err != nil {
		return r, err
	}
	uid := n.UID()
	nl, nr := len(n.Left.Fields()), len(n.Right.Fields())
	ks, isLeft := tagSides(l, r, uid, n.Keys)
	j := &regularJoin{uid: uid, n: &planner.Join{JoinSpec: n.JoinSpec}, nl: nl, nr: nr,
		nullsL: nullsOf(n.Left.Fields()), nullsR: nullsOf(n.Right.Fields())}
	keys, typ := n.Keys, n.Type
	leftEnd, rightEnd := n.LeftEnd, n.RightEnd
	return clink.KeyedProcess(ks, uid, clink.KeyedProcessFunction[string, types.Row, windowSides, types.Row]{
		ProcessElement: func(ctx *clink.KeyedContext[string, windowSides], r types.Row, out *clink.Collector[types.Row]) error {
			left := isLeft(r)
			end := r.Values[rightEnd]
			if left {
				end = r.Values[leftEnd]
			}
			fire := end.EpochMillis() - 1
			if fire <= ctx.CurrentWatermark() {
				return nil // the window has been joined already: late
			}
			st, _ := ctx.Value()
			if len(st.Left) == 0 && len(st.Right) == 0 {
				// The key's window fires once: its first row sets the timer.
				ctx.RegisterEventTimeTimer(fire)
			}
			row := types.Row{Values: r.Values[:len(r.Values)-1]}
			// Appending writes past the end of the list the state holds
			// (which a checkpoint may be encoding), never into it.
			if left {
				st.Left = append(st.Left, row)
			} else {
				st.Right = append(st.Right, row)
			}
			ctx.SetValue(st)
			return nil
		},
		// The rows say when their window fires: the timers are not
		// written to the state (nor checkpointed).
		EventTimerOf: func(_ string, st windowSides) (int64, bool) {
			switch {
			case len(st.Left) > 0:
				return st.Left[0].Values[leftEnd].EpochMillis() - 1, true
			case len(st.Right) > 0:
				return st.Right[0].Values[rightEnd].EpochMillis() - 1, true
			}
			return 0, false
		},
		OnTimer: func(ctx *clink.KeyedContext[string, windowSides], ts int64, _ clink.TimeDomain, out *clink.Collector[types.Row]) error {
			st, ok := ctx.Value()
			if !ok {
				return nil
			}
			ctx.Clear()
			matchedR := make([]bool, len(st.Right))
			for _, a := range st.Left {
				found := false
				if !nullKey(keys, true, a) {
					for i, c := range st.Right {
						ok, err := j.matches(a.Values, c.Values)
						if err != nil {
							return err
						}
						if ok {
							found, matchedR[i] = true, true
							out.Collect(j.joined(changelog.Insert, a.Values, c.Values))
						}
					}
				}
				if !found && typ.LeftOuter() {
					out.Collect(j.joined(changelog.Insert, a.Values, j.nullsR))
				}
			}
			if typ.RightOuter() {
				for i, c := range st.Right {
					if !matchedR[i] {
						out.Collect(j.joined(changelog.Insert, j.nullsL, c.Values))
					}
				}
			}
			return nil
		},
	}), nil
}
