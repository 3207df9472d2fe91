package state

import "testing"

// TestMakeFaulted checks that prefaulted arrays are make's: of the length
// asked, zero, and written like any other, whatever their size and
// alignment within pages.
func TestMakeFaulted(t *testing.T) {
	type withPointers struct {
		s string
		n [5]int64
	}
	for _, n := range []int{0, 1, 100, faultedBytes / 56, faultedBytes/56 + 1, 3<<20/56 + 7} {
		a := makeFaulted[withPointers](n)
		if len(a) != n || cap(a) != n {
			t.Fatalf("n %d: len %d cap %d", n, len(a), cap(a))
		}
		for i := range a {
			if a[i] != (withPointers{}) {
				t.Fatalf("n %d: element %d is %v, want zero", n, i, a[i])
			}
			a[i] = withPointers{s: "x", n: [5]int64{int64(i)}}
		}
		for i := range a {
			if a[i].s != "x" || a[i].n[0] != int64(i) {
				t.Fatalf("n %d: element %d lost its write: %v", n, i, a[i])
			}
		}
		b := makeFaulted[[7]byte](n)
		if len(b) != n {
			t.Fatalf("n %d: pointer-free len %d", n, len(b))
		}
	}
}

// TestPrefaultOddSizes prefaults arrays that begin and end inside pages:
// it writes nothing outside them.
func TestPrefaultOddSizes(t *testing.T) {
	x := 1
	for _, n := range []int{1, 511, 512, 513, 3*pageSize/8 + 1} {
		buf := make([]*int, n+2)
		buf[0], buf[n+1] = &x, &x
		a := buf[1 : 1+n]
		prefault(a)
		for i, p := range a {
			if p != nil {
				t.Fatalf("n %d: element %d not nil", n, i)
			}
		}
		if buf[0] != &x || buf[n+1] != &x {
			t.Fatalf("n %d: prefault wrote outside its array", n)
		}
	}
}
