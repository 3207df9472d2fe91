package expr

import (
	"math"
	"strconv"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/types"
)

var (
	trueV  = types.Bool(true)
	falseV = types.Bool(false)
	boolNN = types.BooleanType.WithNotNull(true)
)

func typeName(t types.Type) string { return t.WithNotNull(false).String() }

func kindName(t types.Type) string {
	if t.Kind == types.KindVarChar && t.Length == types.MaxLength {
		return "STRING"
	}
	return t.Kind.String()
}

func (c *compiler) unary(e *ast.Unary) (*node, error) {
	if n, ok := e.X.(*ast.NumberLit); ok && e.Op == ast.OpNeg && n.Kind == ast.IntegerNumber {
		// A negative integer literal is typed by its own value, as Flink
		// does: -2147483648 is an INT and -9223372036854775808 a BIGINT,
		// although their magnitudes alone do not fit those types.
		if i, err := strconv.ParseInt("-"+n.Text, 10, 64); err == nil {
			if i >= -1<<31 {
				return constNode(types.Int32(int32(i)), types.IntType.WithNotNull(true), e.Pos), nil
			}
			return constNode(types.Int64(i), types.BigIntType.WithNotNull(true), e.Pos), nil
		}
	}
	x, err := c.expr(e.X)
	if err != nil {
		return nil, err
	}
	switch e.Op {
	case ast.OpNot:
		return c.not(e.Pos, x)
	case ast.OpPos:
		if !x.typ.Kind.IsNumeric() && !x.typ.Kind.IsInterval() && x.typ.Kind != types.KindNull {
			return nil, errorf(e.Pos, "unary + needs a numeric operand, not %s", typeName(x.typ))
		}
		return x, nil
	}
	k := x.typ.Kind
	xe := x.eval
	var neg func(v types.Value) types.Value
	switch {
	case k.IsInteger() || k.IsInterval():
		neg = func(v types.Value) types.Value {
			if k.IsInterval() {
				if k == types.KindIntervalDayTime {
					return types.IntervalMillis(-v.Int64())
				}
				return types.IntervalMonths(-v.Int64())
			}
			return types.IntOf(k, -v.Int64())
		}
	case k == types.KindDouble:
		neg = func(v types.Value) types.Value { return types.Float64(-v.Float64()) }
	case k == types.KindFloat:
		neg = func(v types.Value) types.Value { return types.Float32(float32(-v.Float64())) }
	case k == types.KindDecimal:
		neg = types.DecimalNeg
	case k == types.KindNull:
		return x, nil
	default:
		return nil, errorf(e.Pos, "unary - needs a numeric operand, not %s", typeName(x.typ))
	}
	return derive(x.typ, e.Pos, func(row []types.Value) (types.Value, error) {
		v, err := xe(row)
		if err != nil || v.IsNull() {
			return types.Null, err
		}
		return neg(v), nil
	}, x), nil
}

func (c *compiler) checkBool(pos ast.Pos, what string, ns ...*node) error {
	for _, n := range ns {
		if n.typ.Kind != types.KindBoolean && n.typ.Kind != types.KindNull {
			return errorf(n.pos, "%s needs BOOLEAN operands, not %s", what, typeName(n.typ))
		}
	}
	return nil
}

func (c *compiler) not(pos ast.Pos, x *node) (*node, error) {
	if err := c.checkBool(pos, "NOT", x); err != nil {
		return nil, err
	}
	xe := x.eval
	return derive(types.BooleanType.WithNotNull(x.typ.NotNull), pos, func(row []types.Value) (types.Value, error) {
		v, err := xe(row)
		if err != nil || v.IsNull() {
			return types.Null, err
		}
		return types.Bool(!v.Bool()), nil
	}, x), nil
}

// logic compiles AND / OR with three-valued logic and short circuit:
// FALSE AND x is FALSE, TRUE OR x is TRUE, even when x is NULL.
func (c *compiler) logic(op ast.BinaryOp, pos ast.Pos, l, r *node) (*node, error) {
	if err := c.checkBool(pos, string(op), l, r); err != nil {
		return nil, err
	}
	le, re := l.eval, r.eval
	short := op == ast.OpOr // the value that decides
	t := types.BooleanType.WithNotNull(l.typ.NotNull && r.typ.NotNull)
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		a, err := le(row)
		if err != nil {
			return types.Null, err
		}
		if !a.IsNull() && a.Bool() == short {
			return a, nil
		}
		b, err := re(row)
		if err != nil {
			return types.Null, err
		}
		if !b.IsNull() && b.Bool() == short {
			return b, nil
		}
		if a.IsNull() || b.IsNull() {
			return types.Null, nil
		}
		return types.Bool(!short), nil
	}, l, r), nil
}

func (c *compiler) binary(e *ast.Binary) (*node, error) {
	l, err := c.expr(e.L)
	if err != nil {
		return nil, err
	}
	r, err := c.expr(e.R)
	if err != nil {
		return nil, err
	}
	switch e.Op {
	case ast.OpAnd, ast.OpOr:
		return c.logic(e.Op, e.Pos, l, r)
	case ast.OpEq, ast.OpNe, ast.OpLt, ast.OpLe, ast.OpGt, ast.OpGe:
		return c.compare(e.Op, e.Pos, l, r)
	case ast.OpConcat:
		return c.concatOp(e.Pos, l, r)
	}
	return c.arith(e.Op, e.Pos, l, r)
}

// cmpFn compares two non-NULL values of one type; 2 means unordered (a
// NaN), which makes every comparison but <> false, as in Java.
type cmpFn func(a, b types.Value) int

func cmpFor(t types.Type) cmpFn {
	switch k := t.Kind; {
	case k.IsInteger() || k == types.KindDate || k == types.KindTime || k.IsInterval() || k == types.KindBoolean:
		return func(a, b types.Value) int {
			x, y := a.Int64(), b.Int64()
			if x < y {
				return -1
			} else if x > y {
				return 1
			}
			return 0
		}
	case k.IsApprox():
		return func(a, b types.Value) int {
			x, y := a.Float64(), b.Float64()
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			case x == y:
				return 0
			}
			return 2
		}
	case k == types.KindDecimal:
		return types.CompareDecimal
	case k.IsString() || k.IsBinary():
		return func(a, b types.Value) int { return strings.Compare(a.Str(), b.Str()) }
	}
	return types.Compare
}

// intColumnCompare returns the evaluation of a comparison between a plain
// column and a non-NULL constant of an integer-like type t (the common
// filter `price > 10`, `event_type = 2`) as one function that reads the
// column and compares its payload, or nil for any other comparison.
func intColumnCompare(op ast.BinaryOp, t types.Type, l, r *node) evalFn {
	k := t.Kind
	if !(k.IsInteger() || k == types.KindDate || k == types.KindTime || k.IsInterval()) {
		return nil
	}
	if l.konst && r.col > 0 {
		// c op x is x op' c, op' the mirrored operator.
		l, r = r, l
		switch op {
		case ast.OpLt:
			op = ast.OpGt
		case ast.OpLe:
			op = ast.OpGe
		case ast.OpGt:
			op = ast.OpLt
		case ast.OpGe:
			op = ast.OpLe
		}
	}
	if l.col == 0 || !r.konst || r.val.IsNull() {
		return nil
	}
	i, c := l.col-1, r.val.Int64()
	switch op {
	case ast.OpEq:
		return func(row []types.Value) (types.Value, error) {
			if v := row[i]; !v.IsNull() {
				return types.Bool(v.Int64() == c), nil
			}
			return types.Null, nil
		}
	case ast.OpNe:
		return func(row []types.Value) (types.Value, error) {
			if v := row[i]; !v.IsNull() {
				return types.Bool(v.Int64() != c), nil
			}
			return types.Null, nil
		}
	case ast.OpLt:
		return func(row []types.Value) (types.Value, error) {
			if v := row[i]; !v.IsNull() {
				return types.Bool(v.Int64() < c), nil
			}
			return types.Null, nil
		}
	case ast.OpLe:
		return func(row []types.Value) (types.Value, error) {
			if v := row[i]; !v.IsNull() {
				return types.Bool(v.Int64() <= c), nil
			}
			return types.Null, nil
		}
	case ast.OpGt:
		return func(row []types.Value) (types.Value, error) {
			if v := row[i]; !v.IsNull() {
				return types.Bool(v.Int64() > c), nil
			}
			return types.Null, nil
		}
	case ast.OpGe:
		return func(row []types.Value) (types.Value, error) {
			if v := row[i]; !v.IsNull() {
				return types.Bool(v.Int64() >= c), nil
			}
			return types.Null, nil
		}
	}
	return nil
}

func cmpTest(op ast.BinaryOp) func(int) bool {
	switch op {
	case ast.OpEq:
		return func(c int) bool { return c == 0 }
	case ast.OpNe:
		return func(c int) bool { return c != 0 }
	case ast.OpLt:
		return func(c int) bool { return c == -1 }
	case ast.OpLe:
		return func(c int) bool { return c == -1 || c == 0 }
	case ast.OpGt:
		return func(c int) bool { return c == 1 }
	}
	return func(c int) bool { return c == 1 || c == 0 }
}

// unify coerces ns to their common type, or reports what cannot meet.
func (c *compiler) unify(pos ast.Pos, what string, ns ...*node) ([]*node, types.Type, error) {
	t, ok := commonOf(ns)
	if !ok {
		// Name the first pair that does not meet.
		for i := 1; i < len(ns); i++ {
			if _, ok := commonOf(ns[:i+1]); !ok {
				return nil, t, errorf(pos, "cannot %s %s and %s", what, kindName(ns[0].typ), kindName(ns[i].typ))
			}
		}
		return nil, t, errorf(pos, "cannot %s these types", what)
	}
	out, err := c.coerceAll(ns, t)
	return out, t, err
}

func comparable(t types.Type) bool {
	switch t.Kind {
	case types.KindMap, types.KindMultiset:
		return false
	}
	return true
}

func (c *compiler) compare(op ast.BinaryOp, pos ast.Pos, l, r *node) (*node, error) {
	ns, t, err := c.unify(pos, "compare", l, r)
	if err != nil {
		return nil, err
	}
	if op != ast.OpEq && op != ast.OpNe && !comparable(t) {
		return nil, errorf(pos, "cannot order values of type %s", typeName(t))
	}
	if f := intColumnCompare(op, t, ns[0], ns[1]); f != nil {
		return derive(types.BooleanType.WithNotNull(!anyNullable(l, r)), pos, f, ns...), nil
	}
	le, re := ns[0].eval, ns[1].eval
	cmp, test := cmpFor(t), cmpTest(op)
	return derive(types.BooleanType.WithNotNull(!anyNullable(l, r)), pos, func(row []types.Value) (types.Value, error) {
		a, err := le(row)
		if err != nil || a.IsNull() {
			return types.Null, err
		}
		b, err := re(row)
		if err != nil || b.IsNull() {
			return types.Null, err
		}
		return types.Bool(test(cmp(a, b))), nil
	}, ns...), nil
}

func (c *compiler) arith(op ast.BinaryOp, pos ast.Pos, l, r *node) (*node, error) {
	lk, rk := l.typ.Kind, r.typ.Kind
	if lk == types.KindNull && (rk.IsNumeric() || rk == types.KindNull) {
		l, lk = &node{typ: r.typ.WithNotNull(false), eval: l.eval, konst: true, pos: l.pos}, rk
	}
	if rk == types.KindNull && lk.IsNumeric() {
		r, rk = &node{typ: l.typ.WithNotNull(false), eval: r.eval, konst: true, pos: r.pos}, lk
	}
	if lk == types.KindNull && rk == types.KindNull {
		return constNode(types.Null, types.IntType, pos), nil
	}
	if lk.IsTemporal() || rk.IsTemporal() || lk.IsInterval() || rk.IsInterval() {
		return c.temporalArith(op, pos, l, r)
	}
	if !lk.IsNumeric() || !rk.IsNumeric() {
		return nil, errorf(pos, "cannot apply '%s' to %s and %s", op, kindName(l.typ), kindName(r.typ))
	}
	t := arithType(op, l.typ, r.typ)
	nullable := anyNullable(l, r)
	var err error
	switch t.Kind {
	case types.KindDecimal:
		lp, ls := decimalView(l.typ)
		rp, rs := decimalView(r.typ)
		if l, err = c.coerce(l, types.DecimalOf(lp, ls)); err != nil {
			return nil, err
		}
		if r, err = c.coerce(r, types.DecimalOf(rp, rs)); err != nil {
			return nil, err
		}
	default:
		if l, err = c.coerce(l, t); err != nil {
			return nil, err
		}
		if r, err = c.coerce(r, t); err != nil {
			return nil, err
		}
	}
	t = nullableIf(t, nullable)
	f, err := arithFn(op, t, pos)
	if err != nil {
		return nil, err
	}
	le, re := l.eval, r.eval
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		a, err := le(row)
		if err != nil || a.IsNull() {
			return types.Null, err
		}
		b, err := re(row)
		if err != nil || b.IsNull() {
			return types.Null, err
		}
		return f(a, b)
	}, l, r), nil
}

type binFn func(a, b types.Value) (types.Value, error)

func divZero(pos ast.Pos) error { return &types.Error{Pos: pos, Msg: "division by zero"} }

// arithFn returns the operation on two non-NULL operands of type t (both
// already converted). Integer arithmetic wraps around as Java's does;
// integer division and modulo by zero are errors (Flink throws
// ArithmeticException); DOUBLE follows IEEE 754 (x/0 is Infinity or NaN);
// DECIMAL results that overflow are NULL.
func arithFn(op ast.BinaryOp, t types.Type, pos ast.Pos) (binFn, error) {
	k := t.Kind
	switch {
	case k.IsInteger():
		switch op {
		case ast.OpAdd:
			return func(a, b types.Value) (types.Value, error) { return types.IntOf(k, a.Int64()+b.Int64()), nil }, nil
		case ast.OpSub:
			return func(a, b types.Value) (types.Value, error) { return types.IntOf(k, a.Int64()-b.Int64()), nil }, nil
		case ast.OpMul:
			return func(a, b types.Value) (types.Value, error) { return types.IntOf(k, a.Int64()*b.Int64()), nil }, nil
		case ast.OpDiv:
			return func(a, b types.Value) (types.Value, error) {
				if b.Int64() == 0 {
					return types.Null, divZero(pos)
				}
				return types.IntOf(k, a.Int64()/b.Int64()), nil
			}, nil
		case ast.OpMod:
			return func(a, b types.Value) (types.Value, error) {
				if b.Int64() == 0 {
					return types.Null, divZero(pos)
				}
				return types.IntOf(k, a.Int64()%b.Int64()), nil
			}, nil
		}
	case k.IsApprox():
		mk := types.Float64
		if k == types.KindFloat {
			mk = func(f float64) types.Value { return types.Float32(float32(f)) }
		}
		switch op {
		case ast.OpAdd:
			return func(a, b types.Value) (types.Value, error) { return mk(a.Float64() + b.Float64()), nil }, nil
		case ast.OpSub:
			return func(a, b types.Value) (types.Value, error) { return mk(a.Float64() - b.Float64()), nil }, nil
		case ast.OpMul:
			return func(a, b types.Value) (types.Value, error) { return mk(a.Float64() * b.Float64()), nil }, nil
		case ast.OpDiv:
			return func(a, b types.Value) (types.Value, error) { return mk(a.Float64() / b.Float64()), nil }, nil
		case ast.OpMod:
			return func(a, b types.Value) (types.Value, error) { return mk(math.Mod(a.Float64(), b.Float64())), nil }, nil
		}
	case k == types.KindDecimal:
		p, s := t.Precision, t.Scale
		switch op {
		case ast.OpAdd:
			return func(a, b types.Value) (types.Value, error) { return okOrNull(types.DecimalAdd(a, b, p, s)), nil }, nil
		case ast.OpSub:
			return func(a, b types.Value) (types.Value, error) { return okOrNull(types.DecimalSub(a, b, p, s)), nil }, nil
		case ast.OpMul:
			return func(a, b types.Value) (types.Value, error) { return okOrNull(types.DecimalMul(a, b, p, s)), nil }, nil
		case ast.OpDiv:
			return func(a, b types.Value) (types.Value, error) {
				v, ok, err := types.DecimalDiv(a, b, p, s)
				if err != nil {
					return types.Null, divZero(pos)
				}
				return okOrNull(v, ok), nil
			}, nil
		case ast.OpMod:
			return func(a, b types.Value) (types.Value, error) {
				v, ok, err := types.DecimalMod(a, b, p, s)
				if err != nil {
					return types.Null, divZero(pos)
				}
				return okOrNull(v, ok), nil
			}, nil
		}
	}
	return nil, errorf(pos, "cannot apply '%s' to %s", op, typeName(t))
}

// temporalArith compiles timestamp/date ± interval, interval ± interval
// and interval × number.
func (c *compiler) temporalArith(op ast.BinaryOp, pos ast.Pos, l, r *node) (*node, error) {
	lk, rk := l.typ.Kind, r.typ.Kind
	bad := func() (*node, error) {
		return nil, errorf(pos, "cannot apply '%s' to %s and %s", op, kindName(l.typ), kindName(r.typ))
	}
	if op == ast.OpAdd && lk.IsInterval() && (rk.IsTemporal()) {
		l, r, lk, rk = r, l, rk, lk
	}
	var f binFn
	t := l.typ
	switch {
	case (op == ast.OpAdd || op == ast.OpSub) && lk.IsTemporal() && rk.IsInterval():
		sign := int64(1)
		if op == ast.OpSub {
			sign = -1
		}
		months := rk == types.KindIntervalYearMonth
		switch lk {
		case types.KindTimestamp, types.KindTimestampLTZ:
			p := l.typ.Precision
			ltz := lk == types.KindTimestampLTZ
			loc := c.loc
			f = func(a, b types.Value) (types.Value, error) {
				ms := a.EpochMillis()
				if months {
					if ltz {
						ms = types.InstantToLocalMillis(ms, loc)
					}
					ms = addMonthsMillis(ms, sign*b.Int64())
					if ltz {
						ms = types.LocalToInstantMillis(ms, loc)
					}
				} else {
					ms += sign * b.Int64()
				}
				if ltz {
					return types.TimestampLTZ(ms, a.NanoOfMilli(), p), nil
				}
				return types.Timestamp(ms, a.NanoOfMilli(), p), nil
			}
		case types.KindDate:
			f = func(a, b types.Value) (types.Value, error) {
				if months {
					return types.Date(addMonthsDays(a.Int64(), sign*b.Int64())), nil
				}
				d, _ := floorDiv(sign*b.Int64(), 86400000)
				return types.Date(a.Int64() + d), nil
			}
		case types.KindTime:
			if months {
				return bad()
			}
			p := l.typ.Precision
			f = func(a, b types.Value) (types.Value, error) {
				_, ns := floorDiv(a.Int64()+sign*b.Int64()*1e6, 86400*1e9)
				return types.Time(ns, p), nil
			}
		}
	case (op == ast.OpAdd || op == ast.OpSub) && lk == rk && lk.IsInterval():
		sign := int64(1)
		if op == ast.OpSub {
			sign = -1
		}
		f = func(a, b types.Value) (types.Value, error) {
			if lk == types.KindIntervalDayTime {
				return types.IntervalMillis(a.Int64() + sign*b.Int64()), nil
			}
			return types.IntervalMonths(a.Int64() + sign*b.Int64()), nil
		}
	case (op == ast.OpMul || op == ast.OpDiv) && lk.IsInterval() && rk.IsNumeric(),
		op == ast.OpMul && rk.IsInterval() && lk.IsNumeric():
		if rk.IsInterval() {
			l, r, lk = r, l, rk
		}
		t = l.typ
		div := op == ast.OpDiv
		f = func(a, b types.Value) (types.Value, error) {
			x := float64(a.Int64())
			y := numToFloat(b)
			var z float64
			if div {
				if y == 0 {
					return types.Null, divZero(pos)
				}
				z = x / y
			} else {
				z = x * y
			}
			if lk == types.KindIntervalDayTime {
				return types.IntervalMillis(int64(z)), nil
			}
			return types.IntervalMonths(int64(z)), nil
		}
	default:
		return bad()
	}
	le, re := l.eval, r.eval
	t = nullableIf(t, anyNullable(l, r))
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		a, err := le(row)
		if err != nil || a.IsNull() {
			return types.Null, err
		}
		b, err := re(row)
		if err != nil || b.IsNull() {
			return types.Null, err
		}
		return f(a, b)
	}, l, r), nil
}

// addMonthsDays adds months to a date, clamping the day to the month's
// length (Jan 31 + 1 month = Feb 28/29), as java.time does.
func addMonthsDays(days, months int64) int64 {
	y, m, d := types.CivilFromDays(days)
	total := y*12 + (m - 1) + months
	ny, nm0 := floorDiv(total, 12)
	nm := nm0 + 1
	last := types.DaysFromCivil(ny, nm+1, 1) - types.DaysFromCivil(ny, nm, 1)
	if nm == 12 {
		last = 31
	}
	return types.DaysFromCivil(ny, nm, min(d, last))
}

func addMonthsMillis(ms, months int64) int64 {
	days, rest := types.SplitMillis(ms)
	return addMonthsDays(days, months)*86400000 + rest
}

func (c *compiler) concatOp(pos ast.Pos, l, r *node) (*node, error) {
	for _, n := range []*node{l, r} {
		if !n.typ.Kind.IsString() && !n.typ.Kind.IsBinary() && n.typ.Kind != types.KindNull {
			return nil, errorf(pos, "cannot apply '||' to %s and %s", kindName(l.typ), kindName(r.typ))
		}
	}
	length := min(l.typ.Length+r.typ.Length, types.MaxLength)
	t := types.VarCharOf(length)
	if l.typ.Kind == types.KindChar && r.typ.Kind == types.KindChar {
		t = types.CharOf(length)
	}
	binary := l.typ.Kind.IsBinary() || r.typ.Kind.IsBinary()
	if binary {
		t = types.Type{Kind: types.KindVarBinary, Length: length}
	}
	t = nullableIf(t, anyNullable(l, r))
	le, re := l.eval, r.eval
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		a, err := le(row)
		if err != nil || a.IsNull() {
			return types.Null, err
		}
		b, err := re(row)
		if err != nil || b.IsNull() {
			return types.Null, err
		}
		if binary {
			return types.BytesString(a.Str() + b.Str()), nil
		}
		return types.String(a.Str() + b.Str()), nil
	}, l, r), nil
}

func (c *compiler) is(e *ast.Is) (*node, error) {
	x, err := c.expr(e.X)
	if err != nil {
		return nil, err
	}
	xe := x.eval
	not := e.Not
	var test func(v types.Value) bool
	switch e.Test {
	case ast.IsNull:
		test = func(v types.Value) bool { return v.IsNull() }
	default:
		if err := c.checkBool(e.Pos, "IS "+e.Test.String(), x); err != nil {
			return nil, err
		}
		switch e.Test {
		case ast.IsTrue:
			test = func(v types.Value) bool { return !v.IsNull() && v.Bool() }
		case ast.IsFalse:
			test = func(v types.Value) bool { return !v.IsNull() && !v.Bool() }
		default:
			test = func(v types.Value) bool { return v.IsNull() }
		}
	}
	return derive(boolNN, e.Pos, func(row []types.Value) (types.Value, error) {
		v, err := xe(row)
		if err != nil {
			return types.Null, err
		}
		return types.Bool(test(v) != not), nil
	}, x), nil
}

func (c *compiler) isDistinct(e *ast.IsDistinctFrom) (*node, error) {
	ns, err := c.exprs([]ast.Expr{e.L, e.R})
	if err != nil {
		return nil, err
	}
	ns, t, err := c.unify(e.Pos, "compare", ns...)
	if err != nil {
		return nil, err
	}
	le, re := ns[0].eval, ns[1].eval
	cmp := cmpFor(t)
	not := e.Not
	return derive(boolNN, e.Pos, func(row []types.Value) (types.Value, error) {
		a, err := le(row)
		if err != nil {
			return types.Null, err
		}
		b, err := re(row)
		if err != nil {
			return types.Null, err
		}
		var distinct bool
		if a.IsNull() || b.IsNull() {
			distinct = a.IsNull() != b.IsNull()
		} else {
			distinct = cmp(a, b) != 0
		}
		return types.Bool(distinct != not), nil
	}, ns...), nil
}

func (c *compiler) between(e *ast.Between) (*node, error) {
	ns, err := c.exprs([]ast.Expr{e.X, e.Lo, e.Hi})
	if err != nil {
		return nil, err
	}
	if _, _, err := c.unify(e.Pos, "compare", ns...); err != nil {
		return nil, err
	}
	x, lo, hi := ns[0], ns[1], ns[2]
	in := func(lo, hi *node) (*node, error) {
		a, err := c.compare(ast.OpGe, e.Pos, x, lo)
		if err != nil {
			return nil, err
		}
		b, err := c.compare(ast.OpLe, e.Pos, x, hi)
		if err != nil {
			return nil, err
		}
		return c.logic(ast.OpAnd, e.Pos, a, b)
	}
	n, err := in(lo, hi)
	if err != nil {
		return nil, err
	}
	if e.Symmetric {
		m, err := in(hi, lo)
		if err != nil {
			return nil, err
		}
		if n, err = c.logic(ast.OpOr, e.Pos, n, m); err != nil {
			return nil, err
		}
	}
	if e.Not {
		return c.not(e.Pos, n)
	}
	return n, nil
}

// inList compiles x IN (a, b, ...): TRUE when x equals an item; else NULL
// when x or any item is NULL; else FALSE.
func (c *compiler) inList(e *ast.InList) (*node, error) {
	ns, err := c.exprs(append([]ast.Expr{e.X}, e.List...))
	if err != nil {
		return nil, err
	}
	ns, t, err := c.unify(e.Pos, "compare", ns...)
	if err != nil {
		return nil, err
	}
	cmp := cmpFor(t)
	xe := ns[0].eval
	items := make([]evalFn, len(ns)-1)
	for i, n := range ns[1:] {
		items[i] = n.eval
	}
	not := e.Not
	return derive(types.BooleanType.WithNotNull(!anyNullable(ns...)), e.Pos, func(row []types.Value) (types.Value, error) {
		x, err := xe(row)
		if err != nil || x.IsNull() {
			return types.Null, err
		}
		sawNull := false
		for _, ie := range items {
			v, err := ie(row)
			if err != nil {
				return types.Null, err
			}
			if v.IsNull() {
				sawNull = true
				continue
			}
			if cmp(x, v) == 0 {
				return types.Bool(!not), nil
			}
		}
		if sawNull {
			return types.Null, nil
		}
		return types.Bool(not), nil
	}, ns...), nil
}

func (c *compiler) caseExpr(e *ast.Case) (*node, error) {
	var conds, results []*node
	for _, w := range e.Whens {
		var cond *node
		var err error
		if e.Operand != nil {
			cond, err = c.expr(&ast.Binary{Pos: w.Pos, Op: ast.OpEq, L: e.Operand, R: w.Cond})
		} else {
			cond, err = c.expr(w.Cond)
		}
		if err != nil {
			return nil, err
		}
		if err := c.checkBool(w.Pos, "WHEN", cond); err != nil {
			return nil, err
		}
		res, err := c.expr(w.Result)
		if err != nil {
			return nil, err
		}
		conds, results = append(conds, cond), append(results, res)
	}
	var elseN *node
	if e.Else != nil {
		var err error
		if elseN, err = c.expr(e.Else); err != nil {
			return nil, err
		}
	} else {
		elseN = constNode(types.Null, types.NullType, e.Pos)
	}
	results = append(results, elseN)
	results, t, err := c.unify(e.Pos, "mix in CASE the result types", results...)
	if err != nil {
		return nil, err
	}
	condFns := make([]evalFn, len(conds))
	resFns := make([]evalFn, len(results))
	for i := range conds {
		condFns[i] = conds[i].eval
	}
	for i := range results {
		resFns[i] = results[i].eval
	}
	elseFn := resFns[len(resFns)-1]
	return derive(t, e.Pos, func(row []types.Value) (types.Value, error) {
		for i, cf := range condFns {
			v, err := cf(row)
			if err != nil {
				return types.Null, err
			}
			if !v.IsNull() && v.Bool() {
				return resFns[i](row)
			}
		}
		return elseFn(row)
	}, append(conds, results...)...), nil
}
