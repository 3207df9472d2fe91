package exec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/statetest"
)

func distinctAggs(t testing.TB) []planner.AggCall {
	t.Helper()
	count, err := expr.NewAggregate(expr.AggSpec{Name: "COUNT"})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := expr.NewAggregate(expr.AggSpec{Name: "COUNT", Distinct: true, Args: []types.Type{types.BigIntType}})
	if err != nil {
		t.Fatal(err)
	}
	return []planner.AggCall{
		{Func: count, Arg: -1, Filter: -1, Text: "COUNT(*)"},
		{Func: dc, Arg: 0, Filter: -1, Text: "COUNT(DISTINCT a)"},
	}
}

// openTestBackend opens b for key groups 0-7 of 8 and closes it when the
// test ends.
func openTestBackend(t *testing.T, b *state.MemoryBackend) {
	t.Helper()
	t.Cleanup(func() { b.Close() })
	if err := b.Open(state.KeyGroupRange{Start: 0, End: 8}, 8); err != nil {
		t.Fatal(err)
	}
}

// FuzzDistinctDecoders feeds arbitrary bytes to the decoders of the
// DISTINCT entries and of the group state that goes with them: they fail
// or decode, never panic, and what they decode comes back the same from
// its encoding.
func FuzzDistinctDecoders(f *testing.F) {
	nc, sc, cc := distinctNumKeyCodec{maxPar: 128}, distinctStrKeyCodec{maxPar: 128}, distinctCountsCodec{}
	f.Add(nc.Append(nil, distinctNumKey{group: "g", slot: 1, num: -5}))
	f.Add(sc.Append(nil, distinctStrKey{group: "g", slot: 1, str: "x"}))
	f.Add(cc.Append(nil, distinctCounts{1, 0, 3, 0}))
	aggs := distinctAggs(f)
	_, distinct := planDistinct(aggs)
	gc := groupCodec{aggs: aggs, distinct: distinct, uid: "agg"}
	g := &groupState{count: 2, accs: []expr.Accumulator{aggs[0].Func.New(), aggs[1].Func.NewDeduplicated()}}
	g.accs[1].Add(types.Int64(7))
	f.Add(gc.Append(nil, g))
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzKeyCodec(t, b, nc, nc.NewDecoder)
		fuzzKeyCodec(t, b, sc, sc.NewDecoder)
		if c, _, err := cc.Decode(b); err == nil {
			enc := cc.Append(nil, c)
			if back, n, err := cc.Decode(enc); err != nil || back != c || n != len(enc) {
				t.Fatalf("counts %v encode as %x, which decode as %v, %d, %v", c, enc, back, n, err)
			}
		}
		gc.Decode(b)
	})
}

// fuzzKeyCodec checks that a key codec's Decode of b, when it succeeds,
// round-trips, and that a run decoder decodes b as Decode does, also after
// a key with the same group.
func fuzzKeyCodec[K comparable](t *testing.T, b []byte, c state.Codec[K], newDecoder func() func([]byte) (K, int, error)) {
	t.Helper()
	k, n, err := c.Decode(b)
	if err == nil {
		enc := c.Append(nil, k)
		if back, m, err := c.Decode(enc); err != nil || back != k || m != len(enc) {
			t.Fatalf("key %+v encodes as %x, which decodes as %+v, %d, %v", k, enc, back, m, err)
		}
	}
	dec := newDecoder()
	for range 2 {
		if dk, dn, derr := dec(b); dk != k || dn != n || (derr == nil) != (err == nil) {
			t.Fatalf("run decoder: %+v, %d, %v; Decode: %+v, %d, %v", dk, dn, derr, k, n, err)
		}
	}
}

// TestDistinctRunDecoderSharesGroups decodes the keys of two groups in
// one run: each key shares the string of the first key of its group, and
// every key comes back as Decode returns it.
func TestDistinctRunDecoderSharesGroups(t *testing.T) {
	nums := []distinctNumKey{
		{group: "apple|2026-12-03", slot: 0, num: 1},
		{group: "apple|2026-12-03", slot: 1, num: 2},
		{group: "baidu|2026-12-03", slot: 0, num: 1},
		{group: "baidu|2026-12-03", slot: 0, num: 3},
		{group: "apple|2026-12-03", slot: 0, num: 3},
	}
	strs := []distinctStrKey{
		{group: "apple|2026-12-03", slot: 2, str: "x"},
		{group: "baidu|2026-12-03", slot: 2, str: "y"},
		{group: "apple|2026-12-03", slot: 2, str: "z"},
	}
	numGroups := decodeRun(t, distinctNumKeyCodec{maxPar: 128}, distinctNumKeyCodec{}.NewDecoder(), nums,
		func(k distinctNumKey) string { return k.group })
	strGroups := decodeRun(t, distinctStrKeyCodec{maxPar: 128}, distinctStrKeyCodec{}.NewDecoder(), strs,
		func(k distinctStrKey) string { return k.group })
	for _, groups := range [][]string{numGroups, strGroups} {
		first := map[string]string{}
		for i, g := range groups {
			f, ok := first[g]
			if !ok {
				first[g] = g
				continue
			}
			if unsafe.StringData(g) != unsafe.StringData(f) {
				t.Errorf("key %d has a copy of its group %q", i, g)
			}
		}
	}
	if _, _, err := (distinctNumKeyCodec{}).NewDecoder()([]byte{5, 'a'}); err == nil {
		t.Fatal("a truncated group decodes")
	}
}

// decodeRun decodes the encodings of keys with one run decoder and returns
// the decoded keys' groups; each key must come back equal.
func decodeRun[K comparable](t *testing.T, c state.Codec[K], dec func([]byte) (K, int, error), keys []K, group func(K) string) []string {
	t.Helper()
	var groups []string
	for _, k := range keys {
		enc := c.Append(nil, k)
		d, n, err := dec(enc)
		if err != nil || n != len(enc) || d != k {
			t.Fatalf("key %+v decodes as %+v, %d, %v", k, d, n, err)
		}
		groups = append(groups, group(d))
	}
	return groups
}

// TestDistinctNumKeyOldFormat decodes keys as the single table of every
// DISTINCT value encoded them: an integer's key decodes as before, a
// string's is refused with an error that names the table and says why.
func TestDistinctNumKeyOldFormat(t *testing.T) {
	old := func(group string, slot uint64, num int64, str string) []byte {
		b := appendString(nil, group)
		b = binary.AppendUvarint(b, slot)
		b = binary.AppendVarint(b, num)
		return appendString(b, str)
	}
	nc := distinctNumKeyCodec{maxPar: 128}
	enc := old("g", 1, -7, "")
	k, n, err := nc.Decode(enc)
	if err != nil || n != len(enc) || k != (distinctNumKey{group: "g", slot: 1, num: -7}) {
		t.Fatalf("old integer key: %+v, %d, %v", k, n, err)
	}
	if !bytes.Equal(nc.Append(nil, k), enc) {
		t.Fatalf("the integer key's encoding changed: %x, was %x", nc.Append(nil, k), enc)
	}
	_, _, err = nc.Decode(old("g", 2, 0, "abc"))
	if err == nil || !strings.Contains(err.Error(), `table "distinct"`) || !strings.Contains(err.Error(), "older version") {
		t.Fatalf("old string key: %v", err)
	}
	// Counts over 32 bits are corrupt; those of the old int64 encoding
	// below it decode.
	cc := distinctCountsCodec{}
	big := binary.AppendVarint(nil, 1<<32)
	for range distinctLanes - 1 {
		big = binary.AppendVarint(big, 0)
	}
	if _, _, err := cc.Decode(big); err == nil {
		t.Fatal("a count of 2^32 decodes")
	}
	if c, _, err := cc.Decode(cc.Append(nil, distinctCounts{maxDistinctCount, 1, 0, 2})); err != nil || c != (distinctCounts{maxDistinctCount, 1, 0, 2}) {
		t.Fatalf("counts: %v, %v", c, err)
	}
}

// oldDistinctKey and oldDistinctKeyCodec are the key of the single table
// that held every DISTINCT value, as earlier versions wrote it.
type oldDistinctKey struct {
	group string
	slot  uint32
	num   int64
	str   string
}

type oldDistinctKeyCodec struct{ maxPar int }

func (c oldDistinctKeyCodec) HashKey(k oldDistinctKey) uint64 {
	e := state.HashUint64(uint64(k.num) + uint64(k.slot)*0x9e3779b97f4a7c15)
	if k.str != "" {
		e ^= state.HashString(k.str)
	}
	return state.HashInKeyGroup(state.HashString(k.group), e, c.maxPar)
}

func (oldDistinctKeyCodec) Append(dst []byte, k oldDistinctKey) []byte {
	dst = appendString(dst, k.group)
	dst = binary.AppendUvarint(dst, uint64(k.slot))
	dst = binary.AppendVarint(dst, k.num)
	return appendString(dst, k.str)
}

func (oldDistinctKeyCodec) Decode([]byte) (oldDistinctKey, int, error) {
	return oldDistinctKey{}, 0, errors.New("not decoded in this test")
}

// TestDistinctRestoreOldSingleTable restores a checkpoint of the single
// table into an aggregation whose only DISTINCT column is a string: the
// string values it holds are refused when the tables register, with an
// error naming the table, rather than left unread while the string table
// starts empty.
func TestDistinctRestoreOldSingleTable(t *testing.T) {
	dc, err := expr.NewAggregate(expr.AggSpec{Name: "COUNT", Distinct: true, Args: []types.Type{types.StringType}})
	if err != nil {
		t.Fatal(err)
	}
	slots, _ := planDistinct([]planner.AggCall{{Func: dc, Arg: 0, Filter: -1, Text: "COUNT(DISTINCT s)"}})
	if len(slots) != 1 || slots[0].num {
		t.Fatalf("slots: %+v", slots)
	}
	old := state.NewMemoryBackend()
	openTestBackend(t, old)
	ot, err := state.NewValue(old, distinctNumStateName, oldDistinctKeyCodec{maxPar: 8}, distinctCountsCodec{})
	if err != nil {
		t.Fatal(err)
	}
	ot.Put(oldDistinctKey{group: "g", str: string(types.AppendKey(nil, types.String("x")))}, distinctCounts{1})
	c, err := old.Capture()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.Persist()
	if err != nil {
		t.Fatal(err)
	}
	b := state.NewMemoryBackend()
	openTestBackend(t, b)
	if err := b.Restore([][]state.KeyGroupData{snap}); err != nil {
		t.Fatal(err)
	}
	_, err = newDistinctState(b, slots)
	if err == nil || !strings.Contains(err.Error(), `table "distinct"`) || !strings.Contains(err.Error(), "older version") {
		t.Fatalf("restoring the single table: %v", err)
	}
}

// TestDistinctGroupStateOldFormat restores the group state of a DISTINCT
// aggregation written before its values were entries of their own: the
// error says so, naming the operator.
func TestDistinctGroupStateOldFormat(t *testing.T) {
	aggs := distinctAggs(t)
	_, distinct := planDistinct(aggs)
	old := groupCodec{aggs: aggs, uid: "agg"}
	g := &groupState{count: 1, accs: []expr.Accumulator{aggs[0].Func.New(), aggs[1].Func.New()}}
	g.accs[1].Add(types.Int64(7))
	enc := old.Append(nil, g)
	_, _, err := groupCodec{aggs: aggs, distinct: distinct, uid: "agg"}.Decode(enc)
	if err == nil || !strings.Contains(err.Error(), "operator agg") || !strings.Contains(err.Error(), "older version") {
		t.Fatalf("decoding the old format: %v", err)
	}
	// The new format round-trips.
	nc := groupCodec{aggs: aggs, distinct: distinct, uid: "agg"}
	g.accs[1] = aggs[1].Func.NewDeduplicated()
	g.accs[1].Add(types.Int64(7))
	back, n, err := nc.Decode(nc.Append(nil, g))
	if err != nil || n != len(nc.Append(nil, g)) || back.count != 1 || back.accs[1].Result().Int64() != 1 {
		t.Fatalf("round trip: %+v, %d, %v", back, n, err)
	}
}

// TestPlanDistinctSlots shares an entry between up to distinctLanes
// aggregates over one column and gives more of them further slots.
func TestPlanDistinctSlots(t *testing.T) {
	base := distinctAggs(t)
	aggs := []planner.AggCall{base[0]}
	for i := range 6 {
		a := base[1]
		a.Filter = i
		aggs = append(aggs, a)
	}
	other := base[1]
	other.Arg = 3
	aggs = append(aggs, other)
	slots, distinct := planDistinct(aggs)
	if distinct[0] || !distinct[1] || !distinct[7] {
		t.Fatalf("distinct %v", distinct)
	}
	if len(slots) != 3 || len(slots[0].aggs) != 4 || slots[0].col != 0 || slots[1].col != 0 || len(slots[1].aggs) != 2 || slots[2].col != 3 {
		t.Fatalf("slots %+v", slots)
	}
	if !slots[0].num {
		t.Fatal("a BIGINT column is not keyed by its integer")
	}
}

// TestDistinctInsertOnlyWritesNewValues feeds the same values to a group's
// DISTINCT aggregates (one of them filtered) again and again, checkpointing
// in between. Over an insert-only input the entries of values seen before
// stay as they are, so a checkpoint after the repeats writes no entries,
// while a value reaching the filtered aggregate for the first time still
// changes its entry; over an updating input every repeat counts. The
// results are the same either way.
func TestDistinctInsertOnlyWritesNewValues(t *testing.T) {
	base := distinctAggs(t)
	filtered := base[1]
	filtered.Filter, filtered.Text = 1, "COUNT(DISTINCT a) FILTER (WHERE f)"
	aggs := []planner.AggCall{base[1], filtered}
	slots, distinct := planDistinct(aggs)
	row := func(a int64, f bool) types.Row {
		return types.Row{Values: []types.Value{types.Int64(a), types.Bool(f)}}
	}
	for _, insertOnly := range []bool{true, false} {
		sf := testShared{dir: t.TempDir()}
		b, err := state.NewMemoryBackendWith(state.MemoryOptions{Incremental: true, MaterializeBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		openTestBackend(t, b)
		ds, err := newDistinctState(b, slots)
		if err != nil {
			t.Fatal(err)
		}
		st := &groupState{accs: make([]expr.Accumulator, len(aggs)), key: "g"}
		for i, a := range aggs {
			if !distinct[i] {
				t.Fatalf("aggregate %d is not DISTINCT", i)
			}
			st.accs[i] = a.Func.NewDeduplicated()
		}
		feed := func(rows ...types.Row) {
			t.Helper()
			for _, r := range rows {
				if _, err := accumulateDistinct(ds, slots, aggs, st, r, true, insertOnly, false, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		// checkpoint returns the bytes of the files the checkpoint wrote
		// (none when nothing changed since the last one).
		seen := map[string]bool{}
		checkpoint := func() int64 {
			t.Helper()
			fs := statetest.PersistFiles(t, b, sf)
			var n int64
			for _, name := range fs.Shared {
				if seen[name] {
					continue
				}
				seen[name] = true
				info, err := os.Stat(filepath.Join(sf.dir, name))
				if err != nil {
					t.Fatal(err)
				}
				n += info.Size()
			}
			return n
		}
		for a := range int64(200) {
			feed(row(a, a%2 == 0))
		}
		first := checkpoint()
		for range 5 {
			for a := range int64(200) {
				feed(row(a, a%2 == 0))
			}
		}
		repeats := checkpoint()
		feed(row(1, true)) // the filtered aggregate's first 1
		flipped := checkpoint()
		if got, want := st.accs[0].Result(), types.Int64(200); got != want {
			t.Errorf("insertOnly %v: COUNT(DISTINCT a) = %v, want %v", insertOnly, got, want)
		}
		if got, want := st.accs[1].Result(), types.Int64(101); got != want {
			t.Errorf("insertOnly %v: %s = %v, want %v", insertOnly, filtered.Text, got, want)
		}
		if c, _ := ds.num.Get(distinctNumKey{group: "g", num: 3}); insertOnly && c != (distinctCounts{1}) || !insertOnly && c != (distinctCounts{6}) {
			t.Errorf("insertOnly %v: the counts of value 3 are %v", insertOnly, c)
		}
		// Unchanged state writes no delta; a single entry is a few dozen
		// bytes; 200 entries are kilobytes.
		if insertOnly {
			if repeats != 0 || flipped == 0 || flipped*10 > first {
				t.Errorf("insert-only deltas: %d bytes for 200 new values, %d after the repeats, %d after one flip", first, repeats, flipped)
			}
		} else if repeats*2 < first {
			t.Errorf("updating deltas: %d bytes for 200 new values but only %d after 1000 counted repeats", first, repeats)
		}
	}
}

// TestDistinctCountLimit adds a value to a group whose count of it is at
// the limit: over an updating input the row fails with an error naming
// the aggregate and the value, and the count stays; over an insert-only
// input the count only says whether the value was seen, so the row passes.
func TestDistinctCountLimit(t *testing.T) {
	aggs := distinctAggs(t)[1:]
	slots, _ := planDistinct(aggs)
	b := state.NewMemoryBackend()
	openTestBackend(t, b)
	ds, err := newDistinctState(b, slots)
	if err != nil {
		t.Fatal(err)
	}
	if ds.str != nil {
		t.Fatal("a BIGINT DISTINCT registers the table of string values")
	}
	st := &groupState{accs: []expr.Accumulator{aggs[0].Func.NewDeduplicated()}, key: "g"}
	k := distinctNumKey{group: "g", num: 9}
	ds.num.Put(k, distinctCounts{maxDistinctCount})
	r := types.Row{Values: []types.Value{types.Int64(9)}}
	_, err = accumulateDistinct(ds, slots, aggs, st, r, true, false, false, nil)
	if err == nil || !strings.Contains(err.Error(), "COUNT(DISTINCT a)") || !strings.Contains(err.Error(), "more than 4294967295 rows") {
		t.Fatalf("adding past the limit: %v", err)
	}
	if c, _ := ds.num.Get(k); c != (distinctCounts{maxDistinctCount}) {
		t.Fatalf("counts after the refused row: %v", c)
	}
	if _, err := accumulateDistinct(ds, slots, aggs, st, r, true, true, false, nil); err != nil {
		t.Fatalf("insert-only input: %v", err)
	}
}

// TestDistinctCountsDecode checks the decode of counts against decoding
// their varints one by one, for inputs of one-byte counts (the short
// path: even bytes below 0x80), of odd bytes (negative counts, corrupt),
// of longer varints and of short inputs.
func TestDistinctCountsDecode(t *testing.T) {
	byVarint := func(src []byte) (distinctCounts, int, bool) {
		var c distinctCounts
		at := 0
		for i := range c {
			n, m := binary.Varint(src[at:])
			if n < 0 || n > maxDistinctCount || m <= 0 {
				return c, 0, false
			}
			c[i], at = uint32(n), at+m
		}
		return c, at, true
	}
	bytesOf := []byte{0, 1, 2, 0x3f, 0x40, 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0x01}
	var inputs [][]byte
	for _, a := range bytesOf {
		for _, b := range bytesOf {
			for _, c := range bytesOf {
				for _, d := range bytesOf {
					inputs = append(inputs, []byte{a, b, c, d}, []byte{a, b, c, d, 0x02})
				}
			}
		}
	}
	inputs = append(inputs, nil, []byte{2}, []byte{2, 4, 6}, binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(nil, 64), 1000), 0), 1))
	cc := distinctCountsCodec{}
	for _, in := range inputs {
		c, n, err := cc.Decode(in)
		wc, wn, ok := byVarint(in)
		if (err == nil) != ok || ok && (c != wc || n != wn) {
			t.Fatalf("counts %x: %v, %d, %v; one varint at a time %v, %d, %v", in, c, n, err, wc, wn, ok)
		}
	}
}

// TestEarlierResult rebuilds a group's result row before an addition from
// the row after it and the results noted of the accumulators it changed.
func TestEarlierResult(t *testing.T) {
	now := []types.Value{types.String("k"), types.Int64(3), types.Int64(7), types.Null}
	for _, tc := range []struct {
		name    string
		changed []changedAcc
		want    []types.Value // nil: no change
	}{
		{"none noted", nil, nil},
		{"noted, same result", []changedAcc{{i: 1, before: types.Int64(7)}}, nil},
		{"NULL before and after", []changedAcc{{i: 2, before: types.Null}}, nil},
		{"count went up", []changedAcc{{i: 0, before: types.Int64(2)}, {i: 1, before: types.Int64(7)}},
			[]types.Value{types.String("k"), types.Int64(2), types.Int64(7), types.Null}},
		{"NULL became a value", []changedAcc{{i: 1, before: types.Null}},
			[]types.Value{types.String("k"), types.Int64(3), types.Null, types.Null}},
	} {
		got := earlierResult(now, 1, tc.changed)
		switch {
		case tc.want == nil && got != nil:
			t.Errorf("%s: %v, want no change", tc.name, got)
		case tc.want != nil && (got == nil || !sameValues(got, tc.want)):
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if now[1] != types.Int64(3) {
		t.Errorf("the row after changed: %v", now)
	}
}
