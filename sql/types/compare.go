package types

import (
	"bytes"
	"cmp"
	"math"
	"strings"
)

// Compare orders two non-NULL values by SQL ordering: numbers by value
// across the numeric kinds (an exact number meets a FLOAT or DOUBLE as a
// double), strings and binaries by their bytes (UTF-8 byte order, as
// Flink's BinaryStringData), FALSE before TRUE, temporal values and
// intervals chronologically, ARRAY and ROW element by element (NULL
// first). Floats follow Java's Double.compare: -0.0 < 0.0 and NaN above
// everything. Values of unrelated kinds order by kind, so Compare is a
// total order usable for sorting. Callers handle NULL before calling; a
// NULL here orders first.
func Compare(a, b Value) int {
	if a.IsNull() || b.IsNull() {
		return cmpBool(!a.IsNull(), !b.IsNull())
	}
	ka, kb := a.kind, b.kind
	if ka.IsNumeric() && kb.IsNumeric() {
		switch {
		case ka.IsInteger() && kb.IsInteger():
			return cmp64(a.Int64(), b.Int64())
		case ka.IsApprox() || kb.IsApprox():
			return compareFloat(toFloat(a), toFloat(b))
		default:
			return CompareDecimal(toDecimal(a), toDecimal(b))
		}
	}
	if ka != kb && !(ka.IsString() && kb.IsString()) && !(ka.IsBinary() && kb.IsBinary()) &&
		!(ka.IsTimestamp() && kb.IsTimestamp()) {
		return cmp.Compare(ka, kb)
	}
	switch ka {
	case KindBoolean:
		return cmpBool(a.Bool(), b.Bool())
	case KindChar, KindVarChar, KindBinary, KindVarBinary:
		return strings.Compare(a.Str(), b.Str())
	case KindDate, KindTime, KindIntervalDayTime, KindIntervalYearMonth:
		return cmp64(a.Int64(), b.Int64())
	case KindTimestamp, KindTimestampLTZ:
		if c := cmp64(a.EpochMillis(), b.EpochMillis()); c != 0 {
			return c
		}
		return cmp.Compare(a.NanoOfMilli(), b.NanoOfMilli())
	case KindArray, KindMultiset, KindRow:
		ea, eb := a.Elems(), b.Elems()
		for i := 0; i < len(ea) && i < len(eb); i++ {
			if c := Compare(ea[i], eb[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(ea), len(eb))
	case KindMap:
		return bytes.Compare(AppendKey(nil, a), AppendKey(nil, b))
	}
	return 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// compareFloat is Java's Double.compare.
func compareFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	bx, by := int64(math.Float64bits(x)), int64(math.Float64bits(y))
	if math.IsNaN(x) {
		bx = 0x7ff8000000000000
	}
	if math.IsNaN(y) {
		by = 0x7ff8000000000000
	}
	return cmp64(bx, by)
}

func toFloat(v Value) float64 {
	switch {
	case v.kind.IsApprox():
		return v.Float64()
	case v.kind == KindDecimal:
		return DecimalToFloat64(v)
	}
	return float64(v.Int64())
}

func toDecimal(v Value) Value {
	if v.kind == KindDecimal {
		return v
	}
	return Decimal(v.Int64(), 19, 0)
}

// Equal reports whether a and b are the same value: Compare(a, b) == 0 for
// non-NULL values of comparable kinds; two NULLs are equal (the meaning of
// IS NOT DISTINCT FROM, and of grouping keys).
func Equal(a, b Value) bool {
	if a.IsNull() || b.IsNull() {
		return a.IsNull() == b.IsNull()
	}
	return Compare(a, b) == 0
}

// AppendKey appends a deterministic encoding of v, for grouping and
// partitioning keys and hashing: equal values of the same type give equal
// bytes, and the bytes are the same in every process. It is the Row codec's
// encoding of one value.
func AppendKey(dst []byte, v Value) []byte { return appendValue(dst, v) }
