package planner

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/types"
)

// SortKey is one ORDER BY key of a ranking: an input column, its
// direction and where NULLs go.
type SortKey struct {
	Col        int
	Desc       bool
	NullsFirst bool
}

// Rank numbers the rows of each partition by ROW_NUMBER(), RANK() or
// DENSE_RANK() in the order of OrderBy and keeps those whose number lies
// in RankStart..RankEnd (Flink's Rank: Top-N). It keeps the partition's rows in keyed state
// (only the first RankEnd of an insert-only input, every row of an
// updating one) and its output is updating: +I when a row enters the
// range, -U/+U when the row at a number changes, -D when a row leaves
// (RANK and DENSE_RANK, where several rows share a number: -D of the
// row with its old number, +I with the new one). Without OutputRank the row number is not a column and only rows that
// enter (+I) or leave (-D) the range are emitted.
type Rank struct {
	base
	Input Node
	// RankType is ROW_NUMBER, RANK or DENSE_RANK.
	RankType    string
	PartitionBy []int
	OrderBy     []SortKey
	// RankStart and RankEnd bound the row numbers kept; RankEnd 0 keeps
	// every row (an unbounded ranking).
	RankStart, RankEnd int64
	// OutputRank appends the row number (BIGINT) to the input's columns.
	OutputRank bool
	over       *overInfo
}

// Deduplicate keeps one row per key of an insert-only input: the first
// (KeepLast false) or the last (true) by the rowtime column OrderCol
// (Flink's Deduplicate, a Top-1 ordered by a time attribute). Its output
// is updating: +I for a key's first row, -U/+U when a row with an
// earlier (first) or a later or equal (last) rowtime replaces it.
type Deduplicate struct {
	base
	Input    Node
	Keys     []int
	KeepLast bool
	OrderCol int
	over     *overInfo
}

// WindowRank is a Top-N per window: the input is insert-only with the
// window_start and window_end columns of a window TVF or window
// aggregation in PartitionBy. It buffers the first RankEnd rows (in the
// order of OrderBy) per partition in keyed state and emits them (+I, with
// their row number when OutputRank) once the watermark passes the
// window's end; then it drops the window's state. Rows of a window the
// watermark already passed are dropped. With Dedup it prints as Flink's
// WindowDeduplicate (a Top-1 ordered by a time attribute).
type WindowRank struct {
	base
	Input  Node
	Window WindowSpec
	// RankType is ROW_NUMBER, RANK or DENSE_RANK.
	RankType string
	// PartitionBy holds every partition column, window ones included.
	PartitionBy            []int
	WindowStart, WindowEnd int
	OrderBy                []SortKey
	RankStart, RankEnd     int64
	OutputRank             bool
	Dedup                  bool
	over                   *overInfo
}

func (n *Rank) Inputs() []Node        { return []Node{n.Input} }
func (n *Deduplicate) Inputs() []Node { return []Node{n.Input} }
func (n *WindowRank) Inputs() []Node  { return []Node{n.Input} }

func (n *Rank) Updating() bool        { return true }
func (n *Deduplicate) Updating() bool { return true }
func (n *WindowRank) Updating() bool  { return false }

func (n *Rank) exchange(int) ([]int, bool)        { return n.PartitionBy, true }
func (n *Deduplicate) exchange(int) ([]int, bool) { return n.Keys, true }
func (n *WindowRank) exchange(int) ([]int, bool)  { return n.PartitionBy, true }

func (n *Rank) name() string        { return "Rank" }
func (n *Deduplicate) name() string { return "Deduplicate" }
func (n *WindowRank) name() string {
	if n.Dedup {
		return "WindowDeduplicate"
	}
	return "WindowRank"
}

// Strategy is Flink's name of the ranking's algorithm: AppendFastStrategy
// over insert-only input, RetractStrategy over updating input.
func (n *Rank) Strategy() string {
	if n.Input.Updating() {
		return "RetractStrategy"
	}
	return "AppendFastStrategy"
}

func columnNames(fs []types.Field, cols []int) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = fs[c].Name
	}
	return strings.Join(names, ", ")
}

func orderText(fs []types.Field, keys []SortKey) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fs[k.Col].Name
		if k.Desc {
			parts[i] += " DESC"
			if k.NullsFirst {
				parts[i] += " NULLS FIRST"
			}
		} else {
			parts[i] += " ASC"
			if !k.NullsFirst {
				parts[i] += " NULLS LAST"
			}
		}
	}
	return strings.Join(parts, ", ")
}

func rankRangeText(start, end int64) string {
	if end == 0 {
		return fmt.Sprintf("rankStart=%d, rankEnd=unbounded", start)
	}
	return fmt.Sprintf("rankStart=%d, rankEnd=%d", start, end)
}

func (n *Rank) args() string {
	in := n.Input.Fields()
	return fmt.Sprintf("strategy=[%s], rankType=[%s], rankRange=[%s], partitionBy=[%s], orderBy=[%s], select=[%s]",
		n.Strategy(), n.RankType, rankRangeText(n.RankStart, n.RankEnd), columnNames(in, n.PartitionBy), orderText(in, n.OrderBy), fieldNames(n.fields))
}

func (n *Deduplicate) args() string {
	keep := "FirstRow"
	if n.KeepLast {
		keep = "LastRow"
	}
	return fmt.Sprintf("keep=[%s], key=[%s], order=[ROWTIME]", keep, columnNames(n.Input.Fields(), n.Keys))
}

// keys are the partition columns but the window's.
func (n *WindowRank) keys() []int {
	var ks []int
	for _, c := range n.PartitionBy {
		if c != n.WindowStart && c != n.WindowEnd {
			ks = append(ks, c)
		}
	}
	return ks
}

func (n *WindowRank) args() string {
	in := n.Input.Fields()
	if n.Dedup {
		keep := "FirstRow"
		if n.OrderBy[0].Desc {
			keep = "LastRow"
		}
		return fmt.Sprintf("window=[%s], keep=[%s], partitionKeys=[%s], orderKey=[%s], order=[ROWTIME]",
			n.Window, keep, columnNames(in, n.keys()), in[n.OrderBy[0].Col].Name)
	}
	return fmt.Sprintf("window=[%s], rankType=[%s], rankRange=[%s], partitionBy=[%s], orderBy=[%s], select=[%s]",
		n.Window, n.RankType, rankRangeText(n.RankStart, n.RankEnd), columnNames(in, n.keys()), orderText(in, n.OrderBy), fieldNames(n.fields))
}

// overInfo is what binding a SELECT with ROW_NUMBER() OVER learned, kept
// on the nodes it planned so that a rank filter in the SELECT above can
// plan it again as a Top-N.
type overInfo struct {
	call *ast.Call
	// rankType is ROW_NUMBER, RANK or DENSE_RANK.
	rankType string
	// in is the ranking's input: the FROM item after the SELECT's WHERE,
	// its columns laid out as scope says.
	in    Node
	scope expr.Tables
	exprs []ast.Expr
	names []string
	// rnItem is the select item that is the bare ROW_NUMBER() call, or -1.
	rnItem    int
	partition []int
	order     []SortKey
	// win is set for a ranking partitioned by a window's bounds.
	win *windowBounds
	// post is the node the latest planning returned.
	post Node
}

// windowBounds locates the window of a window Top-N.
type windowBounds struct {
	spec       WindowSpec
	start, end int
	// origin is the window TVF or window aggregation the bounds come from.
	origin Node
}

// rankScope resolves the select list over a ranking's output: `$rn` is
// the row number, anything else a column of the input's scope.
type rankScope struct {
	rn    int
	input expr.Scope
}

func (s *rankScope) Resolve(ref *ast.ColumnRef) (expr.Column, error) {
	if len(ref.Parts) == 1 && ref.Parts[0] == "$rn" && s.rn >= 0 {
		return expr.Column{Index: s.rn, Type: rowNumberType}, nil
	}
	return s.input.Resolve(ref)
}

var rowNumberType = types.BigIntType.WithNotNull(true)

// bindOver binds a select list with a window function call (f(...) OVER
// (...)) over rel. Aggregates OVER go to bindOverAggregate; ROW_NUMBER(), RANK() and DENSE_RANK() are supported;
// without a rank filter in the SELECT above (see bindRankFilter) they are
// planned as an unbounded Rank that numbers every row.
func (p *Planner) bindOver(rel relation, s *ast.Select, items []*ast.SelectItem, exprs []ast.Expr, names []string) (Node, error) {
	if calls := overAggCalls(exprs); calls != nil {
		return p.bindOverAggregate(rel, s, calls, exprs, names)
	}
	var call *ast.Call
	for _, e := range exprs {
		var err error
		walk(e, func(x ast.Expr) bool {
			c, ok := x.(*ast.Call)
			if !ok || c.Over == nil {
				return true
			}
			if call != nil {
				err = errorf(c.Pos, "only one window function per SELECT is supported; rank in a subquery first")
				return false
			}
			call = c
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	if err := checkRankCall(call); err != nil {
		return nil, err
	}
	fname := strings.ToUpper(call.Name.Last())
	if s.Distinct {
		return nil, errorf(s.Pos, "SELECT DISTINCT with a window function is not supported; rank in a subquery first")
	}
	if len(s.GroupBy) > 0 || s.Having != nil || slices.ContainsFunc(exprs, hasAggregate) {
		return nil, errorf(call.Pos, "%s() OVER in a grouped SELECT is not supported; aggregate in a subquery and rank its rows", fname)
	}
	scope := rel.scope()
	info := &overInfo{call: call, rankType: fname, in: rel.node, scope: scope, exprs: exprs, names: names, rnItem: -1}
	for i, e := range exprs {
		if e == ast.Expr(call) {
			info.rnItem = i
		}
	}
	if s.Where != nil {
		if c, ok := findOver(s.Where); ok {
			return nil, errorf(c.Pos, "window functions are not allowed in WHERE; filter on the row number in the SELECT around this one")
		}
		n, err := p.passFilter(rel.node, scope, s.Where)
		if err != nil {
			return nil, err
		}
		info.in = n
	}
	for _, e := range call.Over.PartitionBy {
		c, err := overColumn(e, scope, "PARTITION BY", fname)
		if err != nil {
			return nil, err
		}
		info.partition = append(info.partition, c)
	}
	for _, o := range call.Over.OrderBy {
		c, err := overColumn(o.Expr, scope, "ORDER BY", fname)
		if err != nil {
			return nil, err
		}
		// Flink orders NULL lowest: first ascending, last descending.
		nullsFirst := !o.Desc
		switch o.Nulls {
		case ast.NullsFirst:
			nullsFirst = true
		case ast.NullsLast:
			nullsFirst = false
		}
		info.order = append(info.order, SortKey{Col: c, Desc: o.Desc, NullsFirst: nullsFirst})
	}
	if !info.in.Updating() {
		info.win = windowOf(info.in, info.partition)
	}
	return p.planOver(info, 1, 0, true)
}

// checkRankCall refuses every window function but ROW_NUMBER(), RANK()
// and DENSE_RANK() OVER (PARTITION BY ... ORDER BY ...).
func checkRankCall(c *ast.Call) error {
	name := strings.ToUpper(c.Name.Last())
	switch {
	case name != "ROW_NUMBER" && name != "RANK" && name != "DENSE_RANK" || len(c.Name.Parts) != 1:
		return errorf(c.Pos, "OVER windows are not supported yet: %s(...) OVER; only ROW_NUMBER(), RANK() and DENSE_RANK() OVER (PARTITION BY ... ORDER BY ...) with a filter on the number (Top-N)", c.Name.Last())
	case len(c.Args) > 0:
		return errorf(c.Pos, "%s takes no arguments", name)
	case c.Distinct || c.Filter != nil:
		return errorf(c.Pos, "%s takes neither DISTINCT nor FILTER", name)
	case c.Over.Ref != "":
		return errorf(c.Over.Pos, "named windows (OVER %s) are not supported yet", c.Over.Ref)
	case c.Over.Frame != nil:
		return errorf(c.Over.Pos, "%s does not take a window frame (ROWS or RANGE)", name)
	case len(c.Over.OrderBy) == 0:
		return errorf(c.Over.Pos, "%s() OVER needs an ORDER BY", name)
	}
	return nil
}

// overColumn resolves a PARTITION BY or ORDER BY item, which must be a
// column.
func overColumn(e ast.Expr, scope expr.Scope, clause, fname string) (int, error) {
	r, ok := e.(*ast.ColumnRef)
	if !ok {
		return 0, errorf(e.Position(), "%s of %s takes columns, not expressions such as %s; compute it in a subquery", clause, fname, e)
	}
	c, err := scope.Resolve(r)
	if err != nil {
		return 0, err
	}
	return c.Index, nil
}

// passFilter plans a Calc that filters n's rows by where and keeps every
// column where it is, so that scope still describes its rows.
func (p *Planner) passFilter(n Node, scope expr.Tables, where ast.Expr) (Node, error) {
	fs := n.Fields()
	exprs := make([]ast.Expr, len(fs))
	names := make([]string, len(fs))
	for i, f := range fs {
		exprs[i] = &ast.ColumnRef{Pos: where.Position(), Parts: []string{"$" + strconv.Itoa(i)}}
		names[i] = f.Name
	}
	c := &Calc{Input: n}
	c.rowtime = n.Rowtime()
	f, err := p.compiler.Compile(where, scope)
	if err != nil {
		return nil, err
	}
	if f.Type.Kind != types.KindBoolean && f.Type.Kind != types.KindNull {
		return nil, errorf(where.Position(), "the WHERE condition must be BOOLEAN, not %s", f.Type)
	}
	c.Filter, c.FilterText = f, where.String()
	ids := make([]types.Field, len(fs))
	for i, f := range fs {
		ids[i] = types.Field{Name: "$" + strconv.Itoa(i), Type: f.Type}
	}
	for i, e := range exprs {
		ce, err := p.compiler.Compile(e, expr.NewTable("", ids...))
		if err != nil {
			return nil, err
		}
		c.Projs = append(c.Projs, ce)
		c.ProjText = append(c.ProjText, names[i])
		c.fields = append(c.fields, fs[i])
	}
	assignUID(c, "")
	return c, nil
}

// planOver plans the ranking of info keeping row numbers start..end (end
// 0: all), with the row number as a column or not, and the select list
// over it.
func (p *Planner) planOver(info *overInfo, start, end int64, outRank bool) (Node, error) {
	in := info.in
	fields := slices.Clone(in.Fields())
	rnName := "w0$o0"
	if info.rnItem >= 0 {
		rnName = info.names[info.rnItem]
	}
	if outRank {
		fields = append(fields, types.Field{Name: rnName, Type: rowNumberType})
	}
	top1 := info.rankType == "ROW_NUMBER" && start == 1 && end == 1 && !outRank && len(info.order) == 1
	var rank Node
	switch {
	case info.win != nil:
		w := &WindowRank{Input: in, Window: info.win.spec, RankType: info.rankType, PartitionBy: info.partition, WindowStart: info.win.start, WindowEnd: info.win.end,
			OrderBy: info.order, RankStart: start, RankEnd: end, OutputRank: outRank, over: info}
		w.Dedup = top1 && isTimeAttribute(in, info.order[0].Col)
		w.fields, w.rowtime = fields, in.Rowtime()
		rank = w
	case top1 && !in.Updating() && info.order[0].Col == in.Rowtime():
		d := &Deduplicate{Input: in, Keys: info.partition, KeepLast: info.order[0].Desc, OrderCol: info.order[0].Col, over: info}
		d.fields, d.rowtime = fields, -1
		rank = d
	default:
		r := &Rank{Input: in, RankType: info.rankType, PartitionBy: info.partition, OrderBy: info.order, RankStart: start, RankEnd: end, OutputRank: outRank, over: info}
		r.fields, r.rowtime = fields, -1
		rank = r
	}
	assignUID(rank, "")
	// The select list over the ranking: the call becomes column $rn, and
	// without the row number its item is left out.
	rn := -1
	if outRank {
		rn = len(fields) - 1
	}
	var post []ast.Expr
	var postNames []string
	for i, e := range info.exprs {
		if i == info.rnItem && !outRank {
			continue
		}
		r, err := rewrite(e, func(x ast.Expr) (ast.Expr, bool, error) {
			if x == ast.Expr(info.call) {
				if !outRank {
					return nil, false, errorf(info.call.Pos, "the row number is used but not computed")
				}
				return &ast.ColumnRef{Pos: info.call.Pos, Parts: []string{"$rn"}}, true, nil
			}
			return nil, false, nil
		})
		if err != nil {
			return nil, err
		}
		post = append(post, r)
		postNames = append(postNames, info.names[i])
	}
	scope := &rankScope{rn: rn, input: info.scope}
	var top Node = rank
	if !isIdentity(post, postNames, fields, scope) {
		n, err := p.calc(rank, scope, nil, post, postNames)
		if err != nil {
			return nil, err
		}
		// Show the row number by its name in EXPLAIN.
		c := n.(*Calc)
		for i := range c.ProjText {
			c.ProjText[i] = strings.ReplaceAll(c.ProjText[i], "`$rn`", rnName)
		}
		assignUID(c, "")
		top = c
	}
	info.post = top
	return top, nil
}

// isIdentity reports a select list that passes fields on unchanged.
func isIdentity(exprs []ast.Expr, names []string, fields []types.Field, scope expr.Scope) bool {
	if len(exprs) != len(fields) {
		return false
	}
	for i, e := range exprs {
		r, ok := e.(*ast.ColumnRef)
		if !ok || names[i] != fields[i].Name {
			return false
		}
		c, err := scope.Resolve(r)
		if err != nil || c.Index != i {
			return false
		}
	}
	return true
}

// overOf returns the ranking n (a node bindOver returned) plans, or nil.
func overOf(n Node) *overInfo {
	r := n
	if c, ok := n.(*Calc); ok {
		r = c.Input
	}
	var info *overInfo
	switch x := r.(type) {
	case *Rank:
		info = x.over
	case *Deduplicate:
		info = x.over
	case *WindowRank:
		info = x.over
	}
	if info == nil || info.post != n {
		return nil
	}
	return info
}

// isRename reports a Calc that passes every input column on in order,
// under other names.
func isRename(c *Calc) bool {
	in := c.Input.Fields()
	if c.Filter != nil || len(c.ProjText) != len(in) {
		return false
	}
	for i, t := range c.ProjText {
		if strings.ReplaceAll(t, "`", "") != in[i].Name {
			return false
		}
	}
	return true
}

// bindRankFilter binds a SELECT whose WHERE bounds the row number a
// ranking subquery computes (Top-N). ok is false when s is not such a
// query; it is then planned as an ordinary projection and filter.
func (p *Planner) bindRankFilter(rel relation, s *ast.Select, exprs []ast.Expr, names []string) (n Node, ok bool, err error) {
	if s.Where == nil {
		return nil, false, nil
	}
	info := overOf(rel.node)
	// Column aliases of the ranking's subquery (AS t(a, b, rn)) put a
	// renaming Calc over it.
	var renamed []types.Field
	if c, ok := rel.node.(*Calc); ok && info == nil && isRename(c) {
		if info = overOf(c.Input); info != nil {
			renamed = c.Fields()
		}
	}
	if info == nil || info.rnItem < 0 {
		return nil, false, nil
	}
	scope := rel.scope()
	rnCol := info.rnItem
	start, end := int64(1), int64(0)
	found := false
	var rest []ast.Expr
	for _, c := range conjuncts(s.Where) {
		lo, hi, ok, err := p.rankBound(c, scope, rnCol)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			rest = append(rest, c)
			continue
		}
		found = true
		start = max(start, lo)
		if hi > 0 && (end == 0 || hi < end) {
			end = hi
		}
	}
	if !found {
		return nil, false, nil
	}
	if end == 0 {
		return nil, false, errorf(s.Where.Position(), "the filter on the row number '%s' must bound it from above (%s <= N) to make a Top-N query", info.names[rnCol], info.names[rnCol])
	}
	if start > end {
		return nil, false, errorf(s.Where.Position(), "the filter on the row number '%s' keeps no row: it asks for rows %d to %d", info.names[rnCol], start, end)
	}
	outRank := false
	check := append(append(append([]ast.Expr(nil), exprs...), rest...), s.GroupBy...)
	check = append(check, s.Having)
	for _, e := range check {
		walk(e, func(x ast.Expr) bool {
			if r, ok := x.(*ast.ColumnRef); ok {
				if c, err := scope.Resolve(r); err == nil && c.Index == rnCol {
					outRank = true
				}
			}
			return !outRank
		})
	}
	top, err := p.planOver(info, start, end, outRank)
	if err != nil {
		return nil, false, err
	}
	if renamed != nil {
		if !outRank {
			renamed = slices.Delete(slices.Clone(renamed), rnCol, rnCol+1)
		}
		if top, err = p.rename(top, renamed, s.Pos); err != nil {
			return nil, false, err
		}
	}
	s2 := *s
	s2.Where = nil
	for _, c := range rest {
		if s2.Where == nil {
			s2.Where = c
		} else {
			s2.Where = &ast.Binary{Pos: c.Position(), Op: ast.OpAnd, L: s2.Where, R: c}
		}
	}
	n, err = p.selectOver(relation{node: top, name: rel.name}, &s2, exprs, names)
	return n, true, err
}

// selectOver plans the rest of a SELECT over rel, as bindSelect does; a
// select list that passes rel's columns on unchanged plans no Calc.
func (p *Planner) selectOver(rel relation, s *ast.Select, exprs []ast.Expr, names []string) (Node, error) {
	scope := rel.scope()
	if len(s.GroupBy) > 0 || s.Having != nil || slices.ContainsFunc(exprs, hasAggregate) {
		n, err := p.aggregate(rel, scope, s, exprs, names)
		if err != nil || !s.Distinct {
			return n, err
		}
		return p.distinct(n, s.Pos)
	}
	if s.Where == nil && isIdentity(exprs, names, rel.node.Fields(), scope) {
		if s.Distinct {
			return p.distinct(rel.node, s.Pos)
		}
		return rel.node, nil
	}
	n, err := p.calc(rel.node, scope, s.Where, exprs, names)
	if err != nil || !s.Distinct {
		return n, err
	}
	return p.distinct(n, s.Pos)
}

// rankBound reads a condition on the row number column rn: rn <= N, rn <
// N, rn = N, rn >= N, rn > N (either way round) or rn BETWEEN lo AND hi,
// with integer constants. It returns the row numbers the condition keeps
// (hi 0: no upper bound); ok is false for any other condition.
func (p *Planner) rankBound(e ast.Expr, scope expr.Scope, rn int) (lo, hi int64, ok bool, err error) {
	isRN := func(x ast.Expr) bool {
		r, ok := x.(*ast.ColumnRef)
		if !ok {
			return false
		}
		c, err := scope.Resolve(r)
		return err == nil && c.Index == rn
	}
	constant := func(x ast.Expr) (int64, bool) {
		c, err := p.compiler.Compile(x, expr.Tables{})
		if err != nil || !c.Constant || !c.Type.Kind.IsInteger() {
			return 0, false
		}
		v, err := c.Eval(nil)
		if err != nil || v.IsNull() {
			return 0, false
		}
		return v.Int64(), true
	}
	switch b := e.(type) {
	case *ast.Between:
		if b.Not || b.Symmetric || !isRN(b.X) {
			return 0, 0, false, nil
		}
		l, ok1 := constant(b.Lo)
		h, ok2 := constant(b.Hi)
		if !ok1 || !ok2 {
			return 0, 0, false, nil
		}
		if h < 1 || h < l {
			return 0, 0, false, errorf(b.Pos, "the filter on the row number keeps no row: %s", b)
		}
		return max(l, 1), h, true, nil
	case *ast.Binary:
		op, other := b.Op, b.R
		switch {
		case isRN(b.L):
		case isRN(b.R):
			other = b.L
			op = map[ast.BinaryOp]ast.BinaryOp{ast.OpLt: ast.OpGt, ast.OpLe: ast.OpGe, ast.OpGt: ast.OpLt, ast.OpGe: ast.OpLe, ast.OpEq: ast.OpEq}[op]
		default:
			return 0, 0, false, nil
		}
		v, ok := constant(other)
		if !ok {
			return 0, 0, false, nil
		}
		switch op {
		case ast.OpLe:
			lo, hi = 1, v
		case ast.OpLt:
			if v == math.MinInt64 {
				return 0, 0, false, errorf(b.Pos, "the filter on the row number keeps no row: %s", b)
			}
			lo, hi = 1, v-1
		case ast.OpEq:
			lo, hi = v, v
		case ast.OpGe:
			lo, hi = v, 0
		case ast.OpGt:
			if v == math.MaxInt64 {
				return 0, 0, false, errorf(b.Pos, "the filter on the row number keeps no row: %s", b)
			}
			lo, hi = v+1, 0
		default:
			return 0, 0, false, nil
		}
		if hi < 0 || hi == 0 && (op == ast.OpLe || op == ast.OpLt || op == ast.OpEq) {
			return 0, 0, false, errorf(b.Pos, "the filter on the row number keeps no row: %s", b)
		}
		return max(lo, 1), hi, true, nil
	}
	return 0, 0, false, nil
}

// traceColumn follows column i of n down through projections that pass
// it on by name, to the node that computes it.
func traceColumn(n Node, i int) (Node, int) {
	for {
		switch x := n.(type) {
		case *Calc:
			text := strings.ReplaceAll(x.ProjText[i], "`", "")
			in := x.Input.Fields()
			j := -1
			for k, f := range in {
				if text == f.Name || strings.HasSuffix(text, "."+f.Name) && !strings.ContainsAny(text, " (") {
					if j >= 0 {
						return n, i
					}
					j = k
				}
			}
			if j < 0 {
				return n, i
			}
			n, i = x.Input, j
		case *WatermarkAssigner:
			n = x.Input
		case *WindowRank:
			if i >= len(x.Input.Fields()) {
				return n, i
			}
			n = x.Input
		default:
			return n, i
		}
	}
}

// windowRole says which window column i of n (a WindowTableFunction or
// WindowAggregate) is: 0 window_start, 1 window_end, 2 window_time, -1
// none.
func windowRole(n Node, i int) (WindowSpec, int) {
	switch x := n.(type) {
	// Windows of processing time are not: a window Top-N runs on event
	// time.
	case *WindowTableFunction:
		if k := i - (len(x.fields) - 3); k >= 0 && !x.Window.ProcTime {
			return x.Window, k
		}
	case *WindowAggregate:
		if k := i - (len(x.Keys) + len(x.Aggs)); k >= 0 && !x.Window.ProcTime {
			return x.Window, k
		}
	}
	return WindowSpec{}, -1
}

// windowOf finds window_start and window_end of one window among the
// partition columns of a ranking over n.
func windowOf(n Node, partition []int) *windowBounds {
	wb := &windowBounds{start: -1, end: -1}
	for _, c := range partition {
		o, i := traceColumn(n, c)
		spec, role := windowRole(o, i)
		if role < 0 || role > 1 || wb.origin != nil && wb.origin != o {
			continue
		}
		wb.origin, wb.spec = o, spec
		if role == 0 {
			wb.start = c
		} else {
			wb.end = c
		}
	}
	if wb.start < 0 || wb.end < 0 {
		return nil
	}
	return wb
}

// isTimeAttribute reports whether column c of n is an event-time
// attribute: n's rowtime, a window's window_time, or the time column of
// a window TVF.
func isTimeAttribute(n Node, c int) bool {
	if c == n.Rowtime() {
		return true
	}
	o, i := traceColumn(n, c)
	if _, role := windowRole(o, i); role == 2 {
		return true
	}
	if tvf, ok := o.(*WindowTableFunction); ok {
		return i == tvf.TimeCol
	}
	return false
}
