package nexmark

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/connector"
)

func testSource(t *testing.T, mod func(*Config)) *Source {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BaseTime = testBase
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drain reads r to the end (or n events), checking each event against the
// generator and its timestamp, and returns the indexes read in order.
func drain(t *testing.T, g *Generator, r connector.SourceReader[Event], n int) []int64 {
	t.Helper()
	var got []int64
	for len(got) < n {
		st, err := r.Read(7, func(e Event, ts int64) error {
			if ts != e.DateTime() {
				t.Fatalf("event emitted with time %d, its dateTime is %d", ts, e.DateTime())
			}
			// With one event per ms, the time names the index.
			i := ts - testBase - 1
			if want := g.Event(i); e != want {
				t.Fatalf("event at index %d is\n%+v\nwant\n%+v", i, e, want)
			}
			got = append(got, i)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if st == connector.Done {
			break
		}
	}
	return got
}

// oneMs gives every event its own millisecond, so a time names an index.
func oneMs(c *Config) { c.FirstEventRate = 1000 }

func TestSourceSplitsAndRestore(t *testing.T) {
	const total = 1000
	s := testSource(t, func(c *Config) { oneMs(c); c.Events = total })
	g, _ := NewGenerator(s.Config())
	for _, p := range []int{1, 3, 16} {
		seen := make([]int, total)
		for sub := 0; sub < p; sub++ {
			r, err := s.Open(connector.SourceContext{Subtask: sub, Parallelism: p, MaxParallelism: 8}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			idx := drain(t, g, r, total)
			for k, i := range idx {
				seen[i]++
				if k > 0 && i <= idx[k-1] {
					t.Fatalf("p=%d subtask %d emits %d after %d", p, sub, i, idx[k-1])
				}
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("p=%d: event %d emitted %d times", p, i, c)
			}
		}
	}

	// Stop three subtasks part way, restore each from its offset, and at
	// parallelism 2 and 5 from all three: every event once in all.
	for _, to := range []int{3, 2, 5} {
		seen := make([]int, total)
		var offs [][]byte
		for sub := 0; sub < 3; sub++ {
			r, _ := s.Open(connector.SourceContext{Subtask: sub, Parallelism: 3, MaxParallelism: 8}, nil, nil)
			for _, i := range drain(t, g, r, 100+7*sub) {
				seen[i]++
			}
			off, text := r.Offset()
			if !strings.Contains(text, fmt.Sprintf("emitted %d events", 105+7*sub)) {
				t.Errorf("offset text %q", text)
			}
			offs = append(offs, off)
		}
		for sub := 0; sub < to; sub++ {
			var r connector.SourceReader[Event]
			var err error
			ctx := connector.SourceContext{Subtask: sub, Parallelism: to, MaxParallelism: 8}
			if to == 3 {
				r, err = s.Open(ctx, offs[sub], nil)
			} else {
				r, err = s.Open(ctx, nil, offs)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range drain(t, g, r, total) {
				seen[i]++
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("restored at %d: event %d emitted %d times", to, i, c)
			}
		}
	}
}

func TestSourceOffsetErrors(t *testing.T) {
	s := testSource(t, oneMs)
	ctx := connector.SourceContext{Subtask: 0, Parallelism: 2, MaxParallelism: 4}
	r, _ := s.Open(ctx, nil, nil)
	good, _ := r.Offset()
	for name, c := range map[string]struct {
		off      []byte
		rescaled [][]byte
		want     string
	}{
		"version":   {off: []byte{9, 1, 2}, want: "unknown version"},
		"truncated": {off: good[:len(good)-1], want: "truncated"},
		"trailing":  {off: append(append([]byte{}, good...), 0), want: "trailing"},
		"missing":   {rescaled: [][]byte{good}, want: "hold 2 of 4 splits"},
		"twice":     {rescaled: [][]byte{good, good}, want: "owned by two old subtasks"},
	} {
		if _, err := s.Open(ctx, c.off, c.rescaled); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Open = %v, want an error containing %q", name, err, c.want)
		}
	}
	// A job that fixes another base time than its checkpoint's is refused.
	other := testSource(t, func(c *Config) { oneMs(c); c.BaseTime = testBase + 1 })
	if _, err := other.Open(ctx, good, nil); err == nil || !strings.Contains(err.Error(), "base-time") {
		t.Errorf("Open with another base time = %v", err)
	}
	// One that lets it default continues the checkpoint's timeline.
	cfg := DefaultConfig()
	cfg.FirstEventRate = 1000
	free, err := NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := free.Open(ctx, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2.Read(1, func(e Event, ts int64) error {
		if ts != testBase+1 {
			t.Errorf("restored default-base source emits time %d, want %d", ts, testBase+1)
		}
		return nil
	})
}

// TestSourceRateLimited paces a source on a fake clock: at 1000 events/s
// the first event is due at once, then one per millisecond, Idle between.
func TestSourceRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := testSource(t, func(c *Config) { oneMs(c); c.RateLimited = true })
		r, err := s.Open(connector.SourceContext{Subtask: 0, Parallelism: 1, MaxParallelism: 1}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		emit := func(Event, int64) error { count++; return nil }
		if st, _ := r.Read(100, emit); st != connector.Idle || count != 1 {
			t.Fatalf("at start: %v after %d events, want Idle after 1", st, count)
		}
		time.Sleep(50 * time.Millisecond)
		r.Read(100, emit)
		if count != 51 {
			t.Fatalf("after 50ms: %d events, want 51", count)
		}
		time.Sleep(time.Second)
		for st := connector.More; st == connector.More; {
			st, _ = r.Read(100, emit)
		}
		if count != 1051 {
			t.Fatalf("after 1.05s: %d events, want 1051", count)
		}
	})
}

// TestRestoreThroughClink runs the source through the clink API with
// checkpoints, stops the job part way, restores its latest checkpoint at
// another parallelism and runs to the end: the events before the
// checkpoint plus those after the restore are every event exactly once,
// each equal to the generator's.
func TestRestoreThroughClink(t *testing.T) {
	const total = 20_000
	cfg := DefaultConfig()
	cfg.BaseTime, cfg.FirstEventRate, cfg.Events = testBase, 1000, total
	src, err := NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := NewGenerator(src.Config())

	type seen struct {
		mu  sync.Mutex
		idx map[int64]int
	}
	job := func(opts clink.Options, p int, into *seen, slow bool) *clink.Environment {
		env, err := clink.NewEnvironment(opts)
		if err != nil {
			t.Fatal(err)
		}
		events := clink.FromSource(env, "nexmark", p, connector.Source[Event](src))
		timed := clink.AssignTimestamps(events, "ts", func(e Event) int64 { return e.DateTime() }, 4*time.Second)
		n := 0
		clink.SinkTo(timed, "sink", clink.SinkFunc(func(e Event) error {
			i := e.DateTime() - testBase - 1
			if e != g.Event(i) {
				return fmt.Errorf("event %d differs from the generator's", i)
			}
			into.mu.Lock()
			into.idx[i]++
			n++
			pause := slow && n%40 == 0
			into.mu.Unlock()
			if pause {
				time.Sleep(time.Millisecond)
			}
			return nil
		}))
		return env
	}

	dir := t.TempDir()
	first := &seen{idx: map[int64]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	env := job(clink.Options{Parallelism: 2, MaxParallelism: 16, CheckpointDir: dir, CheckpointInterval: 20 * time.Millisecond, Retain: 100}, 2, first, true)
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx) }()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ids, err := st.Completed()
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) >= 3 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("job ended before three checkpoints completed: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	latest, err := st.Resolve("latest")
	if err != nil {
		t.Fatal(err)
	}
	// What the checkpoint's offsets say was emitted before it.
	next := map[int64]int64{} // split -> next index
	var splits int64
	for sub := 0; sub < 2; sub++ {
		snap, err := st.ReadTaskSnapshot(latest, fmt.Sprintf("nexmark-%d", sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range snap.Operators {
			if op.UID != "nexmark" {
				continue
			}
			pos, err := decodePosition(op.Offset)
			if err != nil {
				t.Fatal(err)
			}
			splits = pos.splits
			for _, sp := range pos.own {
				next[sp.id] = sp.next
			}
		}
	}
	if len(next) != 16 {
		t.Fatalf("the checkpoint holds %d splits, want 16", len(next))
	}
	before := 0
	for i, c := range first.idx {
		if i < next[i%splits] {
			if c != 1 {
				t.Fatalf("event %d emitted %d times before the checkpoint", i, c)
			}
			before++
		}
	}
	if before == 0 || before == total {
		t.Fatalf("%d events before the checkpoint; the test wants a stop part way", before)
	}

	second := &seen{idx: map[int64]int{}}
	env2 := job(clink.Options{Parallelism: 3, MaxParallelism: 16, CheckpointDir: dir, Restore: "latest"}, 3, second, false)
	if err := env2.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < total; i++ {
		n := second.idx[i]
		if i < next[i%splits] {
			n += first.idx[i]
		}
		if n != 1 {
			t.Fatalf("event %d: %d times before the checkpoint and after the restore, want once", i, n)
		}
	}
	t.Logf("%d events before checkpoint %d, %d after the restore", before, latest, len(second.idx))
}
