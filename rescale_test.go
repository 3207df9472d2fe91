package clink_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/state"
)

const (
	rescaleRecords = 60_000
	rescaleKeys    = 500
)

// rescaleJob is a generator at parallelism genP keyed into a counter at
// parallelism p (the generator's splits and the counter's key groups are
// redistributed when they change); the sink keeps the highest count seen
// per key.
func rescaleJob(t *testing.T, opts clink.Options, genP, p int, rate float64, final map[string]int64, mu *sync.Mutex) *clink.Environment {
	t.Helper()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	// rate is the job's total: each of the genP subtasks gets its share.
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: rescaleRecords, RatePerSecond: rate / float64(genP)},
		func(i int64) int64 { return i }).SetParallelism(genP)
	counts := clink.Process(clink.KeyBy(src, func(i int64) string { return fmt.Sprintf("k%03d", i%rescaleKeys) }), "count",
		func(ctx *clink.KeyedContext[string, int64], _ int64, out *clink.Collector[string]) error {
			n, _ := ctx.Value()
			n++
			ctx.SetValue(n)
			out.Collect(fmt.Sprintf("%s=%d", ctx.Key(), n))
			return nil
		}).SetParallelism(p)
	clink.SinkTo(counts, "sink", clink.SinkFunc(func(s string) error {
		k, v, _ := strings.Cut(s, "=")
		var n int64
		fmt.Sscan(v, &n)
		mu.Lock()
		final[k] = max(final[k], n)
		mu.Unlock()
		return nil
	}))
	return env
}

// TestRescaleOnRestore takes a checkpoint of the counter at one
// parallelism, stops the job in the middle, restores the checkpoint at
// another parallelism and runs to the end: every key's final count, in the
// output and in the terminal checkpoint's state, must equal an
// uninterrupted run's.
func TestRescaleOnRestore(t *testing.T) {
	want := int64(rescaleRecords / rescaleKeys)
	for _, c := range []struct {
		from, to int
		backend  string
		// unchained is the run ("from" or "to") whose counter, at
		// parallelism 1, runs in a task of its own rather than chained
		// to the generator (Options.KeyedChaining off): the restore finds
		// the counter's state in another task than the one it goes to.
		unchained string
		// genFrom is the generator's parallelism in the first run when it
		// is not from: the restore at 1 chains two operators
		// checkpointed at different parallelisms.
		genFrom int
	}{{4, 1, "memory", "", 0}, {4, 2, "memory", "", 0}, {4, 3, "memory", "", 0}, {1, 4, "memory", "", 0}, {2, 3, "memory", "", 0}, {4, 3, "pebble", "", 0}, {1, 3, "pebble", "", 0},
		{4, 3, "memory-full", "", 0}, {1, 4, "memory-full", "", 0},
		{1, 1, "memory", "from", 0}, {1, 1, "memory", "to", 0}, {1, 1, "pebble", "from", 0}, {1, 1, "pebble", "to", 0}, {1, 1, "memory-full", "to", 0},
		{4, 1, "memory", "", 2}, {4, 1, "pebble", "", 2}} {
		name := fmt.Sprintf("%s/%d->%d", c.backend, c.from, c.to)
		if c.unchained != "" {
			name += "/unchained-" + c.unchained
		}
		genFrom := c.from
		if c.genFrom != 0 {
			genFrom = c.genFrom
			name += fmt.Sprintf("/generator-at-%d", genFrom)
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var mu sync.Mutex
			first := map[string]int64{}
			off := false
			backendOpts := func(o clink.Options, run string) clink.Options {
				if c.unchained == run {
					o.KeyedChaining = &off
				}
				o.StateBackend = c.backend
				switch c.backend {
				case "memory-full":
					o.StateBackend, o.StateIncremental = "memory", &off
				case "memory":
					// A new base now and then, so that restores merge
					// bases and deltas.
					o.StateMaterializeBytes = 4 << 10
				}
				return o
			}
			env := rescaleJob(t, backendOpts(clink.Options{
				CheckpointDir: dir, CheckpointInterval: 20 * time.Millisecond, Retain: 100, MaxParallelism: 64,
			}, "from"), genFrom, c.from, 60_000, first, &mu)
			// Stop once a few checkpoints completed, well before the end.
			st := stopAfterCheckpoints(t, env, dir, 3)
			latest, err := st.Resolve("latest")
			if err != nil {
				t.Fatal(err)
			}

			final := map[string]int64{}
			env2 := rescaleJob(t, backendOpts(clink.Options{CheckpointDir: dir, Restore: "latest", MaxParallelism: 64}, "to"), c.to, c.to, 0, final, &mu)
			if err := env2.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Keys whose last record came before the restored checkpoint
			// print nothing after it; their last output is in the first run.
			for k, v := range first {
				if _, ok := final[k]; !ok {
					final[k] = v
				}
			}
			if len(final) != rescaleKeys {
				t.Errorf("output holds %d keys, want %d", len(final), rescaleKeys)
			}
			bad := 0
			for k, v := range final {
				if v != want && bad < 5 {
					t.Errorf("key %s ends at %d, want %d", k, v, want)
					bad++
				}
			}
			if c.backend == "pebble" {
				return // Pebble keeps its state in its own files.
			}
			// The terminal checkpoint, taken at the new parallelism, holds
			// every key exactly once with its final count.
			term, err := st.Resolve("latest")
			if err != nil {
				t.Fatal(err)
			}
			if term <= latest {
				t.Fatalf("no checkpoint after the restored one %d", latest)
			}
			var groups []state.KeyGroupData
			seen := map[int]bool{}
			for sub := 0; sub < c.to; sub++ {
				// At parallelism 1 the counter is chained to the generator:
				// its state is in the generator's task.
				task := fmt.Sprintf("count-%d", sub)
				if c.to == 1 && c.unchained != "to" {
					task = "gen-0"
				}
				snap, err := st.ReadTaskSnapshot(term, task)
				if err != nil {
					t.Fatal(err)
				}
				if snap.Parallelism != c.to {
					t.Errorf("terminal snapshot of %s says parallelism %d, want %d", task, snap.Parallelism, c.to)
				}
				for _, g := range snapshotKeyGroups(t, st, operatorSnapshot(t, snap, "count")) {
					if seen[g.KeyGroup] {
						t.Errorf("key group %d is held by two subtasks", g.KeyGroup)
					}
					seen[g.KeyGroup] = true
					if r := state.RangeForSubtask(sub, 64, c.to); !r.Contains(g.KeyGroup) {
						t.Errorf("count-%d holds key group %d outside its range %v", sub, g.KeyGroup, r)
					}
					groups = append(groups, state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data})
				}
			}
			values, err := state.ReadValues[string, int64](groups, "value", 64)
			if err != nil {
				t.Fatal(err)
			}
			if len(values) != rescaleKeys {
				t.Errorf("terminal state holds %d keys, want %d", len(values), rescaleKeys)
			}
			for k, v := range values {
				if v != want {
					t.Errorf("terminal state of %s = %d, want %d", k, v, want)
					break
				}
			}
		})
	}
}

// operatorSnapshot returns the state of operator uid in a task's snapshot.
func operatorSnapshot(t *testing.T, snap *store.TaskSnapshot, uid string) store.OperatorSnapshot {
	t.Helper()
	op := snap.Operator(uid)
	if op == nil {
		t.Fatalf("snapshot %s holds no state of operator %s", snap.Task, uid)
	}
	return *op
}

// checkpointedOperator returns the state of operator uid in checkpoint
// id, from whichever task's snapshot holds it (a keyed operator at
// parallelism 1 is chained to its input's task).
func checkpointedOperator(t *testing.T, st *store.Store, id checkpoint.ID, uid string) store.OperatorSnapshot {
	t.Helper()
	names, err := st.TaskNames(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		snap, err := st.ReadTaskSnapshot(id, name)
		if err != nil {
			t.Fatal(err)
		}
		if op := snap.Operator(uid); op != nil {
			return *op
		}
	}
	t.Fatalf("checkpoint %d holds no state of operator %s", id, uid)
	return store.OperatorSnapshot{}
}

// snapshotKeyGroups returns the key groups of an operator's snapshot: the
// snapshot's own, or those merged from the chain of a memory backend's
// incremental checkpoint.
func snapshotKeyGroups(t *testing.T, st *store.Store, op store.OperatorSnapshot) []store.KeyGroupState {
	t.Helper()
	if len(op.KeyGroups) > 0 {
		return op.KeyGroups
	}
	fs := &state.FileState{}
	for _, n := range op.OperatorState {
		switch {
		case n.Name == store.SharedRefsState:
			fs.Shared = store.ParseSharedRefs(n.Data)
		case strings.HasPrefix(n.Name, store.FileEntryPrefix):
			fs.Named = append(fs.Named, state.NamedData{Name: strings.TrimPrefix(n.Name, store.FileEntryPrefix), Data: n.Data})
		}
	}
	groups, _, ok, err := state.ReadChain(fs, st.Shared())
	if err != nil {
		t.Fatal(err)
	}
	if !ok && len(fs.Named) > 0 {
		t.Fatalf("operator %s keeps state in files that are not a memory chain", op.UID)
	}
	out := make([]store.KeyGroupState, len(groups))
	for i, g := range groups {
		out[i] = store.KeyGroupState{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data}
	}
	return out
}

func TestRestoreRefusesAnotherMaxParallelism(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	env := rescaleJob(t, clink.Options{CheckpointDir: dir, MaxParallelism: 64}, 2, 2, 0, map[string]int64{}, &mu)
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	env2 := rescaleJob(t, clink.Options{CheckpointDir: dir, Restore: "latest", MaxParallelism: 128}, 2, 2, 0, map[string]int64{}, &mu)
	err := env2.Execute(context.Background())
	if err == nil || !strings.Contains(err.Error(), "max parallelism 64") || !strings.Contains(err.Error(), "cannot change") {
		t.Fatalf("Execute = %v, want a refusal naming the max parallelism", err)
	}
}
