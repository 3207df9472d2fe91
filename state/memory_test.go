package state_test

import (
	"encoding/binary"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/statetest"
)

func TestMemoryBackendConformance(t *testing.T) {
	statetest.Run(t, func() state.Backend { return state.NewMemoryBackend() })
}

// fataler is what the helpers need of a *testing.T, *testing.B,
// *testing.F or *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// openMemory returns a memory backend open for every key group of maxP.
func openMemory(t fataler, maxP int) *state.MemoryBackend {
	t.Helper()
	b := state.NewMemoryBackend()
	if err := b.Open(state.KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
		t.Fatal(err)
	}
	return b
}

func mustPersist(t fataler, b state.Backend) []state.KeyGroupData {
	t.Helper()
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := c.Persist()
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

func persistCaptured(t fataler, c state.Captured) []state.KeyGroupData {
	t.Helper()
	groups, err := c.Persist()
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

func keyGroupOf[K any](k K, maxP int) int {
	return state.KeyGroupFor(state.HasherFor(state.CodecFor[K]())(k), maxP)
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestMemoryCopyOnWriteCopiesOneKeyGroup checks that the first write after
// a capture copies the map of the written key's group only: its cost is
// that of one key group, not of the whole state.
func TestMemoryCopyOnWriteCopiesOneKeyGroup(t *testing.T) {
	const maxP, perGroup = 128, 1000
	b := openMemory(t, maxP)
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	// One key of each key group, for writes that touch every group.
	firstOf := make([]int64, maxP)
	found := 0
	for k := int64(0); k < maxP*perGroup; k++ {
		v.Put(k, k)
		if kg := keyGroupOf(k, maxP); found < maxP && firstOf[kg] == 0 && k != 0 {
			firstOf[kg] = k
			found++
		}
	}
	if found != maxP {
		t.Fatalf("found keys of %d key groups only", found)
	}

	c1, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	first := allocated(func() { v.Put(firstOf[0], -1) })
	second := allocated(func() { v.Put(firstOf[0], -2) })
	c2, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	every := allocated(func() {
		for _, k := range firstOf {
			v.Put(k, -3)
		}
	})
	t.Logf("bytes allocated after a capture: first write %d, second write to the same key group %d, one write to each of %d key groups %d", first, second, maxP, every)
	if first == 0 {
		t.Errorf("the first write after a capture allocated nothing: the captured key group was written in place")
	}
	if first*16 > every {
		t.Errorf("the first write after a capture allocated %d bytes, writes to all %d key groups %d: it copied more than its key group", first, maxP, every)
	}
	if second*16 > first {
		t.Errorf("the second write to a key group after a capture allocated %d bytes (the first %d): it copied again", second, first)
	}

	got1, err := state.ReadValues[int64, int64](persistCaptured(t, c1), "v", maxP)
	if err != nil {
		t.Fatal(err)
	}
	got2, err := state.ReadValues[int64, int64](persistCaptured(t, c2), "v", maxP)
	if err != nil {
		t.Fatal(err)
	}
	k := firstOf[0]
	if got1[k] != k || got2[k] != -2 || got1[firstOf[1]] != firstOf[1] || got2[firstOf[1]] != firstOf[1] {
		t.Errorf("captures hold %d, %d for key %d and %d, %d for key %d", got1[k], got2[k], k, got1[firstOf[1]], got2[firstOf[1]], firstOf[1])
	}
	if len(got1) != maxP*perGroup || len(got2) != maxP*perGroup {
		t.Errorf("captures hold %d and %d keys, want %d", len(got1), len(got2), maxP*perGroup)
	}
}

// TestMemoryCaptureListNotAliased checks that a list a capture holds
// shares no memory that a later Add writes: the first Add after a capture
// appends to a copy, not into the spare capacity of the captured list.
func TestMemoryCaptureListNotAliased(t *testing.T) {
	const maxP = 4
	b := openMemory(t, maxP)
	l, err := state.NewList(b, "l", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	// Grow the list until its array has spare capacity.
	var held []string
	for i := 0; len(held) == cap(held); i++ {
		l.Add(7, fmt.Sprint("e", i))
		held = l.Get(7)
	}
	want := slices.Clone(held)
	c1, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	l.Add(7, "after1")
	c2, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	l.Add(7, "after2")
	l.Add(7, "after3")

	// held is the list as the first capture holds it, array and all.
	if spare := held[len(held):cap(held)]; slices.ContainsFunc(spare, func(s string) bool { return s != "" }) {
		t.Errorf("an Add after the capture wrote into the captured list's array: spare capacity now %q", spare)
	}
	if !slices.Equal(held, want) {
		t.Errorf("the captured list changed to %q, want %q", held, want)
	}
	got1, err := state.ReadValues[int64, []string](persistCaptured(t, c1), "l", maxP)
	if err != nil {
		t.Fatal(err)
	}
	got2, err := state.ReadValues[int64, []string](persistCaptured(t, c2), "l", maxP)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got1[7], want) {
		t.Errorf("first capture persisted %q, want %q", got1[7], want)
	}
	if w2 := append(slices.Clone(want), "after1"); !slices.Equal(got2[7], w2) {
		t.Errorf("second capture persisted %q, want %q", got2[7], w2)
	}
	if live := append(slices.Clone(want), "after1", "after2", "after3"); !slices.Equal(l.Get(7), live) {
		t.Errorf("live list %q, want %q", l.Get(7), live)
	}
}

// TestMemoryCaptureMapNotAliased is the same for map states: Put and
// Remove after a capture change a copy of the captured map.
func TestMemoryCaptureMapNotAliased(t *testing.T) {
	const maxP = 4
	b := openMemory(t, maxP)
	m, err := state.NewMap[int64, string, int64](b, "m", state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	m.Put(7, "a", 1)
	m.Put(7, "b", 2)
	c1, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	m.Put(7, "a", 10)
	m.Put(7, "c", 3)
	c2, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	m.Remove(7, "b")
	m.Put(7, "d", 4)
	c3, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	m.Clear(7)
	for i, c := range []struct {
		c    state.Captured
		want map[string]int64
	}{
		{c1, map[string]int64{"a": 1, "b": 2}},
		{c2, map[string]int64{"a": 10, "b": 2, "c": 3}},
		{c3, map[string]int64{"a": 10, "c": 3, "d": 4}},
	} {
		got, err := state.ReadValues[int64, map[string]int64](persistCaptured(t, c.c), "m", maxP)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got[7], c.want) {
			t.Errorf("capture %d persisted %v, want %v", i+1, got[7], c.want)
		}
	}
}

// TestMemoryTTLAddedOrRemoved restores snapshots across a change of TTL:
// entries written without TTL start their TTL at the restore, and entries
// written with TTL restore as plain entries into a state without one.
func TestMemoryTTLAddedOrRemoved(t *testing.T) {
	const maxP = 8
	now := int64(1_700_000_000_000)
	clock := func() int64 { return now }
	ttl := state.WithTTL(100 * time.Millisecond)

	plain := openMemory(t, maxP)
	v, err := state.NewValue(plain, "v", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	v.Put("a", 1)
	groups := mustPersist(t, plain)
	now += 1_000_000
	withTTL := openMemory(t, maxP)
	if err := withTTL.Restore([][]state.KeyGroupData{groups}); err != nil {
		t.Fatal(err)
	}
	vt, err := state.NewValue(withTTL, "v", state.CodecFor[string](), state.CodecFor[int64](), ttl, state.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	now += 99
	if got, ok := vt.Get("a"); !ok || got != 1 {
		t.Errorf("entry written without TTL, 99ms after its restore with TTL 100ms: %d, %v", got, ok)
	}
	now++
	if got, ok := vt.Get("a"); ok {
		t.Errorf("entry written without TTL, 100ms after its restore with TTL 100ms: %d, still live", got)
	}

	vt.Put("b", 2)
	now += 50
	vt.Put("c", 3)
	now += 50 // b expires now
	groups = mustPersist(t, withTTL)
	plain2 := openMemory(t, maxP)
	if err := plain2.Restore([][]state.KeyGroupData{groups}); err != nil {
		t.Fatal(err)
	}
	v2, err := state.NewValue(plain2, "v", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	now += 1_000_000
	got := map[string]int64{}
	v2.Range(func(k string, x int64) bool { got[k] = x; return true })
	if want := map[string]int64{"c": 3}; !maps.Equal(got, want) {
		t.Errorf("TTL state restored without TTL: %v, want %v", got, want)
	}
}

// TestMemoryAcceptedSectionRestoresAgain restores a key group holding a
// section of a table that is never registered, whose entry count exceeds
// its own data but not the bytes after it in the key group. Restore must
// refuse it, or else the capture that carries it must restore: a backend
// must never write a snapshot it refuses to read.
func TestMemoryAcceptedSectionRestoresAgain(t *testing.T) {
	const maxP = 4
	src := openMemory(t, maxP)
	v, err := state.NewValue(src, "v", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	v.Put("k", 1)
	groups := mustPersist(t, src)
	if len(groups) != 1 {
		t.Fatalf("persisted %d key groups, want 1", len(groups))
	}
	// Section "ghost": 5 entries in 1 byte of data, then the value
	// state's section.
	ghost := []byte{5, 'g', 'h', 'o', 's', 't', 5, 1, 0}
	g := groups[0]
	g.Data = append(ghost, g.Data...)

	b := openMemory(t, maxP)
	if err := b.Restore([][]state.KeyGroupData{{g}}); err != nil {
		return // refused: fine
	}
	if _, err := state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]()); err != nil {
		return
	}
	again := openMemory(t, maxP)
	if err := again.Restore([][]state.KeyGroupData{mustPersist(t, b)}); err != nil {
		t.Fatalf("the backend accepted a key group, but refuses its own capture of it: %v", err)
	}
}

// section encodes one table's section of a memory backend's key group.
func section(name string, entries uint64, data []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(name)))
	b = append(b, name...)
	b = binary.AppendUvarint(b, entries)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

// TestMemoryRestoreRefusesBadSections restores key groups whose one
// section disagrees with itself, with the table registered before and
// after the Restore: each must be refused with an error.
func TestMemoryRestoreRefusesBadSections(t *testing.T) {
	const maxP = 4
	src := openMemory(t, maxP)
	v, err := state.NewValue(src, "v", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	v.Put("k", 1)
	groups := mustPersist(t, src)
	if len(groups) != 1 {
		t.Fatalf("persisted %d key groups, want 1", len(groups))
	}
	g := groups[0]
	// The layout: name length 1, "v", 1 entry, data length, data.
	if len(g.Data) < 4 || g.Data[0] != 1 || g.Data[1] != 'v' || g.Data[2] != 1 {
		t.Fatalf("unexpected layout % x", g.Data)
	}
	l, n := binary.Uvarint(g.Data[3:])
	entry := g.Data[3+n:]
	if n <= 0 || uint64(len(entry)) != l {
		t.Fatalf("unexpected layout % x", g.Data)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"one entry more than encoded", section("v", 2, entry)},
		{"no entries but data", section("v", 0, entry)},
		{"a byte after the entry", section("v", 1, append(slices.Clone(entry), 0))},
		{"entry cut short", section("v", 1, entry[:len(entry)-1])},
		{"data length past the end", section("v", 1, entry)[:len(g.Data)-1]},
		{"name length past the end", []byte{9, 'v'}},
		{"entry count missing", []byte{1, 'v'}},
	} {
		for _, registerFirst := range []bool{false, true} {
			b := openMemory(t, maxP)
			bad := state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: 1, Data: c.data}
			register := func() error {
				_, err := state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]())
				return err
			}
			var err error
			if registerFirst {
				if err := register(); err != nil {
					t.Fatal(err)
				}
				err = b.Restore([][]state.KeyGroupData{{bad}})
			} else if err = b.Restore([][]state.KeyGroupData{{bad}}); err == nil {
				err = register()
			}
			if err == nil {
				t.Errorf("%s (registered first: %v): restored % x without an error", c.name, registerFirst, c.data)
			}
		}
	}
}

// TestMemoryTTLDropsExpiredOnAccess checks what WithTTL promises besides
// hiding expired entries: they are dropped on access, so that Len (which
// counts expired entries until they are dropped) no longer counts them
// and their memory is freed.
func TestMemoryTTLDropsExpiredOnAccess(t *testing.T) {
	const maxP = 8
	now := int64(1_700_000_000_000)
	b := openMemory(t, maxP)
	v, err := state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64](),
		state.WithTTL(100*time.Millisecond), state.WithClock(func() int64 { return now }))
	if err != nil {
		t.Fatal(err)
	}
	v.Put("a", 1)
	v.Put("b", 2)
	if n := v.Len(); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
	now += 100
	if _, ok := v.Get("a"); ok {
		t.Fatal("Get returned an expired entry")
	}
	if n := v.Len(); n != 1 {
		t.Errorf("after Get of one of two expired keys, Len = %d, want 1: the accessed entry was not dropped", n)
	}
}

// memModel is what the rapid test's states should hold.
type memModel struct {
	values map[int64]int64
	lists  map[int64][]string
	maps   map[int64]map[string]int64
	sums   map[int64]int64
}

func (m memModel) clone() memModel {
	c := memModel{values: maps.Clone(m.values), lists: map[int64][]string{}, maps: map[int64]map[string]int64{}, sums: maps.Clone(m.sums)}
	for k, l := range m.lists {
		c.lists[k] = slices.Clone(l)
	}
	for k, mm := range m.maps {
		c.maps[k] = maps.Clone(mm)
	}
	return c
}

type memStates struct {
	v *state.ValueState[int64, int64]
	l *state.ListState[int64, string]
	m *state.MapState[int64, string, int64]
	r *state.ReducingState[int64, int64]
}

func registerMemStates(t fataler, b state.Backend) memStates {
	t.Helper()
	var s memStates
	var err error
	if s.v, err = state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[int64]()); err != nil {
		t.Fatal(err)
	}
	if s.l, err = state.NewList(b, "l", state.CodecFor[int64](), state.CodecFor[string]()); err != nil {
		t.Fatal(err)
	}
	if s.m, err = state.NewMap[int64, string, int64](b, "m", state.CodecFor[int64]()); err != nil {
		t.Fatal(err)
	}
	if s.r, err = state.NewReducing(b, "r", state.CodecFor[int64](), state.CodecFor[int64](), func(a, b int64) int64 { return a + b }); err != nil {
		t.Fatal(err)
	}
	return s
}

// read returns what s holds for keys 0..keys-1 in the model's shape.
func (s memStates) read(keys int64) memModel {
	out := memModel{values: map[int64]int64{}, lists: map[int64][]string{}, maps: map[int64]map[string]int64{}, sums: map[int64]int64{}}
	for k := range keys {
		if v, ok := s.v.Get(k); ok {
			out.values[k] = v
		}
		if l := s.l.Get(k); len(l) > 0 {
			out.lists[k] = slices.Clone(l)
		}
		if s.m.Len(k) > 0 {
			mm := map[string]int64{}
			s.m.Range(k, func(uk string, uv int64) bool { mm[uk] = uv; return true })
			out.maps[k] = mm
		}
		if v, ok := s.r.Get(k); ok {
			out.sums[k] = v
		}
	}
	return out
}

func modelDiff(got, want memModel) string {
	var d []string
	if !maps.Equal(got.values, want.values) {
		d = append(d, fmt.Sprintf("values %v, want %v", got.values, want.values))
	}
	if !maps.EqualFunc(got.lists, want.lists, slices.Equal) {
		d = append(d, fmt.Sprintf("lists %v, want %v", got.lists, want.lists))
	}
	if !maps.EqualFunc(got.maps, want.maps, maps.Equal) {
		d = append(d, fmt.Sprintf("maps %v, want %v", got.maps, want.maps))
	}
	if !maps.Equal(got.sums, want.sums) {
		d = append(d, fmt.Sprintf("sums %v, want %v", got.sums, want.sums))
	}
	return strings.Join(d, "\n")
}

// TestMemoryCaptureMatchesModel runs random writes of every kind with
// random captures, and persists outstanding captures at random moments:
// each capture, restored into a fresh backend, must equal the model as it
// was when the capture was taken.
func TestMemoryCaptureMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const keys = 12
		maxP := rapid.SampledFrom([]int{1, 3, 8, 128}).Draw(rt, "maxP")
		b := openMemory(rt, maxP)
		s := registerMemStates(rt, b)
		model := memModel{values: map[int64]int64{}, lists: map[int64][]string{}, maps: map[int64]map[string]int64{}, sums: map[int64]int64{}}
		type outstanding struct {
			c    state.Captured
			want memModel
			id   int
		}
		var caps []outstanding
		captures := 0
		key := rapid.Int64Range(0, keys-1)
		val := rapid.Int64Range(-5, 5)
		uks := rapid.SampledFrom([]string{"x", "y", "z"})

		checkCapture := func(rt *rapid.T, o outstanding) {
			groups := persistCaptured(rt, o.c)
			r := openMemory(rt, maxP)
			if err := r.Restore([][]state.KeyGroupData{groups}); err != nil {
				rt.Fatalf("restoring capture %d: %v", o.id, err)
			}
			if d := modelDiff(registerMemStates(rt, r).read(keys), o.want); d != "" {
				rt.Fatalf("capture %d restored:\n%s", o.id, d)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"": func(rt *rapid.T) {
				if d := modelDiff(s.read(keys), model); d != "" {
					rt.Fatalf("live state:\n%s", d)
				}
			},
			"value put": func(rt *rapid.T) {
				k, v := key.Draw(rt, "k"), val.Draw(rt, "v")
				s.v.Put(k, v)
				model.values[k] = v
			},
			"value read-modify-write": func(rt *rapid.T) {
				// Put after Get of the same key overwrites the slot Get
				// found: a capture or a delete in between must not let it
				// write into a captured array or a moved entry.
				k, d := key.Draw(rt, "k"), val.Draw(rt, "d")
				x, _ := s.v.Get(k)
				s.v.Put(k, x+d)
				model.values[k] += d
			},
			"value read, capture, write": func(rt *rapid.T) {
				k, d := key.Draw(rt, "k"), val.Draw(rt, "d")
				x, _ := s.v.Get(k)
				c, err := b.Capture()
				if err != nil {
					rt.Fatal(err)
				}
				captures++
				caps = append(caps, outstanding{c: c, want: model.clone(), id: captures})
				s.v.Put(k, x+d)
				model.values[k] += d
			},
			"value get": func(rt *rapid.T) {
				k := key.Draw(rt, "k")
				want, wantOK := model.values[k]
				if x, ok := s.v.Get(k); x != want || ok != wantOK {
					rt.Fatalf("Get(%d) = %d, %v; want %d, %v", k, x, ok, want, wantOK)
				}
			},
			"value delete": func(rt *rapid.T) {
				k := key.Draw(rt, "k")
				s.v.Delete(k)
				delete(model.values, k)
			},
			"list add": func(rt *rapid.T) {
				k, e := key.Draw(rt, "k"), fmt.Sprint(val.Draw(rt, "e"))
				s.l.Add(k, e)
				model.lists[k] = append(model.lists[k], e)
			},
			"list update": func(rt *rapid.T) {
				k := key.Draw(rt, "k")
				l := rapid.SliceOfN(rapid.SampledFrom([]string{"p", "q"}), 0, 3).Draw(rt, "l")
				s.l.Update(k, l)
				if len(l) == 0 {
					delete(model.lists, k)
				} else {
					model.lists[k] = slices.Clone(l)
				}
			},
			"list clear": func(rt *rapid.T) {
				k := key.Draw(rt, "k")
				s.l.Clear(k)
				delete(model.lists, k)
			},
			"map put": func(rt *rapid.T) {
				k, uk, uv := key.Draw(rt, "k"), uks.Draw(rt, "uk"), val.Draw(rt, "uv")
				s.m.Put(k, uk, uv)
				if model.maps[k] == nil {
					model.maps[k] = map[string]int64{}
				}
				model.maps[k][uk] = uv
			},
			"map remove": func(rt *rapid.T) {
				k, uk := key.Draw(rt, "k"), uks.Draw(rt, "uk")
				s.m.Remove(k, uk)
				delete(model.maps[k], uk)
				if len(model.maps[k]) == 0 {
					delete(model.maps, k)
				}
			},
			"map clear": func(rt *rapid.T) {
				k := key.Draw(rt, "k")
				s.m.Clear(k)
				delete(model.maps, k)
			},
			"reduce add": func(rt *rapid.T) {
				k, v := key.Draw(rt, "k"), val.Draw(rt, "v")
				s.r.Add(k, v)
				model.sums[k] += v
			},
			"reduce clear": func(rt *rapid.T) {
				k := key.Draw(rt, "k")
				s.r.Clear(k)
				delete(model.sums, k)
			},
			"capture": func(rt *rapid.T) {
				c, err := b.Capture()
				if err != nil {
					rt.Fatal(err)
				}
				captures++
				caps = append(caps, outstanding{c: c, want: model.clone(), id: captures})
			},
			"persist": func(rt *rapid.T) {
				if len(caps) == 0 {
					rt.Skip("no capture outstanding")
				}
				i := rapid.IntRange(0, len(caps)-1).Draw(rt, "capture")
				o := caps[i]
				caps = slices.Delete(caps, i, i+1)
				checkCapture(rt, o)
			},
		})
		for _, o := range caps {
			checkCapture(rt, o)
		}
	})
}

// FuzzMemoryRestore restores arbitrary bytes as the data of a key group of
// a value state: Restore and Register may refuse them with an error, never
// panic, and what they accept captures and restores again unchanged.
func FuzzMemoryRestore(f *testing.F) {
	const maxP = 4
	{
		b := openMemory(f, maxP)
		v, err := state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]())
		if err != nil {
			f.Fatal(err)
		}
		for i := range 20 {
			v.Put(fmt.Sprint("key", i), int64(i)*1_000_003)
		}
		other, err := state.NewValue(b, "other", state.CodecFor[int64](), state.CodecFor[string]())
		if err != nil {
			f.Fatal(err)
		}
		other.Put(1, "one")
		for _, g := range mustPersist(f, b) {
			f.Add(uint8(g.KeyGroup), g.Data)
			f.Add(uint8(g.KeyGroup), g.Data[:len(g.Data)/2])
			f.Add(uint8(g.KeyGroup+1), g.Data)
		}
	}
	f.Add(uint8(0), []byte{})
	f.Add(uint8(0), []byte{1, 'v', 0xff, 0xff, 0xff, 0xff, 0x0f, 0})
	f.Add(uint8(0), []byte{1, 'v', 1, 0x80})

	f.Fuzz(func(t *testing.T, kg uint8, data []byte) {
		g := state.KeyGroupData{KeyGroup: int(kg) % maxP, Entries: 1, Data: data}
		for _, registerFirst := range []bool{false, true} {
			b := openMemory(t, maxP)
			var v *state.ValueState[string, int64]
			var err error
			register := func() error {
				v, err = state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]())
				return err
			}
			if registerFirst {
				if err := register(); err != nil {
					t.Fatal(err)
				}
				err = b.Restore([][]state.KeyGroupData{{g}})
			} else if err = b.Restore([][]state.KeyGroupData{{g}}); err == nil {
				err = register()
			}
			if err != nil {
				continue
			}
			want := map[string]int64{}
			v.Range(func(k string, x int64) bool { want[k] = x; return true })

			again := openMemory(t, maxP)
			if err := again.Restore([][]state.KeyGroupData{mustPersist(t, b)}); err != nil {
				t.Fatalf("restored, but its capture does not restore: %v", err)
			}
			v2, err := state.NewValue(again, "v", state.CodecFor[string](), state.CodecFor[int64]())
			if err != nil {
				t.Fatalf("restored, but its capture does not restore: %v", err)
			}
			got := map[string]int64{}
			v2.Range(func(k string, x int64) bool { got[k] = x; return true })
			if !maps.Equal(got, want) {
				t.Fatalf("restored %v, its capture restored %v", want, got)
			}
		}
	})
}

// TestMemoryPutAfterGetDuringRange checks that a Put that follows a Get of
// the same key does not write in place into a key group a Range is
// iterating: the iteration sees the key group as it was when its turn
// came. The keys share one key group, so that the write falls into the
// key group being iterated.
func TestMemoryPutAfterGetDuringRange(t *testing.T) {
	for _, maxP := range []int{1, 2} {
		b := openMemory(t, maxP)
		v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[int64]())
		if err != nil {
			t.Fatal(err)
		}
		for k := range int64(200) {
			if keyGroupOf(k, maxP) == 0 {
				v.Put(k, k)
			}
		}
		var last int64
		v.Range(func(k, _ int64) bool { last = k; return true })
		x, _ := v.Get(last)
		first := true
		v.Range(func(k, got int64) bool {
			if first {
				first = false
				v.Put(last, x+1000)
			}
			if k == last && got != last {
				t.Errorf("max parallelism %d: Range saw %d for key %d written during it, want %d", maxP, got, k, last)
			}
			return true
		})
		if got, _ := v.Get(last); got != last+1000 {
			t.Errorf("max parallelism %d: key %d holds %d after the Range, want %d", maxP, last, got, last+1000)
		}
	}
}

// shuffledKeys returns 0..n-1 in a random order.
func shuffledKeys(n int) []int64 {
	keys := make([]int64, n)
	for i := range keys {
		keys[i] = int64(i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// cpuTime returns the process's user+system CPU time (every thread: the
// garbage collector's work counts too).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMemoryValueUpdate reads and writes back one key of a value
// state of 1M keys per operation, keys in random order: the hot path of a
// keyed aggregation. The target is 10M updates/s per core: the loop runs
// on one goroutine, and updates/CPU-s divides the updates by the process's
// CPU time during the loop, so it does not depend on other processes
// taking the core away (it still includes their effect on shared caches).
func BenchmarkMemoryValueUpdate(b *testing.B) {
	benchValueUpdate(b, shuffledKeys(1_000_000))
}

// BenchmarkMemoryValueUpdateKeys is BenchmarkMemoryValueUpdate at other
// numbers of keys, and with string keys.
func BenchmarkMemoryValueUpdateKeys(b *testing.B) {
	for _, keys := range []int{10_000, 100_000, 1_000_000, 4_000_000} {
		b.Run(fmt.Sprintf("int64/keys=%d", keys), func(b *testing.B) { benchValueUpdate(b, shuffledKeys(keys)) })
	}
	for _, keys := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("string/keys=%d", keys), func(b *testing.B) {
			order := make([]string, keys)
			for i, k := range shuffledKeys(keys) {
				order[i] = fmt.Sprintf("user-%08d", k)
			}
			benchValueUpdate(b, order)
		})
	}
}

// BenchmarkMemoryValueUpdateIncremental is BenchmarkMemoryValueUpdate
// on a backend with incremental checkpoints (never captured): the cost of
// the change list's check on every write.
func BenchmarkMemoryValueUpdateIncremental(b *testing.B) {
	benchValueUpdateOn(b, newIncremental(b, 0), shuffledKeys(1_000_000))
}

func benchValueUpdate[K comparable](b *testing.B, order []K) {
	benchValueUpdateOn(b, state.NewMemoryBackend(), order)
}

// benchValueUpdateOn runs the update loop on be.
func benchValueUpdateOn[K comparable](b *testing.B, be *state.MemoryBackend, order []K) {
	const maxP = 128
	if err := be.Open(state.KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	v, err := state.NewValue(be, "v", state.CodecFor[K](), state.CodecFor[int64]())
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range order {
		v.Put(k, 0)
	}
	runtime.GC()
	b.ReportAllocs()
	i, n := 0, 0
	cpu0 := cpuTime(b)
	for b.Loop() {
		k := order[i]
		x, _ := v.Get(k)
		v.Put(k, x+1)
		if i++; i == len(order) {
			i = 0
		}
		n++
	}
	cpu := cpuTime(b) - cpu0
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "updates/s")
	b.ReportMetric(float64(n)/cpu.Seconds(), "updates/CPU-s")
	var total int64
	v.Range(func(_ K, x int64) bool { total += x; return true })
	if total != int64(n) {
		b.Fatalf("values sum to %d after %d updates", total, n)
	}
}

// BenchmarkMemoryCapturePersist10M captures and persists a value state of
// 10M keys. It holds gigabytes, so it runs only when -bench names it.
func BenchmarkMemoryCapturePersist10M(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || !strings.Contains(f.Value.String(), "CapturePersist10M") {
		b.Skip("holds 10M keys: run with -bench=MemoryCapturePersist10M")
	}
	const keys, maxP = 10_000_000, 128
	be := openMemory(b, maxP)
	v, err := state.NewValue(be, "v", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		b.Fatal(err)
	}
	for k := range int64(keys) {
		v.Put(k, k)
	}
	var bytes int64
	b.ReportAllocs()
	for b.Loop() {
		c, err := be.Capture()
		if err != nil {
			b.Fatal(err)
		}
		groups, err := c.Persist()
		if err != nil {
			b.Fatal(err)
		}
		bytes = 0
		entries := 0
		for _, g := range groups {
			bytes += int64(len(g.Data))
			entries += g.Entries
		}
		if entries != keys {
			b.Fatalf("persisted %d entries, want %d", entries, keys)
		}
	}
	b.SetBytes(bytes)
	b.ReportMetric(float64(keys)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}

// TestValueUpdateWithCopy: with WithCopy, Update changes a value in place
// until a capture, then hands out a copy once, so the captured value stays
// as it was while the live one moves on.
func TestValueUpdateWithCopy(t *testing.T) {
	type box struct{ N []int64 }
	copies := 0
	cp := func(b *box) *box { copies++; return &box{N: slices.Clone(b.N)} }
	b := openMemory(t, 8)
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[*box](), state.WithCopy(cp))
	if err != nil {
		t.Fatal(err)
	}
	add := func(x int64) {
		v.Update(1, func(bx *box, ok bool) (*box, bool) {
			if !ok {
				bx = &box{}
			}
			bx.N = append(bx.N, x)
			return bx, true
		})
	}
	add(1)
	add(2)
	if copies != 0 {
		t.Fatalf("%d copies before any capture", copies)
	}
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	add(3)
	add(4)
	if copies != 1 {
		t.Fatalf("%d copies after a capture and two updates, want 1", copies)
	}
	r := openMemory(t, 8)
	if err := r.Restore([][]state.KeyGroupData{persistCaptured(t, c)}); err != nil {
		t.Fatal(err)
	}
	rv, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[*box]())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := rv.Get(1); !slices.Equal(got.N, []int64{1, 2}) {
		t.Errorf("the capture holds %v, want [1 2]", got.N)
	}
	if got, _ := v.Get(1); !slices.Equal(got.N, []int64{1, 2, 3, 4}) {
		t.Errorf("the live value is %v, want [1 2 3 4]", got.N)
	}
	v.Update(1, func(bx *box, ok bool) (*box, bool) { return nil, false })
	if _, ok := v.Get(1); ok {
		t.Error("Update with keep false left the value")
	}
	if _, err := state.NewValue(b, "w", state.CodecFor[int64](), state.CodecFor[int64](), state.WithCopy(cp)); err == nil {
		t.Error("WithCopy of *box accepted for int64 values")
	}
}

// TestMapStateRangeAll checks that RangeAll visits every entry of every
// key's map once, on each backend, and stops when told to.
func TestMapStateRangeAll(t *testing.T) {
	for kind, open := range timerBackends {
		t.Run(kind, func(t *testing.T) {
			b := open(t, 8)
			m, err := state.NewMap[string, int64, string](b, "m", state.CodecFor[string]())
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{}
			for i := range 30 {
				k := fmt.Sprint("k", i%7)
				m.Put(k, int64(i), fmt.Sprint("v", i))
				want[fmt.Sprint(k, "/", i, "=v", i)] = true
			}
			got := map[string]bool{}
			m.RangeAll(func(k string, uk int64, uv string) bool {
				e := fmt.Sprint(k, "/", uk, "=", uv)
				if got[e] {
					t.Errorf("entry %s visited twice", e)
				}
				got[e] = true
				return true
			})
			if !maps.Equal(got, want) {
				t.Errorf("RangeAll visited %v, want %v", got, want)
			}
			n := 0
			m.RangeAll(func(string, int64, string) bool {
				n++
				return n < 5
			})
			if n != 5 {
				t.Errorf("RangeAll went on for %d entries after f returned false at the 5th", n)
			}
		})
	}
}
