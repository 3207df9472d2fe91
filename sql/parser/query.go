package parser

import (
	"github.com/clinkstream/clink/sql/ast"
)

// query parses [WITH ...] body [ORDER BY ...] [LIMIT n] [OFFSET n]
// [FETCH FIRST n ROWS ONLY].
func (p *parser) query() *ast.Query {
	p.enter()
	defer p.leave()
	q := &ast.Query{Pos: p.peek().pos}
	if p.acceptWord("WITH") {
		for {
			q.With = append(q.With, p.cte())
			if !p.acceptOp(",") {
				break
			}
		}
	}
	q.Body = p.setExpr()
	if p.acceptWord("ORDER") {
		p.expectWord("BY")
		q.OrderBy = p.orderItems()
	}
	if p.acceptWord("LIMIT") {
		if p.isWord("ALL") {
			p.fail(p.peek().pos, "LIMIT ALL is not supported; leave out the LIMIT")
		}
		q.Limit = p.expr()
	}
	if p.acceptWord("OFFSET") {
		q.Offset = p.expr()
		if !p.acceptWord("ROWS") {
			p.acceptWord("ROW")
		}
	}
	if t := p.peek(); p.acceptWord("FETCH") {
		if q.Limit != nil {
			p.fail(t.pos, "FETCH and LIMIT both limit the rows; use one of them")
		}
		if !p.acceptWord("FIRST") && !p.acceptWord("NEXT") {
			p.expected("FIRST or NEXT after FETCH")
		}
		q.Limit = p.expr()
		if !p.acceptWord("ROWS") && !p.acceptWord("ROW") {
			p.expected("ROWS after FETCH FIRST n")
		}
		p.expectWord("ONLY")
	}
	return q
}

func (p *parser) cte() *ast.CTE {
	name := p.ident("a name for the WITH query")
	c := &ast.CTE{Pos: name.Pos, Name: name}
	if p.isOp("(") {
		c.Columns = p.identList("a column name", "column list of "+name.Name)
	}
	p.expectWord("AS")
	open := p.expectOp("(").pos
	c.Query = p.query()
	p.expectClose(")", open, "query of "+name.Name)
	return c
}

func (p *parser) orderItems() []*ast.OrderItem {
	var items []*ast.OrderItem
	for {
		e := p.expr()
		it := &ast.OrderItem{Pos: e.Position(), Expr: e}
		if p.acceptWord("DESC") {
			it.Desc = true
		} else {
			p.acceptWord("ASC")
		}
		if p.acceptWord("NULLS") {
			switch {
			case p.acceptWord("FIRST"):
				it.Nulls = ast.NullsFirst
			case p.acceptWord("LAST"):
				it.Nulls = ast.NullsLast
			default:
				p.expected("FIRST or LAST after NULLS")
			}
		}
		items = append(items, it)
		if !p.acceptOp(",") {
			return items
		}
	}
}

// setExpr parses bodies joined by UNION and EXCEPT, which bind looser than
// INTERSECT.
func (p *parser) setExpr() ast.QueryBody {
	left := p.setTerm()
	for {
		var op ast.SetOpKind
		switch {
		case p.isWord("UNION"):
			op = ast.Union
		case p.isWord("EXCEPT"):
			op = ast.Except
		default:
			return left
		}
		p.i++
		all := p.setQuantifier()
		left = &ast.SetOp{Pos: left.Position(), Op: op, All: all, Left: left, Right: p.setTerm()}
	}
}

func (p *parser) setTerm() ast.QueryBody {
	left := p.queryPrimary()
	for p.acceptWord("INTERSECT") {
		all := p.setQuantifier()
		left = &ast.SetOp{Pos: left.Position(), Op: ast.Intersect, All: all, Left: left, Right: p.queryPrimary()}
	}
	return left
}

func (p *parser) setQuantifier() bool {
	if p.acceptWord("ALL") {
		return true
	}
	p.acceptWord("DISTINCT")
	return false
}

func (p *parser) queryPrimary() ast.QueryBody {
	t := p.peek()
	switch {
	case p.isWord("SELECT"):
		return p.selectBlock()
	case p.isWord("VALUES"):
		return p.values()
	case p.isOp("("):
		p.i++
		q := p.query()
		p.expectClose(")", t.pos, "parenthesized query")
		if len(q.With) == 0 && len(q.OrderBy) == 0 && q.Limit == nil && q.Offset == nil {
			return q.Body
		}
		return q
	}
	p.expected("SELECT, VALUES or '('")
	return nil
}

func (p *parser) values() *ast.Values {
	v := &ast.Values{Pos: p.expectWord("VALUES").pos}
	for {
		if t := p.peek(); p.isOp("(") {
			p.i++
			v.Rows = append(v.Rows, p.exprList(t.pos, "VALUES row"))
		} else {
			v.Rows = append(v.Rows, []ast.Expr{p.expr()})
		}
		if !p.acceptOp(",") {
			return v
		}
	}
}

// exprList parses "e, e, ...)" after an opening '(' at open.
func (p *parser) exprList(open ast.Pos, what string) []ast.Expr {
	var list []ast.Expr
	for {
		list = append(list, p.expr())
		if !p.acceptOp(",") {
			break
		}
	}
	p.expectClose(")", open, what)
	return list
}

func (p *parser) selectBlock() *ast.Select {
	s := &ast.Select{Pos: p.expectWord("SELECT").pos}
	if p.acceptWord("DISTINCT") {
		s.Distinct = true
	} else {
		p.acceptWord("ALL")
	}
	for {
		s.Items = append(s.Items, p.selectItem())
		if !p.acceptOp(",") {
			break
		}
	}
	if p.acceptWord("FROM") {
		s.From = p.from()
	}
	if p.acceptWord("WHERE") {
		s.Where = p.expr()
	}
	if p.acceptWord("GROUP") {
		p.expectWord("BY")
		for {
			s.GroupBy = append(s.GroupBy, p.groupingElement())
			if !p.acceptOp(",") {
				break
			}
		}
	}
	if p.acceptWord("HAVING") {
		s.Having = p.expr()
	}
	if p.isWord("WINDOW") {
		p.fail(p.peek().pos, "the WINDOW clause is not supported yet; write the window in OVER (...)")
	}
	return s
}

func (p *parser) selectItem() *ast.SelectItem {
	t := p.peek()
	if p.acceptOp("*") {
		return &ast.SelectItem{Pos: t.pos, Expr: &ast.Star{Pos: t.pos}}
	}
	e := p.expr()
	it := &ast.SelectItem{Pos: t.pos, Expr: e}
	if _, ok := e.(*ast.Star); ok {
		return it
	}
	if p.acceptWord("AS") {
		it.Alias = p.ident("an alias after AS")
	} else if p.isNameAt(0) {
		it.Alias = p.ident("an alias")
	}
	return it
}

func (p *parser) groupingElement() ast.Expr {
	t := p.peek()
	switch {
	case p.isWord("GROUPING") && p.isWordAt(1, "SETS"):
		p.i += 2
		open := p.expectOp("(").pos
		return &ast.GroupingSets{Pos: t.pos, Sets: p.groupingList(open, "GROUPING SETS list")}
	case p.isWord("ROLLUP"):
		p.i++
		open := p.expectOp("(").pos
		return &ast.Rollup{Pos: t.pos, Items: p.groupingList(open, "ROLLUP list")}
	case p.isWord("CUBE"):
		p.i++
		open := p.expectOp("(").pos
		return &ast.Cube{Pos: t.pos, Items: p.groupingList(open, "CUBE list")}
	case p.isOp("(") && p.isOpAt(1, ")"):
		p.i += 2
		return &ast.Row{Pos: t.pos}
	}
	return p.expr()
}

func (p *parser) groupingList(open ast.Pos, what string) []ast.Expr {
	p.enter()
	defer p.leave()
	var list []ast.Expr
	for {
		list = append(list, p.groupingElement())
		if !p.acceptOp(",") {
			break
		}
	}
	p.expectClose(")", open, what)
	return list
}

// from parses a FROM list: join chains separated by commas.
func (p *parser) from() ast.TableRef {
	left := p.joinChain()
	for p.acceptOp(",") {
		left = &ast.Join{Pos: left.Position(), Kind: ast.CommaJoin, Left: left, Right: p.joinChain()}
	}
	return left
}

func (p *parser) joinKind() (ast.JoinKind, bool) {
	t := p.peek()
	kind := ast.InnerJoin
	switch {
	case p.acceptWord("JOIN"):
		return ast.InnerJoin, true
	case p.acceptWord("INNER"):
	case p.acceptWord("LEFT"):
		kind = ast.LeftJoin
		p.acceptWord("OUTER")
	case p.acceptWord("RIGHT"):
		kind = ast.RightJoin
		p.acceptWord("OUTER")
	case p.acceptWord("FULL"):
		kind = ast.FullJoin
		p.acceptWord("OUTER")
	case p.acceptWord("CROSS"):
		kind = ast.CrossJoin
	case p.isWord("NATURAL"):
		p.fail(t.pos, "NATURAL JOIN is not supported; name the join columns with USING (...)")
	default:
		return 0, false
	}
	p.expectWord("JOIN")
	return kind, true
}

func (p *parser) joinChain() ast.TableRef {
	left := p.tablePrimary()
	for {
		kind, ok := p.joinKind()
		if !ok {
			return left
		}
		j := &ast.Join{Pos: left.Position(), Kind: kind, Left: left, Right: p.tablePrimary()}
		if kind != ast.CrossJoin {
			switch {
			case p.acceptWord("ON"):
				j.On = p.expr()
			case p.acceptWord("USING"):
				j.Using = p.identList("a column name", "USING column list")
			default:
				p.expected("ON or USING after the joined table")
			}
		}
		left = j
	}
}

func (p *parser) tablePrimary() ast.TableRef {
	p.enter()
	defer p.leave()
	t := p.peek()
	switch {
	case p.isWord("LATERAL"):
		p.i++
		switch {
		case p.isWord("TABLE"):
			tf := p.tableFunction(t.pos)
			tf.Lateral = true
			return tf
		case p.isOp("("):
			d := p.derivedTable(t.pos)
			d.Lateral = true
			return d
		}
		p.expected("TABLE(...) or '(' after LATERAL")
	case p.isWord("TABLE"):
		return p.tableFunction(t.pos)
	case p.isWord("UNNEST"):
		p.i++
		open := p.expectOp("(").pos
		u := &ast.Unnest{Pos: t.pos, Exprs: p.exprList(open, "UNNEST argument list")}
		if p.isWord("WITH") && p.isWordAt(1, "ORDINALITY") {
			p.i += 2
			u.WithOrdinality = true
		}
		u.Alias = p.alias()
		return u
	case p.isOp("("):
		if p.startsQueryAt(1) {
			return p.derivedTable(t.pos)
		}
		if p.parenQueryAhead() {
			// ((SELECT ...) UNION ...) or ((SELECT ...) AS x JOIN y ON ...).
			var d *ast.DerivedTable
			errQuery := p.attempt(func() { d = p.derivedTable(t.pos) })
			if errQuery == nil {
				return d
			}
			var j ast.TableRef
			errJoin := p.attempt(func() { j = p.parenJoin(t.pos) })
			if errJoin == nil {
				return j
			}
			if errJoin.Pos.Offset > errQuery.Pos.Offset {
				panic(bailout{errJoin})
			}
			panic(bailout{errQuery})
		}
		return p.parenJoin(t.pos)
	case p.isNameAt(0):
		tn := &ast.TableName{Pos: t.pos, Name: p.objectName("a table name")}
		if p.isWord("FOR") {
			p.i++
			p.expectWords("SYSTEM_TIME", "AS", "OF")
			tn.ForSystemTime = p.expr()
		}
		tn.Alias = p.alias()
		return tn
	}
	if t.kind == tokWord {
		p.fail(t.pos, "expected a table name, '(' or TABLE(...), found keyword %s (quote it as `%s` to use it as a table name)", t.describe()[len("keyword "):], t.text)
	}
	p.expected("a table name, '(' or TABLE(...)")
	return nil
}

func (p *parser) parenJoin(open ast.Pos) ast.TableRef {
	p.expectOp("(")
	j := p.from()
	p.expectClose(")", open, "parenthesized join")
	return j
}

func (p *parser) derivedTable(pos ast.Pos) *ast.DerivedTable {
	open := p.expectOp("(").pos
	d := &ast.DerivedTable{Pos: pos, Query: p.query()}
	p.expectClose(")", open, "subquery")
	d.Alias = p.alias()
	return d
}

func (p *parser) tableFunction(pos ast.Pos) *ast.TableFunction {
	p.expectWord("TABLE")
	open := p.expectOp("(").pos
	e := p.expr()
	call, ok := e.(*ast.Call)
	if !ok || call.NoParens || call.Over != nil || call.Filter != nil {
		p.fail(e.Position(), "expected a function call such as TUMBLE(...) inside TABLE(...), found %s", e)
	}
	p.expectClose(")", open, "TABLE(...)")
	return &ast.TableFunction{Pos: pos, Call: call, Alias: p.alias()}
}

// alias parses an optional "[AS] name [(col, ...)]".
func (p *parser) alias() *ast.Alias {
	if p.acceptWord("AS") {
		return p.aliasRest(p.ident("an alias after AS"))
	}
	if p.isNameAt(0) {
		return p.aliasRest(p.ident("an alias"))
	}
	return nil
}

func (p *parser) aliasRest(name *ast.Ident) *ast.Alias {
	a := &ast.Alias{Pos: name.Pos, Name: name.Name}
	if p.isOp("(") {
		a.Columns = p.identList("a column alias", "column alias list")
	}
	return a
}
