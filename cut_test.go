package clink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/state"
)

// TestCheckpointsAreConsistentCuts checks every completed checkpoint of a
// keyed counting job: the counts in its keyed state plus the records it
// holds in flight must equal the records its source offsets say were
// emitted. A source offset captured after the barrier (the stale-offset
// bug: checkpoint N recording checkpoint N+1's offset) or state captured
// after records of the next epoch breaks the equality.
func TestCheckpointsAreConsistentCuts(t *testing.T) {
	for _, mode := range []clink.CheckpointMode{clink.Aligned, clink.Unaligned} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			const n = 300_000
			env, err := clink.NewEnvironment(clink.Options{
				Parallelism: 2, CheckpointDir: dir, CheckpointInterval: 2 * time.Millisecond,
				CheckpointMode: mode, Retain: 10_000, BatchSize: 32, ChannelCapacity: 2,
			})
			if err != nil {
				t.Fatal(err)
			}
			src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: n, RatePerSecond: 200_000}, func(i int64) int64 { return i })
			counted := clink.Process(clink.KeyBy(src, func(i int64) int64 { return i % 97 }), "count",
				func(ctx *clink.KeyedContext[int64, int64], _ int64, out *clink.Collector[int64]) error {
					c, _ := ctx.Value()
					ctx.SetValue(c + 1)
					out.Collect(c)
					return nil
				})
			slow := clink.Map(counted, "slow", func(v int64) int64 {
				if v%64 == 0 {
					time.Sleep(20 * time.Microsecond)
				}
				return v
			})
			clink.SinkTo(slow, "sink", clink.SinkFunc(func(int64) error { return nil }))
			if err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			st, err := store.Open(dir, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ids, err := st.Completed()
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) < 5 {
				t.Fatalf("only %d completed checkpoints; the test needs several", len(ids))
			}
			withInFlight := 0
			for _, id := range ids {
				var emitted, counted, inflight int64
				for sub := 0; sub < 2; sub++ {
					gs, err := st.ReadTaskSnapshot(id, fmt.Sprintf("gen-%d", sub))
					if err != nil {
						t.Fatal(err)
					}
					emitted += sourceEmitted(t, gs.Operators[0])
					cs, err := st.ReadTaskSnapshot(id, fmt.Sprintf("count-%d", sub))
					if err != nil {
						t.Fatal(err)
					}
					for _, f := range cs.Operators[0].InFlight {
						inflight += int64(f.Records)
					}
					var groups []state.KeyGroupData
					for _, g := range snapshotKeyGroups(t, st, cs.Operators[0]) {
						groups = append(groups, state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data})
					}
					values, err := state.ReadValues[int64, int64](groups, "value", 128)
					if err != nil {
						t.Fatal(err)
					}
					for _, c := range values {
						counted += c
					}
				}
				if inflight > 0 {
					withInFlight++
				}
				if counted+inflight != emitted {
					t.Errorf("checkpoint %d: state counts %d + in-flight %d = %d records, but the source offsets say %d were emitted",
						id, counted, inflight, counted+inflight, emitted)
				}
			}
			if mode == clink.Aligned && withInFlight > 0 {
				t.Errorf("%d aligned checkpoints hold in-flight records", withInFlight)
			}
			t.Logf("%d checkpoints checked, %d with in-flight records", len(ids), withInFlight)
		})
	}
}

// sourceEmitted reads how many records a generator subtask had emitted
// from its snapshot's offset text ("emitted N records of S splits").
func sourceEmitted(t *testing.T, op store.OperatorSnapshot) int64 {
	t.Helper()
	var n, splits int64
	if _, err := fmt.Sscanf(op.OffsetText, "emitted %d records of %d splits", &n, &splits); err != nil {
		t.Fatalf("source offset text %q: %v", op.OffsetText, err)
	}
	return n
}
