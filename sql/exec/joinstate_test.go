package exec

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/clinkstream/clink/sql/types"
	"github.com/clinkstream/clink/state"
)

// joinTestRows are rows of a few kinds of values, two of them equal.
func joinTestRows() [][]types.Value {
	return [][]types.Value{
		{types.Int64(1), types.String("abc"), types.NullOf(types.KindVarChar), types.Decimal(1234, 10, 2)},
		{types.Int64(-7), types.String(""), types.String("xyz"), types.NullOf(types.KindDecimal)},
		{types.Int64(1), types.String("abc"), types.NullOf(types.KindVarChar), types.Decimal(1234, 10, 2)},
		{types.Int64(1 << 40), types.String("a longer string with some more bytes"), types.String("q"), types.Decimal(-5, 10, 2)},
	}
}

func encodeJoinRows(rows [][]types.Value) joinRows {
	var rs joinRows
	for i, r := range rows {
		rs = appendJoinRec(rs, byte(i%2)*joinNullKey, int64(i*300), types.AppendValues(nil, r))
	}
	return rs
}

func sameRows(a, b []types.Value) bool { return len(a) == len(b) && sameValues(a, b) }

// readJoinRows decodes every record of rs.
func readJoinRows(t *testing.T, rs joinRows, cols int) (rows [][]types.Value, flags []byte, assoc []int64) {
	t.Helper()
	for off := 0; off < len(rs); {
		r, err := rs.rec(off)
		if err != nil {
			t.Fatalf("record at %d: %v", off, err)
		}
		vals := make([]types.Value, cols)
		if err := decodeJoinRow(vals, r.row); err != nil {
			t.Fatalf("row at %d: %v", off, err)
		}
		rows, flags, assoc = append(rows, vals), append(flags, r.flags), append(assoc, r.assoc)
		off = r.end
	}
	return rows, flags, assoc
}

func TestJoinRowsRoundTrip(t *testing.T) {
	in := joinTestRows()
	rs := encodeJoinRows(in)
	// Through the codec a checkpoint writes and a restore reads.
	c := state.CodecFor[joinState]()
	b := c.Append(nil, joinState{Left: rs, Right: rs[:0]})
	st, n, err := c.Decode(b)
	if err != nil || n != len(b) {
		t.Fatalf("decoding the state: %d of %d bytes, %v", n, len(b), err)
	}
	if len(st.Right) != 0 {
		t.Fatalf("right side %x, want none", st.Right)
	}
	rows, flags, assoc := readJoinRows(t, st.Left, 4)
	if len(rows) != len(in) {
		t.Fatalf("%d rows, want %d", len(rows), len(in))
	}
	for i := range in {
		if !sameRows(rows[i], in[i]) || flags[i] != byte(i%2)*joinNullKey || assoc[i] != int64(i*300) {
			t.Errorf("record %d: %v flags %d assoc %d, want %v flags %d assoc %d", i, rows[i], flags[i], assoc[i], in[i], i%2, i*300)
		}
	}
	// The decoded state does not share the encoded checkpoint's bytes.
	for i := range b {
		b[i] = 0
	}
	again, _, _ := readJoinRows(t, st.Left, 4)
	for i := range in {
		if !sameRows(again[i], in[i]) {
			t.Errorf("record %d after the checkpoint's bytes changed: %v, want %v", i, again[i], in[i])
		}
	}
}

func TestJoinRowsRewrite(t *testing.T) {
	in := joinTestRows()
	rs := encodeJoinRows(in)
	held := append(joinRows(nil), rs...)
	var offs []int
	for off := 0; off < len(rs); {
		r, _ := rs.rec(off)
		offs = append(offs, off)
		off = r.end
	}
	// Drop the second record, count one more match for the first and
	// the last.
	out, err := rs.rewrite(offs[1], []int{offs[0], offs[3]}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(rs) != string(held) {
		t.Fatal("rewrite changed the slice it was given")
	}
	rows, _, assoc := readJoinRows(t, out, 4)
	if len(rows) != 3 || !sameRows(rows[0], in[0]) || !sameRows(rows[1], in[2]) || !sameRows(rows[2], in[3]) {
		t.Fatalf("rows %v", rows)
	}
	if assoc[0] != 1 || assoc[1] != 600 || assoc[2] != 901 {
		t.Fatalf("association counts %v, want [1 600 901]", assoc)
	}
	// Dropping the only record leaves nothing.
	one := appendJoinRec(nil, 0, 0, types.AppendValues(nil, in[0]))
	if out, err := one.rewrite(0, nil, 0); err != nil || out != nil {
		t.Fatalf("rewrite of the only record: %x, %v", out, err)
	}
}

// TestJoinRowsFindDuplicates retracts rows held twice, and rows whose
// values are equal but encode differently.
func TestJoinRowsFindDuplicates(t *testing.T) {
	j := &regularJoin{}
	in := joinTestRows()
	rs := encodeJoinRows(in)
	tmp := make([]types.Value, 4)
	at, err := j.find(rs, in[2], nil, types.AppendValues(nil, in[2]), tmp)
	if err != nil || at != 0 {
		t.Fatalf("find of a row held twice: %d, %v; want the first, at 0", at, err)
	}
	// Removing it leaves the other copy.
	rs, err = rs.rewrite(at, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows, _, _ := readJoinRows(t, rs, 4)
	if len(rows) != 3 || !sameRows(rows[1], in[2]) {
		t.Fatalf("after one retraction: %v", rows)
	}
	at, err = j.find(rs, in[0], nil, types.AppendValues(nil, in[0]), tmp)
	if err != nil || at < 0 {
		t.Fatalf("find of the second copy: %d, %v", at, err)
	}
	if rs, err = rs.rewrite(at, nil, 0); err != nil {
		t.Fatal(err)
	}
	if at, err = j.find(rs, in[0], nil, types.AppendValues(nil, in[0]), tmp); err != nil || at >= 0 {
		t.Fatalf("find after both copies were retracted: %d, %v; want -1", at, err)
	}
	// 12.340 equals 12.34 but is encoded with another scale.
	other := append([]types.Value(nil), in[0]...)
	other[3] = types.Decimal(12340, 10, 3)
	rs = appendJoinRec(rs, 0, 0, types.AppendValues(nil, in[0]))
	at, err = j.find(rs, other, nil, types.AppendValues(nil, other), tmp)
	if err != nil || at < 0 {
		t.Fatalf("find of an equal row of another encoding: %d, %v", at, err)
	}
}

// TestJoinRowsCorrupt reads every truncation and a few corruptions of a
// join state: each is an error, never a panic or a wrong row count.
func TestJoinRowsCorrupt(t *testing.T) {
	rs := encodeJoinRows(joinTestRows())
	for cut := 1; cut < len(rs); cut++ {
		bad := rs[:cut]
		var err error
		for off := 0; off < len(bad) && err == nil; {
			var r joinRec
			if r, err = bad.rec(off); err == nil {
				err = decodeJoinRow(make([]types.Value, 4), r.row)
				off = r.end
			}
		}
		if _, rerr := bad.rewrite(-1, nil, 0); rerr == nil && err == nil {
			// A cut between two records is a shorter valid list.
			continue
		}
		if err == nil || !errors.Is(err, errJoinState) {
			t.Fatalf("cut at %d: %v, want a join state error", cut, err)
		}
	}
	bad := append(joinRows(nil), rs...)
	bad[0] = 0x40
	if _, err := bad.rec(0); !errors.Is(err, errJoinState) {
		t.Fatalf("bad flags: %v", err)
	}
	r, _ := rs.rec(0)
	if err := decodeJoinRow(make([]types.Value, 3), r.row); !errors.Is(err, errJoinState) {
		t.Fatalf("a row of 4 columns read as 3: %v", err)
	}
	if err := decodeJoinRow(make([]types.Value, 5), r.row); !errors.Is(err, errJoinState) {
		t.Fatalf("a row of 4 columns read as 5: %v", err)
	}
}

// TestJoinRowsRetainedByExpiry: a record that carries its expiry
// (joinExpires) is kept or dropped by it without its row being decoded; a
// record without one (as written before records carried it) is decoded;
// rewriting a list keeps the expiries.
func TestJoinRowsRetainedByExpiry(t *testing.T) {
	oneCol := types.AppendValues(nil, []types.Value{types.Int64(99)})
	var rs joinRows
	rs = appendJoinRec(rs, 0, 0, types.AppendValues(nil, []types.Value{types.Int64(5), types.String("old"), types.Int64(0)}))
	offB := len(rs)
	// Three columns are asked for: decoding this row of one would fail.
	rs = appendJoinRecExpiring(rs, joinExpires, 10, 2, oneCol)
	rs = appendJoinRecExpiring(rs, joinExpires|joinNullKey, 3, 0, oneCol)
	decoded := 0
	kept, dropped, err := rs.retained(3, func(row []types.Value) (int64, bool) {
		decoded++
		return row[0].Int64(), true
	}, func(e int64) bool { return e > 4 })
	if err != nil {
		t.Fatal(err)
	}
	if !dropped || decoded != 1 {
		t.Fatalf("dropped %v, rows decoded %d; want the last record dropped and one row decoded", dropped, decoded)
	}
	var got []int64
	for off := 0; off < len(kept); {
		r, err := kept.rec(off)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.expires)
		off = r.end
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 10 {
		t.Fatalf("kept records with expiries %v, want [0 10]", got)
	}
	re, err := rs.rewrite(-1, []int{offB}, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := re.rec(offB)
	if err != nil || r.flags != joinExpires || r.expires != 10 || r.assoc != 3 || string(r.row) != string(oneCol) {
		t.Fatalf("rewritten record: %+v, %v; want expiry 10, association 3", r, err)
	}
	// A key's first record takes exactly its room.
	if first := appendJoinRecExpiring(nil, joinExpires, 1<<40, 0, oneCol); len(first) != cap(first) {
		t.Errorf("a first record of %d bytes has room for %d", len(first), cap(first))
	}
}

// TestJoinRowsRetainedFirstDropped drops a list's first record and keeps
// the one after it: the records kept come in a slice of their own (the
// list given may be in a checkpoint), and a list whose records all go
// becomes nil without an allocation.
func TestJoinRowsRetainedFirstDropped(t *testing.T) {
	row := types.AppendValues(nil, []types.Value{types.Int64(1)})
	var rs joinRows
	rs = appendJoinRecExpiring(rs, joinExpires, 3, 0, row)
	rs = appendJoinRecExpiring(rs, joinExpires, 10, 0, row)
	before := string(rs)
	keep := func(e int64) bool { return e > 4 }
	kept, dropped, err := rs.retained(1, nil, keep)
	if err != nil || !dropped {
		t.Fatalf("retained: dropped %v, %v; want the first record dropped", dropped, err)
	}
	r, err := kept.rec(0)
	if err != nil || r.expires != 10 || r.end != len(kept) {
		t.Fatalf("kept %+v, %v; want the one record expiring at 10", r, err)
	}
	if len(kept) > 0 && &kept[0] == &rs[len(rs)-len(kept)] {
		t.Fatal("the records kept share the array of the list given")
	}
	clear(kept)
	if string(rs) != before {
		t.Fatal("writing the records kept changed the list given")
	}
	none, dropped, err := rs.retained(1, nil, func(int64) bool { return false })
	if err != nil || !dropped || none != nil {
		t.Fatalf("every record dropped: %v, %v, %v; want nil, true", none, dropped, err)
	}
	// Dropping every record allocates nothing.
	if n := testing.AllocsPerRun(100, func() { rs.retained(1, nil, func(int64) bool { return false }) }); n != 0 {
		t.Fatalf("dropping every record allocates %v times", n)
	}
}

func TestUvarintLen(t *testing.T) {
	for _, x := range []uint64{0, 1, 127, 128, 16383, 16384, 1 << 40, 1<<63 - 1, 1<<64 - 1} {
		if got, want := uvarintLen(x), len(binary.AppendUvarint(nil, x)); got != want {
			t.Errorf("uvarintLen(%d) = %d, want %d", x, got, want)
		}
	}
	for _, x := range []int64{0, 1, -1, 63, -64, 64, -65, 1 << 40, -(1 << 40), math.MaxInt64, math.MinInt64} {
		if got, want := varintLen(x), len(binary.AppendVarint(nil, x)); got != want {
			t.Errorf("varintLen(%d) = %d, want %d", x, got, want)
		}
	}
}

// FuzzJoinRows feeds arbitrary bytes, as a restored checkpoint could hold
// them, to every reader of a join's rows: each returns a join state error
// or a result, never panics, and what rewrite and retained return parses
// again into the records that went in.
func FuzzJoinRows(f *testing.F) {
	f.Add([]byte(encodeJoinRows(joinTestRows())), uint8(4), uint8(1))
	f.Add([]byte{0, 0, 0}, uint8(0), uint8(0))
	f.Add([]byte(appendJoinRecExpiring(encodeJoinRows(joinTestRows()[:1]), joinExpires, -3, 1, []byte{1})), uint8(1), uint8(2))
	f.Add([]byte{1, 200, 1, 3, 1, 2, 3}, uint8(2), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, cols, every uint8) {
		rs := joinRows(data)
		n := 0
		valid := true
		for off := 0; off < len(rs); {
			r, err := rs.rec(off)
			if err != nil {
				if !errors.Is(err, errJoinState) {
					t.Fatalf("record at %d: %v, not a join state error", off, err)
				}
				valid = false
				break
			}
			if r.end <= off || r.end > len(rs) {
				t.Fatalf("record at %d ends at %d of %d", off, r.end, len(rs))
			}
			if err := decodeJoinRow(make([]types.Value, cols%8), r.row); err != nil && !errors.Is(err, errJoinState) {
				t.Fatalf("row at %d: %v, not a join state error", off, err)
			}
			n++
			off = r.end
		}
		out, err := rs.rewrite(-1, nil, 1)
		if (err == nil) != valid {
			t.Fatalf("rewrite: %v, but the records parse: %v", err, valid)
		}
		if err == nil && recordCount(t, out) != n {
			t.Fatalf("rewrite kept %d records of %d", recordCount(t, out), n)
		}
		i := 0
		kept, _, err := rs.retained(int(cols%8), func([]types.Value) (int64, bool) { return 0, true }, func(int64) bool {
			i++
			return every == 0 || i%int(every) != 0
		})
		if err != nil {
			if !errors.Is(err, errJoinState) {
				t.Fatalf("retained: %v, not a join state error", err)
			}
			return
		}
		if !valid {
			t.Fatal("retained took records that do not parse")
		}
		if got := recordCount(t, kept); got > n {
			t.Fatalf("retained kept %d records of %d", got, n)
		}
	})
}

// recordCount counts the records of rs, which must parse.
func recordCount(t *testing.T, rs joinRows) int {
	t.Helper()
	n := 0
	for off := 0; off < len(rs); n++ {
		r, err := rs.rec(off)
		if err != nil {
			t.Fatalf("record at %d of a rewritten list: %v", off, err)
		}
		off = r.end
	}
	return n
}
