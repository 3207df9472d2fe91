package state_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/statetest"
)

// wholeBase reports whether a checkpoint's chain is one base that its own
// capture wrote (not merged from files).
func wholeBase(fs *state.FileState) bool {
	return len(fs.Shared) == 1 && strings.HasSuffix(fs.Shared[0], ".base") && !strings.HasSuffix(fs.Shared[0], ".merged.base")
}

// churnRounds takes rounds checkpoints of a table that round writes
// before each, on a backend with incremental checkpoints that merges a
// base once 1 KiB of the chain is redundant and may write whole
// checkpoints from 1 byte on; it returns each checkpoint's file state and
// the shared files.
func churnRounds(t *testing.T, rounds int, round func(r int, v *state.ValueState[int64, string])) ([]*state.FileState, *dirShared) {
	t.Helper()
	sf := &dirShared{dir: t.TempDir()}
	b := openIncremental(t, 1024, state.KeyGroupRange{Start: 0, End: incMaxP})
	t.Cleanup(func() { b.Close() })
	state.SetMinWholeBytes(b, 1)
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	var out []*state.FileState
	for r := range rounds {
		round(r, v)
		fs := statetest.PersistFiles(t, b, sf)
		out = append(out, fs)
		if wholeBase(fs) && state.SharedShards(v) == 0 {
			t.Fatalf("round %d wrote a base of its own with no key group frozen", r)
		}
		// A materialization runs beside the checkpoints: give it time.
		time.Sleep(time.Millisecond)
	}
	return out, sf
}

// TestMemoryIncrementalWholeCheckpoints checks that a state whose every
// key lives one checkpoint interval (a join that drops its rows once
// they are seconds old) is checkpointed whole, WholeBases checkpoints in
// a row, once a delta outgrows the base a materialization wrote: then a
// delta measures the churn again, and the checkpoints go whole again. A
// whole checkpoint restores the state as of its capture.
func TestMemoryIncrementalWholeCheckpoints(t *testing.T) {
	const keys = 200
	pad := strings.Repeat("x", 100)
	value := func(k int64) string { return pad + string(rune('a'+k%26)) }
	// Round r holds keys r*keys .. r*keys+keys-1, the last round's gone.
	churn := func(r int, v *state.ValueState[int64, string]) {
		for k := int64(r-1) * keys; r > 0 && k < int64(r)*keys; k++ {
			v.Delete(k)
		}
		for k := int64(r) * keys; k < int64(r+1)*keys; k++ {
			v.Put(k, value(k))
		}
	}
	fss, sf := churnRounds(t, 60, churn)
	first := slices.IndexFunc(fss, wholeBase)
	if first < 0 {
		t.Fatal("no checkpoint of a state that churns entirely was written whole")
	}
	if !slices.ContainsFunc(fss[:first], func(fs *state.FileState) bool {
		return slices.ContainsFunc(fs.Shared, func(n string) bool { return strings.HasSuffix(n, ".merged.base") })
	}) {
		t.Fatal("the checkpoints went whole before a materialization wrote a base to measure the state by")
	}
	run := first
	for run < len(fss) && wholeBase(fss[run]) {
		run++
	}
	if run-first != state.WholeBases || run >= len(fss)-1 {
		t.Fatalf("checkpoints %d..%d were whole, want %d in a row followed by more", first, run-1, state.WholeBases)
	}
	if wholeBase(fss[run]) || len(fss[run].Shared) != 2 {
		t.Fatalf("checkpoint %d after the whole ones lists %v, want the last base and a delta", run, fss[run].Shared)
	}
	if !wholeBase(fss[run+1]) {
		t.Fatalf("the delta after the whole checkpoints did not make them whole again: checkpoint %d lists %v", run+1, fss[run+1].Shared)
	}

	// A whole checkpoint restores its round's keys, and nothing else.
	r := openIncremental(t, 1024, state.KeyGroupRange{Start: 0, End: incMaxP})
	defer r.Close()
	if err := r.RestoreFiles([]*state.FileState{fss[first+1]}, sf); err != nil {
		t.Fatal(err)
	}
	rv, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	rv.Range(func(k int64, val string) bool {
		if k/keys != int64(first+1) || val != value(k) {
			t.Errorf("restored %d = %q: not a key of round %d", k, val, first+1)
		}
		n++
		return true
	})
	if n != keys {
		t.Fatalf("restored %d keys, want %d", n, keys)
	}
}

// TestMemoryIncrementalGrowingStateStaysDelta checks that a state that
// grows, rewriting a tenth of its keys each checkpoint, is never written
// whole: its deltas stay smaller than the base a materialization writes.
func TestMemoryIncrementalGrowingStateStaysDelta(t *testing.T) {
	const keys = 200
	pad := strings.Repeat("y", 100)
	grow := func(r int, v *state.ValueState[int64, string]) {
		for k := int64(r) * keys; k < int64(r+1)*keys; k++ {
			v.Put(k, pad)
		}
		for k := int64(0); k < int64(r)*keys; k += 10 {
			v.Put(k, pad+"!")
		}
	}
	fss, _ := churnRounds(t, 60, grow)
	merged := false
	for i, fs := range fss {
		if wholeBase(fs) {
			t.Fatalf("checkpoint %d of a growing state was written whole: %v", i, fs.Shared)
		}
		merged = merged || slices.ContainsFunc(fs.Shared, func(n string) bool { return strings.HasSuffix(n, ".merged.base") })
	}
	if !merged {
		t.Fatal("no materialization wrote a base: the test measured nothing")
	}
}
