package expr

import (
	"math"
	"math/big"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/types"
)

// builtin compiles a call of a built-in scalar function over compiled
// arguments.
type builtin func(c *compiler, pos ast.Pos, name string, args []*node) (*node, error)

var builtins map[string]builtin

func init() {
	builtins = map[string]builtin{
		"COALESCE": coalesce, "IFNULL": coalesce, "NULLIF": nullif, "IF": ifFn,
		"GREATEST": greatestLeast, "LEAST": greatestLeast,
		"ABS": absFn, "ROUND": roundFn, "TRUNCATE": roundFn, "FLOOR": floorCeilNum, "CEIL": floorCeilNum, "CEILING": floorCeilNum,
		"MOD": modFn, "POWER": doubleFn, "SQRT": doubleFn, "LN": doubleFn, "LOG10": doubleFn,
		"LOG2": doubleFn, "LOG": doubleFn, "EXP": doubleFn, "SIN": doubleFn, "COS": doubleFn,
		"TAN": doubleFn, "SIGN": signFn, "PI": piFn,
		"UPPER": upperLower, "LOWER": upperLower, "CHAR_LENGTH": charLength, "CHARACTER_LENGTH": charLength,
		"SUBSTR": substrFn, "CONCAT": concatFn, "CONCAT_WS": concatWS, "LTRIM": ltrimRtrim, "RTRIM": ltrimRtrim,
		"REPLACE": replaceFn, "REGEXP_EXTRACT": regexpExtract, "REGEXP_REPLACE": regexpReplace,
		"SPLIT_INDEX": splitIndex, "INITCAP": initcap, "LOCATE": locateFn, "REVERSE": reverseFn,
		"REPEAT": repeatFn, "LPAD": padFn, "RPAD": padFn, "LEFT": leftRight, "RIGHT": leftRight,
		"DATE_FORMAT": dateFormat, "TO_TIMESTAMP": toTimestamp, "TO_TIMESTAMP_LTZ": toTimestampLTZ,
		"TO_DATE": toDate, "FROM_UNIXTIME": fromUnixtime, "UNIX_TIMESTAMP": unixTimestamp,
		"YEAR": extractFn, "QUARTER": extractFn, "MONTH": extractFn, "WEEK": extractFn,
		"DAYOFYEAR": extractFn, "DAYOFMONTH": extractFn, "DAYOFWEEK": extractFn, "HOUR": extractFn,
		"MINUTE": extractFn, "SECOND": extractFn,
		"CURRENT_TIMESTAMP": clockFn, "NOW": clockFn, "LOCALTIMESTAMP": clockFn, "CURRENT_DATE": clockFn,
		"CURRENT_TIME": clockFn, "LOCALTIME": clockFn, "CURRENT_ROW_TIMESTAMP": clockFn, "PROCTIME": clockFn,
		"TIMESTAMPDIFF": nil, "TIMESTAMPADD": nil, // handled in call: they take a unit
	}
}

var aggregateNames = map[string]bool{
	"COUNT": true, "SUM": true, "SUM0": true, "AVG": true, "MIN": true, "MAX": true,
	"STDDEV_POP": true, "STDDEV_SAMP": true, "VAR_POP": true, "VAR_SAMP": true,
	"COLLECT": true, "LISTAGG": true, "FIRST_VALUE": true, "LAST_VALUE": true,
	"ROW_NUMBER": true, "RANK": true, "DENSE_RANK": true, "LAG": true, "LEAD": true,
}

// IsAggregate reports whether name (any case) is a built-in aggregate or
// window function, which Compile refuses and the planner handles.
func IsAggregate(name string) bool { return aggregateNames[strings.ToUpper(name)] }

func (c *compiler) call(e *ast.Call) (*node, error) {
	name := strings.ToUpper(e.Name.Last())
	if len(e.Name.Parts) == 1 && aggregateNames[name] || e.Over != nil {
		return nil, errorf(e.Pos, "aggregate function %s is not allowed here; aggregates belong in a SELECT list or HAVING of a grouped query", name)
	}
	if e.Distinct || e.Filter != nil {
		return nil, errorf(e.Pos, "DISTINCT and FILTER apply to aggregate functions only, not %s", name)
	}
	if name == "TIMESTAMPDIFF" || name == "TIMESTAMPADD" {
		return c.timestampDiffAdd(e, name)
	}
	args, err := c.exprs(e.Args)
	if err != nil {
		return nil, err
	}
	if c.Functions != nil {
		if f, ok := c.Functions.lookup(e.Name.Last()); ok {
			return c.callUDF(e.Pos, f, args)
		}
	}
	if b := builtins[name]; b != nil && len(e.Name.Parts) == 1 {
		if e.NoParens && !isClock(name) {
			return nil, errorf(e.Pos, "function %s needs arguments", name)
		}
		return b(c, e.Pos, name, args)
	}
	var cands []string
	for k := range builtins {
		cands = append(cands, k)
	}
	if c.Functions != nil {
		cands = append(cands, c.Functions.names()...)
	}
	return nil, errorf(e.Pos, "no function named %s%s", e.Name.Last(), didYouMean(e.Name.Last(), cands))
}

func isClock(name string) bool {
	switch name {
	case "CURRENT_TIMESTAMP", "LOCALTIMESTAMP", "CURRENT_DATE", "CURRENT_TIME", "LOCALTIME":
		return true
	}
	return false
}

func arity(pos ast.Pos, name string, args []*node, lo, hi int) error {
	if len(args) < lo || len(args) > hi {
		switch {
		case lo == hi:
			return errorf(pos, "function %s takes %d argument(s), got %d", name, lo, len(args))
		case hi > 100:
			return errorf(pos, "function %s takes at least %d argument(s), got %d", name, lo, len(args))
		}
		return errorf(pos, "function %s takes %d to %d arguments, got %d", name, lo, hi, len(args))
	}
	return nil
}

// wantKind checks that args[i] is of an accepted family (or NULL).
func wantKind(pos ast.Pos, name string, n *node, what string, ok func(types.Kind) bool) error {
	if n.typ.Kind == types.KindNull || ok(n.typ.Kind) {
		return nil
	}
	return errorf(n.pos, "function %s expects %s, not %s", name, what, typeName(n.typ))
}

func isStr(k types.Kind) bool     { return k.IsString() }
func isNum(k types.Kind) bool     { return k.IsNumeric() }
func isInt(k types.Kind) bool     { return k.IsInteger() }
func isTs(k types.Kind) bool      { return k.IsTimestamp() }
func isTsOrStr(k types.Kind) bool { return k.IsTimestamp() || k.IsString() || k == types.KindDate }

// strict1..3 build null-propagating operations of fixed arity without
// allocating per call.
func strict1(t types.Type, pos ast.Pos, a *node, f func(types.Value) (types.Value, error)) *node {
	if a.col > 0 {
		// A function of a column reads the column itself: one call fewer
		// per row.
		i := a.col - 1
		return derive(t, pos, func(row []types.Value) (types.Value, error) {
			x := row[i]
			if x.IsNull() {
				return types.Null, nil
			}
			return f(x)
		}, a)
	}
	ae := a.eval
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		x, err := ae(row)
		if err != nil || x.IsNull() {
			return types.Null, err
		}
		return f(x)
	}, a)
}

func strict2(t types.Type, pos ast.Pos, a, b *node, f func(x, y types.Value) (types.Value, error)) *node {
	ae, be := a.eval, b.eval
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		x, err := ae(row)
		if err != nil || x.IsNull() {
			return types.Null, err
		}
		y, err := be(row)
		if err != nil || y.IsNull() {
			return types.Null, err
		}
		return f(x, y)
	}, a, b)
}

func strict3(t types.Type, pos ast.Pos, a, b, d *node, f func(x, y, z types.Value) (types.Value, error)) *node {
	ae, be, de := a.eval, b.eval, d.eval
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		x, err := ae(row)
		if err != nil || x.IsNull() {
			return types.Null, err
		}
		y, err := be(row)
		if err != nil || y.IsNull() {
			return types.Null, err
		}
		z, err := de(row)
		if err != nil || z.IsNull() {
			return types.Null, err
		}
		return f(x, y, z)
	}, a, b, d)
}

// ---------------------------------------------------------------------------
// Conditional functions

func coalesce(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if name == "IFNULL" {
		if err := arity(pos, name, args, 2, 2); err != nil {
			return nil, err
		}
	} else if err := arity(pos, name, args, 1, 1<<30); err != nil {
		return nil, err
	}
	args, t, err := c.unify(pos, "mix in "+name+" the types", args...)
	if err != nil {
		return nil, err
	}
	t.NotNull = false
	for _, a := range args {
		if a.typ.NotNull {
			t.NotNull = true
		}
	}
	fns := make([]evalFn, len(args))
	for i, a := range args {
		fns[i] = a.eval
	}
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		for _, f := range fns {
			v, err := f(row)
			if err != nil || !v.IsNull() {
				return v, err
			}
		}
		return types.Null, nil
	}, args...), nil
}

func nullif(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 2, 2); err != nil {
		return nil, err
	}
	ns, t, err := c.unify(pos, "compare", args...)
	if err != nil {
		return nil, err
	}
	cmp := cmpFor(t)
	ae, be := ns[0].eval, ns[1].eval
	return derive(t.WithNotNull(false), pos, func(row []types.Value) (types.Value, error) {
		a, err := ae(row)
		if err != nil || a.IsNull() {
			return types.Null, err
		}
		b, err := be(row)
		if err != nil {
			return types.Null, err
		}
		if !b.IsNull() && cmp(a, b) == 0 {
			return types.Null, nil
		}
		return a, nil
	}, ns...), nil
}

func ifFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 3, 3); err != nil {
		return nil, err
	}
	if err := c.checkBool(pos, "IF", args[0]); err != nil {
		return nil, err
	}
	rs, t, err := c.unify(pos, "mix in IF the types", args[1], args[2])
	if err != nil {
		return nil, err
	}
	ce, te, ee := args[0].eval, rs[0].eval, rs[1].eval
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		v, err := ce(row)
		if err != nil {
			return types.Null, err
		}
		if !v.IsNull() && v.Bool() {
			return te(row)
		}
		return ee(row)
	}, args[0], rs[0], rs[1]), nil
}

func greatestLeast(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1<<30); err != nil {
		return nil, err
	}
	ns, t, err := c.unify(pos, "compare", args...)
	if err != nil {
		return nil, err
	}
	cmp := cmpFor(t)
	want := 1
	if name == "LEAST" {
		want = -1
	}
	fns := make([]evalFn, len(ns))
	for i, a := range ns {
		fns[i] = a.eval
	}
	return derive(t, pos, func(row []types.Value) (types.Value, error) {
		var best types.Value
		for i, f := range fns {
			v, err := f(row)
			if err != nil || v.IsNull() {
				return types.Null, err
			}
			if i == 0 || cmp(v, best) == want {
				best = v
			}
		}
		return best, nil
	}, ns...), nil
}

// ---------------------------------------------------------------------------
// Math

func absFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantKind(pos, name, args[0], "a number", isNum); err != nil {
		return nil, err
	}
	t := args[0].typ
	k := t.Kind
	return strict1(t, pos, args[0], func(v types.Value) (types.Value, error) {
		switch {
		case k.IsInteger():
			i := v.Int64()
			if i < 0 {
				i = -i
			}
			return types.IntOf(k, i), nil
		case k == types.KindDouble:
			return types.Float64(math.Abs(v.Float64())), nil
		case k == types.KindFloat:
			return types.Float32(float32(math.Abs(v.Float64()))), nil
		}
		if types.DecimalSign(v) < 0 {
			return types.DecimalNeg(v), nil
		}
		return v, nil
	}), nil
}

func constInt(n *node) (int64, bool) {
	if !n.konst || n.val.IsNull() || !n.typ.Kind.IsInteger() {
		return 0, false
	}
	return n.val.Int64(), true
}

// roundFn is ROUND(x [, d]) (HALF_UP, as Flink) and TRUNCATE(x [, d]).
// ROUND of DECIMAL(p, s) to d < s digits is DECIMAL(p - s + d + 1, d).
func roundFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 2); err != nil {
		return nil, err
	}
	if err := wantKind(pos, name, args[0], "a number", isNum); err != nil {
		return nil, err
	}
	d := int64(0)
	if len(args) == 2 {
		var ok bool
		if d, ok = constInt(args[1]); !ok {
			return nil, errorf(args[1].pos, "the second argument of %s must be an integer literal", name)
		}
	}
	trunc := name == "TRUNCATE"
	x := args[0]
	t := x.typ
	k := t.Kind
	switch {
	case k == types.KindDecimal:
		if int(d) < t.Scale {
			rs := max(int(d), 0)
			t = types.DecimalOf(min(types.MaxDecimalPrecision, max(1, t.Precision-t.Scale+rs+1)), rs).WithNotNull(t.NotNull)
		}
		p, s := t.Precision, t.Scale
		return strict1(t, pos, x, func(v types.Value) (types.Value, error) {
			r := roundDecimal(v, int(d), trunc)
			return okOrNull(types.RescaleDecimal(r, p, s)), nil
		}), nil
	case k.IsInteger():
		return strict1(t, pos, x, func(v types.Value) (types.Value, error) {
			if d >= 0 {
				return v, nil
			}
			r := roundDecimal(types.Decimal(v.Int64(), 19, 0), int(d), trunc)
			i, _ := types.DecimalToInt64(r)
			return types.IntOf(k, i), nil
		}), nil
	default:
		return strict1(t, pos, x, func(v types.Value) (types.Value, error) {
			f := v.Float64()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return v, nil
			}
			dv, err := types.ParseDecimal(formatShortest(f), types.MaxDecimalPrecision, decimalScaleOf(f))
			if err != nil {
				return v, nil // too large to have fraction digits
			}
			r := types.DecimalToFloat64(roundDecimal(dv, int(d), trunc))
			if k == types.KindFloat {
				return types.Float32(float32(r)), nil
			}
			return types.Float64(r), nil
		}), nil
	}
}

func formatShortest(f float64) string {
	return string(types.AppendJavaFloat(nil, f, 64))
}

func decimalScaleOf(f float64) int {
	s := formatShortest(f)
	exp := 0
	if i := strings.IndexByte(s, 'E'); i >= 0 {
		for _, c := range s[i+1:] {
			if c >= '0' && c <= '9' {
				exp = exp*10 + int(c-'0')
			}
		}
		if strings.Contains(s[i:], "-") {
			exp = -exp
		}
		s = s[:i]
	}
	frac := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		frac = len(s) - i - 1
	}
	return min(max(frac-exp, 0), 30)
}

// roundDecimal rounds v to d fraction digits (d may be negative), HALF_UP
// or toward zero; the result keeps scale max(d, 0).
func roundDecimal(v types.Value, d int, trunc bool) types.Value {
	s := v.Scale()
	if d >= s {
		return v
	}
	p := types.MaxDecimalPrecision
	if trunc {
		// Truncate: drop digits toward zero.
		u := v.BigUnscaled()
		div := pow10Big(s - d)
		u.Quo(u, div)
		if d < 0 {
			u.Mul(u, pow10Big(-d))
			return types.DecimalBig(u, p, 0)
		}
		return types.DecimalBig(u, p, d)
	}
	if d >= 0 {
		r, _ := types.RescaleDecimal(v, p, d)
		return r
	}
	r, _ := types.RescaleDecimal(types.DecimalBig(v.BigUnscaled(), p, s-d), p, 0) // shift the point by -d
	u := r.BigUnscaled()
	u.Mul(u, pow10Big(-d))
	return types.DecimalBig(u, p, 0)
}

func floorCeilNum(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantKind(pos, name, args[0], "a number", isNum); err != nil {
		return nil, err
	}
	ceil := name != "FLOOR"
	t := args[0].typ
	switch k := t.Kind; {
	case k.IsInteger():
		return args[0], nil
	case k.IsApprox():
		return strict1(t, pos, args[0], func(v types.Value) (types.Value, error) {
			f := math.Floor(v.Float64())
			if ceil {
				f = math.Ceil(v.Float64())
			}
			if k == types.KindFloat {
				return types.Float32(float32(f)), nil
			}
			return types.Float64(f), nil
		}), nil
	default:
		if t.Scale == 0 {
			return args[0], nil
		}
		rt := types.DecimalOf(min(types.MaxDecimalPrecision, t.Precision-t.Scale+1), 0).WithNotNull(t.NotNull)
		p := rt.Precision
		return strict1(rt, pos, args[0], func(v types.Value) (types.Value, error) {
			u := v.BigUnscaled()
			q, m := u.DivMod(u, pow10Big(v.Scale()), new(big.Int)) // Euclidean: floor for positive divisor
			if ceil && m.Sign() != 0 {
				q.Add(q, bigOne)
			}
			return okOrNull(types.RescaleDecimal(types.DecimalBig(q, types.MaxDecimalPrecision, 0), p, 0)), nil
		}), nil
	}
}

func modFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 2, 2); err != nil {
		return nil, err
	}
	return c.arith(ast.OpMod, pos, args[0], args[1])
}

func piFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 0, 0); err != nil {
		return nil, err
	}
	return constNode(types.Float64(math.Pi), types.DoubleType.WithNotNull(true), pos), nil
}

func signFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	if err := arity(pos, name, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantKind(pos, name, args[0], "a number", isNum); err != nil {
		return nil, err
	}
	t := args[0].typ
	k := t.Kind
	return strict1(t, pos, args[0], func(v types.Value) (types.Value, error) {
		s := numSign(v)
		switch {
		case k.IsInteger():
			return types.IntOf(k, int64(s)), nil
		case k == types.KindDecimal:
			return okOrNull(types.DecimalFromInt64(int64(s), t.Precision, t.Scale)), nil
		case k == types.KindFloat:
			return types.Float32(float32(s)), nil
		}
		return types.Float64(float64(s)), nil
	}), nil
}

// doubleFn covers the functions computed in DOUBLE.
func doubleFn(c *compiler, pos ast.Pos, name string, args []*node) (*node, error) {
	lo, hi := 1, 1
	switch name {
	case "POWER":
		lo, hi = 2, 2
	case "LOG":
		hi = 2
	}
	if err := arity(pos, name, args, lo, hi); err != nil {
		return nil, err
	}
	for i, a := range args {
		if err := wantKind(pos, name, a, "a number", isNum); err != nil {
			return nil, err
		}
		var err error
		if args[i], err = c.coerce(a, types.DoubleType); err != nil {
			return nil, err
		}
	}
	t := types.DoubleType.WithNotNull(!anyNullable(args...))
	f1 := map[string]func(float64) float64{
		"SQRT": math.Sqrt, "LN": math.Log, "LOG10": math.Log10, "LOG2": math.Log2, "LOG": math.Log,
		"EXP": math.Exp, "SIN": math.Sin, "COS": math.Cos, "TAN": math.Tan,
	}[name]
	if len(args) == 1 {
		return strict1(t, pos, args[0], func(v types.Value) (types.Value, error) {
			return types.Float64(f1(v.Float64())), nil
		}), nil
	}
	if name == "POWER" {
		return strict2(t, pos, args[0], args[1], func(x, y types.Value) (types.Value, error) {
			return types.Float64(math.Pow(x.Float64(), y.Float64())), nil
		}), nil
	}
	return strict2(t, pos, args[0], args[1], func(b, x types.Value) (types.Value, error) { // LOG(base, x)
		return types.Float64(math.Log(x.Float64()) / math.Log(b.Float64())), nil
	}), nil
}

var bigOne = big.NewInt(1)

func pow10Big(n int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}
