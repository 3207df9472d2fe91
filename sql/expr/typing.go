package expr

import (
	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/types"
)

// Type inference follows Flink's rules (LogicalTypeMerging and Calcite's
// least-restrictive type): exact integers widen to the wider integer; an
// integer meeting a DECIMAL becomes DECIMAL(3|5|10|19, 0); anything meeting
// DOUBLE is DOUBLE; DECIMAL results follow Flink's precision and scale
// formulas, capped at precision 38 keeping at least scale 6.

func anyNullable(ns ...*node) bool {
	for _, n := range ns {
		if n.typ.Nullable() {
			return true
		}
	}
	return false
}

func nullableIf(t types.Type, nullable bool) types.Type { return t.WithNotNull(!nullable) }

// decimalView returns the precision and scale of an exact numeric type as
// a DECIMAL.
func decimalView(t types.Type) (int, int) {
	switch t.Kind {
	case types.KindTinyInt:
		return 3, 0
	case types.KindSmallInt:
		return 5, 0
	case types.KindInt:
		return 10, 0
	case types.KindBigInt:
		return 19, 0
	}
	return t.Precision, t.Scale
}

// adjustPrecisionScale caps a DECIMAL at precision 38, keeping the integer
// digits and at least min(scale, 6) fraction digits, as Flink does.
func adjustPrecisionScale(p, s int) types.Type {
	if p <= types.MaxDecimalPrecision {
		return types.DecimalOf(max(p, 1), s)
	}
	intDigits := p - s
	minScale := min(s, 6)
	s = max(types.MaxDecimalPrecision-intDigits, minScale)
	return types.DecimalOf(types.MaxDecimalPrecision, s)
}

var intRank = map[types.Kind]int{types.KindTinyInt: 1, types.KindSmallInt: 2, types.KindInt: 3, types.KindBigInt: 4}

// commonType returns the least restrictive type of a and b, or false when
// they have none.
func commonType(a, b types.Type) (types.Type, bool) {
	nullable := a.Nullable() || b.Nullable()
	switch {
	case a.Kind == types.KindNull:
		return b.WithNotNull(false), true
	case b.Kind == types.KindNull:
		return a.WithNotNull(false), true
	}
	ka, kb := a.Kind, b.Kind
	var t types.Type
	switch {
	case ka.IsNumeric() && kb.IsNumeric():
		switch {
		case ka == types.KindDouble || kb == types.KindDouble:
			t = types.DoubleType
		case ka == types.KindFloat || kb == types.KindFloat:
			if ka == types.KindDecimal || kb == types.KindDecimal {
				t = types.DoubleType
			} else {
				t = types.FloatType
			}
		case ka == types.KindDecimal || kb == types.KindDecimal:
			pa, sa := decimalView(a)
			pb, sb := decimalView(b)
			s := max(sa, sb)
			t = adjustPrecisionScale(max(pa-sa, pb-sb)+s, s)
		default:
			t = a
			if intRank[kb] > intRank[ka] {
				t = b
			}
		}
	case ka.IsString() && kb.IsString():
		if ka == types.KindChar && kb == types.KindChar && a.Length == b.Length {
			t = a
		} else {
			t = types.VarCharOf(max(a.Length, b.Length))
		}
	case ka.IsBinary() && kb.IsBinary():
		if ka == kb && a.Length == b.Length {
			t = a
		} else {
			t = types.Type{Kind: types.KindVarBinary, Length: max(a.Length, b.Length)}
		}
	case ka == kb && (ka == types.KindBoolean || ka == types.KindDate || ka.IsInterval()):
		t = a
	case ka == kb && (ka == types.KindTime || ka.IsTimestamp()):
		t = types.Type{Kind: ka, Precision: max(a.Precision, b.Precision)}
	case ka.IsTimestamp() && kb.IsTimestamp():
		t = types.TimestampLTZOf(max(a.Precision, b.Precision))
	case ka == types.KindDate && kb.IsTimestamp():
		t = types.Type{Kind: kb, Precision: b.Precision}
	case kb == types.KindDate && ka.IsTimestamp():
		t = types.Type{Kind: ka, Precision: a.Precision}
	case ka == kb && a.Equal(b.WithNotNull(a.NotNull)):
		t = a
	default:
		return types.Type{}, false
	}
	return t.WithNotNull(!nullable), true
}

// commonOf folds commonType over ns, letting string literals meet
// temporal types as the temporal type.
func commonOf(ns []*node) (types.Type, bool) {
	t := types.NullType
	for _, n := range ns {
		nt := n.typ
		if n.strLit && t.Kind.IsTemporal() {
			nt = t.WithNotNull(n.typ.NotNull)
		}
		var ok bool
		if t, ok = commonType(t, nt); !ok {
			return types.Type{}, false
		}
	}
	if allNotNull(ns) {
		t.NotNull = true
	}
	return t, true
}

func allNotNull(ns []*node) bool {
	for _, n := range ns {
		if n.typ.Nullable() {
			return false
		}
	}
	return true
}

// sameRepr reports whether values of from need no conversion to serve as
// values of to.
func sameRepr(from, to types.Type) bool {
	switch {
	case from.Kind == to.Kind:
		switch from.Kind {
		case types.KindDecimal:
			return from.Precision == to.Precision && from.Scale == to.Scale
		case types.KindTime, types.KindTimestamp, types.KindTimestampLTZ:
			return from.Precision == to.Precision
		case types.KindChar:
			return from.Length == to.Length
		case types.KindVarChar:
			return from.Length <= to.Length
		}
		return true
	case from.Kind.IsString() && to.Kind == types.KindVarChar:
		return from.Length <= to.Length
	case from.Kind.IsBinary() && to.Kind == types.KindVarBinary:
		return from.Length <= to.Length
	case from.Kind == types.KindNull:
		return true
	}
	return false
}

// coerce converts n implicitly to t (whose nullability is ignored).
func (c *compiler) coerce(n *node, t types.Type) (*node, error) {
	t = t.WithNotNull(n.typ.NotNull)
	if sameRepr(n.typ, t) {
		if n.typ.Equal(t) {
			return n, nil
		}
		m := *n
		m.typ = t
		return &m, nil
	}
	return c.castNode(n, t, false, n.pos)
}

func (c *compiler) coerceAll(ns []*node, t types.Type) ([]*node, error) {
	out := make([]*node, len(ns))
	for i, n := range ns {
		var err error
		if out[i], err = c.coerce(n, t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// arithType returns the result type of a op b for numeric operands.
func arithType(op ast.BinaryOp, a, b types.Type) types.Type {
	ka, kb := a.Kind, b.Kind
	switch {
	case ka == types.KindDouble || kb == types.KindDouble:
		return types.DoubleType
	case ka == types.KindFloat || kb == types.KindFloat:
		if ka == types.KindDecimal || kb == types.KindDecimal {
			return types.DoubleType
		}
		return types.FloatType
	case ka == types.KindDecimal || kb == types.KindDecimal:
		p1, s1 := decimalView(a)
		p2, s2 := decimalView(b)
		switch op {
		case ast.OpAdd, ast.OpSub:
			s := max(s1, s2)
			return adjustPrecisionScale(max(p1-s1, p2-s2)+s+1, s)
		case ast.OpMul:
			return adjustPrecisionScale(p1+p2+1, s1+s2)
		case ast.OpDiv:
			s := max(6, s1+p2+1)
			return adjustPrecisionScale(p1-s1+s2+s, s)
		default: // %
			s := max(s1, s2)
			return adjustPrecisionScale(min(p1-s1, p2-s2)+s, s)
		}
	}
	if op == ast.OpMod {
		return b
	}
	if intRank[kb] > intRank[ka] {
		return b
	}
	return a
}

// CommonType returns the least restrictive type of a and b (the type a
// CASE or a UNION gives two such columns), or false when they have none.
func CommonType(a, b types.Type) (types.Type, bool) { return commonType(a, b) }
