package types

import (
	"math"
	"strconv"
	"time"
)

// String formats v as Flink's CAST(v AS STRING) does (TIMESTAMP_LTZ in
// UTC); NULL prints as NULL.
func (v Value) String() string { return string(v.AppendFormat(nil, time.UTC)) }

// AppendFormat appends v formatted as Flink's CAST(v AS STRING) does, with
// TIMESTAMP_LTZ values shown in loc:
//
//   - BOOLEAN as TRUE / FALSE;
//   - FLOAT and DOUBLE as Java's Float/Double.toString (1.0, 0.001, 1.0E7,
//     1.0E-4, NaN, Infinity);
//   - DECIMAL with exactly its scale's digits (12.50);
//   - DATE yyyy-MM-dd, TIME HH:mm:ss, TIMESTAMP(p) `yyyy-MM-dd HH:mm:ss`
//     with p fraction digits (`2015-07-15 00:00:01.000` for p = 3);
//   - INTERVAL DAY TO SECOND as `+d hh:mm:ss.fff`, YEAR TO MONTH `+y-mm`;
//   - ARRAY [a, b], MAP {k=v, ...}, ROW (a, b), nested NULLs as NULL;
//   - BINARY and VARBINARY as their bytes.
func (v Value) AppendFormat(dst []byte, loc *time.Location) []byte {
	if v.IsNull() {
		return append(dst, "NULL"...)
	}
	switch v.kind {
	case KindBoolean:
		if v.Bool() {
			return append(dst, "TRUE"...)
		}
		return append(dst, "FALSE"...)
	case KindTinyInt, KindSmallInt, KindInt, KindBigInt:
		return strconv.AppendInt(dst, v.Int64(), 10)
	case KindFloat:
		return AppendJavaFloat(dst, v.Float64(), 32)
	case KindDouble:
		return AppendJavaFloat(dst, v.Float64(), 64)
	case KindDecimal:
		return AppendDecimal(dst, v)
	case KindChar, KindVarChar, KindBinary, KindVarBinary:
		return append(dst, v.Str()...)
	case KindDate:
		return AppendDate(dst, v.Int64())
	case KindTime:
		return AppendTime(dst, v.Int64(), v.Precision())
	case KindTimestamp:
		return AppendTimestamp(dst, v.EpochMillis(), v.NanoOfMilli(), v.Precision())
	case KindTimestampLTZ:
		return AppendTimestamp(dst, InstantToLocalMillis(v.EpochMillis(), loc), v.NanoOfMilli(), v.Precision())
	case KindIntervalDayTime:
		ms := v.Int64()
		sign := byte('+')
		if ms < 0 {
			sign = '-'
			ms = -ms
		}
		dst = append(dst, sign)
		dst = strconv.AppendInt(dst, ms/millisPerDay, 10)
		dst = append(dst, ' ')
		return AppendTime(dst, ms%millisPerDay*1e6, 3)
	case KindIntervalYearMonth:
		m := v.Int64()
		sign := byte('+')
		if m < 0 {
			sign = '-'
			m = -m
		}
		dst = append(dst, sign)
		dst = strconv.AppendInt(dst, m/12, 10)
		dst = append(dst, '-')
		return appendPadded(dst, m%12, 2)
	case KindArray, KindMultiset, KindRow:
		open, closing := byte('['), byte(']')
		if v.kind == KindRow {
			open, closing = '(', ')'
		}
		dst = append(dst, open)
		for i, e := range v.Elems() {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = e.AppendFormat(dst, loc)
		}
		return append(dst, closing)
	case KindMap:
		m := v.MapEntries()
		dst = append(dst, '{')
		for i := range m.Keys {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = m.Keys[i].AppendFormat(dst, loc)
			dst = append(dst, '=')
			dst = m.Values[i].AppendFormat(dst, loc)
		}
		return append(dst, '}')
	}
	return append(dst, "NULL"...)
}

// AppendJavaFloat appends f as Java's Double.toString (bitSize 64) or
// Float.toString (bitSize 32) print it: the shortest digits that read
// back, plain for 10^-3 <= |f| < 10^7 with at least one fraction digit,
// otherwise d.dddE[-]n.
func AppendJavaFloat(dst []byte, f float64, bitSize int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	abs := math.Abs(f)
	if abs >= 1e-3 && abs < 1e7 {
		start := len(dst)
		dst = strconv.AppendFloat(dst, f, 'f', -1, bitSize)
		for _, c := range dst[start:] {
			if c == '.' {
				return dst
			}
		}
		return append(dst, ".0"...)
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, bitSize) // -d.ddde+XX
	i := 0
	for s[i] != 'e' {
		i++
	}
	mant, exp := s[:i], s[i+1:]
	dst = append(dst, mant...)
	hasPoint := false
	for _, c := range mant {
		if c == '.' {
			hasPoint = true
		}
	}
	if !hasPoint {
		dst = append(dst, ".0"...)
	}
	dst = append(dst, 'E')
	if exp[0] == '-' {
		dst = append(dst, '-')
	}
	exp = exp[1:]
	for len(exp) > 1 && exp[0] == '0' {
		exp = exp[1:]
	}
	return append(dst, exp...)
}
