package exec

import (
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

// FuzzDistinctDecoders feeds arbitrary bytes to the decoders of the
// DISTINCT entries and of the group state that goes with them: they fail
// or decode, never panic, and what they decode comes back the same from
// its encoding.
func FuzzDistinctDecoders(f *testing.F) {
	kc, cc := distinctKeyCodec{maxPar: 128}, distinctCountsCodec{}
	f.Add(kc.Append(nil, distinctKey{group: "g", slot: 1, num: -5, str: "x"}))
	f.Add(cc.Append(nil, distinctCounts{1, 0, 3, 0}))
	aggs := distinctAggs(f)
	_, distinct := planDistinct(aggs)
	gc := groupCodec{aggs: aggs, distinct: distinct, uid: "agg"}
	g := &groupState{count: 2, accs: []expr.Accumulator{aggs[0].Func.New(), aggs[1].Func.NewDeduplicated()}}
	g.accs[1].Add(types.Int64(7))
	f.Add(gc.Append(nil, g))
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, _, err := kc.Decode(b); err == nil {
			enc := kc.Append(nil, k)
			if back, n, err := kc.Decode(enc); err != nil || back != k || n != len(enc) {
				t.Fatalf("key %+v encodes as %x, which decodes as %+v, %d, %v", k, enc, back, n, err)
			}
		}
		if c, _, err := cc.Decode(b); err == nil {
			enc := cc.Append(nil, c)
			if back, n, err := cc.Decode(enc); err != nil || back != c || n != len(enc) {
				t.Fatalf("counts %v encode as %x, which decode as %v, %d, %v", c, enc, back, n, err)
			}
		}
		gc.Decode(b)
		// A run decoder decodes as Decode does, also after a key with
		// the same group.
		dec := kc.NewDecoder()
		k, n, err := kc.Decode(b)
		for range 2 {
			if dk, dn, derr := dec(b); dk != k || dn != n || (derr == nil) != (err == nil) {
				t.Fatalf("run decoder: %+v, %d, %v; Decode: %+v, %d, %v", dk, dn, derr, k, n, err)
			}
		}
	})
}

// TestDistinctRunDecoderSharesGroups decodes the keys of two groups in
// one run: each key shares the string of the first key of its group, and
// every key comes back as Decode returns it.
func TestDistinctRunDecoderSharesGroups(t *testing.T) {
	kc := distinctKeyCodec{maxPar: 128}
	keys := []distinctKey{
		{group: "apple|2026-12-03", slot: 0, num: 1},
		{group: "apple|2026-12-03", slot: 1, num: 2},
		{group: "apple|2026-12-03", slot: 0, str: "x"},
		{group: "baidu|2026-12-03", slot: 0, num: 1},
		{group: "baidu|2026-12-03", slot: 0, num: 3},
		{group: "apple|2026-12-03", slot: 0, num: 3},
	}
	dec := kc.NewDecoder()
	var got []distinctKey
	for _, k := range keys {
		enc := kc.Append(nil, k)
		d, n, err := dec(enc)
		if err != nil || n != len(enc) || d != k {
			t.Fatalf("key %+v decodes as %+v, %d, %v", k, d, n, err)
		}
		got = append(got, d)
	}
	first := map[string]string{}
	for i, k := range got {
		f, ok := first[k.group]
		if !ok {
			first[k.group] = k.group
			continue
		}
		if unsafe.StringData(k.group) != unsafe.StringData(f) {
			t.Errorf("key %d has a copy of its group %q", i, k.group)
		}
	}
	if _, _, err := dec([]byte{5, 'a'}); err == nil {
		t.Fatal("a truncated group decodes")
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
		defer b.Close()
		if err := b.Open(state.KeyGroupRange{Start: 0, End: 8}, 8); err != nil {
			t.Fatal(err)
		}
		ds, err := newDistinctState(b)
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
				if err := accumulateDistinct(ds, slots, aggs, st, r, true, insertOnly); err != nil {
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
		if c, _ := ds.Get(distinctKey{group: "g", num: 3}); insertOnly && c != (distinctCounts{1}) || !insertOnly && c != (distinctCounts{6}) {
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
