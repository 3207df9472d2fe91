package clink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/clinkstream/clink/state"
)

// point marshals and appends itself; its encoding depends on both fields,
// so a value that went through the wrong path would not decode back.
type point struct{ x, y int64 }

func (p point) AppendBinary(b []byte) ([]byte, error) {
	b = binary.AppendVarint(b, p.x)
	return binary.AppendVarint(b, p.y), nil
}

func (p point) MarshalBinary() ([]byte, error) { return p.AppendBinary(nil) }

func (p *point) UnmarshalBinary(data []byte) error {
	x, k := binary.Varint(data)
	if k <= 0 {
		return errors.New("bad x")
	}
	y, k2 := binary.Varint(data[k:])
	if k2 <= 0 || k+k2 != len(data) {
		return errors.New("bad y")
	}
	p.x, p.y = x, y
	return nil
}

// failing appends itself only for some values; the others must be encoded
// through the codec (MarshalBinary) all the same.
type failing struct{ v int64 }

func (f failing) AppendBinary(b []byte) ([]byte, error) {
	if f.v%2 == 1 {
		return append(b, 0xff), errors.New("odd")
	}
	return binary.AppendVarint(b, f.v), nil
}

func (f failing) MarshalBinary() ([]byte, error) { return binary.AppendVarint(nil, f.v), nil }

func (f *failing) UnmarshalBinary(data []byte) error {
	v, k := binary.Varint(data)
	if k != len(data) {
		return errors.New("bad v")
	}
	f.v = v
	return nil
}

// A port encodes a batch's records from any index on exactly as the codec
// encodes each value, whether the value appends itself (the in-place path
// for SQL rows) or not, and decodes what it encoded.
func TestPortEncodesRecordsAsTheCodec(t *testing.T) {
	checkPortEncoding(t, []point{{1, -2}, {1 << 40, 3}, {0, 0}, {-7, 1 << 20}}, true)
	checkPortEncoding(t, []failing{{2}, {3}, {-4}, {5}}, true)
	checkPortEncoding(t, []time.Time{time.Unix(1700000000, 123456789).UTC(), {}, time.Unix(5, 0).In(time.FixedZone("x", 3600))}, true)
	checkPortEncoding(t, []string{"a", "", "ccc"}, false)
	checkPortEncoding(t, []*point{{1, 2}, {3, 4}}, false)
	checkPortEncoding(t, []item{{"k", 1}, {"", 2}}, false)
}

type item struct {
	Key string
	n   int
}

func checkPortEncoding[T any](t *testing.T, vals []T, appends bool) {
	t.Helper()
	p := newPort[T]()
	if p.appends != appends {
		t.Fatalf("%T: port appends = %v, want %v", vals[0], p.appends, appends)
	}
	codec := state.CodecFor[T]()
	for from := 0; from <= len(vals); from++ {
		r := &records[T]{vals: vals, ts: make([]int64, len(vals))}
		for i := range r.ts {
			r.ts[i] = int64(100 * i)
		}
		want := binary.AppendUvarint(nil, uint64(len(vals)-from))
		for i := from; i < len(vals); i++ {
			want = binary.AppendVarint(want, r.ts[i])
			want = codec.Append(want, vals[i])
		}
		got := p.encode(r, from, []byte("prefix"))
		if !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
			t.Fatalf("%T from %d: encoded %x, the codec gives %x", vals[0], from, got, want)
		}
		b, err := p.decode(got[len("prefix"):])
		if err != nil {
			t.Fatalf("%T from %d: decoding: %v", vals[0], from, err)
		}
		back := b.(*records[T])
		if !slices.Equal(back.ts, r.ts[from:]) || len(back.vals) != len(vals)-from {
			t.Fatalf("%T from %d: decoded %d records with timestamps %v", vals[0], from, len(back.vals), back.ts)
		}
		if !bytes.Equal(p.encode(back, 0, nil), want) {
			t.Fatalf("%T from %d: the decoded records encode differently", vals[0], from)
		}
	}
}
