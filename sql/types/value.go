package types

import (
	"math"
	"math/big"
	"time"
	"unsafe"
)

// Value is one SQL value. It is 24 bytes and holds scalars without a heap
// allocation:
//
//   - n, a 64-bit payload: BOOLEAN as 0/1; TINYINT..BIGINT, DATE (days since
//     1970-01-01), TIME (nanoseconds of the day), INTERVAL DAY TO SECOND
//     (milliseconds) and INTERVAL YEAR TO MONTH (months) as int64; FLOAT
//     and DOUBLE as float64 bits; TIMESTAMP and TIMESTAMP_LTZ as
//     milliseconds since the epoch; DECIMAL as the int64 unscaled value when
//     it fits; CHAR..VARBINARY as the length of the bytes.
//   - p, a pointer: the bytes of CHAR..VARBINARY (a string's data, never
//     copied), a *big.Int unscaled value of a DECIMAL that does not fit an
//     int64, or the *[]Value / *MapValue of ARRAY, MULTISET, ROW and MAP.
//   - a small header: kind, flags (null, big decimal), precision and scale
//     (DECIMAL; the fractional precision of TIME and the timestamps, which
//     the printed form follows), and aux, the nanoseconds within the
//     millisecond of a timestamp (0..999999).
//
// Timestamps keep milliseconds plus nanoseconds of the millisecond, like
// Flink's TimestampData: milliseconds cover any year Flink supports, and
// precision 9 fits beside them without a second word.
//
// A Value is immutable; copying it is cheap and safe.
type Value struct {
	p     unsafe.Pointer
	n     uint64
	kind  Kind
	flags uint8
	prec  uint8
	scale uint8
	aux   uint32
}

const (
	flagNull uint8 = 1 << iota
	flagBig
)

// MapValue is the content of a MAP value: Keys[i] maps to Values[i].
type MapValue struct {
	Keys   []Value
	Values []Value
}

// Null is the SQL NULL (the zero Value). Callers handle NULL before
// Compare and the accessors; the accessors of Null return zero values.
var Null = Value{flags: flagNull}

// NullOf returns a NULL that remembers the kind of its column.
func NullOf(k Kind) Value { return Value{kind: k, flags: flagNull} }

// Bool returns a BOOLEAN.
func Bool(b bool) Value {
	if b {
		return Value{kind: KindBoolean, n: 1}
	}
	return Value{kind: KindBoolean}
}

// Int8 returns a TINYINT.
func Int8(v int8) Value { return Value{kind: KindTinyInt, n: uint64(int64(v))} }

// Int16 returns a SMALLINT.
func Int16(v int16) Value { return Value{kind: KindSmallInt, n: uint64(int64(v))} }

// Int32 returns an INT.
func Int32(v int32) Value { return Value{kind: KindInt, n: uint64(int64(v))} }

// Int64 returns a BIGINT.
func Int64(v int64) Value { return Value{kind: KindBigInt, n: uint64(v)} }

// IntOf returns an integer of kind k (TINYINT..BIGINT), wrapping v to the
// kind's width as Java's narrowing conversions do.
func IntOf(k Kind, v int64) Value {
	switch k {
	case KindTinyInt:
		v = int64(int8(v))
	case KindSmallInt:
		v = int64(int16(v))
	case KindInt:
		v = int64(int32(v))
	}
	return Value{kind: k, n: uint64(v)}
}

// Float32 returns a FLOAT.
func Float32(f float32) Value {
	return Value{kind: KindFloat, n: math.Float64bits(float64(f))}
}

// Float64 returns a DOUBLE.
func Float64(f float64) Value { return Value{kind: KindDouble, n: math.Float64bits(f)} }

// Decimal returns a DECIMAL(precision, scale) with the given unscaled
// value (unscaled × 10^-scale). The caller ensures that the value fits the
// precision.
func Decimal(unscaled int64, precision, scale int) Value {
	return Value{kind: KindDecimal, n: uint64(unscaled), prec: uint8(precision), scale: uint8(scale)}
}

// DecimalBig is Decimal for an unscaled value of any size; it keeps the
// value inline when it fits an int64. u must not be modified afterwards.
func DecimalBig(u *big.Int, precision, scale int) Value {
	if u.IsInt64() {
		return Decimal(u.Int64(), precision, scale)
	}
	return Value{kind: KindDecimal, p: unsafe.Pointer(u), flags: flagBig, prec: uint8(precision), scale: uint8(scale)}
}

// String returns a character string value (kind VARCHAR). CHAR and
// VARCHAR columns both hold such values, as Flink's StringData serves
// both; String does not copy s.
func String(s string) Value {
	return Value{kind: KindVarChar, p: unsafe.Pointer(unsafe.StringData(s)), n: uint64(len(s))}
}

// Bytes returns a binary string value (kind VARBINARY, which BINARY
// columns hold too). It copies b.
func Bytes(b []byte) Value { return BytesString(string(b)) }

// BytesString returns a VARBINARY value holding the bytes of s, without
// copying.
func BytesString(s string) Value {
	v := String(s)
	v.kind = KindVarBinary
	return v
}

// Date returns a DATE, given as days since 1970-01-01.
func Date(days int64) Value { return Value{kind: KindDate, n: uint64(days)} }

// Time returns a TIME(precision), given as nanoseconds of the day.
func Time(nanoOfDay int64, precision int) Value {
	return Value{kind: KindTime, n: uint64(nanoOfDay), prec: uint8(precision)}
}

// Timestamp returns a TIMESTAMP(precision) (a date-time without time zone)
// from milliseconds since 1970-01-01 00:00:00 and nanoseconds within the
// millisecond (0..999999).
func Timestamp(millis int64, nanoOfMilli int32, precision int) Value {
	return Value{kind: KindTimestamp, n: uint64(millis), aux: uint32(nanoOfMilli), prec: uint8(precision)}
}

// TimestampLTZ returns a TIMESTAMP_LTZ(precision) (an instant) from
// milliseconds since the epoch and nanoseconds within the millisecond.
func TimestampLTZ(millis int64, nanoOfMilli int32, precision int) Value {
	return Value{kind: KindTimestampLTZ, n: uint64(millis), aux: uint32(nanoOfMilli), prec: uint8(precision)}
}

// TimestampFromTime returns a TIMESTAMP(precision) holding t's wall clock
// reading (t's location is dropped), truncated to the precision.
func TimestampFromTime(t time.Time, precision int) Value {
	sec := t.Unix()
	_, off := t.Zone()
	sec += int64(off)
	ns := truncNanos(int64(t.Nanosecond()), precision)
	return Timestamp(sec*1000+ns/1e6, int32(ns%1e6), precision)
}

// TimestampLTZFromTime returns the instant t as TIMESTAMP_LTZ(precision).
func TimestampLTZFromTime(t time.Time, precision int) Value {
	ns := truncNanos(int64(t.Nanosecond()), precision)
	return TimestampLTZ(t.Unix()*1000+ns/1e6, int32(ns%1e6), precision)
}

// truncNanos truncates nanoseconds of a second to precision digits.
func truncNanos(ns int64, precision int) int64 {
	if precision >= 9 || precision < 0 {
		return ns
	}
	d := pow10[9-precision]
	return ns / d * d
}

// IntervalMillis returns an INTERVAL DAY TO SECOND of ms milliseconds.
func IntervalMillis(ms int64) Value { return Value{kind: KindIntervalDayTime, n: uint64(ms), prec: 3} }

// IntervalMonths returns an INTERVAL YEAR TO MONTH of m months.
func IntervalMonths(m int64) Value { return Value{kind: KindIntervalYearMonth, n: uint64(m)} }

// Array returns an ARRAY holding elems (not copied).
func Array(elems []Value) Value { return Value{kind: KindArray, p: unsafe.Pointer(&elems)} }

// Multiset returns a MULTISET holding elems (not copied), one element per
// occurrence.
func Multiset(elems []Value) Value { return Value{kind: KindMultiset, p: unsafe.Pointer(&elems)} }

// RowValue returns a ROW holding fields (not copied).
func RowValue(fields []Value) Value { return Value{kind: KindRow, p: unsafe.Pointer(&fields)} }

// Map returns a MAP; keys[i] maps to values[i]. The slices are not copied.
func Map(keys, values []Value) Value {
	return Value{kind: KindMap, p: unsafe.Pointer(&MapValue{Keys: keys, Values: values})}
}

// IsNull reports whether v is NULL. The zero Value is NULL.
func (v Value) IsNull() bool { return v.flags&flagNull != 0 || v.kind == KindNull }

// Kind returns the kind v was made as (KindNull for the untyped Null).
func (v Value) Kind() Kind { return v.kind }

// Bool returns a BOOLEAN's value.
func (v Value) Bool() bool { return v.n != 0 }

// Int64 returns the integer payload of TINYINT..BIGINT, DATE, TIME,
// intervals and the epoch milliseconds of timestamps.
func (v Value) Int64() int64 { return int64(v.n) }

// Float64 returns a FLOAT or DOUBLE's value.
func (v Value) Float64() float64 { return math.Float64frombits(v.n) }

// Str returns the text of CHAR and VARCHAR values (and the bytes of
// BINARY and VARBINARY as a string), without copying.
func (v Value) Str() string {
	if v.p == nil || !(v.kind.IsString() || v.kind.IsBinary()) {
		return ""
	}
	return unsafe.String((*byte)(v.p), int(v.n))
}

// Bytes returns a copy of a BINARY or VARBINARY value's bytes.
func (v Value) Bytes() []byte { return []byte(v.Str()) }

// Precision returns the precision of a DECIMAL, or the fractional-seconds
// precision of TIME and timestamps.
func (v Value) Precision() int { return int(v.prec) }

// Scale returns the scale of a DECIMAL.
func (v Value) Scale() int { return int(v.scale) }

// IsCompact reports whether a DECIMAL's unscaled value is held as an int64
// (Unscaled); otherwise BigUnscaled holds it.
func (v Value) IsCompact() bool { return v.flags&flagBig == 0 }

// Unscaled returns a compact DECIMAL's unscaled value.
func (v Value) Unscaled() int64 { return int64(v.n) }

// BigUnscaled returns a DECIMAL's unscaled value as a new big.Int.
func (v Value) BigUnscaled() *big.Int {
	if v.flags&flagBig != 0 {
		return new(big.Int).Set((*big.Int)(v.p))
	}
	return big.NewInt(int64(v.n))
}

// bigRef returns the big unscaled value without a copy (read only).
func (v Value) bigRef() *big.Int {
	if v.flags&flagBig != 0 {
		return (*big.Int)(v.p)
	}
	return big.NewInt(int64(v.n))
}

// EpochMillis returns a timestamp's milliseconds since the epoch.
func (v Value) EpochMillis() int64 { return int64(v.n) }

// NanoOfMilli returns a timestamp's nanoseconds within the millisecond.
func (v Value) NanoOfMilli() int32 { return int32(v.aux) }

// Time returns a timestamp as a time.Time in UTC (for TIMESTAMP, its wall
// clock reading as if it were UTC).
func (v Value) Time() time.Time {
	ms := int64(v.n)
	sec, msr := floorDiv(ms, 1000)
	return time.Unix(sec, msr*1e6+int64(v.aux)).UTC()
}

// Elems returns the elements of an ARRAY or MULTISET, or the fields of a
// ROW. The caller must not modify them.
func (v Value) Elems() []Value {
	if v.p == nil || !(v.kind == KindArray || v.kind == KindMultiset || v.kind == KindRow) {
		return nil
	}
	return *(*[]Value)(v.p)
}

// MapEntries returns a MAP's keys and values. The caller must not modify
// them.
func (v Value) MapEntries() *MapValue {
	if v.p == nil || v.kind != KindMap {
		return &MapValue{}
	}
	return (*MapValue)(v.p)
}

// floorDiv returns the floor of a/b and the non-negative remainder.
func floorDiv(a, b int64) (int64, int64) {
	q, r := a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

var pow10 = [...]int64{1, 10, 100, 1000, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
	1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// Pow10 returns 10^n for 0 <= n <= 18.
func Pow10(n int) int64 { return pow10[n] }
