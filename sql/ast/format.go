package ast

import (
	"strconv"
	"strings"
)

// Expression precedence, loosest first; the parser uses the same levels.
// Atoms (literals, names, calls, CASE, ...) bind tightest.
const (
	precOr = iota + 1
	precAnd
	precNot
	precIs      // IS [NOT] NULL/TRUE/..., IS DISTINCT FROM
	precCmp     // = <> < <= > >=
	precBetween // BETWEEN, IN, LIKE, SIMILAR TO
	precAdd     // + -
	precMul     // * / % ||
	precUnary   // prefix - +
	precPostfix // x[i], x.f
	precAtom
)

func binaryPrec(op BinaryOp) int {
	switch op {
	case OpOr:
		return precOr
	case OpAnd:
		return precAnd
	case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		return precCmp
	case OpAdd, OpSub:
		return precAdd
	default:
		return precMul
	}
}

func exprPrec(e Expr) int {
	switch e := e.(type) {
	case *Binary:
		return binaryPrec(e.Op)
	case *Unary:
		if e.Op == OpNot {
			return precNot
		}
		return precUnary
	case *Is, *IsDistinctFrom:
		return precIs
	case *Between, *InList, *InSubquery, *Like:
		return precBetween
	case *Index, *FieldAccess:
		return precPostfix
	case *NamedArg:
		// Only valid as a whole call argument; parenthesizing it would
		// not parse, and it never appears below an operator.
		return precAtom
	default:
		return precAtom
	}
}

// printer accumulates canonical SQL.
type printer struct {
	b strings.Builder
}

func (p *printer) w(ss ...string) {
	for _, s := range ss {
		p.b.WriteString(s)
	}
}

// expr prints e, parenthesized if it binds looser than min.
func (p *printer) expr(e Expr, min int) {
	if exprPrec(e) < min {
		p.w("(")
		e.format(p)
		p.w(")")
		return
	}
	e.format(p)
}

func (p *printer) exprList(list []Expr) {
	for i, e := range list {
		if i > 0 {
			p.w(", ")
		}
		e.format(p)
	}
}

func (p *printer) idents(list []*Ident) {
	for i, id := range list {
		if i > 0 {
			p.w(", ")
		}
		p.w(QuoteIdent(id.Name))
	}
}

func (p *printer) path(parts []string) {
	for i, s := range parts {
		if i > 0 {
			p.w(".")
		}
		p.w(QuoteIdent(s))
	}
}

func (p *printer) orderBy(items []*OrderItem) {
	for i, it := range items {
		if i > 0 {
			p.w(", ")
		}
		it.format(p)
	}
}

// QuoteString returns s as an SQL string literal.
func QuoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func toString(n Node) string {
	var p printer
	n.format(&p)
	return p.b.String()
}

// FormatScript prints statements as a script: each statement followed by
// ";" and a newline.
func FormatScript(stmts []Statement) string {
	var p printer
	for _, s := range stmts {
		s.format(&p)
		p.w(";\n")
	}
	return p.b.String()
}

// ---------------------------------------------------------------------------
// Names

// String prints the Ident as canonical SQL.
func (n *Ident) String() string    { return toString(n) }
func (n *Ident) format(p *printer) { p.w(QuoteIdent(n.Name)) }

// String prints the ObjectName as canonical SQL.
func (n *ObjectName) String() string    { return toString(n) }
func (n *ObjectName) format(p *printer) { p.path(n.Parts) }

// ---------------------------------------------------------------------------
// Statements

// String prints the CreateTable as canonical SQL.
func (s *CreateTable) String() string { return toString(s) }
func (s *CreateTable) format(p *printer) {
	p.w("CREATE ")
	if s.Temporary {
		p.w("TEMPORARY ")
	}
	p.w("TABLE ")
	if s.IfNotExists {
		p.w("IF NOT EXISTS ")
	}
	s.Name.format(p)
	if len(s.Columns) > 0 || s.Watermark != nil || s.PrimaryKey != nil {
		p.w(" (")
		sep := ""
		for _, c := range s.Columns {
			p.w(sep)
			c.format(p)
			sep = ", "
		}
		if s.Watermark != nil {
			p.w(sep)
			s.Watermark.format(p)
			sep = ", "
		}
		if s.PrimaryKey != nil {
			p.w(sep)
			s.PrimaryKey.format(p)
		}
		p.w(")")
	}
	if s.Comment != nil {
		p.w(" COMMENT ", QuoteString(*s.Comment))
	}
	if len(s.PartitionBy) > 0 {
		p.w(" PARTITIONED BY (")
		p.idents(s.PartitionBy)
		p.w(")")
	}
	if len(s.Options) > 0 {
		p.w(" WITH (")
		for i, o := range s.Options {
			if i > 0 {
				p.w(", ")
			}
			o.format(p)
		}
		p.w(")")
	}
	if s.AsQuery != nil {
		p.w(" AS ")
		s.AsQuery.format(p)
	}
}

// String prints the ColumnDef as canonical SQL.
func (c *ColumnDef) String() string { return toString(c) }
func (c *ColumnDef) format(p *printer) {
	c.Name.format(p)
	switch c.Kind {
	case ComputedColumn:
		p.w(" AS ")
		c.Expr.format(p)
	default:
		p.w(" ")
		c.Type.format(p)
		if c.Kind == MetadataColumn {
			p.w(" METADATA")
			if c.MetadataKey != nil {
				p.w(" FROM ", QuoteString(*c.MetadataKey))
			}
			if c.Virtual {
				p.w(" VIRTUAL")
			}
		}
	}
	if c.Comment != nil {
		p.w(" COMMENT ", QuoteString(*c.Comment))
	}
}

// String prints the Watermark as canonical SQL.
func (w *Watermark) String() string { return toString(w) }
func (w *Watermark) format(p *printer) {
	p.w("WATERMARK FOR ")
	p.path(w.Column)
	p.w(" AS ")
	w.Expr.format(p)
}

// String prints the PrimaryKey as canonical SQL.
func (k *PrimaryKey) String() string { return toString(k) }
func (k *PrimaryKey) format(p *printer) {
	if k.Name != nil {
		p.w("CONSTRAINT ", QuoteIdent(k.Name.Name), " ")
	}
	p.w("PRIMARY KEY (")
	p.idents(k.Columns)
	p.w(") NOT ENFORCED")
}

// String prints the Option as canonical SQL.
func (o *Option) String() string { return toString(o) }
func (o *Option) format(p *printer) {
	p.w(QuoteString(o.Key), " = ", QuoteString(o.Value))
}

// String prints the CreateView as canonical SQL.
func (s *CreateView) String() string { return toString(s) }
func (s *CreateView) format(p *printer) {
	p.w("CREATE ")
	if s.Temporary {
		p.w("TEMPORARY ")
	}
	p.w("VIEW ")
	if s.IfNotExists {
		p.w("IF NOT EXISTS ")
	}
	s.Name.format(p)
	if len(s.Columns) > 0 {
		p.w(" (")
		p.idents(s.Columns)
		p.w(")")
	}
	if s.Comment != nil {
		p.w(" COMMENT ", QuoteString(*s.Comment))
	}
	p.w(" AS ")
	s.Query.format(p)
}

// String prints the CreateFunction as canonical SQL.
func (s *CreateFunction) String() string { return toString(s) }
func (s *CreateFunction) format(p *printer) {
	p.w("CREATE ")
	if s.Temporary {
		p.w("TEMPORARY ")
		if s.System {
			p.w("SYSTEM ")
		}
	}
	p.w("FUNCTION ")
	if s.IfNotExists {
		p.w("IF NOT EXISTS ")
	}
	s.Name.format(p)
	p.w(" AS ", QuoteString(s.Class))
	if s.Language != "" {
		p.w(" LANGUAGE ", s.Language)
	}
}

// String prints the Drop as canonical SQL.
func (s *Drop) String() string { return toString(s) }
func (s *Drop) format(p *printer) {
	p.w("DROP ")
	if s.Temporary {
		p.w("TEMPORARY ")
	}
	p.w(s.Object, " ")
	if s.IfExists {
		p.w("IF EXISTS ")
	}
	s.Name.format(p)
}

// String prints the Set as canonical SQL.
func (s *Set) String() string { return toString(s) }
func (s *Set) format(p *printer) {
	p.w("SET")
	if s.Key != "" {
		p.w(" ", QuoteString(s.Key), " = ", QuoteString(s.Value))
	}
}

// String prints the Reset as canonical SQL.
func (s *Reset) String() string { return toString(s) }
func (s *Reset) format(p *printer) {
	p.w("RESET")
	if s.Key != "" {
		p.w(" ", QuoteString(s.Key))
	}
}

// String prints the Insert as canonical SQL.
func (s *Insert) String() string { return toString(s) }
func (s *Insert) format(p *printer) {
	if s.Overwrite {
		p.w("INSERT OVERWRITE ")
	} else {
		p.w("INSERT INTO ")
	}
	s.Table.format(p)
	if len(s.Columns) > 0 {
		p.w(" (")
		p.idents(s.Columns)
		p.w(")")
	}
	p.w(" ")
	s.Query.format(p)
}

// String prints the StatementSet as canonical SQL.
func (s *StatementSet) String() string { return toString(s) }
func (s *StatementSet) format(p *printer) {
	p.w("EXECUTE ")
	s.formatBody(p)
}

func (s *StatementSet) formatBody(p *printer) {
	p.w("STATEMENT SET BEGIN ")
	for _, ins := range s.Inserts {
		ins.format(p)
		p.w("; ")
	}
	p.w("END")
}

// String prints the Explain as canonical SQL.
func (s *Explain) String() string { return toString(s) }
func (s *Explain) format(p *printer) {
	p.w("EXPLAIN ")
	if len(s.Details) > 0 {
		p.w(strings.Join(s.Details, ", "), " ")
	}
	if set, ok := s.Stmt.(*StatementSet); ok {
		set.formatBody(p)
		return
	}
	s.Stmt.format(p)
}

// ---------------------------------------------------------------------------
// Queries

// String prints the Query as canonical SQL.
func (q *Query) String() string { return toString(q) }
func (q *Query) format(p *printer) {
	if len(q.With) > 0 {
		p.w("WITH ")
		for i, c := range q.With {
			if i > 0 {
				p.w(", ")
			}
			c.format(p)
		}
		p.w(" ")
	}
	formatBody(p, q.Body)
	if len(q.OrderBy) > 0 {
		p.w(" ORDER BY ")
		p.orderBy(q.OrderBy)
	}
	if q.Limit != nil {
		p.w(" LIMIT ")
		q.Limit.format(p)
	}
	if q.Offset != nil {
		p.w(" OFFSET ")
		q.Offset.format(p)
	}
}

// formatBody prints a query body; a nested Query (one with its own WITH,
// ORDER BY or LIMIT) needs parentheses.
func formatBody(p *printer, b QueryBody) {
	if q, ok := b.(*Query); ok {
		p.w("(")
		q.format(p)
		p.w(")")
		return
	}
	b.format(p)
}

// String prints the CTE as canonical SQL.
func (c *CTE) String() string { return toString(c) }
func (c *CTE) format(p *printer) {
	c.Name.format(p)
	if len(c.Columns) > 0 {
		p.w(" (")
		p.idents(c.Columns)
		p.w(")")
	}
	p.w(" AS (")
	c.Query.format(p)
	p.w(")")
}

// String prints the Select as canonical SQL.
func (s *Select) String() string { return toString(s) }
func (s *Select) format(p *printer) {
	p.w("SELECT ")
	if s.Distinct {
		p.w("DISTINCT ")
	}
	for i, it := range s.Items {
		if i > 0 {
			p.w(", ")
		}
		it.format(p)
	}
	if s.From != nil {
		p.w(" FROM ")
		s.From.format(p)
	}
	if s.Where != nil {
		p.w(" WHERE ")
		s.Where.format(p)
	}
	if len(s.GroupBy) > 0 {
		p.w(" GROUP BY ")
		p.exprList(s.GroupBy)
	}
	if s.Having != nil {
		p.w(" HAVING ")
		s.Having.format(p)
	}
}

// String prints the SelectItem as canonical SQL.
func (it *SelectItem) String() string { return toString(it) }
func (it *SelectItem) format(p *printer) {
	it.Expr.format(p)
	if it.Alias != nil {
		p.w(" AS ", QuoteIdent(it.Alias.Name))
	}
}

func setOpPrec(b QueryBody) int {
	if s, ok := b.(*SetOp); ok {
		if s.Op == Intersect {
			return 2
		}
		return 1
	}
	return 3
}

// String prints the SetOp as canonical SQL.
func (s *SetOp) String() string { return toString(s) }
func (s *SetOp) format(p *printer) {
	prec := setOpPrec(s)
	if setOpPrec(s.Left) < prec {
		p.w("(")
		s.Left.format(p)
		p.w(")")
	} else {
		formatBody(p, s.Left)
	}
	p.w(" ", s.Op.String(), " ")
	if s.All {
		p.w("ALL ")
	}
	if setOpPrec(s.Right) <= prec {
		p.w("(")
		s.Right.format(p)
		p.w(")")
	} else {
		formatBody(p, s.Right)
	}
}

// String prints the Values as canonical SQL.
func (v *Values) String() string { return toString(v) }
func (v *Values) format(p *printer) {
	p.w("VALUES ")
	for i, row := range v.Rows {
		if i > 0 {
			p.w(", ")
		}
		p.w("(")
		p.exprList(row)
		p.w(")")
	}
}

// String prints the OrderItem as canonical SQL.
func (o *OrderItem) String() string { return toString(o) }
func (o *OrderItem) format(p *printer) {
	o.Expr.format(p)
	if o.Desc {
		p.w(" DESC")
	}
	switch o.Nulls {
	case NullsFirst:
		p.w(" NULLS FIRST")
	case NullsLast:
		p.w(" NULLS LAST")
	}
}

// ---------------------------------------------------------------------------
// Table references

// String prints the Alias as canonical SQL.
func (a *Alias) String() string { return toString(a) }
func (a *Alias) format(p *printer) {
	p.w("AS ", QuoteIdent(a.Name))
	if len(a.Columns) > 0 {
		p.w(" (")
		p.idents(a.Columns)
		p.w(")")
	}
}

func formatAlias(p *printer, a *Alias) {
	if a != nil {
		p.w(" ")
		a.format(p)
	}
}

// String prints the TableName as canonical SQL.
func (t *TableName) String() string { return toString(t) }
func (t *TableName) format(p *printer) {
	t.Name.format(p)
	if t.ForSystemTime != nil {
		p.w(" FOR SYSTEM_TIME AS OF ")
		t.ForSystemTime.format(p)
	}
	formatAlias(p, t.Alias)
}

// String prints the DerivedTable as canonical SQL.
func (t *DerivedTable) String() string { return toString(t) }
func (t *DerivedTable) format(p *printer) {
	if t.Lateral {
		p.w("LATERAL ")
	}
	p.w("(")
	t.Query.format(p)
	p.w(")")
	formatAlias(p, t.Alias)
}

// String prints the TableFunction as canonical SQL.
func (t *TableFunction) String() string { return toString(t) }
func (t *TableFunction) format(p *printer) {
	if t.Lateral {
		p.w("LATERAL ")
	}
	p.w("TABLE(")
	t.Call.format(p)
	p.w(")")
	formatAlias(p, t.Alias)
}

// String prints the Unnest as canonical SQL.
func (t *Unnest) String() string { return toString(t) }
func (t *Unnest) format(p *printer) {
	p.w("UNNEST(")
	p.exprList(t.Exprs)
	p.w(")")
	if t.WithOrdinality {
		p.w(" WITH ORDINALITY")
	}
	formatAlias(p, t.Alias)
}

// String prints the Join as canonical SQL.
func (j *Join) String() string { return toString(j) }
func (j *Join) format(p *printer) {
	if l, ok := j.Left.(*Join); ok && l.Kind == CommaJoin && j.Kind != CommaJoin {
		p.w("(")
		l.format(p)
		p.w(")")
	} else {
		j.Left.format(p)
	}
	if j.Kind == CommaJoin {
		p.w(", ")
	} else {
		p.w(" ", j.Kind.String(), " ")
	}
	if r, ok := j.Right.(*Join); ok {
		p.w("(")
		r.format(p)
		p.w(")")
	} else {
		j.Right.format(p)
	}
	if j.On != nil {
		p.w(" ON ")
		j.On.format(p)
	}
	if len(j.Using) > 0 {
		p.w(" USING (")
		p.idents(j.Using)
		p.w(")")
	}
}

// ---------------------------------------------------------------------------
// Expressions

// String prints the ColumnRef as canonical SQL.
func (e *ColumnRef) String() string    { return toString(e) }
func (e *ColumnRef) format(p *printer) { p.path(e.Parts) }

// String prints the Star as canonical SQL.
func (e *Star) String() string { return toString(e) }
func (e *Star) format(p *printer) {
	if len(e.Qualifier) > 0 {
		p.path(e.Qualifier)
		p.w(".")
	}
	p.w("*")
}

// String prints the NumberLit as canonical SQL.
func (e *NumberLit) String() string    { return toString(e) }
func (e *NumberLit) format(p *printer) { p.w(e.Text) }

// String prints the StringLit as canonical SQL.
func (e *StringLit) String() string    { return toString(e) }
func (e *StringLit) format(p *printer) { p.w(QuoteString(e.Value)) }

// String prints the BinaryLit as canonical SQL.
func (e *BinaryLit) String() string    { return toString(e) }
func (e *BinaryLit) format(p *printer) { p.w("X'", e.Hex, "'") }

// String prints the BoolLit as canonical SQL.
func (e *BoolLit) String() string { return toString(e) }
func (e *BoolLit) format(p *printer) {
	if e.Value {
		p.w("TRUE")
	} else {
		p.w("FALSE")
	}
}

// String prints the NullLit as canonical SQL.
func (e *NullLit) String() string    { return toString(e) }
func (e *NullLit) format(p *printer) { p.w("NULL") }

// String prints the TypedLit as canonical SQL.
func (e *TypedLit) String() string    { return toString(e) }
func (e *TypedLit) format(p *printer) { p.w(e.Type, " ", QuoteString(e.Value)) }

// String prints the IntervalQualifier as canonical SQL.
func (q *IntervalQualifier) String() string { return toString(q) }
func (q *IntervalQualifier) format(p *printer) {
	p.w(string(q.Start))
	if q.StartPrecision >= 0 {
		p.w("(", strconv.Itoa(q.StartPrecision))
		if q.End == "" && q.Start == "SECOND" && q.FracPrecision >= 0 {
			p.w(", ", strconv.Itoa(q.FracPrecision))
		}
		p.w(")")
	}
	if q.End != "" {
		p.w(" TO ", string(q.End))
		if q.End == "SECOND" && q.FracPrecision >= 0 {
			p.w("(", strconv.Itoa(q.FracPrecision), ")")
		}
	}
}

// String prints the IntervalLit as canonical SQL.
func (e *IntervalLit) String() string { return toString(e) }
func (e *IntervalLit) format(p *printer) {
	p.w("INTERVAL ")
	if e.Negative {
		p.w("-")
	}
	p.w(QuoteString(e.Value), " ")
	e.Qualifier.format(p)
}

// String prints the Unary as canonical SQL.
func (e *Unary) String() string { return toString(e) }
func (e *Unary) format(p *printer) {
	if e.Op == OpNot {
		p.w("NOT ")
		p.expr(e.X, precNot)
		return
	}
	p.w(string(e.Op))
	// "- -x" would print as a comment start; parenthesize nested signs.
	if _, ok := e.X.(*Unary); ok {
		p.w("(")
		e.X.format(p)
		p.w(")")
		return
	}
	p.expr(e.X, precUnary)
}

// String prints the Binary as canonical SQL.
func (e *Binary) String() string { return toString(e) }
func (e *Binary) format(p *printer) {
	prec := binaryPrec(e.Op)
	p.expr(e.L, prec)
	p.w(" ", string(e.Op), " ")
	p.expr(e.R, prec+1)
}

// String prints the Is as canonical SQL.
func (e *Is) String() string { return toString(e) }
func (e *Is) format(p *printer) {
	p.expr(e.X, precIs)
	p.w(" IS ")
	if e.Not {
		p.w("NOT ")
	}
	p.w(e.Test.String())
}

// String prints the IsDistinctFrom as canonical SQL.
func (e *IsDistinctFrom) String() string { return toString(e) }
func (e *IsDistinctFrom) format(p *printer) {
	p.expr(e.L, precIs)
	p.w(" IS ")
	if e.Not {
		p.w("NOT ")
	}
	p.w("DISTINCT FROM ")
	p.expr(e.R, precCmp)
}

func notWord(p *printer, not bool) {
	if not {
		p.w(" NOT")
	}
}

// String prints the Between as canonical SQL.
func (e *Between) String() string { return toString(e) }
func (e *Between) format(p *printer) {
	p.expr(e.X, precBetween)
	notWord(p, e.Not)
	p.w(" BETWEEN ")
	if e.Symmetric {
		p.w("SYMMETRIC ")
	}
	p.expr(e.Lo, precAdd)
	p.w(" AND ")
	p.expr(e.Hi, precAdd)
}

// String prints the InList as canonical SQL.
func (e *InList) String() string { return toString(e) }
func (e *InList) format(p *printer) {
	p.expr(e.X, precBetween)
	notWord(p, e.Not)
	p.w(" IN (")
	p.exprList(e.List)
	p.w(")")
}

// String prints the InSubquery as canonical SQL.
func (e *InSubquery) String() string { return toString(e) }
func (e *InSubquery) format(p *printer) {
	p.expr(e.X, precBetween)
	notWord(p, e.Not)
	p.w(" IN (")
	e.Query.format(p)
	p.w(")")
}

// String prints the Exists as canonical SQL.
func (e *Exists) String() string { return toString(e) }
func (e *Exists) format(p *printer) {
	p.w("EXISTS (")
	e.Query.format(p)
	p.w(")")
}

// String prints the Subquery as canonical SQL.
func (e *Subquery) String() string { return toString(e) }
func (e *Subquery) format(p *printer) {
	p.w("(")
	e.Query.format(p)
	p.w(")")
}

// String prints the Like as canonical SQL.
func (e *Like) String() string { return toString(e) }
func (e *Like) format(p *printer) {
	p.expr(e.X, precBetween)
	notWord(p, e.Not)
	if e.Similar {
		p.w(" SIMILAR TO ")
	} else {
		p.w(" LIKE ")
	}
	p.expr(e.Pattern, precAdd)
	if e.Escape != nil {
		p.w(" ESCAPE ")
		p.expr(e.Escape, precAdd)
	}
}

// String prints the When as canonical SQL.
func (w *When) String() string { return toString(w) }
func (w *When) format(p *printer) {
	p.w("WHEN ")
	w.Cond.format(p)
	p.w(" THEN ")
	w.Result.format(p)
}

// String prints the Case as canonical SQL.
func (e *Case) String() string { return toString(e) }
func (e *Case) format(p *printer) {
	p.w("CASE")
	if e.Operand != nil {
		p.w(" ")
		e.Operand.format(p)
	}
	for _, w := range e.Whens {
		p.w(" ")
		w.format(p)
	}
	if e.Else != nil {
		p.w(" ELSE ")
		e.Else.format(p)
	}
	p.w(" END")
}

// String prints the Cast as canonical SQL.
func (e *Cast) String() string { return toString(e) }
func (e *Cast) format(p *printer) {
	if e.Try {
		p.w("TRY_CAST(")
	} else {
		p.w("CAST(")
	}
	e.X.format(p)
	p.w(" AS ")
	e.Type.format(p)
	p.w(")")
}

// String prints the Extract as canonical SQL.
func (e *Extract) String() string { return toString(e) }
func (e *Extract) format(p *printer) {
	p.w("EXTRACT(", string(e.Unit), " FROM ")
	e.X.format(p)
	p.w(")")
}

// String prints the FloorCeil as canonical SQL.
func (e *FloorCeil) String() string { return toString(e) }
func (e *FloorCeil) format(p *printer) {
	if e.Ceil {
		p.w("CEIL(")
	} else {
		p.w("FLOOR(")
	}
	e.X.format(p)
	p.w(" TO ", string(e.Unit), ")")
}

// String prints the Trim as canonical SQL.
func (e *Trim) String() string { return toString(e) }
func (e *Trim) format(p *printer) {
	p.w("TRIM(")
	if e.Side != "" || e.Chars != nil {
		if e.Side != "" {
			p.w(e.Side, " ")
		}
		if e.Chars != nil {
			e.Chars.format(p)
			p.w(" ")
		}
		p.w("FROM ")
	}
	e.X.format(p)
	p.w(")")
}

// String prints the Substring as canonical SQL.
func (e *Substring) String() string { return toString(e) }
func (e *Substring) format(p *printer) {
	p.w("SUBSTRING(")
	e.X.format(p)
	p.w(" FROM ")
	e.From.format(p)
	if e.For != nil {
		p.w(" FOR ")
		e.For.format(p)
	}
	p.w(")")
}

// String prints the Position as canonical SQL.
func (e *Position) String() string { return toString(e) }
func (e *Position) format(p *printer) {
	p.w("POSITION(")
	p.expr(e.Needle, precAdd)
	p.w(" IN ")
	e.Haystack.format(p)
	p.w(")")
}

// String prints the Call as canonical SQL.
func (e *Call) String() string { return toString(e) }
func (e *Call) format(p *printer) {
	for i, part := range e.Name.Parts {
		if i > 0 {
			p.w(".")
		}
		if i == len(e.Name.Parts)-1 {
			p.w(quoteFuncName(part))
		} else {
			p.w(QuoteIdent(part))
		}
	}
	if e.NoParens {
		return
	}
	p.w("(")
	if e.Distinct {
		p.w("DISTINCT ")
	}
	p.exprList(e.Args)
	p.w(")")
	if e.Filter != nil {
		p.w(" FILTER (WHERE ")
		e.Filter.format(p)
		p.w(")")
	}
	if e.Over != nil {
		p.w(" OVER ")
		e.Over.format(p)
	}
}

// String prints the WindowSpec as canonical SQL.
func (w *WindowSpec) String() string { return toString(w) }
func (w *WindowSpec) format(p *printer) {
	if w.Ref != "" {
		p.w(QuoteIdent(w.Ref))
		return
	}
	p.w("(")
	sep := ""
	if len(w.PartitionBy) > 0 {
		p.w("PARTITION BY ")
		p.exprList(w.PartitionBy)
		sep = " "
	}
	if len(w.OrderBy) > 0 {
		p.w(sep, "ORDER BY ")
		p.orderBy(w.OrderBy)
		sep = " "
	}
	if w.Frame != nil {
		p.w(sep)
		w.Frame.format(p)
	}
	p.w(")")
}

// String prints the WindowFrame as canonical SQL.
func (f *WindowFrame) String() string { return toString(f) }
func (f *WindowFrame) format(p *printer) {
	if f.Unit == FrameRange {
		p.w("RANGE ")
	} else {
		p.w("ROWS ")
	}
	if f.End == nil {
		f.Start.format(p)
		return
	}
	p.w("BETWEEN ")
	f.Start.format(p)
	p.w(" AND ")
	f.End.format(p)
}

// String prints the FrameBound as canonical SQL.
func (b *FrameBound) String() string { return toString(b) }
func (b *FrameBound) format(p *printer) {
	switch b.Kind {
	case UnboundedPreceding:
		p.w("UNBOUNDED PRECEDING")
	case UnboundedFollowing:
		p.w("UNBOUNDED FOLLOWING")
	case CurrentRow:
		p.w("CURRENT ROW")
	case Preceding:
		p.expr(b.Offset, precAdd)
		p.w(" PRECEDING")
	case Following:
		p.expr(b.Offset, precAdd)
		p.w(" FOLLOWING")
	}
}

// String prints the TableArg as canonical SQL.
func (e *TableArg) String() string { return toString(e) }
func (e *TableArg) format(p *printer) {
	p.w("TABLE ")
	e.Name.format(p)
	if len(e.PartitionBy) > 0 {
		p.w(" PARTITION BY (")
		p.exprList(e.PartitionBy)
		p.w(")")
	}
}

// String prints the Descriptor as canonical SQL.
func (e *Descriptor) String() string { return toString(e) }
func (e *Descriptor) format(p *printer) {
	p.w("DESCRIPTOR(")
	p.idents(e.Columns)
	p.w(")")
}

// String prints the NamedArg as canonical SQL.
func (e *NamedArg) String() string { return toString(e) }
func (e *NamedArg) format(p *printer) {
	p.w(QuoteIdent(e.Name.Name), " => ")
	e.Value.format(p)
}

// String prints the TimeUnitArg as canonical SQL.
func (e *TimeUnitArg) String() string    { return toString(e) }
func (e *TimeUnitArg) format(p *printer) { p.w(string(e.Unit)) }

// String prints the Index as canonical SQL.
func (e *Index) String() string { return toString(e) }
func (e *Index) format(p *printer) {
	p.expr(e.X, precPostfix)
	p.w("[")
	e.Index.format(p)
	p.w("]")
}

// String prints the FieldAccess as canonical SQL.
func (e *FieldAccess) String() string { return toString(e) }
func (e *FieldAccess) format(p *printer) {
	// a.b would read back as one ColumnRef and 1.f as a number; keep the
	// access explicit.
	switch e.X.(type) {
	case *ColumnRef, *NumberLit:
		p.w("(")
		e.X.format(p)
		p.w(")")
	default:
		p.expr(e.X, precPostfix)
	}
	p.w(".", QuoteIdent(e.Field))
}

// String prints the ArrayCtor as canonical SQL.
func (e *ArrayCtor) String() string { return toString(e) }
func (e *ArrayCtor) format(p *printer) {
	p.w("ARRAY[")
	p.exprList(e.Items)
	p.w("]")
}

// String prints the MapCtor as canonical SQL.
func (e *MapCtor) String() string { return toString(e) }
func (e *MapCtor) format(p *printer) {
	p.w("MAP[")
	p.exprList(e.Items)
	p.w("]")
}

// String prints the Row as canonical SQL.
func (e *Row) String() string { return toString(e) }
func (e *Row) format(p *printer) {
	if e.Explicit || len(e.Items) == 1 {
		p.w("ROW")
	}
	p.w("(")
	p.exprList(e.Items)
	p.w(")")
}

// String prints the GroupingSets as canonical SQL.
func (e *GroupingSets) String() string { return toString(e) }
func (e *GroupingSets) format(p *printer) {
	p.w("GROUPING SETS (")
	p.exprList(e.Sets)
	p.w(")")
}

// String prints the Rollup as canonical SQL.
func (e *Rollup) String() string { return toString(e) }
func (e *Rollup) format(p *printer) {
	p.w("ROLLUP(")
	p.exprList(e.Items)
	p.w(")")
}

// String prints the Cube as canonical SQL.
func (e *Cube) String() string { return toString(e) }
func (e *Cube) format(p *printer) {
	p.w("CUBE(")
	p.exprList(e.Items)
	p.w(")")
}

// ---------------------------------------------------------------------------
// Types

// String prints the DataType as canonical SQL.
func (t *DataType) String() string { return toString(t) }
func (t *DataType) format(p *printer) {
	switch t.Name {
	case "ARRAY", "MULTISET":
		p.w(t.Name, "<")
		t.Elem.format(p)
		p.w(">")
	case "MAP":
		p.w("MAP<")
		t.Key.format(p)
		p.w(", ")
		t.Value.format(p)
		p.w(">")
	case "ROW":
		p.w("ROW<")
		for i, f := range t.Fields {
			if i > 0 {
				p.w(", ")
			}
			f.format(p)
		}
		p.w(">")
	case "INTERVAL":
		p.w("INTERVAL ")
		t.Interval.format(p)
	default:
		p.w(t.Name)
		if len(t.Params) > 0 {
			p.w("(")
			for i, n := range t.Params {
				if i > 0 {
					p.w(", ")
				}
				p.w(strconv.Itoa(n))
			}
			p.w(")")
		}
	}
	if t.NotNull {
		p.w(" NOT NULL")
	}
}

// String prints the RowField as canonical SQL.
func (f *RowField) String() string { return toString(f) }
func (f *RowField) format(p *printer) {
	p.w(QuoteIdent(f.Name), " ")
	f.Type.format(p)
	if f.Comment != nil {
		p.w(" ", QuoteString(*f.Comment))
	}
}
