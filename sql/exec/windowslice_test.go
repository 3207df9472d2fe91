package exec

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// sliceTestAggs are COUNT(*), SUM(x) and MAX(x) over column 0.
func sliceTestAggs(t testing.TB) []planner.AggCall {
	var aggs []planner.AggCall
	for _, s := range []expr.AggSpec{{Name: "COUNT"}, {Name: "SUM", Args: []types.Type{types.BigIntType}}, {Name: "MAX", Args: []types.Type{types.BigIntType}}} {
		fn, err := expr.NewAggregate(s)
		if err != nil {
			t.Fatal(err)
		}
		arg := 0
		if len(s.Args) == 0 {
			arg = -1
		}
		aggs = append(aggs, planner.AggCall{Func: fn, Arg: arg, Filter: -1, Text: s.Name})
	}
	return aggs
}

// sliceModel is the per-window semantics the sliced state must give: a row
// goes into each of its windows that the watermark has not passed, and a
// window fires once the watermark reaches its last millisecond.
type sliceModel struct {
	assign windowAssigner
	open   map[windowSpan][]int64
}

func (m *sliceModel) add(ts, wm, x int64) {
	for _, sp := range m.assign.assign(nil, ts) {
		if wm != clink.NoTimestamp && sp.end-1 <= wm {
			continue
		}
		m.open[sp] = append(m.open[sp], x)
	}
}

func (m *sliceModel) fire(wm int64) []string {
	var due []windowSpan
	for sp := range m.open {
		if sp.end-1 <= wm {
			due = append(due, sp)
		}
	}
	slices.SortFunc(due, func(a, b windowSpan) int {
		if a.end != b.end {
			return int(a.end - b.end)
		}
		return int(a.start - b.start)
	})
	var out []string
	for _, sp := range due {
		xs := m.open[sp]
		sum, hi := int64(0), xs[0]
		for _, x := range xs {
			sum += x
			hi = max(hi, x)
		}
		out = append(out, fmt.Sprintf("[%d,%d) %d %d %d", sp.start, sp.end, len(xs), sum, hi))
		delete(m.open, sp)
	}
	return out
}

// sliceRun drives one key's sliceState as the operator does: a row is
// dropped when late for its slice, and the state is fired when the
// watermark passes the earliest timer registered (the runtime keeps one
// timer per key and time).
type sliceRun struct {
	t      *testing.T
	sl     slicer
	aggs   []planner.AggCall
	codec  sliceCodec
	st     *sliceState
	timers []int64
}

func (r *sliceRun) add(ts, wm, x int64) {
	if r.sl.late(ts, wm) {
		return
	}
	if r.st == nil {
		r.st = newSliceState()
	}
	timer, arm, err := r.st.add(r.sl, ts, wm, r.aggs, types.Row{Values: []types.Value{types.Int64(x)}}, "w")
	if err != nil {
		r.t.Fatal(err)
	}
	if arm && !slices.Contains(r.timers, timer) {
		r.timers = append(r.timers, timer)
	}
}

func (r *sliceRun) fire(wm int64) []string {
	var out []string
	for {
		due := slices.IndexFunc(r.timers, func(t int64) bool { return t <= wm })
		if due < 0 {
			return out
		}
		r.timers = slices.Delete(r.timers, due, due+1)
		if r.st == nil {
			continue
		}
		timer, left, err := r.st.fire(r.sl, wm, "w", func(start, end int64, accs []expr.Accumulator) error {
			out = append(out, fmt.Sprintf("[%d,%d) %d %d %d", start, end, accs[0].Result().Int64(), accs[1].Result().Int64(), accs[2].Result().Int64()))
			return nil
		})
		if err != nil {
			r.t.Fatal(err)
		}
		if !left {
			r.st = nil
			continue
		}
		if timer <= wm {
			r.t.Fatalf("fire at watermark %d set a timer at %d, which is due already", wm, timer)
		}
		if !slices.Contains(r.timers, timer) {
			r.timers = append(r.timers, timer)
		}
	}
}

// restore replaces the state by its decoded encoding, as a restore from a
// checkpoint taken now does (timers are part of the checkpoint), or by a
// copy, as the first change after a checkpoint does.
func (r *sliceRun) restore(copyOnly bool) {
	if r.st == nil {
		return
	}
	if copyOnly {
		// A captured state must not change when its copy does.
		enc := r.codec.Append(nil, r.st)
		probe := r.st.clone()
		probe.next++
		probe.slice(probe.slices[len(probe.slices)-1].start+1000, r.aggs)
		if err := accumulate(probe.slices[0].accs, r.aggs, types.Row{Values: []types.Value{types.Int64(1)}}, "w"); err != nil {
			r.t.Fatal(err)
		}
		if again := r.codec.Append(nil, r.st); !bytes.Equal(enc, again) {
			r.t.Fatal("changing a clone changed the state it was cloned from")
		}
		r.st = r.st.clone()
		return
	}
	enc := r.codec.Append(nil, r.st)
	st, n, err := r.codec.Decode(enc)
	if err != nil || n != len(enc) {
		r.t.Fatalf("decoding the state: %v (used %d of %d bytes)", err, n, len(enc))
	}
	r.st = st
}

// TestSliceStateMatchesWindows runs random rows (out of order, some late,
// some late for only part of their windows) and watermark jumps through
// the sliced state and through the per-window model, restoring the state
// from its encoding or copying it at random points: every window must
// fire once, at the same watermark, with the same result.
func TestSliceStateMatchesWindows(t *testing.T) {
	aggs := sliceTestAggs(t)
	for _, w := range []planner.WindowSpec{
		{Kind: planner.Hop, Size: 10, Slide: 2},
		{Kind: planner.Hop, Size: 6, Slide: 3},
		{Kind: planner.Hop, Size: 4, Slide: 4},
		{Kind: planner.Cumulate, Size: 12, Step: 3},
		{Kind: planner.Cumulate, Size: 5, Step: 5},
	} {
		sl, ok := newSlicer(&planner.WindowAggregate{Window: w, Aggs: aggs})
		if !ok {
			t.Fatalf("%v: not sliced", w)
		}
		for seed := range uint64(200) {
			rng := rand.New(rand.NewPCG(seed, 7))
			model := &sliceModel{assign: windowAssigner{kind: w.Kind, size: w.Size, slide: w.Slide, step: w.Step}, open: map[windowSpan][]int64{}}
			run := &sliceRun{t: t, sl: sl, aggs: aggs, codec: sliceCodec{aggs: aggs, uid: "w"}}
			wm := clink.NoTimestamp
			var got, want []string
			for step := range 300 {
				switch k := rng.IntN(10); {
				case k < 6:
					// Rows mostly around the watermark: some late, some
					// late for their first windows only, negative times too.
					base := int64(-20)
					if wm != clink.NoTimestamp {
						base = wm
					}
					ts := base + rng.Int64N(30) - 12
					x := rng.Int64N(100) - 50
					model.add(ts, wm, x)
					run.add(ts, wm, x)
				case k < 9:
					if wm == clink.NoTimestamp {
						wm = -25
					}
					wm += rng.Int64N(8)
					want = append(want, model.fire(wm)...)
					got = append(got, run.fire(wm)...)
				default:
					run.restore(rng.IntN(2) == 0)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%v seed %d step %d (watermark %d):\n got %q\nwant %q", w, seed, step, wm, got, want)
				}
			}
			want = append(want, model.fire(math.MaxInt64)...)
			got = append(got, run.fire(math.MaxInt64)...)
			if !slices.Equal(got, want) {
				t.Fatalf("%v seed %d at the end:\n got %q\nwant %q", w, seed, got, want)
			}
			if run.st != nil {
				t.Fatalf("%v seed %d: %d slices left after the last watermark", w, seed, len(run.st.slices))
			}
		}
	}
}

// TestSlicerFallsBack keeps the windows per window that slicing would
// not serve: HOP sizes that are not a multiple of the slide, TUMBLE, and
// DISTINCT aggregates.
func TestSlicerFallsBack(t *testing.T) {
	aggs := sliceTestAggs(t)
	distinct, err := expr.NewAggregate(expr.AggSpec{Name: "COUNT", Distinct: true, Args: []types.Type{types.BigIntType}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		w      planner.WindowSpec
		aggs   []planner.AggCall
		sliced bool
	}{
		{planner.WindowSpec{Kind: planner.Hop, Size: 10, Slide: 2}, aggs, true},
		{planner.WindowSpec{Kind: planner.Hop, Size: 10, Slide: 3}, aggs, false},
		{planner.WindowSpec{Kind: planner.Hop, Size: 10, Slide: 20}, aggs, false},
		{planner.WindowSpec{Kind: planner.Cumulate, Size: 12, Step: 3}, aggs, true},
		{planner.WindowSpec{Kind: planner.Tumble, Size: 10}, aggs, false},
		{planner.WindowSpec{Kind: planner.Hop, Size: 10, Slide: 2}, append(slices.Clone(aggs), planner.AggCall{Func: distinct, Arg: 0, Filter: -1}), false},
	} {
		if _, ok := newSlicer(&planner.WindowAggregate{Window: tc.w, Aggs: tc.aggs}); ok != tc.sliced {
			t.Errorf("%v with %d aggregates: sliced %v, want %v", tc.w, len(tc.aggs), ok, tc.sliced)
		}
	}
}

// FuzzSliceCodec checks that the sliced window state decodes what it
// encodes, refuses the per-window layout, and that a decoder fed any
// bytes fails or gives state that encodes again, without panicking.
func FuzzSliceCodec(f *testing.F) {
	aggs := sliceTestAggs(f)
	c := sliceCodec{aggs: aggs, uid: "w"}
	st := newSliceState()
	st.next = 12
	for _, start := range []int64{-4, 10, 14} {
		i, _ := st.slice(start, aggs)
		if err := accumulate(st.slices[i].accs, aggs, types.Row{Values: []types.Value{types.Int64(start)}}, "w"); err != nil {
			f.Fatal(err)
		}
	}
	enc := c.Append(nil, st)
	got, n, err := c.Decode(enc)
	if err != nil || n != len(enc) {
		f.Fatalf("decoding the encoding: %v (used %d of %d bytes)", err, n, len(enc))
	}
	if again := c.Append(nil, got); !bytes.Equal(again, enc) {
		f.Fatalf("round trip changed the state: %x, was %x", again, enc)
	}
	if got.next != 12 || len(got.slices) != 3 || got.slices[1].start != 10 || got.slices[2].accs[1].Result().Int64() != 14 {
		f.Fatalf("decoded %+v", got)
	}
	ws := &windowState{wins: []int64{0}, accs: [][]expr.Accumulator{{aggs[0].Func.New(), aggs[1].Func.New(), aggs[2].Func.New()}}}
	old := windowCodec{aggs: newWindowAggs(aggs, 10), uid: "w"}.Append(nil, ws)
	if _, _, err := c.Decode(old); err == nil {
		f.Fatal("decoded a state of the per-window layout as slices")
	}
	f.Add(enc)
	f.Add(old)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, n, err := c.Decode(data)
		if err != nil {
			return
		}
		if n > len(data) {
			t.Fatalf("used %d of %d bytes", n, len(data))
		}
		_ = c.Append(nil, s)
	})
}
