package state

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// TestReflectCodecRunDecoder checks that the decoder of a run of values
// (a restore's, whose strings and byte slices share chunks of a
// byteArena) decodes what Decode does, nil and empty apart, and that the
// values it returns are independent: an append to one, or a write into
// it, changes no other, whether it came from a chunk or, longer than a
// chunk takes, from an allocation of its own.
func TestReflectCodecRunDecoder(t *testing.T) {
	type rec struct {
		B     []byte
		S     string
		Nil   []byte
		Empty []byte
		Tags  []string
	}
	c := CodecFor[rec]()
	var in []rec
	for i := range 300 {
		n := i * 7
		if i%50 == 0 {
			n = maxArenaValue + i // past what a chunk takes
		}
		in = append(in, rec{
			B:     bytes.Repeat([]byte{byte(i)}, n),
			S:     strings.Repeat(string(rune('a'+i%26)), i%40),
			Empty: []byte{},
			Tags:  []string{"", strings.Repeat("t", i%9)},
		})
	}
	var enc []byte
	for _, v := range in {
		enc = c.Append(enc, v)
	}
	dec := c.(RunDecoder[rec]).NewDecoder()
	var got []rec
	for src := enc; len(src) > 0; {
		v, n, err := dec(src)
		if err != nil {
			t.Fatalf("value %d: %v", len(got), err)
		}
		got = append(got, v)
		src = src[n:]
	}
	// The decoder owns none of src.
	clear(enc)
	if !reflect.DeepEqual(got, in) {
		t.Fatal("the run decoder's values differ from those encoded")
	}
	for i, v := range got {
		if v.Nil != nil || v.Empty == nil {
			t.Fatalf("value %d: nil and empty not told apart: Nil=%#v Empty=%#v", i, v.Nil, v.Empty)
		}
		if cap(v.B) != len(v.B) {
			t.Fatalf("value %d: %d bytes of room past its %d bytes, shared with the next value", i, cap(v.B)-len(v.B), len(v.B))
		}
	}
	for i := range got {
		got[i].B = append(got[i].B, 0xff, 0xff)
		for j := range got[i].B[:len(got[i].B)-2] {
			got[i].B[j] ^= 0x55
		}
	}
	for i, v := range got {
		want := append(bytes.Repeat([]byte{byte(i) ^ 0x55}, len(in[i].B)), 0xff, 0xff)
		if !bytes.Equal(v.B, want) || v.S != in[i].S || !reflect.DeepEqual(v.Tags, in[i].Tags) {
			t.Fatalf("value %d changed with another's writes", i)
		}
	}
}

// TestByteArenaShortRun checks that a run of a few short values (a key
// group of a sparse table) takes a chunk about their size, not one sized
// for a long run: a job may decode thousands of such runs.
func TestByteArenaShortRun(t *testing.T) {
	var a byteArena
	for range 3 {
		a.bytes(make([]byte, 10))
	}
	if held := a.used + len(a.free); held > minArenaChunk {
		t.Fatalf("three 10-byte values hold a chunk of %d bytes", held)
	}
	big := a.bytes(make([]byte, 3*minArenaChunk))
	if len(big) != 3*minArenaChunk || cap(big) != len(big) {
		t.Fatalf("a value longer than the chunk came back with %d bytes, room for %d", len(big), cap(big))
	}
}
