package exec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
	"github.com/clinkstream/clink/state"
)

// topRowsOf encodes rows as a Top-N over insert-only input keeps them.
func topRowsOf(rows [][]types.Value) topRows {
	t := topRows(nil)
	t = appendUvarint(t, uint64(len(rows))+1)
	for _, r := range rows {
		enc := appendStoredRow(nil, r)
		t = appendUvarint(t, uint64(len(enc)))
		t = append(t, enc...)
	}
	return t
}

func appendUvarint(b []byte, x uint64) []byte {
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

// decodeTopRows decodes every row of rs.
func decodeTopRows(t *testing.T, rs topRows) [][]types.Value {
	t.Helper()
	sc := &topScratch{}
	if _, err := rs.records(&sc.offs, true); err != nil {
		t.Fatalf("decoding %x: %v", []byte(rs), err)
	}
	var rows [][]types.Value
	for i := range len(sc.offs) - 1 {
		r, err := sc.decode(rs, i)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestRankStateMatchesReflectCodec checks that the byte states of a
// deduplication and of a Top-N over insert-only input encode as the
// reflection codec encoded the types.Row and rankState kept before, so
// that checkpoints taken before restore, and the other way round.
func TestRankStateMatchesReflectCodec(t *testing.T) {
	rows := joinTestRows()
	for _, rs := range [][][]types.Value{nil, rows[:1], rows} {
		var old rankState
		for _, r := range rs {
			old.Rows = append(old.Rows, types.Row{Kind: changelog.Insert, Values: r})
		}
		oldBytes := state.CodecFor[rankState]().Append(nil, old)
		newBytes := topCodec{}.Append(nil, topRowsOf(rs))
		if len(rs) > 0 && !bytes.Equal(oldBytes, newBytes) {
			t.Fatalf("%d rows: rankState encodes as %x, topRows as %x", len(rs), oldBytes, newBytes)
		}
		got, n, err := topCodec{}.Decode(append(oldBytes, 0xff))
		if err != nil || n != len(oldBytes) {
			t.Fatalf("%d rows: decoding a rankState: %d bytes, %v", len(rs), n, err)
		}
		if dec := decodeTopRows(t, got); !slices.EqualFunc(dec, rs, sameRows) {
			t.Fatalf("%d rows: decoded %v, want %v", len(rs), dec, rs)
		}
		back, n, err := state.CodecFor[rankState]().Decode(newBytes)
		if err != nil || n != len(newBytes) || len(back.Rows) != len(rs) {
			t.Fatalf("%d rows: decoding a topRows as a rankState: %d rows, %d bytes, %v", len(rs), len(back.Rows), n, err)
		}
	}
	for _, r := range rows {
		oldBytes := state.CodecFor[types.Row]().Append(nil, types.Row{Kind: changelog.Insert, Values: r})
		newBytes := dedupCodec{}.Append(nil, appendStoredRow(nil, r))
		if !bytes.Equal(oldBytes, newBytes) {
			t.Fatalf("a kept row encodes as %x, a dedupRow as %x", oldBytes, newBytes)
		}
		got, n, err := dedupCodec{}.Decode(oldBytes)
		if err != nil || n != len(oldBytes) {
			t.Fatalf("decoding a kept row: %d bytes, %v", n, err)
		}
		dec := make([]types.Value, len(r))
		if err := decodeStoredRow(dec, got); err != nil || !sameRows(dec, r) {
			t.Fatalf("decoded %v (%v), want %v", dec, err, r)
		}
	}
}

// TestRankStateCorrupt checks that a cut or changed state fails to decode
// with an error, never a panic, and that a cut one always fails.
func TestRankStateCorrupt(t *testing.T) {
	top := topCodec{}.Append(nil, topRowsOf(joinTestRows()))
	dedup := dedupCodec{}.Append(nil, appendStoredRow(nil, joinTestRows()[3]))
	for name, dec := range map[string]func([]byte) error{
		"topRows":  func(b []byte) error { _, _, err := topCodec{}.Decode(b); return err },
		"dedupRow": func(b []byte) error { _, _, err := dedupCodec{}.Decode(b); return err },
	} {
		full := top
		if name == "dedupRow" {
			full = dedup
		}
		for i := range len(full) {
			if err := dec(full[:i]); err == nil {
				t.Errorf("%s cut to %d of %d bytes decodes", name, i, len(full))
			}
		}
		for i := range len(full) {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				b := slices.Clone(full)
				b[i] ^= x
				_ = dec(b)
			}
		}
	}
}

func FuzzTopRowsDecode(f *testing.F) {
	f.Add([]byte(topCodec{}.Append(nil, topRowsOf(joinTestRows()))))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, n, err := topCodec{}.Decode(b)
		if err != nil {
			return
		}
		if again := (topCodec{}).Append(nil, rs); !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encodes as %x, read %x", again, b[:n])
		}
		// A decoded state takes a row without error.
		top := &appendTopN{keys: []planner.SortKey{{Col: 0}}, start: 1, end: 3, sortCols: []int{0}}
		if _, err := top.insert(top.newScratch(), rs, []types.Value{types.Int64(5)}); err != nil {
			t.Logf("inserting: %v", err)
		}
	})
}

func FuzzDedupRowDecode(f *testing.F) {
	f.Add(dedupCodec{}.Append(nil, appendStoredRow(nil, joinTestRows()[0])))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := dedupCodec{}.Decode(b)
		if err != nil {
			return
		}
		if again := (dedupCodec{}).Append(nil, r); !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encodes as %x, read %x", again, b[:n])
		}
	})
}

// TestAppendTopNMatchesRowList inserts random rows (with ties and NULLs)
// into the byte state of a ROW_NUMBER Top-N over insert-only input and
// into a list of rows kept the way every other Top-N keeps them, and
// checks the rows kept and the changes emitted against each other: the
// changes against the numbered rows in range before and after each row.
func TestAppendTopNMatchesRowList(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 400 {
		start := 1 + rng.IntN(3)
		end := start + rng.IntN(4)
		if trial%10 == 0 {
			end = start + 40
		}
		keys := []planner.SortKey{{Col: 1, Desc: rng.IntN(2) == 0, NullsFirst: rng.IntN(2) == 0}}
		if rng.IntN(2) == 0 {
			keys = append(keys, planner.SortKey{Col: 2, Desc: rng.IntN(2) == 0})
		}
		top := &appendTopN{keys: keys, start: start, end: end, outRank: rng.IntN(2) == 0, sortCols: sortColumns(keys)}
		sc := top.newScratch()
		name := fmt.Sprintf("trial %d (rows %d..%d, keys %v, number %t)", trial, start, end, keys, top.outRank)
		var st topRows
		var list []types.Row
		for e := range 30 {
			x := types.Int64(int64(rng.IntN(7) - 3))
			if rng.IntN(8) == 0 {
				x = types.NullOf(types.KindBigInt)
			}
			// Rows that tie on every column come in now and then.
			id := int64(e)
			if rng.IntN(5) == 0 {
				id = 0
			}
			v := []types.Value{types.Int64(id), x, types.Int64(int64(rng.IntN(3))), types.String(fmt.Sprint("s", id))}
			was := ranked("ROW_NUMBER", keys, list, start, end, top.outRank)
			i := insertAt(keys, list, v, false)
			if i < end {
				list = slices.Insert(list, i, types.Row{Kind: changelog.Insert, Values: v})
				list = truncate("ROW_NUMBER", keys, list, end)
			}
			now := ranked("ROW_NUMBER", keys, list, start, end, top.outRank)

			rows, err := top.insert(sc, st, v)
			if err != nil {
				t.Fatalf("%s, row %d: %v", name, e, err)
			}
			if rows != nil {
				st = rows
			}
			got := decodeTopRows(t, st)
			if len(st) == 0 {
				got = nil
			}
			if len(got) != len(list) || !slices.EqualFunc(got, list, func(a []types.Value, b types.Row) bool { return sameRows(a, b.Values) }) {
				t.Fatalf("%s, row %d: kept %v, want %v", name, e, got, list)
			}
			// Applying the changes to the rows in range before gives the
			// rows in range after.
			applied := slices.Clone(was)
			for _, o := range sc.out {
				switch o.Kind {
				case changelog.Insert, changelog.UpdateAfter:
					applied = append(applied, o.Values)
				default:
					j := slices.IndexFunc(applied, func(a []types.Value) bool { return sameRows(a, o.Values) })
					if j < 0 {
						t.Fatalf("%s, row %d: %s retracts a row not in %v", name, e, o, applied)
					}
					applied = slices.Delete(applied, j, j+1)
				}
			}
			key := func(vs []types.Value) string { return fmt.Sprint(vs) }
			sortBy := func(rs [][]types.Value) []string {
				var ks []string
				for _, r := range rs {
					ks = append(ks, key(r))
				}
				slices.Sort(ks)
				return ks
			}
			if a, b := sortBy(applied), sortBy(now); !slices.Equal(a, b) {
				t.Fatalf("%s, row %d: the changes %v take %v to %v, want %v", name, e, sc.out, was, a, b)
			}
			// Without the number a row that stays is never retracted;
			// with it, only numbers whose row changed change.
			if len(sc.out) > 2*(end-start+1) || !top.outRank && len(sc.out) > 2 {
				t.Fatalf("%s, row %d: %d changes: %v", name, e, len(sc.out), sc.out)
			}
			sc.out = sc.out[:0]
		}
	}
}

// TestRankStateRunDecoders checks that the decoders of a restore's run of
// values (which copy the values into a shared arena) decode each value of
// the run as Decode does, and that no two share bytes an append could
// overwrite.
func TestRankStateRunDecoders(t *testing.T) {
	rows := joinTestRows()
	var tops, dedups []byte
	var wantTop []topRows
	var wantDedup []dedupRow
	for i := range 50 {
		rs := rows[:i%(len(rows)+1)]
		v := topRowsOf(rs)
		tops = topCodec{}.Append(tops, v)
		wantTop = append(wantTop, v)
		d := dedupRow(appendStoredRow(nil, rows[i%len(rows)]))
		dedups = dedupCodec{}.Append(dedups, d)
		wantDedup = append(wantDedup, d)
	}
	runTop := topCodec{}.NewDecoder()
	runDedup := dedupCodec{}.NewDecoder()
	var gotTop []topRows
	var gotDedup []dedupRow
	for src := tops; len(src) > 0; {
		v, n, err := runTop(src)
		if err != nil {
			t.Fatalf("topRows %d: %v", len(gotTop), err)
		}
		one, m, _ := topCodec{}.Decode(src)
		if m != n || !bytes.Equal(v, one) {
			t.Fatalf("topRows %d: the run decoder read %d bytes %x, Decode %d bytes %x", len(gotTop), n, v, m, one)
		}
		gotTop, src = append(gotTop, v), src[n:]
	}
	for src := dedups; len(src) > 0; {
		v, n, err := runDedup(src)
		if err != nil {
			t.Fatalf("dedupRow %d: %v", len(gotDedup), err)
		}
		gotDedup, src = append(gotDedup, v), src[n:]
	}
	clear(tops)
	clear(dedups)
	for i := range gotTop {
		gotTop[i] = append(gotTop[i], 0xee)
		gotDedup[i] = append(gotDedup[i], 0xee)
	}
	for i := range wantTop {
		if !bytes.Equal(gotTop[i], append(slices.Clone(wantTop[i]), 0xee)) {
			t.Fatalf("topRows %d: %x, want %x and the byte appended", i, gotTop[i], wantTop[i])
		}
		if !bytes.Equal(gotDedup[i], append(slices.Clone(wantDedup[i]), 0xee)) {
			t.Fatalf("dedupRow %d: %x, want %x and the byte appended", i, gotDedup[i], wantDedup[i])
		}
	}
}
