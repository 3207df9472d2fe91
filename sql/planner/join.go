package planner

import "github.com/clinkstream/clink/sql/ast"

// bindJoin binds a JOIN in a FROM clause.
func (p *Planner) bindJoin(r *ast.Join) (relation, error) {
	return relation{}, errorf(r.Pos, "%s is not supported yet", r.Kind)
}
