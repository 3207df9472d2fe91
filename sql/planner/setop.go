package planner

import "github.com/clinkstream/clink/sql/ast"

// bindSetOp binds UNION, INTERSECT and EXCEPT.
func (p *Planner) bindSetOp(b *ast.SetOp) (Node, error) {
	return nil, errorf(b.Pos, "%s is not supported yet", setOpName(b))
}
