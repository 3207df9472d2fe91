package parser

import (
	"strings"

	"github.com/clinkstream/clink/sql/ast"
)

// Expression grammar, loosest first (the levels of ast's printer):
//
//	OR, AND, NOT, IS ..., comparison, BETWEEN/IN/LIKE/SIMILAR TO,
//	+ -, * / % ||, prefix - +, postfix [i] and .field, primary.
func (p *parser) expr() ast.Expr {
	p.enter()
	defer p.leave()
	return p.or()
}

func (p *parser) or() ast.Expr {
	left := p.and()
	for p.acceptWord("OR") {
		left = &ast.Binary{Pos: left.Position(), Op: ast.OpOr, L: left, R: p.and()}
	}
	return left
}

func (p *parser) and() ast.Expr {
	left := p.not()
	for p.acceptWord("AND") {
		left = &ast.Binary{Pos: left.Position(), Op: ast.OpAnd, L: left, R: p.not()}
	}
	return left
}

func (p *parser) not() ast.Expr {
	if t := p.peek(); p.acceptWord("NOT") {
		p.enter()
		defer p.leave()
		return &ast.Unary{Pos: t.pos, Op: ast.OpNot, X: p.not()}
	}
	return p.is()
}

func (p *parser) is() ast.Expr {
	x := p.comparison()
	for p.acceptWord("IS") {
		not := p.acceptWord("NOT")
		var test ast.IsTest
		switch {
		case p.acceptWord("NULL"):
			test = ast.IsNull
		case p.acceptWord("TRUE"):
			test = ast.IsTrue
		case p.acceptWord("FALSE"):
			test = ast.IsFalse
		case p.acceptWord("UNKNOWN"):
			test = ast.IsUnknown
		case p.acceptWord("DISTINCT"):
			p.expectWord("FROM")
			x = &ast.IsDistinctFrom{Pos: x.Position(), L: x, Not: not, R: p.comparison()}
			continue
		default:
			p.expected("NULL, TRUE, FALSE, UNKNOWN or DISTINCT FROM after IS")
		}
		x = &ast.Is{Pos: x.Position(), X: x, Not: not, Test: test}
	}
	return x
}

var comparisonOps = map[string]ast.BinaryOp{
	"=": ast.OpEq, "<>": ast.OpNe, "!=": ast.OpNe, "<": ast.OpLt, "<=": ast.OpLe, ">": ast.OpGt, ">=": ast.OpGe,
}

func (p *parser) comparison() ast.Expr {
	left := p.predicate()
	for {
		t := p.peek()
		op, ok := comparisonOps[t.text]
		if t.kind != tokOp || !ok {
			return left
		}
		p.i++
		left = &ast.Binary{Pos: left.Position(), Op: op, L: left, R: p.predicate()}
	}
}

// predicate parses [NOT] BETWEEN, [NOT] IN, [NOT] LIKE and [NOT] SIMILAR TO.
func (p *parser) predicate() ast.Expr {
	x := p.additive()
	for {
		not := false
		if p.isWord("NOT") && (p.isWordAt(1, "BETWEEN") || p.isWordAt(1, "IN") || p.isWordAt(1, "LIKE") || p.isWordAt(1, "SIMILAR")) {
			p.i++
			not = true
		}
		switch {
		case p.acceptWord("BETWEEN"):
			b := &ast.Between{Pos: x.Position(), X: x, Not: not}
			if p.acceptWord("SYMMETRIC") {
				b.Symmetric = true
			} else {
				p.acceptWord("ASYMMETRIC")
			}
			b.Lo = p.additive()
			p.expectWord("AND")
			b.Hi = p.additive()
			x = b
		case p.isWord("IN"):
			p.i++
			t := p.peek()
			if !p.acceptOp("(") {
				p.expected("'(' after IN")
			}
			if p.startsQueryAt(0) {
				q := p.query()
				p.expectClose(")", t.pos, "IN subquery")
				x = &ast.InSubquery{Pos: x.Position(), X: x, Not: not, Query: q}
			} else {
				x = &ast.InList{Pos: x.Position(), X: x, Not: not, List: p.exprList(t.pos, "IN list")}
			}
		case p.acceptWord("LIKE"):
			l := &ast.Like{Pos: x.Position(), X: x, Not: not, Pattern: p.additive()}
			if p.acceptWord("ESCAPE") {
				l.Escape = p.additive()
			}
			x = l
		case p.acceptWord("SIMILAR"):
			p.expectWord("TO")
			l := &ast.Like{Pos: x.Position(), X: x, Not: not, Similar: true, Pattern: p.additive()}
			if p.acceptWord("ESCAPE") {
				l.Escape = p.additive()
			}
			x = l
		default:
			return x
		}
	}
}

func (p *parser) additive() ast.Expr {
	left := p.multiplicative()
	for {
		var op ast.BinaryOp
		switch {
		case p.isOp("+"):
			op = ast.OpAdd
		case p.isOp("-"):
			op = ast.OpSub
		default:
			return left
		}
		p.i++
		left = &ast.Binary{Pos: left.Position(), Op: op, L: left, R: p.multiplicative()}
	}
}

func (p *parser) multiplicative() ast.Expr {
	left := p.unary()
	for {
		var op ast.BinaryOp
		switch {
		case p.isOp("*"):
			op = ast.OpMul
		case p.isOp("/"):
			op = ast.OpDiv
		case p.isOp("%"):
			op = ast.OpMod
		case p.isOp("||"):
			op = ast.OpConcat
		default:
			return left
		}
		p.i++
		left = &ast.Binary{Pos: left.Position(), Op: op, L: left, R: p.unary()}
	}
}

func (p *parser) unary() ast.Expr {
	t := p.peek()
	if p.isOp("-") || p.isOp("+") {
		p.i++
		p.enter()
		defer p.leave()
		return &ast.Unary{Pos: t.pos, Op: ast.UnaryOp(t.text), X: p.unary()}
	}
	return p.postfix()
}

func (p *parser) postfix() ast.Expr {
	x := p.primary()
	for {
		t := p.peek()
		switch {
		case p.acceptOp("["):
			idx := p.expr()
			p.expectClose("]", t.pos, "element access")
			x = &ast.Index{Pos: x.Position(), X: x, Index: idx}
		case p.isOp(".") && !p.isOpAt(1, "*"):
			p.i++
			x = &ast.FieldAccess{Pos: x.Position(), X: x, Field: p.pathPart("a field name after '.'")}
		default:
			return x
		}
	}
}

func (p *parser) primary() ast.Expr {
	t := p.peek()
	switch t.kind {
	case tokNumber:
		p.i++
		kind := ast.IntegerNumber
		if strings.Contains(t.text, "E") {
			kind = ast.FloatNumber
		} else if strings.Contains(t.text, ".") {
			kind = ast.DecimalNumber
		}
		return &ast.NumberLit{Pos: t.pos, Kind: kind, Text: t.text}
	case tokString:
		p.i++
		return &ast.StringLit{Pos: t.pos, Value: t.text}
	case tokBinary:
		p.i++
		return &ast.BinaryLit{Pos: t.pos, Hex: t.text}
	case tokQuoted:
		return p.nameOrCall()
	case tokOp:
		if t.text == "(" {
			return p.parenExpr()
		}
		if t.text == "?" {
			p.fail(t.pos, "query parameters (?) are not supported")
		}
	case tokWord:
		if e := p.keywordExpr(); e != nil {
			return e
		}
		if !ast.IsReserved(t.text) {
			return p.nameOrCall()
		}
		if ast.IsFunctionKeyword(t.text) && p.isOpAt(1, "(") {
			p.i++
			return p.call(t.pos, &ast.ObjectName{Pos: t.pos, Parts: []string{t.text}})
		}
		if ast.IsNiladicFunction(t.text) {
			p.i++
			return &ast.Call{Pos: t.pos, Name: &ast.ObjectName{Pos: t.pos, Parts: []string{t.text}}, NoParens: true}
		}
		p.fail(t.pos, "expected an expression, found %s", t.describe())
	}
	p.expected("an expression")
	return nil
}

// parenExpr parses what starts with '(': a scalar subquery, a
// parenthesized expression or a row (a, b).
func (p *parser) parenExpr() ast.Expr {
	open := p.peek().pos
	if p.parenQueryAhead() {
		var sub ast.Expr
		errQuery := p.attempt(func() {
			p.i++
			q := p.query()
			p.expectClose(")", open, "subquery")
			sub = &ast.Subquery{Pos: open, Query: q}
		})
		if errQuery == nil {
			return sub
		}
		if p.startsQueryAt(1) {
			panic(bailout{errQuery})
		}
		// ((SELECT ...) + 1): an expression that starts with a subquery.
	}
	p.i++
	first := p.expr()
	if !p.isOp(",") {
		p.expectClose(")", open, "parenthesized expression")
		return first
	}
	p.i++
	items := append([]ast.Expr{first}, p.exprList(open, "row")...)
	return &ast.Row{Pos: open, Items: items}
}

// nameOrCall parses a name path (a, t.a, t.r.f), t.*, or a function call.
func (p *parser) nameOrCall() ast.Expr {
	first := p.next()
	parts := []string{first.text}
	for p.isOp(".") {
		if p.isOpAt(1, "*") {
			p.i += 2
			return &ast.Star{Pos: first.pos, Qualifier: parts}
		}
		p.i++
		parts = append(parts, p.pathPart("a name after '.'"))
	}
	if p.isOp("(") {
		return p.call(first.pos, &ast.ObjectName{Pos: first.pos, Parts: parts})
	}
	return &ast.ColumnRef{Pos: first.pos, Parts: parts}
}

var timeUnitArgFuncs = map[string]bool{"TIMESTAMPADD": true, "TIMESTAMPDIFF": true}

// call parses "(args) [FILTER (WHERE ...)] [OVER ...]" after a function
// name.
func (p *parser) call(pos ast.Pos, name *ast.ObjectName) *ast.Call {
	c := &ast.Call{Pos: pos, Name: name}
	open := p.expectOp("(").pos
	what := "argument list of " + name.String()
	if p.acceptWord("DISTINCT") {
		c.Distinct = true
	} else {
		p.acceptWord("ALL")
	}
	if !p.isOp(")") || c.Distinct {
		for {
			if len(c.Args) == 0 && len(name.Parts) == 1 && timeUnitArgFuncs[strings.ToUpper(name.Parts[0])] && p.isOpAt(1, ",") {
				if t := p.peek(); t.kind == tokWord {
					if u, ok := timeUnits[strings.ToUpper(t.text)]; ok {
						p.i++
						c.Args = append(c.Args, &ast.TimeUnitArg{Pos: t.pos, Unit: u})
						p.expectOp(",")
						continue
					}
				}
			}
			c.Args = append(c.Args, p.callArg())
			if !p.acceptOp(",") {
				break
			}
		}
	}
	p.expectClose(")", open, what)
	if t := p.peek(); p.acceptWord("FILTER") {
		open := p.expectOp("(").pos
		p.expectWord("WHERE")
		c.Filter = p.expr()
		p.expectClose(")", open, "FILTER clause")
		_ = t
	}
	if p.isWord("WITHIN") {
		p.fail(p.peek().pos, "WITHIN GROUP is not supported yet")
	}
	if p.acceptWord("OVER") {
		c.Over = p.windowSpec()
	}
	return c
}

// callArg parses one argument, including the forms only some functions
// take: *, TABLE t, DESCRIPTOR(c), name => value.
func (p *parser) callArg() ast.Expr {
	t := p.peek()
	switch {
	case p.isOp("*") && (p.isOpAt(1, ")") || p.isOpAt(1, ",")):
		p.i++
		return &ast.Star{Pos: t.pos}
	case p.isWord("TABLE") && !p.isOpAt(1, "("):
		p.i++
		a := &ast.TableArg{Pos: t.pos, Name: p.objectName("a table name after TABLE")}
		if p.isWord("PARTITION") {
			p.i++
			p.expectWord("BY")
			if open := p.peek(); p.acceptOp("(") {
				a.PartitionBy = p.exprList(open.pos, "PARTITION BY list")
			} else {
				a.PartitionBy = []ast.Expr{p.additive()}
			}
		}
		return a
	case p.isWord("DESCRIPTOR") && p.isOpAt(1, "("):
		p.i++
		return &ast.Descriptor{Pos: t.pos, Columns: p.identList("a column name", "DESCRIPTOR column list")}
	case (t.kind == tokWord || t.kind == tokQuoted) && p.isOpAt(1, "=>"):
		name := &ast.Ident{Pos: t.pos, Name: t.text}
		p.i += 2
		return &ast.NamedArg{Pos: t.pos, Name: name, Value: p.callArg()}
	}
	return p.expr()
}

func (p *parser) windowSpec() *ast.WindowSpec {
	t := p.peek()
	w := &ast.WindowSpec{Pos: t.pos}
	if p.isNameAt(0) {
		w.Ref = p.ident("a window name").Name
		return w
	}
	if !p.acceptOp("(") {
		p.expected("'(' or a window name after OVER")
	}
	if p.acceptWord("PARTITION") {
		p.expectWord("BY")
		for {
			w.PartitionBy = append(w.PartitionBy, p.expr())
			if !p.acceptOp(",") {
				break
			}
		}
	}
	if p.acceptWord("ORDER") {
		p.expectWord("BY")
		w.OrderBy = p.orderItems()
	}
	if f := p.peek(); p.isWord("ROWS") || p.isWord("RANGE") {
		p.i++
		fr := &ast.WindowFrame{Pos: f.pos, Unit: ast.FrameRows}
		if strings.EqualFold(f.text, "RANGE") {
			fr.Unit = ast.FrameRange
		}
		if p.acceptWord("BETWEEN") {
			fr.Start = p.frameBound()
			p.expectWord("AND")
			fr.End = p.frameBound()
		} else {
			fr.Start = p.frameBound()
		}
		w.Frame = fr
	}
	p.expectClose(")", t.pos, "window specification")
	return w
}

func (p *parser) frameBound() *ast.FrameBound {
	t := p.peek()
	b := &ast.FrameBound{Pos: t.pos}
	switch {
	case p.acceptWord("UNBOUNDED"):
		switch {
		case p.acceptWord("PRECEDING"):
			b.Kind = ast.UnboundedPreceding
		case p.acceptWord("FOLLOWING"):
			b.Kind = ast.UnboundedFollowing
		default:
			p.expected("PRECEDING or FOLLOWING after UNBOUNDED")
		}
	case p.acceptWord("CURRENT"):
		p.expectWord("ROW")
		b.Kind = ast.CurrentRow
	default:
		b.Offset = p.additive()
		switch {
		case p.acceptWord("PRECEDING"):
			b.Kind = ast.Preceding
		case p.acceptWord("FOLLOWING"):
			b.Kind = ast.Following
		default:
			p.expected("PRECEDING or FOLLOWING after the frame offset")
		}
	}
	return b
}

// keywordExpr parses expressions introduced by a keyword: CASE, CAST,
// EXTRACT, INTERVAL, typed literals, constructors, ... It returns nil when
// the current word introduces none of them.
func (p *parser) keywordExpr() ast.Expr {
	t := p.peek()
	w := strings.ToUpper(t.text)
	paren := p.isOpAt(1, "(")
	switch {
	case w == "TRUE" || w == "FALSE":
		p.i++
		return &ast.BoolLit{Pos: t.pos, Value: w == "TRUE"}
	case w == "NULL":
		p.i++
		return &ast.NullLit{Pos: t.pos}
	case w == "CASE":
		return p.caseExpr()
	case (w == "CAST" || w == "TRY_CAST") && paren:
		p.i += 2
		c := &ast.Cast{Pos: t.pos, Try: w == "TRY_CAST", X: p.expr()}
		p.expectWord("AS")
		c.Type = p.dataType()
		p.expectClose(")", t.pos, w)
		return c
	case w == "EXTRACT" && paren:
		p.i += 2
		e := &ast.Extract{Pos: t.pos, Unit: p.timeUnit("a time unit (YEAR, MONTH, DAY, HOUR, ...)")}
		p.expectWord("FROM")
		e.X = p.expr()
		p.expectClose(")", t.pos, "EXTRACT")
		return e
	case (w == "FLOOR" || w == "CEIL" || w == "CEILING") && paren:
		p.i++
		open := p.next().pos
		x := p.expr()
		if p.acceptWord("TO") {
			fc := &ast.FloorCeil{Pos: t.pos, Ceil: w != "FLOOR", X: x, Unit: p.timeUnit("a time unit after TO")}
			p.expectClose(")", open, w)
			return fc
		}
		c := &ast.Call{Pos: t.pos, Name: &ast.ObjectName{Pos: t.pos, Parts: []string{t.text}}, Args: []ast.Expr{x}}
		if p.acceptOp(",") {
			c.Args = append(c.Args, p.exprList(open, "argument list of "+w)...)
		} else {
			p.expectClose(")", open, "argument list of "+w)
		}
		return c
	case w == "TRIM" && paren:
		return p.trim()
	case w == "SUBSTRING" && paren:
		p.i++
		open := p.next().pos
		s := &ast.Substring{Pos: t.pos, X: p.expr()}
		if p.acceptWord("FROM") {
			s.From = p.expr()
			if p.acceptWord("FOR") {
				s.For = p.expr()
			}
		} else if p.acceptOp(",") {
			s.From = p.expr()
			if p.acceptOp(",") {
				s.For = p.expr()
			}
		} else {
			p.expected("FROM or ',' in SUBSTRING")
		}
		p.expectClose(")", open, "SUBSTRING")
		return s
	case w == "POSITION" && paren:
		p.i += 2
		pe := &ast.Position{Pos: t.pos, Needle: p.additive()}
		p.expectWord("IN")
		pe.Haystack = p.expr()
		p.expectClose(")", t.pos, "POSITION")
		return pe
	case w == "EXISTS":
		p.i++
		open := p.peek()
		if !p.acceptOp("(") {
			p.expected("'(' and a subquery after EXISTS")
		}
		q := p.query()
		p.expectClose(")", open.pos, "EXISTS subquery")
		return &ast.Exists{Pos: t.pos, Query: q}
	case w == "INTERVAL":
		return p.intervalLit()
	case (w == "DATE" || w == "TIME" || w == "TIMESTAMP") && p.peekAt(1).kind == tokString:
		p.i++
		return &ast.TypedLit{Pos: t.pos, Type: w, Value: p.next().text}
	case (w == "ARRAY" || w == "MAP") && p.isOpAt(1, "["):
		p.i++
		open := p.next().pos
		var items []ast.Expr
		if !p.isOp("]") {
			for {
				items = append(items, p.expr())
				if !p.acceptOp(",") {
					break
				}
			}
		}
		p.expectClose("]", open, w+"[...] constructor")
		if w == "ARRAY" {
			return &ast.ArrayCtor{Pos: t.pos, Items: items}
		}
		if len(items)%2 != 0 {
			p.fail(t.pos, "MAP[...] takes keys and values in pairs, found %d items", len(items))
		}
		return &ast.MapCtor{Pos: t.pos, Items: items}
	case w == "ROW" && paren:
		p.i++
		open := p.next().pos
		r := &ast.Row{Pos: t.pos, Explicit: true}
		if !p.acceptOp(")") {
			r.Items = p.exprList(open, "ROW constructor")
		}
		return r
	}
	return nil
}

func (p *parser) caseExpr() ast.Expr {
	open := p.expectWord("CASE").pos
	c := &ast.Case{Pos: open}
	if !p.isWord("WHEN") {
		c.Operand = p.expr()
	}
	for {
		t := p.peek()
		if !p.acceptWord("WHEN") {
			if len(c.Whens) == 0 {
				p.expected("WHEN in CASE")
			}
			break
		}
		w := &ast.When{Pos: t.pos, Cond: p.expr()}
		p.expectWord("THEN")
		w.Result = p.expr()
		c.Whens = append(c.Whens, w)
	}
	if p.acceptWord("ELSE") {
		c.Else = p.expr()
	}
	if !p.acceptWord("END") {
		t := p.peek()
		p.fail(t.pos, "expected WHEN, ELSE or END to close the CASE opened at %s, found %s", open, t.describe())
	}
	return c
}

func (p *parser) trim() ast.Expr {
	t := p.next()
	open := p.next().pos
	tr := &ast.Trim{Pos: t.pos}
	for _, side := range [...]string{"BOTH", "LEADING", "TRAILING"} {
		if p.acceptWord(side) {
			tr.Side = side
			break
		}
	}
	switch {
	case tr.Side != "" && p.acceptWord("FROM"):
		tr.X = p.expr()
	case tr.Side != "":
		tr.Chars = p.expr()
		p.expectWord("FROM")
		tr.X = p.expr()
	default:
		first := p.expr()
		if p.acceptWord("FROM") {
			tr.Chars = first
			tr.X = p.expr()
		} else {
			tr.X = first
		}
	}
	p.expectClose(")", open, "TRIM")
	return tr
}

func (p *parser) intervalLit() ast.Expr {
	t := p.expectWord("INTERVAL")
	lit := &ast.IntervalLit{Pos: t.pos}
	if p.acceptOp("-") {
		lit.Negative = true
	} else {
		p.acceptOp("+")
	}
	if p.peek().kind != tokString {
		p.expected("a string after INTERVAL (as in INTERVAL '10' SECOND)")
	}
	lit.Value = p.next().text
	lit.Qualifier = p.intervalQualifier()
	return lit
}

// timeUnits maps every accepted spelling of a time unit (singular and
// plural) to its canonical name.
var timeUnits = func() map[string]ast.TimeUnit {
	m := map[string]ast.TimeUnit{}
	for _, u := range strings.Fields(`YEAR QUARTER MONTH WEEK DAY HOUR MINUTE SECOND
		MILLISECOND MICROSECOND NANOSECOND`) {
		m[u] = ast.TimeUnit(u)
		m[u+"S"] = ast.TimeUnit(u)
	}
	for _, u := range strings.Fields(`EPOCH DOW DOY ISODOW ISOYEAR DECADE CENTURY MILLENNIUM`) {
		m[u] = ast.TimeUnit(u)
	}
	return m
}()

// intervalUnits are the units an interval qualifier may use.
var intervalUnits = map[ast.TimeUnit]int{"YEAR": 0, "MONTH": 1, "DAY": 2, "HOUR": 3, "MINUTE": 4, "SECOND": 5}

func (p *parser) timeUnit(what string) ast.TimeUnit {
	t := p.peek()
	if t.kind == tokWord {
		if u, ok := timeUnits[strings.ToUpper(t.text)]; ok {
			p.i++
			return u
		}
	}
	p.expected(what)
	return ""
}

const intervalUnitNames = "YEAR, MONTH, DAY, HOUR, MINUTE or SECOND"

// intervalQualifier parses "unit [(p [, f])] [TO unit [(f)]]".
func (p *parser) intervalQualifier() *ast.IntervalQualifier {
	t := p.peek()
	q := &ast.IntervalQualifier{Pos: t.pos, StartPrecision: -1, FracPrecision: -1}
	q.Start = p.intervalUnit("a time unit (" + intervalUnitNames + ")")
	if open := p.peek(); p.acceptOp("(") {
		q.StartPrecision = p.integer("a precision")
		if q.Start == "SECOND" && p.acceptOp(",") {
			q.FracPrecision = p.integer("a fractional second precision")
		}
		p.expectClose(")", open.pos, "precision")
	}
	if p.acceptWord("TO") {
		if q.FracPrecision >= 0 {
			p.fail(p.peek().pos, "expected no TO after SECOND(p, f)")
		}
		et := p.peek()
		q.End = p.intervalUnit("a time unit after " + string(q.Start) + " TO")
		valid := q.Start == "YEAR" && q.End == "MONTH" ||
			(q.Start == "DAY" || q.Start == "HOUR" || q.Start == "MINUTE") && intervalUnits[q.End] > intervalUnits[q.Start] && intervalUnits[q.End] >= intervalUnits["HOUR"]
		if !valid {
			p.fail(et.pos, "expected a valid interval range, found %s TO %s (allowed: YEAR TO MONTH, DAY TO HOUR|MINUTE|SECOND, HOUR TO MINUTE|SECOND, MINUTE TO SECOND)", q.Start, q.End)
		}
		if open := p.peek(); q.End == "SECOND" && p.acceptOp("(") {
			q.FracPrecision = p.integer("a fractional second precision")
			p.expectClose(")", open.pos, "precision")
		}
	}
	return q
}

func (p *parser) intervalUnit(what string) ast.TimeUnit {
	t := p.peek()
	if t.kind == tokWord {
		if u, ok := timeUnits[strings.ToUpper(t.text)]; ok {
			if _, ok := intervalUnits[u]; ok {
				p.i++
				return u
			}
		}
	}
	p.expected(what)
	return ""
}
