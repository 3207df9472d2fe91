package parser

import (
	"fmt"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
)

// Error is a syntax error: where it is and what was expected there.
type Error struct {
	Pos ast.Pos
	// Msg reads "expected X, found Y" for most errors.
	Msg string
}

// Error formats the error as "line L, column C: message".
func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// maxDepth bounds the nesting of parentheses, subqueries, types and prefix
// operators, so that no input can exhaust the stack.
const maxDepth = 200

// Parse parses a script: statements separated by semicolons. Empty
// statements are skipped; the last statement needs no semicolon.
func Parse(sql string) (stmts []ast.Statement, err error) {
	p := newParser(sql)
	defer p.recover(&err)
	for {
		for p.acceptOp(";") {
		}
		if p.peek().kind == tokEOF {
			return stmts, nil
		}
		stmts = append(stmts, p.statement())
		if p.peek().kind != tokEOF && !p.isOp(";") {
			p.expected("';' or end of input after the statement")
		}
	}
}

// ParseStatement parses exactly one statement, optionally followed by a
// semicolon.
func ParseStatement(sql string) (stmt ast.Statement, err error) {
	p := newParser(sql)
	defer p.recover(&err)
	stmt = p.statement()
	p.acceptOp(";")
	if p.peek().kind != tokEOF {
		p.expected("end of input after the statement")
	}
	return stmt, nil
}

// ParseExpr parses one scalar expression.
func ParseExpr(sql string) (e ast.Expr, err error) {
	p := newParser(sql)
	defer p.recover(&err)
	e = p.expr()
	if p.peek().kind != tokEOF {
		p.expected("end of input after the expression")
	}
	return e, nil
}

// ParseDataType parses one data type, such as `ROW<a INT, b STRING> NOT
// NULL`.
func ParseDataType(sql string) (t *ast.DataType, err error) {
	p := newParser(sql)
	defer p.recover(&err)
	t = p.dataType()
	if p.peek().kind != tokEOF {
		p.expected("end of input after the data type")
	}
	return t, nil
}

type parser struct {
	toks  []token
	i     int
	depth int
}

func newParser(sql string) *parser { return &parser{toks: lex(sql)} }

// bailout carries a syntax error up the stack to the entry point; the parser
// stops at the first error.
type bailout struct{ err *Error }

func (p *parser) recover(err *error) {
	if r := recover(); r != nil {
		b, ok := r.(bailout)
		if !ok {
			panic(r)
		}
		*err = b.err
	}
}

func (p *parser) fail(pos ast.Pos, format string, args ...any) {
	panic(bailout{&Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}})
}

// expected fails at the current token: "expected what, found <token>".
func (p *parser) expected(what string) {
	t := p.peek()
	p.fail(t.pos, "expected %s, found %s", what, t.describe())
}

// attempt runs f; if it fails, attempt restores the token position and
// returns the error.
func (p *parser) attempt(f func()) (err *Error) {
	saved := p.i
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bailout)
			if !ok {
				panic(r)
			}
			p.i = saved
			err = b.err
		}
	}()
	f()
	return nil
}

// enter guards recursion; every call must be paired with leave (deferred,
// so that a bailout unwinds it too).
func (p *parser) enter() {
	p.depth++
	if p.depth > maxDepth {
		p.fail(p.peek().pos, "nesting deeper than %d levels", maxDepth)
	}
}

func (p *parser) leave() { p.depth-- }

func (p *parser) peek() token { return p.peekAt(0) }

// peekAt returns the token n ahead; a lexical error becomes a syntax error
// as soon as the parser looks at it.
func (p *parser) peekAt(n int) token {
	j := min(p.i+n, len(p.toks)-1)
	t := p.toks[j]
	if t.kind == tokError {
		p.fail(t.pos, "%s", t.text)
	}
	return t
}

func (p *parser) next() token {
	t := p.peek()
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) isWordAt(n int, w string) bool {
	t := p.peekAt(n)
	return t.kind == tokWord && strings.EqualFold(t.text, w)
}

func (p *parser) isWord(w string) bool { return p.isWordAt(0, w) }

func (p *parser) acceptWord(w string) bool {
	if p.isWord(w) {
		p.i++
		return true
	}
	return false
}

// expectWord consumes keyword w or fails.
func (p *parser) expectWord(w string) token {
	if !p.isWord(w) {
		p.expected(w)
	}
	return p.next()
}

// expectWords consumes a keyword sequence like NOT ENFORCED.
func (p *parser) expectWords(ws ...string) {
	for i, w := range ws {
		if !p.isWord(w) {
			p.expected(strings.Join(ws[i:], " "))
		}
		p.i++
	}
}

func (p *parser) isOpAt(n int, op string) bool {
	t := p.peekAt(n)
	return t.kind == tokOp && t.text == op
}

func (p *parser) isOp(op string) bool { return p.isOpAt(0, op) }

func (p *parser) acceptOp(op string) bool {
	if p.isOp(op) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectOp(op string) token {
	if !p.isOp(op) {
		p.expected("'" + op + "'")
	}
	return p.next()
}

// expectClose consumes the closing bracket of something opened at open.
func (p *parser) expectClose(closer string, open ast.Pos, what string) {
	if !p.acceptOp(closer) {
		t := p.peek()
		p.fail(t.pos, "expected '%s' to close the %s opened at %s, found %s", closer, what, open, t.describe())
	}
}

// isName reports whether the token n ahead can be an identifier: a quoted
// name or a word that is not reserved.
func (p *parser) isNameAt(n int) bool {
	t := p.peekAt(n)
	return t.kind == tokQuoted || t.kind == tokWord && !ast.IsReserved(t.text)
}

// ident consumes an identifier; what names it for the error message.
func (p *parser) ident(what string) *ast.Ident {
	t := p.peek()
	if p.isNameAt(0) {
		p.i++
		return &ast.Ident{Pos: t.pos, Name: t.text}
	}
	if t.kind == tokWord {
		p.fail(t.pos, "expected %s, found keyword %s (a reserved word; quote it as `%s` to use it as a name)",
			what, strings.ToUpper(t.text), t.text)
	}
	p.expected(what)
	return nil
}

// pathPart consumes a name after a dot, where reserved words are allowed
// (t.value).
func (p *parser) pathPart(what string) string {
	t := p.peek()
	if t.kind == tokWord || t.kind == tokQuoted {
		p.i++
		return t.text
	}
	p.expected(what)
	return ""
}

// objectName consumes a possibly qualified name: a, a.b, a.b.c.
func (p *parser) objectName(what string) *ast.ObjectName {
	first := p.ident(what)
	n := &ast.ObjectName{Pos: first.Pos, Parts: []string{first.Name}}
	for p.acceptOp(".") {
		n.Parts = append(n.Parts, p.pathPart(what))
	}
	return n
}

// identList consumes "(a, b, ...)" with at least one name.
func (p *parser) identList(what, listName string) []*ast.Ident {
	open := p.expectOp("(").pos
	var ids []*ast.Ident
	for {
		ids = append(ids, p.ident(what))
		if !p.acceptOp(",") {
			break
		}
	}
	p.expectClose(")", open, listName)
	return ids
}

// stringLit consumes a string literal.
func (p *parser) stringLit(what string) string {
	t := p.peek()
	if t.kind != tokString {
		p.expected(what)
	}
	p.i++
	return t.text
}

// integer consumes an unsigned integer literal.
func (p *parser) integer(what string) int {
	t := p.peek()
	if t.kind != tokNumber || strings.ContainsAny(t.text, ".E") {
		p.expected(what)
	}
	n := 0
	for _, c := range t.text {
		n = n*10 + int(c-'0')
		if n > 1<<31-1 {
			p.fail(t.pos, "%s %s is too large", what, t.text)
		}
	}
	p.i++
	return n
}

// startsQuery reports whether the token n ahead begins a query.
func (p *parser) startsQueryAt(n int) bool {
	return p.isWordAt(n, "SELECT") || p.isWordAt(n, "WITH") || p.isWordAt(n, "VALUES")
}

// parenQueryAhead reports whether the tokens from the current '(' on are
// a run of '(' followed by the start of a query, so that the parenthesized
// thing may be a query (it may still be an expression or a join that starts
// with a subquery).
func (p *parser) parenQueryAhead() bool {
	n := 0
	for n <= maxDepth && p.isOpAt(n, "(") {
		n++
	}
	return n > 0 && p.startsQueryAt(n)
}
