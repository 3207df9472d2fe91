package ast

// Node is any node of the tree.
type Node interface {
	// Position is where the node's first token starts.
	Position() Pos
	// String prints the node as canonical SQL.
	String() string
	format(p *printer)
}

// Statement is a top-level statement of a script.
type Statement interface {
	Node
	statementNode()
}

// Expr is a scalar expression, or one of the argument forms that only some
// calls accept (Star, TableArg, Descriptor, NamedArg, TimeUnitArg) and the
// grouping forms that only GROUP BY accepts (GroupingSets, Rollup, Cube, an
// empty Row).
type Expr interface {
	Node
	exprNode()
}

// TableRef is an item of a FROM clause.
type TableRef interface {
	Node
	tableRefNode()
}

// QueryBody is the part of a query that set operations combine: a Select, a
// SetOp, a Values, or a parenthesized Query that carries its own WITH,
// ORDER BY or LIMIT.
type QueryBody interface {
	Node
	queryBodyNode()
}

// Ident is a single identifier: an alias, a column being defined, a CTE
// name. Name is as written (Flink identifiers are case-sensitive); back
// quotes are removed.
type Ident struct {
	Pos
	Name string
}

// ObjectName is a possibly qualified name of a catalog object: table, view
// or function (`cat.db.t`).
type ObjectName struct {
	Pos
	Parts []string
}

// Last returns the unqualified name.
func (n *ObjectName) Last() string { return n.Parts[len(n.Parts)-1] }

// ---------------------------------------------------------------------------
// Statements

// CreateTable is CREATE TABLE.
type CreateTable struct {
	Pos
	Temporary   bool
	IfNotExists bool
	Name        *ObjectName
	// Columns in declaration order: physical, computed and metadata columns.
	Columns []*ColumnDef
	// Watermark is the WATERMARK FOR clause, if any.
	Watermark *Watermark
	// PrimaryKey is the table's primary key, whether declared as a table
	// constraint or on a column.
	PrimaryKey *PrimaryKey
	// Comment is the table COMMENT, if any.
	Comment     *string
	PartitionBy []*Ident
	Options     []*Option
	// AsQuery is the query of CREATE TABLE ... AS SELECT.
	AsQuery *Query
}

// ColumnKind tells physical, computed and metadata columns apart.
type ColumnKind int

const (
	// PhysicalColumn is `name type`.
	PhysicalColumn ColumnKind = iota
	// ComputedColumn is `name AS expr`.
	ComputedColumn
	// MetadataColumn is `name type METADATA [FROM 'key'] [VIRTUAL]`.
	MetadataColumn
)

// ColumnDef is one column of CREATE TABLE.
type ColumnDef struct {
	Pos
	Name *Ident
	Kind ColumnKind
	// Type is set for physical and metadata columns.
	Type *DataType
	// Expr is set for computed columns.
	Expr Expr
	// MetadataKey is the FROM key of a metadata column, if given.
	MetadataKey *string
	// Virtual marks a metadata column that is read but never written.
	Virtual bool
	Comment *string
}

// Watermark is `WATERMARK FOR column AS expr`.
type Watermark struct {
	Pos
	// Column is the rowtime column, possibly nested (`a.b`).
	Column []string
	Expr   Expr
}

// PrimaryKey is `[CONSTRAINT name] PRIMARY KEY (cols) NOT ENFORCED`. Flink
// requires NOT ENFORCED, so the parser refuses a key without it.
type PrimaryKey struct {
	Pos
	// Name is the constraint name, if given.
	Name    *Ident
	Columns []*Ident
}

// Option is one `key = 'value'` entry of a WITH clause. Key is the key's
// text, whether it was written quoted ('sink.mode') or bare (sink.mode).
type Option struct {
	Pos
	Key   string
	Value string
}

// CreateView is CREATE VIEW.
type CreateView struct {
	Pos
	Temporary   bool
	IfNotExists bool
	Name        *ObjectName
	Columns     []*Ident
	Comment     *string
	Query       *Query
}

// CreateFunction is CREATE FUNCTION name AS 'class' [LANGUAGE lang].
type CreateFunction struct {
	Pos
	Temporary   bool
	System      bool
	IfNotExists bool
	Name        *ObjectName
	Class       string
	// Language is JAVA, SCALA or PYTHON in upper case, or empty.
	Language string
}

// Drop is DROP TABLE, DROP VIEW or DROP FUNCTION.
type Drop struct {
	Pos
	// Object is TABLE, VIEW or FUNCTION.
	Object    string
	Temporary bool
	IfExists  bool
	Name      *ObjectName
}

// Set is `SET 'key' = 'value'`; with an empty Key it is a bare SET, which
// lists the options.
type Set struct {
	Pos
	Key   string
	Value string
}

// Reset is `RESET 'key'`; with an empty Key it resets every option.
type Reset struct {
	Pos
	Key string
}

// Insert is INSERT INTO (or INSERT OVERWRITE) ... query.
type Insert struct {
	Pos
	Overwrite bool
	Table     *ObjectName
	// Columns is the optional target column list.
	Columns []*Ident
	Query   *Query
}

// StatementSet is several INSERTs that run as one job, written
// `EXECUTE STATEMENT SET BEGIN ...; END` or `BEGIN STATEMENT SET; ...; END`.
type StatementSet struct {
	Pos
	Inserts []*Insert
}

// Explain is EXPLAIN [details] statement.
type Explain struct {
	Pos
	// Details are the requested extras (ESTIMATED_COST, CHANGELOG_MODE,
	// JSON_EXECUTION_PLAN, PLAN_ADVICE), upper case.
	Details []string
	// Stmt is a *Query, *Insert or *StatementSet.
	Stmt Statement
}

// ---------------------------------------------------------------------------
// Queries

// Query is a full query: optional WITH, a body, optional ORDER BY and
// LIMIT/OFFSET. A Query is also a statement (a bare SELECT in a script).
type Query struct {
	Pos
	With    []*CTE
	Body    QueryBody
	OrderBy []*OrderItem
	Limit   Expr
	Offset  Expr
}

// CTE is one `name [(cols)] AS (query)` of a WITH clause.
type CTE struct {
	Pos
	Name    *Ident
	Columns []*Ident
	Query   *Query
}

// Select is one SELECT block.
type Select struct {
	Pos
	Distinct bool
	Items    []*SelectItem
	// From is nil for a SELECT without FROM.
	From    TableRef
	Where   Expr
	GroupBy []Expr
	Having  Expr
}

// SelectItem is one item of a select list. Expr is a *Star for `*` and
// `t.*`, which then have no Alias.
type SelectItem struct {
	Pos
	Expr  Expr
	Alias *Ident
}

// SetOpKind is UNION, INTERSECT or EXCEPT.
type SetOpKind int

const (
	// Union is UNION.
	Union SetOpKind = iota
	// Intersect is INTERSECT.
	Intersect
	// Except is EXCEPT.
	Except
)

// String returns the SQL spelling of the operator.
func (k SetOpKind) String() string {
	switch k {
	case Union:
		return "UNION"
	case Intersect:
		return "INTERSECT"
	default:
		return "EXCEPT"
	}
}

// SetOp is `left op [ALL] right`.
type SetOp struct {
	Pos
	Op    SetOpKind
	All   bool
	Left  QueryBody
	Right QueryBody
}

// Values is VALUES (row), (row), ...
type Values struct {
	Pos
	Rows [][]Expr
}

// NullsOrder is the NULLS FIRST / NULLS LAST of an ORDER BY item.
type NullsOrder int

const (
	// NullsDefault means no NULLS clause was written.
	NullsDefault NullsOrder = iota
	// NullsFirst is NULLS FIRST.
	NullsFirst
	// NullsLast is NULLS LAST.
	NullsLast
)

// OrderItem is one item of ORDER BY.
type OrderItem struct {
	Pos
	Expr  Expr
	Desc  bool
	Nulls NullsOrder
}

// ---------------------------------------------------------------------------
// Table references

// Alias is `[AS] name [(col, ...)]` after a table reference.
type Alias struct {
	Pos
	Name    string
	Columns []*Ident
}

// TableName is a reference to a table or view by name, optionally a
// temporal one (`FOR SYSTEM_TIME AS OF expr`).
type TableName struct {
	Pos
	Name *ObjectName
	// ForSystemTime is the AS OF expression, if any.
	ForSystemTime Expr
	Alias         *Alias
}

// DerivedTable is a subquery in FROM, `[LATERAL] (query) [AS alias]`.
type DerivedTable struct {
	Pos
	Lateral bool
	Query   *Query
	Alias   *Alias
}

// TableFunction is `[LATERAL] TABLE(f(args)) [AS alias]`, which covers the
// window table-valued functions (TUMBLE, HOP, CUMULATE, SESSION) and user
// table functions.
type TableFunction struct {
	Pos
	Lateral bool
	Call    *Call
	Alias   *Alias
}

// Unnest is `UNNEST(expr, ...) [WITH ORDINALITY] [AS alias]`.
type Unnest struct {
	Pos
	Exprs          []Expr
	WithOrdinality bool
	Alias          *Alias
}

// JoinKind is the kind of a join.
type JoinKind int

const (
	// InnerJoin is JOIN or INNER JOIN.
	InnerJoin JoinKind = iota
	// LeftJoin is LEFT [OUTER] JOIN.
	LeftJoin
	// RightJoin is RIGHT [OUTER] JOIN.
	RightJoin
	// FullJoin is FULL [OUTER] JOIN.
	FullJoin
	// CrossJoin is CROSS JOIN.
	CrossJoin
	// CommaJoin is the comma of `FROM a, b`.
	CommaJoin
)

// String returns the SQL spelling of the join.
func (k JoinKind) String() string {
	switch k {
	case InnerJoin:
		return "JOIN"
	case LeftJoin:
		return "LEFT JOIN"
	case RightJoin:
		return "RIGHT JOIN"
	case FullJoin:
		return "FULL JOIN"
	case CrossJoin:
		return "CROSS JOIN"
	default:
		return ","
	}
}

// Join is two table references joined. At most one of On and Using is set;
// CROSS and comma joins have neither.
type Join struct {
	Pos
	Kind  JoinKind
	Left  TableRef
	Right TableRef
	On    Expr
	Using []*Ident
}

// ---------------------------------------------------------------------------
// Expressions

// ColumnRef is a possibly qualified name in an expression: a column, a
// table-qualified column or a field path (`t.c.f`). Which part is which is
// the binder's business.
type ColumnRef struct {
	Pos
	Parts []string
}

// Star is `*` or `qualifier.*` in a select list, or the `*` of COUNT(*).
type Star struct {
	Pos
	Qualifier []string
}

// NumberKind classifies a numeric literal by how it was written.
type NumberKind int

const (
	// IntegerNumber is digits only: 42.
	IntegerNumber NumberKind = iota
	// DecimalNumber has a point and no exponent: 0.908.
	DecimalNumber
	// FloatNumber has an exponent: 1.5E10.
	FloatNumber
)

// NumberLit is an unsigned numeric literal; Text is as written (with any
// exponent letter upper case), since the digits after the point carry the
// scale of a DECIMAL. A minus sign is a Unary around it.
type NumberLit struct {
	Pos
	Kind NumberKind
	Text string
}

// StringLit is a character string literal; Value has the quotes removed and
// doubled quotes undone.
type StringLit struct {
	Pos
	Value string
}

// BinaryLit is a binary string literal X'0FA1'; Hex is the hex digits as
// written, upper-cased.
type BinaryLit struct {
	Pos
	Hex string
}

// BoolLit is TRUE or FALSE.
type BoolLit struct {
	Pos
	Value bool
}

// NullLit is NULL.
type NullLit struct {
	Pos
}

// TypedLit is DATE '...', TIME '...' or TIMESTAMP '...'. Value is the
// string as written; the binder validates it.
type TypedLit struct {
	Pos
	// Type is DATE, TIME or TIMESTAMP.
	Type  string
	Value string
}

// TimeUnit is a unit of an interval qualifier, EXTRACT, FLOOR/CEIL ... TO,
// or TIMESTAMPADD/TIMESTAMPDIFF, upper case and singular (SECOND, not
// seconds).
type TimeUnit string

// IntervalQualifier is `start [(precision)] [TO end [(precision)]]`, as in
// INTERVAL '1:30' HOUR TO MINUTE or the type INTERVAL DAY(2) TO SECOND(3).
type IntervalQualifier struct {
	Pos
	Start TimeUnit
	// StartPrecision is the leading field precision; -1 means not given.
	StartPrecision int
	// End is empty for a single-field qualifier.
	End TimeUnit
	// FracPrecision is the fractional seconds precision of a trailing
	// SECOND (`SECOND(3)`, or the second number of a leading
	// `SECOND(p, f)`); -1 means not given.
	FracPrecision int
}

// IntervalLit is INTERVAL [-]'value' qualifier.
type IntervalLit struct {
	Pos
	// Negative is the sign written before the string (INTERVAL -'1' DAY).
	Negative  bool
	Value     string
	Qualifier *IntervalQualifier
}

// UnaryOp is a prefix operator.
type UnaryOp string

// Prefix operators.
const (
	OpNeg UnaryOp = "-"
	OpPos UnaryOp = "+"
	OpNot UnaryOp = "NOT"
)

// Unary is a prefix operator applied to X.
type Unary struct {
	Pos
	Op UnaryOp
	X  Expr
}

// BinaryOp is an infix operator.
type BinaryOp string

// Infix operators.
const (
	OpOr     BinaryOp = "OR"
	OpAnd    BinaryOp = "AND"
	OpEq     BinaryOp = "="
	OpNe     BinaryOp = "<>"
	OpLt     BinaryOp = "<"
	OpLe     BinaryOp = "<="
	OpGt     BinaryOp = ">"
	OpGe     BinaryOp = ">="
	OpAdd    BinaryOp = "+"
	OpSub    BinaryOp = "-"
	OpMul    BinaryOp = "*"
	OpDiv    BinaryOp = "/"
	OpMod    BinaryOp = "%"
	OpConcat BinaryOp = "||"
)

// Binary is `L op R`.
type Binary struct {
	Pos
	Op BinaryOp
	L  Expr
	R  Expr
}

// IsTest is what an IS expression tests for.
type IsTest int

const (
	// IsNull is IS NULL.
	IsNull IsTest = iota
	// IsTrue is IS TRUE.
	IsTrue
	// IsFalse is IS FALSE.
	IsFalse
	// IsUnknown is IS UNKNOWN.
	IsUnknown
)

// String returns the SQL spelling of the test.
func (t IsTest) String() string {
	switch t {
	case IsNull:
		return "NULL"
	case IsTrue:
		return "TRUE"
	case IsFalse:
		return "FALSE"
	default:
		return "UNKNOWN"
	}
}

// Is is `X IS [NOT] NULL|TRUE|FALSE|UNKNOWN`.
type Is struct {
	Pos
	X    Expr
	Not  bool
	Test IsTest
}

// IsDistinctFrom is `L IS [NOT] DISTINCT FROM R`.
type IsDistinctFrom struct {
	Pos
	L   Expr
	R   Expr
	Not bool
}

// Between is `X [NOT] BETWEEN [SYMMETRIC] Lo AND Hi`.
type Between struct {
	Pos
	X         Expr
	Not       bool
	Symmetric bool
	Lo        Expr
	Hi        Expr
}

// InList is `X [NOT] IN (e, ...)`.
type InList struct {
	Pos
	X    Expr
	Not  bool
	List []Expr
}

// InSubquery is `X [NOT] IN (query)`.
type InSubquery struct {
	Pos
	X     Expr
	Not   bool
	Query *Query
}

// Exists is EXISTS (query).
type Exists struct {
	Pos
	Query *Query
}

// Subquery is a scalar subquery, (query), in an expression.
type Subquery struct {
	Pos
	Query *Query
}

// Like is `X [NOT] LIKE Pattern [ESCAPE Escape]`, or SIMILAR TO when
// Similar is set.
type Like struct {
	Pos
	X       Expr
	Not     bool
	Similar bool
	Pattern Expr
	Escape  Expr
}

// When is one WHEN ... THEN ... of a CASE.
type When struct {
	Pos
	Cond   Expr
	Result Expr
}

// Case is CASE [Operand] WHEN ... THEN ... [ELSE Else] END. With an Operand
// it is a simple CASE (each When's Cond is compared to Operand).
type Case struct {
	Pos
	Operand Expr
	Whens   []*When
	Else    Expr
}

// Cast is CAST(X AS Type), or TRY_CAST when Try is set.
type Cast struct {
	Pos
	Try  bool
	X    Expr
	Type *DataType
}

// Extract is EXTRACT(Unit FROM X).
type Extract struct {
	Pos
	Unit TimeUnit
	X    Expr
}

// FloorCeil is FLOOR(X TO Unit) or CEIL(X TO Unit). FLOOR(x) without TO is
// an ordinary Call.
type FloorCeil struct {
	Pos
	Ceil bool
	X    Expr
	Unit TimeUnit
}

// Trim is TRIM([BOTH|LEADING|TRAILING] [Chars] FROM X), or TRIM(X).
type Trim struct {
	Pos
	// Side is BOTH, LEADING, TRAILING, or empty when not written.
	Side  string
	Chars Expr
	X     Expr
}

// Substring is SUBSTRING(X FROM From [FOR For]); the function form
// SUBSTRING(x, a[, b]) parses to the same node.
type Substring struct {
	Pos
	X    Expr
	From Expr
	For  Expr
}

// Position is POSITION(Needle IN Haystack).
type Position struct {
	Pos
	Needle   Expr
	Haystack Expr
}

// Call is a function call: built-in or user function, scalar, aggregate or
// window function.
type Call struct {
	Pos
	Name *ObjectName
	// NoParens marks niladic functions written without parentheses
	// (CURRENT_TIMESTAMP, LOCALTIME, ...).
	NoParens bool
	Distinct bool
	Args     []Expr
	// Filter is the FILTER (WHERE ...) condition of an aggregate.
	Filter Expr
	// Over is set for a window function call.
	Over *WindowSpec
}

// WindowSpec is the OVER clause of a window function: either a reference
// to a named window (Ref) or an inline specification.
type WindowSpec struct {
	Pos
	Ref         string
	PartitionBy []Expr
	OrderBy     []*OrderItem
	Frame       *WindowFrame
}

// FrameUnit is ROWS or RANGE.
type FrameUnit int

const (
	// FrameRows is ROWS.
	FrameRows FrameUnit = iota
	// FrameRange is RANGE.
	FrameRange
)

// WindowFrame is `ROWS|RANGE BETWEEN Start AND End`, or `ROWS|RANGE Start`
// when End is nil.
type WindowFrame struct {
	Pos
	Unit  FrameUnit
	Start *FrameBound
	End   *FrameBound
}

// BoundKind is the kind of a frame bound.
type BoundKind int

const (
	// UnboundedPreceding is UNBOUNDED PRECEDING.
	UnboundedPreceding BoundKind = iota
	// Preceding is `offset PRECEDING`.
	Preceding
	// CurrentRow is CURRENT ROW.
	CurrentRow
	// Following is `offset FOLLOWING`.
	Following
	// UnboundedFollowing is UNBOUNDED FOLLOWING.
	UnboundedFollowing
)

// FrameBound is one end of a window frame.
type FrameBound struct {
	Pos
	Kind BoundKind
	// Offset is set for Preceding and Following.
	Offset Expr
}

// TableArg is a table argument of a table-valued function:
// `TABLE name [PARTITION BY cols]`.
type TableArg struct {
	Pos
	Name        *ObjectName
	PartitionBy []Expr
}

// Descriptor is DESCRIPTOR(col, ...), naming columns of a table argument
// (the time column of a window function).
type Descriptor struct {
	Pos
	Columns []*Ident
}

// NamedArg is `name => value` in a call (DATA => TABLE bid).
type NamedArg struct {
	Pos
	Name  *Ident
	Value Expr
}

// TimeUnitArg is a bare time unit passed to TIMESTAMPADD or TIMESTAMPDIFF.
type TimeUnitArg struct {
	Pos
	Unit TimeUnit
}

// Index is element access X[Index], on arrays and maps.
type Index struct {
	Pos
	X     Expr
	Index Expr
}

// FieldAccess is X.Field where X is not a plain name (a name path is a
// ColumnRef): f(x).a, (t.r).a, arr[1].a.
type FieldAccess struct {
	Pos
	X     Expr
	Field string
}

// ArrayCtor is ARRAY[e, ...].
type ArrayCtor struct {
	Pos
	Items []Expr
}

// MapCtor is MAP[k1, v1, k2, v2, ...]; Items alternate keys and values.
type MapCtor struct {
	Pos
	Items []Expr
}

// Row is ROW(e, ...) when Explicit, or a parenthesized list (a, b). In
// GROUP BY an empty Row is the empty grouping set ().
type Row struct {
	Pos
	Explicit bool
	Items    []Expr
}

// GroupingSets is GROUPING SETS (...) in GROUP BY. Each set is an Expr: a
// single expression, a Row of several, an empty Row, a Rollup or a Cube.
type GroupingSets struct {
	Pos
	Sets []Expr
}

// Rollup is ROLLUP(...) in GROUP BY.
type Rollup struct {
	Pos
	Items []Expr
}

// Cube is CUBE(...) in GROUP BY.
type Cube struct {
	Pos
	Items []Expr
}

// ---------------------------------------------------------------------------
// Types

// DataType is a data type as written in DDL or CAST. Name is the canonical
// upper-case name of the type's root: BOOLEAN, TINYINT, SMALLINT, INT,
// BIGINT, FLOAT, DOUBLE, DECIMAL, CHAR, VARCHAR, STRING, BINARY, VARBINARY,
// BYTES, DATE, TIME, TIMESTAMP, TIMESTAMP_LTZ, INTERVAL, ARRAY, MULTISET,
// MAP or ROW. Synonyms are folded (INTEGER is INT, NUMERIC is DECIMAL,
// TIMESTAMP WITH LOCAL TIME ZONE is TIMESTAMP_LTZ).
type DataType struct {
	Pos
	Name string
	// Params are the parenthesized numbers: length, precision, scale.
	Params []int
	// Elem is the element type of ARRAY and MULTISET.
	Elem *DataType
	// Key and Value are the types of MAP.
	Key   *DataType
	Value *DataType
	// Fields are the fields of ROW.
	Fields []*RowField
	// Interval is the qualifier of an INTERVAL type.
	Interval *IntervalQualifier
	NotNull  bool
}

// RowField is one field of a ROW type.
type RowField struct {
	Pos
	Name    string
	Type    *DataType
	Comment *string
}

func (*CreateTable) statementNode()    {}
func (*CreateView) statementNode()     {}
func (*CreateFunction) statementNode() {}
func (*Drop) statementNode()           {}
func (*Set) statementNode()            {}
func (*Reset) statementNode()          {}
func (*Insert) statementNode()         {}
func (*StatementSet) statementNode()   {}
func (*Explain) statementNode()        {}
func (*Query) statementNode()          {}

func (*Select) queryBodyNode() {}
func (*SetOp) queryBodyNode()  {}
func (*Values) queryBodyNode() {}
func (*Query) queryBodyNode()  {}

func (*TableName) tableRefNode()     {}
func (*DerivedTable) tableRefNode()  {}
func (*TableFunction) tableRefNode() {}
func (*Unnest) tableRefNode()        {}
func (*Join) tableRefNode()          {}

func (*ColumnRef) exprNode()      {}
func (*Star) exprNode()           {}
func (*NumberLit) exprNode()      {}
func (*StringLit) exprNode()      {}
func (*BinaryLit) exprNode()      {}
func (*BoolLit) exprNode()        {}
func (*NullLit) exprNode()        {}
func (*TypedLit) exprNode()       {}
func (*IntervalLit) exprNode()    {}
func (*Unary) exprNode()          {}
func (*Binary) exprNode()         {}
func (*Is) exprNode()             {}
func (*IsDistinctFrom) exprNode() {}
func (*Between) exprNode()        {}
func (*InList) exprNode()         {}
func (*InSubquery) exprNode()     {}
func (*Exists) exprNode()         {}
func (*Subquery) exprNode()       {}
func (*Like) exprNode()           {}
func (*Case) exprNode()           {}
func (*Cast) exprNode()           {}
func (*Extract) exprNode()        {}
func (*FloorCeil) exprNode()      {}
func (*Trim) exprNode()           {}
func (*Substring) exprNode()      {}
func (*Position) exprNode()       {}
func (*Call) exprNode()           {}
func (*TableArg) exprNode()       {}
func (*Descriptor) exprNode()     {}
func (*NamedArg) exprNode()       {}
func (*TimeUnitArg) exprNode()    {}
func (*Index) exprNode()          {}
func (*FieldAccess) exprNode()    {}
func (*ArrayCtor) exprNode()      {}
func (*MapCtor) exprNode()        {}
func (*Row) exprNode()            {}
func (*GroupingSets) exprNode()   {}
func (*Rollup) exprNode()         {}
func (*Cube) exprNode()           {}
