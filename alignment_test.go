package clink_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/metrics"
	"github.com/clinkstream/clink/state"
)

// alignTally is the keyed state of the alignment jobs: how many records of each
// input a key has seen, and the sum of their values. Any lost or repeated
// record changes it.
type alignTally struct {
	A, B int
	Sum  int64
}

const (
	alignKeys = 37
	alignPerA = 2500
	alignPerB = 2500
	// Values of input b are offset so that a union can tell them apart.
	alignOffsetB = 1_000_000
)

func alignKey(v int) int { return v % alignKeys }

func genA(i int64) int { return int(i) }
func genB(i int64) int { return alignOffsetB + int(i)*3 }

// alignExpected is the final state every correct run must reach.
func alignExpected() map[int]alignTally {
	want := map[int]alignTally{}
	for i := int64(0); i < alignPerA; i++ {
		v := genA(i)
		t := want[alignKey(v)]
		t.A++
		t.Sum += int64(v)
		want[alignKey(v)] = t
	}
	for i := int64(0); i < alignPerB; i++ {
		v := genB(i)
		t := want[alignKey(v)]
		t.B++
		t.Sum += int64(v)
		want[alignKey(v)] = t
	}
	return want
}

func alignCount(ctx *clink.KeyedContext[int, alignTally], v int, out *clink.Collector[int]) error {
	t, _ := ctx.Value()
	if v >= alignOffsetB {
		t.B++
	} else {
		t.A++
	}
	t.Sum += int64(v)
	ctx.SetValue(t)
	out.Collect(t.A + t.B)
	return nil
}

// alignJob is a keyed job with two inputs whose state lives in the tasks
// named stateUID-<subtask>.
type alignJob struct {
	name     string
	stateUID string
	build    func(env *clink.Environment, sink clink.Sink[int])
}

var alignJobs = []alignJob{
	{
		// Two keyed streams into one two-input operator: the operator
		// itself aligns (or captures) the barriers of both inputs.
		name: "connect", stateUID: "join",
		build: func(env *clink.Environment, sink clink.Sink[int]) {
			a := clink.FromGenerator(env, "a", clink.GeneratorOptions{Count: alignPerA}, genA)
			b := clink.FromGenerator(env, "b", clink.GeneratorOptions{Count: alignPerB}, genB)
			joined := clink.CoProcess(clink.Connect(clink.KeyBy(a, alignKey), clink.KeyBy(b, alignKey)), "join",
				alignCount, alignCount)
			clink.SinkTo(joined, "sink", sink)
		},
	},
	{
		// A stateless union in front of a keyed operator: barriers pass
		// through a multi-input task before they reach the state.
		name: "union", stateUID: "count",
		build: func(env *clink.Environment, sink clink.Sink[int]) {
			a := clink.FromGenerator(env, "a", clink.GeneratorOptions{Count: alignPerA}, genA)
			b := clink.FromGenerator(env, "b", clink.GeneratorOptions{Count: alignPerB}, genB)
			merged := clink.Union("merge", a, b)
			counted := clink.Process(clink.KeyBy(merged, alignKey), "count", alignCount)
			clink.SinkTo(counted, "sink", sink)
		},
	},
}

const (
	alignParallelism = 2
	alignMaxPar      = 32
)

func alignOptions(dir string, mode clink.CheckpointMode) clink.Options {
	return clink.Options{
		Parallelism:        alignParallelism,
		MaxParallelism:     alignMaxPar,
		CheckpointDir:      dir,
		CheckpointInterval: 5 * time.Millisecond,
		CheckpointMode:     mode,
		Retain:             1000,
		BatchSize:          4,
		ChannelCapacity:    2,
		BufferTimeout:      time.Millisecond,
	}
}

// alignSlowSink holds back its task every few records, so the channels in front
// of it fill up and barriers find records queued ahead of them.
func alignSlowSink() clink.Sink[int] {
	var n atomic.Int64
	return clink.SinkFunc(func(int) error {
		if n.Add(1)%8 == 0 {
			time.Sleep(50 * time.Microsecond) // load shaping, not synchronisation
		}
		return nil
	})
}

func alignRun(t *testing.T, job alignJob, opts clink.Options, sink clink.Sink[int]) {
	t.Helper()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	job.build(env, sink)
	if err := env.Execute(context.Background()); err != nil {
		t.Fatalf("%s job (mode %v, restore %q): %v", job.name, opts.CheckpointMode, opts.Restore, err)
	}
}

// alignKeyedState decodes the keyed state of operator uid from every subtask's
// snapshot of checkpoint id.
func alignKeyedState(t *testing.T, st *store.Store, id checkpoint.ID, uid string, maxPar int) map[int]alignTally {
	t.Helper()
	all := map[int]alignTally{}
	for s := 0; s < alignParallelism; s++ {
		name := store.SnapshotName(uid, s)
		snap, err := st.ReadTaskSnapshot(id, name)
		if err != nil {
			t.Fatalf("reading state of checkpoint %d: %v", id, err)
		}
		var op *store.OperatorSnapshot
		for i := range snap.Operators {
			if snap.Operators[i].UID == uid {
				op = &snap.Operators[i]
			}
		}
		if op == nil {
			t.Fatalf("checkpoint %d: snapshot %s has no operator %s", id, name, uid)
		}
		kgs := snapshotKeyGroups(t, st, *op)
		groups := make([]state.KeyGroupData, len(kgs))
		for i, g := range kgs {
			groups[i] = state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data}
		}
		values, err := state.ReadValues[int, alignTally](groups, "value", maxPar)
		if err != nil {
			t.Fatalf("checkpoint %d: decoding state of %s: %v", id, name, err)
		}
		for k, v := range values {
			if _, dup := all[k]; dup {
				t.Errorf("checkpoint %d: key %d is held by two subtasks", id, k)
			}
			all[k] = v
		}
	}
	return all
}

func alignDiff(got, want map[int]alignTally) string {
	keys := slices.Sorted(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	var diff string
	bad := 0
	for _, k := range keys {
		if got[k] != want[k] {
			if bad < 5 {
				diff += fmt.Sprintf("\n  key %d: got %+v, want %+v", k, got[k], want[k])
			}
			bad++
		}
	}
	if bad > 5 {
		diff += fmt.Sprintf("\n  ... %d keys differ in all", bad)
	}
	return diff
}

// alignLatestState reads the state of the newest completed checkpoint in dir:
// for a finished bounded job, its terminal checkpoint, i.e. its final state.
func alignLatestState(t *testing.T, dir, uid string, maxPar int) (checkpoint.ID, map[int]alignTally) {
	t.Helper()
	st, err := store.Open(dir, store.Options{Retain: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := st.Completed()
	if err != nil || len(ids) == 0 {
		t.Fatalf("completed checkpoints in %s = %v, %v", dir, ids, err)
	}
	last := ids[len(ids)-1]
	return last, alignKeyedState(t, st, last, uid, maxPar)
}

// alignCopyCheckpoint copies completed checkpoint id, snapshots, the shared
// files they list and marker, from
// src into a new checkpoint directory dst.
func alignCopyCheckpoint(t *testing.T, src *store.Store, id checkpoint.ID, dst string) {
	t.Helper()
	out, err := store.Open(dst, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := src.Snapshots(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(f.Name, ".snap")
		data, err := src.ReadSnapshot(id, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.WriteSnapshot(id, name, data); err != nil {
			t.Fatal(err)
		}
	}
	// The shared files the checkpoint lists (incremental checkpoints).
	refs, ok := checkpointRefs(src, id)
	if !ok {
		t.Fatalf("reading the shared files checkpoint %d lists", id)
	}
	for _, r := range refs {
		p, err := src.Shared().Path(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := out.Shared().Put(r, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.WriteCompleted(id); err != nil {
		t.Fatal(err)
	}
}

// alignInFlight lists the completed checkpoints in dir and, for those that
// hold in-flight records, how many.
func alignInFlight(t *testing.T, dir string) (*store.Store, []checkpoint.ID, map[checkpoint.ID]int) {
	t.Helper()
	st, err := store.Open(dir, store.Options{Retain: 1000})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	var completed []checkpoint.ID
	withInFlight := map[checkpoint.ID]int{}
	for _, ci := range infos {
		if !ci.Completed {
			continue
		}
		completed = append(completed, ci.ID)
		for _, f := range ci.Files {
			snap, err := st.ReadTaskSnapshot(ci.ID, strings.TrimSuffix(f.Name, ".snap"))
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range snap.Operators {
				for _, in := range op.InFlight {
					withInFlight[ci.ID] += in.Records
				}
			}
		}
	}
	return st, completed, withInFlight
}

// alignModeCount returns clink_ckpt_mode_total{mode=mode}.
func alignModeCount(t *testing.T, reg *metrics.Registry, mode string) float64 {
	t.Helper()
	mfs, err := reg.Prometheus().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metrics.NameModeTotal {
			continue
		}
		for _, m := range mf.GetMetric() {
			if alignLabel(m, "mode") == mode {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("%s{mode=%q} is not exported", metrics.NameModeTotal, mode)
	return 0
}

func alignLabel(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Unaligned barriers overtake queued records and store them in the
// checkpoint. Restoring from any checkpoint of an unaligned run must replay
// those records exactly once: every restored run ends with the same keyed
// state as an uninterrupted aligned run of the same input.
func TestUnalignedCaptureReplaysToAlignedState(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	want := alignExpected()
	for _, job := range alignJobs {
		t.Run(job.name, func(t *testing.T) {
			// The uninterrupted aligned run is the reference.
			alignedDir := t.TempDir()
			alignedReg := metrics.New()
			opts := alignOptions(alignedDir, clink.Aligned)
			opts.Metrics = alignedReg
			alignRun(t, job, opts, alignSlowSink())
			_, alignedState := alignLatestState(t, alignedDir, job.stateUID, alignMaxPar)
			if d := alignDiff(alignedState, want); d != "" {
				t.Fatalf("final state of the aligned run differs from the input:%s", d)
			}
			if _, _, inflight := alignInFlight(t, alignedDir); len(inflight) != 0 {
				t.Errorf("aligned run: checkpoints hold in-flight records %v; aligned checkpoints capture none", inflight)
			}
			if n := alignModeCount(t, alignedReg, metrics.ModeUnaligned); n != 0 {
				t.Errorf("aligned run: %s{mode=unaligned} = %v, want 0", metrics.NameModeTotal, n)
			}
			if n := alignModeCount(t, alignedReg, metrics.ModeAligned); n < 1 {
				t.Errorf("aligned run: %s{mode=aligned} = %v, want at least 1", metrics.NameModeTotal, n)
			}

			unalignedDir := t.TempDir()
			unalignedReg := metrics.New()
			opts = alignOptions(unalignedDir, clink.Unaligned)
			opts.Metrics = unalignedReg
			alignRun(t, job, opts, alignSlowSink())
			_, unalignedState := alignLatestState(t, unalignedDir, job.stateUID, alignMaxPar)
			if d := alignDiff(unalignedState, alignedState); d != "" {
				t.Fatalf("final state of the unaligned run differs from the aligned run:%s", d)
			}

			st, completed, withInFlight := alignInFlight(t, unalignedDir)
			t.Logf("unaligned run: %d completed checkpoints, %d of them with in-flight records", len(completed), len(withInFlight))
			if len(completed) < 2 {
				t.Fatalf("unaligned run completed checkpoints %v; want periodic ones besides the terminal one", completed)
			}
			if len(withInFlight) == 0 {
				t.Fatalf("no completed checkpoint of the unaligned run holds in-flight records; the test did not exercise capture")
			}
			// Every periodic checkpoint was stamped unaligned; only the
			// terminal one is aligned.
			if n := alignModeCount(t, unalignedReg, metrics.ModeAligned); n != 1 {
				t.Errorf("unaligned run: %s{mode=aligned} = %v, want 1 (the terminal checkpoint)", metrics.NameModeTotal, n)
			}
			if n := alignModeCount(t, unalignedReg, metrics.ModeUnaligned); n < float64(len(completed)-1) {
				t.Errorf("unaligned run: %s{mode=unaligned} = %v, want at least %d", metrics.NameModeTotal, n, len(completed)-1)
			}

			for _, id := range completed {
				dir := t.TempDir()
				alignCopyCheckpoint(t, st, id, dir)
				ropts := alignOptions(dir, clink.Unaligned)
				ropts.CheckpointInterval = 0
				ropts.Restore = fmt.Sprint(id)
				alignRun(t, job, ropts, clink.SinkFunc(func(int) error { return nil }))
				last, got := alignLatestState(t, dir, job.stateUID, alignMaxPar)
				if last <= id {
					t.Fatalf("restore from %d: newest completed checkpoint is %d, want the restored run's terminal one", id, last)
				}
				if d := alignDiff(got, alignedState); d != "" {
					t.Errorf("restored from checkpoint %d (%d in-flight records): final state differs from the aligned run:%s", id, withInFlight[id], d)
				}
			}
		})
	}
}
