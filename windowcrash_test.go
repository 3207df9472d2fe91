package clink_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/internal/crashtest"
)

const (
	winKeys = 20
	winRate = 12_000 // records per second per source subtask
)

// winRecords is the input size of the windowed crash job with the given
// state backend. Under the race detector Pebble runs its invariant checks,
// which record a stack trace for every iterator it opens (the session
// windows open one per record), so the Pebble campaign takes a third of
// the input there to stay within its deadline; the input's pattern repeats
// every 1500 records, so a third still holds every kind of window.
func winRecords(backend string) int64 {
	if backend == "pebble" && raceEnabled {
		return 40_000
	}
	return 120_000
}

// winEvent is record i of the windowed crash job: event time 2 ms per
// record, and every 40th key pauses for 600 ms so that sessions split.
func winEvent(i int64) event {
	ts := i * 2
	key := i % winKeys
	return event{Key: fmt.Sprintf("k%02d", key), Ts: ts, V: i % 7}
}

// winKeep drops the records that make session gaps: key k has no records
// in the 700 ms after every 3 s mark shifted by k·100 ms.
func winKeep(e event) bool {
	k, _ := strconv.Atoi(e.Key[1:])
	phase := (e.Ts + int64(k)*100) % 3000
	return phase >= 700
}

func windowedJob(opts clink.Options, outDir string) (*clink.Environment, error) {
	records := winRecords(opts.StateBackend)
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		return nil, err
	}
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: records, RatePerSecond: winRate}, winEvent)
	kept := clink.Filter(src, "gaps", winKeep)
	timed := clink.AssignTimestamps(kept, "ts", func(e event) int64 { return e.Ts }, 100*time.Millisecond)
	keyed := clink.KeyBy(timed, func(e event) string { return e.Key })
	agg := clink.AggregateFunction[event, sumCount, sumCount](sumAgg{})
	tumble := clink.Aggregate(keyed, "tumble", clink.TumblingWindows(time.Second), agg, clink.WindowOptions{})
	sess := clink.Aggregate(keyed, "session", clink.SessionWindows(500*time.Millisecond), agg, clink.WindowOptions{})
	format := func(kind string) func(r clink.WindowResult[string, sumCount]) string {
		return func(r clink.WindowResult[string, sumCount]) string {
			return fmt.Sprintf("%s,%s,%d,%d,%d,%d\n", kind, r.Key, r.Window.Start, r.Window.End, r.Value.Sum, r.Value.Count)
		}
	}
	lines := clink.Union("lines",
		clink.Map(tumble.Results(), "tumble_fmt", format("T")),
		clink.Map(sess.Results(), "session_fmt", format("S")))
	clink.SinkTo(lines, "out", clink.Sink[string](appendSink{dir: outDir}))
	clink.SinkTo(tumble.Late(), "tumble_late", clink.SinkFunc(func(e event) error { return fmt.Errorf("late record %+v", e) }))
	clink.SinkTo(sess.Late(), "session_late", clink.SinkFunc(func(e event) error { return fmt.Errorf("late record %+v", e) }))
	return env, nil
}

// TestCrashWindowsProcess is the job process of TestCrashWindowsExactlyOnce.
func TestCrashWindowsProcess(t *testing.T) {
	dir := os.Getenv("CLINK_CRASH_WIN_CKPT")
	if dir == "" {
		t.Skip("run by TestCrashWindowsExactlyOnce")
	}
	p, err := strconv.Atoi(os.Getenv("CLINK_CRASH_PARALLELISM"))
	if err != nil {
		t.Fatalf("CLINK_CRASH_PARALLELISM: %v", err)
	}
	env, err := windowedJob(clink.Options{
		StateBackend: os.Getenv("CLINK_CRASH_BACKEND"),
		Parallelism:  p, CheckpointDir: dir, CheckpointInterval: 50 * time.Millisecond,
		Restore: os.Getenv("CLINK_CRASH_RESTORE"), BatchSize: 64, WatermarkInterval: 20 * time.Millisecond,
	}, os.Getenv("CLINK_CRASH_OUT"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// windowReference computes the tumbling (1 s) and session (500 ms gap)
// windows of the job's input directly.
func windowReference(records int64) map[string]sumCount {
	want := map[string]sumCount{}
	last := map[string]int64{}
	start := map[string]int64{}
	acc := map[string]sumCount{}
	for i := int64(0); i < records; i++ {
		e := winEvent(i)
		if !winKeep(e) {
			continue
		}
		s := e.Ts - e.Ts%1000
		k := fmt.Sprintf("T,%s,%d,%d", e.Key, s, s+1000)
		a := want[k]
		want[k] = sumCount{Sum: a.Sum + e.V, Count: a.Count + 1}
		// Records of a key arrive in time order here.
		if l, ok := last[e.Key]; ok && e.Ts > l+500 {
			want[fmt.Sprintf("S,%s,%d,%d", e.Key, start[e.Key], l+500)] = acc[e.Key]
			delete(acc, e.Key)
		}
		if _, ok := acc[e.Key]; !ok {
			start[e.Key] = e.Ts
		}
		a = acc[e.Key]
		acc[e.Key] = sumCount{Sum: a.Sum + e.V, Count: a.Count + 1}
		last[e.Key] = e.Ts
	}
	for key, a := range acc {
		want[fmt.Sprintf("S,%s,%d,%d", key, start[key], last[key]+500)] = a
	}
	return want
}

// TestCrashWindowsExactlyOnce kills a job with tumbling and session
// windows at 10 random moments and restores it each time: every window it
// emits must carry the value of an uninterrupted run (replays may repeat a
// window, never change it), and no window may be missing.
func TestCrashWindowsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs subprocesses for several seconds")
	}
	for i, backend := range []string{"memory", "pebble"} {
		t.Run(backend, func(t *testing.T) { crashWindows(t, backend, 2, uint64(424242+i)) })
	}
	// At parallelism 1 the windows are chained to the source's task (the
	// keyed exchange in front of them sends everything to one subtask).
	t.Run("memory-chained", func(t *testing.T) { crashWindows(t, "memory", 1, 424244) })
}

func crashWindows(t *testing.T, backend string, parallelism int, seed uint64) {
	ckpt, out := t.TempDir(), t.TempDir()
	h := &crashtest.Harness{
		CheckpointDir: ckpt,
		Kills:         10,
		MinDelay:      150 * time.Millisecond,
		MaxDelay:      600 * time.Millisecond,
		Seed:          seed,
		Deadline:      4 * time.Minute,
		Command: func(restore string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWindowsProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CLINK_CRASH_WIN_CKPT="+ckpt, "CLINK_CRASH_OUT="+out,
				"CLINK_CRASH_RESTORE="+restore, "CLINK_CRASH_BACKEND="+backend, fmt.Sprintf("CLINK_CRASH_PARALLELISM=%d", parallelism))
			return cmd
		},
	}
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Kills != 10 {
		t.Fatalf("job was killed %d times, want 10", res.Kills)
	}
	want := windowReference(winRecords(backend))
	got := map[string]sumCount{}
	files, _ := filepath.Glob(filepath.Join(out, "out-*.txt"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			parts := strings.Split(line, ",")
			if len(parts) != 6 || (parts[0] != "T" && parts[0] != "S") || len(parts[1]) != 3 {
				continue // cut by a kill
			}
			var nums [4]int64
			ok := true
			for i := range nums {
				n, err := strconv.ParseInt(parts[2+i], 10, 64)
				if err != nil {
					ok = false
					break
				}
				nums[i] = n
			}
			if !ok {
				continue
			}
			k := strings.Join(parts[:4], ",")
			v := sumCount{Sum: nums[2], Count: nums[3]}
			if prev, seen := got[k]; seen && prev != v {
				// A torn line can only shorten the last number.
				if prev.Count == v.Count {
					t.Errorf("window %s emitted as %+v and as %+v", k, prev, v)
				}
				v = sumCount{Sum: max(prev.Sum, v.Sum), Count: max(prev.Count, v.Count)}
			}
			got[k] = v
		}
	}
	bad := 0
	for k, w := range want {
		if got[k] != w && bad < 10 {
			t.Errorf("window %s = %+v, want %+v", k, got[k], w)
			bad++
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && bad < 10 {
			t.Errorf("unexpected window %s = %+v", k, got[k])
			bad++
		}
	}
	t.Logf("%d windows checked over %d runs", len(want), len(res.Runs))
}
