package clink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/state"
)

// checkpointRefs returns the shared files the snapshots of checkpoint id
// list; ok is false if a snapshot could not be read (retention removed the
// checkpoint meanwhile).
func checkpointRefs(st *store.Store, id checkpoint.ID) (refs []string, ok bool) {
	files, err := st.Snapshots(id)
	if err != nil {
		return nil, false
	}
	for _, f := range files {
		snap, err := st.ReadTaskSnapshot(id, strings.TrimSuffix(f.Name, ".snap"))
		if err != nil {
			return nil, false
		}
		for _, op := range snap.Operators {
			for _, n := range op.OperatorState {
				if n.Name == store.SharedRefsState {
					refs = append(refs, store.ParseSharedRefs(n.Data)...)
				}
			}
		}
	}
	return refs, true
}

// TestMemoryIncrementalSharedFilesCollected runs a keyed job with the
// memory backend's incremental checkpoints, a new base every few
// kilobytes of deltas and two retained checkpoints. While it runs, every
// file a completed checkpoint lists must exist as long as the checkpoint
// does; after it, the shared files must be exactly those the retained
// checkpoints list (the deltas and bases of older chains deleted), and the
// latest checkpoint's chain must hold every key's final count.
func TestMemoryIncrementalSharedFilesCollected(t *testing.T) {
	const records, keys = 200_000, 2_000
	dir := t.TempDir()
	env, err := clink.NewEnvironment(clink.Options{
		CheckpointDir: dir, CheckpointInterval: 5 * time.Millisecond, Retain: 2, MaxParallelism: 32,
		Parallelism: 2, StateMaterializeBytes: 8 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: records, RatePerSecond: 200_000},
		func(i int64) int64 { return i })
	counts := clink.Process(clink.KeyBy(src, func(i int64) string { return fmt.Sprintf("k%04d", i%keys) }), "count",
		func(ctx *clink.KeyedContext[string, int64], _ int64, _ *clink.Collector[string]) error {
			n, _ := ctx.Value()
			ctx.SetValue(n + 1)
			return nil
		})
	clink.SinkTo(counts, "sink", clink.SinkFunc(func(string) error { return nil }))

	done := make(chan error, 1)
	go func() { done <- env.Execute(context.Background()) }()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "shared")
	checked := 0
	var mu sync.Mutex
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		case <-time.After(2 * time.Millisecond):
		}
		ids, err := st.Completed()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			refs, ok := checkpointRefs(st, id)
			if !ok {
				continue
			}
			for _, r := range refs {
				if _, err := os.Stat(filepath.Join(shared, r)); err == nil {
					continue
				}
				// Retention removes the marker before the files: a file
				// missing while the marker is still there was deleted
				// too early.
				now, err := st.Completed()
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(now, id) {
					t.Fatalf("checkpoint %d lists shared file %s, which is gone", id, r)
				}
			}
			mu.Lock()
			checked++
			mu.Unlock()
		}
	}
	if checked == 0 {
		t.Fatal("no completed checkpoint was checked while the job ran")
	}

	// A new store's retention collects what the run left unreferenced (a
	// base materialized after the last checkpoint).
	st, err = store.Open(dir, store.Options{Retain: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	ids, err := st.Completed()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		refs, ok := checkpointRefs(st, id)
		if !ok {
			t.Fatalf("reading checkpoint %d", id)
		}
		for _, r := range refs {
			want[r] = true
		}
	}
	entries, err := os.ReadDir(shared)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	bases := 0
	for _, e := range entries {
		got = append(got, e.Name())
		if strings.HasSuffix(e.Name(), ".base") {
			bases++
		}
		if !want[e.Name()] {
			t.Errorf("shared file %s is listed by no retained checkpoint %v", e.Name(), ids)
		}
	}
	for r := range want {
		if !slices.Contains(got, r) {
			t.Errorf("shared file %s, listed by a retained checkpoint, is gone", r)
		}
	}
	if bases == 0 {
		t.Errorf("the retained checkpoints list no materialized base: %v", got)
	}

	latest := ids[len(ids)-1]
	var groups []state.KeyGroupData
	for sub := range 2 {
		snap, err := st.ReadTaskSnapshot(latest, fmt.Sprintf("count-%d", sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range snapshotKeyGroups(t, st, snap.Operators[0]) {
			groups = append(groups, state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data})
		}
	}
	values, err := state.ReadValues[string, int64](groups, "value", 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != keys {
		t.Fatalf("the last checkpoint holds %d keys, want %d", len(values), keys)
	}
	for k, v := range values {
		if v != records/keys {
			t.Fatalf("the last checkpoint counts %d for %s, want %d", v, k, records/keys)
		}
	}
}
