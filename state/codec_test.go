package state

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// trailer is appended after an encoding to check that decoders stop at the
// end of their value.
var trailer = []byte{0xde, 0xad, 0xbe, 0xef}

// callNoPanic runs f and turns a panic into a test failure, so that one
// broken case does not take the whole test binary down.
func callNoPanic(t rapid.TB, what string, f func()) (ok bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			ok = false
		}
	}()
	f()
	return true
}

// encodeDecode encodes v, checks the encoding is appended after existing
// bytes without touching them, decodes it (alone and followed by trailing
// bytes) and returns the decoded value and the encoding.
func encodeDecode[T any](t rapid.TB, c Codec[T], v T) (T, []byte) {
	t.Helper()
	var zero T
	var enc []byte
	if !callNoPanic(t, fmt.Sprintf("Append(%T)", v), func() { enc = c.Append(nil, v) }) {
		return zero, nil
	}
	prefix := []byte("prefix")
	var withPrefix []byte
	callNoPanic(t, "Append after prefix", func() { withPrefix = c.Append(append([]byte(nil), prefix...), v) })
	if !bytes.HasPrefix(withPrefix, prefix) {
		t.Errorf("Append(%T) changed the bytes already in dst: % x", v, withPrefix)
	} else if rest := withPrefix[len(prefix):]; !bytes.Equal(rest, enc) {
		// Maps may be encoded in any order; the length must agree at least.
		if len(rest) != len(enc) {
			t.Errorf("Append(%T) after a prefix gave %d bytes, alone %d", v, len(rest), len(enc))
		}
	}

	var got T
	var n int
	var err error
	if !callNoPanic(t, fmt.Sprintf("Decode(%T)", v), func() { got, n, err = c.Decode(enc) }) {
		return zero, enc
	}
	if err != nil {
		t.Errorf("Decode(%T) of % x: %v", v, enc, err)
		return zero, enc
	}
	if n != len(enc) {
		t.Errorf("Decode(%T) consumed %d bytes, encoding has %d", v, n, len(enc))
	}

	buf := append(append([]byte(nil), enc...), trailer...)
	var n2 int
	callNoPanic(t, "Decode with trailing bytes", func() { _, n2, err = c.Decode(buf) })
	if err != nil {
		t.Errorf("Decode(%T) followed by trailing bytes: %v", v, err)
	} else if n2 != len(enc) {
		t.Errorf("Decode(%T) followed by trailing bytes consumed %d bytes, want %d", v, n2, len(enc))
	}
	return got, enc
}

// roundTripEqual checks that v survives encoding and decoding
// (reflect.DeepEqual).
func roundTripEqual[T any](t rapid.TB, v T) {
	t.Helper()
	got, _ := encodeDecode(t, CodecFor[T](), v)
	if !reflect.DeepEqual(got, v) {
		t.Errorf("round trip of %T:\n got %#v\nwant %#v", v, got, v)
	}
}

// backToBack encodes a and b into one buffer and decodes both.
func backToBack[T any](t rapid.TB, a, b T) {
	t.Helper()
	c := CodecFor[T]()
	var buf []byte
	if !callNoPanic(t, "Append", func() { buf = c.Append(c.Append(nil, a), b) }) {
		return
	}
	var ga, gb T
	var n1, n2 int
	var err1, err2 error
	if !callNoPanic(t, "Decode", func() {
		ga, n1, err1 = c.Decode(buf)
		if err1 == nil {
			gb, n2, err2 = c.Decode(buf[n1:])
		}
	}) {
		return
	}
	if err1 != nil || err2 != nil {
		t.Fatalf("decoding two %T back to back: %v, %v", a, err1, err2)
	}
	if n1+n2 != len(buf) {
		t.Errorf("decoding two %T back to back consumed %d+%d bytes of %d", a, n1, n2, len(buf))
	}
	if !reflect.DeepEqual(ga, a) || !reflect.DeepEqual(gb, b) {
		t.Errorf("decoding two %T back to back: got %#v, %#v; want %#v, %#v", a, ga, gb, a, b)
	}
}

func TestCodecStringRoundTrip(t *testing.T) {
	for _, s := range []string{"", "a", "hello, world", "ünïcödé ✓", "nul\x00inside", "\xff\xfe invalid utf-8", strings.Repeat("x", 300), strings.Repeat("long", 20000)} {
		roundTripEqual(t, s)
	}
	backToBack(t, "first", "")
	backToBack(t, strings.Repeat("y", 200), "second")
}

func TestCodecBytesRoundTrip(t *testing.T) {
	c := CodecFor[[]byte]()
	// The []byte codec does not promise to tell nil from empty: compare
	// contents only.
	for _, b := range [][]byte{nil, {}, {0}, {1, 2, 3}, bytes.Repeat([]byte{0xff}, 1000)} {
		got, _ := encodeDecode(t, c, b)
		if !bytes.Equal(got, b) {
			t.Errorf("round trip of % x gave % x", b, got)
		}
	}

	// The decoded slice must not alias the input.
	enc := c.Append(nil, []byte("abc"))
	got, _, err := c.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		enc[i] = 'z'
	}
	if string(got) != "abc" {
		t.Errorf("decoded bytes changed with the input: %q", got)
	}

	var buf []byte
	buf = c.Append(buf, []byte("one"))
	buf = c.Append(buf, nil)
	buf = c.Append(buf, []byte("three"))
	var parts []string
	for len(buf) > 0 {
		b, n, err := c.Decode(buf)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
		buf = buf[n:]
	}
	if want := []string{"one", "", "three"}; !reflect.DeepEqual(parts, want) {
		t.Errorf("decoding three back to back: %q, want %q", parts, want)
	}
}

func checkIntegers[T integer](t *testing.T, vals ...T) {
	t.Helper()
	for _, v := range vals {
		roundTripEqual(t, v)
	}
	backToBack(t, vals[0], vals[len(vals)-1])
}

func TestCodecIntegersRoundTrip(t *testing.T) {
	checkIntegers(t, 0, 1, -1, math.MaxInt, math.MinInt)
	checkIntegers[int64](t, 0, 1, -1, 1<<40, math.MaxInt64, math.MinInt64)
	checkIntegers[int32](t, 0, 1, -1, math.MaxInt32, math.MinInt32)
	checkIntegers[int16](t, 0, 1, -1, math.MaxInt16, math.MinInt16)
	checkIntegers[int8](t, 0, 1, -1, math.MaxInt8, math.MinInt8)
	checkIntegers[uint](t, 0, 1, math.MaxUint)
	checkIntegers[uint64](t, 0, 1, 1<<63, math.MaxUint64)
	checkIntegers[uint32](t, 0, 1, 1<<31, math.MaxUint32)
	checkIntegers[uint16](t, 0, 1, 1<<15, math.MaxUint16)
	checkIntegers[uint8](t, 0, 1, 1<<7, math.MaxUint8)
}

// TestCodecIntegersAreEightBytes pins the integer encoding: whatever the
// width, 8 little-endian bytes of the value sign- or zero-extended, so that a
// key hashes the same whatever its width.
func TestCodecIntegersAreEightBytes(t *testing.T) {
	minusOne := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	five := []byte{5, 0, 0, 0, 0, 0, 0, 0}
	for name, got := range map[string][]byte{
		"int(-1)":   CodecFor[int]().Append(nil, -1),
		"int64(-1)": CodecFor[int64]().Append(nil, -1),
		"int32(-1)": CodecFor[int32]().Append(nil, -1),
		"int16(-1)": CodecFor[int16]().Append(nil, -1),
		"int8(-1)":  CodecFor[int8]().Append(nil, -1),
	} {
		if !bytes.Equal(got, minusOne) {
			t.Errorf("%s encodes as % x, want % x", name, got, minusOne)
		}
	}
	for name, got := range map[string][]byte{
		"int(5)":    CodecFor[int]().Append(nil, 5),
		"int8(5)":   CodecFor[int8]().Append(nil, 5),
		"uint(5)":   CodecFor[uint]().Append(nil, 5),
		"uint64(5)": CodecFor[uint64]().Append(nil, 5),
		"uint32(5)": CodecFor[uint32]().Append(nil, 5),
		"uint16(5)": CodecFor[uint16]().Append(nil, 5),
		"uint8(5)":  CodecFor[uint8]().Append(nil, 5),
	} {
		if !bytes.Equal(got, five) {
			t.Errorf("%s encodes as % x, want % x", name, got, five)
		}
	}
	if got := CodecFor[uint32]().Append(nil, math.MaxUint32); !bytes.Equal(got, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}) {
		t.Errorf("uint32 max encodes as % x (must zero-extend)", got)
	}
}

func TestCodecEncodingGolden(t *testing.T) {
	type pair struct {
		A string
		B int
	}
	for _, tc := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{"string", CodecFor[string]().Append(nil, "hi"), []byte{2, 'h', 'i'}},
		{"bytes", CodecFor[[]byte]().Append(nil, []byte{9}), []byte{1, 9}},
		{"bool", CodecFor[bool]().Append(nil, true), []byte{1}},
		{"float64 1", CodecFor[float64]().Append(nil, 1), []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
		{"float32 1", CodecFor[float32]().Append(nil, 1), []byte{0, 0, 0x80, 0x3f}},
		{"struct", CodecFor[pair]().Append(nil, pair{"a", -1}), []byte{1, 'a', 1}},
		{"struct 2", CodecFor[pair]().Append(nil, pair{"", 1}), []byte{0, 2}},
		{"nil slice", CodecFor[[]string]().Append(nil, nil), []byte{0}},
		{"empty slice", CodecFor[[]string]().Append(nil, []string{}), []byte{1}},
		{"pointer", CodecFor[*int8]().Append(nil, new(int8(3))), []byte{1, 6}},
		{"nil pointer", CodecFor[*int8]().Append(nil, nil), []byte{0}},
	} {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s encodes as % x, want % x", tc.name, tc.got, tc.want)
		}
	}
}

var float64Bits = []uint64{
	0, 1 << 63, // +0, -0
	math.Float64bits(1), math.Float64bits(-2.5), math.Float64bits(math.Pi),
	math.Float64bits(math.MaxFloat64), math.Float64bits(math.SmallestNonzeroFloat64),
	math.Float64bits(math.Inf(1)), math.Float64bits(math.Inf(-1)),
	math.Float64bits(math.NaN()),
	0x7ff8000000000001, // quiet NaN with a payload
	0x7ff0000000000001, // signalling NaN
	0xfff8000000000123, // negative NaN with a payload
}

var float32Bits = []uint32{
	0, 1 << 31,
	math.Float32bits(1), math.Float32bits(-2.5), math.Float32bits(math.MaxFloat32),
	math.Float32bits(math.SmallestNonzeroFloat32),
	math.Float32bits(float32(math.Inf(1))), math.Float32bits(float32(math.Inf(-1))),
	math.Float32bits(float32(math.NaN())),
	0x7fc00001, // quiet NaN with a payload
	0x7f800001, // signalling NaN
	0xffc00123,
}

func TestCodecFloatsBitExact(t *testing.T) {
	c64 := CodecFor[float64]()
	for _, bits := range float64Bits {
		got, enc := encodeDecode(t, c64, math.Float64frombits(bits))
		if len(enc) != 8 {
			t.Errorf("float64 %#x encodes to %d bytes", bits, len(enc))
		}
		if math.Float64bits(got) != bits {
			t.Errorf("float64 %#x came back as %#x", bits, math.Float64bits(got))
		}
	}
	c32 := CodecFor[float32]()
	for _, bits := range float32Bits {
		got, enc := encodeDecode(t, c32, math.Float32frombits(bits))
		if len(enc) != 4 {
			t.Errorf("float32 %#x encodes to %d bytes", bits, len(enc))
		}
		if math.Float32bits(got) != bits {
			t.Errorf("float32 %#x came back as %#x", bits, math.Float32bits(got))
		}
	}
}

func TestCodecBool(t *testing.T) {
	roundTripEqual(t, true)
	roundTripEqual(t, false)
	backToBack(t, true, false)
	if _, _, err := CodecFor[bool]().Decode([]byte{2}); err == nil {
		t.Error("decoding bool byte 2 succeeded")
	}
	type flags struct{ A, b bool }
	roundTripEqual(t, flags{true, true})
	if _, _, err := CodecFor[flags]().Decode([]byte{1, 7}); err == nil {
		t.Error("decoding bool field byte 7 succeeded")
	}
}

func TestCodecScalarsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		raw := string(rapid.SliceOf(rapid.Byte()).Draw(t, "raw"))
		b := rapid.SliceOf(rapid.Byte()).Draw(t, "b")
		i64 := rapid.Int64().Draw(t, "i64")
		u64 := rapid.Uint64().Draw(t, "u64")
		i32 := rapid.Int32().Draw(t, "i32")
		i16 := rapid.Int16().Draw(t, "i16")
		i8 := rapid.Int8().Draw(t, "i8")
		u16 := rapid.Uint16().Draw(t, "u16")
		f64 := math.Float64frombits(rapid.Uint64().Draw(t, "f64bits"))
		f32 := math.Float32frombits(rapid.Uint32().Draw(t, "f32bits"))
		flag := rapid.Bool().Draw(t, "flag")

		roundTripEqual(t, s)
		roundTripEqual(t, raw)
		if got, _ := encodeDecode(t, CodecFor[[]byte](), b); !bytes.Equal(got, b) {
			t.Errorf("[]byte % x came back as % x", b, got)
		}
		roundTripEqual(t, i64)
		roundTripEqual(t, int(i64))
		roundTripEqual(t, u64)
		roundTripEqual(t, uint(u64))
		roundTripEqual(t, i32)
		roundTripEqual(t, uint32(u64))
		roundTripEqual(t, i16)
		roundTripEqual(t, u16)
		roundTripEqual(t, i8)
		roundTripEqual(t, uint8(u64))
		roundTripEqual(t, flag)
		if got, _ := encodeDecode(t, CodecFor[float64](), f64); math.Float64bits(got) != math.Float64bits(f64) {
			t.Errorf("float64 %#x came back as %#x", math.Float64bits(f64), math.Float64bits(got))
		}
		if got, _ := encodeDecode(t, CodecFor[float32](), f32); math.Float32bits(got) != math.Float32bits(f32) {
			t.Errorf("float32 %#x came back as %#x", math.Float32bits(f32), math.Float32bits(got))
		}
	})
}

// Types for the reflection codec.

type codecLeaf struct {
	Name  string
	Score float64
	tags  []string
}

type codecRecord struct {
	ID      int64
	Count   uint32
	Small   int8
	Ratio   float32
	Flag    bool
	Name    string
	Raw     []byte
	Empty   []byte
	NilRaw  []byte
	Leaf    codecLeaf
	Ptr     *codecLeaf
	NilPtr  *codecLeaf
	Leaves  []codecLeaf
	Counts  map[string]int
	NoMap   map[string]int
	Fixed   [3]int16
	When    time.Time
	Elapsed time.Duration

	private int
	secret  string
	created time.Time
	hidden  codecLeaf
	blob    []byte
	hiddenP *codecLeaf
	grid    [2][2]uint8
	lookup  map[int32][]string
}

func sampleRecord() codecRecord {
	return codecRecord{
		ID: -42, Count: 7, Small: -128, Ratio: 0.25, Flag: true, Name: "record",
		Raw: []byte{0, 1, 2}, Empty: []byte{},
		Leaf:    codecLeaf{Name: "leaf", Score: 1.5, tags: []string{"x", ""}},
		Ptr:     &codecLeaf{Name: "pointed", Score: -3, tags: []string{}},
		Leaves:  []codecLeaf{{Name: "a"}, {Name: "b", Score: 2, tags: []string{"t"}}},
		Counts:  map[string]int{"one": 1, "minus": -1, "": 0},
		NoMap:   map[string]int{},
		Fixed:   [3]int16{-1, 0, math.MaxInt16},
		When:    time.Date(2024, 3, 1, 12, 30, 45, 123456789, time.UTC),
		Elapsed: 90 * time.Second,
		private: 99, secret: "s3cret",
		created: time.Date(1999, 12, 31, 23, 59, 59, 1, time.UTC),
		hidden:  codecLeaf{Name: "hidden", tags: []string{"deep"}},
		blob:    []byte("blob"),
		hiddenP: &codecLeaf{Name: "hidden pointer"},
		grid:    [2][2]uint8{{1, 2}, {3, 255}},
		lookup:  map[int32][]string{-5: {"a"}, 7: nil, 8: {}},
	}
}

type node struct {
	V    int
	Next *node
}

type tree struct {
	Val  string
	Kids []tree
}

type mutualA struct {
	B *mutualB
	N int
}

type mutualB struct {
	A    *mutualA
	Name string
}

type myInt int
type myStrings []string
type myString string
type myBytes []byte
type myMap map[myString]myInt

type namedFields struct {
	I myInt
	S myStrings
	B myBytes
	M myMap
	c myString
}

func TestReflectCodecStructRoundTrip(t *testing.T) {
	roundTripEqual(t, sampleRecord())
	roundTripEqual(t, codecRecord{})
	backToBack(t, sampleRecord(), codecRecord{Name: "second", private: 1})
	backToBack(t, codecRecord{}, sampleRecord())

	// Unexported fields must really come back, not just stay zero on both
	// sides.
	got, _ := encodeDecode(t, CodecFor[codecRecord](), sampleRecord())
	if got.private != 99 || got.secret != "s3cret" || got.hidden.tags[0] != "deep" || got.hiddenP == nil || got.hiddenP.Name != "hidden pointer" || string(got.blob) != "blob" || !got.created.Equal(sampleRecord().created) {
		t.Errorf("unexported fields lost: %#v", got)
	}
	if got.Empty == nil || got.NilRaw != nil || got.NoMap == nil || got.NilPtr != nil || got.lookup[7] != nil || got.lookup[8] == nil {
		t.Errorf("nil and empty not told apart: Empty=%#v NilRaw=%#v NoMap=%#v NilPtr=%v lookup=%#v", got.Empty, got.NilRaw, got.NoMap, got.NilPtr, got.lookup)
	}
}

func TestReflectCodecContainers(t *testing.T) {
	roundTripEqual(t, []codecLeaf{{Name: "x"}, {}})
	roundTripEqual(t, []codecLeaf(nil))
	roundTripEqual(t, []codecLeaf{})
	roundTripEqual(t, map[string]int{"a": 1, "b": 2})
	roundTripEqual(t, map[string]int(nil))
	roundTripEqual(t, [4]string{"a", "", "c"})
	roundTripEqual(t, [0]int{})
	roundTripEqual(t, &codecLeaf{Name: "p"})
	roundTripEqual(t, (*codecLeaf)(nil))
	roundTripEqual(t, [][]byte{nil, {}, {1}})
	roundTripEqual(t, map[[2]int]*string{{1, 2}: new("v"), {3, 4}: nil})
	roundTripEqual(t, time.Date(2000, 1, 2, 3, 4, 5, 6, time.UTC))
	roundTripEqual(t, time.Time{})
	roundTripEqual(t, complex(1.5, -2))
}

func TestReflectCodecTimeZone(t *testing.T) {
	type stamped struct {
		At time.Time
		at time.Time
	}
	zone := time.FixedZone("X", 5*3600+30*60)
	in := stamped{At: time.Date(2021, 6, 7, 8, 9, 10, 11, zone), at: time.Date(2022, 1, 1, 0, 0, 0, 0, zone)}
	got, _ := encodeDecode(t, CodecFor[stamped](), in)
	for _, p := range [][2]time.Time{{got.At, in.At}, {got.at, in.at}} {
		_, gotOff := p[0].Zone()
		_, wantOff := p[1].Zone()
		if !p[0].Equal(p[1]) || gotOff != wantOff {
			t.Errorf("time %v came back as %v", p[1], p[0])
		}
	}
}

func TestReflectCodecRecursiveTypes(t *testing.T) {
	list := &node{V: 1, Next: &node{V: -2, Next: &node{V: 3, Next: &node{V: math.MaxInt}}}}
	roundTripEqual(t, list)
	roundTripEqual(t, *list)
	roundTripEqual(t, node{})
	backToBack(t, *list, node{V: 5})

	roundTripEqual(t, tree{Val: "root", Kids: []tree{{Val: "a", Kids: []tree{{Val: "a1"}, {Val: "a2", Kids: []tree{}}}}, {Val: "b"}}})
	roundTripEqual(t, mutualA{N: 1, B: &mutualB{Name: "b", A: &mutualA{N: 2, B: &mutualB{Name: "end"}}}})

	for _, err := range []error{CheckCodec[node](), CheckCodec[*node](), CheckCodec[tree](), CheckCodec[mutualA](), CheckCodec[mutualB]()} {
		if err != nil {
			t.Errorf("CheckCodec of a recursive type: %v", err)
		}
	}
}

func TestReflectCodecNamedTypes(t *testing.T) {
	roundTripEqual(t, myInt(-7))
	roundTripEqual(t, myStrings{"a", "b"})
	roundTripEqual(t, myStrings(nil))
	roundTripEqual(t, myString("named"))
	roundTripEqual(t, myBytes{1, 2})
	roundTripEqual(t, myBytes{})
	roundTripEqual(t, myBytes(nil))
	roundTripEqual(t, namedFields{I: 3, S: myStrings{"x"}, B: myBytes{}, M: myMap{"k": 4}, c: "c"})
	backToBack(t, myStrings{"one"}, myStrings{"two", "three"})
	for _, err := range []error{CheckCodec[myInt](), CheckCodec[myStrings](), CheckCodec[namedFields]()} {
		if err != nil {
			t.Errorf("CheckCodec of a named type: %v", err)
		}
	}
}

type floatFields struct {
	A float64
	b float32
	C [2]float64
	D []float32
	E *float64
}

func floatFieldBits(f floatFields) []uint64 {
	bits := []uint64{math.Float64bits(f.A), uint64(math.Float32bits(f.b)), math.Float64bits(f.C[0]), math.Float64bits(f.C[1])}
	for _, d := range f.D {
		bits = append(bits, uint64(math.Float32bits(d)))
	}
	if f.E != nil {
		bits = append(bits, math.Float64bits(*f.E))
	}
	return bits
}

// TestReflectCodecFloatFieldsBitExact checks that float fields of a struct
// keep their exact bits (NaN payloads, infinities, -0), as the reflection
// codec promises.
func TestReflectCodecFloatFieldsBitExact(t *testing.T) {
	c := CodecFor[floatFields]()
	for i, b64 := range float64Bits {
		b32 := float32Bits[i%len(float32Bits)]
		f64 := math.Float64frombits(b64)
		f32 := math.Float32frombits(b32)
		in := floatFields{A: f64, b: f32, C: [2]float64{f64, -f64}, D: []float32{f32, -f32}, E: &f64}
		got, _ := encodeDecode(t, c, in)
		if g, w := floatFieldBits(got), floatFieldBits(in); !reflect.DeepEqual(g, w) {
			t.Errorf("float fields %#x / %#x came back with bits %#x, want %#x", b64, b32, g, w)
		}
	}
}

func TestReflectCodecFloatFieldsProperty(t *testing.T) {
	c := CodecFor[floatFields]()
	rapid.Check(t, func(t *rapid.T) {
		f64 := math.Float64frombits(rapid.Uint64().Draw(t, "f64"))
		f32 := math.Float32frombits(rapid.Uint32().Draw(t, "f32"))
		in := floatFields{A: f64, b: f32, C: [2]float64{-f64, f64}, D: []float32{f32}, E: &f64}
		got, _ := encodeDecode(t, c, in)
		if g, w := floatFieldBits(got), floatFieldBits(in); !reflect.DeepEqual(g, w) {
			t.Errorf("float fields came back with bits %#x, want %#x", g, w)
		}
	})
}

func genLeaf() *rapid.Generator[codecLeaf] {
	return rapid.Custom(func(t *rapid.T) codecLeaf {
		return codecLeaf{
			Name:  rapid.String().Draw(t, "name"),
			Score: rapid.Float64().Draw(t, "score"),
			tags:  rapid.SliceOfN(rapid.String(), 0, 3).Draw(t, "tags"),
		}
	})
}

func genRecord() *rapid.Generator[codecRecord] {
	maybeNilBytes := rapid.OneOf(rapid.Just([]byte(nil)), rapid.SliceOf(rapid.Byte()))
	maybeNilLeaf := rapid.OneOf(rapid.Just((*codecLeaf)(nil)), rapid.Map(genLeaf(), func(l codecLeaf) *codecLeaf { return &l }))
	genTime := rapid.Custom(func(t *rapid.T) time.Time {
		return time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec")).UTC()
	})
	return rapid.Custom(func(t *rapid.T) codecRecord {
		return codecRecord{
			ID:      rapid.Int64().Draw(t, "id"),
			Count:   rapid.Uint32().Draw(t, "count"),
			Small:   rapid.Int8().Draw(t, "small"),
			Ratio:   rapid.Float32().Draw(t, "ratio"),
			Flag:    rapid.Bool().Draw(t, "flag"),
			Name:    rapid.String().Draw(t, "name"),
			Raw:     maybeNilBytes.Draw(t, "raw"),
			Leaf:    genLeaf().Draw(t, "leaf"),
			Ptr:     maybeNilLeaf.Draw(t, "ptr"),
			Leaves:  rapid.SliceOfN(genLeaf(), 0, 3).Draw(t, "leaves"),
			Counts:  rapid.MapOfN(rapid.String(), rapid.Int(), 0, 4).Draw(t, "counts"),
			Fixed:   [3]int16{rapid.Int16().Draw(t, "f0"), rapid.Int16().Draw(t, "f1"), rapid.Int16().Draw(t, "f2")},
			When:    genTime.Draw(t, "when"),
			Elapsed: time.Duration(rapid.Int64().Draw(t, "elapsed")),
			private: rapid.Int().Draw(t, "private"),
			secret:  rapid.String().Draw(t, "secret"),
			created: genTime.Draw(t, "created"),
			hidden:  genLeaf().Draw(t, "hidden"),
			blob:    maybeNilBytes.Draw(t, "blob"),
			hiddenP: maybeNilLeaf.Draw(t, "hiddenP"),
			grid:    [2][2]uint8{{rapid.Uint8().Draw(t, "g00"), 0}, {0, rapid.Uint8().Draw(t, "g11")}},
			lookup:  rapid.MapOfN(rapid.Int32(), rapid.SliceOfN(rapid.String(), -1, 2), 0, 3).Draw(t, "lookup"),
		}
	})
}

func TestReflectCodecStructProperty(t *testing.T) {
	c := CodecFor[codecRecord]()
	rapid.Check(t, func(t *rapid.T) {
		// rapid.Float64/Float32 never give NaN, so DeepEqual is exact here.
		a := genRecord().Draw(t, "a")
		b := genRecord().Draw(t, "b")
		got, _ := encodeDecode(t, c, a)
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, a)
		}
		backToBack(t, a, b)
	})
}

// TestReflectCodecAppendIsDeterministic checks the Codec contract: equal
// values give equal bytes. Maps are iterated in random order, so a codec
// that writes them in iteration order breaks it.
func TestReflectCodecAppendIsDeterministic(t *testing.T) {
	c := CodecFor[codecRecord]()
	v := sampleRecord()
	v.Counts = map[string]int{}
	for i := range 32 {
		v.Counts[fmt.Sprint("k", i)] = i
	}
	first := c.Append(nil, v)
	for i := range 20 {
		if again := c.Append(nil, v); !bytes.Equal(again, first) {
			at := 0
			for at < len(first) && at < len(again) && first[at] == again[at] {
				at++
			}
			t.Fatalf("encoding the same value again (attempt %d) gave different bytes: %d and %d bytes, first difference at offset %d", i, len(first), len(again), at)
		}
	}
}

// TestReflectCodecZeroSizeElements checks slices whose elements encode to
// no bytes at all (struct{}, [0]T).
func TestReflectCodecZeroSizeElements(t *testing.T) {
	type set struct {
		Marks []struct{}
		Empty [0]int
		N     int
	}
	roundTripEqual(t, []struct{}{{}, {}, {}})
	roundTripEqual(t, set{Marks: make([]struct{}, 5), N: 1})
	roundTripEqual(t, [][0]int{{}, {}})
	roundTripEqual(t, map[string]struct{}{"a": {}, "b": {}})
}

type timeHolder struct {
	When time.Time
	when time.Time
}

// TestReflectCodecMarshalerInsideMap checks types encoded through
// encoding.BinaryMarshaler in places reflection cannot address: map keys and
// values, exported and unexported fields.
func TestReflectCodecMarshalerInsideMap(t *testing.T) {
	at := time.Date(2020, 2, 29, 1, 2, 3, 4, time.UTC)
	roundTripEqual(t, map[string]time.Time{"a": at})
	roundTripEqual(t, map[time.Time]int{at: 1})
	roundTripEqual(t, map[string]timeHolder{"h": {When: at, when: at.Add(time.Hour)}})
	type outer struct{ m map[string]timeHolder }
	roundTripEqual(t, outer{m: map[string]timeHolder{"h": {when: at}}})
}

// Types CheckCodec must refuse.

type badFunc struct {
	A int
	F func()
}

type badChan struct {
	C chan int
}

type badAny struct {
	Name  string
	Value any
}

type badError struct{ err error }

type badInner struct {
	OK int
	F  func(int) int
}

type badNested struct {
	Name  string
	Inner badInner
}

type badViaPointer struct{ P *badInner }
type badViaSlice struct{ S []badInner }
type badViaMap struct{ M map[string]badInner }
type badViaMapKey struct{ M map[chan int]int }
type badArrayElem struct{ C chan string }
type badViaArray struct{ A [2]badArrayElem }

type badRecursive struct {
	Next *badRecursive
	Hook func()
}

func TestCheckCodecAccepts(t *testing.T) {
	for name, err := range map[string]error{
		"string":        CheckCodec[string](),
		"[]byte":        CheckCodec[[]byte](),
		"int":           CheckCodec[int](),
		"uint8":         CheckCodec[uint8](),
		"float32":       CheckCodec[float32](),
		"bool":          CheckCodec[bool](),
		"codecRecord":   CheckCodec[codecRecord](),
		"*codecRecord":  CheckCodec[*codecRecord](),
		"[]codecRecord": CheckCodec[[]codecRecord](),
		"node":          CheckCodec[node](),
		"tree":          CheckCodec[tree](),
		"time.Time":     CheckCodec[time.Time](),
		"myStrings":     CheckCodec[myStrings](),
		"map":           CheckCodec[map[string][]int](),
	} {
		if err != nil {
			t.Errorf("CheckCodec[%s] = %v, want nil", name, err)
		}
	}
}

func TestCheckCodecRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		path string
	}{
		{"func", CheckCodec[badFunc](), "badFunc.F"},
		{"chan", CheckCodec[badChan](), "badChan.C"},
		{"any", CheckCodec[badAny](), "badAny.Value"},
		{"error", CheckCodec[badError](), "badError.err"},
		{"nested", CheckCodec[badNested](), "badNested.Inner.F"},
		{"pointer", CheckCodec[badViaPointer](), "badViaPointer.P.F"},
		{"slice", CheckCodec[badViaSlice](), "badViaSlice.S[].F"},
		{"map value", CheckCodec[badViaMap](), "badViaMap.M[value].F"},
		{"map key", CheckCodec[badViaMapKey](), "badViaMapKey.M[key]"},
		{"array", CheckCodec[badViaArray](), "badViaArray.A[i].C"},
		{"recursive", CheckCodec[badRecursive](), "badRecursive.Hook"},
		// Top-level types differ from the field types above: CheckCodec
		// remembers the answer for a top-level type.
		{"top-level func", CheckCodec[func(string) int](), "func(string) int"},
		{"top-level interface", CheckCodec[interface{ Marker() }](), "interface { Marker() }"},
		{"slice of chan", CheckCodec[[]chan bool](), "[]chan bool"},
	} {
		if tc.err == nil {
			t.Errorf("%s: CheckCodec = nil, want an error naming %q", tc.name, tc.path)
			continue
		}
		if !strings.Contains(tc.err.Error(), tc.path) {
			t.Errorf("%s: CheckCodec = %q, want it to name %q", tc.name, tc.err, tc.path)
		}
	}

	// The codec of such a type refuses to decode (and CheckCodec keeps
	// answering the same).
	if _, _, err := CodecFor[badNested]().Decode([]byte{0, 0}); err == nil {
		t.Error("the codec of a type with a func field decoded a value")
	}
	if err := CheckCodec[badNested](); err == nil || !strings.Contains(err.Error(), "badNested.Inner.F") {
		t.Errorf("second CheckCodec[badNested] = %v", err)
	}
}

type orderMarker interface{ orderMarker() }

type orderInner struct {
	OK   string
	Hook func(orderInner) bool
}

type orderIface struct {
	Name string
	V    orderMarker
}

type orderOuter struct {
	Name  string
	Inner orderInner
}

// TestCheckCodecPathDoesNotDependOnOrder checks that the path CheckCodec
// names for a nested bad field is the path inside the type asked about, even
// when the inner type was checked on its own before.
func TestCheckCodecPathDoesNotDependOnOrder(t *testing.T) {
	if err := CheckCodec[orderInner](); err == nil || !strings.Contains(err.Error(), "orderInner.Hook") {
		t.Fatalf("CheckCodec[orderInner] = %v", err)
	}
	err := CheckCodec[orderOuter]()
	if err == nil || !strings.Contains(err.Error(), "orderOuter.Inner.Hook") {
		t.Errorf("CheckCodec[orderOuter] after CheckCodec[orderInner] = %v, want it to name orderOuter.Inner.Hook", err)
	}

	// The same through a field of interface type, after the interface
	// type was checked on its own (a stream of that type, say).
	if err := CheckCodec[orderMarker](); err == nil {
		t.Fatal("CheckCodec of an interface type = nil")
	}
	err = CheckCodec[orderIface]()
	if err == nil || !strings.Contains(err.Error(), "orderIface.V") {
		t.Errorf("CheckCodec[orderIface] after CheckCodec[orderMarker] = %v, want it to name orderIface.V", err)
	}
}

// truncationCases returns the encoding of a few values of the struct type
// used for truncation tests.
func truncationCases() [][]byte {
	c := CodecFor[codecRecord]()
	return [][]byte{
		c.Append(nil, sampleRecord()),
		c.Append(nil, codecRecord{}),
		CodecFor[tree]().Append(nil, tree{Val: "r", Kids: []tree{{Val: "k", Kids: []tree{{}}}}}),
	}
}

func decodeAny(i int, b []byte) (err error) {
	switch i {
	case 2:
		_, _, err = CodecFor[tree]().Decode(b)
	default:
		_, _, err = CodecFor[codecRecord]().Decode(b)
	}
	return err
}

func TestReflectCodecTruncatedInput(t *testing.T) {
	for i, full := range truncationCases() {
		if err := decodeAny(i, full); err != nil {
			t.Fatalf("case %d: decoding the full input: %v", i, err)
		}
		for cut := 0; cut < len(full); cut++ {
			var err error
			if !callNoPanic(t, fmt.Sprintf("case %d: decoding %d of %d bytes", i, cut, len(full)), func() {
				err = decodeAny(i, append([]byte(nil), full[:cut]...))
			}) {
				continue
			}
			if err == nil {
				t.Errorf("case %d: decoding %d of %d bytes succeeded", i, cut, len(full))
			}
		}
	}
}

// TestReflectCodecTruncatedInputIsShortBuffer checks the documented error:
// ErrShortBuffer is wrapped when the input ends in the middle of a value.
func TestReflectCodecTruncatedInputIsShortBuffer(t *testing.T) {
	for i, full := range truncationCases() {
		for cut := 0; cut < len(full); cut++ {
			var err error
			callNoPanic(t, "decoding", func() { err = decodeAny(i, full[:cut]) })
			if err != nil && !errors.Is(err, ErrShortBuffer) {
				t.Errorf("case %d: decoding %d of %d bytes: %v, want it to wrap ErrShortBuffer", i, cut, len(full), err)
				break
			}
		}
	}
	for name, err := range map[string]error{
		"string":  func() error { _, _, err := CodecFor[string]().Decode([]byte{5, 'a'}); return err }(),
		"bytes":   func() error { _, _, err := CodecFor[[]byte]().Decode([]byte{}); return err }(),
		"int":     func() error { _, _, err := CodecFor[int32]().Decode([]byte{1, 2, 3}); return err }(),
		"float64": func() error { _, _, err := CodecFor[float64]().Decode(make([]byte, 7)); return err }(),
		"float32": func() error { _, _, err := CodecFor[float32]().Decode(make([]byte, 3)); return err }(),
		"bool":    func() error { _, _, err := CodecFor[bool]().Decode(nil); return err }(),
	} {
		if !errors.Is(err, ErrShortBuffer) {
			t.Errorf("%s: truncated input gave %v, want ErrShortBuffer", name, err)
		}
	}
}

func TestCodecRejectsHugeLengths(t *testing.T) {
	// A length prefix far beyond the input must be an error, not an
	// allocation or a panic.
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}
	callNoPanic(t, "decoding huge lengths", func() {
		if _, _, err := CodecFor[string]().Decode(huge); err == nil {
			t.Error("string with a huge length decoded")
		}
		if _, _, err := CodecFor[[]byte]().Decode(huge); err == nil {
			t.Error("[]byte with a huge length decoded")
		}
		if _, _, err := CodecFor[[]int]().Decode(huge); err == nil {
			t.Error("[]int with a huge length decoded")
		}
		if _, _, err := CodecFor[map[int]int]().Decode(huge); err == nil {
			t.Error("map with a huge length decoded")
		}
		if _, _, err := CodecFor[myBytes]().Decode(huge); err == nil {
			t.Error("named []byte with a huge length decoded")
		}
		if _, _, err := CodecFor[codecRecord]().Decode(huge); err == nil {
			t.Error("struct with a huge field decoded")
		}
	})
	// An integer that does not fit its field is refused.
	type small struct{ V int8 }
	if _, _, err := CodecFor[small]().Decode(CodecFor[struct{ V int64 }]().Append(nil, struct{ V int64 }{1000})); err == nil {
		t.Error("1000 decoded into an int8 field")
	}
}

// fuzzRecord is a moderately complex type without floats, so that decoded
// values compare with reflect.DeepEqual.
type fuzzRecord struct {
	ID     int64
	U      uint16
	Name   string
	Tags   []string
	Raw    []byte
	Flag   bool
	Counts map[string]int32
	Arr    [2]uint8
	Next   *fuzzRecord
	Items  []fuzzItem
	inner  fuzzItem
	p      *fuzzItem
}

type fuzzItem struct {
	K string
	v int
	B []byte
}

func FuzzReflectCodecDecode(f *testing.F) {
	c := CodecFor[fuzzRecord]()
	for _, v := range []fuzzRecord{
		{},
		{ID: -1, U: 65535, Name: "n", Tags: []string{"a", ""}, Raw: []byte{}, Flag: true, Counts: map[string]int32{"x": -3}, Arr: [2]uint8{1, 255}},
		{Next: &fuzzRecord{Name: "next", Next: &fuzzRecord{ID: 3}}, Items: []fuzzItem{{K: "k", v: 9, B: []byte{1}}}, inner: fuzzItem{v: -7}, p: &fuzzItem{K: "p"}},
	} {
		f.Add(c.Append(nil, v))
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 2, 3, 'a', 'b', 'c', 3, 1, 'x', 0, 1, 2, 7, 1, 1, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, n, err := c.Decode(data)
		if err != nil {
			return
		}
		if n < 0 || n > len(data) {
			t.Fatalf("Decode consumed %d of %d bytes", n, len(data))
		}
		enc := c.Append(nil, v)
		v2, n2, err := c.Decode(enc)
		if err != nil {
			t.Fatalf("re-decoding %#v: %v", v, err)
		}
		if n2 != len(enc) {
			t.Fatalf("re-decoding consumed %d of %d bytes", n2, len(enc))
		}
		if !reflect.DeepEqual(v, v2) {
			t.Fatalf("value changed on re-encoding:\n%#v\n%#v", v, v2)
		}
	})
}

// Fresh types, compiled for the first time by TestCodecForConcurrent.
type concShared struct {
	Name  string
	Tags  []string
	When  time.Time
	count int
}

type concA struct {
	S    concShared
	Next *concA
	M    map[string]concShared
}

type concB struct {
	List []concShared
	B    *concB
	n    int
}

func TestCodecForConcurrent(t *testing.T) {
	at := time.Date(2023, 5, 6, 7, 8, 9, 10, time.UTC)
	a := concA{S: concShared{Name: "s", Tags: []string{"t"}, When: at, count: 3}, Next: &concA{M: map[string]concShared{"k": {Name: "v", count: 4}}}}
	b := concB{List: []concShared{{Name: "l"}, {}}, B: &concB{n: 2}, n: 1}

	const workers = 32
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			<-start
			if i%2 == 0 {
				if err := CheckCodec[concA](); err != nil {
					t.Errorf("CheckCodec[concA]: %v", err)
				}
				c := CodecFor[concA]()
				for range 20 {
					got, n, err := c.Decode(c.Append(nil, a))
					if err != nil || n == 0 || !reflect.DeepEqual(got, a) {
						t.Errorf("concA round trip: %#v, %d, %v", got, n, err)
						return
					}
				}
			} else {
				c := CodecFor[concB]()
				if err := CheckCodec[concB](); err != nil {
					t.Errorf("CheckCodec[concB]: %v", err)
				}
				for range 20 {
					got, n, err := c.Decode(c.Append(nil, b))
					if err != nil || n == 0 || !reflect.DeepEqual(got, b) {
						t.Errorf("concB round trip: %#v, %d, %v", got, n, err)
						return
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
}

type hashedKey struct{ a, b int64 }

// hashedKeyCodec hashes a key by its a alone.
type hashedKeyCodec struct{ Codec[hashedKey] }

func (hashedKeyCodec) HashKey(k hashedKey) uint64 { return HashUint64(uint64(k.a)) }

func TestHasherForUsesKeyHasher(t *testing.T) {
	h := HasherFor[hashedKey](hashedKeyCodec{CodecFor[hashedKey]()})
	if h(hashedKey{1, 2}) != h(hashedKey{1, 3}) || h(hashedKey{1, 2}) != HashUint64(1) {
		t.Fatal("HasherFor does not hash with the codec's HashKey")
	}
	plain := HasherFor(CodecFor[hashedKey]())
	if plain(hashedKey{1, 2}) == plain(hashedKey{1, 3}) {
		t.Fatal("keys that differ hash alike without a KeyHasher")
	}
}
