package exec

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/clinkstream/clink"
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
			codec := windowCodec{aggs: tc.aggs, uid: "w"}
			var st *windowState
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
							st = newWindowState(len(tc.aggs))
						}
						i, _ := st.window(sp.start, sp.end, tc.aggs)
						if err := accumulate(st.wins[i].accs, tc.aggs, types.Row{Values: []types.Value{types.Int64(x)}}, "w"); err != nil {
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
						err := st.fire(wm, func(w *openWindow) error {
							s := fmt.Sprintf("[%d,%d)", w.start, w.end)
							for _, a := range w.accs {
								s += fmt.Sprintf(" %d", a.Result().Int64())
							}
							got = append(got, s)
							return nil
						})
						if err != nil {
							t.Fatal(err)
						}
						if len(st.wins) == 0 {
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
