package planner

import "github.com/clinkstream/clink/sql/ast"

// bindOver binds a select list with a window function call (f(...) OVER
// (...)) over rel.
func (p *Planner) bindOver(rel relation, s *ast.Select, items []*ast.SelectItem, exprs []ast.Expr, names []string) (Node, error) {
	for _, e := range exprs {
		if c, ok := findOver(e); ok {
			return nil, errorf(c.Pos, "window function %s(...) OVER is not supported yet", c.Name.Last())
		}
	}
	return nil, errorf(s.Pos, "window functions are not supported yet")
}

// bindRankFilter binds a SELECT whose WHERE bounds the row number a
// ranking subquery computes (Top-N). ok is false when s is not such a
// query; it is then planned as an ordinary projection and filter.
func (p *Planner) bindRankFilter(rel relation, s *ast.Select, exprs []ast.Expr, names []string) (n Node, ok bool, err error) {
	return nil, false, nil
}
