package expr

import (
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/types"
)

// Compiler compiles expressions with session settings. The zero value is
// ready to use: UTC, no user functions, the system clock.
type Compiler struct {
	// Location is the session time zone (Flink's table.local-time-zone),
	// used to convert between TIMESTAMP and TIMESTAMP_LTZ and to show
	// TIMESTAMP_LTZ values; nil means UTC.
	Location *time.Location
	// Functions holds user-defined functions; nil means none.
	Functions *Registry
	// Now is the clock of CURRENT_TIMESTAMP, NOW(), LOCALTIMESTAMP and
	// CURRENT_DATE; nil means time.Now.
	Now func() time.Time
}

// Compiled is a type-checked expression ready to evaluate.
type Compiled struct {
	// Type is the result type.
	Type types.Type
	// Deterministic is false when the expression reads the clock
	// (CURRENT_TIMESTAMP and friends): the planner must not fold it or
	// assume two evaluations agree.
	Deterministic bool
	// Constant reports an expression that reads no column and is
	// deterministic; Eval(nil) gives its value.
	Constant bool
	eval     evalFn
	// col is the index plus one of the input column the expression is
	// (0: it is not a plain column reference).
	col int
}

// Column reports whether the expression is a plain reference to an input
// column (no field access, no conversion), and which: Eval(row) is then
// row[i], which a caller may copy without calling Eval.
func (c *Compiled) Column() (i int, ok bool) { return c.col - 1, c.col > 0 }

// Eval evaluates the expression over a row of the scope's layout. It is
// safe for concurrent use, and does not allocate for expressions over
// scalars unless they build strings, decimals beyond int64, or call user
// functions.
func (c *Compiled) Eval(row []types.Value) (types.Value, error) { return c.eval(row) }

// Compile type-checks e against scope and compiles it with the default
// session settings (UTC).
func Compile(e ast.Expr, scope Scope) (*Compiled, error) {
	return (&Compiler{}).Compile(e, scope)
}

// Compile type-checks e against scope and compiles it.
func (cc *Compiler) Compile(e ast.Expr, scope Scope) (*Compiled, error) {
	c := &compiler{Compiler: cc, scope: scope, loc: cc.Location}
	if c.loc == nil {
		c.loc = time.UTC
	}
	if c.Now == nil {
		c.now = time.Now
	} else {
		c.now = c.Now
	}
	n, err := c.expr(e)
	if err != nil {
		return nil, err
	}
	return &Compiled{Type: n.typ, Deterministic: !n.nondet, Constant: n.konst, eval: n.eval, col: n.col}, nil
}

type evalFn func(row []types.Value) (types.Value, error)

// node is a compiled sub-expression.
type node struct {
	typ  types.Type
	eval evalFn
	pos  ast.Pos
	// konst marks a deterministic expression of no column; val is its
	// value.
	konst bool
	val   types.Value
	// nondet marks a dependency on the clock.
	nondet bool
	// strLit marks a character string literal, which may stand for a
	// DATE, TIME or TIMESTAMP where one is expected.
	strLit bool
	// col is the index plus one of the input column a plain column
	// reference reads (0: not one).
	col int
}

type compiler struct {
	*Compiler
	scope Scope
	loc   *time.Location
	now   func() time.Time
	depth int
}

func constNode(v types.Value, t types.Type, pos ast.Pos) *node {
	return &node{typ: t, pos: pos, konst: true, val: v, eval: func([]types.Value) (types.Value, error) { return v, nil }}
}

// derive returns a node for an operation over args: constant-folded when
// every argument is constant and evaluation succeeds, non-deterministic
// when any argument is.
func derive(t types.Type, pos ast.Pos, eval evalFn, args ...*node) *node {
	n := &node{typ: t, pos: pos, eval: eval}
	allConst := true
	for _, a := range args {
		n.nondet = n.nondet || a.nondet
		allConst = allConst && a.konst
	}
	if allConst {
		if v, err := eval(nil); err == nil {
			return constNode(v, t, pos)
		}
	}
	return n
}

const maxDepth = 200

func (c *compiler) exprs(es []ast.Expr) ([]*node, error) {
	out := make([]*node, len(es))
	for i, e := range es {
		n, err := c.expr(e)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

func (c *compiler) expr(e ast.Expr) (*node, error) {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > maxDepth {
		return nil, errorf(e.Position(), "expression nested too deeply")
	}
	switch e := e.(type) {
	case *ast.ColumnRef:
		if c.scope == nil {
			return nil, errorf(e.Pos, "column '%s' not found: the expression has no input", strings.Join(e.Parts, "."))
		}
		col, err := c.scope.Resolve(e)
		if err != nil {
			return nil, err
		}
		i := col.Index
		if len(col.Path) > 0 {
			return &node{typ: col.Type, pos: e.Pos, eval: fieldAccess(i, col.Path, col.Type.Kind)}, nil
		}
		return &node{typ: col.Type, pos: e.Pos, col: i + 1, eval: func(row []types.Value) (types.Value, error) { return row[i], nil }}, nil
	case *ast.NumberLit:
		return numberLit(e)
	case *ast.StringLit:
		n := constNode(types.String(e.Value), types.CharOf(utf8.RuneCountInString(e.Value)).WithNotNull(true), e.Pos)
		n.strLit = true
		return n, nil
	case *ast.BinaryLit:
		b, err := hexBytes(e.Hex)
		if err != nil {
			return nil, errorf(e.Pos, "invalid binary literal X'%s'", e.Hex)
		}
		v := types.BytesString(string(b))
		return constNode(v, types.Type{Kind: types.KindBinary, Length: max(1, len(b)), NotNull: true}, e.Pos), nil
	case *ast.BoolLit:
		return constNode(types.Bool(e.Value), types.BooleanType.WithNotNull(true), e.Pos), nil
	case *ast.NullLit:
		return constNode(types.Null, types.NullType, e.Pos), nil
	case *ast.TypedLit:
		return typedLit(e)
	case *ast.IntervalLit:
		return intervalLit(e)
	case *ast.Unary:
		return c.unary(e)
	case *ast.Binary:
		return c.binary(e)
	case *ast.Is:
		return c.is(e)
	case *ast.IsDistinctFrom:
		return c.isDistinct(e)
	case *ast.Between:
		return c.between(e)
	case *ast.InList:
		return c.inList(e)
	case *ast.Like:
		return c.like(e)
	case *ast.Case:
		return c.caseExpr(e)
	case *ast.Cast:
		return c.cast(e)
	case *ast.Extract:
		x, err := c.expr(e.X)
		if err != nil {
			return nil, err
		}
		return c.extract(e.Pos, string(e.Unit), x)
	case *ast.FloorCeil:
		return c.floorCeilTime(e)
	case *ast.Trim:
		return c.trim(e)
	case *ast.Substring:
		args := []ast.Expr{e.X, e.From}
		if e.For != nil {
			args = append(args, e.For)
		}
		ns, err := c.exprs(args)
		if err != nil {
			return nil, err
		}
		return c.substring(e.Pos, ns)
	case *ast.Position:
		ns, err := c.exprs([]ast.Expr{e.Needle, e.Haystack})
		if err != nil {
			return nil, err
		}
		return c.position(e.Pos, ns)
	case *ast.Call:
		return c.call(e)
	case *ast.Row, *ast.ArrayCtor, *ast.MapCtor, *ast.Index, *ast.FieldAccess:
		return nil, errorf(e.Position(), "%s is not supported in expressions yet", describe(e))
	case *ast.Star:
		return nil, errorf(e.Pos, "'*' is only allowed in a select list or COUNT(*)")
	case *ast.InSubquery, *ast.Exists, *ast.Subquery:
		return nil, errorf(e.Position(), "subqueries are the planner's business, not a scalar expression")
	}
	return nil, errorf(e.Position(), "%s is not allowed in a scalar expression", describe(e))
}

// fieldAccess reads a field of a ROW column (path: field indexes, outermost
// first); a NULL ROW on the way gives NULL, as in Flink.
func fieldAccess(col int, path []int, k types.Kind) evalFn {
	if len(path) == 1 {
		f := path[0]
		return func(row []types.Value) (types.Value, error) {
			v := row[col]
			if v.IsNull() {
				return types.NullOf(k), nil
			}
			return v.Elems()[f], nil
		}
	}
	return func(row []types.Value) (types.Value, error) {
		v := row[col]
		for _, f := range path {
			if v.IsNull() {
				return types.NullOf(k), nil
			}
			v = v.Elems()[f]
		}
		return v, nil
	}
}

func describe(e ast.Expr) string {
	s := e.String()
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return "'" + s + "'"
}

func hexBytes(h string) ([]byte, error) {
	if len(h)%2 != 0 {
		h = "0" + h
	}
	out := make([]byte, len(h)/2)
	for i := range out {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, err
		}
		out[i] = byte(v)
	}
	return out, nil
}

// numberLit types a numeric literal as Flink does: integers are INT when
// they fit, else BIGINT, else DECIMAL(n, 0); 1.50 is DECIMAL(3, 2); 1E3 is
// DOUBLE. All are NOT NULL.
func numberLit(e *ast.NumberLit) (*node, error) {
	switch e.Kind {
	case ast.IntegerNumber:
		if i, err := strconv.ParseInt(e.Text, 10, 64); err == nil {
			if i <= 1<<31-1 {
				return constNode(types.Int32(int32(i)), types.IntType.WithNotNull(true), e.Pos), nil
			}
			return constNode(types.Int64(i), types.BigIntType.WithNotNull(true), e.Pos), nil
		}
		digits := strings.TrimLeft(e.Text, "0")
		if len(digits) > types.MaxDecimalPrecision {
			return nil, errorf(e.Pos, "numeric literal %s is out of range (at most %d digits)", e.Text, types.MaxDecimalPrecision)
		}
		u, _ := new(big.Int).SetString(digits, 10)
		t := types.DecimalOf(len(digits), 0).WithNotNull(true)
		return constNode(types.DecimalBig(u, len(digits), 0), t, e.Pos), nil
	case ast.DecimalNumber:
		scale := 0
		if i := strings.IndexByte(e.Text, '.'); i >= 0 {
			scale = len(e.Text) - i - 1
		}
		digits := strings.TrimLeft(strings.Replace(e.Text, ".", "", 1), "0")
		p := max(len(digits), scale, 1)
		if p > types.MaxDecimalPrecision {
			return nil, errorf(e.Pos, "numeric literal %s is out of range (at most %d digits)", e.Text, types.MaxDecimalPrecision)
		}
		v, err := types.ParseDecimal(e.Text, p, scale)
		if err != nil {
			return nil, errorf(e.Pos, "invalid numeric literal %s", e.Text)
		}
		return constNode(v, types.DecimalOf(p, scale).WithNotNull(true), e.Pos), nil
	default:
		f, err := strconv.ParseFloat(e.Text, 64)
		if err != nil {
			return nil, errorf(e.Pos, "numeric literal %s is out of range for DOUBLE", e.Text)
		}
		return constNode(types.Float64(f), types.DoubleType.WithNotNull(true), e.Pos), nil
	}
}

// fracDigits counts the digits after the point of a time text.
func fracDigits(s string) int {
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return len(strings.TrimSpace(s[i+1:]))
	}
	return 0
}

func typedLit(e *ast.TypedLit) (*node, error) {
	switch e.Type {
	case "DATE":
		d, err := types.ParseDate(e.Value)
		if err != nil {
			return nil, errorf(e.Pos, "invalid DATE literal '%s'", e.Value)
		}
		return constNode(types.Date(d), types.DateType.WithNotNull(true), e.Pos), nil
	case "TIME":
		ns, err := types.ParseTime(e.Value)
		if err != nil {
			return nil, errorf(e.Pos, "invalid TIME literal '%s'", e.Value)
		}
		p := fracDigits(e.Value)
		return constNode(types.Time(ns, p), types.TimeOf(p).WithNotNull(true), e.Pos), nil
	case "TIMESTAMP":
		ms, ns, err := types.ParseTimestamp(e.Value)
		if err != nil {
			return nil, errorf(e.Pos, "invalid TIMESTAMP literal '%s'", e.Value)
		}
		p := 0
		if strings.ContainsAny(strings.TrimSpace(e.Value), " T") {
			p = fracDigits(e.Value)
		}
		return constNode(types.Timestamp(ms, ns, p), types.TimestampOf(p).WithNotNull(true), e.Pos), nil
	}
	return nil, errorf(e.Pos, "unsupported %s literal", e.Type)
}

var unitMillis = map[ast.TimeUnit]int64{
	"DAY": 86400000, "HOUR": 3600000, "MINUTE": 60000, "SECOND": 1000,
}

// intervalLit parses INTERVAL 'text' qualifier: a single unit ('5' SECOND,
// '1.5' SECOND, '3' DAY, '2' MONTH) or a range ('1 02:03:04.5' DAY TO
// SECOND, '1-6' YEAR TO MONTH, '2:30' HOUR TO MINUTE).
func intervalLit(e *ast.IntervalLit) (*node, error) {
	q := e.Qualifier
	bad := func() (*node, error) {
		return nil, errorf(e.Pos, "invalid interval literal '%s' for %s", e.Value, qualifierString(q))
	}
	text := strings.TrimSpace(e.Value)
	neg := e.Negative
	if strings.HasPrefix(text, "-") {
		neg = !neg
		text = text[1:]
	} else if strings.HasPrefix(text, "+") {
		text = text[1:]
	}
	sign := int64(1)
	if neg {
		sign = -1
	}
	if q.Start == "YEAR" || q.Start == "MONTH" {
		var months int64
		switch {
		case q.End == "" && q.Start == "YEAR":
			y, err := strconv.ParseInt(text, 10, 32)
			if err != nil {
				return bad()
			}
			months = y * 12
		case q.End == "":
			m, err := strconv.ParseInt(text, 10, 32)
			if err != nil {
				return bad()
			}
			months = m
		default:
			y, m, ok := strings.Cut(text, "-")
			yi, err1 := strconv.ParseInt(y, 10, 32)
			mi, err2 := strconv.ParseInt(m, 10, 32)
			if !ok || err1 != nil || err2 != nil || mi > 11 {
				return bad()
			}
			months = yi*12 + mi
		}
		return constNode(types.IntervalMonths(sign*months), types.Type{Kind: types.KindIntervalYearMonth, NotNull: true}, e.Pos), nil
	}
	if _, ok := unitMillis[q.Start]; !ok {
		return bad()
	}
	units := []ast.TimeUnit{"DAY", "HOUR", "MINUTE", "SECOND"}
	si := map[ast.TimeUnit]int{"DAY": 0, "HOUR": 1, "MINUTE": 2, "SECOND": 3}
	end := q.End
	if end == "" {
		end = q.Start
	}
	// Split the text into the fields from Start to End.
	fields := strings.FieldsFunc(text, func(r rune) bool { return r == ' ' || r == ':' })
	want := si[end] - si[q.Start] + 1
	if len(fields) != want {
		return bad()
	}
	var ms int64
	for i, f := range fields {
		u := units[si[q.Start]+i]
		if u == "SECOND" {
			d, err := types.ParseDecimal(f, 38, 3)
			if err != nil || strings.ContainsAny(f, "eE+-") {
				return bad()
			}
			ms += d.Unscaled()
			continue
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 || (i > 0 && ((u == "HOUR" && v > 23) || (u == "MINUTE" && v > 59))) {
			return bad()
		}
		ms += v * unitMillis[u]
	}
	return constNode(types.IntervalMillis(sign*ms), types.Type{Kind: types.KindIntervalDayTime, Precision: 3, NotNull: true}, e.Pos), nil
}

func qualifierString(q *ast.IntervalQualifier) string {
	if q.End == "" {
		return string(q.Start)
	}
	return string(q.Start) + " TO " + string(q.End)
}
