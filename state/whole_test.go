package state_test

import (
	"maps"
	"slices"
	"strings"
	"sync/atomic"
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

// churnBackend opens a backend with incremental checkpoints that merges a
// base once materialize bytes of the chain are redundant and may write
// whole checkpoints from 1 byte on, with a table v, and shared files.
func churnBackend(t *testing.T, materialize int64) (*state.MemoryBackend, *state.ValueState[int64, string], *dirShared) {
	t.Helper()
	sf := &dirShared{dir: t.TempDir()}
	b := openIncremental(t, materialize, state.KeyGroupRange{Start: 0, End: incMaxP})
	t.Cleanup(func() { b.Close() })
	state.SetMinWholeBytes(b, 1)
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	return b, v, sf
}

// churnRounds takes rounds checkpoints of a table that round writes
// before each, on a churnBackend; it returns each checkpoint's file state,
// whether the table recorded its changes after it, and the shared files.
func churnRounds(t *testing.T, materialize int64, rounds int, round func(r int, v *state.ValueState[int64, string])) ([]*state.FileState, []bool, *dirShared) {
	t.Helper()
	b, v, sf := churnBackend(t, materialize)
	var out []*state.FileState
	var tracked []bool
	for r := range rounds {
		round(r, v)
		fs := statetest.PersistFiles(t, b, sf)
		out = append(out, fs)
		tracked = append(tracked, state.Tracking(v))
		if wholeBase(fs) && state.SharedShards(v) == 0 {
			t.Fatalf("round %d wrote a base of its own with no key group frozen", r)
		}
		// A materialization runs beside the checkpoints: give it time.
		time.Sleep(time.Millisecond)
	}
	return out, tracked, sf
}

// restoredKeys restores fss into a new backend and returns its table's
// entries.
func restoredKeys(t *testing.T, sf *dirShared, fs *state.FileState) map[int64]string {
	t.Helper()
	r := openIncremental(t, 1024, state.KeyGroupRange{Start: 0, End: incMaxP})
	defer r.Close()
	if err := r.RestoreFiles([]*state.FileState{fs}, sf); err != nil {
		t.Fatal(err)
	}
	rv, err := state.NewValue(r, "v", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	rv.Range(func(k int64, val string) bool {
		got[k] = val
		return true
	})
	return got
}

// churnPer is how many keys a round of churnRound or growRound puts.
const churnPer = 200

// churnValue is key k's value in churnRound.
func churnValue(k int64) string {
	return strings.Repeat("x", 100) + string(rune('a'+k%26))
}

// churnRound deletes the keys of round r-1 and puts those of round r:
// churnPer keys from r*churnPer, each of churnValue. Every key lives one
// checkpoint interval, as a join's rows that expire seconds after they
// came.
func churnRound(r int, v *state.ValueState[int64, string]) {
	for k := int64(r-1) * churnPer; r > 0 && k < int64(r)*churnPer; k++ {
		v.Delete(k)
	}
	for k := int64(r) * churnPer; k < int64(r+1)*churnPer; k++ {
		v.Put(k, churnValue(k))
	}
}

// churnKeys is the table after churnRound r.
func churnKeys(r int) map[int64]string {
	want := map[int64]string{}
	for k := int64(r) * churnPer; k < int64(r+1)*churnPer; k++ {
		want[k] = churnValue(k)
	}
	return want
}

// growRound puts the churnPer keys of round r and rewrites a tenth of
// those of the rounds before: a state that grows.
func growRound(r int, v *state.ValueState[int64, string]) {
	pad := strings.Repeat("y", 100)
	for k := int64(r) * churnPer; k < int64(r+1)*churnPer; k++ {
		v.Put(k, pad)
	}
	for k := int64(0); k < int64(r)*churnPer; k += 10 {
		v.Put(k, pad+"!")
	}
}

// TestMemoryIncrementalWholeCheckpoints checks that a state whose every
// key lives one checkpoint interval (a join that drops its rows once
// they are seconds old) is checkpointed whole, WholeBases checkpoints in
// a row, once a delta outgrows the base a materialization wrote: then a
// delta measures the churn again, and the checkpoints go whole again. A
// whole checkpoint restores the state as of its capture.
func TestMemoryIncrementalWholeCheckpoints(t *testing.T) {
	fss, tracked, sf := churnRounds(t, 1024, 60, churnRound)
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
	// The table records no changes between two whole captures; from the
	// last one on, for the delta after it, again.
	for i, on := range tracked[:run+1] {
		if want := i < first || i >= run-1; on != want {
			t.Fatalf("after checkpoint %d (whole %d..%d) the table records changes: %v, want %v", i, first, run-1, on, want)
		}
	}

	// A whole checkpoint restores its round's keys, and nothing else; so
	// does the delta after the last whole one, which holds the changes
	// since it.
	for _, i := range []int{first + 1, run} {
		if got, want := restoredKeys(t, sf, fss[i]), churnKeys(i); !maps.Equal(got, want) {
			t.Fatalf("checkpoint %d (%v) restored %d keys, want round %d's %d", i, fss[i].Shared, len(got), i, len(want))
		}
	}
}

// TestMemoryIncrementalGrowingStateStaysDelta checks that a state that
// grows, rewriting a tenth of its keys each checkpoint, is never written
// whole: its deltas stay smaller than the base a materialization writes.
func TestMemoryIncrementalGrowingStateStaysDelta(t *testing.T) {
	fss, _, _ := churnRounds(t, 1024, 60, growRound)
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

// noMaterialize is a materialization volume no test reaches: the chains
// of these tests keep their first files, deltas, as their base.
const noMaterialize = 1 << 40

// TestMemoryIncrementalWholeWithoutBase checks that a state whose keys
// die before the checkpoint after them, written ahead late in each
// interval (q7's join), goes whole with no base to measure it by: a new
// job's chain, whose first file is a delta. The first checkpoints' files
// hold each live entry about once, as a growing state's do, and stay
// deltas; the one whose files also hold what was written ahead holds
// twice the table's entries and makes the next checkpoints whole.
func TestMemoryIncrementalWholeWithoutBase(t *testing.T) {
	const keys = 2000 // more than a persist ahead needs
	sf := &dirShared{dir: t.TempDir()}
	b := openIncremental(t, noMaterialize, state.KeyGroupRange{Start: 0, End: incMaxP})
	defer b.Close()
	b.UseShared(sf)
	state.SetMinWholeBytes(b, 1)
	var clock atomic.Int64
	state.SetClock(b, func() time.Time { return time.Unix(0, clock.Load()) })
	v, err := state.NewValue(b, "v", state.CodecFor[int64](), state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 100)
	batch := func(i int, put bool) {
		for k := int64(i) * keys; k < int64(i+1)*keys; k++ {
			if put {
				v.Put(k, pad)
			} else {
				v.Delete(k)
			}
		}
	}
	// Round r puts batch 2r, writes it ahead in round 2 (late in the
	// interval, where a table whose keys die within one is written
	// ahead), then replaces it by batch 2r+1, which the next round
	// deletes.
	var fss []*state.FileState
	for r := range 5 {
		clock.Store(int64(r) * int64(time.Second))
		if r > 0 {
			batch(2*r-1, false)
		}
		batch(2*r, true)
		if r == 2 {
			clock.Store(int64(r)*int64(time.Second) + int64(800*time.Millisecond))
			persistAhead(t, b, sf, 1)
		}
		batch(2*r, false)
		batch(2*r+1, true)
		clock.Store(int64(r+1) * int64(time.Second))
		fss = append(fss, statetest.PersistFiles(t, b, sf))
	}
	for i, fs := range fss[:3] {
		if wholeBase(fs) || len(fs.Shared) < i+1 {
			t.Fatalf("checkpoint %d lists %v, want the chain of the deltas", i, fs.Shared)
		}
	}
	if !slices.ContainsFunc(fss[2].Shared, func(n string) bool { return strings.HasSuffix(n, ".pre") }) {
		t.Fatalf("checkpoint 2 lists %v, without the file written ahead for it: the test measures nothing", fss[2].Shared)
	}
	for i, fs := range fss[3:] {
		if !wholeBase(fs) {
			t.Fatalf("checkpoint %d lists %v, want a base of its own", i+3, fs.Shared)
		}
	}
}

// TestMemoryIncrementalGrowingStateWithoutBaseStaysDelta checks that a
// state that grows, rewriting a tenth of its keys each checkpoint, is
// never written whole when no materialization writes a base: its
// checkpoints' files hold fewer entries than the table.
func TestMemoryIncrementalGrowingStateWithoutBaseStaysDelta(t *testing.T) {
	fss, _, _ := churnRounds(t, noMaterialize, 30, growRound)
	for i, fs := range fss {
		if wholeBase(fs) {
			t.Fatalf("checkpoint %d of a growing state was written whole: %v", i, fs.Shared)
		}
		if len(fs.Shared) != i+1 {
			t.Fatalf("checkpoint %d lists %v, want the chain of its deltas", i, fs.Shared)
		}
	}
}

// TestMemoryIncrementalUntrackedCaptureLost checks that when the last
// whole capture of a run, after which the tables record changes again,
// is never persisted (its checkpoint failed before its snapshot was
// written), the delta after it fails rather than lose what changed
// before that capture, and the checkpoint after writes the state whole,
// as it is; and that when the runtime discards that capture (its
// checkpoint was aborted), the next checkpoint writes the state whole at
// once.
func TestMemoryIncrementalUntrackedCaptureLost(t *testing.T) {
	for _, discard := range []bool{false, true} {
		b, v, sf := churnBackend(t, 1024)
		r := 0
		first := -1
		for ; first < 0 || r < first+state.WholeBases-1; r++ {
			if r > 30 {
				t.Fatal("no checkpoint of a state that churns entirely was written whole")
			}
			churnRound(r, v)
			if fs := statetest.PersistFiles(t, b, sf); wholeBase(fs) && first < 0 {
				first = r
			}
			time.Sleep(time.Millisecond)
		}
		if state.Tracking(v) {
			t.Fatal("the table records changes before the last whole capture of the run")
		}
		// The last whole capture, never persisted.
		churnRound(r, v)
		r++
		lost, err := b.Capture()
		if err != nil {
			t.Fatal(err)
		}
		if !state.Tracking(v) {
			t.Fatal("the table records no changes after the last whole capture of the run")
		}
		if discard {
			if err := lost.(interface{ Discard() error }).Discard(); err != nil {
				t.Fatal(err)
			}
		} else {
			churnRound(r, v)
			r++
			c, err := b.Capture()
			if err != nil {
				t.Fatal(err)
			}
			if fs, err := c.(state.FileCaptured).PersistFiles(sf); err == nil {
				t.Fatalf("the delta after a lost untracked capture was written: %v", fs.Shared)
			}
		}
		churnRound(r, v)
		fs := statetest.PersistFiles(t, b, sf)
		if !wholeBase(fs) {
			t.Fatalf("discard %v: the checkpoint after the lost capture lists %v, want a base of its own", discard, fs.Shared)
		}
		if got, want := restoredKeys(t, sf, fs), churnKeys(r); !maps.Equal(got, want) {
			t.Fatalf("discard %v: restored %d keys, want round %d's %d", discard, len(got), r, len(want))
		}
	}
}

// TestMemoryIncrementalChurnStopsTracking checks that a new job's table
// whose keys live a fraction of an interval (q7's join) stops recording
// its changes within the first interval, once it inserted twice as many
// keys as it holds, and that its checkpoints are then whole, run after
// run, with no interval that records changes to measure the churn again;
// and that the last one restores the keys alive at its capture.
func TestMemoryIncrementalChurnStopsTracking(t *testing.T) {
	b, v, sf := churnBackend(t, noMaterialize)
	b.UseShared(sf)
	const live = state.MinChurnEntries
	next := int64(0)
	// step puts live keys and deletes the live ones before them: the
	// table holds live keys, and inserted live more.
	step := func() {
		for k := next; k < next+live; k++ {
			v.Put(k, churnValue(k))
			if k >= live {
				v.Delete(k - live)
			}
		}
		next += live
		if err := b.PersistPreemptively(); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if !state.Tracking(v) {
		t.Fatalf("the table stopped recording changes having inserted %d keys, %d of them alive", next, live)
	}
	step()
	if state.Tracking(v) {
		t.Fatalf("the table records changes having inserted %d keys, %d of them alive", next, live)
	}
	for r := range 2*state.WholeBases + 2 {
		fs := statetest.PersistFiles(t, b, sf)
		if !wholeBase(fs) {
			t.Fatalf("checkpoint %d lists %v, want a base of its own", r, fs.Shared)
		}
		if state.Tracking(v) {
			t.Fatalf("after checkpoint %d the table records changes", r)
		}
		if r == 2*state.WholeBases+1 {
			want := map[int64]string{}
			for k := next - live; k < next; k++ {
				want[k] = churnValue(k)
			}
			if got := restoredKeys(t, sf, fs); !maps.Equal(got, want) {
				t.Fatalf("checkpoint %d restored %d keys, want the %d alive", r, len(got), len(want))
			}
		}
		for range 4 {
			step()
		}
	}
}

// TestMemoryIncrementalGrowingStateKeepsTracking checks that a table
// that inserts many keys and deletes none keeps recording its changes
// and writes deltas: its inserted keys are all alive.
func TestMemoryIncrementalGrowingStateKeepsTracking(t *testing.T) {
	b, v, sf := churnBackend(t, noMaterialize)
	b.UseShared(sf)
	next := int64(0)
	for r := range 4 {
		for range 3 {
			for k := next; k < next+state.MinChurnEntries; k++ {
				v.Put(k, churnValue(k))
			}
			next += state.MinChurnEntries
			if err := b.PersistPreemptively(); err != nil {
				t.Fatal(err)
			}
			if !state.Tracking(v) {
				t.Fatalf("round %d: the table stopped recording changes having inserted %d keys, all alive", r, next)
			}
		}
		if fs := statetest.PersistFiles(t, b, sf); wholeBase(fs) {
			t.Fatalf("checkpoint %d of a growing state was written whole: %v", r, fs.Shared)
		}
	}
}
