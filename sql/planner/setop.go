package planner

import (
	"strconv"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/types"
)

// Union merges the rows of its inputs, which have the same columns
// (Flink's Union, all=[true]); it keeps each row's kind, so it is
// updating when an input is. Its rowtime is the column that is every
// input's rowtime, if there is one.
type Union struct {
	base
	// Union holds the inputs, in the order the query names them.
	Union []Node
}

func (n *Union) Inputs() []Node { return n.Union }
func (n *Union) name() string   { return "Union" }

func (n *Union) Updating() bool {
	for _, in := range n.Union {
		if in.Updating() {
			return true
		}
	}
	return false
}

func (n *Union) args() string {
	return "all=[true], union=[" + fieldNames(n.fields) + "]"
}

// bindSetOp binds UNION, INTERSECT and EXCEPT: UNION ALL as a Union of
// its inputs (a chain of them as one Union), UNION as UNION ALL and a
// grouping by every column.
func (p *Planner) bindSetOp(b *ast.SetOp) (Node, error) {
	if b.Op != ast.Union {
		return nil, errorf(b.Pos, "%s is not supported yet", setOpName(b))
	}
	var bodies []ast.QueryBody
	var flatten func(q ast.QueryBody)
	flatten = func(q ast.QueryBody) {
		if s, ok := q.(*ast.SetOp); ok && s.Op == b.Op && s.All == b.All {
			flatten(s.Left)
			flatten(s.Right)
			return
		}
		bodies = append(bodies, q)
	}
	flatten(b)
	op := setOpName(b)
	ins := make([]Node, len(bodies))
	for i, q := range bodies {
		n, err := p.bindBody(q)
		if err != nil {
			return nil, err
		}
		if i > 0 && len(n.Fields()) != len(ins[0].Fields()) {
			return nil, errorf(q.Position(), "column count mismatch in %s: the first input has %d columns, this one %d", op, len(ins[0].Fields()), len(n.Fields()))
		}
		ins[i] = n
	}
	// The columns' types: the least restrictive of the inputs', named as
	// the first input's.
	fields := make([]types.Field, len(ins[0].Fields()))
	for c := range fields {
		t := ins[0].Fields()[c].Type
		for i, in := range ins[1:] {
			u := in.Fields()[c].Type
			common, ok := expr.CommonType(t, u)
			if !ok {
				return nil, errorf(bodies[i+1].Position(), "type mismatch in column %d of %s: %s and %s have no common type", c+1, op, t, u)
			}
			t = common
		}
		fields[c] = types.Field{Name: ins[0].Fields()[c].Name, Type: t}
	}
	rowtime := ins[0].Rowtime()
	for i, in := range ins {
		n, err := p.castTo(in, fields, bodies[i].Position())
		if err != nil {
			return nil, err
		}
		ins[i] = n
		if n.Rowtime() != rowtime {
			rowtime = -1
		}
	}
	u := &Union{Union: ins}
	u.fields, u.rowtime = fields, rowtime
	assignUID(u, "")
	if b.All {
		return u, nil
	}
	return p.distinct(u, b.Pos)
}

// castTo converts n's columns to the types of fields (nullability aside)
// with a Calc, when any differs.
func (p *Planner) castTo(n Node, fields []types.Field, pos ast.Pos) (Node, error) {
	same := true
	for i, f := range n.Fields() {
		if !f.Type.WithNotNull(false).Equal(fields[i].Type.WithNotNull(false)) {
			same = false
		}
	}
	if same {
		return n, nil
	}
	ids := make([]types.Field, len(n.Fields()))
	for i, f := range n.Fields() {
		ids[i] = types.Field{Name: "$" + strconv.Itoa(i), Type: f.Type}
	}
	exprs := make([]ast.Expr, len(fields))
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = n.Fields()[i].Name
		var e ast.Expr = &ast.ColumnRef{Pos: pos, Parts: []string{ids[i].Name}}
		if !ids[i].Type.WithNotNull(false).Equal(f.Type.WithNotNull(false)) {
			dt, err := parser.ParseDataType(f.Type.WithNotNull(false).String())
			if err != nil {
				return nil, errorf(pos, "cannot convert column '%s' to %s: %v", names[i], f.Type, err)
			}
			e = &ast.Cast{Pos: pos, X: e, Type: dt}
		}
		exprs[i] = e
	}
	c, err := p.calc(n, expr.NewTable("", ids...), nil, exprs, names)
	if err != nil {
		return nil, err
	}
	calc := c.(*Calc)
	for i := range calc.ProjText {
		calc.ProjText[i] = strings.NewReplacer(refNames(n.Fields())...).Replace(calc.ProjText[i])
	}
	assignUID(calc, "")
	return calc, nil
}
