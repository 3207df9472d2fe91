package clink_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connectors/filesystem"
)

// The churning crash job keys record i by i, keeps a value for it and
// emits that value once the watermark passes the record's time by
// churnLife ms, dropping the key: every key lives a small part of a
// checkpoint interval, as a join's rows that no row to come can meet do,
// so the memory backend's tables stop recording changes within an
// interval and the checkpoints write the state whole.
const churnLife = 200

// churnPlan is the job's size and pacing: under the race detector the job
// runs several times slower, so its checkpoints are further apart (an
// interval must still insert the 16,384 keys that show the churn) and so
// are the kills.
type churnPlan struct {
	records            int64
	rate               float64 // records per second of the job
	interval           time.Duration
	kills              int
	minDelay, maxDelay time.Duration
}

func churnPlanFor() churnPlan {
	if raceEnabled {
		return churnPlan{records: 600_000, rate: 60_000, interval: time.Second, kills: 3, minDelay: 1500 * time.Millisecond, maxDelay: 3 * time.Second}
	}
	return churnPlan{records: 700_000, rate: 100_000, interval: 300 * time.Millisecond, kills: 4, minDelay: 800 * time.Millisecond, maxDelay: 1600 * time.Millisecond}
}

// churnValue is the value record i keeps.
func churnValue(i int64) int64 { return i*7919%1_000_003 + 1 }

func churnJob(opts clink.Options, outDir string) (*clink.Environment, error) {
	p := churnPlanFor()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		return nil, err
	}
	rate := p.rate / float64(max(opts.Parallelism, 1)) // per subtask
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: p.records, RatePerSecond: rate},
		func(i int64) int64 { return i })
	timed := clink.AssignTimestamps(src, "ts", func(i int64) int64 { return i }, 50*time.Millisecond)
	keyed := clink.KeyBy(timed, func(i int64) int64 { return i })
	rows := clink.KeyedProcess(keyed, "churn", clink.KeyedProcessFunction[int64, int64, int64, churnRow]{
		ProcessElement: func(ctx *clink.KeyedContext[int64, int64], i int64, _ *clink.Collector[churnRow]) error {
			if v, ok := ctx.Value(); ok {
				return fmt.Errorf("key %d already holds %d", i, v)
			}
			ctx.SetValue(churnValue(i))
			ctx.RegisterEventTimeTimer(i + churnLife)
			return nil
		},
		OnTimer: func(ctx *clink.KeyedContext[int64, int64], ts int64, _ clink.TimeDomain, out *clink.Collector[churnRow]) error {
			v, ok := ctx.Value()
			if !ok {
				return fmt.Errorf("key %d lost its value before its timer at %d", ctx.Key(), ts)
			}
			out.Collect(churnRow{Key: ctx.Key(), Value: v})
			ctx.Clear()
			return nil
		},
	})
	sink, err := filesystem.NewSink[churnRow](outDir, filesystem.CSV, filesystem.SinkOptions{})
	if err != nil {
		return nil, err
	}
	clink.CommitTo(rows, "out", sink)
	return env, nil
}

// churnRow is what the churning job commits: a key and its value.
type churnRow struct {
	Key, Value int64
}

// TestCrashChurnProcess is the job process of TestCrashChurnExactlyOnce.
func TestCrashChurnProcess(t *testing.T) {
	opts, out, ok := crashProcess(t, "CLINK_CRASH_CHURN_CKPT", churnPlanFor().interval)
	if ok {
		opts.WatermarkInterval = 20 * time.Millisecond
		env, err := churnJob(opts, out)
		executeCrashJob(t, env, err)
	}
}

// TestCrashChurnExactlyOnce kills the churning job at random moments and
// restores it each time: the committed files must hold every key exactly
// once with its value, and no incarnation may find a key's value gone
// before its timer (the job fails then). Without the race detector the job inserts enough keys per
// interval for its checkpoints to go whole, which the shared directory
// shows: a base that a checkpoint wrote of its own.
func TestCrashChurnExactlyOnce(t *testing.T) { eachParallelism(t, 77001, crashChurn) }

func crashChurn(t *testing.T, parallelism int, seed uint64) {
	p := churnPlanFor()
	ckpt, out, res := runCrash(t, "TestCrashChurnProcess", "CLINK_CRASH_CHURN_CKPT", p, parallelism, seed)
	// The committed files: every key exactly once, with its value. Rows
	// emitted after the last checkpoint of a killed run were never
	// committed, so a restore that lost keys alive at its checkpoint
	// leaves them missing here.
	seen := make([]int, p.records)
	bad := committedPairs(t, out, func(file string, k, v int64) {
		if k < 0 || k >= p.records || v != churnValue(k) {
			t.Errorf("%s: committed key %d and value %d, not a key and its value", file, k, v)
			return
		}
		seen[k]++
	})
	lost, dup := 0, 0
	for k, n := range seen {
		switch {
		case n == 0:
			if lost++; lost <= 5 {
				t.Errorf("key %d is missing", k)
			}
		case n > 1:
			if dup++; dup <= 5 {
				t.Errorf("key %d is committed %d times", k, n)
			}
		}
	}
	if lost+dup+bad > 0 {
		t.Fatalf("%d keys: %d lost, %d duplicated; %d bad lines", p.records, lost, dup, bad)
	}
	if !raceEnabled {
		bases, _ := filepath.Glob(filepath.Join(ckpt, "shared", "*.base"))
		whole := 0
		for _, b := range bases {
			if !strings.HasSuffix(b, ".merged.base") {
				whole++
			}
		}
		if whole == 0 {
			t.Errorf("no checkpoint wrote the churning state whole (shared bases: %v)", bases)
		}
	}
	t.Logf("%d keys checked over %d runs", p.records, len(res.Runs))
}
