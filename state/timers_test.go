package state_test

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/clinkstream/clink/state"
)

// timerBackends opens an empty backend of each kind for maxP key groups.
var timerBackends = map[string]func(t *testing.T, maxP int) state.Backend{
	"memory": func(t *testing.T, maxP int) state.Backend { return openMemory(t, maxP) },
	"bytes":  func(t *testing.T, maxP int) state.Backend { return openMapBackend(t, maxP) },
}

// restoreTimers opens a backend of kind for the key groups rng with
// groups restored into it and registers timers on it.
func restoreTimers(t *testing.T, kind string, rng state.KeyGroupRange, maxP int, groups []state.KeyGroupData) *state.Timers[string] {
	t.Helper()
	var b state.Backend = state.NewMemoryBackend()
	if kind == "bytes" {
		b = newMapBackend()
	}
	if err := b.Open(rng, maxP); err != nil {
		t.Fatal(err)
	}
	if err := b.Restore([][]state.KeyGroupData{groups}); err != nil {
		t.Fatal(err)
	}
	tm, err := state.NewTimers(b, state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// fireAll fires every event-time timer and returns "key@ts" of each, in
// the order they fired but with the keys of one timestamp sorted (their
// order is not specified).
func fireAll(t *testing.T, tm *state.Timers[string]) string {
	t.Helper()
	type fired struct {
		k  string
		ts int64
	}
	var got []fired
	if err := tm.Fire(state.EventTime, math.MaxInt64, func(k string, ts int64) error {
		got = append(got, fired{k, ts})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(got); i++ {
		if got[i].ts < got[i-1].ts {
			t.Fatalf("timers fired out of order: %v", got)
		}
	}
	slices.SortStableFunc(got, func(a, b fired) int {
		if a.ts != b.ts {
			return int(a.ts - b.ts)
		}
		return strings.Compare(a.k, b.k)
	})
	var s []string
	for _, f := range got {
		s = append(s, fmt.Sprint(f.k, "@", f.ts))
	}
	return strings.Join(s, " ")
}

// TestTimersFireInOrder sets timers of many keys at shared and distinct
// times on each backend: each fires once, in time order, deleted ones do
// not, and timers set while firing fire in the same call when due.
func TestTimersFireInOrder(t *testing.T) {
	for kind, open := range timerBackends {
		t.Run(kind, func(t *testing.T) {
			tm, err := state.NewTimers(open(t, 16), state.CodecFor[string]())
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"a", "b", "c"} {
				tm.Register(state.EventTime, k, 100)
				tm.Register(state.EventTime, k, 100)
			}
			tm.Register(state.EventTime, "a", 50)
			tm.Register(state.EventTime, "a", 200)
			tm.Register(state.EventTime, "b", 150)
			tm.Delete(state.EventTime, "c", 100)
			tm.Delete(state.EventTime, "a", 50)
			tm.Register(state.EventTime, "a", 50) // set again after a delete: fires once
			tm.Register(state.EventTime, "x", 40)
			tm.Delete(state.EventTime, "x", 40) // the earliest time has no live timer left
			tm.Register(state.ProcessingTime, "a", 7)

			if ts, ok := tm.Next(state.EventTime); !ok || ts != 50 {
				t.Errorf("next event-time timer %d, %v; want 50", ts, ok)
			}
			var fired []string
			again := true
			err = tm.Fire(state.EventTime, 150, func(k string, ts int64) error {
				fired = append(fired, fmt.Sprint(k, "@", ts))
				if len(fired) > 20 {
					return fmt.Errorf("timers keep firing: %v", fired)
				}
				switch {
				case k == "a" && ts == 50:
					tm.Register(state.EventTime, "d", 100) // joins the timers at 100
					tm.Register(state.EventTime, "e", 120) // a time of its own, due
					tm.Register(state.EventTime, "f", 151) // not due
				case k == "b" && ts == 150 && again:
					again = false
					tm.Register(state.EventTime, "b", 150) // set again at the time firing
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Join(fired, " "), "a@50 a@100 b@100 d@100 e@120 b@150 b@150"; got != want {
				t.Errorf("fired %q, want %q", got, want)
			}
			if got, want := fireAll(t, tm), "f@151 a@200"; got != want {
				t.Errorf("then fired %q, want %q", got, want)
			}
			if _, ok := tm.Next(state.EventTime); ok {
				t.Error("an event-time timer is left after all fired")
			}
			if ts, ok := tm.Next(state.ProcessingTime); !ok || ts != 7 {
				t.Errorf("next processing-time timer %d, %v; want 7", ts, ok)
			}
		})
	}
}

// TestTimersCheckpointed checks that a capture holds the timers as they
// were when it was taken, whatever fires, is deleted or is set after it,
// and that its timers restore, also into key-group ranges split as a
// rescale splits them.
func TestTimersCheckpointed(t *testing.T) {
	const maxP = 8
	for kind, open := range timerBackends {
		t.Run(kind, func(t *testing.T) {
			b := open(t, maxP)
			tm, err := state.NewTimers(b, state.CodecFor[string]())
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := range 40 {
				k := fmt.Sprint("k", i)
				// Keys with one timer and keys with several.
				for j := range 1 + i%4 {
					ts := int64(1000*(j+1) + i%3)
					tm.Register(state.EventTime, k, ts)
					want = append(want, fmt.Sprint(k, "@", ts))
				}
			}
			c, err := b.Capture()
			if err != nil {
				t.Fatal(err)
			}
			// Change every set after the capture: fire the first timers,
			// delete some, set new ones.
			if err := tm.Fire(state.EventTime, 1001, func(string, int64) error { return nil }); err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				k := fmt.Sprint("k", i)
				tm.Delete(state.EventTime, k, 2000+int64(i%3))
				tm.Register(state.EventTime, k, 5000)
			}
			groups := persistCaptured(t, c)

			slices.SortFunc(want, func(a, b string) int {
				var ka, kb string
				var ta, tb int64
				fmt.Sscanf(strings.Replace(a, "@", " ", 1), "%s %d", &ka, &ta)
				fmt.Sscanf(strings.Replace(b, "@", " ", 1), "%s %d", &kb, &tb)
				if ta != tb {
					return int(ta - tb)
				}
				return strings.Compare(ka, kb)
			})
			all := state.KeyGroupRange{Start: 0, End: maxP}
			if got := fireAll(t, restoreTimers(t, kind, all, maxP, groups)); got != strings.Join(want, " ") {
				t.Errorf("restored: fired\n%s\nwant\n%s", got, strings.Join(want, " "))
			}

			// Split over two subtasks, as a rescale from 1 to 2 does: each
			// gets the timers of its key groups, and together all.
			var both []string
			for _, rng := range []state.KeyGroupRange{{Start: 0, End: maxP / 2}, {Start: maxP / 2, End: maxP}} {
				part := restoreTimers(t, kind, rng, maxP, groups)
				if err := part.Fire(state.EventTime, math.MaxInt64, func(k string, ts int64) error {
					if kg := keyGroupOf(k, maxP); !rng.Contains(kg) {
						t.Errorf("key %s of key group %d fired in the subtask of %v", k, kg, rng)
					}
					both = append(both, fmt.Sprint(k, "@", ts))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(both)
			sorted := slices.Clone(want)
			slices.Sort(sorted)
			if !slices.Equal(both, sorted) {
				t.Errorf("split over two subtasks: fired %v, want %v", both, sorted)
			}
		})
	}
}

// TestTimerTableEncoding checks that the memory backend writes a key's
// timers exactly as a map state of timestamps (map[int64]struct{}) does,
// which is what checkpoints taken before the compact sets hold, and that
// it restores such a checkpoint.
func TestTimerTableEncoding(t *testing.T) {
	const maxP = 4
	sets := map[string][]int64{"a": {7}, "b": {-3, 1 << 40, 256, 5}, "c": {0, 1}}

	old := openMemory(t, maxP)
	ms, err := state.NewMap[string, int64, struct{}](old, "__timers_event", state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := state.NewMap[string, int64, struct{}](old, "__timers_proc", state.CodecFor[string]()); err != nil {
		t.Fatal(err)
	}
	b := openMemory(t, maxP)
	tm, err := state.NewTimers(b, state.CodecFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	for k, tss := range sets {
		for _, ts := range tss {
			ms.Put(k, ts, struct{}{})
			tm.Register(state.EventTime, k, ts)
		}
	}
	oldGroups, groups := mustPersist(t, old), mustPersist(t, b)
	if !reflect.DeepEqual(groups, oldGroups) {
		t.Errorf("timer tables encode as\n%x\nmap states as\n%x", groups, oldGroups)
	}
	got := fireAll(t, restoreTimers(t, "memory", state.KeyGroupRange{Start: 0, End: maxP}, maxP, oldGroups))
	if want := "b@-3 c@0 c@1 b@5 a@7 b@256 b@1099511627776"; got != want {
		t.Errorf("restored from map states: fired %q, want %q", got, want)
	}
}

// BenchmarkTimersWindowEnds sets one event-time timer per key at the end
// of its window and fires them when the watermark passes, as a tumbling
// window over 100,000 keys does: an op is one timer set and fired; the
// figure to compare is timers per CPU-second.
func BenchmarkTimersWindowEnds(b *testing.B) {
	const keys = 100_000
	tm, err := state.NewTimers(openMemory(b, 128), state.CodecFor[string]())
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprint("key-", i)
	}
	fired := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for i, end := 0, int64(1000); i < b.N; end += 1000 {
		n := min(keys, b.N-i)
		for _, k := range names[:n] {
			tm.Register(state.EventTime, k, end)
		}
		if err := tm.Fire(state.EventTime, end, func(string, int64) error { fired++; return nil }); err != nil {
			b.Fatal(err)
		}
		i += n
	}
	cpu := cpuTime(b) - cpu0
	if fired != b.N {
		b.Fatalf("%d timers fired, want %d", fired, b.N)
	}
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "timers/CPU-s")
}

// TestUnkeptEventTimers checks UnkeptEventTimers on the memory backend:
// event-time timers are queued only (registered twice, one fires twice; a
// delete leaves it), a checkpoint holds none of them while it keeps the
// processing-time ones, and registering them with the option on a
// checkpoint taken without it deletes the timers it holds (the operator
// sets its timers from its state), so the next checkpoint holds none
// either. On a bytes backend the option changes nothing.
func TestUnkeptEventTimers(t *testing.T) {
	const maxP = 8
	all := state.KeyGroupRange{Start: 0, End: maxP}
	kc := state.CodecFor[string]()

	b := openMemory(t, maxP)
	tm, err := state.NewTimers(b, kc, state.UnkeptEventTimers())
	if err != nil {
		t.Fatal(err)
	}
	if !tm.EventUnkept() {
		t.Fatal("EventUnkept is false on the memory backend with UnkeptEventTimers")
	}
	tm.Register(state.EventTime, "a", 10)
	tm.Register(state.EventTime, "a", 10)
	tm.Register(state.EventTime, "b", 20)
	tm.Delete(state.EventTime, "b", 20)
	tm.Register(state.ProcessingTime, "c", 30)
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	groups := persistCaptured(t, c)
	if got, want := fireAll(t, tm), "a@10 a@10 b@20"; got != want {
		t.Errorf("fired %q, want %q", got, want)
	}
	restored := restoreTimers(t, "memory", all, maxP, groups)
	if got := fireAll(t, restored); got != "" {
		t.Errorf("a checkpoint of unkept timers restored event-time timers %q", got)
	}
	if ts, ok := restored.Next(state.ProcessingTime); !ok || ts != 30 {
		t.Errorf("processing-time timer restored as %d, %v; want 30", ts, ok)
	}

	// A checkpoint taken with kept timers, restored with the option.
	kept := openMemory(t, maxP)
	tk, err := state.NewTimers(kept, kc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		tk.Register(state.EventTime, fmt.Sprint("k", i), int64(100+i))
	}
	c, err = kept.Capture()
	if err != nil {
		t.Fatal(err)
	}
	groups = persistCaptured(t, c)
	nb := state.NewMemoryBackend()
	if err := nb.Open(all, maxP); err != nil {
		t.Fatal(err)
	}
	if err := nb.Restore([][]state.KeyGroupData{groups}); err != nil {
		t.Fatal(err)
	}
	tu, err := state.NewTimers(nb, kc, state.UnkeptEventTimers())
	if err != nil {
		t.Fatal(err)
	}
	if got := fireAll(t, tu); got != "" {
		t.Errorf("kept timers restored as unkept fired %q; the operator sets them from its state", got)
	}
	c, err = nb.Capture()
	if err != nil {
		t.Fatal(err)
	}
	again := restoreTimers(t, "memory", all, maxP, persistCaptured(t, c))
	if got := fireAll(t, again); got != "" {
		t.Errorf("the checkpoint after restoring kept timers as unkept still holds %q", got)
	}

	// A bytes backend keeps them.
	bb := openMapBackend(t, maxP)
	tb, err := state.NewTimers(bb, kc, state.UnkeptEventTimers())
	if err != nil {
		t.Fatal(err)
	}
	if tb.EventUnkept() {
		t.Fatal("EventUnkept is true on a bytes backend")
	}
	tb.Register(state.EventTime, "a", 10)
	tb.Register(state.EventTime, "a", 10)
	if got := fireAll(t, tb); got != "a@10" {
		t.Errorf("bytes backend fired %q, want one a@10", got)
	}
}
