package types

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
)

// Kind is the root of a SQL type, and the tag of a Value.
type Kind uint8

// The kinds. Their order is part of the Row codec: append only.
const (
	// KindNull is the type of the untyped NULL literal (and the kind of
	// the Null value).
	KindNull Kind = iota
	KindBoolean
	KindTinyInt
	KindSmallInt
	KindInt
	KindBigInt
	KindFloat
	KindDouble
	KindDecimal
	KindChar
	KindVarChar
	KindBinary
	KindVarBinary
	KindDate
	KindTime
	KindTimestamp
	KindTimestampLTZ
	// KindIntervalDayTime is INTERVAL DAY TO SECOND and its sub-ranges; a
	// value is a number of milliseconds, as in Flink.
	KindIntervalDayTime
	// KindIntervalYearMonth is INTERVAL YEAR TO MONTH and its sub-ranges; a
	// value is a number of months.
	KindIntervalYearMonth
	KindArray
	KindMultiset
	KindMap
	KindRow
	numKinds
)

var kindNames = [...]string{
	KindNull: "NULL", KindBoolean: "BOOLEAN", KindTinyInt: "TINYINT", KindSmallInt: "SMALLINT",
	KindInt: "INT", KindBigInt: "BIGINT", KindFloat: "FLOAT", KindDouble: "DOUBLE",
	KindDecimal: "DECIMAL", KindChar: "CHAR", KindVarChar: "VARCHAR", KindBinary: "BINARY",
	KindVarBinary: "VARBINARY", KindDate: "DATE", KindTime: "TIME", KindTimestamp: "TIMESTAMP",
	KindTimestampLTZ: "TIMESTAMP_LTZ", KindIntervalDayTime: "INTERVAL DAY TO SECOND",
	KindIntervalYearMonth: "INTERVAL YEAR TO MONTH", KindArray: "ARRAY", KindMultiset: "MULTISET",
	KindMap: "MAP", KindRow: "ROW",
}

// String returns the SQL name of the kind.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// IsInteger reports TINYINT, SMALLINT, INT and BIGINT.
func (k Kind) IsInteger() bool { return k >= KindTinyInt && k <= KindBigInt }

// IsNumeric reports the integer kinds, FLOAT, DOUBLE and DECIMAL.
func (k Kind) IsNumeric() bool { return k >= KindTinyInt && k <= KindDecimal }

// IsApprox reports FLOAT and DOUBLE.
func (k Kind) IsApprox() bool { return k == KindFloat || k == KindDouble }

// IsString reports CHAR and VARCHAR.
func (k Kind) IsString() bool { return k == KindChar || k == KindVarChar }

// IsBinary reports BINARY and VARBINARY.
func (k Kind) IsBinary() bool { return k == KindBinary || k == KindVarBinary }

// IsTimestamp reports TIMESTAMP and TIMESTAMP_LTZ.
func (k Kind) IsTimestamp() bool { return k == KindTimestamp || k == KindTimestampLTZ }

// IsTemporal reports DATE, TIME, TIMESTAMP and TIMESTAMP_LTZ.
func (k Kind) IsTemporal() bool { return k >= KindDate && k <= KindTimestampLTZ }

// IsInterval reports both interval kinds.
func (k Kind) IsInterval() bool { return k == KindIntervalDayTime || k == KindIntervalYearMonth }

// Limits of Flink's types.
const (
	// MaxLength is the largest length of CHAR, VARCHAR, BINARY and
	// VARBINARY; VARCHAR(MaxLength) is STRING and VARBINARY(MaxLength) is
	// BYTES.
	MaxLength = 2147483647
	// MaxDecimalPrecision is the largest precision of DECIMAL.
	MaxDecimalPrecision = 38
	// MaxTimePrecision is the largest fractional-seconds precision of TIME
	// and the timestamps.
	MaxTimePrecision = 9
	// MaxCompactDecimalPrecision is the largest DECIMAL precision whose
	// every value fits an int64 unscaled value.
	MaxCompactDecimalPrecision = 18
)

// Type is a SQL data type. The zero value is the nullable NULL type.
//
// Length/precision/scale: CHAR, VARCHAR, BINARY and VARBINARY keep their
// length in Length; DECIMAL keeps Precision and Scale; TIME, TIMESTAMP and
// TIMESTAMP_LTZ keep their fractional-seconds precision in Precision.
type Type struct {
	Kind Kind
	// NotNull marks a type declared NOT NULL.
	NotNull   bool
	Length    int
	Precision int
	Scale     int
	// Elem is the element type of ARRAY and MULTISET.
	Elem *Type
	// Key and Value are the types of MAP.
	Key, Value *Type
	// Fields are the fields of ROW.
	Fields []Field
}

// Field is a named field of a ROW type.
type Field struct {
	Name string
	Type Type
}

// Nullable types without parameters, for convenience.
var (
	BooleanType  = Type{Kind: KindBoolean}
	TinyIntType  = Type{Kind: KindTinyInt}
	SmallIntType = Type{Kind: KindSmallInt}
	IntType      = Type{Kind: KindInt}
	BigIntType   = Type{Kind: KindBigInt}
	FloatType    = Type{Kind: KindFloat}
	DoubleType   = Type{Kind: KindDouble}
	// StringType is STRING, that is VARCHAR(2147483647).
	StringType = Type{Kind: KindVarChar, Length: MaxLength}
	// BytesType is BYTES, that is VARBINARY(2147483647).
	BytesType = Type{Kind: KindVarBinary, Length: MaxLength}
	DateType  = Type{Kind: KindDate}
	// NullType is the type of the NULL literal.
	NullType = Type{Kind: KindNull}
)

// DecimalOf returns DECIMAL(precision, scale).
func DecimalOf(precision, scale int) Type {
	return Type{Kind: KindDecimal, Precision: precision, Scale: scale}
}

// VarCharOf returns VARCHAR(n).
func VarCharOf(n int) Type { return Type{Kind: KindVarChar, Length: n} }

// CharOf returns CHAR(n).
func CharOf(n int) Type { return Type{Kind: KindChar, Length: n} }

// TimestampOf returns TIMESTAMP(p).
func TimestampOf(p int) Type { return Type{Kind: KindTimestamp, Precision: p} }

// TimestampLTZOf returns TIMESTAMP_LTZ(p).
func TimestampLTZOf(p int) Type { return Type{Kind: KindTimestampLTZ, Precision: p} }

// TimeOf returns TIME(p).
func TimeOf(p int) Type { return Type{Kind: KindTime, Precision: p} }

// ArrayOf returns ARRAY<elem>.
func ArrayOf(elem Type) Type { return Type{Kind: KindArray, Elem: &elem} }

// MapOf returns MAP<key, value>.
func MapOf(key, value Type) Type { return Type{Kind: KindMap, Key: &key, Value: &value} }

// RowOf returns ROW<fields>.
func RowOf(fields ...Field) Type { return Type{Kind: KindRow, Fields: fields} }

// WithNotNull returns t with NotNull set to notNull.
func (t Type) WithNotNull(notNull bool) Type { t.NotNull = notNull; return t }

// Nullable reports whether the type admits NULL.
func (t Type) Nullable() bool { return !t.NotNull }

// Equal reports whether t and u are the same type, nullability included.
func (t Type) Equal(u Type) bool {
	if t.Kind != u.Kind || t.NotNull != u.NotNull || t.Length != u.Length ||
		t.Precision != u.Precision || t.Scale != u.Scale || len(t.Fields) != len(u.Fields) {
		return false
	}
	if !ptrEqual(t.Elem, u.Elem) || !ptrEqual(t.Key, u.Key) || !ptrEqual(t.Value, u.Value) {
		return false
	}
	for i := range t.Fields {
		if t.Fields[i].Name != u.Fields[i].Name || !t.Fields[i].Type.Equal(u.Fields[i].Type) {
			return false
		}
	}
	return true
}

func ptrEqual(a, b *Type) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// String prints the type as Flink does: `BIGINT NOT NULL`, `DECIMAL(10, 2)`,
// `TIMESTAMP(3)`, `STRING` for VARCHAR(2147483647), `BYTES` for
// VARBINARY(2147483647), `ROW<`a` INT, `b` STRING>`.
func (t Type) String() string {
	var b strings.Builder
	t.write(&b)
	return b.String()
}

func (t Type) write(b *strings.Builder) {
	switch t.Kind {
	case KindChar, KindBinary:
		fmt.Fprintf(b, "%s(%d)", t.Kind, t.Length)
	case KindVarChar:
		if t.Length == MaxLength {
			b.WriteString("STRING")
		} else {
			fmt.Fprintf(b, "VARCHAR(%d)", t.Length)
		}
	case KindVarBinary:
		if t.Length == MaxLength {
			b.WriteString("BYTES")
		} else {
			fmt.Fprintf(b, "VARBINARY(%d)", t.Length)
		}
	case KindDecimal:
		fmt.Fprintf(b, "DECIMAL(%d, %d)", t.Precision, t.Scale)
	case KindTime, KindTimestamp, KindTimestampLTZ:
		fmt.Fprintf(b, "%s(%d)", t.Kind, t.Precision)
	case KindArray, KindMultiset:
		b.WriteString(t.Kind.String())
		b.WriteByte('<')
		t.Elem.write(b)
		b.WriteByte('>')
	case KindMap:
		b.WriteString("MAP<")
		t.Key.write(b)
		b.WriteString(", ")
		t.Value.write(b)
		b.WriteByte('>')
	case KindRow:
		b.WriteString("ROW<")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("`" + strings.ReplaceAll(f.Name, "`", "``") + "` ")
			f.Type.write(b)
		}
		b.WriteByte('>')
	default:
		b.WriteString(t.Kind.String())
	}
	if t.NotNull {
		b.WriteString(" NOT NULL")
	}
}

// Error is an error about a type at a place in the SQL source.
type Error struct {
	Pos ast.Pos
	Msg string
}

// Error returns the message followed by the position.
func (e *Error) Error() string {
	if e.Pos.IsValid() {
		return e.Msg + " at " + e.Pos.String()
	}
	return e.Msg
}

func errorf(pos ast.Pos, format string, args ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// FromAST converts a data type as written to a Type, applying Flink's
// defaults (DECIMAL is DECIMAL(10, 0), CHAR is CHAR(1), VARCHAR is
// VARCHAR(1), TIMESTAMP is TIMESTAMP(6), TIME is TIME(0)) and checking the
// parameters' ranges.
func FromAST(dt *ast.DataType) (Type, error) {
	if dt == nil {
		return Type{}, errorf(ast.Pos{}, "missing data type")
	}
	t := Type{NotNull: dt.NotNull}
	param := func(i, def int) int {
		if i < len(dt.Params) {
			return dt.Params[i]
		}
		return def
	}
	maxParams := 0
	switch dt.Name {
	case "BOOLEAN":
		t.Kind = KindBoolean
	case "TINYINT":
		t.Kind = KindTinyInt
	case "SMALLINT":
		t.Kind = KindSmallInt
	case "INT":
		t.Kind = KindInt
	case "BIGINT":
		t.Kind = KindBigInt
	case "FLOAT":
		t.Kind = KindFloat
	case "DOUBLE":
		t.Kind = KindDouble
	case "DATE":
		t.Kind = KindDate
	case "STRING":
		t.Kind, t.Length = KindVarChar, MaxLength
	case "BYTES":
		t.Kind, t.Length = KindVarBinary, MaxLength
	case "DECIMAL":
		maxParams = 2
		t.Kind, t.Precision, t.Scale = KindDecimal, param(0, 10), param(1, 0)
		if t.Precision < 1 || t.Precision > MaxDecimalPrecision {
			return Type{}, errorf(dt.Pos, "DECIMAL precision must be between 1 and %d (both inclusive), not %d", MaxDecimalPrecision, t.Precision)
		}
		if t.Scale < 0 || t.Scale > t.Precision {
			return Type{}, errorf(dt.Pos, "DECIMAL scale must be between 0 and the precision %d (both inclusive), not %d", t.Precision, t.Scale)
		}
	case "CHAR", "VARCHAR", "BINARY", "VARBINARY":
		maxParams = 1
		t.Kind = map[string]Kind{"CHAR": KindChar, "VARCHAR": KindVarChar, "BINARY": KindBinary, "VARBINARY": KindVarBinary}[dt.Name]
		t.Length = param(0, 1)
		if t.Length < 1 {
			return Type{}, errorf(dt.Pos, "%s length must be between 1 and %d (both inclusive), not %d", dt.Name, MaxLength, t.Length)
		}
	case "TIME", "TIMESTAMP", "TIMESTAMP_LTZ":
		maxParams = 1
		t.Kind = map[string]Kind{"TIME": KindTime, "TIMESTAMP": KindTimestamp, "TIMESTAMP_LTZ": KindTimestampLTZ}[dt.Name]
		def := 6
		if dt.Name == "TIME" {
			def = 0
		}
		t.Precision = param(0, def)
		if t.Precision < 0 || t.Precision > MaxTimePrecision {
			return Type{}, errorf(dt.Pos, "%s precision must be between 0 and %d (both inclusive), not %d", dt.Name, MaxTimePrecision, t.Precision)
		}
	case "INTERVAL":
		q := dt.Interval
		if q == nil {
			return Type{}, errorf(dt.Pos, "INTERVAL needs a qualifier")
		}
		switch q.Start {
		case "YEAR", "MONTH":
			t.Kind = KindIntervalYearMonth
		case "DAY", "HOUR", "MINUTE", "SECOND":
			t.Kind = KindIntervalDayTime
			t.Precision = 3
		default:
			return Type{}, errorf(dt.Pos, "unsupported interval qualifier %s", q.Start)
		}
	case "ARRAY", "MULTISET":
		elem, err := FromAST(dt.Elem)
		if err != nil {
			return Type{}, err
		}
		t.Kind, t.Elem = KindArray, &elem
		if dt.Name == "MULTISET" {
			t.Kind = KindMultiset
		}
	case "MAP":
		k, err := FromAST(dt.Key)
		if err != nil {
			return Type{}, err
		}
		v, err := FromAST(dt.Value)
		if err != nil {
			return Type{}, err
		}
		t.Kind, t.Key, t.Value = KindMap, &k, &v
	case "ROW":
		t.Kind = KindRow
		seen := map[string]bool{}
		for _, f := range dt.Fields {
			if seen[f.Name] {
				return Type{}, errorf(f.Pos, "duplicate field name %s in ROW type", strconv.Quote(f.Name))
			}
			seen[f.Name] = true
			ft, err := FromAST(f.Type)
			if err != nil {
				return Type{}, err
			}
			t.Fields = append(t.Fields, Field{Name: f.Name, Type: ft})
		}
	default:
		return Type{}, errorf(dt.Pos, "unsupported data type %s", dt.Name)
	}
	if len(dt.Params) > maxParams {
		return Type{}, errorf(dt.Pos, "%s takes at most %d parameters, got %d", dt.Name, maxParams, len(dt.Params))
	}
	return t, nil
}
