// Package statetest is the conformance suite every state backend runs.
//
// A backend's tests call Run with a constructor of fresh, unopened
// backends:
//
//	func TestMyBackendConformance(t *testing.T) {
//		statetest.Run(t, func() state.Backend { return mybackend.New() })
//	}
//
// Run drives the backend only through the public API of package state: the
// typed states (NewValue, NewList, NewMap, NewReducing, NewAggregating with
// CodecFor codecs) and Backend.Open, Register (through the typed
// constructors), Capture, Restore and Close, and Captured.Persist. It
// checks, for every state type:
//
//  1. the operations themselves: reads of absent keys, writes, overwrites,
//     Clear, and that keys and states do not see each other's entries;
//  2. snapshot isolation: a capture's Persist output holds every write made
//     before the capture and none made after it, also while Persist runs
//     on another goroutine concurrently with those writes and while more
//     than one capture is outstanding (run the suite with -race);
//  3. round trips: Persist then Restore into a fresh backend gives the
//     same contents, for tables registered after the restore and for
//     restored tables that were never registered before the next capture;
//     and a backend always restores its own capture (float keys, where +0
//     == -0 but their encodings differ, included);
//  4. rescaling: key groups persisted at one parallelism and restored at
//     another land each in exactly the subtask whose range holds them;
//  5. TTL: entries expire a TTL after their last write, on a clock the test
//     advances, and the write time survives a restore;
//  6. errors: duplicate names, registering before Open, truncated or
//     corrupt key-group data and data of the wrong key group are refused
//     with an error, never a panic.
//
// Contents are compared through the API, never through the encoding of a
// backend's snapshots, so that any backend whose key-group data its own
// Restore reads can run the suite.
package statetest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clinkstream/clink/state"
)

// Run runs the conformance suite against the backends newBackend returns.
// Every call of newBackend must return a new backend that is not open yet.
func Run(t *testing.T, newBackend func() state.Backend) {
	s := &suite{newBackend: newBackend}
	t.Run("Value", s.testValue)
	t.Run("List", s.testList)
	t.Run("Map", s.testMap)
	t.Run("Reducing", s.testReducing)
	t.Run("Aggregating", s.testAggregating)
	t.Run("StatesAreSeparate", s.testStatesAreSeparate)
	t.Run("FloatKeys", s.testFloatKeys)
	t.Run("SnapshotIsolation", s.testSnapshotIsolation)
	t.Run("RoundTrip", s.testRoundTrip)
	t.Run("Rescale", s.testRescale)
	t.Run("TTL", s.testTTL)
	t.Run("Errors", s.testErrors)
}

type suite struct {
	newBackend func() state.Backend
}

// open returns a new backend opened for r of maxP, closed when the test
// ends.
func (s *suite) open(t *testing.T, r state.KeyGroupRange, maxP int) state.Backend {
	t.Helper()
	b := s.newBackend()
	if err := b.Open(r, maxP); err != nil {
		t.Fatalf("Open(%v, %d): %v", r, maxP, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// openBriefly is open for backends a test uses for a moment: the caller
// closes it with the function returned, so that a test that opens
// hundreds does not hold them all open.
func (s *suite) openBriefly(t *testing.T, r state.KeyGroupRange, maxP int) (state.Backend, func()) {
	t.Helper()
	b := s.newBackend()
	if err := b.Open(r, maxP); err != nil {
		t.Fatalf("Open(%v, %d): %v", r, maxP, err)
	}
	return b, func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func fullRange(maxP int) state.KeyGroupRange { return state.KeyGroupRange{Start: 0, End: maxP} }

// keyGroup returns the key group of k.
func keyGroup[K any](k K, maxP int) int {
	return state.KeyGroupFor(state.HasherFor(state.CodecFor[K]())(k), maxP)
}

// capture calls Capture and fails the test on an error.
func capture(t *testing.T, b state.Backend) state.Captured {
	t.Helper()
	c, err := b.Capture()
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	return c
}

// persist calls Persist and checks that the key groups it returns are
// distinct and inside r.
func persist(t *testing.T, c state.Captured, r state.KeyGroupRange) []state.KeyGroupData {
	t.Helper()
	groups, err := checkPersist(c, r)
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// checkPersist is persist for goroutines other than the test's.
func checkPersist(c state.Captured, r state.KeyGroupRange) ([]state.KeyGroupData, error) {
	groups, err := c.Persist()
	if err != nil {
		return nil, fmt.Errorf("Persist: %w", err)
	}
	seen := map[int]bool{}
	for _, g := range groups {
		if !r.Contains(g.KeyGroup) {
			return nil, fmt.Errorf("Persist returned key group %d, outside the backend's range %v", g.KeyGroup, r)
		}
		if seen[g.KeyGroup] {
			return nil, fmt.Errorf("Persist returned key group %d twice", g.KeyGroup)
		}
		seen[g.KeyGroup] = true
	}
	return groups, nil
}

// fakeClock is a processing-time clock in milliseconds that only moves
// when the test advances it.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock(ms int64) *fakeClock {
	c := &fakeClock{}
	c.ms.Store(ms)
	return c
}

func (c *fakeClock) now() int64       { return c.ms.Load() }
func (c *fakeClock) set(ms int64)     { c.ms.Store(ms) }
func (c *fakeClock) advance(ms int64) { c.ms.Add(ms) }

// panicError is the error callNoPanic returns for a panic.
type panicError struct {
	what  string
	value any
}

func (p *panicError) Error() string { return fmt.Sprintf("%s panicked: %v", p.what, p.value) }

// callNoPanic runs f and returns its error, or a *panicError if it
// panicked.
func callNoPanic(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{what: what, value: r}
		}
	}()
	return f()
}

// refused reports whether err is an error, and not a panic.
func refused(err error) bool {
	var p *panicError
	return err != nil && !errors.As(err, &p)
}

// The tables of the fixture: one of every state type, with keys of
// different types so that every kind of key hashing is exercised.
const (
	tValue  = "value"  // ValueState[string, int64]
	tList   = "list"   // ListState[int64, string]
	tMap    = "map"    // MapState[string, string, int64]
	tReduce = "reduce" // ReducingState[int64, int64], a sum
	tAgg    = "agg"    // AggregatingState[pairKey, int64, avgAcc, string], an average
)

var allTables = []string{tValue, tList, tMap, tReduce, tAgg}

// pairKey is a struct key, hashed from its codec encoding.
type pairKey struct {
	Name string
	N    int32
}

// avgAcc accumulates an average.
type avgAcc struct{ Sum, Count int64 }

// average is an AggregateFunction with an accumulator that is a plain
// value, as NewAggregating asks.
type average struct{}

func (average) CreateAccumulator() avgAcc { return avgAcc{} }
func (average) Add(a avgAcc, in int64) avgAcc {
	a.Sum += in
	a.Count++
	return a
}
func (average) Result(a avgAcc) string { return fmt.Sprintf("%d/%d", a.Sum, a.Count) }

func sum(a, b int64) int64 { return a + b }

// The keys of entry i of each table. The list keys spread i over negative
// and positive numbers.
func valueKey(i int) string { return fmt.Sprintf("k%d", i) }
func listKey(i int) int64   { return int64(i)*7919 - 100_000 }
func mapKey(i int) string   { return fmt.Sprintf("m-%d-%s", i, strings.Repeat("x", i%11)) }
func reduceKey(i int) int64 { return int64(i) }
func aggKey(i int) pairKey  { return pairKey{Name: "p", N: int32(i)} }
func tableKey(table string, i int) string {
	switch table {
	case tValue:
		return valueKey(i)
	case tList:
		return fmt.Sprint(listKey(i))
	case tMap:
		return mapKey(i)
	case tReduce:
		return fmt.Sprint(reduceKey(i))
	case tAgg:
		return fmt.Sprint(aggKey(i))
	}
	panic("unknown table " + table)
}

// keyGroupOf returns the key group of entry i of table.
func keyGroupOf(table string, i, maxP int) int {
	switch table {
	case tValue:
		return keyGroup(valueKey(i), maxP)
	case tList:
		return keyGroup(listKey(i), maxP)
	case tMap:
		return keyGroup(mapKey(i), maxP)
	case tReduce:
		return keyGroup(reduceKey(i), maxP)
	case tAgg:
		return keyGroup(aggKey(i), maxP)
	}
	panic("unknown table " + table)
}

// tables is the fixture: one state of each type registered with a
// backend; nil for a table not registered (yet).
type tables struct {
	b      state.Backend
	rng    state.KeyGroupRange
	maxP   int
	opts   []state.StateOption
	value  *state.ValueState[string, int64]
	list   *state.ListState[int64, string]
	mapS   *state.MapState[string, string, int64]
	reduce *state.ReducingState[int64, int64]
	agg    *state.AggregatingState[pairKey, int64, avgAcc, string]
}

func newTables(b state.Backend, r state.KeyGroupRange, maxP int, opts ...state.StateOption) *tables {
	return &tables{b: b, rng: r, maxP: maxP, opts: opts}
}

// register registers the named tables.
func (tb *tables) register(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := tb.tryRegister(name); err != nil {
			t.Fatalf("registering %q: %v", name, err)
		}
	}
}

// tryRegister registers the named table.
func (tb *tables) tryRegister(name string) error {
	var err error
	switch name {
	case tValue:
		tb.value, err = state.NewValue(tb.b, tValue, state.CodecFor[string](), state.CodecFor[int64](), tb.opts...)
	case tList:
		tb.list, err = state.NewList(tb.b, tList, state.CodecFor[int64](), state.CodecFor[string](), tb.opts...)
	case tMap:
		tb.mapS, err = state.NewMap[string, string, int64](tb.b, tMap, state.CodecFor[string](), tb.opts...)
	case tReduce:
		tb.reduce, err = state.NewReducing(tb.b, tReduce, state.CodecFor[int64](), state.CodecFor[int64](), sum, tb.opts...)
	case tAgg:
		tb.agg, err = state.NewAggregating[pairKey, int64, avgAcc, string](tb.b, tAgg, state.CodecFor[pairKey](), average{}, tb.opts...)
	default:
		return fmt.Errorf("unknown table %q", name)
	}
	return err
}

func (tb *tables) registered(table string) bool {
	switch table {
	case tValue:
		return tb.value != nil
	case tList:
		return tb.list != nil
	case tMap:
		return tb.mapS != nil
	case tReduce:
		return tb.reduce != nil
	case tAgg:
		return tb.agg != nil
	}
	return false
}

// owns reports whether entry i of table is in the backend's range.
func (tb *tables) owns(table string, i int) bool {
	return tb.rng.Contains(keyGroupOf(table, i, tb.maxP))
}

// entry names entry i of a table in contents.
type entry struct {
	Table string
	I     int
}

// contents is what a backend (or the model) holds: the rendered value of
// every present entry.
type contents map[entry]string

// read returns the contents of the registered tables for entries 0..n-1
// that are in the backend's range. Keys the value state ranges over that
// are not among them are reported as entries with I = -1.
func (tb *tables) read(n int) contents {
	out := contents{}
	for _, table := range allTables {
		if !tb.registered(table) {
			continue
		}
		for i := range n {
			if !tb.owns(table, i) {
				continue
			}
			if v, ok := tb.get(table, i); ok {
				out[entry{table, i}] = v
			}
		}
	}
	if tb.value != nil {
		want := map[string]bool{}
		for i := range n {
			if tb.owns(tValue, i) {
				want[valueKey(i)] = true
			}
		}
		tb.value.Range(func(k string, v int64) bool {
			if !want[k] {
				out[entry{tValue + " stray key " + k, -1}] = fmt.Sprint(v)
			}
			return true
		})
	}
	return out
}

// get renders entry i of table.
func (tb *tables) get(table string, i int) (string, bool) {
	switch table {
	case tValue:
		v, ok := tb.value.Get(valueKey(i))
		return fmt.Sprint(v), ok
	case tList:
		l := tb.list.Get(listKey(i))
		return fmt.Sprint(l), len(l) > 0
	case tMap:
		m := map[string]int64{}
		tb.mapS.Range(mapKey(i), func(uk string, uv int64) bool {
			m[uk] = uv
			return true
		})
		if n := tb.mapS.Len(mapKey(i)); n != len(m) {
			return fmt.Sprintf("Len %d but Range gave %v", n, m), true
		}
		return fmt.Sprint(m), len(m) > 0
	case tReduce:
		v, ok := tb.reduce.Get(reduceKey(i))
		return fmt.Sprint(v), ok
	case tAgg:
		return tb.agg.Get(aggKey(i))
	}
	panic("unknown table " + table)
}

// model is what the fixture's tables should hold.
type model struct {
	value  map[int]int64
	list   map[int][]string
	mp     map[int]map[string]int64
	reduce map[int]int64
	agg    map[int]avgAcc
}

func newModel() *model {
	return &model{value: map[int]int64{}, list: map[int][]string{}, mp: map[int]map[string]int64{}, reduce: map[int]int64{}, agg: map[int]avgAcc{}}
}

func (m *model) clone() *model {
	c := &model{value: maps.Clone(m.value), list: map[int][]string{}, mp: map[int]map[string]int64{}, reduce: maps.Clone(m.reduce), agg: maps.Clone(m.agg)}
	for i, l := range m.list {
		c.list[i] = slices.Clone(l)
	}
	for i, mm := range m.mp {
		c.mp[i] = maps.Clone(mm)
	}
	return c
}

// contents renders the model's entries of the given tables that keep
// reports true for.
func (m *model) contents(keep func(table string, i int) bool, tableNames ...string) contents {
	if len(tableNames) == 0 {
		tableNames = allTables
	}
	out := contents{}
	for _, table := range tableNames {
		add := func(i int, v string) {
			if keep == nil || keep(table, i) {
				out[entry{table, i}] = v
			}
		}
		switch table {
		case tValue:
			for i, v := range m.value {
				add(i, fmt.Sprint(v))
			}
		case tList:
			for i, l := range m.list {
				add(i, fmt.Sprint(l))
			}
		case tMap:
			for i, mm := range m.mp {
				add(i, fmt.Sprint(mm))
			}
		case tReduce:
			for i, v := range m.reduce {
				add(i, fmt.Sprint(v))
			}
		case tAgg:
			for i, a := range m.agg {
				add(i, average{}.Result(a))
			}
		}
	}
	return out
}

// in returns a keep function for contents: entries in r.
func in(r state.KeyGroupRange, maxP int) func(string, int) bool {
	return func(table string, i int) bool { return r.Contains(keyGroupOf(table, i, maxP)) }
}

// diff describes how got differs from want, "" if it does not.
func diff(got, want contents) string {
	var lines []string
	for e, w := range want {
		g, ok := got[e]
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("  %s[%s]: missing, want %s", e.Table, keyName(e), w))
		case g != w:
			lines = append(lines, fmt.Sprintf("  %s[%s]: got %s, want %s", e.Table, keyName(e), g, w))
		}
	}
	for e, g := range got {
		if _, ok := want[e]; !ok {
			lines = append(lines, fmt.Sprintf("  %s[%s]: got %s, want no entry", e.Table, keyName(e), g))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	slices.Sort(lines)
	const maxLines = 20
	if len(lines) > maxLines {
		lines = append(lines[:maxLines], fmt.Sprintf("  ... and %d more", len(lines)-maxLines))
	}
	return fmt.Sprintf("%d differences:\n%s", len(lines), strings.Join(lines, "\n"))
}

func keyName(e entry) string {
	if e.I < 0 {
		return "?"
	}
	return tableKey(e.Table, e.I)
}

// expect fails the test if got differs from want.
func expect(t *testing.T, what string, got, want contents) {
	t.Helper()
	if d := diff(got, want); d != "" {
		t.Fatalf("%s: %s", what, d)
	}
}

// writer applies the same writes to the fixture's tables and to a model.
type writer struct {
	tb *tables
	m  *model
	n  int // entries 0..n-1
	r  *rand.Rand
	// owned lists, per table, the entries in the backend's range.
	owned map[string][]int
	seq   int64
}

func newWriter(tb *tables, m *model, n int, seed uint64) *writer {
	w := &writer{tb: tb, m: m, n: n, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), owned: map[string][]int{}}
	for _, table := range allTables {
		for i := range n {
			if tb.owns(table, i) {
				w.owned[table] = append(w.owned[table], i)
			}
		}
	}
	return w
}

func (w *writer) next() int64 {
	w.seq++
	return w.seq
}

func (w *writer) putValue(i int, v int64) {
	w.tb.value.Put(valueKey(i), v)
	w.m.value[i] = v
}

func (w *writer) deleteValue(i int) {
	w.tb.value.Delete(valueKey(i))
	delete(w.m.value, i)
}

func (w *writer) addList(i int, e string) {
	w.tb.list.Add(listKey(i), e)
	w.m.list[i] = append(w.m.list[i], e)
}

func (w *writer) updateList(i int, l []string) {
	w.tb.list.Update(listKey(i), l)
	if len(l) == 0 {
		delete(w.m.list, i)
	} else {
		w.m.list[i] = slices.Clone(l)
	}
}

func (w *writer) clearList(i int) {
	w.tb.list.Clear(listKey(i))
	delete(w.m.list, i)
}

func (w *writer) putMap(i int, uk string, uv int64) {
	w.tb.mapS.Put(mapKey(i), uk, uv)
	if w.m.mp[i] == nil {
		w.m.mp[i] = map[string]int64{}
	}
	w.m.mp[i][uk] = uv
}

func (w *writer) removeMap(i int, uk string) {
	w.tb.mapS.Remove(mapKey(i), uk)
	delete(w.m.mp[i], uk)
	if len(w.m.mp[i]) == 0 {
		delete(w.m.mp, i)
	}
}

func (w *writer) clearMap(i int) {
	w.tb.mapS.Clear(mapKey(i))
	delete(w.m.mp, i)
}

func (w *writer) addReduce(i int, v int64) {
	w.tb.reduce.Add(reduceKey(i), v)
	w.m.reduce[i] += v
}

func (w *writer) clearReduce(i int) {
	w.tb.reduce.Clear(reduceKey(i))
	delete(w.m.reduce, i)
}

func (w *writer) addAgg(i int, v int64) {
	w.tb.agg.Add(aggKey(i), v)
	w.m.agg[i] = average{}.Add(w.m.agg[i], v)
}

func (w *writer) clearAgg(i int) {
	w.tb.agg.Clear(aggKey(i))
	delete(w.m.agg, i)
}

// pick returns a random entry of table in the backend's range, ok=false if
// it has none.
func (w *writer) pick(table string) (int, bool) {
	o := w.owned[table]
	if len(o) == 0 {
		return 0, false
	}
	return o[w.r.IntN(len(o))], true
}

// random applies n random writes to the registered tables.
func (w *writer) random(n int) {
	var names []string
	for _, table := range allTables {
		if w.tb.registered(table) && len(w.owned[table]) > 0 {
			names = append(names, table)
		}
	}
	if len(names) == 0 {
		return
	}
	for range n {
		table := names[w.r.IntN(len(names))]
		i, _ := w.pick(table)
		op := w.r.IntN(10)
		switch table {
		case tValue:
			if op < 7 {
				w.putValue(i, w.next())
			} else {
				w.deleteValue(i)
			}
		case tList:
			switch {
			case op < 7:
				w.addList(i, fmt.Sprintf("e%d", w.next()))
			case op < 8:
				l := make([]string, w.r.IntN(4))
				for j := range l {
					l[j] = fmt.Sprintf("u%d", w.next())
				}
				w.updateList(i, l)
			default:
				w.clearList(i)
			}
		case tMap:
			uk := fmt.Sprintf("uk%d", w.r.IntN(5))
			switch {
			case op < 6:
				w.putMap(i, uk, w.next())
			case op < 9:
				w.removeMap(i, uk)
			default:
				w.clearMap(i)
			}
		case tReduce:
			if op < 9 {
				w.addReduce(i, w.next())
			} else {
				w.clearReduce(i)
			}
		case tAgg:
			if op < 9 {
				w.addAgg(i, w.next())
			} else {
				w.clearAgg(i)
			}
		}
	}
}

// touchAll changes every entry of every registered table in the range:
// overwrites and deletes values, appends to, replaces and clears lists,
// puts into and removes from maps, adds to reducing and aggregating
// states, and creates entries that did not exist.
func (w *writer) touchAll() {
	for _, table := range allTables {
		if !w.tb.registered(table) {
			continue
		}
		for _, i := range w.owned[table] {
			v := w.next()
			switch table {
			case tValue:
				if i%3 == 0 {
					w.deleteValue(i)
				} else {
					w.putValue(i, v)
				}
			case tList:
				switch i % 4 {
				case 0:
					w.clearList(i)
				case 1:
					w.updateList(i, []string{fmt.Sprintf("r%d", v)})
				default:
					w.addList(i, fmt.Sprintf("t%d", v))
				}
			case tMap:
				switch i % 4 {
				case 0:
					w.clearMap(i)
				case 1:
					w.removeMap(i, "uk0")
					w.removeMap(i, "uk1")
				default:
					w.putMap(i, "uk0", v)
					w.putMap(i, fmt.Sprintf("new%d", v), v)
				}
			case tReduce:
				if i%5 == 0 {
					w.clearReduce(i)
				} else {
					w.addReduce(i, v)
				}
			case tAgg:
				if i%5 == 0 {
					w.clearAgg(i)
				} else {
					w.addAgg(i, v)
				}
			}
		}
	}
}
