package planner

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/types"
)

// JoinType is the kind of a join as EXPLAIN prints it.
type JoinType string

// The join types.
const (
	InnerJoin      JoinType = "InnerJoin"
	LeftOuterJoin  JoinType = "LeftOuterJoin"
	RightOuterJoin JoinType = "RightOuterJoin"
	FullOuterJoin  JoinType = "FullOuterJoin"
)

// LeftOuter reports whether left rows without a match are kept, padded
// with NULLs.
func (t JoinType) LeftOuter() bool { return t == LeftOuterJoin || t == FullOuterJoin }

// RightOuter reports whether right rows without a match are kept, padded
// with NULLs.
func (t JoinType) RightOuter() bool { return t == RightOuterJoin || t == FullOuterJoin }

// JoinKey is one equality between a column of each input of a join.
type JoinKey struct {
	// Left and Right are the columns of the left and right input.
	Left, Right int
	// LeftCast and RightCast convert a side's column to the type both are
	// compared in, when the two columns' types differ (nil: as it is).
	// They are evaluated over the side's own row.
	LeftCast, RightCast *expr.Compiled
	// NullSafe marks `IS NOT DISTINCT FROM`: NULL equals NULL.
	NullSafe bool
}

// JoinSpec is what every join node has: its inputs, its kind, the hash
// keys and the rest of the condition.
type JoinSpec struct {
	Left, Right Node
	Type        JoinType
	// Keys are the equalities the rows are hashed on; a join without keys
	// runs in one subtask.
	Keys []JoinKey
	// Condition is the rest of the join condition, evaluated on a joined
	// row (the left input's columns, then the right's); nil when the keys
	// are the whole condition.
	Condition *expr.Compiled
	// Text is the join condition as EXPLAIN prints it.
	Text string
	// CondReads are the columns of a joined row that Condition reads
	// (true at their index); nil when that is not known.
	CondReads []bool
}

// Join is a regular join (Flink's StreamingJoinOperator): each side's
// rows are kept in keyed state with their multiplicities, and every
// change on one side is joined with the other side's rows of the same
// key. An inner join of insert-only inputs is insert-only; an outer join,
// or any join of an updating input, is updating.
type Join struct {
	base
	JoinSpec
	// LeftRetain and RightRetain, when set, bound how long a side's rows
	// can still meet rows of the other side to come (see JoinRetention);
	// nil: a row is kept as long as the job runs, as Flink keeps it
	// without a state TTL.
	LeftRetain, RightRetain *JoinRetention
}

// JoinRetention says when a regular join may drop a row of one side: once
// the join's watermark reaches the row's column Col plus AfterMs, no row
// of the other side still to come can satisfy the condition with it. It
// holds when both inputs are insert-only and a conjunct of the condition
// bounds a column of the other side that is ahead of that side's
// watermark (a window aggregation's window_end or window_time: the
// aggregation emits a window only when the watermark passes it, and drops
// rows late for it) by Col plus an offset: every row of the other side
// that arrives later has that column past the watermark, past the bound.
// The join's results are the same as without it; only the state it keeps
// is smaller. (Flink keeps such rows until a state TTL expires them.)
type JoinRetention struct {
	// Col is the column of the side whose rows are dropped.
	Col int
	// AfterMs is the offset added to Col.
	AfterMs int64
	// Text is the bound as EXPLAIN prints it: "dateTime + 10000 ms".
	Text string
}

// IntervalJoin is a join of two insert-only inputs whose condition
// bounds one side's rowtime by the other's: each side's rows are kept in
// keyed state until the watermark passes the last time a row of the other
// side can match them; then an outer side's rows that matched nothing are
// emitted padded with NULLs. Its output is insert-only; its rowtime is the
// left input's, and its watermark is held back by WatermarkDelayMs.
type IntervalJoin struct {
	base
	JoinSpec
	// LeftTime and RightTime are the rowtime columns of the inputs.
	LeftTime, RightTime int
	// LowerMs and UpperMs bound left.rowtime - right.rowtime (inclusive).
	LowerMs, UpperMs int64
}

// WindowJoin joins the rows of two window table functions or window
// aggregations with the same windows, per window and key: it buffers
// both sides of a window in keyed state and joins them when the
// watermark passes the window's end, then drops them. Its output is
// insert-only, for every join type.
type WindowJoin struct {
	base
	JoinSpec
	Window WindowSpec
	// LeftStart, LeftEnd, RightStart and RightEnd are the window_start and
	// window_end columns of the inputs.
	LeftStart, LeftEnd, RightStart, RightEnd int
}

// WatermarkDelayMs is how far the output watermark is held back behind
// the input watermark, so that every row the join emits for rows on time
// is ahead of the watermark emitted before it (a row at the watermark is
// late downstream). A joined row's left rowtime can be -LowerMs behind
// the input watermark when its right row arrives. A left row at l of a
// left outer join is emitted padded at the first input watermark past
// l - LowerMs, when the watermark emitted before can be l - LowerMs -
// delay: the delay must be at least 1 - LowerMs for that to be before l.
// A right row emitted padded has a NULL rowtime, which no window takes.
func (n *IntervalJoin) WatermarkDelayMs() int64 {
	if n.Type.LeftOuter() {
		return max(0, 1-n.LowerMs)
	}
	return max(0, -n.LowerMs)
}

func (n *Join) Inputs() []Node         { return []Node{n.Left, n.Right} }
func (n *IntervalJoin) Inputs() []Node { return []Node{n.Left, n.Right} }
func (n *WindowJoin) Inputs() []Node   { return []Node{n.Left, n.Right} }

func (n *Join) Updating() bool {
	return n.Type != InnerJoin || n.Left.Updating() || n.Right.Updating()
}
func (n *IntervalJoin) Updating() bool { return false }
func (n *WindowJoin) Updating() bool   { return false }

func (n *Join) name() string         { return "Join" }
func (n *IntervalJoin) name() string { return "IntervalJoin" }
func (n *WindowJoin) name() string   { return "WindowJoin" }

func (n *Join) exchange(i int) ([]int, bool)         { return n.sideKeys(i), true }
func (n *IntervalJoin) exchange(i int) ([]int, bool) { return n.sideKeys(i), true }
func (n *WindowJoin) exchange(i int) ([]int, bool)   { return n.sideKeys(i), true }

// sideKeys are the key columns of input i (0 left, 1 right).
func (s *JoinSpec) sideKeys(i int) []int {
	var ks []int
	for _, k := range s.Keys {
		if i == 0 {
			ks = append(ks, k.Left)
		} else {
			ks = append(ks, k.Right)
		}
	}
	return ks
}

func (s *JoinSpec) where() string {
	if s.Text == "" {
		return "true"
	}
	return s.Text
}

func (n *Join) args() string {
	// The state keeps every row with its count: Flink's NoUniqueKey input
	// spec.
	s := fmt.Sprintf("joinType=[%s], where=[%s], select=[%s], leftInputSpec=[NoUniqueKey], rightInputSpec=[NoUniqueKey]",
		n.Type, n.where(), fieldNames(n.fields))
	if r := n.LeftRetain; r != nil {
		s += ", leftRetention=[watermark >= " + r.Text + "]"
	}
	if r := n.RightRetain; r != nil {
		s += ", rightRetention=[watermark >= " + r.Text + "]"
	}
	return s
}

func (n *IntervalJoin) args() string {
	return fmt.Sprintf("joinType=[%s], windowBounds=[isRowTime=true, leftLowerBound=%d, leftUpperBound=%d, leftTimeIndex=%d, rightTimeIndex=%d], where=[%s], select=[%s]",
		n.Type, n.LowerMs, n.UpperMs, n.LeftTime, n.RightTime, n.where(), fieldNames(n.fields))
}

func (n *WindowJoin) args() string {
	side := func(in Node, start, end int) string {
		w := n.Window
		fs := in.Fields()
		s := fmt.Sprintf("%s(win_start=[%s], win_end=[%s], size=[%s]", w.Kind, fs[start].Name, fs[end].Name, durationText(w.Size))
		switch w.Kind {
		case Hop:
			s += ", slide=[" + durationText(w.Slide) + "]"
		case Cumulate:
			s += ", step=[" + durationText(w.Step) + "]"
		}
		return s + ")"
	}
	return fmt.Sprintf("leftWindow=[%s], rightWindow=[%s], joinType=[%s], where=[%s], select=[%s]",
		side(n.Left, n.LeftStart, n.LeftEnd), side(n.Right, n.RightStart, n.RightEnd), n.Type, n.where(), fieldNames(n.fields))
}

// bindJoin binds a JOIN in a FROM clause.
func (p *Planner) bindJoin(r *ast.Join) (relation, error) {
	return p.bindJoinWhere(r, nil)
}

// bindFromWhere binds a FROM item and returns the part of where still to
// be evaluated above it. Over an inner join (JOIN, CROSS JOIN or a comma)
// WHERE means the same as ON, so it becomes part of the join condition:
// its equalities are hash keys and the conjuncts of one side filter that
// side before the join, as in Flink.
func (p *Planner) bindFromWhere(from ast.TableRef, where ast.Expr) (relation, ast.Expr, error) {
	j, ok := from.(*ast.Join)
	if !ok || where == nil || hasAggregate(where) || j.Using != nil ||
		j.Kind != ast.InnerJoin && j.Kind != ast.CrossJoin && j.Kind != ast.CommaJoin {
		rel, err := p.bindFrom(from)
		return rel, where, err
	}
	if _, over := findOver(where); over {
		rel, err := p.bindFrom(from)
		return rel, where, err
	}
	rel, err := p.bindJoinWhere(j, where)
	return rel, nil, err
}

// conjuncts splits e at its top-level ANDs.
func conjuncts(e ast.Expr) []ast.Expr {
	if b, ok := e.(*ast.Binary); ok && b.Op == ast.OpAnd {
		return append(conjuncts(b.L), conjuncts(b.R)...)
	}
	return []ast.Expr{e}
}

// and joins conjuncts with AND, nil for none.
func and(es []ast.Expr) ast.Expr {
	var out ast.Expr
	for _, e := range es {
		if out == nil {
			out = e
		} else {
			out = &ast.Binary{Pos: out.Position(), Op: ast.OpAnd, L: out, R: e}
		}
	}
	return out
}

// sidesOf reports which inputs e's columns belong to: bit 0 the left
// (columns below nl), bit 1 the right.
func sidesOf(e ast.Expr, scope expr.Tables, nl int) (int, error) {
	mask := 0
	var err error
	walk(e, func(x ast.Expr) bool {
		ref, ok := x.(*ast.ColumnRef)
		if !ok {
			return true
		}
		c, rerr := scope.Resolve(ref)
		if rerr != nil {
			err = rerr
			return false
		}
		if c.Index < nl {
			mask |= 1
		} else {
			mask |= 2
		}
		return true
	})
	return mask, err
}

// bindJoinWhere binds a join whose condition is its ON condition and, for
// an inner join, where.
func (p *Planner) bindJoinWhere(j *ast.Join, where ast.Expr) (relation, error) {
	if len(j.Using) > 0 {
		return relation{}, errorf(j.Using[0].Pos, "JOIN ... USING is not supported yet; write the condition with ON")
	}
	if isLookupJoin(j) {
		return p.lookupJoin(j, where)
	}
	left, err := p.bindFrom(j.Left)
	if err != nil {
		return relation{}, err
	}
	right, err := p.bindFrom(j.Right)
	if err != nil {
		return relation{}, err
	}
	typ := InnerJoin
	switch j.Kind {
	case ast.LeftJoin:
		typ = LeftOuterJoin
	case ast.RightJoin:
		typ = RightOuterJoin
	case ast.FullJoin:
		typ = FullOuterJoin
	}
	ls, rs := left.scope(), right.scope()
	nl := len(left.node.Fields())
	scope := slices.Clone(ls)
	for _, t := range rs {
		for _, u := range ls {
			if t.Name != "" && t.Name == u.Name {
				return relation{}, errorf(j.Right.Position(), "table name '%s' is used twice in the FROM clause; give one of them an alias", t.Name)
			}
		}
		t.Offset += nl
		scope = append(scope, t)
	}

	// The conjuncts of ON, then those of WHERE.
	var conds []ast.Expr
	for _, c := range []struct {
		e    ast.Expr
		what string
	}{{j.On, "join condition"}, {where, "WHERE condition"}} {
		if c.e == nil {
			continue
		}
		if hasAggregate(c.e) {
			return relation{}, errorf(c.e.Position(), "aggregate functions are not allowed in the %s", c.what)
		}
		if call, over := findOver(c.e); over {
			return relation{}, errorf(call.Pos, "window functions are not allowed in the %s", c.what)
		}
		ce, err := p.compiler.Compile(c.e, scope)
		if err != nil {
			return relation{}, err
		}
		if ce.Type.Kind != types.KindBoolean && ce.Type.Kind != types.KindNull {
			return relation{}, errorf(c.e.Position(), "the %s must be BOOLEAN, not %s", c.what, ce.Type)
		}
		conds = append(conds, conjuncts(c.e)...)
	}

	// Keys, filters to push below the join, and the rest. A conjunct of
	// one side filters that side's rows before the join unless the join
	// keeps that side's unmatched rows (then it decides matching only).
	var keys []JoinKey
	var keyText []ast.Expr
	var push [2][]ast.Expr
	var rest []ast.Expr
	// exprKeys are equalities of an expression of each side: the sides
	// compute them as extra columns to hash on.
	var exprKeys []exprKey
	for _, c := range conds {
		mask, err := sidesOf(c, scope, nl)
		if err != nil {
			return relation{}, err
		}
		switch {
		case mask == 1 && !typ.LeftOuter():
			push[0] = append(push[0], c)
			continue
		case mask == 2 && !typ.RightOuter():
			push[1] = append(push[1], c)
			continue
		case mask == 3:
			k, ok, err := p.joinKey(c, scope, nl, left.node.Fields(), right.node.Fields())
			if err != nil {
				return relation{}, err
			}
			if ok {
				keys = append(keys, k)
				keyText = append(keyText, c)
				continue
			}
			if ek, ok, err := splitKey(c, scope, nl); err != nil {
				return relation{}, err
			} else if ok {
				exprKeys = append(exprKeys, ek)
				continue
			}
		}
		rest = append(rest, c)
	}
	if len(push[0]) > 0 {
		if left, err = p.filterSide(left, push[0]); err != nil {
			return relation{}, err
		}
	}
	if len(push[1]) > 0 {
		if right, err = p.filterSide(right, push[1]); err != nil {
			return relation{}, err
		}
	}
	if len(exprKeys) > 0 {
		nl0, nr0 := len(left.node.Fields()), len(right.node.Fields())
		// A side of a key that is a bare column is hashed as it is; the
		// other expressions become columns $k0, $k1, ... of their side.
		var ls2, rs2 []ast.Expr
		lrefs, rrefs := make([]ast.Expr, len(exprKeys)), make([]ast.Expr, len(exprKeys))
		for i, ek := range exprKeys {
			if _, ok := ek.left.(*ast.ColumnRef); ok {
				lrefs[i] = ek.left
			} else {
				lrefs[i] = &ast.ColumnRef{Pos: ek.pos, Parts: []string{"$l", "$k" + strconv.Itoa(len(ls2))}}
				ls2 = append(ls2, ek.left)
			}
			if _, ok := ek.right.(*ast.ColumnRef); ok {
				rrefs[i] = ek.right
			} else {
				rrefs[i] = &ast.ColumnRef{Pos: ek.pos, Parts: []string{"$r", "$k" + strconv.Itoa(len(rs2))}}
				rs2 = append(rs2, ek.right)
			}
		}
		if len(ls2) > 0 {
			if left.node, err = p.extendSide(left, ls2); err != nil {
				return relation{}, err
			}
		}
		if len(rs2) > 0 {
			if right.node, err = p.extendSide(right, rs2); err != nil {
				return relation{}, err
			}
		}
		// The right input's columns now start after the left's extra ones.
		nl = len(left.node.Fields())
		scope = slices.Clone(ls)
		for _, t := range rs {
			t.Offset += nl
			scope = append(scope, t)
		}
		keyScope := append(slices.Clone(scope),
			expr.Table{Name: "$l", Columns: left.node.Fields()[nl0:], Offset: nl0},
			expr.Table{Name: "$r", Columns: right.node.Fields()[nr0:], Offset: nl + nr0})
		for i, ek := range exprKeys {
			l, r := lrefs[i], rrefs[i]
			var c ast.Expr = &ast.Binary{Pos: ek.pos, Op: ast.OpEq, L: l, R: r}
			if ek.nullSafe {
				c = &ast.IsDistinctFrom{Pos: ek.pos, L: l, R: r, Not: true}
			}
			k, ok, err := p.joinKey(c, keyScope, nl, left.node.Fields(), right.node.Fields())
			if err != nil {
				return relation{}, err
			}
			if ok {
				keys = append(keys, k)
				keyText = append(keyText, ek.cond)
			} else {
				rest = append(rest, ek.cond)
			}
		}
	}
	spec := JoinSpec{Left: left.node, Right: right.node, Type: typ, Keys: keys}
	if c := and(rest); c != nil {
		if spec.Condition, err = p.compiler.Compile(c, scope); err != nil {
			return relation{}, err
		}
		spec.CondReads = readColumns(scope, nl+len(right.node.Fields()), c)
	}
	if c := and(append(slices.Clone(keyText), rest...)); c != nil {
		spec.Text = c.String()
	}

	// The output: the left's columns then the right's, those of a side
	// whose unmatched rows the other side keeps nullable.
	nullable := func(fs []types.Field, yes bool) []types.Field {
		fs = slices.Clone(fs)
		if yes {
			for i := range fs {
				fs[i].Type = fs[i].Type.WithNotNull(false)
			}
		}
		return fs
	}
	lf, rf := nullable(left.node.Fields(), typ.RightOuter()), nullable(right.node.Fields(), typ.LeftOuter())
	fields := uniqueNames(append(slices.Clone(lf), rf...))
	var out expr.Tables
	for _, t := range scope {
		t.Columns = nullable(t.Columns, t.Offset < nl && typ.RightOuter() || t.Offset >= nl && typ.LeftOuter())
		out = append(out, t)
	}

	var n Node
	if w, ok := windowJoin(spec); ok {
		n = w
	} else if ij, ok, err := p.intervalJoin(spec, rest, scope, nl); err != nil {
		return relation{}, err
	} else if ok {
		n = ij
	} else {
		jn := &Join{JoinSpec: spec}
		jn.LeftRetain, jn.RightRetain = p.joinRetention(spec, rest, scope, nl)
		jn.rowtime = -1
		n = jn
	}
	switch n := n.(type) {
	case *Join:
		n.fields = fields
	case *IntervalJoin:
		n.fields = fields
	case *WindowJoin:
		n.fields = fields
	}
	assignUID(n, "")
	return relation{node: n, tables: out}, nil
}

// uniqueNames renames repeated column names as Flink does: the second id
// becomes id0, the third id1.
func uniqueNames(fs []types.Field) []types.Field {
	seen := map[string]bool{}
	for _, f := range fs {
		seen[f.Name] = true
	}
	used := map[string]bool{}
	for i, f := range fs {
		if !used[f.Name] {
			used[f.Name] = true
			continue
		}
		for k := 0; ; k++ {
			name := f.Name + strconv.Itoa(k)
			if !used[name] && !seen[name] {
				fs[i].Name = name
				used[name] = true
				break
			}
		}
	}
	return fs
}

// joinKey makes a hash key of c when it is `left column = right column`
// or `left column IS NOT DISTINCT FROM right column` (either way round).
func (p *Planner) joinKey(c ast.Expr, scope expr.Tables, nl int, lf, rf []types.Field) (JoinKey, bool, error) {
	var l, r ast.Expr
	var pos ast.Pos
	nullSafe := false
	switch c := c.(type) {
	case *ast.Binary:
		if c.Op != ast.OpEq {
			return JoinKey{}, false, nil
		}
		l, r, pos = c.L, c.R, c.Pos
	case *ast.IsDistinctFrom:
		if !c.Not {
			return JoinKey{}, false, nil
		}
		l, r, pos, nullSafe = c.L, c.R, c.Pos, true
	default:
		return JoinKey{}, false, nil
	}
	lr, ok1 := l.(*ast.ColumnRef)
	rr, ok2 := r.(*ast.ColumnRef)
	if !ok1 || !ok2 {
		return JoinKey{}, false, nil
	}
	lc, err := scope.Resolve(lr)
	if err != nil {
		return JoinKey{}, false, err
	}
	rc, err := scope.Resolve(rr)
	if err != nil {
		return JoinKey{}, false, err
	}
	if lc.Index >= nl {
		lc, rc = rc, lc
	}
	if lc.Index >= nl || rc.Index < nl {
		return JoinKey{}, false, nil
	}
	k := JoinKey{Left: lc.Index, Right: rc.Index - nl, NullSafe: nullSafe}
	lt, rt := lf[k.Left].Type.WithNotNull(false), rf[k.Right].Type.WithNotNull(false)
	if lt.String() == rt.String() {
		return k, true, nil
	}
	// The keys are hashed and compared by their encoding, so both sides
	// must be in one type: the one COALESCE of the two would have.
	common, err := p.compiler.Compile(&ast.Call{Pos: pos, Name: &ast.ObjectName{Pos: pos, Parts: []string{"COALESCE"}}, Args: []ast.Expr{lr, rr}}, scope)
	if err != nil {
		return JoinKey{}, false, nil
	}
	ct := common.Type.WithNotNull(false)
	cast := func(fs []types.Field, col int, t types.Type) (*expr.Compiled, error) {
		if t.String() == ct.String() {
			return nil, nil
		}
		dt, err := parser.ParseDataType(ct.String())
		if err != nil {
			return nil, errorf(pos, "comparing %s with %s in a join key: %v", lt, rt, err)
		}
		ids := make([]types.Field, len(fs))
		for i, f := range fs {
			ids[i] = types.Field{Name: "$" + strconv.Itoa(i), Type: f.Type}
		}
		return p.compiler.Compile(&ast.Cast{Pos: pos, X: &ast.ColumnRef{Pos: pos, Parts: []string{ids[col].Name}}, Type: dt}, expr.NewTable("", ids...))
	}
	if k.LeftCast, err = cast(lf, k.Left, lt); err != nil {
		return JoinKey{}, false, nil
	}
	if k.RightCast, err = cast(rf, k.Right, rt); err != nil {
		return JoinKey{}, false, nil
	}
	return k, true, nil
}

// exprKey is an equality between an expression of each input.
type exprKey struct {
	cond        ast.Expr
	left, right ast.Expr
	nullSafe    bool
	pos         ast.Pos
}

// splitKey reads c as `left expression = right expression` (or IS NOT
// DISTINCT FROM), either way round, each side naming columns of one
// input only.
func splitKey(c ast.Expr, scope expr.Tables, nl int) (exprKey, bool, error) {
	ek := exprKey{cond: c}
	var l, r ast.Expr
	switch c := c.(type) {
	case *ast.Binary:
		if c.Op != ast.OpEq {
			return ek, false, nil
		}
		l, r, ek.pos = c.L, c.R, c.Pos
	case *ast.IsDistinctFrom:
		if !c.Not {
			return ek, false, nil
		}
		l, r, ek.pos, ek.nullSafe = c.L, c.R, c.Pos, true
	default:
		return ek, false, nil
	}
	ml, err := sidesOf(l, scope, nl)
	if err != nil {
		return ek, false, err
	}
	mr, err := sidesOf(r, scope, nl)
	if err != nil {
		return ek, false, err
	}
	switch {
	case ml == 1 && mr == 2:
		ek.left, ek.right = l, r
	case ml == 2 && mr == 1:
		ek.left, ek.right = r, l
	default:
		return ek, false, nil
	}
	return ek, true, nil
}

// extendSide puts a Calc over one input of a join that appends the
// values of extra (over the input's scope) as columns $k0, $k1, ...
func (p *Planner) extendSide(rel relation, extra []ast.Expr) (Node, error) {
	fs := rel.node.Fields()
	ids := make([]types.Field, len(fs))
	var exprs []ast.Expr
	var names []string
	pos := extra[0].Position()
	for i, f := range fs {
		ids[i] = types.Field{Name: "$" + strconv.Itoa(i), Type: f.Type}
		exprs = append(exprs, &ast.ColumnRef{Pos: pos, Parts: []string{ids[i].Name}})
		names = append(names, f.Name)
	}
	for i, e := range extra {
		exprs = append(exprs, e)
		names = append(names, "$k"+strconv.Itoa(i))
	}
	scope := append(expr.Tables{{Name: "$", Columns: ids}}, rel.scope()...)
	n, err := p.calc(rel.node, scope, nil, exprs, names)
	if err != nil {
		return nil, err
	}
	c := n.(*Calc)
	copy(c.ProjText, names[:len(fs)])
	assignUID(c, "")
	return c, nil
}

// filterSide puts a Calc filtering by conds over one input of a join; the
// input keeps its columns and its scope.
func (p *Planner) filterSide(rel relation, conds []ast.Expr) (relation, error) {
	fs := rel.node.Fields()
	ids := make([]types.Field, len(fs))
	var exprs []ast.Expr
	var names []string
	pos := conds[0].Position()
	for i, f := range fs {
		ids[i] = types.Field{Name: "$" + strconv.Itoa(i), Type: f.Type}
		exprs = append(exprs, &ast.ColumnRef{Pos: pos, Parts: []string{ids[i].Name}})
		names = append(names, f.Name)
	}
	// The conditions name the side's columns as the query does; the
	// projection names them by position.
	scope := append(expr.Tables{{Name: "$", Columns: ids}}, rel.scope()...)
	n, err := p.calc(rel.node, scope, and(conds), exprs, names)
	if err != nil {
		return relation{}, err
	}
	c := n.(*Calc)
	copy(c.ProjText, names)
	assignUID(c, "")
	return relation{node: c, name: rel.name, tables: rel.tables}, nil
}

// windowOrigin traces column col of n back to the window table function
// or window aggregation that made it: which of window_start (0),
// window_end (1) and window_time (2) it is, and the windows.
func windowOrigin(n Node, col int) (WindowSpec, int, bool) {
	switch n := n.(type) {
	// Windows of processing time are not: a window join runs on event
	// time.
	case *WindowTableFunction:
		if base := len(n.Input.Fields()); col >= base && !n.Window.ProcTime {
			return n.Window, col - base, true
		}
	case *WindowAggregate:
		if base := len(n.fields) - 3; col >= base && !n.Window.ProcTime {
			return n.Window, col - base, true
		}
	case *WatermarkAssigner:
		return windowOrigin(n.Input, col)
	case *Calc:
		if in, ok := calcSource(n, col); ok {
			return windowOrigin(n.Input, in)
		}
	}
	return WindowSpec{}, 0, false
}

// calcSource returns the input column that output column col of n passes
// through unchanged, if its projection is a bare column reference (the
// text names it as the input does).
func calcSource(n *Calc, col int) (int, bool) {
	e, err := parser.ParseExpr(n.ProjText[col])
	if err != nil {
		return 0, false
	}
	ref, ok := e.(*ast.ColumnRef)
	if !ok {
		return 0, false
	}
	name := ref.Parts[len(ref.Parts)-1]
	found := -1
	for i, f := range n.Input.Fields() {
		if f.Name == name {
			if found >= 0 {
				return 0, false
			}
			found = i
		}
	}
	return found, found >= 0
}

// windowJoin plans spec as a WindowJoin when both inputs are windowed the
// same way and the keys include the equality of their window_start and
// window_end.
func windowJoin(spec JoinSpec) (*WindowJoin, bool) {
	if spec.Left.Updating() || spec.Right.Updating() {
		return nil, false
	}
	w := &WindowJoin{JoinSpec: spec, LeftStart: -1, LeftEnd: -1}
	// The windows of window_start's and window_end's equalities, which
	// must be the same (whatever the time columns are called).
	var specs [2]WindowSpec
	for _, k := range spec.Keys {
		lw, lrole, ok1 := windowOrigin(spec.Left, k.Left)
		rw, rrole, ok2 := windowOrigin(spec.Right, k.Right)
		lw.TimeCol, rw.TimeCol = "", ""
		if !ok1 || !ok2 || lrole != rrole || !sameWindows(lw, rw) {
			continue
		}
		switch lrole {
		case 0:
			w.LeftStart, w.RightStart, specs[0] = k.Left, k.Right, lw
		case 1:
			w.LeftEnd, w.RightEnd, specs[1] = k.Left, k.Right, lw
		}
	}
	if w.LeftStart < 0 || w.LeftEnd < 0 || !sameWindows(specs[0], specs[1]) {
		return nil, false
	}
	w.Window = specs[0]
	w.rowtime = spec.Left.Rowtime()
	return w, true
}

// timeOffset reads e as `rowtime [+|- INTERVAL ...]` of one side.
func (p *Planner) timeOffset(e ast.Expr, scope expr.Tables, nl int, times [2]int) (colRef, bool) {
	c, ok := p.colOffset(e, scope, nl)
	return c, ok && c.col == times[c.side]
}

// intervalJoin plans spec as an IntervalJoin when both inputs are
// insert-only with a rowtime and the rest of the condition bounds
// left.rowtime - right.rowtime from both sides.
func (p *Planner) intervalJoin(spec JoinSpec, rest []ast.Expr, scope expr.Tables, nl int) (*IntervalJoin, bool, error) {
	times := [2]int{spec.Left.Rowtime(), spec.Right.Rowtime()}
	if spec.Left.Updating() || spec.Right.Updating() || times[0] < 0 || times[1] < 0 {
		return nil, false, nil
	}
	var lo, hi int64
	hasLo, hasHi := false, false
	var where ast.Expr
	// bound records `left.rowtime - right.rowtime op v`. Bounds are whole
	// milliseconds, and a strict one is the next inclusive one: that is
	// exact because rowtimes are whole milliseconds too (the catalog
	// refuses a rowtime finer than TIMESTAMP(3), as Flink does; rows
	// of finer times less than a millisecond apart would be pruned).
	bound := func(op ast.BinaryOp, v int64) {
		switch op {
		case ast.OpGt:
			v++
			fallthrough
		case ast.OpGe:
			if !hasLo || v > lo {
				lo = v
			}
			hasLo = true
		case ast.OpLt:
			v--
			fallthrough
		case ast.OpLe:
			if !hasHi || v < hi {
				hi = v
			}
			hasHi = true
		}
	}
	flip := map[ast.BinaryOp]ast.BinaryOp{ast.OpLt: ast.OpGt, ast.OpLe: ast.OpGe, ast.OpGt: ast.OpLt, ast.OpGe: ast.OpLe}
	// compare records `a op b` where a and b are rowtimes of different
	// sides plus offsets.
	compare := func(a ast.Expr, op ast.BinaryOp, b ast.Expr) bool {
		ta, ok1 := p.timeOffset(a, scope, nl, times)
		tb, ok2 := p.timeOffset(b, scope, nl, times)
		if !ok1 || !ok2 || ta.side == tb.side {
			return false
		}
		if ta.side == 1 {
			ta, tb, op = tb, ta, flip[op]
		}
		// l + ta.ms op r + tb.ms  <=>  l - r op tb.ms - ta.ms
		bound(op, tb.ms-ta.ms)
		return true
	}
	for _, c := range rest {
		switch c := c.(type) {
		case *ast.Binary:
			if _, ok := flip[c.Op]; ok && compare(c.L, c.Op, c.R) && where == nil {
				where = c
			}
		case *ast.Between:
			if !c.Not && !c.Symmetric {
				ok1 := compare(c.X, ast.OpGe, c.Lo)
				ok2 := compare(c.X, ast.OpLe, c.Hi)
				if (ok1 || ok2) && where == nil {
					where = c
				}
			}
		}
	}
	if !hasLo || !hasHi || lo > hi {
		// An unbounded or empty time condition: a regular join.
		return nil, false, nil
	}
	if len(spec.Keys) == 0 {
		return nil, false, errorf(where.Position(), "an interval join needs at least one equality condition between columns of its two inputs besides the time bounds")
	}
	ij := &IntervalJoin{JoinSpec: spec, LeftTime: times[0], RightTime: times[1], LowerMs: lo, UpperMs: hi}
	// The left rowtime stays the time attribute: a joined row carries it
	// as its timestamp, and the output watermark is held back by how far
	// behind the input watermark that can be (-LowerMs), so that no row is
	// late downstream. (Flink keeps both rowtimes as time attributes.)
	ij.rowtime = times[0]
	return ij, true, nil
}

// sameWindows reports whether two window TVFs give the same windows (their
// time columns aside). Session windows are never the same: they depend on
// each input's rows, so equal bounds are a regular join's condition.
func sameWindows(a, b WindowSpec) bool {
	return a.Kind != Session && a.Kind == b.Kind && a.Size == b.Size && a.Slide == b.Slide && a.Step == b.Step
}

// colRef is a TIMESTAMP or TIMESTAMP_LTZ column of one side of a join
// plus a constant offset.
type colRef struct {
	side, col int // col: within its side
	kind      types.Kind
	ms        int64
}

// colOffset reads e as `column [+|- INTERVAL ...]` of one side, the
// column a TIMESTAMP or TIMESTAMP_LTZ.
func (p *Planner) colOffset(e ast.Expr, scope expr.Tables, nl int) (colRef, bool) {
	switch e := e.(type) {
	case *ast.ColumnRef:
		c, err := scope.Resolve(e)
		if err != nil || c.Type.Kind != types.KindTimestamp && c.Type.Kind != types.KindTimestampLTZ {
			return colRef{}, false
		}
		if c.Index < nl {
			return colRef{side: 0, col: c.Index, kind: c.Type.Kind}, true
		}
		return colRef{side: 1, col: c.Index - nl, kind: c.Type.Kind}, true
	case *ast.Binary:
		if e.Op != ast.OpAdd && e.Op != ast.OpSub {
			return colRef{}, false
		}
		t, ok := p.colOffset(e.L, scope, nl)
		if !ok {
			return colRef{}, false
		}
		c, err := p.compiler.Compile(e.R, expr.Tables{})
		if err != nil || !c.Constant || c.Type.Kind != types.KindIntervalDayTime {
			return colRef{}, false
		}
		v, err := c.Eval(nil)
		if err != nil || v.IsNull() {
			return colRef{}, false
		}
		if e.Op == ast.OpAdd {
			t.ms += v.Int64()
		} else {
			t.ms -= v.Int64()
		}
		return t, true
	}
	return colRef{}, false
}

// joinRetention finds, for each side of a regular join, a JoinRetention
// among the conjuncts rest of its condition: one of the form `a <= b`,
// `a < b` (or flipped, or a BETWEEN's bounds) where a is a column of one
// side ahead of its watermark plus an offset and b a column of the other
// side plus an offset. a <= b + k then fails for every row still to come
// on a's side once the watermark reaches b + k: b's row may be dropped.
func (p *Planner) joinRetention(spec JoinSpec, rest []ast.Expr, scope expr.Tables, nl int) (left, right *JoinRetention) {
	if spec.Left.Updating() || spec.Right.Updating() {
		// A retraction still to come must find the rows its row met.
		return nil, nil
	}
	sides := [2]Node{spec.Left, spec.Right}
	// le notes `a <= b` for expressions a and b.
	le := func(a, b ast.Expr) {
		ra, ok1 := p.colOffset(a, scope, nl)
		rb, ok2 := p.colOffset(b, scope, nl)
		if !ok1 || !ok2 || ra.side == rb.side || ra.kind != rb.kind || !aheadOfWatermark(sides[ra.side], ra.col) {
			return
		}
		// a.col + a.ms <= b.col + b.ms: a row of b's side can meet a later
		// row of a's side only while a.col <= b.col + b.ms - a.ms.
		after := rb.ms - ra.ms
		name := sides[rb.side].Fields()[rb.col].Name
		text := "`" + name + "`"
		switch {
		case after > 0:
			text += fmt.Sprintf(" + %d ms", after)
		case after < 0:
			text += fmt.Sprintf(" - %d ms", -after)
		}
		r := &JoinRetention{Col: rb.col, AfterMs: after, Text: text}
		if rb.side == 0 && left == nil {
			left = r
		} else if rb.side == 1 && right == nil {
			right = r
		}
	}
	for _, c := range rest {
		switch c := c.(type) {
		case *ast.Binary:
			switch c.Op {
			case ast.OpLe, ast.OpLt:
				le(c.L, c.R)
			case ast.OpGe, ast.OpGt:
				le(c.R, c.L)
			}
		case *ast.Between:
			if !c.Not && !c.Symmetric {
				le(c.Lo, c.X)
				le(c.X, c.Hi)
			}
		}
	}
	return left, right
}

// aheadOfWatermark reports whether every row n emits after a watermark W
// has column col later than W (never NULL): the window_end and
// window_time of an event-time window aggregation, which emits a window
// when the watermark passes its last millisecond and drops rows late for
// their windows, passed through projections and filters. Session windows
// are left out.
func aheadOfWatermark(n Node, col int) bool {
	switch n := n.(type) {
	case *WindowAggregate:
		base := len(n.fields) - 3
		return col > base && !n.Window.ProcTime && n.Window.Kind != Session
	case *Calc:
		if in, ok := calcSource(n, col); ok {
			return aheadOfWatermark(n.Input, in)
		}
	}
	return false
}
