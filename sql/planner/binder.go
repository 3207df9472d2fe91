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

// Planner binds and plans the statements of one script.
type Planner struct {
	cat      *catalog.Catalog
	compiler *expr.Compiler
	// ctes are the WITH queries in scope, innermost last.
	ctes []map[string]*ast.CTE
	// viewDepth guards against a view that (indirectly) reads itself.
	viewDepth int
	sinkUIDs  map[string]int
	sinks     []*Sink
}

// New returns a planner over cat; compiler holds the session settings
// (time zone, user functions) and may be nil.
func New(cat *catalog.Catalog, compiler *expr.Compiler) *Planner {
	if compiler == nil {
		compiler = &expr.Compiler{}
	}
	return &Planner{cat: cat, compiler: compiler, sinkUIDs: map[string]int{}}
}

// Sinks returns every sink planned so far: the job.
func (p *Planner) Sinks() []*Sink { return p.sinks }

func errorf(pos ast.Pos, format string, args ...any) error {
	return &types.Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// relation is a bound FROM item: its plan and the name its columns are
// qualified with. A join's relation has the tables of both sides in
// tables (their columns side by side in the node's rows) and no name.
type relation struct {
	node   Node
	name   string
	tables expr.Tables
}

func (r relation) scope() expr.Tables {
	if r.tables != nil {
		return r.tables
	}
	return expr.Tables{{Name: r.name, Columns: r.node.Fields()}}
}

// BindView validates a view's query and returns its columns.
func (p *Planner) BindView(cv *ast.CreateView) ([]types.Field, error) {
	n, err := p.bindQuery(cv.Query)
	if err != nil {
		return nil, err
	}
	fields := slices.Clone(n.Fields())
	if len(cv.Columns) > 0 {
		if len(cv.Columns) != len(fields) {
			return nil, errorf(cv.Name.Pos, "view '%s' names %d columns but its query has %d", cv.Name.Last(), len(cv.Columns), len(fields))
		}
		for i, c := range cv.Columns {
			fields[i].Name = c.Name
		}
	}
	return fields, nil
}

// PlanQuery plans a query on its own (EXPLAIN SELECT, a bare SELECT).
func (p *Planner) PlanQuery(q *ast.Query) (Node, error) { return p.bindQuery(q) }

func (p *Planner) bindQuery(q *ast.Query) (Node, error) {
	if len(q.OrderBy) > 0 {
		return nil, errorf(q.OrderBy[0].Pos, "ORDER BY is not supported in a streaming query unless it orders by a time attribute, which clink does not support yet")
	}
	if q.Limit != nil || q.Offset != nil {
		pos := ast.Pos{}
		if q.Limit != nil {
			pos = q.Limit.Position()
		} else {
			pos = q.Offset.Position()
		}
		return nil, errorf(pos, "LIMIT and OFFSET are not supported yet")
	}
	if len(q.With) > 0 {
		m := map[string]*ast.CTE{}
		for _, c := range q.With {
			if _, dup := m[c.Name.Name]; dup {
				return nil, errorf(c.Name.Pos, "WITH query '%s' is defined twice", c.Name.Name)
			}
			m[c.Name.Name] = c
		}
		p.ctes = append(p.ctes, m)
		defer func() { p.ctes = p.ctes[:len(p.ctes)-1] }()
	}
	return p.bindBody(q.Body)
}

func (p *Planner) bindBody(b ast.QueryBody) (Node, error) {
	switch b := b.(type) {
	case *ast.Select:
		return p.bindSelect(b)
	case *ast.Query:
		return p.bindQuery(b)
	case *ast.SetOp:
		return p.bindSetOp(b)
	case *ast.Values:
		return nil, errorf(b.Pos, "VALUES is not supported yet; use a datagen table")
	}
	return nil, errorf(b.Position(), "unsupported query")
}

func setOpName(s *ast.SetOp) string {
	if s.All {
		return s.Op.String() + " ALL"
	}
	return s.Op.String()
}

func (p *Planner) lookupCTE(name string) *ast.CTE {
	for i := len(p.ctes) - 1; i >= 0; i-- {
		if c, ok := p.ctes[i][name]; ok {
			return c
		}
	}
	return nil
}

func (p *Planner) bindFrom(ref ast.TableRef) (relation, error) {
	switch r := ref.(type) {
	case *ast.TableName:
		if r.ForSystemTime != nil {
			return relation{}, errorf(r.ForSystemTime.Position(), "FOR SYSTEM_TIME AS OF is supported only on the right side of a JOIN (a lookup join)")
		}
		name := r.Name.Last()
		alias := name
		if r.Alias != nil {
			alias = r.Alias.Name
		}
		var n Node
		var err error
		if c := p.lookupCTE(name); c != nil && len(r.Name.Parts) == 1 {
			n, err = p.bindAliased(c.Query, c.Columns, r.Name.Pos)
		} else {
			var t *catalog.Table
			var v *catalog.View
			t, v, err = p.cat.Lookup(r.Name)
			switch {
			case err != nil:
			case v != nil:
				if p.viewDepth > 32 {
					return relation{}, errorf(r.Pos, "view '%s' refers to itself", name)
				}
				p.viewDepth++
				n, err = p.bindQuery(v.Query)
				p.viewDepth--
				if err == nil {
					n, err = p.rename(n, v.Columns, r.Pos)
				}
			default:
				n, err = p.scan(t, r.Pos)
			}
		}
		if err != nil {
			return relation{}, err
		}
		if r.Alias != nil && len(r.Alias.Columns) > 0 {
			fs := make([]types.Field, len(r.Alias.Columns))
			if len(fs) != len(n.Fields()) {
				return relation{}, errorf(r.Alias.Pos, "alias '%s' names %d columns but '%s' has %d", alias, len(fs), name, len(n.Fields()))
			}
			for i, c := range r.Alias.Columns {
				fs[i] = types.Field{Name: c.Name, Type: n.Fields()[i].Type}
			}
			if n, err = p.rename(n, fs, r.Alias.Pos); err != nil {
				return relation{}, err
			}
		}
		return relation{node: n, name: alias}, nil
	case *ast.DerivedTable:
		if r.Lateral {
			return relation{}, errorf(r.Pos, "LATERAL subqueries are not supported yet")
		}
		var cols []*ast.Ident
		alias := ""
		if r.Alias != nil {
			cols, alias = r.Alias.Columns, r.Alias.Name
		}
		n, err := p.bindAliased(r.Query, cols, r.Pos)
		if err != nil {
			return relation{}, err
		}
		return relation{node: n, name: alias}, nil
	case *ast.Join:
		return p.bindJoin(r)
	case *ast.TableFunction:
		return p.windowTVF(r)
	case *ast.Unnest:
		return relation{}, errorf(r.Pos, "UNNEST is not supported yet")
	}
	return relation{}, errorf(ref.Position(), "unsupported FROM item")
}

// bindAliased binds a subquery and renames its columns when a column
// list is given.
func (p *Planner) bindAliased(q *ast.Query, cols []*ast.Ident, pos ast.Pos) (Node, error) {
	n, err := p.bindQuery(q)
	if err != nil || len(cols) == 0 {
		return n, err
	}
	if len(cols) != len(n.Fields()) {
		return nil, errorf(pos, "%d column names given for a query of %d columns", len(cols), len(n.Fields()))
	}
	fs := slices.Clone(n.Fields())
	for i, c := range cols {
		fs[i].Name = c.Name
	}
	return p.rename(n, fs, pos)
}

// rename puts a projection with new column names over n (no-op names
// are skipped).
func (p *Planner) rename(n Node, fields []types.Field, pos ast.Pos) (Node, error) {
	same := true
	for i, f := range n.Fields() {
		if f.Name != fields[i].Name {
			same = false
		}
	}
	if same {
		return n, nil
	}
	scope := expr.NewTable("", n.Fields()...)
	var exprs []ast.Expr
	for _, f := range n.Fields() {
		exprs = append(exprs, &ast.ColumnRef{Pos: pos, Parts: []string{f.Name}})
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return p.calc(n, scope, nil, exprs, names)
}

// scan plans reading a table: the source, its computed columns and its
// watermark.
func (p *Planner) scan(t *catalog.Table, pos ast.Pos) (Node, error) {
	if !t.Connector.Source {
		return nil, errorf(pos, "table '%s' cannot be read: connector '%s' is a sink only", t.Name, t.Connector.Name)
	}
	s := &Scan{Table: t}
	s.rowtime = -1
	for _, c := range t.Physical() {
		s.fields = append(s.fields, types.Field{Name: c.Name, Type: c.Type})
	}
	assignUID(s, t.Name)
	var n Node = s
	if len(s.fields) != len(t.Columns) {
		scope := expr.NewTable(t.Name, s.fields...)
		var exprs []ast.Expr
		var names []string
		for _, c := range t.Columns {
			names = append(names, c.Name)
			if c.Computed != nil {
				exprs = append(exprs, c.Computed)
			} else {
				exprs = append(exprs, &ast.ColumnRef{Pos: c.Pos, Parts: []string{c.Name}})
			}
		}
		var err error
		if n, err = p.calc(n, scope, nil, exprs, names); err != nil {
			return nil, err
		}
	}
	if wm := t.Watermark; wm != nil {
		w := &WatermarkAssigner{Input: n, DelayMs: wm.DelayMs, Text: wm.Expr.String()}
		w.fields, w.rowtime = n.Fields(), wm.Column
		assignUID(w, t.Name)
		n = w
	}
	return n, nil
}

// calc plans a filter and projections of exprs (over scope, which
// describes n's rows) named names.
func (p *Planner) calc(n Node, scope expr.Scope, where ast.Expr, exprs []ast.Expr, names []string) (Node, error) {
	c := &Calc{Input: n}
	c.rowtime = -1
	if where != nil {
		f, err := p.compiler.Compile(where, scope)
		if err != nil {
			return nil, err
		}
		if f.Type.Kind != types.KindBoolean && f.Type.Kind != types.KindNull {
			return nil, errorf(where.Position(), "the WHERE condition must be BOOLEAN, not %s", f.Type)
		}
		c.Filter, c.FilterText = f, where.String()
	}
	for i, e := range exprs {
		ce, err := p.compiler.Compile(e, scope)
		if err != nil {
			return nil, err
		}
		c.Projs = append(c.Projs, ce)
		c.ProjText = append(c.ProjText, e.String())
		typ := ce.Type
		if ref, ok := e.(*ast.ColumnRef); ok {
			if col, err := scope.Resolve(ref); err == nil && len(col.Path) == 0 && col.Index == n.Rowtime() && c.rowtime < 0 {
				c.rowtime = i
			}
			if col, err := scope.Resolve(ref); err == nil && len(col.Path) == 0 && col.Index == proctimeOf(n) && c.procAttr == 0 {
				c.procAttr = i + 1
			}
		}
		if isProctimeCall(e) && c.procAttr == 0 {
			c.procAttr = i + 1
		}
		c.fields = append(c.fields, types.Field{Name: names[i], Type: typ})
	}
	filterReads, projReads := readColumns(scope, len(n.Fields()), where), make([][]bool, len(exprs))
	known := filterReads != nil
	for i, e := range exprs {
		projReads[i] = readColumns(scope, len(n.Fields()), e)
		known = known && projReads[i] != nil
	}
	if known {
		c.filterReads, c.projReads = filterReads, projReads
	}
	assignUID(c, "")
	return c, nil
}

// readColumns returns which of the n columns of scope the expressions
// read, or nil when an expression holds something whose reads are not
// followed here (a star, a subquery, an OVER call, table arguments) or a
// reference that does not resolve to one of the n columns.
func readColumns(scope expr.Scope, n int, es ...ast.Expr) []bool {
	reads := make([]bool, n)
	known := true
	for _, e := range es {
		walk(e, func(x ast.Expr) bool {
			switch x := x.(type) {
			case *ast.ColumnRef:
				c, err := scope.Resolve(x)
				if err != nil || c.Index < 0 || c.Index >= n {
					known = false
				} else {
					reads[c.Index] = true
				}
			case *ast.Star, *ast.Subquery, *ast.InSubquery, *ast.Exists, *ast.TableArg, *ast.Descriptor,
				*ast.NamedArg, *ast.GroupingSets, *ast.Rollup, *ast.Cube:
				known = false
			case *ast.Call:
				if x.Over != nil {
					known = false
				}
			}
			return known
		})
	}
	if !known {
		return nil
	}
	return reads
}

// itemName is the output name of a select item: its alias, the column it
// names, or Flink's EXPR$i.
func itemName(it *ast.SelectItem, i int) string {
	if it.Alias != nil {
		return it.Alias.Name
	}
	if r, ok := it.Expr.(*ast.ColumnRef); ok {
		return r.Parts[len(r.Parts)-1]
	}
	return "EXPR$" + strconv.Itoa(i)
}

// expandItems replaces * and t.* by the columns they stand for. Over a
// join the references are qualified, since both sides may have a column
// of the same name.
func expandItems(items []*ast.SelectItem, rel relation) ([]*ast.SelectItem, error) {
	var out []*ast.SelectItem
	for _, it := range items {
		st, ok := it.Expr.(*ast.Star)
		if !ok {
			out = append(out, it)
			continue
		}
		tables := rel.scope()
		if len(st.Qualifier) > 0 {
			q := strings.Join(st.Qualifier, ".")
			var found expr.Tables
			for _, t := range tables {
				if len(st.Qualifier) == 1 && t.Name == q {
					found = append(found, t)
				}
			}
			if len(found) == 0 {
				return nil, errorf(st.Pos, "table '%s' of '%s.*' is not in the FROM clause", q, q)
			}
			tables = found
		}
		for _, t := range tables {
			for _, f := range t.Columns {
				parts := []string{f.Name}
				if rel.tables != nil && t.Name != "" {
					parts = []string{t.Name, f.Name}
				}
				out = append(out, &ast.SelectItem{Pos: st.Pos, Expr: &ast.ColumnRef{Pos: st.Pos, Parts: parts}})
			}
		}
	}
	return out, nil
}

func (p *Planner) bindSelect(s *ast.Select) (Node, error) {
	if s.From == nil {
		return nil, errorf(s.Pos, "SELECT without FROM is not supported yet; use a datagen table")
	}
	rel, where, err := p.bindFromWhere(s.From, s.Where)
	if err != nil {
		return nil, err
	}
	if where != s.Where {
		// The join took the WHERE condition as its own.
		c := *s
		c.Where = where
		s = &c
	}
	items, err := expandItems(s.Items, rel)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(items))
	exprs := make([]ast.Expr, len(items))
	over := false
	for i, it := range items {
		names[i], exprs[i] = itemName(it, i), it.Expr
		if _, ok := findOver(it.Expr); ok {
			over = true
		}
	}
	if over {
		return p.bindOver(rel, s, items, exprs, names)
	}
	scope := rel.scope()
	if n, ok, err := p.bindRankFilter(rel, s, exprs, names); ok || err != nil {
		return n, err
	}
	grouped := len(s.GroupBy) > 0 || s.Having != nil || slices.ContainsFunc(exprs, hasAggregate)
	if !grouped {
		n, err := p.calc(rel.node, scope, s.Where, exprs, names)
		if err != nil {
			return nil, err
		}
		if s.Distinct {
			return p.distinct(n, s.Pos)
		}
		return n, nil
	}
	n, err := p.aggregate(rel, scope, s, exprs, names)
	if err != nil {
		return nil, err
	}
	if s.Distinct {
		return p.distinct(n, s.Pos)
	}
	return n, nil
}

// distinct plans SELECT DISTINCT as a grouping by every column with no
// aggregate, as Flink does.
func (p *Planner) distinct(n Node, pos ast.Pos) (Node, error) {
	g := &GroupAggregate{Input: n}
	g.rowtime = -1
	for i := range n.Fields() {
		g.Keys = append(g.Keys, i)
	}
	g.fields = n.Fields()
	assignUID(g, "")
	return g, nil
}

// PlanInsert plans an INSERT INTO: its query, the conversion to the sink's
// columns, and the sink rules.
func (p *Planner) PlanInsert(ins *ast.Insert) (*Sink, error) {
	if ins.Overwrite {
		return nil, errorf(ins.Pos, "INSERT OVERWRITE is not supported in streaming mode")
	}
	t, v, err := p.cat.Lookup(ins.Table)
	if err != nil {
		return nil, err
	}
	if v != nil {
		return nil, errorf(ins.Table.Pos, "cannot INSERT INTO view '%s'", v.Name)
	}
	if !t.Connector.Sink {
		return nil, errorf(ins.Table.Pos, "table '%s' cannot be written: connector '%s' is a source only", t.Name, t.Connector.Name)
	}
	q, err := p.bindQuery(ins.Query)
	if err != nil {
		return nil, err
	}
	phys := t.Physical()
	// target[i] is the query column feeding sink column i, or -1 (NULL).
	target := make([]int, len(phys))
	qf := q.Fields()
	if len(ins.Columns) > 0 {
		for i := range target {
			target[i] = -1
		}
		for j, c := range ins.Columns {
			i := slices.IndexFunc(phys, func(pc catalog.Column) bool { return pc.Name == c.Name })
			if i < 0 {
				return nil, errorf(c.Pos, "column '%s' is not a physical column of table '%s'", c.Name, t.Name)
			}
			if target[i] >= 0 {
				return nil, errorf(c.Pos, "column '%s' is listed twice", c.Name)
			}
			target[i] = j
		}
		if len(ins.Columns) != len(qf) {
			return nil, errorf(ins.Query.Pos, "the INSERT lists %d columns but the query has %d", len(ins.Columns), len(qf))
		}
		for _, k := range t.PrimaryKey {
			i := slices.IndexFunc(phys, func(pc catalog.Column) bool { return pc.Name == k })
			if target[i] < 0 && t.Upsert {
				return nil, errorf(ins.Table.Pos, "the query into upsert table '%s' does not project its primary key column '%s'", t.Name, k)
			}
		}
	} else {
		if len(qf) != len(phys) {
			return nil, errorf(ins.Query.Pos, "column types of query result and sink for '%s' do not match: different number of columns; query schema: [%s], sink schema: [%s]", t.Name, schema(qf), schema(fieldsOf(phys)))
		}
		for i := range target {
			target[i] = i
		}
	}
	conv, err := p.convert(q, t, phys, target, ins)
	if err != nil {
		return nil, err
	}
	if conv.Updating() && !t.Connector.Updates && !t.Upsert {
		return nil, errorf(ins.Pos, "table sink '%s' doesn't support consuming update changes which is produced by node %s", t.Name, describe(origin(conv)))
	}
	s := &Sink{Input: conv, Table: t}
	s.fields, s.rowtime = conv.Fields(), -1
	assignUID(s, t.Name)
	if k := p.sinkUIDs[s.uid]; k > 0 {
		s.uid += "_" + strconv.Itoa(k+1)
	}
	p.sinkUIDs[s.UID()]++
	p.sinks = append(p.sinks, s)
	return s, nil
}

func fieldsOf(cs []catalog.Column) []types.Field {
	fs := make([]types.Field, len(cs))
	for i, c := range cs {
		fs[i] = types.Field{Name: c.Name, Type: c.Type}
	}
	return fs
}

func schema(fs []types.Field) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.Name + " " + f.Type.String()
	}
	return strings.Join(parts, ", ")
}

func describe(n Node) string { return n.name() + "(" + n.args() + ")" }

// origin finds the node where updates start: the lowest updating node.
func origin(n Node) Node {
	for _, in := range n.Inputs() {
		if in.Updating() {
			return origin(in)
		}
	}
	return n
}

// convert lines the query's columns up with the sink's: reorders, fills
// NULL, and casts where the types differ but are compatible.
func (p *Planner) convert(q Node, t *catalog.Table, phys []catalog.Column, target []int, ins *ast.Insert) (Node, error) {
	qf := q.Fields()
	identity := len(qf) == len(phys)
	var exprs []ast.Expr
	var names []string
	ids := make([]types.Field, len(qf))
	for i, f := range qf {
		ids[i] = types.Field{Name: "$" + strconv.Itoa(i), Type: f.Type}
	}
	for i, c := range phys {
		names = append(names, c.Name)
		j := target[i]
		if j != i {
			identity = false
		}
		if j < 0 {
			dt, err := parser.ParseDataType(c.Type.WithNotNull(false).String())
			if err != nil {
				return nil, errorf(c.Pos, "cannot write NULL into column '%s' of type %s", c.Name, c.Type)
			}
			exprs = append(exprs, &ast.Cast{Pos: ins.Pos, X: &ast.NullLit{Pos: ins.Pos}, Type: dt})
			continue
		}
		ref := &ast.ColumnRef{Pos: ins.Query.Pos, Parts: []string{ids[j].Name}}
		from := qf[j].Type
		if from.Kind == c.Type.Kind && from.Kind != types.KindDecimal {
			exprs = append(exprs, ref)
			continue
		}
		if !implicitCast(from, c.Type) {
			return nil, errorf(ins.Query.Pos, "column types of query result and sink for '%s' do not match: incompatible types for sink column '%s' at position %d: the query gives %s, the sink has %s", t.Name, c.Name, i, from, c.Type)
		}
		identity = false
		dt, err := parser.ParseDataType(c.Type.WithNotNull(false).String())
		if err != nil {
			return nil, errorf(c.Pos, "cannot convert into column '%s' of type %s: %v", c.Name, c.Type, err)
		}
		exprs = append(exprs, &ast.Cast{Pos: ins.Query.Pos, X: ref, Type: dt})
	}
	if identity {
		return q, nil
	}
	n, err := p.calc(q, expr.NewTable("", ids...), nil, exprs, names)
	if err != nil {
		return nil, err
	}
	// Show the sink's column names in EXPLAIN rather than $i.
	c := n.(*Calc)
	for i, e := range exprs {
		c.ProjText[i] = strings.NewReplacer(refNames(qf)...).Replace(e.String())
	}
	return c, nil
}

func refNames(fs []types.Field) []string {
	var r []string
	for i := len(fs) - 1; i >= 0; i-- {
		r = append(r, "`$"+strconv.Itoa(i)+"`", fs[i].Name)
	}
	return r
}

// implicitCast follows Flink's implicit conversions for INSERT: numbers
// widen, strings meet strings, times meet times of another precision.
func implicitCast(from, to types.Type) bool {
	f, t := from.Kind, to.Kind
	switch {
	case f == types.KindNull:
		return true
	case f.IsNumeric() && t.IsNumeric():
		return true
	case f.IsString() && t.IsString(), f.IsBinary() && t.IsBinary():
		return true
	case f.IsTimestamp() && t.IsTimestamp(), f == t:
		return true
	}
	return false
}

// Warnings returns messages for the user that do not stop the job: a
// job with several sinks that commit in two phases gets one, since each
// commits a checkpoint's output on its own.
func (p *Planner) Warnings() []string {
	var names []string
	for _, s := range p.sinks {
		if s.Table.Guarantee == "exactly_once" {
			names = append(names, s.Table.Name)
		}
	}
	if len(names) < 2 {
		return nil
	}
	return []string{fmt.Sprintf("the job has %d transactional sinks (%s): each commits a checkpoint's output on its own, so a reader may see one sink's output of a checkpoint before another's", len(names), strings.Join(names, ", "))}
}
