package clink_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/metrics"
)

type count struct {
	Key string
	N   int
}

func wordCountJob(t *testing.T, opts clink.Options, words []string) (*clink.Environment, *clink.CollectSink[count]) {
	t.Helper()
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	src := clink.FromSlice(env, "words", words)
	upper := clink.Map(src, "upper", strings.ToUpper)
	nonEmpty := clink.Filter(upper, "non_empty", func(s string) bool { return s != "" })
	counted := clink.Process(clink.KeyBy(nonEmpty, func(s string) string { return s }), "count",
		func(ctx *clink.KeyedContext[string, int], w string, out *clink.Collector[count]) error {
			n, _ := ctx.Value()
			n++
			ctx.SetValue(n)
			out.Collect(count{Key: w, N: n})
			return nil
		})
	sink := &clink.CollectSink[count]{}
	clink.SinkTo(counted, "collect", sink)
	return env, sink
}

func finalCounts(items []count) map[string]int {
	m := map[string]int{}
	for _, c := range items {
		m[c.Key] = max(m[c.Key], c.N)
	}
	return m
}

func TestWordCount(t *testing.T) {
	var words []string
	want := map[string]int{}
	for i := 0; i < 10000; i++ {
		w := fmt.Sprintf("w%d", i%37)
		if i%101 == 0 {
			w = ""
		} else {
			want[strings.ToUpper(w)]++
		}
		words = append(words, w)
	}
	for _, mode := range []clink.CheckpointMode{clink.Aligned, clink.Unaligned} {
		t.Run(mode.String(), func(t *testing.T) {
			reg := metrics.New()
			env, sink := wordCountJob(t, clink.Options{
				Parallelism: 2, CheckpointDir: t.TempDir(), CheckpointInterval: 5 * time.Millisecond,
				CheckpointMode: mode, BatchSize: 16, Metrics: reg,
			}, words)
			if err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := finalCounts(sink.Items())
			if len(sink.Items()) != 10000-100 {
				t.Errorf("sink got %d records, want %d", len(sink.Items()), 10000-100)
			}
			// Records in and out per operator, summed over subtasks.
			for _, c := range []struct {
				op      string
				in, out int64
			}{
				{"words", 0, 10000}, {"upper", 10000, 10000}, {"non_empty", 10000, 9900},
				{"count", 9900, 9900}, {"collect", 9900, 0},
			} {
				var in, out int64
				for sub := 0; sub < 2; sub++ {
					oc := reg.Operator(c.op, sub)
					in += oc.In.Load()
					out += oc.Out.Load()
				}
				if in != c.in || out != c.out {
					t.Errorf("operator %s: records in/out = %d/%d, want %d/%d", c.op, in, out, c.in, c.out)
				}
			}
			keys := make([]string, 0, len(want))
			for k := range want {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if got[k] != want[k] {
					t.Errorf("count of %s = %d, want %d", k, got[k], want[k])
				}
			}
		})
	}
}

func TestPanicInUserFunctionFailsTheJob(t *testing.T) {
	env, err := clink.NewEnvironment(clink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := clink.FromSlice(env, "nums", []int{1, 2, 3})
	m := clink.Map(src, "boom", func(v int) int {
		if v == 2 {
			panic("two is not allowed")
		}
		return v
	})
	clink.SinkTo(m, "sink", clink.SinkFunc(func(int) error { return nil }))
	err = env.Execute(context.Background())
	if err == nil || !strings.Contains(err.Error(), "two is not allowed") || !strings.Contains(err.Error(), "nums-0") {
		t.Fatalf("Execute = %v, want the panic as the error of task nums-0", err)
	}
}

func TestInvalidJobsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(env *clink.Environment)
		want  string
	}{
		{"duplicate name", func(env *clink.Environment) {
			a := clink.FromSlice(env, "src", []int{1})
			b := clink.Map(a, "src", func(v int) int { return v })
			clink.SinkTo(b, "sink", clink.SinkFunc(func(int) error { return nil }))
		}, `operator name "src" is used twice`},
		{"bad name", func(env *clink.Environment) {
			a := clink.FromSlice(env, "my source", []int{1})
			clink.SinkTo(a, "sink", clink.SinkFunc(func(int) error { return nil }))
		}, `operator name "my source"`},
		{"dangling output", func(env *clink.Environment) {
			clink.FromSlice(env, "src", []int{1})
		}, `output of operator "src" goes nowhere`},
		{"file source wider than 1", func(env *clink.Environment) {
			a := clink.FromLines(env, "lines", "/nonexistent").SetParallelism(2)
			clink.SinkTo(a, "sink", clink.SinkFunc(func(string) error { return nil }))
		}, `cannot run at parallelism 2`},
		{"missing file", func(env *clink.Environment) {
			a := clink.FromLines(env, "lines", "/nonexistent/input.txt")
			clink.SinkTo(a, "sink", clink.SinkFunc(func(string) error { return nil }))
		}, `/nonexistent/input.txt`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := clink.NewEnvironment(clink.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tc.build(env)
			err = env.Execute(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Execute = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := clink.NewEnvironment(clink.Options{Parallelism: 300, Restore: "latest"}); err == nil ||
		!strings.Contains(err.Error(), "exceeds max parallelism") || !strings.Contains(err.Error(), "restore needs a checkpoint directory") {
		t.Fatalf("NewEnvironment = %v, want both option errors", err)
	}
}

// item has unexported fields and a NaN: the default codec must carry both
// through unaligned in-flight capture and keyed state.
type item struct {
	Key   string
	count int
	ratio float64
}

func TestUnalignedCaptureKeepsUnexportedFieldsAndNaN(t *testing.T) {
	dir := t.TempDir()
	env, err := clink.NewEnvironment(clink.Options{
		Parallelism: 2, CheckpointDir: dir, CheckpointInterval: time.Millisecond, CheckpointMode: clink.Unaligned,
		BatchSize: 4, ChannelCapacity: 2, Retain: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	src := clink.FromGenerator(env, "items", clink.GeneratorOptions{Count: 20000}, func(i int64) item {
		return item{Key: fmt.Sprintf("k%d", i%10), count: 1, ratio: math.NaN()}
	})
	sums := clink.Process(clink.KeyBy(src, func(it item) string { return it.Key }), "sum",
		func(ctx *clink.KeyedContext[string, item], it item, out *clink.Collector[item]) error {
			acc, _ := ctx.Value()
			if it.count != 1 || !math.IsNaN(it.ratio) {
				return fmt.Errorf("record arrived as %+v", it)
			}
			acc.Key, acc.count, acc.ratio = it.Key, acc.count+it.count, it.ratio
			ctx.SetValue(acc)
			out.Collect(acc)
			return nil
		})
	slow := clink.Map(sums, "slow", func(it item) item {
		if it.count%50 == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		return it
	})
	sink := &clink.CollectSink[item]{}
	clink.SinkTo(slow, "sink", sink)
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Restore the first periodic checkpoint that holds in-flight records and
	// run the job to its end again: replayed records must arrive intact.
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := st.Completed()
	restored := false
	for i := 0; i < len(ids)-1 && !restored; i++ {
		for sub := 0; sub < 2; sub++ {
			snap, err := st.ReadTaskSnapshot(ids[i], fmt.Sprintf("sum-%d", sub))
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Operators[0].InFlight) == 0 {
				continue
			}
			copyDir := t.TempDir()
			alignCopyCheckpoint(t, st, ids[i], copyDir)
			env2, err := clink.NewEnvironment(clink.Options{Parallelism: 2, CheckpointDir: copyDir, Restore: "latest"})
			if err != nil {
				t.Fatal(err)
			}
			src := clink.FromGenerator(env2, "items", clink.GeneratorOptions{Count: 20000}, func(i int64) item {
				return item{Key: fmt.Sprintf("k%d", i%10), count: 1, ratio: math.NaN()}
			})
			sums := clink.Process(clink.KeyBy(src, func(it item) string { return it.Key }), "sum",
				func(ctx *clink.KeyedContext[string, item], it item, out *clink.Collector[item]) error {
					acc, _ := ctx.Value()
					if it.count != 1 || !math.IsNaN(it.ratio) || (acc.Key != "" && !math.IsNaN(acc.ratio)) {
						return fmt.Errorf("restored record %+v, state %+v", it, acc)
					}
					acc.Key, acc.count, acc.ratio = it.Key, acc.count+it.count, it.ratio
					ctx.SetValue(acc)
					out.Collect(acc)
					return nil
				})
			final := map[string]int{}
			var mu sync.Mutex
			clink.SinkTo(clink.Map(sums, "slow", func(it item) item { return it }), "sink", clink.SinkFunc(func(it item) error {
				mu.Lock()
				final[it.Key] = max(final[it.Key], it.count)
				mu.Unlock()
				return nil
			}))
			if err := env2.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(final) != 10 {
				t.Errorf("after restoring checkpoint %d, output holds %d keys, want 10", ids[i], len(final))
			}
			for k, n := range final {
				if n != 2000 {
					t.Errorf("after restoring checkpoint %d, key %s counts %d, want 2000", ids[i], k, n)
				}
			}
			restored = true
			break
		}
	}
	if !restored {
		t.Fatal("no periodic checkpoint held in-flight records; the test needs backpressure")
	}
}
