package types

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
	"unsafe"

	"github.com/clinkstream/clink/connector/changelog"
)

// Row is a changelog row of a SQL operator: its change kind and its
// values, one per column.
type Row struct {
	Kind   changelog.RowKind
	Values []Value
}

// String formats the row as Flink's print connector does: `+I[1, abc]`.
func (r Row) String() string {
	b := []byte(r.Kind.String())
	b = append(b, '[')
	for i, v := range r.Values {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = v.AppendFormat(b, time.UTC)
	}
	return string(append(b, ']'))
}

// The codec. A row is its kind byte, the number of values (uvarint) and the
// values. A value is a tag byte (its Kind, with tagNull set for NULL) and
// a payload by kind:
//
//	BOOLEAN                      1 byte, 0 or 1
//	TINYINT..BIGINT, DATE,
//	  intervals                  zig-zag varint
//	TIME                         precision byte, varint nanos of day
//	FLOAT, DOUBLE                8 bytes little-endian float64 bits
//	DECIMAL                      precision, scale, then 0 + varint unscaled
//	                             or 1 + sign byte + uvarint length + magnitude
//	CHAR..VARBINARY              uvarint length + bytes
//	TIMESTAMP, TIMESTAMP_LTZ     precision, varint millis, uvarint nanos of milli
//	ARRAY, MULTISET, ROW         uvarint count + values
//	MAP                          uvarint count + key, value pairs
//
// Encoding is deterministic, so it doubles as the key encoding (AppendKey).

const (
	tagNull  = 0x80
	maxDepth = 64
)

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("corrupt encoded row")

// AppendBinary appends the row's encoding to b.
func (r Row) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, byte(r.Kind))
	b = binary.AppendUvarint(b, uint64(len(r.Values)))
	for _, v := range r.Values {
		b = appendValue(b, v)
	}
	return b, nil
}

// MarshalBinary returns the row's encoding.
func (r Row) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// UnmarshalBinary decodes a row encoded by MarshalBinary. String values
// share one copy of data.
func (r *Row) UnmarshalBinary(data []byte) error {
	d := decoder{src: string(data)}
	row, err := d.row()
	if err != nil {
		return err
	}
	if d.off != len(d.src) {
		return fmt.Errorf("%w: %d bytes after the row", ErrCorrupt, len(d.src)-d.off)
	}
	*r = row
	return nil
}

// DecodeRow decodes one row from the front of src and returns it with the
// number of bytes read.
func DecodeRow(src []byte) (Row, int, error) {
	d := decoder{src: string(src)}
	row, err := d.row()
	return row, d.off, err
}

// CheckRow checks that src begins with a row's encoding, as DecodeRow
// does, and returns its length; it keeps nothing of the row, so src is
// read where it is instead of copied first (a restore checks every row of
// a state this way).
func CheckRow(src []byte) (int, error) {
	d := decoder{src: unsafe.String(unsafe.SliceData(src), len(src))}
	err := d.skipRow()
	return d.off, err
}

// AppendBinary appends the value's encoding to b.
func (v Value) AppendBinary(b []byte) ([]byte, error) { return appendValue(b, v), nil }

// MarshalBinary returns the value's encoding.
func (v Value) MarshalBinary() ([]byte, error) { return appendValue(nil, v), nil }

// UnmarshalBinary decodes a value encoded by MarshalBinary.
func (v *Value) UnmarshalBinary(data []byte) error {
	d := decoder{src: string(data)}
	x, err := d.value(0)
	if err != nil {
		return err
	}
	if d.off != len(d.src) {
		return fmt.Errorf("%w: %d bytes after the value", ErrCorrupt, len(d.src)-d.off)
	}
	*v = x
	return nil
}

func appendValue(b []byte, v Value) []byte {
	if v.IsNull() {
		return append(b, byte(v.kind)|tagNull)
	}
	b = append(b, byte(v.kind))
	switch v.kind {
	case KindBoolean:
		return append(b, byte(v.n&1))
	case KindTinyInt, KindSmallInt, KindInt, KindBigInt, KindDate, KindIntervalDayTime, KindIntervalYearMonth:
		return binary.AppendVarint(b, v.Int64())
	case KindTime:
		b = append(b, v.prec)
		return binary.AppendVarint(b, v.Int64())
	case KindFloat, KindDouble:
		return binary.LittleEndian.AppendUint64(b, v.n)
	case KindDecimal:
		b = append(b, v.prec, v.scale)
		if v.IsCompact() {
			b = append(b, 0)
			return binary.AppendVarint(b, v.Unscaled())
		}
		u := (*big.Int)(v.p)
		b = append(b, 1)
		if u.Sign() < 0 {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		mag := u.Bytes()
		b = binary.AppendUvarint(b, uint64(len(mag)))
		return append(b, mag...)
	case KindChar, KindVarChar, KindBinary, KindVarBinary:
		b = binary.AppendUvarint(b, v.n)
		return append(b, v.Str()...)
	case KindTimestamp, KindTimestampLTZ:
		b = append(b, v.prec)
		b = binary.AppendVarint(b, v.EpochMillis())
		return binary.AppendUvarint(b, uint64(v.aux))
	case KindArray, KindMultiset, KindRow:
		es := v.Elems()
		b = binary.AppendUvarint(b, uint64(len(es)))
		for _, e := range es {
			b = appendValue(b, e)
		}
		return b
	case KindMap:
		m := v.MapEntries()
		b = binary.AppendUvarint(b, uint64(len(m.Keys)))
		for i := range m.Keys {
			b = appendValue(b, m.Keys[i])
			b = appendValue(b, m.Values[i])
		}
		return b
	}
	return b
}

type decoder struct {
	src string
	off int
}

func (d *decoder) fail(what string) error {
	return fmt.Errorf("%w: bad %s at byte %d", ErrCorrupt, what, d.off)
}

func (d *decoder) byte(what string) (byte, error) {
	if d.off >= len(d.src) {
		return 0, d.fail(what)
	}
	c := d.src[d.off]
	d.off++
	return c, nil
}

func (d *decoder) uvarint(what string) (uint64, error) {
	var x uint64
	var s uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if d.off >= len(d.src) {
			return 0, d.fail(what)
		}
		c := d.src[d.off]
		d.off++
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, d.fail(what)
			}
			return x | uint64(c)<<s, nil
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, d.fail(what)
}

func (d *decoder) varint(what string) (int64, error) {
	u, err := d.uvarint(what)
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x, err
}

// count reads a length and checks that at least min*n bytes remain, so a
// corrupt length cannot make the decoder allocate much.
func (d *decoder) count(what string, min int) (int, error) {
	n, err := d.uvarint(what)
	if err != nil {
		return 0, err
	}
	if n > uint64(len(d.src)-d.off)/uint64(min) {
		return 0, d.fail(what)
	}
	return int(n), nil
}

func (d *decoder) row() (Row, error) {
	k, n, err := d.rowHeader()
	if err != nil {
		return Row{}, err
	}
	r := Row{Kind: k, Values: make([]Value, n)}
	for i := range r.Values {
		if r.Values[i], err = d.value(0); err != nil {
			return Row{}, err
		}
	}
	return r, nil
}

// rowHeader reads a row's kind and column count.
func (d *decoder) rowHeader() (changelog.RowKind, int, error) {
	k, err := d.byte("row kind")
	if err != nil {
		return 0, 0, err
	}
	if k > byte(changelog.Delete) {
		d.off--
		return 0, 0, d.fail("row kind")
	}
	n, err := d.count("column count", 1)
	if err != nil {
		return 0, 0, err
	}
	return changelog.RowKind(k), n, nil
}

// skipRow reads a row as row does, keeping none of its values.
func (d *decoder) skipRow() error {
	_, n, err := d.rowHeader()
	for range n {
		if err != nil {
			break
		}
		_, err = d.value(0)
	}
	return err
}

func (d *decoder) value(depth int) (Value, error) {
	tag, err := d.byte("value tag")
	if err != nil {
		return Value{}, err
	}
	k := Kind(tag &^ tagNull)
	if k >= numKinds {
		d.off--
		return Value{}, d.fail("value tag")
	}
	if tag&tagNull != 0 {
		return NullOf(k), nil
	}
	v := Value{kind: k}
	switch k {
	case KindNull:
		return Value{}, d.fail("non-null NULL")
	case KindBoolean:
		c, err := d.byte("boolean")
		if err != nil || c > 1 {
			return Value{}, d.fail("boolean")
		}
		v.n = uint64(c)
	case KindTinyInt, KindSmallInt, KindInt, KindBigInt, KindDate, KindIntervalDayTime, KindIntervalYearMonth:
		x, err := d.varint(k.String())
		if err != nil {
			return Value{}, err
		}
		if IntOf(k, x).Int64() != x && k.IsInteger() {
			return Value{}, d.fail(k.String())
		}
		v.n = uint64(x)
		if k == KindIntervalDayTime {
			v.prec = 3
		}
	case KindTime:
		p, err := d.byte("time precision")
		if err != nil || p > MaxTimePrecision {
			return Value{}, d.fail("time precision")
		}
		x, err := d.varint("time")
		if err != nil || x < 0 || x >= nanosPerDay {
			return Value{}, d.fail("time")
		}
		v.prec, v.n = p, uint64(x)
	case KindFloat, KindDouble:
		if len(d.src)-d.off < 8 {
			return Value{}, d.fail("float")
		}
		v.n = binary.LittleEndian.Uint64([]byte(d.src[d.off : d.off+8]))
		d.off += 8
		if k == KindFloat {
			v.n = math.Float64bits(float64(float32(math.Float64frombits(v.n))))
		}
	case KindDecimal:
		return d.decimal()
	case KindChar, KindVarChar, KindBinary, KindVarBinary:
		n, err := d.count("string length", 1)
		if err != nil {
			return Value{}, err
		}
		s := d.src[d.off : d.off+n]
		d.off += n
		v.p, v.n = unsafe.Pointer(unsafe.StringData(s)), uint64(n)
	case KindTimestamp, KindTimestampLTZ:
		p, err := d.byte("timestamp precision")
		if err != nil || p > MaxTimePrecision {
			return Value{}, d.fail("timestamp precision")
		}
		ms, err := d.varint("timestamp")
		if err != nil {
			return Value{}, err
		}
		ns, err := d.uvarint("timestamp nanos")
		if err != nil || ns >= 1e6 {
			return Value{}, d.fail("timestamp nanos")
		}
		v.prec, v.n, v.aux = p, uint64(ms), uint32(ns)
	case KindArray, KindMultiset, KindRow, KindMap:
		if depth >= maxDepth {
			return Value{}, d.fail("nesting depth")
		}
		per := 1
		if k == KindMap {
			per = 2
		}
		n, err := d.count("element count", per)
		if err != nil {
			return Value{}, err
		}
		es := make([]Value, n*per)
		for i := range es {
			if es[i], err = d.value(depth + 1); err != nil {
				return Value{}, err
			}
		}
		if k == KindMap {
			keys, vals := make([]Value, n), make([]Value, n)
			for i := 0; i < n; i++ {
				keys[i], vals[i] = es[2*i], es[2*i+1]
			}
			return Map(keys, vals), nil
		}
		v.p = unsafe.Pointer(&es)
	}
	return v, nil
}

func (d *decoder) decimal() (Value, error) {
	p, err1 := d.byte("decimal precision")
	s, err2 := d.byte("decimal scale")
	form, err3 := d.byte("decimal form")
	if err := errors.Join(err1, err2, err3); err != nil || p < 1 || p > MaxDecimalPrecision || s > p || form > 1 {
		return Value{}, d.fail("decimal header")
	}
	if form == 0 {
		u, err := d.varint("decimal")
		if err != nil || !fitsPrecision(u, int(p)) {
			return Value{}, d.fail("decimal")
		}
		return Decimal(u, int(p), int(s)), nil
	}
	sign, err := d.byte("decimal sign")
	if err != nil || sign > 1 {
		return Value{}, d.fail("decimal sign")
	}
	n, err := d.count("decimal length", 1)
	if err != nil || n > 17 {
		return Value{}, d.fail("decimal length")
	}
	u := new(big.Int).SetBytes([]byte(d.src[d.off : d.off+n]))
	d.off += n
	if sign == 1 {
		u.Neg(u)
	}
	if u.IsInt64() || !bigFitsPrecision(u, int(p)) {
		return Value{}, d.fail("decimal magnitude")
	}
	return DecimalBig(u, int(p), int(s)), nil
}

// RowString formats values as a print sink would, without the kind:
// `[1, abc]`.
func RowString(values []Value) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.Write(v.AppendFormat(nil, time.UTC))
	}
	b.WriteByte(']')
	return b.String()
}

// DecodeValue decodes one value from the front of src (as written by
// AppendKey or Value.AppendBinary) and returns it with the number of bytes
// read. Strings in it share one copy of src.
func DecodeValue(src []byte) (Value, int, error) {
	d := decoder{src: string(src)}
	v, err := d.value(0)
	return v, d.off, err
}

// DecodeKeyValue decodes one value from the front of a key built with
// AppendKey and held as a string, as DecodeValue does but without copying
// it: strings in the value share key.
func DecodeKeyValue(key string) (Value, int, error) {
	d := decoder{src: key}
	v, err := d.value(0)
	return v, d.off, err
}

// AppendValues appends the encodings of vs to b, one after the other
// (AppendKey's encoding), without a kind or a count: the compact form of
// a row for a reader that knows how many columns it has.
func AppendValues(b []byte, vs []Value) []byte {
	for _, v := range vs {
		b = appendValue(b, v)
	}
	return b
}

// DecodeColumnsInto decodes, of the values written by AppendValues at the
// front of src, those at the indexes cols lists (ascending, each at most
// once) into dst at the same indexes, and passes over the encodings of
// the others before the last of them without decoding them: a comparison
// by a few columns of a wide stored row reads those alone (the values it
// passes over are checked for their lengths only). Strings share src's
// bytes as in DecodeValuesInto.
func DecodeColumnsInto(dst []Value, cols []int, src string) error {
	d := decoder{src: src}
	at := 0
	for _, c := range cols {
		for ; at < c; at++ {
			if err := d.skip(); err != nil {
				return err
			}
		}
		v, err := d.value(0)
		if err != nil {
			return err
		}
		dst[c] = v
		at++
	}
	return nil
}

// skip reads past one value, as value does, without building it: the
// kinds of fixed layout are passed over, the others decoded.
func (d *decoder) skip() error {
	tag, err := d.byte("value tag")
	if err != nil {
		return err
	}
	k := Kind(tag &^ tagNull)
	if k >= numKinds || tag&tagNull != 0 {
		d.off--
		_, err := d.value(0)
		return err
	}
	switch k {
	case KindTinyInt, KindSmallInt, KindInt, KindBigInt, KindDate, KindIntervalDayTime, KindIntervalYearMonth:
		_, err = d.uvarint(k.String())
	case KindChar, KindVarChar, KindBinary, KindVarBinary:
		var n int
		if n, err = d.count("string length", 1); err == nil {
			d.off += n
		}
	case KindTimestamp, KindTimestampLTZ:
		if _, err = d.byte("timestamp precision"); err == nil {
			if _, err = d.uvarint("timestamp"); err == nil {
				_, err = d.uvarint("timestamp nanos")
			}
		}
	default:
		d.off--
		_, err = d.value(0)
	}
	return err
}

// DecodeValuesInto decodes len(dst) values written by AppendValues from
// the front of src into dst and returns the number of bytes read. String
// and binary values share src's bytes rather than copying them, so src
// must not change while they are in use.
func DecodeValuesInto(dst []Value, src string) (int, error) {
	d := decoder{src: src}
	for i := range dst {
		v, err := d.value(0)
		if err != nil {
			return 0, err
		}
		dst[i] = v
	}
	return d.off, nil
}
