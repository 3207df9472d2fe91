package exec

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

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
		// Most keys fit the array, which stays on the stack: the string
		// is the one allocation.
		var buf [48]byte
		k := buf[:0]
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

// numbers returns the number of each of rows (in ranking order) by the
// rank type: ROW_NUMBER counts rows, RANK gives rows that tie the number
// of the first of them, DENSE_RANK counts distinct sort keys.
func numbers(typ string, keys []planner.SortKey, rows []types.Row) []int {
	ns := make([]int, len(rows))
	for i := range rows {
		switch {
		case i == 0 || typ == "ROW_NUMBER":
			ns[i] = i + 1
		case compareRows(keys, rows[i-1].Values, rows[i].Values) == 0:
			ns[i] = ns[i-1]
		case typ == "RANK":
			ns[i] = i + 1
		default:
			ns[i] = ns[i-1] + 1
		}
	}
	return ns
}

// truncate drops the rows whose number is above end (0: none): over
// insert-only input they can never come back into the range.
func truncate(typ string, keys []planner.SortKey, rows []types.Row, end int) []types.Row {
	if end <= 0 || len(rows) <= end && typ == "ROW_NUMBER" {
		return rows
	}
	ns := numbers(typ, keys, rows)
	if i := slices.IndexFunc(ns, func(n int) bool { return n > end }); i >= 0 {
		return rows[:i]
	}
	return rows
}

func buildRank(b *builder, n *planner.Rank) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	keys, outRank, typ := n.OrderBy, n.OutputRank, n.RankType
	start, end := int(n.RankStart), int(n.RankEnd)
	// Over insert-only input only the rows numbered up to RankEnd can
	// ever be in the range.
	limit := 0
	if !n.Input.Updating() {
		limit = end
	}
	if typ == "ROW_NUMBER" && limit > 0 {
		return buildAppendTopN(in, n), nil
	}
	fn := func(ctx *clink.KeyedContext[string, rankState], r types.Row, out *clink.Collector[types.Row]) error {
		st, _ := ctx.Value()
		// The state's rows may be in a checkpoint being written: change
		// a copy.
		old := st.Rows
		var rows []types.Row
		if r.Kind.IsAccumulate() {
			i := insertAt(keys, old, r.Values, false)
			if limit > 0 && i >= limit && typ == "ROW_NUMBER" {
				return nil
			}
			rows = slices.Insert(slices.Clone(old), i, types.Row{Kind: changelog.Insert, Values: r.Values})
			if limit > 0 {
				rows = truncate(typ, keys, rows, limit)
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
		if typ == "ROW_NUMBER" {
			emitRowNumberChanges(old, rows, start, end, outRank, out)
		} else {
			emitRankChanges(ranked(typ, keys, old, start, end, outRank), ranked(typ, keys, rows, start, end, outRank), out)
		}
		if len(rows) == 0 {
			ctx.Clear()
		} else {
			ctx.SetValue(rankState{Rows: rows})
		}
		return nil
	}
	return clink.Process(clink.KeyBy(in, partitionKey(n.PartitionBy)), n.UID(), fn), nil
}

// ranked returns the output rows of the rows numbered start..end (end 0:
// all), with their number when outRank.
func ranked(typ string, keys []planner.SortKey, rows []types.Row, start, end int, outRank bool) [][]types.Value {
	var vs [][]types.Value
	for i, n := range numbers(typ, keys, rows) {
		if n >= start && (end == 0 || n <= end) {
			vs = append(vs, withNumber(rows[i].Values, n, outRank))
		}
	}
	return vs
}

// emitRankChanges emits -D for each output row of was that is not in now
// and +I for each of now that is not in was (as multisets).
func emitRankChanges(was, now [][]types.Value, out *clink.Collector[types.Row]) {
	matched := make([]bool, len(now))
	for _, o := range was {
		j := slices.IndexFunc(now, func(x []types.Value) bool { return sameValues(x, o) })
		for j >= 0 && matched[j] {
			k := slices.IndexFunc(now[j+1:], func(x []types.Value) bool { return sameValues(x, o) })
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
		out.Collect(types.Row{Kind: changelog.Delete, Values: o})
	}
	for j, x := range now {
		if !matched[j] {
			out.Collect(types.Row{Kind: changelog.Insert, Values: x})
		}
	}
}

// emitRowNumberChanges emits what changed in row numbers start..end (end
// 0: all) from old to rows. With the row number in the output each
// number whose row changed gets -U/+U (+I when it is new, -D when it is
// gone); without it, rows that left the range get -D and rows that
// entered +I.
func emitRowNumberChanges(old, rows []types.Row, start, end int, outRank bool, out *clink.Collector[types.Row]) {
	if !outRank {
		emitRankChanges(ranked("ROW_NUMBER", nil, old, start, end, false), ranked("ROW_NUMBER", nil, rows, start, end, false), out)
		return
	}
	hi := max(len(old), len(rows))
	if end > 0 {
		hi = min(hi, end)
	}
	for i := start - 1; i < hi; i++ {
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

// dedupScratch is what a deduplication reuses from one row to the next:
// room for the kept row's columns up to the order column (of which it
// decodes the order column alone), and an encoding.
type dedupScratch struct {
	probe []types.Value
	enc   []byte
}

func buildDeduplicate(b *builder, n *planner.Deduplicate) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	col, keepLast, uid := n.OrderCol, n.KeepLast, n.UID()
	order := []planner.SortKey{{Col: col, NullsFirst: true}}
	orderCols := []int{col}
	// scratch holds *dedupScratch: the function runs in every subtask.
	var scratch sync.Pool
	fn := func(ctx *clink.KeyedContext[string, dedupRow], r types.Row, out *clink.Collector[types.Row]) error {
		if !r.Kind.IsAccumulate() {
			return fmt.Errorf("operator %s: deduplication of insert-only input got %s", uid, r)
		}
		sc, _ := scratch.Get().(*dedupScratch)
		if sc == nil {
			sc = &dedupScratch{probe: make([]types.Value, col+1)}
		}
		defer scratch.Put(sc)
		probe := sc.probe
		kept, had := ctx.Value()
		if !had {
			sc.enc = appendStoredRow(sc.enc[:0], r.Values)
			ctx.SetValue(append(dedupRow(nil), sc.enc...))
			out.Collect(types.Row{Kind: changelog.Insert, Values: r.Values})
			return nil
		}
		if err := decodeStoredColumns(probe, orderCols, kept); err != nil {
			return fmt.Errorf("operator %s: %w", uid, err)
		}
		c := compareRows(order, r.Values, probe)
		if keepLast && c < 0 || !keepLast && c >= 0 {
			return nil
		}
		cols, err := storedRowColumns(kept)
		if err != nil {
			return fmt.Errorf("operator %s: %w", uid, err)
		}
		was := make([]types.Value, cols)
		if err := decodeStoredRow(was, kept); err != nil {
			return fmt.Errorf("operator %s: %w", uid, err)
		}
		sc.enc = appendStoredRow(sc.enc[:0], r.Values)
		ctx.SetValue(append(dedupRow(nil), sc.enc...))
		out.Collect(types.Row{Kind: changelog.UpdateBefore, Values: was})
		out.Collect(types.Row{Kind: changelog.UpdateAfter, Values: r.Values})
		return nil
	}
	f := clink.KeyedProcessFunction[string, types.Row, dedupRow, types.Row]{ProcessElement: fn, ValueCodec: dedupCodec{}}
	return clink.KeyedProcess(clink.KeyBy(in, partitionKey(n.Keys)), uid, f), nil
}

func buildWindowRank(b *builder, n *planner.WindowRank) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	keys, outRank, endCol, typ := n.OrderBy, n.OutputRank, n.WindowEnd, n.RankType
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
			if end > 0 && i >= end && typ == "ROW_NUMBER" {
				return nil
			}
			rows := slices.Insert(slices.Clone(st.Rows), i, types.Row{Kind: changelog.Insert, Values: r.Values})
			ctx.SetValue(rankState{Rows: truncate(typ, keys, rows, end)})
			return nil
		},
		OnTimer: func(ctx *clink.KeyedContext[string, rankState], ts int64, _ clink.TimeDomain, out *clink.Collector[types.Row]) error {
			st, _ := ctx.Value()
			for _, v := range ranked(typ, keys, st.Rows, start, end, outRank) {
				out.Collect(types.Row{Kind: changelog.Insert, Values: v})
			}
			ctx.Clear()
			return nil
		},
	}
	return clink.KeyedProcess(clink.KeyBy(in, partitionKey(n.PartitionBy)), n.UID(), f), nil
}

// appendTopN is a ROW_NUMBER Top-N over insert-only input (Flink's
// AppendOnlyTopNFunction): a partition keeps only its first RankEnd rows,
// as topRows, since a row pushed out of those never comes back.
type appendTopN struct {
	uid        string
	keys       []planner.SortKey
	start, end int
	outRank    bool
	// sortCols are the sort keys' columns, ascending: those a comparison
	// decodes.
	sortCols []int
	// scratch holds *topScratch: the function runs in every subtask.
	scratch sync.Pool
}

// topScratch is what an appendTopN reuses from one row to the next.
type topScratch struct {
	offs  []int
	probe []types.Value
	enc   []byte
	// out holds the changes of one row's insertion.
	out []types.Row
}

func buildAppendTopN(in clink.Stream[types.Row], n *planner.Rank) clink.Stream[types.Row] {
	t := &appendTopN{uid: n.UID(), keys: n.OrderBy, start: int(n.RankStart), end: int(n.RankEnd), outRank: n.OutputRank}
	t.sortCols = sortColumns(t.keys)
	f := clink.KeyedProcessFunction[string, types.Row, topRows, types.Row]{
		ProcessElement: t.process,
		ValueCodec:     topCodec{},
	}
	return clink.KeyedProcess(clink.KeyBy(in, partitionKey(n.PartitionBy)), t.uid, f)
}

// decode decodes row i of old (whose records are at sc.offs) into a new
// slice.
func (sc *topScratch) decode(old topRows, i int) ([]types.Value, error) {
	b := old.row(sc.offs[i], sc.offs[i+1])
	n, err := storedRowColumns(b)
	if err != nil {
		return nil, err
	}
	vs := make([]types.Value, n)
	if err := decodeStoredRow(vs, b); err != nil {
		return nil, err
	}
	return vs, nil
}

// decodeNumbered decodes row i of old into a new slice and appends its
// number, i+1.
func (sc *topScratch) decodeNumbered(old topRows, i int) ([]types.Value, error) {
	b := old.row(sc.offs[i], sc.offs[i+1])
	n, err := storedRowColumns(b)
	if err != nil {
		return nil, err
	}
	vs := make([]types.Value, n+1)
	if err := decodeStoredRow(vs[:n], b); err != nil {
		return nil, err
	}
	vs[n] = types.Int64(int64(i + 1))
	return vs, nil
}

// compareAt compares row i of old with v by keys, whose columns are cols
// (sortColumns).
func (sc *topScratch) compareAt(keys []planner.SortKey, cols []int, old topRows, i int, v []types.Value) (int, error) {
	if err := decodeStoredColumns(sc.probe, cols, old.row(sc.offs[i], sc.offs[i+1])); err != nil {
		return 0, err
	}
	return compareRows(keys, sc.probe, v), nil
}

// sortColumns returns the columns of keys, ascending, each once.
func sortColumns(keys []planner.SortKey) []int {
	cols := make([]int, 0, len(keys))
	for _, k := range keys {
		cols = append(cols, k.Col)
	}
	slices.Sort(cols)
	return slices.Compact(cols)
}

func (t *appendTopN) process(ctx *clink.KeyedContext[string, topRows], r types.Row, out *clink.Collector[types.Row]) error {
	if !r.Kind.IsAccumulate() {
		return fmt.Errorf("operator %s: Top-N of insert-only input got %s", t.uid, r)
	}
	sc, _ := t.scratch.Get().(*topScratch)
	if sc == nil {
		sc = t.newScratch()
	}
	defer t.scratch.Put(sc)
	old, _ := ctx.Value()
	rows, err := t.insert(sc, old, r.Values)
	if err != nil {
		return fmt.Errorf("operator %s: %w", t.uid, err)
	}
	if rows != nil {
		ctx.SetValue(rows)
	}
	for i, o := range sc.out {
		out.Collect(o)
		sc.out[i] = types.Row{}
	}
	sc.out = sc.out[:0]
	return nil
}

func (t *appendTopN) newScratch() *topScratch {
	// Room for every column up to the last sort column.
	n := 0
	if len(t.sortCols) > 0 {
		n = t.sortCols[len(t.sortCols)-1] + 1
	}
	return &topScratch{probe: make([]types.Value, n)}
}

// insert returns old's rows with v among them (nil: v is not among the
// first RankEnd, nothing changes) and appends the changes of the output
// to sc.out. It does not change old: a checkpoint may be writing it.
func (t *appendTopN) insert(sc *topScratch, old topRows, v []types.Value) (topRows, error) {
	n := 0
	if len(old) > 0 {
		if _, err := old.records(&sc.offs, false); err != nil {
			return nil, err
		}
		n = len(sc.offs) - 1
	}
	// Where v goes: after the rows it ties with (an earlier row keeps the
	// lower number). A full partition's last row decides most rows.
	if n >= t.end {
		c, err := sc.compareAt(t.keys, t.sortCols, old, t.end-1, v)
		if err != nil {
			return nil, err
		}
		if c <= 0 {
			return nil, nil
		}
	}
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c, err := sc.compareAt(t.keys, t.sortCols, old, m, v)
		if err != nil {
			return nil, err
		}
		if c <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo
	now := min(n+1, t.end)
	// The new rows: those before i, v, then those from i that still fit.
	sc.enc = appendStoredRow(sc.enc[:0], v)
	size := uvarintLen(uint64(now)+1) + uvarintLen(uint64(len(sc.enc))) + len(sc.enc)
	if n > 0 {
		// The old rows kept are the first now-1.
		size += sc.offs[now-1] - sc.offs[0]
	}
	rows := make(topRows, 0, size)
	rows = binary.AppendUvarint(rows, uint64(now)+1)
	if n > 0 {
		rows = append(rows, old[sc.offs[0]:sc.offs[i]]...)
	}
	rows = binary.AppendUvarint(rows, uint64(len(sc.enc)))
	rows = append(rows, sc.enc...)
	if i < now-1 {
		rows = append(rows, old[sc.offs[i]:sc.offs[now-1]]...)
	}
	if err := t.emit(sc, old, n, i, v); err != nil {
		return nil, err
	}
	return rows, nil
}

// emit appends to sc.out what changed in row numbers start..end when v went in at i
// of the n rows of old (rows numbered above end drop out), as
// emitRowNumberChanges does for the rows before and after.
func (t *appendTopN) emit(sc *topScratch, old topRows, n, i int, v []types.Value) error {
	now := min(n+1, t.end)
	if !t.outRank {
		// The rows in the range change by at most one leaving (the one
		// pushed out of the last number) and one entering (v, or the row
		// that moved up into the first number).
		var leaving, entering []types.Value
		var err error
		if n >= t.end {
			if leaving, err = sc.decode(old, t.end-1); err != nil {
				return err
			}
		}
		switch {
		case now < t.start:
		case i >= t.start-1:
			entering = v
		default:
			if entering, err = sc.decode(old, t.start-2); err != nil {
				return err
			}
		}
		if leaving != nil && entering != nil && sameValues(leaving, entering) {
			return nil
		}
		if leaving != nil {
			sc.out = append(sc.out, types.Row{Kind: changelog.Delete, Values: leaving})
		}
		if entering != nil {
			sc.out = append(sc.out, types.Row{Kind: changelog.Insert, Values: entering})
		}
		return nil
	}
	// Each number from i on now has the row that had the number before
	// it (v at i): -U/+U where that changed the row, +I for a new number.
	var prev []types.Value // the old row at j-1 with its number, decoded
	for j := max(i, t.start-1); j < now; j++ {
		var next []types.Value
		switch {
		case j == i:
			next = v
		case prev != nil:
			next = prev[:len(prev)-1]
		default:
			var err error
			if next, err = sc.decode(old, j-1); err != nil {
				return err
			}
		}
		if j >= n {
			sc.out = append(sc.out, types.Row{Kind: changelog.Insert, Values: withNumber(next, j+1, true)})
			continue
		}
		was, err := sc.decodeNumbered(old, j)
		if err != nil {
			return err
		}
		prev = was
		if !sameValues(was[:len(was)-1], next) {
			sc.out = append(sc.out, types.Row{Kind: changelog.UpdateBefore, Values: was})
			sc.out = append(sc.out, types.Row{Kind: changelog.UpdateAfter, Values: withNumber(next, j+1, true)})
		}
	}
	return nil
}
