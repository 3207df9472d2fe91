package state

import (
	"bytes"
	"testing"
)

// TestAppenderOfAllocatesNothing checks that the reflection codec's
// Append of a value through a pointer (appenderOf), as a checkpoint
// appends a table's entries, encodes as Append does without the
// allocation of Append's copy; and that another codec's is its Append.
func TestAppenderOfAllocatesNothing(t *testing.T) {
	type rows struct {
		Left, Right []byte
		N           int64
	}
	c := CodecFor[rows]()
	app := appenderOf(c)
	v := &rows{Left: []byte("left row"), Right: bytes.Repeat([]byte{7}, 300), N: -3}
	want := c.Append(nil, *v)
	if got := app(nil, v); !bytes.Equal(got, want) {
		t.Fatalf("appended %x, want Append's %x", got, want)
	}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = app(buf[:0], v) }); n != 0 {
		t.Fatalf("%v allocations a call, want none", n)
	}
	if n := testing.AllocsPerRun(100, func() { buf = c.Append(buf[:0], *v) }); n == 0 {
		t.Fatal("Append allocates nothing either: the test measures nothing")
	}
	ic := CodecFor[int64]()
	x := int64(-77)
	if got, want := appenderOf(ic)(nil, &x), ic.Append(nil, x); !bytes.Equal(got, want) {
		t.Fatalf("int64 appended %x, want %x", got, want)
	}
}
