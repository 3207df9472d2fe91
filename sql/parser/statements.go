package parser

import (
	"strings"

	"github.com/clinkstream/clink/sql/ast"
)

const statementStarts = "a statement (CREATE, DROP, INSERT, SELECT, SET, RESET, EXPLAIN, EXECUTE STATEMENT SET or BEGIN STATEMENT SET)"

func (p *parser) statement() ast.Statement {
	t := p.peek()
	switch {
	case p.isWord("CREATE"):
		return p.create()
	case p.isWord("DROP"):
		return p.drop()
	case p.isWord("SET"):
		return p.set()
	case p.isWord("RESET"):
		return p.reset()
	case p.isWord("INSERT"):
		return p.insert()
	case p.isWord("EXECUTE"):
		p.i++
		if p.isWord("INSERT") {
			return p.insert()
		}
		p.expectWords("STATEMENT", "SET")
		return p.statementSetBody(t.pos, true)
	case p.isWord("BEGIN"):
		p.i++
		p.expectWords("STATEMENT", "SET")
		return p.statementSetBody(t.pos, false)
	case p.isWord("EXPLAIN"):
		return p.explain()
	case p.startsQueryAt(0) || p.isOp("("):
		return p.query()
	}
	p.expected(statementStarts)
	return nil
}

func (p *parser) create() ast.Statement {
	pos := p.expectWord("CREATE").pos
	temporary := p.acceptWord("TEMPORARY")
	system := temporary && p.acceptWord("SYSTEM")
	switch {
	case p.isWord("FUNCTION"):
		return p.createFunction(pos, temporary, system)
	case system:
		p.expected("FUNCTION after CREATE TEMPORARY SYSTEM")
	case p.isWord("TABLE"):
		return p.createTable(pos, temporary)
	case p.isWord("VIEW"):
		return p.createView(pos, temporary)
	}
	p.expected("TABLE, VIEW or FUNCTION after CREATE")
	return nil
}

func (p *parser) ifNotExists() bool {
	if p.acceptWord("IF") {
		p.expectWords("NOT", "EXISTS")
		return true
	}
	return false
}

func (p *parser) createTable(pos ast.Pos, temporary bool) *ast.CreateTable {
	p.expectWord("TABLE")
	s := &ast.CreateTable{Pos: pos, Temporary: temporary}
	s.IfNotExists = p.ifNotExists()
	s.Name = p.objectName("a table name")
	afterName := p.peek()
	if p.isOp("(") {
		open := p.next().pos
		for {
			p.tableElement(s)
			if !p.acceptOp(",") {
				break
			}
		}
		p.expectClose(")", open, "column list")
	}
	if p.acceptWord("COMMENT") {
		c := p.stringLit("a string literal after COMMENT")
		s.Comment = &c
	}
	if p.acceptWord("PARTITIONED") {
		p.expectWord("BY")
		s.PartitionBy = p.identList("a partition column name", "PARTITIONED BY list")
	}
	if p.acceptWord("WITH") {
		s.Options = p.options()
	}
	if p.isWord("LIKE") {
		p.fail(p.peek().pos, "CREATE TABLE ... LIKE is not supported yet")
	}
	if p.acceptWord("AS") {
		s.AsQuery = p.query()
	}
	if afterName.kind != tokOp || afterName.text != "(" {
		if s.AsQuery == nil {
			p.fail(afterName.pos, "expected '(' and the column list after CREATE TABLE %s, found %s", s.Name, afterName.describe())
		}
	}
	return s
}

// tableElement parses one item of CREATE TABLE's parenthesized list: a
// column, a WATERMARK or a PRIMARY KEY.
func (p *parser) tableElement(s *ast.CreateTable) {
	t := p.peek()
	switch {
	case p.isWord("WATERMARK") && p.isWordAt(1, "FOR"):
		p.i += 2
		if s.Watermark != nil {
			p.fail(t.pos, "duplicate WATERMARK: a table has at most one, and one was declared at %s", s.Watermark.Pos)
		}
		w := &ast.Watermark{Pos: t.pos}
		w.Column = []string{p.ident("the rowtime column name").Name}
		for p.acceptOp(".") {
			w.Column = append(w.Column, p.pathPart("a field name"))
		}
		p.expectWord("AS")
		w.Expr = p.expr()
		s.Watermark = w
	case p.isWord("CONSTRAINT") || p.isWord("PRIMARY"):
		pk := &ast.PrimaryKey{Pos: t.pos}
		if p.acceptWord("CONSTRAINT") {
			pk.Name = p.ident("a constraint name")
		}
		p.expectWords("PRIMARY", "KEY")
		pk.Columns = p.identList("a column name", "PRIMARY KEY column list")
		p.notEnforced()
		p.setPrimaryKey(s, pk)
	case p.isWord("UNIQUE"):
		p.fail(t.pos, "UNIQUE constraints are not supported (Flink supports only PRIMARY KEY ... NOT ENFORCED)")
	default:
		s.Columns = append(s.Columns, p.columnDef(s))
	}
}

func (p *parser) notEnforced() {
	if !p.isWord("NOT") || !p.isWordAt(1, "ENFORCED") {
		p.expected("NOT ENFORCED (Flink does not enforce primary keys, so the key must say so)")
	}
	p.i += 2
}

func (p *parser) setPrimaryKey(s *ast.CreateTable, pk *ast.PrimaryKey) {
	if s.PrimaryKey != nil {
		p.fail(pk.Pos, "duplicate PRIMARY KEY: a table has at most one, and one was declared at %s", s.PrimaryKey.Pos)
	}
	s.PrimaryKey = pk
}

func (p *parser) columnDef(s *ast.CreateTable) *ast.ColumnDef {
	name := p.ident("a column name, WATERMARK or PRIMARY KEY")
	c := &ast.ColumnDef{Pos: name.Pos, Name: name}
	if p.acceptWord("AS") {
		c.Kind = ast.ComputedColumn
		c.Expr = p.expr()
	} else {
		c.Type = p.dataType()
		if p.acceptWord("METADATA") {
			c.Kind = ast.MetadataColumn
			if p.acceptWord("FROM") {
				k := p.stringLit("a string literal naming the metadata key")
				c.MetadataKey = &k
			}
			c.Virtual = p.acceptWord("VIRTUAL")
		}
		if t := p.peek(); p.isWord("CONSTRAINT") || p.isWord("PRIMARY") {
			pk := &ast.PrimaryKey{Pos: t.pos, Columns: []*ast.Ident{name}}
			if p.acceptWord("CONSTRAINT") {
				pk.Name = p.ident("a constraint name")
			}
			p.expectWords("PRIMARY", "KEY")
			p.notEnforced()
			p.setPrimaryKey(s, pk)
		}
	}
	if p.acceptWord("COMMENT") {
		cm := p.stringLit("a string literal after COMMENT")
		c.Comment = &cm
	}
	return c
}

// options parses "(key = 'value', ...)" of a WITH clause. Keys may be
// string literals or bare dotted names.
func (p *parser) options() []*ast.Option {
	open := p.expectOp("(").pos
	var opts []*ast.Option
	seen := map[string]ast.Pos{}
	for {
		t := p.peek()
		o := &ast.Option{Pos: t.pos}
		switch t.kind {
		case tokString:
			p.i++
			o.Key = t.text
		case tokWord, tokQuoted:
			o.Key = p.dottedKey()
		default:
			p.expected("an option key ('key' or key)")
		}
		if prev, dup := seen[o.Key]; dup {
			p.fail(t.pos, "duplicate option %s: it was already set at %s", ast.QuoteString(o.Key), prev)
		}
		seen[o.Key] = t.pos
		p.expectOp("=")
		o.Value = p.stringLit("a string literal as the value of option " + ast.QuoteString(o.Key))
		opts = append(opts, o)
		if !p.acceptOp(",") {
			break
		}
	}
	p.expectClose(")", open, "WITH option list")
	return opts
}

// dottedKey consumes a bare option key: words joined by dots.
func (p *parser) dottedKey() string {
	parts := []string{p.pathPart("an option key")}
	for p.acceptOp(".") {
		parts = append(parts, p.pathPart("the rest of the option key"))
	}
	return strings.Join(parts, ".")
}

func (p *parser) createView(pos ast.Pos, temporary bool) *ast.CreateView {
	p.expectWord("VIEW")
	s := &ast.CreateView{Pos: pos, Temporary: temporary}
	s.IfNotExists = p.ifNotExists()
	s.Name = p.objectName("a view name")
	if p.isOp("(") {
		s.Columns = p.identList("a column name", "view column list")
	}
	if p.acceptWord("COMMENT") {
		c := p.stringLit("a string literal after COMMENT")
		s.Comment = &c
	}
	p.expectWord("AS")
	s.Query = p.query()
	return s
}

func (p *parser) createFunction(pos ast.Pos, temporary, system bool) *ast.CreateFunction {
	p.expectWord("FUNCTION")
	s := &ast.CreateFunction{Pos: pos, Temporary: temporary, System: system}
	s.IfNotExists = p.ifNotExists()
	s.Name = p.objectName("a function name")
	p.expectWord("AS")
	s.Class = p.stringLit("a string literal naming the function's class")
	if p.acceptWord("LANGUAGE") {
		t := p.peek()
		switch lang := strings.ToUpper(t.text); {
		case t.kind == tokWord && (lang == "JAVA" || lang == "SCALA" || lang == "PYTHON"):
			p.i++
			s.Language = lang
		default:
			p.expected("JAVA, SCALA or PYTHON after LANGUAGE")
		}
	}
	if p.isWord("USING") {
		p.fail(p.peek().pos, "CREATE FUNCTION ... USING JAR is not supported")
	}
	return s
}

func (p *parser) drop() *ast.Drop {
	s := &ast.Drop{Pos: p.expectWord("DROP").pos}
	s.Temporary = p.acceptWord("TEMPORARY")
	switch {
	case p.acceptWord("TABLE"):
		s.Object = "TABLE"
	case p.acceptWord("VIEW"):
		s.Object = "VIEW"
	case p.acceptWord("FUNCTION"):
		s.Object = "FUNCTION"
	default:
		p.expected("TABLE, VIEW or FUNCTION after DROP")
	}
	if p.acceptWord("IF") {
		p.expectWord("EXISTS")
		s.IfExists = true
	}
	s.Name = p.objectName("a " + strings.ToLower(s.Object) + " name")
	return s
}

// atStatementEnd reports whether the statement ends here.
func (p *parser) atStatementEnd() bool { return p.isOp(";") || p.peek().kind == tokEOF }

func (p *parser) set() *ast.Set {
	s := &ast.Set{Pos: p.expectWord("SET").pos}
	if p.atStatementEnd() {
		return s
	}
	s.Key = p.configKey()
	p.expectOp("=")
	t := p.peek()
	switch t.kind {
	case tokString, tokNumber:
		p.i++
		s.Value = t.text
	case tokWord, tokQuoted:
		s.Value = p.dottedKey()
	default:
		p.expected("a value for " + ast.QuoteString(s.Key) + " ('value')")
	}
	return s
}

func (p *parser) configKey() string {
	t := p.peek()
	switch t.kind {
	case tokString:
		if t.text == "" {
			p.fail(t.pos, "expected a configuration key, found an empty string")
		}
		p.i++
		return t.text
	case tokWord, tokQuoted:
		return p.dottedKey()
	}
	p.expected("a configuration key ('key')")
	return ""
}

func (p *parser) reset() *ast.Reset {
	s := &ast.Reset{Pos: p.expectWord("RESET").pos}
	if !p.atStatementEnd() {
		s.Key = p.configKey()
	}
	return s
}

func (p *parser) insert() *ast.Insert {
	s := &ast.Insert{Pos: p.expectWord("INSERT").pos}
	switch {
	case p.acceptWord("INTO"):
	case p.acceptWord("OVERWRITE"):
		s.Overwrite = true
	default:
		p.expected("INTO or OVERWRITE after INSERT")
	}
	s.Table = p.objectName("a table name")
	if p.isWord("PARTITION") {
		p.fail(p.peek().pos, "static partitions (INSERT ... PARTITION (...)) are not supported yet")
	}
	if p.isOp("(") && !p.parenQueryAhead() {
		s.Columns = p.identList("a column name", "target column list")
	}
	if !p.startsQueryAt(0) && !p.isOp("(") {
		p.expected("a query (SELECT, VALUES, WITH or '(') after INSERT INTO " + s.Table.String())
	}
	s.Query = p.query()
	return s
}

// statementSetBody parses what follows EXECUTE STATEMENT SET (BEGIN ...
// END) or BEGIN STATEMENT SET (; ... END): INSERTs each ended by ';'.
func (p *parser) statementSetBody(pos ast.Pos, execute bool) *ast.StatementSet {
	s := &ast.StatementSet{Pos: pos}
	if execute {
		p.expectWord("BEGIN")
	} else {
		p.expectOp(";")
	}
	for {
		for p.acceptOp(";") {
		}
		if len(s.Inserts) > 0 && p.acceptWord("END") {
			return s
		}
		if !p.isWord("INSERT") {
			if len(s.Inserts) == 0 {
				p.expected("INSERT in the statement set opened at " + pos.String())
			}
			p.expected("INSERT or END to close the statement set opened at " + pos.String())
		}
		s.Inserts = append(s.Inserts, p.insert())
		if !p.isOp(";") {
			p.expected("';' after the INSERT in the statement set")
		}
	}
}

var explainDetails = map[string]bool{
	"ESTIMATED_COST": true, "CHANGELOG_MODE": true, "JSON_EXECUTION_PLAN": true, "PLAN_ADVICE": true,
}

func (p *parser) explain() *ast.Explain {
	s := &ast.Explain{Pos: p.expectWord("EXPLAIN").pos}
	if p.acceptWord("PLAN") {
		p.expectWord("FOR")
	} else if t := p.peek(); t.kind == tokWord && explainDetails[strings.ToUpper(t.text)] {
		for {
			t := p.peek()
			d := strings.ToUpper(t.text)
			if t.kind != tokWord || !explainDetails[d] {
				p.expected("ESTIMATED_COST, CHANGELOG_MODE, JSON_EXECUTION_PLAN or PLAN_ADVICE")
			}
			p.i++
			s.Details = append(s.Details, d)
			if !p.acceptOp(",") {
				break
			}
		}
	}
	t := p.peek()
	switch {
	case p.isWord("INSERT"):
		s.Stmt = p.insert()
	case p.isWord("EXECUTE") && p.isWordAt(1, "INSERT"):
		p.i++
		s.Stmt = p.insert()
	case p.isWord("EXECUTE"):
		p.i++
		p.expectWords("STATEMENT", "SET")
		s.Stmt = p.statementSetBody(t.pos, true)
	case p.isWord("STATEMENT"):
		p.expectWords("STATEMENT", "SET")
		s.Stmt = p.statementSetBody(t.pos, true)
	case p.startsQueryAt(0) || p.isOp("("):
		s.Stmt = p.query()
	default:
		p.expected("a query, INSERT or STATEMENT SET after EXPLAIN")
	}
	return s
}
