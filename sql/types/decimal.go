package types

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Decimal arithmetic. Results are rounded HALF_UP to the result scale, as
// Java's BigDecimal does in Flink; a result that does not fit the result
// precision is reported with ok == false (Flink then yields NULL). The
// int64 path is exact and allocation free; math/big takes over only when an
// intermediate does not fit an int64.

var bigTen = big.NewInt(10)

func bigPow10(n int) *big.Int {
	if n < len(pow10) {
		return big.NewInt(pow10[n])
	}
	return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil)
}

// fitsPrecision reports whether |u| < 10^p.
func fitsPrecision(u int64, p int) bool {
	if p >= 19 {
		return true
	}
	return u < pow10[p] && u > -pow10[p]
}

func bigFitsPrecision(u *big.Int, p int) bool {
	if u.IsInt64() {
		return fitsPrecision(u.Int64(), p)
	}
	return u.CmpAbs(bigPow10(p)) < 0
}

// mkDecimal builds a DECIMAL(p, s) from an unscaled big value, or reports
// an overflow.
func mkDecimal(u *big.Int, p, s int) (Value, bool) {
	if !bigFitsPrecision(u, p) {
		return Value{}, false
	}
	return DecimalBig(u, p, s), true
}

func mkDecimal64(u int64, p, s int) (Value, bool) {
	if !fitsPrecision(u, p) {
		return Value{}, false
	}
	return Decimal(u, p, s), true
}

// mul64 multiplies with overflow detection.
func mul64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if (c < 0) != ((a < 0) != (b < 0)) || c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}

func add64(a, b int64) (int64, bool) {
	c := a + b
	if (c > a) != (b > 0) {
		return 0, false
	}
	return c, true
}

// divRoundHalfUp returns a/b rounded half away from zero; b != 0.
func divRoundHalfUp(a, b int64) int64 {
	q, r := a/b, a%b
	if r == 0 {
		return q
	}
	ar, ab := r, b
	if ar < 0 {
		ar = -ar
	}
	if ab < 0 {
		ab = -ab
	}
	if ar >= ab-ar { // 2|r| >= |b| without overflow
		if (a < 0) != (b < 0) {
			q--
		} else {
			q++
		}
	}
	return q
}

func bigDivRoundHalfUp(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if r.Sign() == 0 {
		return q
	}
	r2 := new(big.Int).Abs(r)
	r2.Lsh(r2, 1)
	if r2.CmpAbs(b) >= 0 {
		if a.Sign() != b.Sign() {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// rescale64 changes the scale of an unscaled value, rounding HALF_UP.
func rescale64(u int64, from, to int) (int64, bool) {
	switch {
	case to == from:
		return u, true
	case to > from:
		if to-from > 18 {
			return 0, u == 0
		}
		return mul64(u, pow10[to-from])
	default:
		if from-to > 18 {
			return 0, true
		}
		return divRoundHalfUp(u, pow10[from-to]), true
	}
}

func bigRescale(u *big.Int, from, to int) *big.Int {
	switch {
	case to == from:
		return u
	case to > from:
		return new(big.Int).Mul(u, bigPow10(to-from))
	default:
		return bigDivRoundHalfUp(u, bigPow10(from-to))
	}
}

// RescaleDecimal converts a DECIMAL to DECIMAL(p, s), rounding HALF_UP;
// ok is false when the value does not fit.
func RescaleDecimal(v Value, p, s int) (Value, bool) {
	if v.IsCompact() {
		if u, ok := rescale64(v.Unscaled(), v.Scale(), s); ok {
			return mkDecimal64(u, p, s)
		}
	}
	return mkDecimal(bigRescale(v.bigRef(), v.Scale(), s), p, s)
}

// DecimalFromInt64 converts an integer to DECIMAL(p, s).
func DecimalFromInt64(i int64, p, s int) (Value, bool) {
	if u, ok := rescale64(i, 0, s); ok {
		return mkDecimal64(u, p, s)
	}
	return mkDecimal(bigRescale(big.NewInt(i), 0, s), p, s)
}

// DecimalFromFloat64 converts a float to DECIMAL(p, s), rounding HALF_UP;
// NaN and infinities do not fit.
func DecimalFromFloat64(f float64, p, s int) (Value, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Value{}, false
	}
	// The shortest decimal text of f is what Java's BigDecimal.valueOf uses.
	v, err := ParseDecimal(strconv.FormatFloat(f, 'g', -1, 64), p, s)
	return v, err == nil
}

// DecimalToFloat64 converts a DECIMAL to the nearest float64.
func DecimalToFloat64(v Value) float64 {
	if v.IsCompact() {
		u := v.Unscaled()
		if u > -1<<53 && u < 1<<53 && v.Scale() <= 22 {
			return float64(u) / math.Pow10(v.Scale())
		}
	}
	f, _ := strconv.ParseFloat(string(AppendDecimal(nil, v)), 64)
	return f
}

// DecimalToInt64 converts a DECIMAL to an integer, truncating toward zero;
// ok is false when it does not fit an int64.
func DecimalToInt64(v Value) (int64, bool) {
	if v.IsCompact() {
		if v.Scale() > 18 {
			return 0, true
		}
		return v.Unscaled() / pow10[v.Scale()], true
	}
	q := new(big.Int).Quo(v.bigRef(), bigPow10(v.Scale()))
	return q.Int64(), q.IsInt64()
}

// DecimalSign returns -1, 0 or 1.
func DecimalSign(v Value) int {
	if v.IsCompact() {
		switch u := v.Unscaled(); {
		case u < 0:
			return -1
		case u > 0:
			return 1
		}
		return 0
	}
	return v.bigRef().Sign()
}

// align brings a and b to scale s (s >= both scales) as int64s.
func align64(a, b Value, s int) (int64, int64, bool) {
	if !a.IsCompact() || !b.IsCompact() {
		return 0, 0, false
	}
	x, ok1 := rescale64(a.Unscaled(), a.Scale(), s)
	y, ok2 := rescale64(b.Unscaled(), b.Scale(), s)
	return x, y, ok1 && ok2
}

// DecimalAdd returns a+b as DECIMAL(p, s).
func DecimalAdd(a, b Value, p, s int) (Value, bool) {
	ws := max(a.Scale(), b.Scale())
	if x, y, ok := align64(a, b, ws); ok {
		if z, ok := add64(x, y); ok {
			if z, ok := rescale64(z, ws, s); ok {
				return mkDecimal64(z, p, s)
			}
		}
	}
	z := new(big.Int).Add(bigRescale(a.bigRef(), a.Scale(), ws), bigRescale(b.bigRef(), b.Scale(), ws))
	return mkDecimal(bigRescale(z, ws, s), p, s)
}

// DecimalNeg returns -a.
func DecimalNeg(a Value) Value {
	if a.IsCompact() && a.Unscaled() != math.MinInt64 {
		return Decimal(-a.Unscaled(), a.Precision(), a.Scale())
	}
	return DecimalBig(new(big.Int).Neg(a.bigRef()), a.Precision(), a.Scale())
}

// DecimalSub returns a-b as DECIMAL(p, s).
func DecimalSub(a, b Value, p, s int) (Value, bool) { return DecimalAdd(a, DecimalNeg(b), p, s) }

// DecimalMul returns a*b as DECIMAL(p, s).
func DecimalMul(a, b Value, p, s int) (Value, bool) {
	ws := a.Scale() + b.Scale()
	if a.IsCompact() && b.IsCompact() {
		if z, ok := mul64(a.Unscaled(), b.Unscaled()); ok {
			if z, ok := rescale64(z, ws, s); ok {
				return mkDecimal64(z, p, s)
			}
		}
	}
	z := new(big.Int).Mul(a.bigRef(), b.bigRef())
	return mkDecimal(bigRescale(z, ws, s), p, s)
}

// ErrDivisionByZero is returned for a division or modulo by zero of exact
// numbers, which Flink fails on.
var ErrDivisionByZero = errors.New("division by zero")

// DecimalDiv returns a/b as DECIMAL(p, s), rounded HALF_UP.
func DecimalDiv(a, b Value, p, s int) (Value, bool, error) {
	if DecimalSign(b) == 0 {
		return Value{}, false, ErrDivisionByZero
	}
	// a/b at scale s = round(ua * 10^(s - sa + sb) / ub).
	shift := s - a.Scale() + b.Scale()
	if a.IsCompact() && b.IsCompact() && shift >= 0 && shift <= 18 {
		if x, ok := mul64(a.Unscaled(), pow10[shift]); ok {
			v, ok := mkDecimal64(divRoundHalfUp(x, b.Unscaled()), p, s)
			return v, ok, nil
		}
	}
	x := a.bigRef()
	y := b.bigRef()
	if shift >= 0 {
		x = new(big.Int).Mul(x, bigPow10(shift))
	} else {
		y = new(big.Int).Mul(y, bigPow10(-shift))
	}
	v, ok := mkDecimal(bigDivRoundHalfUp(x, y), p, s)
	return v, ok, nil
}

// DecimalMod returns a mod b (sign of a) as DECIMAL(p, s).
func DecimalMod(a, b Value, p, s int) (Value, bool, error) {
	if DecimalSign(b) == 0 {
		return Value{}, false, ErrDivisionByZero
	}
	ws := max(a.Scale(), b.Scale())
	if x, y, ok := align64(a, b, ws); ok {
		if z, ok := rescale64(x%y, ws, s); ok {
			v, ok := mkDecimal64(z, p, s)
			return v, ok, nil
		}
	}
	z := new(big.Int).Rem(bigRescale(a.bigRef(), a.Scale(), ws), bigRescale(b.bigRef(), b.Scale(), ws))
	v, ok := mkDecimal(bigRescale(z, ws, s), p, s)
	return v, ok, nil
}

// CompareDecimal orders two DECIMALs of any scales.
func CompareDecimal(a, b Value) int {
	ws := max(a.Scale(), b.Scale())
	if x, y, ok := align64(a, b, ws); ok {
		return cmp64(x, y)
	}
	return bigRescale(a.bigRef(), a.Scale(), ws).Cmp(bigRescale(b.bigRef(), b.Scale(), ws))
}

func cmp64(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// errBadDecimal is returned for text that is no decimal number.
var errBadDecimal = errors.New("not a decimal number")

// ErrOverflow is returned when a value does not fit its type.
var ErrOverflow = errors.New("value out of range")

// ParseDecimal parses decimal text ("-12.50", "1e3", " 7 ") into
// DECIMAL(p, s), rounding HALF_UP.
func ParseDecimal(text string, p, s int) (Value, error) {
	t := strings.TrimSpace(text)
	neg := false
	if t != "" && (t[0] == '-' || t[0] == '+') {
		neg = t[0] == '-'
		t = t[1:]
	}
	exp := 0
	if i := strings.IndexAny(t, "eE"); i >= 0 {
		e, err := strconv.Atoi(t[i+1:])
		if err != nil || e > 1000 || e < -1000 {
			return Value{}, errBadDecimal
		}
		exp = e
		t = t[:i]
	}
	intPart, frac := t, ""
	if i := strings.IndexByte(t, '.'); i >= 0 {
		intPart, frac = t[:i], t[i+1:]
	}
	if intPart == "" && frac == "" {
		return Value{}, errBadDecimal
	}
	digits := intPart + frac
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return Value{}, errBadDecimal
		}
	}
	scale := len(frac) - exp
	digits = strings.TrimLeft(digits, "0")
	var u *big.Int
	if len(digits) <= 18 {
		n, _ := strconv.ParseInt("0"+digits, 10, 64)
		if neg {
			n = -n
		}
		if scale >= 0 {
			if r, ok := rescale64(n, scale, s); ok {
				v, ok := mkDecimal64(r, p, s)
				if !ok {
					return Value{}, ErrOverflow
				}
				return v, nil
			}
		}
		u = big.NewInt(n)
	} else {
		u, _ = new(big.Int).SetString(digits, 10)
		if neg {
			u.Neg(u)
		}
	}
	if scale < 0 {
		u = new(big.Int).Mul(u, bigPow10(-scale))
		scale = 0
	}
	v, ok := mkDecimal(bigRescale(u, scale, s), p, s)
	if !ok {
		return Value{}, ErrOverflow
	}
	return v, nil
}

// AppendDecimal appends a DECIMAL's plain text, with exactly its scale's
// digits after the point ("12.50", "-0.001", "7").
func AppendDecimal(dst []byte, v Value) []byte {
	var digits []byte
	neg := false
	if v.IsCompact() {
		u := v.Unscaled()
		if u < 0 {
			neg = true
		}
		var buf [24]byte
		digits = strconv.AppendUint(buf[:0], absU64(u), 10)
	} else {
		b := v.bigRef()
		neg = b.Sign() < 0
		digits = new(big.Int).Abs(b).Append(nil, 10)
	}
	if neg {
		dst = append(dst, '-')
	}
	s := v.Scale()
	if s == 0 {
		return append(dst, digits...)
	}
	if len(digits) <= s {
		dst = append(dst, '0', '.')
		for i := len(digits); i < s; i++ {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[:len(digits)-s]...)
	dst = append(dst, '.')
	return append(dst, digits[len(digits)-s:]...)
}

func absU64(u int64) uint64 {
	if u < 0 {
		return uint64(-u) // -MinInt64 wraps to itself, whose uint64 is right
	}
	return uint64(u)
}

// DecimalDigits returns the number of decimal digits of |i| (at least 1).
func DecimalDigits(i int64) int {
	u := absU64(i)
	n := 1
	for u >= 10 {
		u /= 10
		n++
	}
	return n
}
