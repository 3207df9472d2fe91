// Package datagen generates rows for SQL tables with `'connector' =
// 'datagen'`, following Flink's DataGen connector.
//
// A Generator is a pure function of the row index: Row(i) always returns
// the same values, so a source that keeps the next index as its offset
// replays exactly the rows after a restored checkpoint (the random values
// come from a hash of the seed, the field and the index, not from a
// stream of random numbers). The one exception is a random TIMESTAMP,
// which Flink draws from "now minus up to max-past": the generator fixes
// "now" when it is built, so the values of a restored run differ from the
// first run's.
//
// Options (Flink's names; every one is optional):
//
//	rows-per-second          rows per second over all subtasks (default 10000)
//	number-of-rows           total rows; unbounded without it (and without a sequence field)
//	fields.<f>.kind          random (default) or sequence
//	fields.<f>.min / .max    bounds of a random number (default: the type's range)
//	fields.<f>.length        length of a random string or bytes (default 100)
//	fields.<f>.var-len       true: random strings of length 1..length
//	fields.<f>.start / .end  bounds of a sequence (required for one)
//	fields.<f>.max-past      random TIMESTAMP up to this far in the past (default 0)
//	fields.<f>.null-rate     fraction of NULLs, 0..1 (default 0)
//	seed                     seed of the random values (clink's addition, default 0)
//
// A sequence field makes the table bounded: it has end-start+1 rows (the
// smallest of them when several fields are sequences, or number-of-rows
// if that is smaller).
//
// The package has no goroutines and no I/O; the SQL layer reads a
// Generator with clink.FromGenerator.
package datagen

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/types"
)

// Field is one column the generator fills.
type Field struct {
	Name string
	Type types.Type
}

// OptionError is an invalid option; Key names it so that the caller can
// point at the place it was written.
type OptionError struct {
	Key string
	Msg string
}

// Error returns the message, which names the key.
func (e *OptionError) Error() string { return e.Msg }

func optErr(key, format string, args ...any) error {
	return &OptionError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Generator makes the rows of one datagen table.
type Generator struct {
	fields []fieldGen
	count  int64
	rate   float64
	seed   uint64
	now    int64
}

type fieldGen struct {
	typ types.Type
	// salt is what the random values of the field mix with the row index
	// (the seed and the field's position).
	salt uint64
	// fast says how Fill makes the field's values without the general
	// switch of value.
	fast     fastKind
	sequence bool
	// sequence: start, end (integers, or scaled for DECIMAL); floats use fstart
	start, end int64
	fstart     float64
	// random bounds
	min, max   int64
	fmin, fmax float64
	length     int
	varLen     bool
	maxPast    int64
	nullRate   float64
}

// Count returns the number of rows, or -1 when the table is unbounded.
func (g *Generator) Count() int64 { return g.count }

// RowsPerSecond returns the total rate the rows are generated at; 0 means
// as fast as possible.
func (g *Generator) RowsPerSecond() float64 { return g.rate }

// ValidKey reports whether key is an option of the datagen connector for
// the given fields (other than 'connector').
func ValidKey(key string, fields []Field) bool {
	switch key {
	case "rows-per-second", "number-of-rows", "seed", "scan.parallelism":
		return true
	}
	rest, ok := strings.CutPrefix(key, "fields.")
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return false
	}
	name, opt := rest[:i], rest[i+1:]
	switch opt {
	case "kind", "min", "max", "length", "var-len", "start", "end", "max-past", "null-rate":
	default:
		return false
	}
	for _, f := range fields {
		if f.Name == name {
			return true
		}
	}
	return false
}

// New builds a generator for fields from the table's WITH options (the
// 'connector' key and unknown keys are the caller's business; see
// ValidKey).
func New(fields []Field, opts map[string]string) (*Generator, error) {
	g := &Generator{count: -1, rate: 10000, now: time.Now().UnixMilli()}
	if s, ok := opts["rows-per-second"]; ok {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return nil, optErr("rows-per-second", "option 'rows-per-second' must be a non-negative number, got '%s'", s)
		}
		g.rate = r
	}
	if s, ok := opts["number-of-rows"]; ok {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return nil, optErr("number-of-rows", "option 'number-of-rows' must be a non-negative integer, got '%s'", s)
		}
		g.count = n
	}
	if s, ok := opts["seed"]; ok {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, optErr("seed", "option 'seed' must be an integer, got '%s'", s)
		}
		g.seed = uint64(n)
	}
	for _, f := range fields {
		fg, err := newField(f, opts)
		if err != nil {
			return nil, err
		}
		if fg.sequence {
			n := fg.end - fg.start + 1
			if g.count < 0 || n < g.count {
				g.count = n
			}
		}
		fg.salt = g.seed ^ splitmix64(uint64(len(g.fields))+1)<<1
		fg.fast = fastOf(&fg)
		g.fields = append(g.fields, fg)
	}
	return g, nil
}

// fastKind is a kind of field whose values Fill makes on a short path.
type fastKind uint8

const (
	slow        fastKind = iota // value's general switch
	sequenceInt                 // an integer sequence without NULLs
	randomInt                   // a random integer without NULLs
)

func fastOf(f *fieldGen) fastKind {
	if f.nullRate > 0 || !f.typ.Kind.IsInteger() {
		return slow
	}
	if f.sequence {
		return sequenceInt
	}
	return randomInt
}

func newField(f Field, opts map[string]string) (fieldGen, error) {
	key := func(opt string) string { return "fields." + f.Name + "." + opt }
	get := func(opt string) (string, bool) { s, ok := opts[key(opt)]; return s, ok }
	fg := fieldGen{typ: f.Type, length: 100}
	k := f.Type.Kind
	kind := "random"
	if s, ok := get("kind"); ok {
		kind = s
	}
	switch kind {
	case "random":
	case "sequence":
		fg.sequence = true
	default:
		return fg, optErr(key("kind"), "option '%s' must be 'random' or 'sequence', got '%s'", key("kind"), kind)
	}
	if s, ok := get("null-rate"); ok {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || r > 1 {
			return fg, optErr(key("null-rate"), "option '%s' must be a number between 0 and 1, got '%s'", key("null-rate"), s)
		}
		fg.nullRate = r
	}
	// Options that only one kind reads are refused for the other, as Flink does.
	only := map[string]bool{"min": !fg.sequence, "max": !fg.sequence, "length": !fg.sequence, "var-len": !fg.sequence, "max-past": !fg.sequence, "start": fg.sequence, "end": fg.sequence}
	for opt, allowed := range only {
		if _, ok := get(opt); ok && !allowed {
			return fg, optErr(key(opt), "option '%s' does not apply to a %s field", key(opt), kind)
		}
	}
	num := func(opt string, def int64) (int64, error) {
		s, ok := get(opt)
		if !ok {
			return def, nil
		}
		switch {
		case k.IsInteger() || k.IsString():
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, optErr(key(opt), "option '%s' must be an integer, got '%s'", key(opt), s)
			}
			return n, nil
		case k == types.KindDecimal:
			v, err := types.ParseDecimal(s, f.Type.Precision, f.Type.Scale)
			if err != nil || !v.IsCompact() {
				return 0, optErr(key(opt), "option '%s' must be a %s, got '%s'", key(opt), f.Type, s)
			}
			return v.Unscaled(), nil
		}
		return def, nil
	}
	fnum := func(opt string, def float64) (float64, error) {
		s, ok := get(opt)
		if !ok {
			return def, nil
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, optErr(key(opt), "option '%s' must be a number, got '%s'", key(opt), s)
		}
		return x, nil
	}
	var err error
	if fg.sequence {
		switch {
		case k.IsInteger(), k.IsString(), k == types.KindDecimal:
		case k.IsApprox():
		default:
			return fg, optErr(key("kind"), "field '%s' of type %s cannot be a sequence; sequences are numbers or strings", f.Name, f.Type)
		}
		if _, ok := get("start"); !ok {
			return fg, optErr(key("start"), "sequence field '%s' needs option '%s'", f.Name, key("start"))
		}
		if _, ok := get("end"); !ok {
			return fg, optErr(key("end"), "sequence field '%s' needs option '%s'", f.Name, key("end"))
		}
		if k.IsApprox() {
			var fs, fe float64
			if fs, err = fnum("start", 0); err != nil {
				return fg, err
			}
			if fe, err = fnum("end", 0); err != nil {
				return fg, err
			}
			fg.fstart, fg.start, fg.end = fs, 0, int64(math.Floor(fe-fs))
		} else {
			if fg.start, err = num("start", 0); err != nil {
				return fg, err
			}
			if fg.end, err = num("end", 0); err != nil {
				return fg, err
			}
		}
		if fg.end < fg.start {
			return fg, optErr(key("end"), "option '%s' (%s) is below '%s' (%s)", key("end"), opts[key("end")], key("start"), opts[key("start")])
		}
		return fg, nil
	}
	switch {
	case k == types.KindBoolean, k == types.KindDate, k == types.KindTime:
	case k.IsInteger():
		lo, hi := intRange(k)
		if fg.min, err = num("min", lo); err != nil {
			return fg, err
		}
		if fg.max, err = num("max", hi); err != nil {
			return fg, err
		}
		if fg.min < lo || fg.max > hi {
			return fg, optErr(key("min"), "bounds of field '%s' do not fit its type %s", f.Name, f.Type)
		}
	case k == types.KindDecimal:
		lim := int64(math.MaxInt64)
		if f.Type.Precision <= types.MaxCompactDecimalPrecision {
			lim = types.Pow10(f.Type.Precision) - 1
		}
		if fg.min, err = num("min", -lim); err != nil {
			return fg, err
		}
		if fg.max, err = num("max", lim); err != nil {
			return fg, err
		}
	case k.IsApprox():
		hi := math.MaxFloat64
		if k == types.KindFloat {
			hi = math.MaxFloat32
		}
		if fg.fmin, err = fnum("min", -hi); err != nil {
			return fg, err
		}
		if fg.fmax, err = fnum("max", hi); err != nil {
			return fg, err
		}
	case k.IsString(), k.IsBinary():
		if s, ok := get("length"); ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return fg, optErr(key("length"), "option '%s' must be a non-negative integer, got '%s'", key("length"), s)
			}
			fg.length = n
		}
		if f.Type.Kind == types.KindChar || f.Type.Kind == types.KindBinary || f.Type.Length < fg.length {
			if _, ok := get("length"); ok && f.Type.Length < fg.length {
				return fg, optErr(key("length"), "option '%s' (%d) exceeds the length of %s", key("length"), fg.length, f.Type)
			}
			fg.length = min(fg.length, f.Type.Length)
		}
		if s, ok := get("var-len"); ok {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return fg, optErr(key("var-len"), "option '%s' must be true or false, got '%s'", key("var-len"), s)
			}
			fg.varLen = b
		}
	case k.IsTimestamp():
		if s, ok := get("max-past"); ok {
			d, err := parseDuration(s)
			if err != nil {
				return fg, optErr(key("max-past"), "option '%s' must be a duration such as '5 s' or '1 min', got '%s'", key("max-past"), s)
			}
			fg.maxPast = d.Milliseconds()
		}
	default:
		return fg, optErr(key("kind"), "datagen cannot generate field '%s' of type %s", f.Name, f.Type)
	}
	if fg.min > fg.max || fg.fmin > fg.fmax {
		return fg, optErr(key("max"), "option '%s' is below '%s'", key("max"), key("min"))
	}
	return fg, nil
}

// parseDuration reads Flink's duration syntax ("10 s", "1min", "500ms")
// and Go's.
func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(strings.ReplaceAll(s, " ", "")); err == nil {
		return d, nil
	}
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, err
	}
	units := map[string]time.Duration{
		"": time.Millisecond, "ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond,
		"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
		"min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hour": time.Hour, "hours": time.Hour, "d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	}
	u, ok := units[strings.ToLower(strings.TrimSpace(s[i:]))]
	if !ok {
		return 0, fmt.Errorf("unknown unit in %q", s)
	}
	return time.Duration(n) * u, nil
}

func intRange(k types.Kind) (int64, int64) {
	switch k {
	case types.KindTinyInt:
		return math.MinInt8, math.MaxInt8
	case types.KindSmallInt:
		return math.MinInt16, math.MaxInt16
	case types.KindInt:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// splitmix64 is a bijective mixer: the random values are mix(seed, field,
// index), a pure function.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// rnd is a small deterministic stream of numbers for one cell.
type rnd struct{ s uint64 }

func (r *rnd) next() uint64 { r.s = splitmix64(r.s); return r.s }

// between returns a uniform integer in [lo, hi].
func (r *rnd) between(lo, hi int64) int64 {
	span := uint64(hi - lo)
	if span == math.MaxUint64 {
		return int64(r.next())
	}
	return lo + int64(r.next()%(span+1))
}

func (r *rnd) float() float64 { return float64(r.next()>>11) / (1 << 53) }

const alphabet = "0123456789abcdef"

// Row returns row i (0-based), an insert.
func (g *Generator) Row(i int64) types.Row {
	vals := make([]types.Value, len(g.fields))
	g.Fill(i, vals)
	return types.Row{Kind: changelog.Insert, Values: vals}
}

// Width returns the number of values of a row.
func (g *Generator) Width() int { return len(g.fields) }

// Fill writes the values of row i into vals, which has Width values: the
// same values Row(i) returns, in storage the caller chose.
func (g *Generator) Fill(i int64, vals []types.Value) {
	vals = vals[:len(g.fields)]
	for j := range g.fields {
		f := &g.fields[j]
		switch f.fast {
		case sequenceInt:
			vals[j] = types.IntOf(f.typ.Kind, f.start+i)
		case randomInt:
			r := rnd{s: splitmix64(f.salt ^ uint64(i))}
			vals[j] = types.IntOf(f.typ.Kind, r.between(f.min, f.max))
		default:
			vals[j] = g.value(j, i)
		}
	}
}

func (g *Generator) value(j int, i int64) types.Value {
	f := &g.fields[j]
	r := rnd{s: splitmix64(f.salt ^ uint64(i))}
	k := f.typ.Kind
	if f.nullRate > 0 && r.float() < f.nullRate {
		return types.NullOf(k)
	}
	if f.sequence {
		n := f.start + i
		switch {
		case k.IsInteger():
			return types.IntOf(k, n)
		case k == types.KindDecimal:
			return types.Decimal(n, f.typ.Precision, f.typ.Scale)
		case k == types.KindFloat:
			return types.Float32(float32(f.fstart + float64(i)))
		case k == types.KindDouble:
			return types.Float64(f.fstart + float64(i))
		default:
			return types.String(strconv.FormatInt(n, 10))
		}
	}
	switch {
	case k == types.KindBoolean:
		return types.Bool(r.next()&1 == 1)
	case k.IsInteger():
		return types.IntOf(k, r.between(f.min, f.max))
	case k == types.KindDecimal:
		u := r.between(f.min, f.max)
		if f.typ.Precision > types.MaxCompactDecimalPrecision {
			return types.DecimalBig(big.NewInt(u), f.typ.Precision, f.typ.Scale)
		}
		return types.Decimal(u, f.typ.Precision, f.typ.Scale)
	case k == types.KindFloat:
		return types.Float32(float32(f.fmin + r.float()*(f.fmax-f.fmin)))
	case k == types.KindDouble:
		x := f.fmin + r.float()*(f.fmax-f.fmin)
		if math.IsInf(x, 0) || math.IsNaN(x) {
			x = f.fmin/2 + r.float()*(f.fmax/2-f.fmin/2)
		}
		return types.Float64(x)
	case k.IsString(), k.IsBinary():
		n := f.length
		if f.varLen && n > 0 {
			n = int(r.between(1, int64(n)))
		}
		b := make([]byte, n)
		for x := range b {
			b[x] = alphabet[r.next()&15]
		}
		if k.IsBinary() {
			return types.BytesString(string(b))
		}
		return types.String(string(b))
	case k == types.KindDate:
		return types.Date(r.between(0, 365*60))
	case k == types.KindTime:
		return types.Time(r.between(0, 86400-1)*1e9, f.typ.Precision)
	case k == types.KindTimestamp:
		ms := g.now - r.between(0, f.maxPast)
		return types.Timestamp(ms, 0, f.typ.Precision)
	case k == types.KindTimestampLTZ:
		ms := g.now - r.between(0, f.maxPast)
		return types.TimestampLTZ(ms, 0, f.typ.Precision)
	}
	return types.NullOf(k)
}
