package planner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/types"
)

// OverFrame is the frame of an OverAggregate: the rows from a start
// bound up to the current row.
type OverFrame struct {
	// Range is a RANGE frame (by the time column); otherwise ROWS.
	Range bool
	// Unbounded is UNBOUNDED PRECEDING; otherwise Preceding bounds the frame.
	Unbounded bool
	// Preceding is the number of rows before the current one (ROWS) or
	// the interval in milliseconds before its time (RANGE).
	Preceding int64
}

// String prints the frame as EXPLAIN shows it.
func (f OverFrame) String() string {
	unit := "ROWS"
	if f.Range {
		unit = "RANGE"
	}
	switch {
	case f.Unbounded:
		return unit + " BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
	case f.Preceding == 0:
		return unit + " BETWEEN CURRENT ROW AND CURRENT ROW"
	case f.Range:
		return fmt.Sprintf("RANGE BETWEEN %d PRECEDING AND CURRENT ROW", f.Preceding)
	}
	return fmt.Sprintf("ROWS BETWEEN %d PRECEDING AND CURRENT ROW", f.Preceding)
}

// OverAggregate computes aggregates over a window of each row's
// partition ordered by the event-time column OrderCol (Flink's
// OverAggregate). Its input and output are insert-only: it holds each
// row in keyed state until the watermark passes its time, then emits it
// with the aggregates of its frame appended, rows of a partition in
// time order; rows the watermark already passed are dropped. Rows that
// can no longer be in a frame leave the state.
type OverAggregate struct {
	base
	Input       Node
	PartitionBy []int
	OrderCol    int
	Frame       OverFrame
	Aggs        []AggCall
}

func (n *OverAggregate) Inputs() []Node             { return []Node{n.Input} }
func (n *OverAggregate) Updating() bool             { return false }
func (n *OverAggregate) exchange(int) ([]int, bool) { return n.PartitionBy, true }
func (n *OverAggregate) name() string               { return "OverAggregate" }

func (n *OverAggregate) args() string {
	in := n.Input.Fields()
	sel := fieldNames(in)
	base := len(in)
	for i, a := range n.Aggs {
		sel += ", " + a.Text + " AS " + n.fields[base+i].Name
	}
	return fmt.Sprintf("partitionBy=[%s], orderBy=[%s ASC], window=[%s], select=[%s]",
		columnNames(in, n.PartitionBy), in[n.OrderCol].Name, n.Frame, sel)
}

// isRankFunction reports ROW_NUMBER, RANK and DENSE_RANK.
func isRankFunction(c *ast.Call) bool {
	switch strings.ToUpper(c.Name.Last()) {
	case "ROW_NUMBER", "RANK", "DENSE_RANK":
		return len(c.Name.Parts) == 1
	}
	return false
}

// overAggCalls returns the OVER calls of exprs when one of them is an
// aggregate (not a ranking), or nil.
func overAggCalls(exprs []ast.Expr) []*ast.Call {
	var calls []*ast.Call
	agg := false
	for _, e := range exprs {
		walk(e, func(x ast.Expr) bool {
			if c, ok := x.(*ast.Call); ok && c.Over != nil {
				calls = append(calls, c)
				if !isRankFunction(c) {
					agg = true
				}
			}
			return true
		})
	}
	if !agg {
		return nil
	}
	return calls
}

// overScope resolves the select list over an OverAggregate: `$oN` is
// the N-th aggregate's column, anything else a column of the input.
type overScope struct {
	base  int
	n     int
	input expr.Scope
	types []types.Type
}

func (s *overScope) Resolve(ref *ast.ColumnRef) (expr.Column, error) {
	if len(ref.Parts) == 1 && strings.HasPrefix(ref.Parts[0], "$o") {
		if i, err := strconv.Atoi(ref.Parts[0][2:]); err == nil && i >= 0 && i < s.n {
			return expr.Column{Index: s.base + i, Type: s.types[i]}, nil
		}
	}
	return s.input.Resolve(ref)
}

// bindOverAggregate binds a select list with aggregate OVER calls, all
// over the same window, as an OverAggregate and a Calc over it.
func (p *Planner) bindOverAggregate(rel relation, s *ast.Select, calls []*ast.Call, exprs []ast.Expr, names []string) (Node, error) {
	first := calls[0]
	for _, c := range calls {
		switch {
		case isRankFunction(c):
			return nil, errorf(c.Pos, "%s() OVER cannot be mixed with OVER aggregates in one SELECT; rank in a subquery", strings.ToUpper(c.Name.Last()))
		case c.Over.Ref != "":
			return nil, errorf(c.Over.Pos, "named windows (OVER %s) are not supported yet", c.Over.Ref)
		case len(c.Name.Parts) != 1 || !slices.Contains([]string{"COUNT", "SUM", "AVG", "MIN", "MAX"}, strings.ToUpper(c.Name.Last())):
			return nil, errorf(c.Pos, "%s(...) OVER is not supported; OVER aggregates are COUNT, SUM, AVG, MIN and MAX", c.Name.Last())
		case c.Distinct:
			return nil, errorf(c.Pos, "DISTINCT in an OVER aggregate is not supported")
		case c.Filter != nil:
			return nil, errorf(c.Filter.Position(), "FILTER in an OVER aggregate is not supported")
		case c.Over.String() != first.Over.String():
			return nil, errorf(c.Over.Pos, "all OVER aggregates of a SELECT must use the same window: %s differs from %s", c.Over, first.Over)
		}
	}
	if s.Distinct {
		return nil, errorf(s.Pos, "SELECT DISTINCT with OVER aggregates is not supported; aggregate in a subquery first")
	}
	if len(s.GroupBy) > 0 || s.Having != nil || hasAggregateOutsideOver(exprs) {
		return nil, errorf(first.Pos, "OVER aggregates in a grouped SELECT are not supported; group in a subquery first")
	}
	scope := rel.scope()
	in := rel.node
	if s.Where != nil {
		if c, ok := findOver(s.Where); ok {
			return nil, errorf(c.Pos, "window functions are not allowed in WHERE")
		}
		n, err := p.passFilter(rel.node, scope, s.Where)
		if err != nil {
			return nil, err
		}
		in = n
	}
	if in.Updating() {
		return nil, errorf(first.Pos, "OVER aggregates take an insert-only input, but the input of %s(...) OVER is updating (it has retractions)", strings.ToUpper(first.Name.Last()))
	}
	w := first.Over
	node := &OverAggregate{Input: in}
	for _, e := range w.PartitionBy {
		c, err := overColumn(e, scope, "PARTITION BY", "an OVER aggregate")
		if err != nil {
			return nil, err
		}
		node.PartitionBy = append(node.PartitionBy, c)
	}
	if len(w.OrderBy) != 1 {
		return nil, errorf(w.Pos, "an OVER aggregate needs ORDER BY exactly one time attribute column (ascending)")
	}
	o := w.OrderBy[0]
	col, err := overColumn(o.Expr, scope, "ORDER BY", "an OVER aggregate")
	if err != nil {
		return nil, err
	}
	if col != in.Rowtime() || !isTimeAttribute(in, col) {
		return nil, errorf(o.Expr.Position(), "OVER windows must be ordered by an event-time attribute, and %s is not one", o.Expr)
	}
	if o.Desc {
		return nil, errorf(o.Expr.Position(), "OVER windows must be ordered ascending by their time attribute, not DESC")
	}
	node.OrderCol = col
	if node.Frame, err = p.overFrame(w); err != nil {
		return nil, err
	}
	// Arguments that are expressions are computed by a Calc that appends
	// them to the input's columns ($f4, ...).
	var extra []ast.Expr
	argCol := map[*ast.Call]int{}
	for _, c := range calls {
		if len(c.Args) != 1 || isStar(c.Args[0]) {
			continue
		}
		if _, ok := c.Args[0].(*ast.ColumnRef); !ok {
			argCol[c] = len(in.Fields()) + len(extra)
			extra = append(extra, c.Args[0])
		}
	}
	if len(extra) > 0 {
		if in, err = p.appendColumns(in, scope, extra); err != nil {
			return nil, err
		}
		node.Input = in
	}
	// The aggregates.
	inFields := in.Fields()
	fields := append([]types.Field(nil), inFields...)
	var aggTypes []types.Type
	for i, c := range calls {
		arg := -1
		spec := expr.AggSpec{Name: c.Name.Last(), Retract: !node.Frame.Unbounded}
		switch {
		case len(c.Args) == 1 && isStar(c.Args[0]):
		case len(c.Args) == 1:
			if r, ok := c.Args[0].(*ast.ColumnRef); ok {
				col, err := scope.Resolve(r)
				if err != nil {
					return nil, err
				}
				arg = col.Index
			} else {
				arg = argCol[c]
			}
			spec.Args = []types.Type{inFields[arg].Type}
		case len(c.Args) == 0 && strings.EqualFold(c.Name.Last(), "COUNT"):
		default:
			return nil, errorf(c.Pos, "%s takes 1 argument, got %d", strings.ToUpper(c.Name.Last()), len(c.Args))
		}
		fn, err := expr.NewAggregate(spec)
		if err != nil {
			return nil, errorf(c.Pos, "%v", err)
		}
		node.Aggs = append(node.Aggs, AggCall{Func: fn, Arg: arg, Filter: -1, Text: aggText(c, inFields, arg, -1)})
		fields = append(fields, types.Field{Name: "w0$o" + strconv.Itoa(i), Type: fn.Result})
		aggTypes = append(aggTypes, fn.Result)
	}
	node.fields, node.rowtime = fields, in.Rowtime()
	assignUID(node, "")
	// The select list over the aggregate's columns.
	post := make([]ast.Expr, len(exprs))
	for i, e := range exprs {
		r, err := rewrite(e, func(x ast.Expr) (ast.Expr, bool, error) {
			for j, c := range calls {
				if x == ast.Expr(c) {
					return &ast.ColumnRef{Pos: c.Pos, Parts: []string{"$o" + strconv.Itoa(j)}}, true, nil
				}
			}
			return nil, false, nil
		})
		if err != nil {
			return nil, err
		}
		post[i] = r
	}
	os := &overScope{base: len(inFields), n: len(calls), input: scope, types: aggTypes}
	if isIdentity(post, names, fields, os) {
		return node, nil
	}
	out, err := p.calc(node, os, nil, post, names)
	if err != nil {
		return nil, err
	}
	c := out.(*Calc)
	for i := range c.ProjText {
		for j := len(calls) - 1; j >= 0; j-- {
			c.ProjText[i] = strings.ReplaceAll(c.ProjText[i], "`$o"+strconv.Itoa(j)+"`", "w0$o"+strconv.Itoa(j))
		}
	}
	assignUID(c, "")
	return c, nil
}

// appendColumns plans a Calc that passes n's columns on where they are
// (so that scope still describes them, the rowtime included) and appends
// exprs as columns $f<i> (i their index).
func (p *Planner) appendColumns(n Node, scope expr.Tables, exprs []ast.Expr) (Node, error) {
	fs := n.Fields()
	c := &Calc{Input: n}
	c.rowtime = n.Rowtime()
	ids := make([]types.Field, len(fs))
	for i, f := range fs {
		ids[i] = types.Field{Name: "$" + strconv.Itoa(i), Type: f.Type}
	}
	for i, f := range fs {
		ce, err := p.compiler.Compile(&ast.ColumnRef{Pos: exprs[0].Position(), Parts: []string{"$" + strconv.Itoa(i)}}, expr.NewTable("", ids...))
		if err != nil {
			return nil, err
		}
		c.Projs = append(c.Projs, ce)
		c.ProjText = append(c.ProjText, f.Name)
		c.fields = append(c.fields, f)
	}
	for _, e := range exprs {
		ce, err := p.compiler.Compile(e, scope)
		if err != nil {
			return nil, err
		}
		name := "$f" + strconv.Itoa(len(c.fields))
		c.Projs = append(c.Projs, ce)
		c.ProjText = append(c.ProjText, e.String())
		c.fields = append(c.fields, types.Field{Name: name, Type: ce.Type})
	}
	assignUID(c, "")
	return c, nil
}

func isStar(e ast.Expr) bool {
	_, ok := e.(*ast.Star)
	return ok
}

// hasAggregateOutsideOver reports a plain aggregate call in exprs, not
// counting the OVER calls.
func hasAggregateOutsideOver(exprs []ast.Expr) bool {
	for _, e := range exprs {
		found := false
		walk(e, func(x ast.Expr) bool {
			if c, ok := x.(*ast.Call); ok && c.Over != nil {
				return false
			}
			if _, ok := isAggCall(x); ok {
				found = true
			}
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

// overFrame checks an OVER aggregate's frame: from UNBOUNDED PRECEDING,
// n PRECEDING (ROWS) or INTERVAL ... PRECEDING (RANGE) to CURRENT ROW.
// Without a frame it is RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW.
func (p *Planner) overFrame(w *ast.WindowSpec) (OverFrame, error) {
	f := w.Frame
	if f == nil {
		return OverFrame{Range: true, Unbounded: true}, nil
	}
	fr := OverFrame{Range: f.Unit == ast.FrameRange}
	if f.End != nil && f.End.Kind != ast.CurrentRow {
		return fr, errorf(f.End.Pos, "OVER windows end at CURRENT ROW; %s is not supported", f.End)
	}
	switch f.Start.Kind {
	case ast.UnboundedPreceding:
		fr.Unbounded = true
	case ast.CurrentRow:
		// A frame of the current row (and its peers for RANGE).
	case ast.Preceding:
		if fr.Range {
			ms, err := p.windowInterval(f.Start.Offset, "RANGE", "PRECEDING")
			if err != nil {
				return fr, err
			}
			fr.Preceding = ms
			break
		}
		c, err := p.compiler.Compile(f.Start.Offset, expr.Tables{})
		if err != nil {
			return fr, err
		}
		if !c.Constant || !c.Type.Kind.IsInteger() {
			return fr, errorf(f.Start.Offset.Position(), "ROWS PRECEDING takes a constant integer number of rows, not %s", f.Start.Offset)
		}
		v, err := c.Eval(nil)
		if err != nil || v.IsNull() || v.Int64() < 0 {
			return fr, errorf(f.Start.Offset.Position(), "ROWS PRECEDING takes a non-negative number of rows, not %s", f.Start.Offset)
		}
		fr.Preceding = v.Int64()
	default:
		return fr, errorf(f.Start.Pos, "OVER windows start at a PRECEDING bound; %s is not supported", f.Start)
	}
	return fr, nil
}
