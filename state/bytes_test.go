package state_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/statetest"
)

// mapStore is a BytesStore over a Go map, for testing the byte tables
// without Pebble.
type mapStore struct {
	m map[string][]byte
	// fail, when set, is returned by every call.
	fail error
}

func (s *mapStore) Get(key []byte) ([]byte, bool, error) {
	if s.fail != nil {
		return nil, false, s.fail
	}
	v, ok := s.m[string(key)]
	return v, ok, nil
}

func (s *mapStore) Set(key, value []byte) error {
	if s.fail != nil {
		return s.fail
	}
	s.m[string(key)] = bytes.Clone(value)
	return nil
}

func (s *mapStore) Delete(key []byte) error {
	if s.fail != nil {
		return s.fail
	}
	delete(s.m, string(key))
	return nil
}

// Scan visits a copy, so that f's writes are not seen, as the contract
// says.
func (s *mapStore) Scan(lower, upper []byte, f func(key, value []byte) bool) error {
	if s.fail != nil {
		return s.fail
	}
	for _, k := range s.sortedKeys(lower, upper) {
		if !f([]byte(k), bytes.Clone(s.m[k])) {
			break
		}
	}
	return nil
}

func (s *mapStore) sortedKeys(lower, upper []byte) []string {
	var keys []string
	for k := range s.m {
		if k >= string(lower) && (upper == nil || k < string(upper)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// mapBackend is a BytesBackend over a mapStore. Its captures are copies of
// the map, its key-group data the raw entries of each key group (as the
// Pebble backend's).
type mapBackend struct {
	store     *mapStore
	rng       state.KeyGroupRange
	maxP      int
	opened    bool
	tables    []state.BytesTable
	names     map[string]bool
	unchecked bool
}

func newMapBackend() *mapBackend {
	return &mapBackend{store: &mapStore{m: map[string][]byte{}}, names: map[string]bool{}}
}

func (b *mapBackend) Name() string               { return "map" }
func (b *mapBackend) Store() state.BytesStore    { return b.store }
func (b *mapBackend) Range() state.KeyGroupRange { return b.rng }
func (b *mapBackend) MaxParallelism() int        { return b.maxP }
func (b *mapBackend) Close() error               { return nil }
func (b *mapBackend) Capture() (state.Captured, error) {
	for _, t := range b.tables {
		if err := t.PrepareCapture(); err != nil {
			return nil, err
		}
	}
	return &mapCapture{m: maps.Clone(b.store.m), rng: b.rng}, nil
}

func (b *mapBackend) Open(r state.KeyGroupRange, maxP int) error {
	if maxP < 1 || r.Start < 0 || r.End > maxP || r.Start > r.End {
		return fmt.Errorf("bad range %v of %d", r, maxP)
	}
	b.rng, b.maxP, b.opened = r, maxP, true
	return nil
}

func (b *mapBackend) Register(t state.Table) error {
	if !b.opened {
		return errors.New("not open")
	}
	bt, ok := t.(state.BytesTable)
	if !ok {
		return fmt.Errorf("%T is not a byte table", t)
	}
	if b.names[t.Name()] {
		return fmt.Errorf("%q registered twice", t.Name())
	}
	if b.unchecked {
		if err := bt.Check(); err != nil {
			return err
		}
	}
	b.names[t.Name()] = true
	b.tables = append(b.tables, bt)
	return nil
}

func (b *mapBackend) Restore(snaps [][]state.KeyGroupData) error {
	for _, groups := range snaps {
		for _, g := range groups {
			if !b.rng.Contains(g.KeyGroup) {
				continue
			}
			data := g.Data
			for i := 0; i < g.Entries; i++ {
				var kv [2][]byte
				for j := range kv {
					n, k := binary.Uvarint(data)
					if k <= 0 || n > uint64(len(data)-k) {
						return fmt.Errorf("key group %d, entry %d: truncated", g.KeyGroup, i)
					}
					kv[j], data = data[k:k+int(n)], data[k+int(n):]
				}
				b.store.m[string(state.KeyGroupPrefix(nil, g.KeyGroup))+string(kv[0])] = bytes.Clone(kv[1])
			}
			if len(data) != 0 {
				return fmt.Errorf("key group %d: %d bytes left", g.KeyGroup, len(data))
			}
		}
	}
	b.unchecked = true
	for _, t := range b.tables {
		if err := t.Check(); err != nil {
			return err
		}
	}
	return nil
}

type mapCapture struct {
	m   map[string][]byte
	rng state.KeyGroupRange
}

func (c *mapCapture) Persist() ([]state.KeyGroupData, error) {
	s := &mapStore{m: c.m}
	var out []state.KeyGroupData
	for _, k := range s.sortedKeys(state.KeyGroupPrefix(nil, c.rng.Start), state.KeyGroupPrefix(nil, c.rng.End)) {
		kg := state.KeyGroupOfKey([]byte(k))
		if len(out) == 0 || out[len(out)-1].KeyGroup != kg {
			out = append(out, state.KeyGroupData{KeyGroup: kg})
		}
		g := &out[len(out)-1]
		g.Data = binary.AppendUvarint(g.Data, uint64(len(k)-2))
		g.Data = append(g.Data, k[2:]...)
		g.Data = binary.AppendUvarint(g.Data, uint64(len(c.m[k])))
		g.Data = append(g.Data, c.m[k]...)
		g.Entries++
	}
	return out, nil
}

// TestBytesStatesConformance runs the backend suite on the byte tables
// over a Go map: the typed states' byte implementation, without Pebble.
func TestBytesStatesConformance(t *testing.T) {
	statetest.Run(t, func() state.Backend { return newMapBackend() })
}

func openMapBackend(t *testing.T, maxP int) *mapBackend {
	t.Helper()
	b := newMapBackend()
	if err := b.Open(state.KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBytesKeyLayout checks that a key group is one contiguous key range
// and that a key's map is one prefix, whatever the table.
func TestBytesKeyLayout(t *testing.T) {
	const maxP = 8
	b := openMapBackend(t, maxP)
	v, err := state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	m, err := state.NewMap[string, string, int64](b, "m", state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		v.Put(fmt.Sprint("k", i), int64(i))
		m.Put(fmt.Sprint("k", i%20), fmt.Sprint("u", i), int64(i))
	}
	// Every key of key group kg lies in [prefix(kg), prefix(kg+1)).
	for k := range b.store.m {
		kg := state.KeyGroupOfKey([]byte(k))
		if k < string(state.KeyGroupPrefix(nil, kg)) || k >= string(state.KeyGroupPrefix(nil, kg+1)) {
			t.Fatalf("key %q of key group %d outside its range", k, kg)
		}
	}
	// The map of one key is exactly the keys under its prefix: group,
	// name, key.
	for i := range 20 {
		key := fmt.Sprint("k", i)
		kg := state.KeyGroupFor(state.HashString(key), maxP)
		prefix := append(state.KeyGroupPrefix(nil, kg), 1, 'm')
		prefix = state.CodecFor[string]().Append(prefix, key)
		n := 0
		b.store.Scan(prefix, state.PrefixEnd(prefix), func(k, _ []byte) bool { n++; return true })
		if want := m.Len(key) + 1; n != want { // the entries and the header
			t.Errorf("map of %s: %d keys under its prefix, want %d", key, n, want)
		}
	}
	if got := state.PrefixEnd([]byte{1, 0xff, 0xff}); !bytes.Equal(got, []byte{2}) {
		t.Errorf("PrefixEnd(01ffff) = %x", got)
	}
	if got := state.PrefixEnd([]byte{0xff}); got != nil {
		t.Errorf("PrefixEnd(ff) = %x, want nil", got)
	}
}

// TestBytesTimers runs timers on a byte map: order, deletion, and the heap
// rebuilt from the table after a restore.
func TestBytesTimers(t *testing.T) {
	const maxP = 16
	b := openMapBackend(t, maxP)
	tm, err := state.NewTimers(b, state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	tm.Register(state.EventTime, "a", 30)
	tm.Register(state.EventTime, "b", 10)
	tm.Register(state.EventTime, "b", 10)
	tm.Register(state.EventTime, "c", 20)
	tm.Register(state.EventTime, "a", 5)
	tm.Delete(state.EventTime, "a", 5)
	tm.Register(state.ProcessingTime, "a", 7)

	groups, err := mustCapture(t, b).Persist()
	if err != nil {
		t.Fatal(err)
	}
	r := newMapBackend()
	if err := r.Open(state.KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore([][]state.KeyGroupData{groups}); err != nil {
		t.Fatal(err)
	}
	rt, err := state.NewTimers(r, state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	for name, timers := range map[string]*state.Timers[string]{"live": tm, "restored": rt} {
		var fired []string
		err := timers.Fire(state.EventTime, 25, func(k string, ts int64) error {
			fired = append(fired, fmt.Sprint(k, "@", ts))
			if k == "b" {
				timers.Register(state.EventTime, "d", 15) // due: fires in this call
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(fired, " "), "b@10 d@15 c@20"; got != want {
			t.Errorf("%s: fired %q, want %q", name, got, want)
		}
		if ts, ok := timers.Next(state.EventTime); !ok || ts != 30 {
			t.Errorf("%s: next event-time timer %d, %v; want 30", name, ts, ok)
		}
		if ts, ok := timers.Next(state.ProcessingTime); !ok || ts != 7 {
			t.Errorf("%s: next processing-time timer %d, %v; want 7", name, ts, ok)
		}
	}
}

func mustCapture(t *testing.T, b state.Backend) state.Captured {
	t.Helper()
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBytesCheckRefusesDamage damages stored entries and expects the
// tables' Check (run when a restored table registers) to refuse them.
func TestBytesCheckRefusesDamage(t *testing.T) {
	const maxP = 4
	type fixture struct {
		b    *mapBackend
		keys map[string]string // table → one of its storage keys
	}
	build := func(t *testing.T) fixture {
		b := openMapBackend(t, maxP)
		v, _ := state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]())
		l, _ := state.NewList(b, "l", state.CodecFor[string](), state.CodecFor[int32]())
		m, _ := state.NewMap[string, string, int64](b, "m", state.CodecFor[string]())
		v.Put("x", 1)
		l.Add("x", 1)
		l.Add("x", 2)
		m.Put("x", "u", 1)
		m.Put("x", "w", 2)
		f := fixture{b: b, keys: map[string]string{}}
		for k := range b.store.m {
			name := k[3 : 3+int(k[2])]
			if k[2] == 0 {
				continue
			}
			// The map's header: the key followed by 0x00.
			if name != "m" || k[len(k)-1] == 0 {
				f.keys[name] = k
			}
		}
		return f
	}
	restoreInto := func(t *testing.T, f fixture) error {
		groups, err := mustCapture(t, f.b).Persist()
		if err != nil {
			t.Fatal(err)
		}
		r := newMapBackend()
		if err := r.Open(state.KeyGroupRange{Start: 0, End: maxP}, maxP); err != nil {
			t.Fatal(err)
		}
		if err := r.Restore([][]state.KeyGroupData{groups}); err != nil {
			return err
		}
		_, e1 := state.NewValue(r, "v", state.CodecFor[string](), state.CodecFor[int64]())
		_, e2 := state.NewList(r, "l", state.CodecFor[string](), state.CodecFor[int32]())
		_, e3 := state.NewMap[string, string, int64](r, "m", state.CodecFor[string]())
		return errors.Join(e1, e2, e3)
	}
	if err := restoreInto(t, build(t)); err != nil {
		t.Fatalf("undamaged: %v", err)
	}
	for _, c := range []struct {
		name   string
		damage func(f fixture)
	}{
		{"ValueTrailingBytes", func(f fixture) { f.b.store.m[f.keys["v"]] = append(f.b.store.m[f.keys["v"]], 0) }},
		{"ValueTruncated", func(f fixture) { k := f.keys["v"]; f.b.store.m[k] = f.b.store.m[k][:4] }},
		{"KeyTrailingBytes", func(f fixture) {
			k := f.keys["v"]
			f.b.store.m[k+"\x00"] = f.b.store.m[k]
		}},
		{"ListCountTooHigh", func(f fixture) { k := f.keys["l"]; f.b.store.m[k][1]++ }},
		{"ListTrailingBytes", func(f fixture) { f.b.store.m[f.keys["l"]] = append(f.b.store.m[f.keys["l"]], 9) }},
		{"MapCountWrong", func(f fixture) { k := f.keys["m"]; f.b.store.m[k][1] = 3 }},
		{"MapHeaderMissing", func(f fixture) { delete(f.b.store.m, f.keys["m"]) }},
		{"MapUnknownSuffix", func(f fixture) {
			k := f.keys["m"]
			f.b.store.m[k[:len(k)-1]+"\x07"] = []byte{1}
		}},
		{"WrongKeyGroup", func(f fixture) {
			k := []byte(f.keys["v"])
			k[1] = byte((int(k[1]) + 1) % maxP)
			f.b.store.m[string(k)] = f.b.store.m[f.keys["v"]]
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := build(t)
			c.damage(f)
			if err := restoreInto(t, f); err == nil {
				t.Errorf("damaged entries restored without an error")
			}
		})
	}
}

// TestBytesStoreErrorPanics checks that a failing store makes the typed
// methods panic with a StoreError that wraps the cause.
func TestBytesStoreErrorPanics(t *testing.T) {
	b := openMapBackend(t, 4)
	v, err := state.NewValue(b, "v", state.CodecFor[string](), state.CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("disk on fire")
	b.store.fail = cause
	defer func() {
		r := recover()
		var se *state.StoreError
		err, _ := r.(error)
		if !errors.As(err, &se) || !errors.Is(err, cause) || se.State != "v" {
			t.Fatalf("panic %v, want a StoreError of state v wrapping the cause", r)
		}
	}()
	v.Put("k", 1)
	t.Fatal("Put on a failing store returned")
}

// TestBytesSweepDropsUnreadExpired checks that captures delete expired
// entries nobody reads, a bounded number at a time.
func TestBytesSweepDropsUnreadExpired(t *testing.T) {
	const maxP, n = 4, 40_000
	b := openMapBackend(t, maxP)
	now := int64(1_000)
	clock := state.WithClock(func() int64 { return now })
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[int64](), state.WithTTL(time.Second), clock)
	if err != nil {
		t.Fatal(err)
	}
	m, err := state.NewMap[int64, int64, int64](b, "m", state.CodecFor[int64](), state.WithTTL(time.Second), clock)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(n) {
		v.Put(i, i)
		if i%100 == 0 {
			m.Put(i, 1, 1)
			m.Put(i, 2, 2)
		}
	}
	now += 500
	v.Put(-1, 1) // live at the end
	now += 600
	entries := func() int { return len(b.store.m) }
	before := entries()
	mustCapture(t, b)
	if got := entries(); got >= before || got < before-40_000 {
		t.Errorf("one capture took the store from %d to %d entries: want a bounded number dropped", before, got)
	}
	for range 10 {
		mustCapture(t, b)
	}
	// What is left: the live value, and the capture times of both tables.
	if got := entries(); got != 1+2*maxP {
		t.Errorf("after the sweeps: %d entries, want %d", got, 1+2*maxP)
	}
	if x, ok := v.Get(-1); !ok || x != 1 {
		t.Errorf("live entry: %d, %v", x, ok)
	}
}
