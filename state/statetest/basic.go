package statetest

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/clinkstream/clink/state"
)

const basicMaxP = 16

// restore opens a fresh backend for r, restores snaps into it and then
// registers the named tables with opts.
func (s *suite) restore(t *testing.T, r state.KeyGroupRange, maxP int, snaps [][]state.KeyGroupData, opts []state.StateOption, names ...string) *tables {
	t.Helper()
	b := s.open(t, r, maxP)
	if err := b.Restore(snaps); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	tb := newTables(b, r, maxP, opts...)
	tb.register(t, names...)
	return tb
}

// roundTrip captures b, persists the capture and restores it into a fresh
// backend of the same range, with every table registered.
func (s *suite) roundTrip(t *testing.T, tb *tables) *tables {
	t.Helper()
	groups := persist(t, capture(t, tb.b), tb.rng)
	return s.restore(t, tb.rng, tb.maxP, [][]state.KeyGroupData{groups}, tb.opts, allTables...)
}

func (s *suite) testValue(t *testing.T) {
	b := s.open(t, fullRange(basicMaxP), basicMaxP)
	v, err := state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := v.Get("absent"); ok || got != 0 {
		t.Errorf("Get of an absent key = %d, %v; want 0, false", got, ok)
	}
	v.Delete("absent") // deleting an absent key is a no-op
	if n := v.Len(); n != 0 {
		t.Errorf("Len of an empty state = %d", n)
	}

	v.Put("a", 1)
	v.Put("b", 0) // a zero value is a value, not an absent key
	v.Put("a", 2)
	if got, ok := v.Get("a"); !ok || got != 2 {
		t.Errorf("Get(a) after overwriting = %d, %v; want 2, true", got, ok)
	}
	if got, ok := v.Get("b"); !ok || got != 0 {
		t.Errorf("Get(b) after Put(b, 0) = %d, %v; want 0, true", got, ok)
	}
	v.Delete("a")
	if got, ok := v.Get("a"); ok {
		t.Errorf("Get(a) after Delete = %d, true", got)
	}
	if got, ok := v.Get("b"); !ok || got != 0 {
		t.Errorf("Delete(a) changed b: %d, %v", got, ok)
	}
	v.Put("a", 3)
	if got, ok := v.Get("a"); !ok || got != 3 {
		t.Errorf("Get(a) after Put following Delete = %d, %v; want 3, true", got, ok)
	}
	v.Delete("a")
	v.Delete("b")

	// Per-key isolation over many keys and every key group.
	const n = 500
	for i := range n {
		v.Put(valueKey(i), int64(i*i))
	}
	for i := 0; i < n; i += 2 {
		v.Delete(valueKey(i))
	}
	for i := range n {
		got, ok := v.Get(valueKey(i))
		if want := i%2 == 1; ok != want || (ok && got != int64(i*i)) {
			t.Fatalf("Get(%s) = %d, %v; want %d, %v", valueKey(i), got, ok, i*i, want)
		}
	}
	if got := v.Len(); got != n/2 {
		t.Errorf("Len = %d, want %d", got, n/2)
	}
	seen := map[string]int64{}
	v.Range(func(k string, x int64) bool {
		if _, dup := seen[k]; dup {
			t.Errorf("Range visited %q twice", k)
		}
		seen[k] = x
		return true
	})
	if len(seen) != n/2 {
		t.Errorf("Range visited %d keys, want %d", len(seen), n/2)
	}
	for k, x := range seen {
		var i int
		if _, err := fmt.Sscanf(k, "k%d", &i); err != nil || i%2 == 0 || x != int64(i*i) {
			t.Errorf("Range gave %q = %d", k, x)
		}
	}
	calls := 0
	v.Range(func(string, int64) bool { calls++; return false })
	if calls != 1 {
		t.Errorf("Range went on after f returned false: %d calls", calls)
	}
}

func (s *suite) testList(t *testing.T) {
	b := s.open(t, fullRange(basicMaxP), basicMaxP)
	l, err := state.NewList(b, "l", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	check := func(k int64, want ...string) {
		t.Helper()
		if got := l.Get(k); !slices.Equal(got, want) {
			t.Errorf("Get(%d) = %q, want %q", k, got, want)
		}
	}
	check(1)
	l.Clear(1) // clearing an absent key is a no-op
	check(1)

	l.Add(1, "a")
	l.Add(1, "b")
	l.Add(2, "x")
	l.Add(1, "c")
	check(1, "a", "b", "c")
	check(2, "x")
	l.Add(1, "") // an empty element is an element
	check(1, "a", "b", "c", "")

	mine := []string{"p", "q"}
	l.Update(1, mine)
	check(1, "p", "q")
	mine[0] = "changed" // the state must not keep the caller's slice
	check(1, "p", "q")
	l.Add(1, "r")
	check(1, "p", "q", "r")
	if mine[0] != "changed" || mine[1] != "q" {
		t.Errorf("Add changed the slice given to Update: %q", mine)
	}
	l.Update(1, nil)
	check(1)
	l.Update(1, []string{"s"})
	l.Update(1, []string{})
	check(1)
	check(2, "x")
	l.Add(1, "again")
	check(1, "again")
	l.Clear(2)
	check(2)
	check(1, "again")

	const n = 300
	for i := range n {
		for j := range i % 4 {
			l.Add(listKey(i), fmt.Sprintf("%d.%d", i, j))
		}
	}
	for i := range n {
		var want []string
		for j := range i % 4 {
			want = append(want, fmt.Sprintf("%d.%d", i, j))
		}
		if got := l.Get(listKey(i)); !slices.Equal(got, want) {
			t.Fatalf("Get(%d) = %q, want %q", listKey(i), got, want)
		}
	}
}

func (s *suite) testMap(t *testing.T) {
	b := s.open(t, fullRange(basicMaxP), basicMaxP)
	m, err := state.NewMap[string, string, int64](b, "m", state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	all := func(k string) map[string]int64 {
		out := map[string]int64{}
		m.Range(k, func(uk string, uv int64) bool {
			out[uk] = uv
			return true
		})
		return out
	}
	check := func(k string, want map[string]int64) {
		t.Helper()
		if got := all(k); !maps.Equal(got, want) {
			t.Errorf("Range(%q) = %v, want %v", k, got, want)
		}
		if got := m.Len(k); got != len(want) {
			t.Errorf("Len(%q) = %d, want %d", k, got, len(want))
		}
		for uk, uv := range want {
			if got, ok := m.Get(k, uk); !ok || got != uv {
				t.Errorf("Get(%q, %q) = %d, %v; want %d, true", k, uk, got, ok, uv)
			}
		}
	}
	if got, ok := m.Get("a", "x"); ok || got != 0 {
		t.Errorf("Get of an absent key = %d, %v", got, ok)
	}
	check("a", map[string]int64{})
	m.Remove("a", "x") // removing from an absent map is a no-op
	m.Clear("a")
	check("a", map[string]int64{})

	m.Put("a", "x", 1)
	m.Put("a", "y", 0) // a zero value is a value
	m.Put("b", "x", 10)
	m.Put("a", "x", 2)
	check("a", map[string]int64{"x": 2, "y": 0})
	check("b", map[string]int64{"x": 10})
	m.Remove("a", "nope")
	check("a", map[string]int64{"x": 2, "y": 0})
	m.Remove("a", "x")
	check("a", map[string]int64{"y": 0})
	if got, ok := m.Get("a", "x"); ok {
		t.Errorf("Get(a, x) after Remove = %d, true", got)
	}
	m.Remove("a", "y")
	check("a", map[string]int64{})
	m.Put("a", "z", 3)
	check("a", map[string]int64{"z": 3})
	m.Clear("a")
	check("a", map[string]int64{})
	check("b", map[string]int64{"x": 10})

	for i := range 5 {
		m.Put("c", fmt.Sprint(i), int64(i))
	}
	calls := 0
	m.Range("c", func(string, int64) bool { calls++; return false })
	if calls != 1 {
		t.Errorf("Range went on after f returned false: %d calls", calls)
	}

	const n = 300
	for i := range n {
		for j := range i % 5 {
			m.Put(mapKey(i), fmt.Sprint(j), int64(i*j))
		}
	}
	for i := range n {
		want := map[string]int64{}
		for j := range i % 5 {
			want[fmt.Sprint(j)] = int64(i * j)
		}
		if got := all(mapKey(i)); !maps.Equal(got, want) {
			t.Fatalf("Range(%q) = %v, want %v", mapKey(i), got, want)
		}
	}
}

func (s *suite) testReducing(t *testing.T) {
	b := s.open(t, fullRange(basicMaxP), basicMaxP)
	// Concatenation is not commutative: it shows the order of the
	// reduce function's arguments.
	r, err := state.NewReducing(b, "r", state.CodecFor[int64](), state.CodecFor[string](), func(acc, v string) string { return acc + v })
	if err != nil {
		t.Fatal(err)
	}
	check := func(k int64, want string, wantOK bool) {
		t.Helper()
		if got, ok := r.Get(k); ok != wantOK || got != want {
			t.Errorf("Get(%d) = %q, %v; want %q, %v", k, got, ok, want, wantOK)
		}
	}
	check(1, "", false)
	r.Clear(1)
	r.Add(1, "a")
	check(1, "a", true)
	r.Add(1, "b")
	r.Add(2, "x")
	r.Add(1, "c")
	check(1, "abc", true)
	check(2, "x", true)
	r.Clear(1)
	check(1, "", false)
	check(2, "x", true)
	r.Add(1, "d")
	check(1, "d", true)

	const n = 300
	sums, err := state.NewReducing(b, "sums", state.CodecFor[int64](), state.CodecFor[int64](), sum)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		for j := range i % 4 {
			sums.Add(reduceKey(i), int64(j+1))
		}
	}
	for i := range n {
		want := int64((i % 4) * (i%4 + 1) / 2)
		if got, ok := sums.Get(reduceKey(i)); ok != (want != 0) || got != want {
			t.Fatalf("Get(%d) = %d, %v; want %d", reduceKey(i), got, ok, want)
		}
	}
}

// countingAverage is average counting its accumulators.
type countingAverage struct {
	average
	created *int
}

func (c countingAverage) CreateAccumulator() avgAcc {
	*c.created++
	return c.average.CreateAccumulator()
}

func (s *suite) testAggregating(t *testing.T) {
	b := s.open(t, fullRange(basicMaxP), basicMaxP)
	created := 0
	a, err := state.NewAggregating[pairKey, int64, avgAcc, string](b, "a", state.CodecFor[pairKey](), countingAverage{created: &created})
	if err != nil {
		t.Fatal(err)
	}
	check := func(k pairKey, want string, wantOK bool) {
		t.Helper()
		if got, ok := a.Get(k); ok != wantOK || got != want {
			t.Errorf("Get(%v) = %q, %v; want %q, %v", k, got, ok, want, wantOK)
		}
	}
	k1, k2 := pairKey{"a", 1}, pairKey{"a", 2}
	check(k1, "", false)
	a.Clear(k1)
	a.Add(k1, 4)
	a.Add(k1, 6)
	a.Add(k2, 1)
	check(k1, "10/2", true)
	check(k2, "1/1", true)
	if created != 2 {
		t.Errorf("CreateAccumulator was called %d times for two keys, want 2", created)
	}
	a.Clear(k1)
	check(k1, "", false)
	check(k2, "1/1", true)
	a.Add(k1, 7)
	check(k1, "7/1", true)

	const n = 300
	for i := range n {
		for j := range i % 3 {
			a.Add(aggKey(i), int64(j))
		}
	}
	for i := range n {
		c := i % 3
		want, wantOK := fmt.Sprintf("%d/%d", c*(c-1)/2, c), c > 0
		if !wantOK {
			want = ""
		}
		check(aggKey(i), want, wantOK)
	}
}

// testStatesAreSeparate checks that states with different names do not
// see each other's entries, even with the same key, and survive a round
// trip separately.
func (s *suite) testStatesAreSeparate(t *testing.T) {
	b := s.open(t, fullRange(basicMaxP), basicMaxP)
	v1, err := state.NewValue(b, "one", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	v2, err := state.NewValue(b, "two", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	v1.Put("k", 1)
	if got, ok := v2.Get("k"); ok {
		t.Errorf("state two sees state one's key: %d", got)
	}
	v2.Put("k", 2)
	v1.Delete("k")
	if got, ok := v2.Get("k"); !ok || got != 2 {
		t.Errorf("state two after deleting in state one: %d, %v", got, ok)
	}
	v1.Put("k", 1)

	groups := persist(t, capture(t, b), fullRange(basicMaxP))
	r := s.open(t, fullRange(basicMaxP), basicMaxP)
	if err := r.Restore([][]state.KeyGroupData{groups}); err != nil {
		t.Fatal(err)
	}
	w2, err := state.NewValue(r, "two", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	w1, err := state.NewValue(r, "one", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := w1.Get("k"); !ok || got != 1 {
		t.Errorf("restored state one: %d, %v; want 1", got, ok)
	}
	if got, ok := w2.Get("k"); !ok || got != 2 {
		t.Errorf("restored state two: %d, %v; want 2", got, ok)
	}
}
