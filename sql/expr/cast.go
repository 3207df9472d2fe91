package expr

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/types"
)

// convFn converts a non-NULL value; it returns Null where Flink's cast
// yields NULL (a DECIMAL that does not fit), and an error where CAST fails
// (TRY_CAST turns those into NULL).
type convFn func(v types.Value) (types.Value, error)

func (c *compiler) cast(e *ast.Cast) (*node, error) {
	x, err := c.expr(e.X)
	if err != nil {
		return nil, err
	}
	t, err := types.FromAST(e.Type)
	if err != nil {
		return nil, err
	}
	return c.castNode(x, t, e.Try, e.Pos)
}

// castNode casts x to t. The result is nullable when x is, when t is
// declared nullable, or for TRY_CAST; a NOT NULL target of a nullable
// input is still nullable at run time here (Flink checks at the sink).
func (c *compiler) castNode(x *node, t types.Type, try bool, pos ast.Pos) (*node, error) {
	conv, err := c.converter(x.typ, t, pos)
	if err != nil {
		return nil, err
	}
	rt := t.WithNotNull(x.typ.NotNull && !try && !castMayNull(x.typ, t))
	xe := x.eval
	var eval evalFn
	if try {
		eval = func(row []types.Value) (types.Value, error) {
			v, err := xe(row)
			if err != nil || v.IsNull() {
				return types.Null, err
			}
			r, err := conv(v)
			if err != nil {
				return types.Null, nil
			}
			return r, nil
		}
	} else {
		eval = func(row []types.Value) (types.Value, error) {
			v, err := xe(row)
			if err != nil || v.IsNull() {
				return types.Null, err
			}
			r, err := conv(v)
			if err != nil {
				return types.Null, &types.Error{Pos: pos, Msg: err.Error()}
			}
			return r, nil
		}
	}
	return derive(rt, pos, eval, x), nil
}

// castMayNull reports casts that yield NULL for some non-NULL inputs.
func castMayNull(from, to types.Type) bool {
	return to.Kind == types.KindDecimal && (from.Kind.IsNumeric() || from.Kind.IsString())
}

var (
	errNotNumber  = errors.New("not a number")
	errNotBoolean = errors.New("not a boolean")
)

func castErr(v types.Value, to types.Type, cause error) error {
	return fmt.Errorf("cannot cast '%s' to %s: %v", v.String(), to.WithNotNull(false), cause)
}

// converter returns the conversion from one type to another, or a
// compile-time error when Flink has no such cast.
func (c *compiler) converter(from, to types.Type, pos ast.Pos) (convFn, error) {
	fk, tk := from.Kind, to.Kind
	loc := c.loc
	unsupported := func(hint string) (convFn, error) {
		return nil, errorf(pos, "cannot cast %s to %s%s", from.WithNotNull(false), to.WithNotNull(false), hint)
	}
	if fk == types.KindNull {
		return func(types.Value) (types.Value, error) { return types.Null, nil }, nil
	}
	switch {
	case tk.IsString():
		return c.toString(from, to), nil
	case tk.IsBinary():
		if fk.IsString() || fk.IsBinary() {
			n := to.Length
			pad := tk == types.KindBinary
			return func(v types.Value) (types.Value, error) {
				s := v.Str()
				if len(s) > n {
					s = s[:n]
				} else if pad && len(s) < n {
					s += strings.Repeat("\x00", n-len(s))
				}
				return types.BytesString(s), nil
			}, nil
		}
	case tk == types.KindBoolean:
		switch {
		case fk == types.KindBoolean:
			return identity, nil
		case fk.IsNumeric():
			return func(v types.Value) (types.Value, error) { return types.Bool(numSign(v) != 0), nil }, nil
		case fk.IsString():
			return func(v types.Value) (types.Value, error) {
				switch strings.ToLower(strings.TrimSpace(v.Str())) {
				case "t", "true", "y", "yes", "1":
					return types.Bool(true), nil
				case "f", "false", "n", "no", "0":
					return types.Bool(false), nil
				}
				return types.Null, castErr(v, to, errNotBoolean)
			}, nil
		}
	case tk.IsInteger():
		switch {
		case fk.IsInteger():
			return func(v types.Value) (types.Value, error) { return types.IntOf(tk, v.Int64()), nil }, nil
		case fk == types.KindBoolean:
			return func(v types.Value) (types.Value, error) { return types.IntOf(tk, int64(v.Int64())), nil }, nil
		case fk.IsApprox():
			return func(v types.Value) (types.Value, error) { return types.IntOf(tk, floatToInt(v.Float64(), tk)), nil }, nil
		case fk == types.KindDecimal:
			return func(v types.Value) (types.Value, error) {
				i, _ := types.DecimalToInt64(v)
				return types.IntOf(tk, i), nil
			}, nil
		case fk.IsString():
			return func(v types.Value) (types.Value, error) {
				i, err := parseIntLenient(v.Str())
				if err == nil && types.IntOf(tk, i).Int64() != i {
					err = types.ErrOverflow
				}
				if err != nil {
					return types.Null, castErr(v, to, err)
				}
				return types.IntOf(tk, i), nil
			}, nil
		case fk == types.KindTimestampLTZ:
			return func(v types.Value) (types.Value, error) {
				s, _ := floorDiv(v.EpochMillis(), 1000)
				return types.IntOf(tk, s), nil
			}, nil
		case fk == types.KindTimestamp:
			return unsupported("; use UNIX_TIMESTAMP(CAST(ts AS STRING)) or cast to TIMESTAMP_LTZ first")
		}
	case tk.IsApprox():
		mk := func(f float64) types.Value {
			if tk == types.KindFloat {
				return types.Float32(float32(f))
			}
			return types.Float64(f)
		}
		switch {
		case fk.IsNumeric() || fk == types.KindBoolean:
			return func(v types.Value) (types.Value, error) { return mk(numToFloat(v)), nil }, nil
		case fk.IsString():
			return func(v types.Value) (types.Value, error) {
				f, err := parseJavaFloat(v.Str())
				if err != nil {
					return types.Null, castErr(v, to, errNotNumber)
				}
				return mk(f), nil
			}, nil
		case fk == types.KindTimestampLTZ:
			return func(v types.Value) (types.Value, error) {
				return mk(float64(v.EpochMillis())/1000 + float64(v.NanoOfMilli())/1e9), nil
			}, nil
		}
	case tk == types.KindDecimal:
		p, s := to.Precision, to.Scale
		switch {
		case fk.IsInteger() || fk == types.KindBoolean:
			return func(v types.Value) (types.Value, error) {
				return okOrNull(types.DecimalFromInt64(v.Int64(), p, s)), nil
			}, nil
		case fk.IsApprox():
			return func(v types.Value) (types.Value, error) {
				return okOrNull(types.DecimalFromFloat64(v.Float64(), p, s)), nil
			}, nil
		case fk == types.KindDecimal:
			return func(v types.Value) (types.Value, error) { return okOrNull(types.RescaleDecimal(v, p, s)), nil }, nil
		case fk.IsString():
			return func(v types.Value) (types.Value, error) {
				d, err := types.ParseDecimal(v.Str(), p, s)
				if errors.Is(err, types.ErrOverflow) {
					return types.Null, nil
				}
				if err != nil {
					return types.Null, castErr(v, to, errNotNumber)
				}
				return d, nil
			}, nil
		}
	case tk == types.KindDate:
		switch {
		case fk == types.KindDate:
			return identity, nil
		case fk.IsString():
			return func(v types.Value) (types.Value, error) {
				d, err := types.ParseDate(v.Str())
				if err != nil {
					// Flink accepts a timestamp text and keeps its date.
					ms, _, err2 := types.ParseTimestamp(v.Str())
					if err2 != nil {
						return types.Null, castErr(v, to, err)
					}
					d, _ = types.SplitMillis(ms)
				}
				return types.Date(d), nil
			}, nil
		case fk.IsTimestamp():
			ltz := fk == types.KindTimestampLTZ
			return func(v types.Value) (types.Value, error) {
				ms := v.EpochMillis()
				if ltz {
					ms = types.InstantToLocalMillis(ms, loc)
				}
				d, _ := types.SplitMillis(ms)
				return types.Date(d), nil
			}, nil
		}
	case tk == types.KindTime:
		p := to.Precision
		switch {
		case fk == types.KindTime:
			return func(v types.Value) (types.Value, error) { return types.Time(truncNanos(v.Int64(), p), p), nil }, nil
		case fk.IsString():
			return func(v types.Value) (types.Value, error) {
				ns, err := types.ParseTime(v.Str())
				if err != nil {
					return types.Null, castErr(v, to, err)
				}
				return types.Time(truncNanos(ns, p), p), nil
			}, nil
		case fk.IsTimestamp():
			ltz := fk == types.KindTimestampLTZ
			return func(v types.Value) (types.Value, error) {
				ms := v.EpochMillis()
				if ltz {
					ms = types.InstantToLocalMillis(ms, loc)
				}
				_, msOfDay := types.SplitMillis(ms)
				return types.Time(truncNanos(msOfDay*1e6+int64(v.NanoOfMilli()), p), p), nil
			}, nil
		}
	case tk.IsTimestamp():
		p := to.Precision
		toLTZ := tk == types.KindTimestampLTZ
		mk := func(ms int64, ns int32) types.Value {
			ms, ns = truncTimestamp(ms, ns, p)
			if toLTZ {
				return types.TimestampLTZ(ms, ns, p)
			}
			return types.Timestamp(ms, ns, p)
		}
		switch {
		case fk.IsTimestamp():
			fromLTZ := fk == types.KindTimestampLTZ
			return func(v types.Value) (types.Value, error) {
				ms := v.EpochMillis()
				switch {
				case fromLTZ && !toLTZ:
					ms = types.InstantToLocalMillis(ms, loc)
				case !fromLTZ && toLTZ:
					ms = types.LocalToInstantMillis(ms, loc)
				}
				return mk(ms, v.NanoOfMilli()), nil
			}, nil
		case fk == types.KindDate:
			return func(v types.Value) (types.Value, error) {
				ms := v.Int64() * 86400000
				if toLTZ {
					ms = types.LocalToInstantMillis(ms, loc)
				}
				return mk(ms, 0), nil
			}, nil
		case fk == types.KindTime:
			return func(v types.Value) (types.Value, error) {
				ms := v.Int64() / 1e6
				if toLTZ {
					ms = types.LocalToInstantMillis(ms, loc)
				}
				return mk(ms, int32(v.Int64()%1e6)), nil
			}, nil
		case fk.IsString():
			return func(v types.Value) (types.Value, error) {
				ms, ns, err := types.ParseTimestamp(v.Str())
				if err != nil {
					return types.Null, castErr(v, to, err)
				}
				if toLTZ {
					ms = types.LocalToInstantMillis(ms, loc)
				}
				return mk(ms, ns), nil
			}, nil
		case fk.IsNumeric() && toLTZ:
			return func(v types.Value) (types.Value, error) {
				if fk.IsInteger() {
					return mk(v.Int64()*1000, 0), nil
				}
				f := numToFloat(v) * 1000
				ms := math.Floor(f)
				return mk(int64(ms), int32((f-ms)*1e6)), nil
			}, nil
		case fk.IsNumeric():
			return unsupported("; use TO_TIMESTAMP_LTZ(epoch, precision) or CAST to TIMESTAMP_LTZ")
		}
	case tk.IsInterval():
		if fk == tk {
			return identity, nil
		}
	case tk == fk && from.Equal(to.WithNotNull(from.NotNull)):
		return identity, nil
	}
	return unsupported("")
}

func identity(v types.Value) (types.Value, error) { return v, nil }

func okOrNull(v types.Value, ok bool) types.Value {
	if !ok {
		return types.Null
	}
	return v
}

func truncNanos(ns int64, p int) int64 {
	if p >= 9 {
		return ns
	}
	d := types.Pow10(9 - p)
	return ns - ns%d
}

// truncTimestamp truncates a timestamp to p fraction digits.
func truncTimestamp(ms int64, ns int32, p int) (int64, int32) {
	switch {
	case p >= 9:
		return ms, ns
	case p >= 3:
		d := int32(types.Pow10(9 - p))
		return ms, ns - ns%d
	}
	d := types.Pow10(3 - p)
	q, _ := floorDiv(ms, d)
	return q * d, 0
}

func floorDiv(a, b int64) (int64, int64) {
	q, r := a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

// floatToInt converts as Java's (long) or (int) casts do: truncation,
// NaN to 0, saturation at the range of long (BIGINT) or int (narrower
// kinds, which then wrap).
func floatToInt(f float64, k types.Kind) int64 {
	if math.IsNaN(f) {
		return 0
	}
	if k == types.KindBigInt {
		if f >= math.MaxInt64 {
			return math.MaxInt64
		}
		if f <= math.MinInt64 {
			return math.MinInt64
		}
		return int64(f)
	}
	if f >= math.MaxInt32 {
		return math.MaxInt32
	}
	if f <= math.MinInt32 {
		return math.MinInt32
	}
	return int64(f)
}

func numToFloat(v types.Value) float64 {
	switch k := v.Kind(); {
	case k.IsApprox():
		return v.Float64()
	case k == types.KindDecimal:
		return types.DecimalToFloat64(v)
	}
	return float64(v.Int64())
}

func numSign(v types.Value) int {
	switch k := v.Kind(); {
	case k.IsApprox():
		f := v.Float64()
		if f > 0 {
			return 1
		} else if f < 0 {
			return -1
		}
		return 0
	case k == types.KindDecimal:
		return types.DecimalSign(v)
	}
	i := v.Int64()
	if i > 0 {
		return 1
	} else if i < 0 {
		return -1
	}
	return 0
}

// parseIntLenient parses an integer as Flink's string-to-integer cast
// does: surrounding whitespace is ignored, and digits after a decimal
// point are checked and dropped ("12.7" is 12).
func parseIntLenient(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '.'); i >= 0 {
		frac := s[i+1:]
		for j := 0; j < len(frac); j++ {
			if frac[j] < '0' || frac[j] > '9' {
				return 0, errNotNumber
			}
		}
		s = s[:i]
		if s == "" || s == "-" || s == "+" {
			if frac == "" {
				return 0, errNotNumber
			}
			return 0, nil
		}
	}
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, types.ErrOverflow
		}
		return 0, errNotNumber
	}
	return i, nil
}

// parseJavaFloat parses as Java's Double.parseDouble (trimmed; NaN,
// Infinity; a trailing d/f suffix).
func parseJavaFloat(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if n := len(s); n > 1 && strings.ContainsRune("dDfF", rune(s[n-1])) && s[n-2] >= '0' && s[n-2] <= '9' || n > 1 && s[n-1] == '.' {
		s = s[:n-1]
	}
	switch s {
	case "NaN", "Infinity", "+Infinity", "-Infinity":
	default:
		if strings.ContainsAny(s, "xXnNiI_") {
			return 0, errNotNumber
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, errNotNumber
	}
	return f, nil
}

// toString returns the conversion to CHAR(n) (padded with spaces) or
// VARCHAR(n) (truncated to n characters), formatting other types as
// Flink's CAST AS STRING.
func (c *compiler) toString(from, to types.Type) convFn {
	n := to.Length
	pad := to.Kind == types.KindChar
	loc := c.loc
	fit := func(s string) string {
		if n >= types.MaxLength {
			return s
		}
		if len(s) > n { // maybe longer than n characters
			if utf8.RuneCountInString(s) > n {
				i, count := 0, 0
				for i = range s {
					if count == n {
						break
					}
					count++
				}
				s = s[:i]
			}
		}
		if pad {
			if k := utf8.RuneCountInString(s); k < n {
				s += strings.Repeat(" ", n-k)
			}
		}
		return s
	}
	if from.Kind.IsString() || from.Kind.IsBinary() {
		if !pad && n >= from.Length {
			return func(v types.Value) (types.Value, error) { return types.String(v.Str()), nil }
		}
		return func(v types.Value) (types.Value, error) { return types.String(fit(v.Str())), nil }
	}
	return func(v types.Value) (types.Value, error) {
		return types.String(fit(string(v.AppendFormat(nil, loc)))), nil
	}
}
