package expr

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/clinkstream/clink/sql/types"
)

// AggSpec names an aggregate call for NewAggregate.
type AggSpec struct {
	// Name is COUNT, SUM, SUM0, AVG, MIN or MAX (any case).
	Name string
	// Distinct is the DISTINCT of COUNT(DISTINCT x).
	Distinct bool
	// Args are the argument types; none for COUNT(*).
	Args []types.Type
	// Retract asks for accumulators that accept retractions (changelog
	// input). MIN and MAX then keep a multiset of their values; without it
	// they keep one value and Retract fails.
	Retract bool
}

// AggFunc is a type-checked aggregate function: its result type and a
// factory of accumulators. FILTER (WHERE ...) is the caller's business: it
// skips the rows that do not pass.
type AggFunc struct {
	Spec   AggSpec
	Result types.Type
	arg    types.Type
	star   bool
	// inline is how an accumulator of f is kept in int64 slots (see
	// InlineSlots), or notInline.
	inline inlineKind
}

// Accumulator is the running state of one aggregate for one group. It
// lives in keyed state, so it has a binary codec; restore it with
// AggFunc.Decode.
type Accumulator interface {
	// Add accumulates a value (ignored by COUNT(*); NULLs are ignored by
	// every other aggregate).
	Add(v types.Value) error
	// Retract removes a value added before (-U / -D input).
	Retract(v types.Value) error
	// Merge adds another accumulator of the same AggFunc into this one
	// (session window merging).
	Merge(other Accumulator) error
	// Result returns the current result; NULL when no value was added
	// (COUNT gives 0).
	Result() types.Value
	// Clone returns an independent copy: changing either leaves the other
	// as it was.
	Clone() Accumulator
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// NewAggregate type-checks an aggregate call. Result types follow Flink:
// COUNT is BIGINT NOT NULL; SUM and AVG of an integer keep the integer
// type (AVG of INT is INT, truncating); SUM of DECIMAL(p, s) is
// DECIMAL(38, s) and AVG DECIMAL(38, max(s, 6)); SUM0 is SUM that gives 0
// instead of NULL; MIN and MAX keep the argument type, nullable.
func NewAggregate(spec AggSpec) (*AggFunc, error) {
	name := strings.ToUpper(spec.Name)
	f := &AggFunc{Spec: spec}
	f.Spec.Name = name
	if name == "COUNT" && len(spec.Args) == 0 {
		if spec.Distinct {
			return nil, fmt.Errorf("COUNT(DISTINCT *) is not valid SQL")
		}
		f.star = true
		f.Result = types.BigIntType.WithNotNull(true)
		f.inline = inlineCountStar
		return f, nil
	}
	if len(spec.Args) != 1 {
		return nil, fmt.Errorf("aggregate function %s takes 1 argument, got %d", name, len(spec.Args))
	}
	a := spec.Args[0]
	f.arg = a
	switch name {
	case "COUNT":
		f.Result = types.BigIntType.WithNotNull(true)
	case "SUM", "SUM0", "AVG":
		if !a.Kind.IsNumeric() {
			return nil, fmt.Errorf("aggregate function %s expects a numeric argument, not %s", name, typeName(a))
		}
		f.Result = a.WithNotNull(name == "SUM0")
		if a.Kind == types.KindDecimal {
			s := a.Scale
			if name == "AVG" {
				s = max(s, 6)
			}
			f.Result = types.DecimalOf(types.MaxDecimalPrecision, s).WithNotNull(name == "SUM0")
		}
	case "MIN", "MAX":
		if !comparable(a) {
			return nil, fmt.Errorf("aggregate function %s cannot order values of type %s", name, typeName(a))
		}
		f.Result = a.WithNotNull(false)
	default:
		return nil, fmt.Errorf("unsupported aggregate function %s", name)
	}
	if !spec.Distinct {
		switch {
		case name == "COUNT":
			f.inline = inlineCount
		case a.Kind.IsInteger():
			f.inline = map[string]inlineKind{"SUM": inlineSum, "SUM0": inlineSum0, "AVG": inlineAvg}[name]
		}
	}
	return f, nil
}

// New returns an empty accumulator.
func (f *AggFunc) New() Accumulator {
	var inner Accumulator
	switch f.Spec.Name {
	case "COUNT":
		inner = &countAcc{star: f.star}
	case "SUM", "SUM0", "AVG":
		inner = &sumAcc{arg: f.arg, result: f.Result, avg: f.Spec.Name == "AVG", zero: f.Spec.Name == "SUM0"}
	case "MIN", "MAX":
		sign := 1
		if f.Spec.Name == "MIN" {
			sign = -1
		}
		if f.Spec.Retract {
			inner = &minMaxRetractAcc{sign: sign, cmp: cmpFor(f.arg), vals: map[string]*counted{}}
		} else {
			inner = &minMaxAcc{sign: sign, cmp: cmpFor(f.arg)}
		}
	}
	if f.Spec.Distinct {
		return &distinctAcc{inner: inner, seen: map[string]*counted{}}
	}
	return inner
}

// NewDeduplicated returns the accumulator of a DISTINCT aggregate without
// its set of the values seen: the caller keeps the values (with how many
// times each was added) and passes on only a value's first addition and
// the retraction of its last one. For an aggregate without DISTINCT it is
// New.
func (f *AggFunc) NewDeduplicated() Accumulator {
	g := *f
	g.Spec.Distinct = false
	return g.New()
}

// DecodeDeduplicated restores an accumulator made by NewDeduplicated from
// its MarshalBinary form.
func (f *AggFunc) DecodeDeduplicated(b []byte) (Accumulator, error) {
	a := f.NewDeduplicated()
	if err := a.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("decoding %s accumulator: %w", f.Spec.Name, err)
	}
	return a, nil
}

// Decode restores an accumulator from its MarshalBinary form.
func (f *AggFunc) Decode(b []byte) (Accumulator, error) {
	a := f.New()
	if err := a.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("decoding %s accumulator: %w", f.Spec.Name, err)
	}
	return a, nil
}

var errCorruptAcc = errors.New("corrupt accumulator")

func mismatch(a, b Accumulator) error {
	return fmt.Errorf("merging accumulators of different kinds (%T and %T)", a, b)
}

// reader decodes the accumulator encodings.
type reader struct {
	b   []byte
	err error
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorruptAcc
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) value() types.Value {
	if r.err != nil {
		return types.Null
	}
	v, n, err := types.DecodeValue(r.b)
	if err != nil {
		r.err = err
		return types.Null
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		return errCorruptAcc
	}
	return r.err
}

// ---------------------------------------------------------------------------

type countAcc struct {
	star bool
	n    int64
}

func (a *countAcc) Add(v types.Value) error {
	if a.star || !v.IsNull() {
		a.n++
	}
	return nil
}

func (a *countAcc) Retract(v types.Value) error {
	if a.star || !v.IsNull() {
		a.n--
	}
	return nil
}

func (a *countAcc) Clone() Accumulator { c := *a; return &c }

func (a *countAcc) Merge(o Accumulator) error {
	b, ok := o.(*countAcc)
	if !ok {
		return mismatch(a, o)
	}
	a.n += b.n
	return nil
}

func (a *countAcc) Result() types.Value { return types.Int64(a.n) }

func (a *countAcc) MarshalBinary() ([]byte, error) { return binary.AppendVarint(nil, a.n), nil }

func (a *countAcc) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	a.n = r.varint()
	return r.done()
}

// sumAcc serves SUM, SUM0 and AVG: a sum (int64 wrapping as Java's long,
// float64, or a DECIMAL(38, s)) and the count of values in it, so that
// retracting the last value gives NULL again.
type sumAcc struct {
	arg, result types.Type
	avg, zero   bool
	count       int64
	i           int64
	f           float64
	d           types.Value // DECIMAL sum; Null until the first value
	overflow    bool
}

func (a *sumAcc) add(v types.Value, sign int64) {
	switch k := a.arg.Kind; {
	case k.IsInteger():
		a.i += sign * v.Int64()
	case k.IsApprox():
		a.f += float64(sign) * v.Float64()
	default:
		if a.overflow {
			return
		}
		if sign < 0 {
			v = types.DecimalNeg(v)
		}
		if a.d.IsNull() {
			a.d = types.Decimal(0, types.MaxDecimalPrecision, a.arg.Scale)
		}
		var ok bool
		if a.d, ok = types.DecimalAdd(a.d, v, types.MaxDecimalPrecision, a.arg.Scale); !ok {
			a.overflow = true // Flink yields NULL once a DECIMAL sum overflows
		}
	}
	a.count += sign
}

func (a *sumAcc) Add(v types.Value) error {
	if !v.IsNull() {
		a.add(v, 1)
	}
	return nil
}

func (a *sumAcc) Retract(v types.Value) error {
	if !v.IsNull() {
		a.add(v, -1)
	}
	return nil
}

// Clone copies the sums; a DECIMAL sum's Value is immutable.
func (a *sumAcc) Clone() Accumulator { c := *a; return &c }

func (a *sumAcc) Merge(o Accumulator) error {
	b, ok := o.(*sumAcc)
	if !ok {
		return mismatch(a, o)
	}
	a.i += b.i
	a.f += b.f
	a.count += b.count
	a.overflow = a.overflow || b.overflow
	if !b.d.IsNull() && !a.overflow {
		if a.d.IsNull() {
			a.d = b.d
		} else if a.d, ok = types.DecimalAdd(a.d, b.d, types.MaxDecimalPrecision, a.arg.Scale); !ok {
			a.overflow = true
		}
	}
	return nil
}

func (a *sumAcc) Result() types.Value {
	k := a.arg.Kind
	if a.count == 0 {
		if !a.zero {
			return types.Null
		}
		switch {
		case k.IsInteger():
			return types.IntOf(k, 0)
		case k.IsApprox():
			return floatOf(k, 0)
		}
		return types.Decimal(0, types.MaxDecimalPrecision, a.result.Scale)
	}
	if a.overflow {
		return types.Null
	}
	switch {
	case k.IsInteger():
		if a.avg {
			return types.IntOf(k, a.i/a.count)
		}
		return types.IntOf(k, a.i)
	case k.IsApprox():
		if a.avg {
			return floatOf(k, a.f/float64(a.count))
		}
		return floatOf(k, a.f)
	}
	if a.avg {
		v, ok, err := types.DecimalDiv(a.d, types.Decimal(a.count, 19, 0), types.MaxDecimalPrecision, a.result.Scale)
		if err != nil || !ok {
			return types.Null
		}
		return v
	}
	return a.d
}

func floatOf(k types.Kind, f float64) types.Value {
	if k == types.KindFloat {
		return types.Float32(float32(f))
	}
	return types.Float64(f)
}

func (a *sumAcc) MarshalBinary() ([]byte, error) {
	b := binary.AppendVarint(nil, a.count)
	b = binary.AppendVarint(b, a.i)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.f))
	if a.overflow {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return types.AppendKey(b, a.d), nil
}

func (a *sumAcc) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	a.count = r.varint()
	a.i = r.varint()
	if r.err != nil || len(r.b) < 9 {
		return errCorruptAcc
	}
	a.f = math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	a.overflow = r.b[8] == 1
	r.b = r.b[9:]
	a.d = r.value()
	if r.err == nil && !a.d.IsNull() && a.d.Kind() != types.KindDecimal {
		return errCorruptAcc
	}
	return r.done()
}

// minMaxAcc keeps the extreme value of an append-only input.
type minMaxAcc struct {
	sign int
	cmp  cmpFn
	best types.Value
	has  bool
}

func (a *minMaxAcc) Add(v types.Value) error {
	if v.IsNull() {
		return nil
	}
	if !a.has || a.cmp(v, a.best) == a.sign {
		a.best, a.has = v, true
	}
	return nil
}

func (a *minMaxAcc) Retract(types.Value) error {
	return errors.New("MIN/MAX over an updating input needs an accumulator made with AggSpec.Retract")
}

func (a *minMaxAcc) Clone() Accumulator { c := *a; return &c }

func (a *minMaxAcc) Merge(o Accumulator) error {
	b, ok := o.(*minMaxAcc)
	if !ok {
		return mismatch(a, o)
	}
	if b.has {
		return a.Add(b.best)
	}
	return nil
}

func (a *minMaxAcc) Result() types.Value {
	if !a.has {
		return types.Null
	}
	return a.best
}

func (a *minMaxAcc) MarshalBinary() ([]byte, error) {
	if !a.has {
		return types.AppendKey(nil, types.Null), nil
	}
	return types.AppendKey(nil, a.best), nil
}

func (a *minMaxAcc) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	a.best = r.value()
	a.has = !a.best.IsNull()
	return r.done()
}

// counted is a value with its multiplicity.
type counted struct {
	v types.Value
	n int64
}

// minMaxRetractAcc keeps a multiset of the values, so that retracting the
// current extreme finds the next one.
type minMaxRetractAcc struct {
	sign  int
	cmp   cmpFn
	vals  map[string]*counted
	best  types.Value
	stale bool // best must be recomputed
}

func (a *minMaxRetractAcc) Add(v types.Value) error { a.addN(v, 1); return nil }

func (a *minMaxRetractAcc) addN(v types.Value, n int64) {
	if v.IsNull() {
		return
	}
	k := string(types.AppendKey(nil, v))
	if e, ok := a.vals[k]; ok {
		e.n += n
		if e.n == 0 {
			delete(a.vals, k)
			a.stale = true
		}
		return
	}
	a.vals[k] = &counted{v: v, n: n}
	if n < 0 {
		a.stale = true // a retraction ahead of its addition (out-of-order changelog)
		return
	}
	if !a.stale && (len(a.vals) == 1 || a.cmp(v, a.best) == a.sign) {
		a.best = v
	}
}

func (a *minMaxRetractAcc) Retract(v types.Value) error { a.addN(v, -1); return nil }

func (a *minMaxRetractAcc) Clone() Accumulator {
	c := *a
	c.vals = cloneCounted(a.vals)
	return &c
}

// cloneCounted copies a multiset of values.
func cloneCounted(m map[string]*counted) map[string]*counted {
	if m == nil {
		return nil
	}
	c := make(map[string]*counted, len(m))
	for k, v := range m {
		cv := *v
		c[k] = &cv
	}
	return c
}

func (a *minMaxRetractAcc) Merge(o Accumulator) error {
	b, ok := o.(*minMaxRetractAcc)
	if !ok {
		return mismatch(a, o)
	}
	for _, e := range b.vals {
		a.addN(e.v, e.n)
	}
	return nil
}

func (a *minMaxRetractAcc) Result() types.Value {
	if a.stale {
		a.stale = false
		first := true
		for _, e := range a.vals {
			if e.n > 0 && (first || a.cmp(e.v, a.best) == a.sign) {
				a.best, first = e.v, false
			}
		}
		if first {
			a.best = types.Null
		}
	}
	has := false
	for _, e := range a.vals {
		if e.n > 0 {
			has = true
			break
		}
	}
	if !has {
		return types.Null
	}
	return a.best
}

func appendCounted(b []byte, m map[string]*counted) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	// Deterministic order: by key bytes.
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		b = append(b, k...)
		b = binary.AppendVarint(b, m[k].n)
	}
	return b
}

func readCounted(r *reader, m map[string]*counted) {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)) {
		r.err = errCorruptAcc
		return
	}
	r.b = r.b[k:]
	for i := uint64(0); i < n && r.err == nil; i++ {
		v := r.value()
		c := r.varint()
		if r.err == nil {
			m[string(types.AppendKey(nil, v))] = &counted{v: v, n: c}
		}
	}
}

func (a *minMaxRetractAcc) MarshalBinary() ([]byte, error) { return appendCounted(nil, a.vals), nil }

func (a *minMaxRetractAcc) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	clear(a.vals)
	readCounted(&r, a.vals)
	a.stale = true
	return r.done()
}

// distinctAcc counts each distinct non-NULL value and feeds the inner
// accumulator only a value's first addition and last retraction.
type distinctAcc struct {
	inner Accumulator
	seen  map[string]*counted
}

func (a *distinctAcc) Add(v types.Value) error {
	if v.IsNull() {
		return nil
	}
	k := string(types.AppendKey(nil, v))
	if e, ok := a.seen[k]; ok {
		e.n++
		if e.n == 0 {
			delete(a.seen, k)
		}
		return nil
	}
	a.seen[k] = &counted{v: v, n: 1}
	return a.inner.Add(v)
}

func (a *distinctAcc) Retract(v types.Value) error {
	if v.IsNull() {
		return nil
	}
	k := string(types.AppendKey(nil, v))
	e, ok := a.seen[k]
	if !ok {
		return fmt.Errorf("retracting %s, which was never added", v)
	}
	e.n--
	if e.n == 0 {
		delete(a.seen, k)
		return a.inner.Retract(v)
	}
	return nil
}

func (a *distinctAcc) Clone() Accumulator {
	return &distinctAcc{inner: a.inner.Clone(), seen: cloneCounted(a.seen)}
}

func (a *distinctAcc) Merge(o Accumulator) error {
	b, ok := o.(*distinctAcc)
	if !ok {
		return mismatch(a, o)
	}
	for k, e := range b.seen {
		if mine, ok := a.seen[k]; ok {
			mine.n += e.n
			continue
		}
		a.seen[k] = &counted{v: e.v, n: e.n}
		if err := a.inner.Add(e.v); err != nil {
			return err
		}
	}
	return nil
}

func (a *distinctAcc) Result() types.Value { return a.inner.Result() }

func (a *distinctAcc) MarshalBinary() ([]byte, error) {
	b := appendCounted(nil, a.seen)
	inner, err := a.inner.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b = binary.AppendUvarint(b, uint64(len(inner)))
	return append(b, inner...), nil
}

func (a *distinctAcc) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	clear(a.seen)
	readCounted(&r, a.seen)
	if r.err != nil {
		return r.err
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n != uint64(len(r.b)-k) {
		return errCorruptAcc
	}
	return a.inner.UnmarshalBinary(r.b[k:])
}

func sortStrings(s []string) { slices.Sort(s) }
