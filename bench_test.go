package clink_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/metrics"
)

// cpuTime returns the process's user+system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPerCore reports records per wall second and per CPU second.
func reportPerCore(b *testing.B, records int64, wall, cpu time.Duration) {
	b.ReportMetric(float64(records)/wall.Seconds(), "records/s")
	b.ReportMetric(float64(records)/cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(0, "ns/op")
}

// countSink counts odd records, so the compiler cannot drop the pipeline.
type countSink struct{ n int64 }

func (countSink) Open(clink.SinkContext) (clink.SinkWriter[int64], error) { return &countSink{}, nil }
func (c *countSink) Close() error                                         { return nil }
func (c *countSink) Write(v int64) error {
	c.n += v & 1
	return nil
}

func runBench(b *testing.B, records int64, build func(env *clink.Environment)) {
	b.Helper()
	b.ReportAllocs()
	var wall, cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		env, err := clink.NewEnvironment(benchOpts(b))
		if err != nil {
			b.Fatal(err)
		}
		build(env)
		b.StartTimer()
		c0, t0 := cpuTime(b), time.Now()
		if err := env.Execute(context.Background()); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(t0)
		cpu += cpuTime(b) - c0
	}
	reportPerCore(b, records*int64(b.N), wall, cpu)
}

var benchCheckpointInterval time.Duration

func benchOpts(b *testing.B) clink.Options {
	o := clink.Options{Parallelism: 1, BatchSize: 1024}
	if benchCheckpointInterval > 0 {
		o.CheckpointDir = b.TempDir()
		o.CheckpointInterval = benchCheckpointInterval
	}
	return o
}

// BenchmarkChained is source -> map -> filter -> sink, chained into one task.
func BenchmarkChained(b *testing.B) {
	for _, ckpt := range []time.Duration{0, time.Second} {
		b.Run(fmt.Sprintf("checkpoint=%v", ckpt), func(b *testing.B) {
			benchCheckpointInterval = ckpt
			defer func() { benchCheckpointInterval = 0 }()
			const n = 400_000_000
			runBench(b, n, func(env *clink.Environment) {
				src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: n}, func(i int64) int64 { return i })
				m := clink.Map(src, "map", func(v int64) int64 { return v * 3 })
				f := clink.Filter(m, "filter", func(v int64) bool { return v&7 != 1 })
				clink.SinkTo(f, "sink", clink.Sink[int64](&countSink{}))
			})
		})
	}
}

// BenchmarkKeyedCount is source -> keyBy -> count per key at parallelism 2:
// a hash exchange between tasks and a value-state update per record.
func BenchmarkKeyedCount(b *testing.B) {
	for _, ckpt := range []time.Duration{0, time.Second} {
		b.Run(fmt.Sprintf("checkpoint=%v", ckpt), func(b *testing.B) {
			benchCheckpointInterval = ckpt
			defer func() { benchCheckpointInterval = 0 }()
			const n = 100_000_000
			runBench(b, n, func(env *clink.Environment) {
				src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: n}, func(i int64) int64 { return i }).SetParallelism(2)
				counted := clink.Process(clink.KeyBy(src, func(v int64) int64 { return v % 10_000 }), "count",
					func(ctx *clink.KeyedContext[int64, int64], v int64, out *clink.Collector[int64]) error {
						c, _ := ctx.Value()
						ctx.SetValue(c + 1)
						return nil
					}).SetParallelism(2)
				clink.SinkTo(counted, "sink", clink.Sink[int64](&countSink{}))
			})
		})
	}
}

// BenchmarkCheckpointKeyedState measures the checkpoint of 1M and 10M
// small keyed values (an int64 key and an int64 count each) at parallelism
// 1, with fsync on unless CLINK_STATE_FSYNC says otherwise: the job counts
// that many distinct keys, and its terminal checkpoint snapshots all of
// them (trigger to COMPLETED marker). ckpt-MB is the checkpoint's full size
// (its snapshot files and the shared files they list), ckpt-new-MB what it
// newly wrote; for this single checkpoint the two agree.
func BenchmarkCheckpointKeyedState(b *testing.B) {
	for _, keys := range []int64{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("keys=%dM", keys/1_000_000), func(b *testing.B) {
			var total time.Duration
			var bytes, full int64
			for i := 0; i < b.N; i++ {
				reg := metrics.New()
				env, err := clink.NewEnvironment(clink.Options{CheckpointDir: b.TempDir(), Metrics: reg, BatchSize: 1024})
				if err != nil {
					b.Fatal(err)
				}
				src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: keys}, func(i int64) int64 { return i })
				counted := clink.Process(clink.KeyBy(src, func(v int64) int64 { return v }), "count",
					func(ctx *clink.KeyedContext[int64, int64], v int64, out *clink.Collector[int64]) error {
						c, _ := ctx.Value()
						ctx.SetValue(c + 1)
						return nil
					})
				clink.SinkTo(counted, "sink", clink.Sink[int64](&countSink{}))
				if err := env.Execute(context.Background()); err != nil {
					b.Fatal(err)
				}
				sum := reg.Summary()
				if sum.CheckpointsCompleted != 1 {
					b.Fatalf("%d checkpoints completed, want the terminal one only", sum.CheckpointsCompleted)
				}
				total += sum.LastCheckpointDuration
				bytes += sum.LastCheckpointBytes
				full += sum.LastCheckpointFullBytes
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ckpt-ms")
			b.ReportMetric(float64(full)/float64(b.N)/1e6, "ckpt-MB")
			b.ReportMetric(float64(bytes)/float64(b.N)/1e6, "ckpt-new-MB")
			b.ReportMetric(0, "ns/op")
		})
	}
}
