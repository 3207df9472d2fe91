package planner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/types"
)

// LookupKey is one equality of a lookup join: a column of the lookup
// table equals an expression over the probe row.
type LookupKey struct {
	// Column is the lookup table's column.
	Column int
	// Probe computes the key from a probe row (the input's row), in the
	// type both sides compare in.
	Probe *expr.Compiled
	// ColumnCast converts the table's column to that type (nil: as it is);
	// it is evaluated over a row of the table.
	ColumnCast *expr.Compiled
	// Text is the probe expression as EXPLAIN prints it.
	Text string
}

// LookupJoin joins each row of its input (the probe side) with the rows
// of a lookup table whose key columns equal expressions of the probe row,
// as the row arrives: `JOIN t FOR SYSTEM_TIME AS OF probe.proctime`. The
// table is a bounded filesystem table that the operator reads whole when
// it opens and keeps in memory; it is static input, so it has no state
// and a restored job reads it again. Later changes to its files are not
// seen. Its output is updating when its input is; a LEFT join emits a
// probe row without a match padded with NULLs.
type LookupJoin struct {
	base
	Input Node
	Table *catalog.Table
	// Type is InnerJoin or LeftOuterJoin.
	Type JoinType
	Keys []LookupKey
	// Condition is the rest of the join condition over a joined row (the
	// input's columns, then the table's), or nil.
	Condition *expr.Compiled
	// Text is the rest of the condition as EXPLAIN prints it.
	Text string
}

// Inputs implements Node.
func (n *LookupJoin) Inputs() []Node { return []Node{n.Input} }

// Updating implements Node.
func (n *LookupJoin) Updating() bool { return n.Input.Updating() }
func (n *LookupJoin) name() string   { return "LookupJoin" }

func (n *LookupJoin) args() string {
	var keys []string
	tf := n.TableFields()
	for _, k := range n.Keys {
		keys = append(keys, tf[k.Column].Name+"="+k.Text)
	}
	s := fmt.Sprintf("table=[%s], joinType=[%s], lookup=[%s]", n.Table.Name, n.Type, strings.Join(keys, ", "))
	if n.Text != "" {
		s += ", where=[" + n.Text + "]"
	}
	return s + ", select=[" + fieldNames(n.fields) + "]"
}

// TableFields are the lookup table's columns, as a row of it holds them.
func (n *LookupJoin) TableFields() []types.Field { return fieldsOf(n.Table.Physical()) }

// isLookupJoin reports a join whose right side is `table FOR SYSTEM_TIME
// AS OF ...`.
func isLookupJoin(j *ast.Join) bool {
	t, ok := j.Right.(*ast.TableName)
	return ok && t.ForSystemTime != nil
}

// lookupJoin binds `left JOIN t FOR SYSTEM_TIME AS OF left.proctime ON
// keys`, and for an inner join the conjuncts of where as more of its
// condition.
func (p *Planner) lookupJoin(j *ast.Join, where ast.Expr) (relation, error) {
	r := j.Right.(*ast.TableName)
	typ := InnerJoin
	switch j.Kind {
	case ast.InnerJoin, ast.CommaJoin, ast.CrossJoin:
	case ast.LeftJoin:
		typ = LeftOuterJoin
	default:
		return relation{}, errorf(j.Pos, "a lookup join (FOR SYSTEM_TIME AS OF) is an INNER or LEFT join")
	}
	left, err := p.bindFrom(j.Left)
	if err != nil {
		return relation{}, err
	}
	ls := left.scope()
	nl := len(left.node.Fields())

	// AS OF names the probe side's processing-time attribute.
	asOf := r.ForSystemTime
	ref, ok := asOf.(*ast.ColumnRef)
	if !ok {
		return relation{}, errorf(asOf.Position(), "FOR SYSTEM_TIME AS OF needs a processing-time attribute (a PROCTIME() column) of the left side, not '%s'", asOf)
	}
	col, err := ls.Resolve(ref)
	if err != nil {
		return relation{}, err
	}
	if len(col.Path) > 0 || col.Index != proctimeOf(left.node) {
		what := "not a time attribute"
		if len(col.Path) == 0 && col.Index == left.node.Rowtime() {
			what = "an event-time attribute; joins AS OF event time (versioned tables) are not supported yet"
		}
		return relation{}, errorf(asOf.Position(), "FOR SYSTEM_TIME AS OF '%s': the column is %s; a lookup join needs the processing-time attribute (a PROCTIME() column) of the left side", ref, what)
	}

	// The lookup table: a bounded filesystem table, read whole.
	name := r.Name.Last()
	alias := name
	if r.Alias != nil {
		alias = r.Alias.Name
		if len(r.Alias.Columns) > 0 {
			return relation{}, errorf(r.Alias.Pos, "column aliases of a lookup table are not supported")
		}
	}
	if p.lookupCTE(name) != nil && len(r.Name.Parts) == 1 {
		return relation{}, errorf(r.Name.Pos, "'%s' is a WITH query; a lookup join (FOR SYSTEM_TIME AS OF) needs a bounded 'filesystem' table", name)
	}
	t, v, err := p.cat.Lookup(r.Name)
	if err != nil {
		return relation{}, err
	}
	if v != nil {
		return relation{}, errorf(r.Name.Pos, "'%s' is a view; a lookup join (FOR SYSTEM_TIME AS OF) needs a bounded 'filesystem' table", name)
	}
	if t.Connector.Name != "filesystem" {
		return relation{}, errorf(r.Name.Pos, "table '%s' cannot be a lookup table: connector '%s' is not a bounded source clink can read whole; a lookup join (FOR SYSTEM_TIME AS OF) reads its table when it starts, so the table must be a 'filesystem' table", name, t.Connector.Name)
	}
	if len(t.Physical()) != len(t.Columns) {
		return relation{}, errorf(r.Name.Pos, "lookup table '%s' has computed columns, which a lookup join does not support yet", name)
	}
	tf := fieldsOf(t.Physical())
	rt := expr.Table{Name: alias, Columns: tf, Offset: nl}
	scope := slices.Clone(ls)
	for _, u := range ls {
		if u.Name != "" && u.Name == alias {
			return relation{}, errorf(r.Pos, "table name '%s' is used twice in the FROM clause; give one of them an alias", alias)
		}
	}
	scope = append(scope, rt)

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
	lj := &LookupJoin{Input: left.node, Table: t, Type: typ}
	var rest []ast.Expr
	for _, c := range conds {
		k, ok, err := p.lookupKey(c, scope, ls, nl, tf)
		if err != nil {
			return relation{}, err
		}
		if ok && !slices.ContainsFunc(lj.Keys, func(o LookupKey) bool { return o.Column == k.Column }) {
			lj.Keys = append(lj.Keys, k)
			continue
		}
		rest = append(rest, c)
	}
	if len(lj.Keys) == 0 {
		pos := j.Pos
		if j.On != nil {
			pos = j.On.Position()
		}
		return relation{}, errorf(pos, "the lookup join of '%s' needs an equality condition between a column of '%s' and an expression of the left side, e.g. ON %s.%s = ...", alias, alias, alias, tf[0].Name)
	}
	if c := and(rest); c != nil {
		if lj.Condition, err = p.compiler.Compile(c, scope); err != nil {
			return relation{}, err
		}
		lj.Text = c.String()
	}

	rf := slices.Clone(tf)
	if typ == LeftOuterJoin {
		for i := range rf {
			rf[i].Type = rf[i].Type.WithNotNull(false)
		}
	}
	lj.fields = uniqueNames(append(slices.Clone(left.node.Fields()), rf...))
	lj.rowtime = left.node.Rowtime()
	assignUID(lj, t.Name)
	out := slices.Clone(ls)
	rt.Columns = rf
	out = append(out, rt)
	return relation{node: lj, tables: out}, nil
}

// lookupKey makes a key of c when it is `table column = expression of the
// left side` (either way round).
func (p *Planner) lookupKey(c ast.Expr, scope, ls expr.Tables, nl int, tf []types.Field) (LookupKey, bool, error) {
	b, ok := c.(*ast.Binary)
	if !ok || b.Op != ast.OpEq {
		return LookupKey{}, false, nil
	}
	ml, err := sidesOf(b.L, scope, nl)
	if err != nil {
		return LookupKey{}, false, err
	}
	mr, err := sidesOf(b.R, scope, nl)
	if err != nil {
		return LookupKey{}, false, err
	}
	probe, colRef := b.L, b.R
	switch {
	case ml == 1 && mr == 2:
	case ml == 2 && mr == 1:
		probe, colRef = b.R, b.L
	default:
		return LookupKey{}, false, nil
	}
	ref, ok := colRef.(*ast.ColumnRef)
	if !ok {
		return LookupKey{}, false, nil
	}
	rc, err := scope.Resolve(ref)
	if err != nil || len(rc.Path) > 0 {
		return LookupKey{}, false, err
	}
	k := LookupKey{Column: rc.Index - nl, Text: probe.String()}
	pc, err := p.compiler.Compile(probe, ls)
	if err != nil {
		return LookupKey{}, false, err
	}
	pt, ct := pc.Type.WithNotNull(false), tf[k.Column].Type.WithNotNull(false)
	k.Probe = pc
	if pt.String() == ct.String() {
		return k, true, nil
	}
	// Keys are compared by their encoding: both sides in the type
	// COALESCE of the two would have.
	common, err := p.compiler.Compile(&ast.Call{Pos: b.Pos, Name: &ast.ObjectName{Pos: b.Pos, Parts: []string{"COALESCE"}}, Args: []ast.Expr{probe, ref}}, scope)
	if err != nil {
		return LookupKey{}, false, nil
	}
	want := common.Type.WithNotNull(false)
	dt, err := parser.ParseDataType(want.String())
	if err != nil {
		return LookupKey{}, false, errorf(b.Pos, "comparing %s with %s in a lookup key: %v", pt, ct, err)
	}
	if pt.String() != want.String() {
		if k.Probe, err = p.compiler.Compile(&ast.Cast{Pos: b.Pos, X: probe, Type: dt}, ls); err != nil {
			return LookupKey{}, false, err
		}
	}
	if ct.String() != want.String() {
		ids := make([]types.Field, len(tf))
		for i, f := range tf {
			ids[i] = types.Field{Name: "$" + strconv.Itoa(i), Type: f.Type}
		}
		x := &ast.ColumnRef{Pos: b.Pos, Parts: []string{ids[k.Column].Name}}
		if k.ColumnCast, err = p.compiler.Compile(&ast.Cast{Pos: b.Pos, X: x, Type: dt}, expr.NewTable("", ids...)); err != nil {
			return LookupKey{}, false, err
		}
	}
	return k, true, nil
}
