package planner

import (
	"slices"
	"strconv"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/types"
)

// isAggCall reports an aggregate function call (not a window function).
func isAggCall(e ast.Expr) (*ast.Call, bool) {
	c, ok := e.(*ast.Call)
	if !ok || c.Over != nil || len(c.Name.Parts) != 1 || !expr.IsAggregate(c.Name.Last()) {
		return nil, false
	}
	return c, true
}

// walk calls f on e and its sub-expressions (not into subqueries) until f
// returns false.
func walk(e ast.Expr, f func(ast.Expr) bool) bool {
	if e == nil {
		return true
	}
	if !f(e) {
		return false
	}
	for _, c := range children(e) {
		if !walk(c, f) {
			return false
		}
	}
	return true
}

func hasAggregate(e ast.Expr) bool {
	found := false
	walk(e, func(x ast.Expr) bool {
		if _, ok := isAggCall(x); ok {
			found = true
		}
		return !found
	})
	return found
}

func findOver(e ast.Expr) (*ast.Call, bool) {
	var c *ast.Call
	walk(e, func(x ast.Expr) bool {
		if call, ok := x.(*ast.Call); ok && call.Over != nil {
			c = call
		}
		return c == nil
	})
	return c, c != nil
}

func children(e ast.Expr) []ast.Expr {
	switch e := e.(type) {
	case *ast.Unary:
		return []ast.Expr{e.X}
	case *ast.Binary:
		return []ast.Expr{e.L, e.R}
	case *ast.Is:
		return []ast.Expr{e.X}
	case *ast.IsDistinctFrom:
		return []ast.Expr{e.L, e.R}
	case *ast.Between:
		return []ast.Expr{e.X, e.Lo, e.Hi}
	case *ast.InList:
		return append([]ast.Expr{e.X}, e.List...)
	case *ast.Like:
		return []ast.Expr{e.X, e.Pattern, e.Escape}
	case *ast.Case:
		es := []ast.Expr{e.Operand}
		for _, w := range e.Whens {
			es = append(es, w.Cond, w.Result)
		}
		return append(es, e.Else)
	case *ast.Cast:
		return []ast.Expr{e.X}
	case *ast.Extract:
		return []ast.Expr{e.X}
	case *ast.FloorCeil:
		return []ast.Expr{e.X}
	case *ast.Trim:
		return []ast.Expr{e.Chars, e.X}
	case *ast.Substring:
		return []ast.Expr{e.X, e.From, e.For}
	case *ast.Position:
		return []ast.Expr{e.Needle, e.Haystack}
	case *ast.Call:
		return append(append([]ast.Expr(nil), e.Args...), e.Filter)
	case *ast.Index:
		return []ast.Expr{e.X, e.Index}
	case *ast.FieldAccess:
		return []ast.Expr{e.X}
	case *ast.ArrayCtor:
		return e.Items
	case *ast.MapCtor:
		return e.Items
	case *ast.Row:
		return e.Items
	}
	return nil
}

// rewrite returns a copy of e in which f replaced sub-trees: f returns the
// replacement and true, or false to descend. Nodes without replaced parts
// are shared, never modified (the tree is immutable).
func rewrite(e ast.Expr, f func(ast.Expr) (ast.Expr, bool, error)) (ast.Expr, error) {
	if e == nil {
		return nil, nil
	}
	if r, ok, err := f(e); err != nil || ok {
		return r, err
	}
	var err error
	rw := func(x ast.Expr) ast.Expr {
		if err != nil || x == nil {
			return x
		}
		var r ast.Expr
		r, err = rewrite(x, f)
		return r
	}
	rws := func(xs []ast.Expr) []ast.Expr {
		out := make([]ast.Expr, len(xs))
		for i, x := range xs {
			out[i] = rw(x)
		}
		return out
	}
	var out ast.Expr
	switch e := e.(type) {
	case *ast.Unary:
		c := *e
		c.X = rw(e.X)
		out = &c
	case *ast.Binary:
		c := *e
		c.L, c.R = rw(e.L), rw(e.R)
		out = &c
	case *ast.Is:
		c := *e
		c.X = rw(e.X)
		out = &c
	case *ast.IsDistinctFrom:
		c := *e
		c.L, c.R = rw(e.L), rw(e.R)
		out = &c
	case *ast.Between:
		c := *e
		c.X, c.Lo, c.Hi = rw(e.X), rw(e.Lo), rw(e.Hi)
		out = &c
	case *ast.InList:
		c := *e
		c.X, c.List = rw(e.X), rws(e.List)
		out = &c
	case *ast.Like:
		c := *e
		c.X, c.Pattern, c.Escape = rw(e.X), rw(e.Pattern), rw(e.Escape)
		out = &c
	case *ast.Case:
		c := *e
		c.Operand, c.Else = rw(e.Operand), rw(e.Else)
		c.Whens = make([]*ast.When, len(e.Whens))
		for i, w := range e.Whens {
			c.Whens[i] = &ast.When{Pos: w.Pos, Cond: rw(w.Cond), Result: rw(w.Result)}
		}
		out = &c
	case *ast.Cast:
		c := *e
		c.X = rw(e.X)
		out = &c
	case *ast.Extract:
		c := *e
		c.X = rw(e.X)
		out = &c
	case *ast.FloorCeil:
		c := *e
		c.X = rw(e.X)
		out = &c
	case *ast.Trim:
		c := *e
		c.Chars, c.X = rw(e.Chars), rw(e.X)
		out = &c
	case *ast.Substring:
		c := *e
		c.X, c.From, c.For = rw(e.X), rw(e.From), rw(e.For)
		out = &c
	case *ast.Position:
		c := *e
		c.Needle, c.Haystack = rw(e.Needle), rw(e.Haystack)
		out = &c
	case *ast.Call:
		c := *e
		c.Args, c.Filter = rws(e.Args), rw(e.Filter)
		out = &c
	case *ast.Index:
		c := *e
		c.X, c.Index = rw(e.X), rw(e.Index)
		out = &c
	case *ast.FieldAccess:
		c := *e
		c.X = rw(e.X)
		out = &c
	case *ast.ArrayCtor:
		c := *e
		c.Items = rws(e.Items)
		out = &c
	case *ast.MapCtor:
		c := *e
		c.Items = rws(e.Items)
		out = &c
	case *ast.Row:
		c := *e
		c.Items = rws(e.Items)
		out = &c
	default:
		out = e
	}
	return out, err
}

// groupScope resolves the rewritten select list and HAVING of a grouped
// query: `$gI` is group expression I, `$aJ` aggregate J. Any other column
// the input knows is one that is not being grouped.
type groupScope struct {
	cols  map[string]expr.Column
	input expr.Scope
}

func (s *groupScope) Resolve(ref *ast.ColumnRef) (expr.Column, error) {
	if len(ref.Parts) == 1 {
		if c, ok := s.cols[ref.Parts[0]]; ok {
			return c, nil
		}
	}
	if _, err := s.input.Resolve(ref); err != nil {
		return expr.Column{}, err
	}
	return expr.Column{}, errorf(ref.Pos, "expression '%s' is not being grouped", strings.Join(ref.Parts, "."))
}

// aggregate plans a grouped SELECT: a Calc computing the group keys and
// the aggregates' arguments, the GroupAggregate, and a Calc evaluating
// HAVING and the select list over keys and results.
func (p *Planner) aggregate(rel relation, scope expr.Tables, s *ast.Select, exprs []ast.Expr, names []string) (Node, error) {
	s, exprs, legacy, err := p.groupWindow(rel, s, exprs)
	if err != nil {
		return nil, err
	}
	for _, g := range s.GroupBy {
		switch g := g.(type) {
		case *ast.GroupingSets, *ast.Rollup, *ast.Cube:
			return nil, errorf(g.Position(), "GROUPING SETS, ROLLUP and CUBE are not supported yet")
		case *ast.Row:
			if len(g.Items) == 0 {
				return nil, errorf(g.Position(), "the empty grouping set () is not supported yet")
			}
		}
		if hasAggregate(g) {
			return nil, errorf(g.Position(), "aggregate functions are not allowed in GROUP BY")
		}
	}
	var aggs []*ast.Call
	groups := s.GroupBy
	replace := func(e ast.Expr) (ast.Expr, bool, error) {
		for i, g := range groups {
			if ast.Equal(e, g) {
				return &ast.ColumnRef{Pos: e.Position(), Parts: []string{"$g" + strconv.Itoa(i)}}, true, nil
			}
		}
		if c, ok := isAggCall(e); ok {
			for _, a := range c.Args {
				if hasAggregate(a) {
					return nil, false, errorf(a.Position(), "aggregate function calls cannot be nested")
				}
			}
			if c.Filter != nil && hasAggregate(c.Filter) {
				return nil, false, errorf(c.Filter.Position(), "aggregate function calls cannot be nested")
			}
			j := -1
			for k, a := range aggs {
				if ast.Equal(a, c) {
					j = k
				}
			}
			if j < 0 {
				j = len(aggs)
				aggs = append(aggs, c)
			}
			return &ast.ColumnRef{Pos: e.Position(), Parts: []string{"$a" + strconv.Itoa(j)}}, true, nil
		}
		return nil, false, nil
	}
	post := make([]ast.Expr, len(exprs))
	for i, e := range exprs {
		r, err := rewrite(e, replace)
		if err != nil {
			return nil, err
		}
		post[i] = r
	}
	var having ast.Expr
	if s.Having != nil {
		r, err := rewrite(s.Having, replace)
		if err != nil {
			return nil, err
		}
		having = r
	}

	// A GROUP BY window_start, window_end over a window TVF is a window
	// aggregation: winRole[i] says which window column group i is (or -1
	// for a key), keys are the other groups.
	tvf, windowed := rel.node.(*WindowTableFunction)
	if legacy != nil {
		tvf, windowed = legacy, true
	} else if windowed && !sessionKeysMatch(tvf, groups, rel.name) {
		// As in Flink: grouping a SESSION TVF by other keys than its
		// PARTITION BY is a regular aggregation of its rows.
		windowed = false
	}
	winRole := make([]int, len(groups))
	keyGroups := groups
	preIn, preScope := rel.node, scope
	var attached *WindowAggregate
	if !windowed {
		if attached = attachedWindow(rel, groups, winRole); attached != nil {
			keyGroups = nil
			for i, g := range groups {
				if winRole[i] < 0 {
					keyGroups = append(keyGroups, g)
				}
			}
		}
	}
	if windowed {
		keyGroups = nil
		has := [3]bool{}
		for i, g := range groups {
			winRole[i] = -1
			if r, ok := g.(*ast.ColumnRef); ok && (len(r.Parts) == 1 || len(r.Parts) == 2 && r.Parts[0] == rel.name) {
				switch r.Parts[len(r.Parts)-1] {
				case windowStart:
					winRole[i] = 0
				case windowEnd:
					winRole[i] = 1
				case windowTime:
					winRole[i] = 2
				}
			}
			if winRole[i] >= 0 {
				has[winRole[i]] = true
			} else {
				keyGroups = append(keyGroups, g)
			}
		}
		if !has[0] || !has[1] {
			return nil, errorf(s.Pos, "an aggregation over the window table function %s must GROUP BY window_start and window_end", tvf.Window.Kind)
		}
		check := append(append([]ast.Expr{s.Where}, keyGroups...), nil)
		for _, a := range aggs {
			check = append(check, a.Args...)
			check = append(check, a.Filter)
		}
		for _, e := range check {
			if r := windowColumnRef(e); r != nil {
				return nil, errorf(r.Pos, "%s can only be grouped by and selected in a window aggregation, not used in WHERE, other keys or aggregate arguments", strings.Join(r.Parts, "."))
			}
		}
		preIn = tvf.Input
		if tvf.timeRef == nil {
			preScope = expr.Tables{{Name: rel.name, Columns: tvf.Input.Fields()}}
		}
	}

	// The Calc before the aggregation: keys, then per aggregate its
	// argument and its FILTER condition.
	var pre []ast.Expr
	var preNames []string
	for i, g := range keyGroups {
		pre = append(pre, g)
		name := g.String()
		if r, ok := g.(*ast.ColumnRef); ok {
			name = r.Parts[len(r.Parts)-1]
		} else {
			name = "$f" + strconv.Itoa(i)
		}
		preNames = append(preNames, name)
	}
	// An argument or FILTER condition written more than once is one
	// column, computed once (as Flink's planner does): the DISTINCT
	// aggregates over one column then share an entry per value
	// (planDistinct). Not so an expression that reads the clock or calls
	// a non-deterministic function: each occurrence is its own value.
	shared := map[string]int{}
	column := func(e ast.Expr) int {
		text := e.String()
		if i, ok := shared[text]; ok {
			return i
		}
		pre = append(pre, e)
		preNames = append(preNames, "$f"+strconv.Itoa(len(pre)-1))
		if c, err := p.compiler.Compile(e, preScope); err == nil && c.Deterministic {
			shared[text] = len(pre) - 1
		}
		return len(pre) - 1
	}
	refs := make([]argRef, len(aggs))
	for j, a := range aggs {
		refs[j] = argRef{-1, -1}
		if len(a.Args) == 1 {
			if _, star := a.Args[0].(*ast.Star); !star {
				refs[j].arg = column(a.Args[0])
			}
		} else if len(a.Args) > 1 {
			return nil, errorf(a.Pos, "aggregate function %s with %d arguments is not supported", a.Name.Last(), len(a.Args))
		}
		if a.Filter != nil {
			refs[j].filter = column(a.Filter)
		}
	}
	if windowed {
		var timeRef ast.Expr = &ast.ColumnRef{Pos: s.Pos, Parts: []string{tvf.Input.Fields()[tvf.TimeCol].Name}}
		if tvf.timeRef != nil {
			timeRef = tvf.timeRef
		}
		pre = append(pre, timeRef)
		preNames = append(preNames, tvf.Input.Fields()[tvf.TimeCol].Name)
	}
	if attached != nil {
		// The window's bounds, last: window_start, then window_end.
		for role := range 2 {
			i := slices.Index(winRole, role)
			pre = append(pre, groups[i])
			r := groups[i].(*ast.ColumnRef)
			preNames = append(preNames, r.Parts[len(r.Parts)-1])
		}
	}
	in, err := p.calc(preIn, preScope, s.Where, pre, preNames)
	if err != nil {
		return nil, err
	}
	if windowed {
		w := &WindowAggregate{Input: in, Window: tvf.Window, TimeCol: len(in.Fields()) - 1, Legacy: tvf.timeRef != nil}
		return p.windowAggregate(w, scope, s, aggs, refs, groups, winRole, post, having, names)
	}
	if attached != nil {
		n := len(in.Fields())
		attached.Input, attached.StartCol, attached.EndCol, attached.TimeCol = in, n-2, n-1, n-1
		return p.windowAggregate(attached, scope, s, aggs, refs, groups, winRole, post, having, names)
	}
	g := &GroupAggregate{Input: in}
	g.rowtime = -1
	cols := map[string]expr.Column{}
	for i := range groups {
		g.Keys = append(g.Keys, i)
		f := in.Fields()[i]
		cols["$g"+strconv.Itoa(i)] = expr.Column{Index: i, Type: f.Type}
		g.fields = append(g.fields, f)
	}
	if g.Aggs, err = aggCalls(in, aggs, refs); err != nil {
		return nil, err
	}
	for j, a := range g.Aggs {
		name := "$a" + strconv.Itoa(j)
		cols[name] = expr.Column{Index: len(groups) + j, Type: a.Func.Result}
		g.fields = append(g.fields, types.Field{Name: name, Type: a.Func.Result})
	}
	return p.postCalc(g, g.fields, len(groups), cols, scope, having, post, names)
}

// attachedWindow finds, among the groups of an aggregation over rel, the
// window_start and window_end (and maybe window_time) of one event-time
// window aggregation below rel, passed through projections: grouped by
// them, the aggregation is a window aggregation over the same windows,
// each row in the window its bounds give (Flink's attached windowing), and
// its result is insert-only. It sets winRole as the aggregate's planning
// does for a window TVF and returns the WindowAggregate to fill in, or nil.
func attachedWindow(rel relation, groups []ast.Expr, winRole []int) *WindowAggregate {
	if rel.node.Updating() {
		return nil
	}
	var origin Node
	var spec WindowSpec
	has := [3]bool{}
	for i, g := range groups {
		winRole[i] = -1
		r, ok := g.(*ast.ColumnRef)
		if !ok || len(r.Parts) > 2 || len(r.Parts) == 2 && r.Parts[0] != rel.name {
			continue
		}
		col, n := -1, 0
		for k, f := range rel.node.Fields() {
			if f.Name == r.Parts[len(r.Parts)-1] {
				col, n = k, n+1
			}
		}
		if n != 1 {
			continue // none, or ambiguous: the binder says so
		}
		o, oc := traceColumn(rel.node, col)
		wa, ok := o.(*WindowAggregate)
		if !ok {
			continue
		}
		sp, role := windowRole(wa, oc)
		if role < 0 || sp.Kind == Session || origin != nil && origin != o || has[role] {
			continue
		}
		origin, spec, winRole[i], has[role] = o, sp, role, true
	}
	if !has[0] || !has[1] {
		for i := range winRole {
			winRole[i] = -1
		}
		return nil
	}
	return &WindowAggregate{Window: spec, Attached: true}
}

// postCalc names an aggregation's results after the select items that are
// exactly an aggregate (for EXPLAIN; aggregate j is column aggBase+j of
// fields, which are g's), assigns g's uid, and plans the Calc evaluating
// HAVING and the select list over g's columns.
func (p *Planner) postCalc(g Node, fields []types.Field, aggBase int, cols map[string]expr.Column, scope expr.Tables, having ast.Expr, post []ast.Expr, names []string) (Node, error) {
	for i, e := range post {
		if r, ok := e.(*ast.ColumnRef); ok && strings.HasPrefix(r.Parts[0], "$a") {
			j, _ := strconv.Atoi(r.Parts[0][2:])
			fields[aggBase+j].Name = names[i]
		}
	}
	assignUID(g, "")
	ps := &groupScope{cols: cols, input: scope}
	out, err := p.calc(g, ps, having, post, names)
	if err != nil {
		return nil, err
	}
	// EXPLAIN shows the post projection over the aggregate's column names.
	c := out.(*Calc)
	var repl []string
	for name, col := range cols {
		repl = append(repl, "`"+name+"`", fields[col.Index].Name)
	}
	r := strings.NewReplacer(repl...)
	for i := range c.ProjText {
		c.ProjText[i] = r.Replace(c.ProjText[i])
	}
	if having != nil {
		c.FilterText = r.Replace(c.FilterText)
	}
	assignUID(c, "")
	return c, nil
}

// argRef locates an aggregate's argument and FILTER condition in the
// columns of the Calc before the aggregation (-1: none).
type argRef struct{ arg, filter int }

// aggCalls builds the aggregate functions of aggs over in's columns.
func aggCalls(in Node, aggs []*ast.Call, refs []argRef) ([]AggCall, error) {
	var calls []AggCall
	for j, a := range aggs {
		spec := expr.AggSpec{Name: a.Name.Last(), Distinct: a.Distinct, Retract: in.Updating()}
		if refs[j].arg >= 0 {
			spec.Args = []types.Type{in.Fields()[refs[j].arg].Type}
		}
		if refs[j].filter >= 0 {
			if k := in.Fields()[refs[j].filter].Type.Kind; k != types.KindBoolean {
				return nil, errorf(a.Filter.Position(), "the FILTER condition of %s must be BOOLEAN, not %s", a.Name.Last(), k)
			}
		}
		fn, err := expr.NewAggregate(spec)
		if err != nil {
			return nil, errorf(a.Pos, "%v", err)
		}
		calls = append(calls, AggCall{Func: fn, Arg: refs[j].arg, Filter: refs[j].filter, Text: aggText(a, in.Fields(), refs[j].arg, refs[j].filter)})
	}
	return calls, nil
}

// aggText prints an aggregate call over its input columns, as EXPLAIN
// shows it: COUNT(*), SUM(price), COUNT(DISTINCT user).
func aggText(a *ast.Call, in []types.Field, arg, filter int) string {
	var b strings.Builder
	b.WriteString(strings.ToUpper(a.Name.Last()))
	b.WriteString("(")
	if a.Distinct {
		b.WriteString("DISTINCT ")
	}
	if arg < 0 {
		b.WriteString("*")
	} else {
		b.WriteString(in[arg].Name)
	}
	b.WriteString(")")
	if filter >= 0 {
		b.WriteString(" FILTER " + in[filter].Name)
	}
	return b.String()
}
