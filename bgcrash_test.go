package clink_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connectors/filesystem"
)

// The counting crash job keys record i by the string of i mod countKeys
// and emits, per record, its key and how many records of the key it has
// seen so far. Its state is a string-keyed table of countKeys entries, as
// large as the memory backend restores in the background (a lookup waits
// for its key group), so every restore after the first second runs so.
const countKeys = 100_000

func countPlanFor() churnPlan {
	if raceEnabled {
		return churnPlan{records: 600_000, rate: 60_000, interval: time.Second, kills: 3, minDelay: 2 * time.Second, maxDelay: 3 * time.Second}
	}
	return churnPlan{records: 700_000, rate: 100_000, interval: 300 * time.Millisecond, kills: 4, minDelay: 1200 * time.Millisecond, maxDelay: 1600 * time.Millisecond}
}

// countRow is what the counting job commits: a key and its count.
type countRow struct {
	Key, Count int64
}

func countJob(opts clink.Options, outDir string) (*clink.Environment, error) {
	p := countPlanFor()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		return nil, err
	}
	rate := p.rate / float64(max(opts.Parallelism, 1)) // per subtask
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: p.records, RatePerSecond: rate},
		func(i int64) int64 { return i })
	keyed := clink.KeyBy(src, func(i int64) string { return "k" + strconv.FormatInt(i%countKeys, 10) })
	rows := clink.KeyedProcess(keyed, "count", clink.KeyedProcessFunction[string, int64, int64, countRow]{
		ProcessElement: func(ctx *clink.KeyedContext[string, int64], i int64, out *clink.Collector[countRow]) error {
			n, _ := ctx.Value()
			n++
			ctx.SetValue(n)
			out.Collect(countRow{Key: i % countKeys, Count: n})
			return nil
		},
	})
	sink, err := filesystem.NewSink[countRow](outDir, filesystem.CSV, filesystem.SinkOptions{})
	if err != nil {
		return nil, err
	}
	clink.CommitTo(rows, "out", sink)
	return env, nil
}

// TestCrashCountProcess is the job process of TestCrashCountExactlyOnce.
func TestCrashCountProcess(t *testing.T) {
	opts, out, ok := crashProcess(t, "CLINK_CRASH_COUNT_CKPT", countPlanFor().interval)
	if ok {
		env, err := countJob(opts, out)
		executeCrashJob(t, env, err)
	}
}

// TestCrashCountExactlyOnce kills the counting job at random moments and
// restores it each time, its state of 100,000 keys decoded in the
// background while records arrive: for every key the committed counts
// must be 1, 2, ... up to the records of the key, each once. A record
// that met its key before the restore had brought the key's count back
// would count from 1 again: a count committed twice.
func TestCrashCountExactlyOnce(t *testing.T) { eachParallelism(t, 88001, crashCount) }

func crashCount(t *testing.T, parallelism int, seed uint64) {
	p := countPlanFor()
	_, out, res := runCrash(t, "TestCrashCountProcess", "CLINK_CRASH_COUNT_CKPT", p, parallelism, seed)
	perKey := p.records / countKeys
	seen := make([][]int, countKeys)
	bad := committedPairs(t, out, func(file string, k, c int64) {
		if k < 0 || k >= countKeys || c < 1 || c > perKey {
			t.Errorf("%s: committed key %d and count %d, not a key and a count of 1..%d", file, k, c, perKey)
			return
		}
		if seen[k] == nil {
			seen[k] = make([]int, perKey+1)
		}
		seen[k][c]++
	})
	wrong := 0
	for k, counts := range seen {
		for c := int64(1); c <= perKey; c++ {
			n := 0
			if counts != nil {
				n = counts[c]
			}
			if n != 1 {
				if wrong++; wrong <= 10 {
					t.Errorf("key %d: count %d committed %d times", k, c, n)
				}
			}
		}
	}
	if wrong+bad > 0 {
		t.Fatalf("%d counts committed other than once, %d bad lines", wrong, bad)
	}
	t.Logf("%d keys × %d counts checked over %d runs", countKeys, perKey, len(res.Runs))
}
