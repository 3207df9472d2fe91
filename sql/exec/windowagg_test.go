package exec

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// TestWindowStateFire drives one key's windowState as the operator does
// (rows into each of their windows the watermark has not passed, windows
// fired as the watermark moves on, the state copied or re-decoded as a
// checkpoint and restore do) and compares every fired window with a model:
// fired windows hand their room to windows opened later, which must not
// share accumulators with windows still open.
func TestWindowStateFire(t *testing.T) {
	all := sliceTestAggs(t)
	for _, tc := range []struct {
		name   string
		assign windowAssigner
		aggs   []planner.AggCall
	}{
		{"tumble, 3 aggregates", windowAssigner{kind: planner.Tumble, size: 10}, all},
		{"tumble, 2 aggregates", windowAssigner{kind: planner.Tumble, size: 10}, all[:2]},
		{"hop, 3 aggregates", windowAssigner{kind: planner.Hop, size: 30, slide: 10}, all},
		{"cumulate, 2 aggregates", windowAssigner{kind: planner.Cumulate, size: 40, step: 10}, all[:2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.aggs))))
			m := sliceModel{assign: tc.assign, open: map[windowSpan][]int64{}}
			size := int64(0) // CUMULATE windows store their end
			if tc.assign.kind != planner.Cumulate {
				size = tc.assign.size
			}
			wa := newWindowAggs(tc.aggs, size)
			if wa.inline != (len(tc.aggs) == 2) {
				t.Fatalf("COUNT and SUM should be inline, with MAX not: inline %v", wa.inline)
			}
			codec := windowCodec{aggs: wa, uid: "w"}
			var st *windowState
			var free sync.Pool
			wm := int64(clink.NoTimestamp)
			for step := range 5000 {
				switch op := rng.IntN(20); {
				case op < 14: // a row, up to 60 ms behind the watermark or 40 ahead
					base := max(wm, 0)
					ts := base - 60 + rng.Int64N(100)
					if ts < 0 {
						ts = 0
					}
					x := rng.Int64N(1000)
					m.add(ts, wm, x)
					for _, sp := range tc.assign.assign(nil, ts) {
						if wm != clink.NoTimestamp && sp.end-1 <= wm {
							continue
						}
						if st == nil {
							st = reuseWindowState(&free, len(tc.aggs))
						}
						i, _ := st.window(sp.start, sp.end, wa)
						if err := wa.add(st, i, types.Row{Values: []types.Value{types.Int64(x)}}, "w"); err != nil {
							t.Fatal(err)
						}
					}
				case op < 18: // the watermark moves on
					wm = max(wm, 0) + rng.Int64N(25)
					want := m.fire(wm)
					if len(tc.aggs) == 2 {
						for i, w := range want {
							want[i] = w[:strings.LastIndexByte(w, ' ')]
						}
					}
					var got []string
					if st != nil {
						err := st.fire(wm, wa, func(w []int64, accs []expr.Accumulator) error {
							s := fmt.Sprintf("[%d,%d)", w[0], wa.end(w))
							for _, v := range wa.appendResults(nil, w, accs) {
								s += fmt.Sprintf(" %d", v.Int64())
							}
							got = append(got, s)
							return nil
						})
						if err != nil {
							t.Fatal(err)
						}
						if len(st.wins) == 0 {
							// As the operator does: the room of a state
							// whose windows all fired serves the next.
							free.Put(st)
							st = nil
						}
					}
					if !slices.Equal(got, want) {
						t.Fatalf("step %d, watermark %d: fired\n%v\nwant\n%v", step, wm, got, want)
					}
				case op < 19 && st != nil: // a checkpoint: the next change is on a copy
					st = st.clone()
				case st != nil: // a restore
					enc := codec.Append(nil, st)
					dec, n, err := codec.Decode(enc)
					if err != nil || n != len(enc) {
						t.Fatalf("decoding the state: %v (%d of %d bytes)", err, n, len(enc))
					}
					st = dec
				}
			}
		})
	}
}

// TestWindowStateInlineLayout: a window state kept inline encodes to the
// bytes the same state with an accumulator per aggregate does (the layout
// of checkpoints taken before inline windows), so either restores as the
// other; a clone is independent of its original; a corrupt encoding is an
// error naming the aggregate.
func TestWindowStateInlineLayout(t *testing.T) {
	aggs := sliceTestAggs(t)[:2] // COUNT(*), SUM(x)
	inl, acc := newWindowAggs(aggs, 10), &windowAggs{calls: aggs, size: 10, base: 1, stride: 1}
	if !inl.inline {
		t.Fatal("COUNT(*) and SUM(BIGINT) are not kept inline")
	}
	build := func(wa *windowAggs) *windowState {
		st := newWindowState(len(aggs))
		for x := range int64(40) {
			start := x % 7 * 10
			i, _ := st.window(start, start+10, wa)
			r := types.Row{Values: []types.Value{types.Int64(x * 1000003)}}
			if x%5 == 0 {
				r.Values[0] = types.Null
			}
			if err := wa.add(st, i, r, "w"); err != nil {
				t.Fatal(err)
			}
		}
		return st
	}
	results := func(wa *windowAggs, st *windowState) []string {
		var out []string
		for i := range wa.count(st) {
			w := wa.win(st, i)
			var accs []expr.Accumulator
			if !wa.inline {
				accs = st.accs[i]
			}
			out = append(out, fmt.Sprint(w[0], wa.end(w), wa.appendResults(nil, w, accs)))
		}
		return out
	}
	a, b := build(inl), build(acc)
	if len(b.accs) != acc.count(b) || len(a.accs) != 0 {
		t.Fatal("layouts not as asked")
	}
	encA := windowCodec{aggs: inl, uid: "w"}.Append(nil, a)
	encB := windowCodec{aggs: acc, uid: "w"}.Append(nil, b)
	if !slices.Equal(encA, encB) {
		t.Fatalf("inline state encodes as\n%x\nan accumulator state as\n%x", encA, encB)
	}
	want := results(acc, b)
	if got := results(inl, a); !slices.Equal(got, want) {
		t.Fatalf("inline results %v, want %v", got, want)
	}
	for name, c := range map[string]struct {
		wa  *windowAggs
		enc []byte
	}{"inline from accumulators": {inl, encB}, "accumulators from inline": {acc, encA}} {
		st, n, err := windowCodec{aggs: c.wa, uid: "w"}.Decode(c.enc)
		if err != nil || n != len(c.enc) {
			t.Fatalf("%s: %v (%d of %d bytes)", name, err, n, len(c.enc))
		}
		if got := results(c.wa, st); !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", name, got, want)
		}
	}

	cl := a.clone()
	if err := inl.add(cl, 0, types.Row{Values: []types.Value{types.Int64(1)}}, "w"); err != nil {
		t.Fatal(err)
	}
	if got := results(inl, a); !slices.Equal(got, want) {
		t.Fatalf("changing a clone changed the original: %v, want %v", got, want)
	}
	if slices.Equal(results(inl, cl), want) {
		t.Fatal("the clone did not change")
	}

	// SUM's encoding with a DECIMAL part is not an integer sum's.
	bad := slices.Clone(encA)
	// The first window: count, start, end, then COUNT's length and
	// bytes, then SUM's length and bytes: count, sum, the float (8 bytes).
	w := 1
	_, m := binary.Varint(bad[w:])
	w += m
	_, m = binary.Varint(bad[w:])
	w += m
	w += 1 + int(bad[w]) // COUNT
	l := int(bad[w])
	bad[w+l] = 0x7f // SUM's last byte: its DECIMAL part
	if _, _, err := (windowCodec{aggs: inl, uid: "w"}).Decode(bad); err == nil || !strings.Contains(err.Error(), "SUM") {
		t.Fatalf("decoding a corrupt SUM: %v", err)
	}
	if _, _, err := (windowCodec{aggs: inl, uid: "w"}).Decode(encA[:len(encA)-3]); err == nil {
		t.Fatal("decoded a truncated state")
	}
}

func FuzzWindowCodecInline(f *testing.F) {
	aggs := sliceTestAggs(f)[:2]
	c := windowCodec{aggs: newWindowAggs(aggs, 10), uid: "w"}
	st := newWindowState(2)
	for x := range int64(5) {
		i, _ := st.window(x*10, x*10+10, c.aggs)
		_ = c.aggs.add(st, i, types.Row{Values: []types.Value{types.Int64(x)}}, "w")
	}
	f.Add(c.Append(nil, st))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, n, err := c.Decode(data)
		if err != nil {
			return
		}
		if n > len(data) {
			t.Fatalf("used %d of %d bytes", n, len(data))
		}
		enc := c.Append(nil, s)
		again, _, err := c.Decode(enc)
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if !slices.Equal(c.Append(nil, again), enc) {
			t.Fatal("round trip changed the state")
		}
	})
}

// TestOpenWindowSize: a window takes the words its aggregates need (a
// TUMBLE window with COUNT(*) two, four to a cache line), and a TUMBLE
// window whose state says it is not the window's size long is refused.
func TestOpenWindowSize(t *testing.T) {
	aggs := sliceTestAggs(t)[:2] // COUNT(*), SUM(x)
	for _, tc := range []struct {
		aggs  []planner.AggCall
		size  int64
		words int
	}{
		{aggs[:1], 10, 2},         // start, count
		{aggs[:1], 0, 3},          // start, end, count
		{aggs, 10, 4},             // start, count, SUM's count and sum
		{sliceTestAggs(t), 10, 1}, // MAX is not inline: the start alone
	} {
		if wa := newWindowAggs(tc.aggs, tc.size); wa.stride != tc.words {
			t.Errorf("%d aggregates, size %d: a window takes %d words, want %d", len(tc.aggs), tc.size, wa.stride, tc.words)
		}
	}
	var many []planner.AggCall
	for len(many)*2 < maxWindowWords {
		many = append(many, aggs[1])
	}
	if newWindowAggs(many, 10).inline {
		t.Errorf("%d SUMs are kept inline in more than %d words", len(many), maxWindowWords)
	}
	if !newWindowAggs(many[:len(many)-1], 10).inline {
		t.Errorf("%d SUMs, which fit %d words, are not kept inline", len(many)-1, maxWindowWords)
	}
	long := windowCodec{aggs: newWindowAggs(aggs, 0), uid: "w"}
	st := newWindowState(2)
	st.window(0, 20, long.aggs)
	enc := long.Append(nil, st)
	if _, _, err := long.Decode(enc); err != nil {
		t.Fatal(err)
	}
	_, _, err := windowCodec{aggs: newWindowAggs(aggs, 10), uid: "w"}.Decode(enc)
	if err == nil || !strings.Contains(err.Error(), "window 0: [0, 20) is not 10 ms long") {
		t.Fatalf("decoding a 20 ms window as 10 ms ones: %v", err)
	}
}
