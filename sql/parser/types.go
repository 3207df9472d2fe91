package parser

import (
	"strings"

	"github.com/clinkstream/clink/sql/ast"
)

const dataTypeNames = "a data type (INT, BIGINT, STRING, DECIMAL(p, s), TIMESTAMP(p), ROW<...>, ...)"

// dataType parses a type and its optional NOT NULL (or explicit NULL).
func (p *parser) dataType() *ast.DataType {
	p.enter()
	defer p.leave()
	dt := p.baseType()
	if p.isWord("NOT") && p.isWordAt(1, "NULL") {
		p.i += 2
		dt.NotNull = true
	} else if p.isWord("NULL") {
		p.i++
	}
	return dt
}

// params parses an optional "(n [, m])" with at most max numbers.
func (p *parser) params(dt *ast.DataType, max int) {
	open := p.peek()
	if !p.acceptOp("(") {
		return
	}
	what := "parameters of " + dt.Name
	dt.Params = append(dt.Params, p.integer("an integer in the "+what))
	for len(dt.Params) < max && p.acceptOp(",") {
		dt.Params = append(dt.Params, p.integer("an integer in the "+what))
	}
	p.expectClose(")", open.pos, what)
}

func (p *parser) baseType() *ast.DataType {
	t := p.peek()
	if t.kind != tokWord {
		p.expected(dataTypeNames)
	}
	w := strings.ToUpper(t.text)
	dt := &ast.DataType{Pos: t.pos, Name: w}
	p.i++
	switch w {
	case "BOOLEAN", "TINYINT", "SMALLINT", "BIGINT", "FLOAT", "DATE", "STRING", "BYTES":
	case "INT", "INTEGER":
		dt.Name = "INT"
	case "DOUBLE":
		p.acceptWord("PRECISION")
	case "DECIMAL", "DEC", "NUMERIC":
		dt.Name = "DECIMAL"
		p.params(dt, 2)
	case "CHAR", "CHARACTER":
		dt.Name = "CHAR"
		if p.acceptWord("VARYING") {
			dt.Name = "VARCHAR"
		}
		p.params(dt, 1)
	case "VARCHAR", "BINARY", "VARBINARY":
		p.params(dt, 1)
	case "TIME":
		p.params(dt, 1)
		if p.acceptWord("WITHOUT") {
			p.expectWords("TIME", "ZONE")
		}
	case "TIMESTAMP":
		p.params(dt, 1)
		switch {
		case p.acceptWord("WITHOUT"):
			p.expectWords("TIME", "ZONE")
		case p.isWord("WITH") && p.isWordAt(1, "LOCAL"):
			p.i += 2
			p.expectWords("TIME", "ZONE")
			dt.Name = "TIMESTAMP_LTZ"
		case p.isWord("WITH") && p.isWordAt(1, "TIME"):
			p.fail(p.peek().pos, "TIMESTAMP WITH TIME ZONE is not supported (Flink has TIMESTAMP WITH LOCAL TIME ZONE, or TIMESTAMP_LTZ)")
		}
	case "TIMESTAMP_LTZ":
		p.params(dt, 1)
	case "INTERVAL":
		dt.Interval = p.intervalQualifier()
	case "ARRAY", "MULTISET":
		open := p.expectOp("<").pos
		dt.Elem = p.dataType()
		p.expectClose(">", open, w+"<...>")
	case "MAP":
		open := p.expectOp("<").pos
		dt.Key = p.dataType()
		if !p.acceptOp(",") {
			p.expected("',' and the value type of MAP<key, value>")
		}
		dt.Value = p.dataType()
		p.expectClose(">", open, "MAP<...>")
	case "ROW":
		p.rowFields(dt)
	default:
		p.i--
		p.expected(dataTypeNames)
	}
	return dt
}

// rowFields parses ROW<name type ['comment'], ...> or ROW(name type, ...).
func (p *parser) rowFields(dt *ast.DataType) {
	open := p.peek()
	closer := ">"
	switch {
	case p.acceptOp("<>"):
		return
	case p.acceptOp("<"):
	case p.acceptOp("("):
		closer = ")"
	default:
		p.expected("'<' or '(' after ROW")
	}
	if p.acceptOp(closer) {
		return
	}
	for {
		name := p.ident("a field name")
		f := &ast.RowField{Pos: name.Pos, Name: name.Name, Type: p.dataType()}
		if t := p.peek(); t.kind == tokString {
			p.i++
			f.Comment = &t.text
		}
		dt.Fields = append(dt.Fields, f)
		if !p.acceptOp(",") {
			break
		}
	}
	p.expectClose(closer, open.pos, "ROW"+open.text+"...")
}
