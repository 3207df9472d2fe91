package exec

import (
	"fmt"
	"slices"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

func init() {
	registerNode(buildRank)
	registerNode(buildDeduplicate)
	registerNode(buildWindowRank)
}

// rankState is one partition's rows in ranking order (all of them over
// updating input; the first RankEnd over insert-only input, since a row
// pushed out of those never comes back).
type rankState struct {
	Rows []types.Row
}

// compareRows orders two rows by keys; NULL sorts as each key says.
func compareRows(keys []planner.SortKey, a, b []types.Value) int {
	for _, k := range keys {
		x, y := a[k.Col], b[k.Col]
		var c int
		switch {
		case x.IsNull() && y.IsNull():
		case x.IsNull(), y.IsNull():
			c = 1
			if x.IsNull() == k.NullsFirst {
				c = -1
			}
		default:
			c = types.Compare(x, y)
			if k.Desc {
				c = -c
			}
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// insertAt is where a new row goes among rows: after the rows it ties
// with (an earlier row keeps the lower number), or before them when
// tiesFirst.
func insertAt(keys []planner.SortKey, rows []types.Row, v []types.Value, tiesFirst bool) int {
	i, _ := slices.BinarySearchFunc(rows, v, func(r types.Row, v []types.Value) int {
		c := compareRows(keys, r.Values, v)
		if c == 0 {
			if tiesFirst {
				return 1
			}
			return -1
		}
		return c
	})
	return i
}

func partitionKey(cols []int) func(types.Row) string {
	return func(r types.Row) string {
		var k []byte
		for _, i := range cols {
			k = types.AppendKey(k, r.Values[i])
		}
		return string(k)
	}
}

// withNumber is a row's values with its row number appended, when out.
func withNumber(v []types.Value, rn int, out bool) []types.Value {
	if !out {
		return v
	}
	return append(slices.Clip(v), types.Int64(int64(rn)))
}

func buildRank(b *builder, n *planner.Rank) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	keys, outRank := n.OrderBy, n.OutputRank
	start, end := int(n.RankStart), int(n.RankEnd)
	// Over insert-only input only the first RankEnd rows can ever be
	// in the range.
	limit := 0
	if !n.Input.Updating() {
		limit = end
	}
	fn := func(ctx *clink.KeyedContext[string, rankState], r types.Row, out *clink.Collector[types.Row]) error {
		st, _ := ctx.Value()
		// The state's rows may be in a checkpoint being written: change
		// a copy.
		old := st.Rows
		var rows []types.Row
		if r.Kind.IsAccumulate() {
			i := insertAt(keys, old, r.Values, false)
			if limit > 0 && i >= limit {
				return nil
			}
			rows = slices.Insert(slices.Clone(old), i, types.Row{Kind: changelog.Insert, Values: r.Values})
			if limit > 0 && len(rows) > limit {
				rows = rows[:limit]
			}
		} else {
			i := slices.IndexFunc(old, func(o types.Row) bool { return sameValues(o.Values, r.Values) })
			if i < 0 {
				// A retraction of a row this operator does not hold: as
				// Flink without state TTL, nothing to retract.
				return nil
			}
			rows = slices.Delete(slices.Clone(old), i, i+1)
		}
		emitRankChanges(old, rows, start, end, outRank, out)
		if len(rows) == 0 {
			ctx.Clear()
		} else {
			ctx.SetValue(rankState{Rows: rows})
		}
		return nil
	}
	return clink.Process(clink.KeyBy(in, partitionKey(n.PartitionBy)), n.UID(), fn), nil
}

// emitRankChanges emits what changed in row numbers start..end (end 0:
// all) from old to rows. With the row number in the output each number
// whose row changed gets -U/+U (+I when it is new, -D when it is gone);
// without it, rows that left the range get -D and rows that entered +I.
func emitRankChanges(old, rows []types.Row, start, end int, outRank bool, out *clink.Collector[types.Row]) {
	hi := max(len(old), len(rows))
	if end > 0 {
		hi = min(hi, end)
	}
	lo := start - 1
	if !outRank {
		window := func(rs []types.Row) []types.Row {
			if lo >= len(rs) {
				return nil
			}
			return rs[lo:min(hi, len(rs))]
		}
		was, now := window(old), window(rows)
		matched := make([]bool, len(now))
		for _, o := range was {
			j := slices.IndexFunc(now, func(x types.Row) bool { return sameValues(x.Values, o.Values) })
			for j >= 0 && matched[j] {
				k := slices.IndexFunc(now[j+1:], func(x types.Row) bool { return sameValues(x.Values, o.Values) })
				if k < 0 {
					j = -1
				} else {
					j += 1 + k
				}
			}
			if j >= 0 {
				matched[j] = true
				continue
			}
			out.Collect(types.Row{Kind: changelog.Delete, Values: o.Values})
		}
		for j, x := range now {
			if !matched[j] {
				out.Collect(types.Row{Kind: changelog.Insert, Values: x.Values})
			}
		}
		return
	}
	for i := lo; i < hi; i++ {
		o, n := i < len(old), i < len(rows)
		switch {
		case o && n:
			if !sameValues(old[i].Values, rows[i].Values) {
				out.Collect(types.Row{Kind: changelog.UpdateBefore, Values: withNumber(old[i].Values, i+1, true)})
				out.Collect(types.Row{Kind: changelog.UpdateAfter, Values: withNumber(rows[i].Values, i+1, true)})
			}
		case n:
			out.Collect(types.Row{Kind: changelog.Insert, Values: withNumber(rows[i].Values, i+1, true)})
		case o:
			out.Collect(types.Row{Kind: changelog.Delete, Values: withNumber(old[i].Values, i+1, true)})
		}
	}
}

func buildDeduplicate(b *builder, n *planner.Deduplicate) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	col, keepLast, uid := n.OrderCol, n.KeepLast, n.UID()
	order := []planner.SortKey{{Col: col, NullsFirst: true}}
	fn := func(ctx *clink.KeyedContext[string, types.Row], r types.Row, out *clink.Collector[types.Row]) error {
		if !r.Kind.IsAccumulate() {
			return fmt.Errorf("operator %s: deduplication of insert-only input got %s", uid, r)
		}
		kept, had := ctx.Value()
		row := types.Row{Kind: changelog.Insert, Values: r.Values}
		if !had {
			ctx.SetValue(row)
			out.Collect(row)
			return nil
		}
		c := compareRows(order, r.Values, kept.Values)
		if keepLast && c < 0 || !keepLast && c >= 0 {
			return nil
		}
		ctx.SetValue(row)
		out.Collect(types.Row{Kind: changelog.UpdateBefore, Values: kept.Values})
		out.Collect(types.Row{Kind: changelog.UpdateAfter, Values: r.Values})
		return nil
	}
	return clink.Process(clink.KeyBy(in, partitionKey(n.Keys)), uid, fn), nil
}

func buildWindowRank(b *builder, n *planner.WindowRank) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	keys, outRank, endCol := n.OrderBy, n.OutputRank, n.WindowEnd
	start, end := int(n.RankStart), int(n.RankEnd)
	// The last row of equal ones wins a window deduplication that keeps
	// the last row.
	tiesFirst := n.Dedup && keys[0].Desc
	f := clink.KeyedProcessFunction[string, types.Row, rankState, types.Row]{
		ProcessElement: func(ctx *clink.KeyedContext[string, rankState], r types.Row, out *clink.Collector[types.Row]) error {
			we := r.Values[endCol]
			if we.IsNull() || !r.Kind.IsAccumulate() {
				return nil
			}
			fire := we.EpochMillis() - 1
			if fire <= ctx.CurrentWatermark() {
				// The window was emitted: a late row is dropped, as in
				// Flink's window Top-N.
				return nil
			}
			st, had := ctx.Value()
			if !had {
				ctx.RegisterEventTimeTimer(fire)
			}
			i := insertAt(keys, st.Rows, r.Values, tiesFirst)
			if end > 0 && i >= end {
				return nil
			}
			rows := slices.Insert(slices.Clone(st.Rows), i, types.Row{Kind: changelog.Insert, Values: r.Values})
			if end > 0 && len(rows) > end {
				rows = rows[:end]
			}
			ctx.SetValue(rankState{Rows: rows})
			return nil
		},
		OnTimer: func(ctx *clink.KeyedContext[string, rankState], ts int64, _ clink.TimeDomain, out *clink.Collector[types.Row]) error {
			st, _ := ctx.Value()
			for i := start - 1; i < len(st.Rows); i++ {
				out.Collect(types.Row{Kind: changelog.Insert, Values: withNumber(st.Rows[i].Values, i+1, outRank)})
			}
			ctx.Clear()
			return nil
		},
	}
	return clink.KeyedProcess(clink.KeyBy(in, partitionKey(n.PartitionBy)), n.UID(), f), nil
}
