package clink_test

import (
	"bufio"
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
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/internal/crashtest"
	"github.com/clinkstream/clink/state"
)

const (
	crashRecords = 240_000
	crashKeys    = 1000
	crashRate    = 15_000 // records per second per source subtask
)

// appendSink appends "key,count" lines to one file per subtask. It is not
// transactional: lines written after the last checkpoint are written again
// by the restored run, which the verdict below tolerates.
type appendSink struct{ dir string }

func (s appendSink) Open(ctx clink.SinkContext) (clink.SinkWriter[string], error) {
	f, err := os.OpenFile(filepath.Join(s.dir, fmt.Sprintf("out-%d.txt", ctx.Subtask)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &appendWriter{f: f, w: bufio.NewWriter(f)}, nil
}

type appendWriter struct {
	f *os.File
	w *bufio.Writer
}

func (a *appendWriter) Write(v string) error {
	_, err := a.w.WriteString(v)
	if err == nil && a.w.Buffered() > 32<<10 {
		err = a.w.Flush()
	}
	return err
}

func (a *appendWriter) Flush() error { return a.w.Flush() }

func (a *appendWriter) Close() error {
	if err := a.w.Flush(); err != nil {
		a.f.Close()
		return err
	}
	return a.f.Close()
}

// countingJob is the job the crash test kills: a rate-limited generator at
// parallelism 2, keyed by i % crashKeys, counting per key.
func countingJob(opts clink.Options, outDir string) (*clink.Environment, error) {
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		return nil, err
	}
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: crashRecords, RatePerSecond: crashRate},
		func(i int64) int64 { return i })
	keyed := clink.KeyBy(src, func(i int64) string { return fmt.Sprintf("k%04d", i%crashKeys) })
	counts := clink.Process(keyed, "count", func(ctx *clink.KeyedContext[string, int64], _ int64, out *clink.Collector[string]) error {
		n, _ := ctx.Value()
		n++
		ctx.SetValue(n)
		out.Collect(ctx.Key() + "," + strconv.FormatInt(n, 10) + "\n")
		return nil
	})
	clink.SinkTo(counts, "out", clink.Sink[string](appendSink{dir: outDir}))
	return env, nil
}

// TestCrashJobProcess is the job process of TestCrashExactlyOnceState; it
// runs only when the crash test starts it.
func TestCrashJobProcess(t *testing.T) {
	dir := os.Getenv("CLINK_CRASH_CKPT")
	if dir == "" {
		t.Skip("run by TestCrashExactlyOnceState")
	}
	mode, err := clink.ParseCheckpointMode(os.Getenv("CLINK_CRASH_MODE"))
	if err != nil {
		t.Fatal(err)
	}
	env, err := countingJob(clink.Options{
		Parallelism:        2,
		CheckpointDir:      dir,
		CheckpointInterval: 50 * time.Millisecond,
		CheckpointMode:     mode,
		Restore:            os.Getenv("CLINK_CRASH_RESTORE"),
		BatchSize:          64,
	}, os.Getenv("CLINK_CRASH_OUT"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCrashExactlyOnceState kills the counting job with SIGKILL at 20
// random moments, restores it from its latest checkpoint each time, and
// checks that its final keyed state and output equal an uninterrupted run's.
func TestCrashExactlyOnceState(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs subprocesses for several seconds")
	}
	for i, mode := range []string{"aligned", "unaligned"} {
		t.Run(mode, func(t *testing.T) {
			ckpt, out := t.TempDir(), t.TempDir()
			h := &crashtest.Harness{
				CheckpointDir: ckpt,
				Kills:         20,
				MinDelay:      80 * time.Millisecond,
				MaxDelay:      450 * time.Millisecond,
				Seed:          uint64(20261129 + i),
				Deadline:      4 * time.Minute,
				Command: func(restore string) *exec.Cmd {
					cmd := exec.Command(os.Args[0], "-test.run=^TestCrashJobProcess$", "-test.count=1")
					cmd.Env = append(os.Environ(),
						"CLINK_CRASH_CKPT="+ckpt, "CLINK_CRASH_OUT="+out,
						"CLINK_CRASH_MODE="+mode, "CLINK_CRASH_RESTORE="+restore)
					return cmd
				},
			}
			res, err := h.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Kills != 20 {
				t.Fatalf("job was killed %d times, want 20 (it finished too early: make it slower)", res.Kills)
			}
			restored := 0
			for _, r := range res.Runs {
				if r.Restore != "" {
					restored++
				}
			}
			if restored < 10 {
				t.Errorf("only %d of %d runs restored from a checkpoint", restored, len(res.Runs))
			}
			want := int64(crashRecords / crashKeys)
			checkFinalState(t, ckpt, want)
			checkOutput(t, out, want)
		})
	}
}

// checkFinalState decodes the count operator's keyed state in the newest
// completed checkpoint (the terminal one) and checks every key's count.
func checkFinalState(t *testing.T, dir string, want int64) {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Resolve("latest")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for sub := 0; sub < 2; sub++ {
		snap, err := st.ReadTaskSnapshot(id, fmt.Sprintf("count-%d", sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range snap.Operators {
			if op.UID != "count" {
				continue
			}
			kgs := snapshotKeyGroups(t, st, op)
			groups := make([]state.KeyGroupData, len(kgs))
			for i, g := range kgs {
				groups[i] = state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data}
			}
			values, err := state.ReadValues[string, int64](groups, "value", 128)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range values {
				got[k] += v
			}
		}
	}
	if len(got) != crashKeys {
		t.Errorf("final checkpoint %d holds %d keys, want %d", id, len(got), crashKeys)
	}
	bad := 0
	for k, v := range got {
		if v != want && bad < 10 {
			t.Errorf("final state of %s = %d, want %d", k, v, want)
			bad++
		}
	}
}

// checkOutput checks the sink's lines: replays repeat lines, but the count
// sequence of every key must reach exactly want and never exceed it.
func checkOutput(t *testing.T, dir string, want int64) {
	t.Helper()
	maxes := map[string]int64{}
	files, _ := filepath.Glob(filepath.Join(dir, "out-*.txt"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			// A kill can cut a line; the next run's first line then
			// continues it, giving a key or count that does not parse.
			k, v, ok := strings.Cut(line, ",")
			if !ok || len(k) != 5 || k[0] != 'k' {
				continue
			}
			if _, err := strconv.Atoi(k[1:]); err != nil {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			maxes[k] = max(maxes[k], n)
		}
	}
	if len(maxes) != crashKeys {
		t.Errorf("output has %d keys, want %d", len(maxes), crashKeys)
	}
	bad := 0
	for k, v := range maxes {
		if v != want && bad < 10 {
			t.Errorf("output count of %s reaches %d, want %d", k, v, want)
			bad++
		}
	}
}
