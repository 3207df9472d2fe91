package exec

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

func init() {
	registerNode(buildOverAggregate)
}

// overState is one partition's state of an OverAggregate: the rows
// waiting for the watermark, the rows of the frame that later rows still
// see (in time order; none for an unbounded frame) and the accumulators
// over the frame, encoded.
type overState struct {
	Pending []types.Row
	Frame   []types.Row
	Accs    [][]byte
}

func buildOverAggregate(b *builder, n *planner.OverAggregate) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	col, frame, aggs, uid := n.OrderCol, n.Frame, n.Aggs, n.UID()
	rowTime := func(r types.Row) int64 { return r.Values[col].EpochMillis() }
	// apply adds (or retracts) a row's arguments to the accumulators.
	apply := func(accs []expr.Accumulator, r types.Row, add bool) error {
		for i, a := range aggs {
			v := types.Null
			if a.Arg >= 0 {
				v = r.Values[a.Arg]
			}
			var err error
			if add {
				err = accs[i].Add(v)
			} else {
				err = accs[i].Retract(v)
			}
			if err != nil {
				return fmt.Errorf("operator %s: %s: %w", uid, a.Text, err)
			}
		}
		return nil
	}
	emit := func(accs []expr.Accumulator, r types.Row, out *clink.Collector[types.Row]) {
		vs := make([]types.Value, 0, len(r.Values)+len(accs))
		vs = append(vs, r.Values...)
		for _, a := range accs {
			vs = append(vs, a.Result())
		}
		out.Collect(types.Row{Kind: changelog.Insert, Values: vs})
	}
	f := clink.KeyedProcessFunction[string, types.Row, overState, types.Row]{
		ProcessElement: func(ctx *clink.KeyedContext[string, overState], r types.Row, out *clink.Collector[types.Row]) error {
			if !r.Kind.IsAccumulate() {
				return fmt.Errorf("operator %s: OVER aggregate of insert-only input got %s", uid, r)
			}
			t := r.Values[col]
			if t.IsNull() || rowTime(r) <= ctx.CurrentWatermark() {
				// Late: its frame was emitted already (as Flink, drop it).
				return nil
			}
			ctx.RegisterEventTimeTimer(rowTime(r))
			st, _ := ctx.Value()
			// The state may be in a checkpoint being written: change a copy.
			st.Pending = append(slices.Clip(st.Pending), types.Row{Kind: changelog.Insert, Values: r.Values})
			ctx.SetValue(st)
			return nil
		},
		OnTimer: func(ctx *clink.KeyedContext[string, overState], ts int64, _ clink.TimeDomain, out *clink.Collector[types.Row]) error {
			st, _ := ctx.Value()
			var due, rest []types.Row
			for _, r := range st.Pending {
				if rowTime(r) <= ts {
					due = append(due, r)
				} else {
					rest = append(rest, r)
				}
			}
			// A bounded RANGE frame's rows leave the state once no later
			// row can see them (a timer at the last row's time plus the
			// frame's length), rows of a ROWS frame as later rows push
			// them out.
			cleanup := frame.Range && !frame.Unbounded
			if len(due) == 0 && (!cleanup || len(st.Frame) == 0) {
				return nil
			}
			slices.SortStableFunc(due, func(a, b types.Row) int { return cmp.Compare(rowTime(a), rowTime(b)) })
			accs := make([]expr.Accumulator, len(aggs))
			for i, a := range aggs {
				if st.Accs == nil {
					accs[i] = a.Func.New()
					continue
				}
				acc, err := a.Func.Decode(st.Accs[i])
				if err != nil {
					return fmt.Errorf("operator %s: %w", uid, err)
				}
				accs[i] = acc
			}
			fr := slices.Clone(st.Frame)
			for i := 0; i < len(due); {
				// Rows of one time are peers of a RANGE frame.
				j := i + 1
				if frame.Range {
					for j < len(due) && rowTime(due[j]) == rowTime(due[i]) {
						j++
					}
				}
				for _, r := range due[i:j] {
					if err := apply(accs, r, true); err != nil {
						return err
					}
				}
				if !frame.Unbounded {
					fr = append(fr, due[i:j]...)
					if frame.Range {
						// Rows before the frame's start leave it.
						start := rowTime(due[i]) - frame.Preceding
						k := 0
						for k < len(fr) && rowTime(fr[k]) < start {
							if err := apply(accs, fr[k], false); err != nil {
								return err
							}
							k++
						}
						fr = fr[k:]
					}
				}
				for _, r := range due[i:j] {
					emit(accs, r, out)
				}
				if !frame.Unbounded && !frame.Range {
					// Only the last Preceding rows are in a later frame.
					for int64(len(fr)) > frame.Preceding {
						if err := apply(accs, fr[0], false); err != nil {
							return err
						}
						fr = fr[1:]
					}
				}
				i = j
			}
			if cleanup {
				k := 0
				for k < len(fr) && rowTime(fr[k]) <= ts-frame.Preceding {
					if err := apply(accs, fr[k], false); err != nil {
						return err
					}
					k++
				}
				fr = fr[k:]
				if len(fr) > 0 {
					ctx.RegisterEventTimeTimer(rowTime(fr[len(fr)-1]) + frame.Preceding)
				}
			}
			st = overState{Pending: rest, Frame: slices.Clip(fr)}
			if frame.Unbounded || len(fr) > 0 {
				for _, a := range accs {
					b, err := a.MarshalBinary()
					if err != nil {
						return fmt.Errorf("operator %s: %w", uid, err)
					}
					st.Accs = append(st.Accs, b)
				}
			}
			if len(st.Pending) == 0 && len(st.Frame) == 0 && st.Accs == nil {
				ctx.Clear()
			} else {
				ctx.SetValue(st)
			}
			return nil
		},
	}
	return clink.KeyedProcess(clink.KeyBy(in, partitionKey(n.PartitionBy)), uid, f), nil
}
