package types

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/state"
)

func TestFromASTAndString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"BIGINT NOT NULL", "BIGINT NOT NULL"},
		{"INTEGER", "INT"},
		{"DECIMAL", "DECIMAL(10, 0)"},
		{"NUMERIC(10,2)", "DECIMAL(10, 2)"},
		{"VARCHAR(2147483647)", "STRING"},
		{"STRING", "STRING"},
		{"VARCHAR(10)", "VARCHAR(10)"},
		{"CHAR", "CHAR(1)"},
		{"BYTES", "BYTES"},
		{"TIMESTAMP", "TIMESTAMP(6)"},
		{"TIMESTAMP(3)", "TIMESTAMP(3)"},
		{"TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP_LTZ(3)"},
		{"TIMESTAMP_LTZ(3) NOT NULL", "TIMESTAMP_LTZ(3) NOT NULL"},
		{"TIME", "TIME(0)"},
		{"ARRAY<INT NOT NULL>", "ARRAY<INT NOT NULL>"},
		{"MAP<STRING, BIGINT>", "MAP<STRING, BIGINT>"},
		{"ROW<a INT, b STRING>", "ROW<`a` INT, `b` STRING>"},
		{"INTERVAL DAY TO SECOND(3)", "INTERVAL DAY TO SECOND"},
	} {
		dt, err := parser.ParseDataType(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		typ, err := FromAST(dt)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := typ.String(); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestFromASTErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"DECIMAL(39, 2)", "DECIMAL precision must be between 1 and 38 (both inclusive), not 39 at line 1, column 1"},
		{"DECIMAL(5, 6)", "DECIMAL scale must be between 0 and the precision 5"},
		{"TIMESTAMP(10)", "TIMESTAMP precision must be between 0 and 9"},
		{"VARCHAR(0)", "VARCHAR length must be between 1 and 2147483647"},
		{"ROW<a INT, a INT>", `duplicate field name "a"`},
	} {
		dt, err := parser.ParseDataType(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		_, err = FromAST(dt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	big1, _ := new(big.Int).SetString("-123456789012345678901234", 10)
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{Null, "NULL"},
		{Bool(true), "TRUE"},
		{Bool(false), "FALSE"},
		{Int8(-5), "-5"},
		{Int64(math.MinInt64), "-9223372036854775808"},
		{Float64(1), "1.0"},
		{Float64(0.001), "0.001"},
		{Float64(1e7), "1.0E7"},
		{Float64(1.5e-4), "1.5E-4"},
		{Float64(123456.789), "123456.789"},
		{Float64(math.NaN()), "NaN"},
		{Float64(math.Inf(-1)), "-Infinity"},
		{Float32(0.1), "0.1"},
		{Decimal(1250, 10, 2), "12.50"},
		{Decimal(-5, 10, 3), "-0.005"},
		{Decimal(7, 1, 0), "7"},
		{DecimalBig(big1, 38, 4), "-12345678901234567890.1234"},
		{String("héllo"), "héllo"},
		{Date(0), "1970-01-01"},
		{Date(-1), "1969-12-31"},
		{Date(16631), "2015-07-15"},
		{Time(3723_000_000_000, 0), "01:02:03"},
		{Time(3723_450_000_000, 3), "01:02:03.450"},
		{Timestamp(1436918401000, 0, 3), "2015-07-15 00:00:01.000"},
		{Timestamp(1436918401000, 0, 0), "2015-07-15 00:00:01"},
		{Timestamp(1436918401123, 456789, 9), "2015-07-15 00:00:01.123456789"},
		{Timestamp(-1, 0, 3), "1969-12-31 23:59:59.999"},
		{TimestampLTZ(0, 0, 3), "1970-01-01 00:00:00.000"},
		{IntervalMillis(5000), "+0 00:00:05.000"},
		{IntervalMillis(-90061001), "-1 01:01:01.001"},
		{IntervalMonths(14), "+1-02"},
		{Array([]Value{Int32(1), Null}), "[1, NULL]"},
		{Map([]Value{String("a")}, []Value{Int32(1)}), "{a=1}"},
		{RowValue([]Value{Int32(1), String("x")}), "(1, x)"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestCivil(t *testing.T) {
	for d := int64(-800000); d < 800000; d += 97 {
		y, m, dd := CivilFromDays(d)
		if back := DaysFromCivil(y, m, dd); back != d {
			t.Fatalf("%d -> %d-%d-%d -> %d", d, y, m, dd, back)
		}
	}
	if d, err := ParseDate("2015-07-15"); err != nil || d != 16631 {
		t.Fatalf("ParseDate: %d %v", d, err)
	}
	for _, bad := range []string{"2015-02-29", "2015-13-01", "x", "2015-1"} {
		if _, err := ParseDate(bad); err == nil {
			t.Errorf("ParseDate(%q) succeeded", bad)
		}
	}
	ms, ns, err := ParseTimestamp("2015-07-15T00:00:01.123456789")
	if err != nil || ms != 1436918401123 || ns != 456789 {
		t.Fatalf("ParseTimestamp: %d %d %v", ms, ns, err)
	}
}

func TestDecimalArithmetic(t *testing.T) {
	d := func(s string, p, sc int) Value {
		v, err := ParseDecimal(s, p, sc)
		if err != nil {
			t.Fatalf("ParseDecimal(%s): %v", s, err)
		}
		return v
	}
	check := func(what string, v Value, ok bool, want string) {
		t.Helper()
		got := "overflow"
		if ok {
			got = v.String()
		}
		if got != want {
			t.Errorf("%s: got %s, want %s", what, got, want)
		}
	}
	v, ok := DecimalAdd(d("1.25", 5, 2), d("0.005", 5, 3), 7, 3)
	check("add", v, ok, "1.255")
	v, ok = DecimalMul(d("100", 19, 0), d("0.908", 3, 3), 23, 3)
	check("mul", v, ok, "90.800")
	v, ok = DecimalMul(d("99999999999999999", 19, 0), d("999.999", 6, 3), 26, 3)
	check("mul big", v, ok, "99999899999999999000.001")
	v, ok, _ = DecimalDiv(d("1", 10, 0), d("3", 10, 0), 23, 11)
	check("div", v, ok, "0.33333333333")
	v, ok, _ = DecimalDiv(d("2", 10, 0), d("3", 10, 0), 23, 2)
	check("div round", v, ok, "0.67")
	v, ok, _ = DecimalDiv(d("-2", 10, 0), d("3", 10, 0), 23, 2)
	check("div round neg", v, ok, "-0.67")
	_, _, err := DecimalDiv(d("1", 10, 0), d("0", 10, 0), 23, 2)
	if err != ErrDivisionByZero {
		t.Errorf("div by zero: %v", err)
	}
	v, ok, _ = DecimalMod(d("-7.5", 5, 1), d("2", 5, 0), 5, 1)
	check("mod", v, ok, "-1.5")
	v, ok = DecimalAdd(d("999", 3, 0), d("1", 3, 0), 3, 0)
	check("overflow", v, ok, "overflow")
	v, ok = RescaleDecimal(d("2.345", 5, 3), 4, 2)
	check("rescale half up", v, ok, "2.35")
	v, ok = RescaleDecimal(d("-2.345", 5, 3), 4, 2)
	check("rescale half up neg", v, ok, "-2.35")
	v, ok = DecimalFromFloat64(0.1, 10, 5)
	check("from float", v, ok, "0.10000")
	if c := CompareDecimal(d("1.50", 5, 2), d("1.5", 5, 1)); c != 0 {
		t.Errorf("compare across scales: %d", c)
	}
	if _, err := ParseDecimal("1.2.3", 10, 2); err == nil {
		t.Error("ParseDecimal accepted 1.2.3")
	}
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b Value
		want int
	}{
		{Int32(1), Int64(2), -1},
		{Int32(2), Float64(1.5), 1},
		{Decimal(150, 5, 2), Int32(1), 1},
		{Decimal(150, 5, 2), Float64(1.5), 0},
		{String("a"), String("b"), -1},
		{String("é"), String("z"), 1}, // UTF-8 byte order
		{Bool(false), Bool(true), -1},
		{Timestamp(1, 5, 9), Timestamp(1, 4, 9), 1},
		{Float64(math.NaN()), Float64(math.Inf(1)), 1},
		{Float64(math.Copysign(0, -1)), Float64(0), -1},
		{Array([]Value{Int32(1), Int32(2)}), Array([]Value{Int32(1)}), 1},
	} {
		if got := Compare(tc.a, tc.b); got != tc.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	if !Equal(Null, Null) || Equal(Null, Int32(0)) {
		t.Error("Equal and NULL")
	}
}

func sampleRow() Row {
	big1, _ := new(big.Int).SetString("123456789012345678901234567", 10)
	return Row{Kind: changelog.UpdateAfter, Values: []Value{
		Null, NullOf(KindBigInt), Bool(true), Int8(-1), Int16(300), Int32(-70000), Int64(math.MaxInt64),
		Float32(1.5), Float64(math.Inf(-1)), Decimal(-12345, 10, 2), DecimalBig(big1, 38, 3), String(""), String("héllo"),
		Bytes([]byte{0, 1, 2}), Date(-5), Time(1_000_000, 3), Timestamp(-1, 999999, 9), TimestampLTZ(1436918401000, 0, 3),
		IntervalMillis(-5), IntervalMonths(3),
		Array([]Value{Int32(1), Null}), Map([]Value{String("k")}, []Value{Float64(2)}), RowValue([]Value{String("x"), Array(nil)}),
	}}
}

func rowsEqual(a, b Row) bool {
	if a.Kind != b.Kind || len(a.Values) != len(b.Values) {
		return false
	}
	for i := range a.Values {
		if string(AppendKey(nil, a.Values[i])) != string(AppendKey(nil, b.Values[i])) {
			return false
		}
	}
	return true
}

func TestRowCodecRoundTrip(t *testing.T) {
	r := sampleRow()
	b, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Row
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !rowsEqual(r, got) || r.String() != got.String() {
		t.Fatalf("round trip:\n%s\n%s", r, got)
	}
	// Every truncation fails cleanly, and CheckRow says so too.
	for i := 0; i < len(b); i++ {
		var x Row
		if err := x.UnmarshalBinary(b[:i]); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
		if _, err := CheckRow(b[:i]); err == nil {
			t.Fatalf("truncated at %d checked", i)
		}
	}
	if n, err := CheckRow(append(b, 0xff)); err != nil || n != len(b) {
		t.Fatalf("CheckRow of a row and a byte after it: %d, %v; want %d", n, err, len(b))
	}
	// The state package's reflection codec uses the marshalers.
	codec := state.CodecFor[Row]()
	enc := codec.Append(nil, r)
	dec, n, err := codec.Decode(enc)
	if err != nil || n != len(enc) || !rowsEqual(r, dec) {
		t.Fatalf("state codec: %v %d/%d", err, n, len(enc))
	}
	vc := state.CodecFor[[]Value]()
	venc := vc.Append(nil, r.Values)
	vdec, _, err := vc.Decode(venc)
	if err != nil || !rowsEqual(r, Row{Kind: r.Kind, Values: vdec}) {
		t.Fatalf("state codec of []Value: %v", err)
	}
}

func TestValueSize(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		v := Int64(5)
		_ = Float64(v.Float64())
		_ = Timestamp(1, 2, 9)
		_ = Decimal(1, 5, 2)
	}); n != 0 {
		t.Fatalf("scalar constructors allocate: %v", n)
	}
}

func FuzzRowCodec(f *testing.F) {
	b, _ := sampleRow().MarshalBinary()
	f.Add(b)
	f.Add([]byte{0, 1, byte(KindInt), 2})
	f.Add([]byte{3, 1, byte(KindArray), 1, byte(KindArray), 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Row
		if err := r.UnmarshalBinary(data); err != nil {
			return
		}
		_ = r.String()
		enc, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var r2 Row
		if err := r2.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		enc2, _ := r2.MarshalBinary()
		if string(enc) != string(enc2) {
			t.Fatalf("encoding not stable")
		}
		for i := range r.Values {
			for j := range r.Values {
				_ = Compare(r.Values[i], r.Values[j])
			}
		}
	})
}

// TestDecodeColumnsInto decodes columns of a row of every kind, alone and
// in random sets, and checks each against decoding the whole row; every
// truncation of the encoding fails without a panic.
func TestDecodeColumnsInto(t *testing.T) {
	vs := sampleRow().Values
	enc := string(AppendValues(nil, vs))
	all := make([]Value, len(vs))
	if _, err := DecodeValuesInto(all, enc); err != nil {
		t.Fatal(err)
	}
	check := func(cols []int) {
		t.Helper()
		got := make([]Value, len(vs))
		if err := DecodeColumnsInto(got, cols, enc); err != nil {
			t.Fatalf("columns %v: %v", cols, err)
		}
		for _, c := range cols {
			if string(AppendKey(nil, got[c])) != string(AppendKey(nil, all[c])) {
				t.Fatalf("columns %v: column %d decoded as %v, want %v", cols, c, got[c], all[c])
			}
		}
	}
	for c := range vs {
		check([]int{c})
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var cols []int
		for c := range vs {
			if rnd.IntN(4) == 0 {
				cols = append(cols, c)
			}
		}
		check(cols)
	}
	last := []int{len(vs) - 1}
	for i := range len(enc) {
		if err := DecodeColumnsInto(make([]Value, len(vs)), last, enc[:i]); err == nil {
			t.Fatalf("truncated at %d of %d bytes: decoded", i, len(enc))
		}
	}
}

// wideRow is a row shaped as q9's output: an auction's columns, then a
// bid's, sorted by the bid's price and time (columns 12 and 13).
func wideRow() string {
	return string(AppendValues(nil, []Value{
		Int64(1000), String("itemname-abcdefgh"), String("a description of some length here"), Int64(12345), Int64(23456),
		Timestamp(1_700_000_000_000, 0, 3), Timestamp(1_700_000_010_000, 0, 3), Int64(1001), Int64(10),
		String("extra extra extra extra extra extra extra extra extra extra extra extra"),
		Int64(1000), Int64(2002), Int64(5000), Timestamp(1_700_000_005_000, 0, 3), String("bid extra bid extra bid extra"),
	}))
}

// BenchmarkDecodeSortColumns decodes the two sort columns of wideRow
// after passing over the twelve before them.
func BenchmarkDecodeSortColumns(b *testing.B) {
	src, dst, cols := wideRow(), make([]Value, 14), []int{12, 13}
	for range b.N {
		if err := DecodeColumnsInto(dst, cols, src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeLeadingColumns decodes wideRow's first fourteen columns,
// as a comparison by columns 12 and 13 did before DecodeColumnsInto.
func BenchmarkDecodeLeadingColumns(b *testing.B) {
	src, dst := wideRow(), make([]Value, 14)
	for range b.N {
		if _, err := DecodeValuesInto(dst, src); err != nil {
			b.Fatal(err)
		}
	}
}
