package filesystem

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

type allTypes struct {
	S    string
	B    bool
	I8   int8
	I    int
	U16  uint16
	U64  uint64
	F32  float32
	F64  float64
	Raw  []byte
	At   time.Time
	Addr netip.Addr
	skip int // unexported: not a column
}

func TestCSVRoundTripStruct(t *testing.T) {
	c, err := newCodec[allTypes](CSV)
	if err != nil {
		t.Fatal(err)
	}
	vals := []allTypes{
		{S: `a, "b"` + "\r\nc", B: true, I8: -128, I: -1 << 40, U16: 65535, U64: 1<<64 - 1, F32: 1.5, F64: -0.1,
			Raw: []byte{0, 1, 2, 255}, At: time.Date(2026, 11, 29, 1, 2, 3, 456789, time.UTC), Addr: netip.MustParseAddr("10.0.0.1")},
		{S: " leading space", At: time.Unix(0, 0).UTC(), Addr: netip.MustParseAddr("::1")},
		{S: "", At: time.Unix(1, 0).UTC(), Addr: netip.MustParseAddr("1.2.3.4")},
	}
	for _, v := range vals {
		b, err := c.appendRecord(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if b[len(b)-1] != '\n' {
			t.Fatalf("record %q does not end its line", b)
		}
		got, err := c.decode(b[:len(b)-1])
		if err != nil {
			t.Fatalf("decoding %q: %v", b, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip of %q:\n got %+v\nwant %+v", b, got, v)
		}
	}
}

func TestCSVRoundTripStrings(t *testing.T) {
	c, err := newCodec[[]string](CSV)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range [][]string{{}, {""}, {"", ""}, {"a", "b,c", `"q"`, "x\ny"}, {" t "}} {
		b, err := c.appendRecord(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.decode(b[:len(b)-1])
		if err != nil {
			t.Fatalf("decoding %q: %v", b, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip of %q: got %q, want %q", b, got, v)
		}
	}
}

func TestCSVQuotingIsRFC4180(t *testing.T) {
	c, _ := newCodec[[]string](CSV)
	b, _ := c.appendRecord(nil, []string{"plain", "with,comma", `with "quote"`, "two\nlines"})
	want := "plain,\"with,comma\",\"with \"\"quote\"\"\",\"two\nlines\"\n"
	if string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
}

func TestCodecErrors(t *testing.T) {
	type noExported struct{ a int }
	type withMap struct{ M map[string]int }
	for _, tc := range []struct {
		name string
		new  func() error
		want string
	}{
		{"unknown format", func() error { _, err := newCodec[allTypes]("xml"); return err }, `unknown format "xml"`},
		{"no format", func() error { _, err := newCodec[allTypes](""); return err }, "no format given"},
		{"csv of an int", func() error { _, err := newCodec[int](CSV); return err }, "csv needs a struct or []string record type, not int"},
		{"csv without columns", func() error { _, err := newCodec[noExported](CSV); return err }, "has no exported fields"},
		{"csv map field", func() error { _, err := newCodec[withMap](CSV); return err }, "field M has type map[string]int, which csv cannot hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.new()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCSVDecodeErrors(t *testing.T) {
	type pair struct {
		A string
		N int32
	}
	c, _ := newCodec[pair](CSV)
	for _, tc := range []struct{ in, want string }{
		{`"open,1`, "field 1: quoted field opened at byte 1 is not closed"},
		{`"a"x,1`, `field 1: 'x' after the closing quote at byte 4`},
		{`a"b,1`, "field 1: bare quote at byte 2 in an unquoted field"},
		{`a,1,2`, "record has 3 fields, want 2"},
		{`a`, "record has 1 fields, want 2"},
		{`a,x`, `field 2 (N): strconv.ParseInt: parsing "x": invalid syntax`},
		{`a,99999999999`, `field 2 (N): strconv.ParseInt: parsing "99999999999": value out of range`},
	} {
		_, err := c.decode([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("decoding %q: got %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	type typed struct {
		B  bool
		U  uint8
		F  float32
		R  []byte
		At time.Time
		IP netip.Addr
	}
	tc, _ := newCodec[typed](CSV)
	good := []string{"true", "1", "1.5", "AA==", "2026-01-01T00:00:00Z", "1.2.3.4"}
	bad := []string{"maybe", "256", "x", "!!", "yesterday", "999.1.1.1"}
	for i := range good {
		fields := append([]string(nil), good...)
		fields[i] = bad[i]
		if _, err := tc.decode([]byte(strings.Join(fields, ","))); err == nil || !strings.Contains(err.Error(), "field ") {
			t.Errorf("decoding bad column %d (%q): got %v, want an error naming the field", i+1, bad[i], err)
		}
	}
	if _, err := tc.decode([]byte(strings.Join(good, ","))); err != nil {
		t.Errorf("decoding %v: %v", good, err)
	}
}

func TestJSONErrors(t *testing.T) {
	type withChan struct{ C chan int }
	c, _ := newCodec[withChan](JSON)
	if _, err := c.appendRecord(nil, withChan{}); err == nil || !strings.Contains(err.Error(), "encoding json") {
		t.Errorf("encoding a chan: got %v", err)
	}
	d, _ := newCodec[allTypes](JSON)
	if _, err := d.decode([]byte(`{"S": 1}`)); err == nil || !strings.Contains(err.Error(), "decoding json") {
		t.Errorf("decoding a number into a string: got %v", err)
	}
}
