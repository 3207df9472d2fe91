package pebble_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	pebblelib "github.com/cockroachdb/pebble/v2"

	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
	"github.com/clinkstream/clink/state/statetest"
)

var (
	entryCache = flag.Int64("pebble.cache", 0, "CacheBytes of the benchmarks' backends (0: the default)")
	blockCache = flag.Int64("pebble.block-cache", 0, "BlockCacheBytes of the benchmarks' backends (0: the default)")
	l0         = flag.Int("pebble.l0", 0, "L0CompactionThreshold of the benchmarks' backends (0: the backend's)")
)

// benchOptions returns the options the flags ask for.
func benchOptions(b *testing.B) pebble.Options {
	opts := pebble.Options{Dir: b.TempDir(), CacheBytes: *entryCache, BlockCacheBytes: *blockCache}
	if *l0 > 0 {
		opts.Tune = func(o *pebblelib.Options) {
			o.L0CompactionThreshold = *l0
			o.L0StopWritesThreshold = 4 * *l0
		}
	}
	return opts
}

var ckptRounds = flag.Int("pebble.rounds", 10, "checkpoints of BenchmarkPebbleIncrementalCheckpoint after the full one")

var ckptKeys = flag.Int("pebble.ckpt-keys", 1_000_000,
	"keys of BenchmarkPebbleIncrementalCheckpoint (the issue's full scale is 10000000)")

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadValues puts 0 for keys 0..n-1 and captures, so that they are in
// Pebble's files, not only in its memtable.
func loadValues(b *testing.B, be *pebble.Backend, n int) *state.ValueState[int64, int64] {
	v, err := state.NewValue(be, "count", state.CodecFor[int64](), state.CodecFor[int64]())
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		v.Put(int64(i), 0)
	}
	c, err := be.Capture()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.(*pebble.Capture).Discard(); err != nil {
		b.Fatal(err)
	}
	return v
}

// BenchmarkPebbleValueUpdate is a keyed count: a read-modify-write of a
// ValueState[int64, int64] per update, of keys drawn uniformly from a key
// space of the given size, after one pass over it (caches warm). A
// backend alone in its process gets a 256 MiB entry cache by default,
// which holds both key spaces; -pebble.cache=67108864 (a share of 16
// backends) leaves about half of the 1M keys to be read from Pebble.
func BenchmarkPebbleValueUpdate(b *testing.B) {
	const maxP = 128
	for _, keys := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			be := openBackend(b, benchOptions(b), full(maxP), maxP)
			v := loadValues(b, be, keys)
			r := rand.New(rand.NewPCG(7, 8))
			seq := make([]int64, 1<<20)
			for i := range seq {
				seq[i] = int64(r.IntN(keys))
			}
			for i := range keys {
				v.Get(int64(i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0, t0 := cpuTime(b), time.Now()
			for i := 0; i < b.N; i++ {
				k := seq[i&(len(seq)-1)]
				c, _ := v.Get(k)
				v.Put(k, c+1)
			}
			wall, cpu := time.Since(t0), cpuTime(b)-c0
			b.ReportMetric(float64(b.N)/wall.Seconds(), "updates/s")
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "updates/cpu-s")
		})
	}
}

// settle waits until the backend's DB has run no compaction for half a
// second (Pebble may estimate a compaction debt it never schedules).
func settle(b *testing.B, be *pebble.Backend) {
	idle := 0
	for deadline := time.Now().Add(2 * time.Minute); idle < 50; {
		if time.Now().After(deadline) {
			b.Fatal("compactions did not settle in 2 minutes")
		}
		if be.Metrics().Compact.NumInProgress == 0 {
			idle++
		} else {
			idle = 0
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkPebbleIncrementalCheckpoint measures checkpoints of
// -pebble.ckpt-keys keys, each after 1% of them changed (spread
// uniformly): the capture on the task goroutine, the whole checkpoint
// (capture and PersistFiles into a local SharedFiles), and the bytes
// uploaded, beside those of the full checkpoint before them (taken once
// the loaded DB's compactions have settled). The rounds go on without
// waiting, so that what compactions of the changes rewrite is counted.
func BenchmarkPebbleIncrementalCheckpoint(b *testing.B) {
	const maxP = 128
	n, rounds := *ckptKeys, *ckptRounds
	var capture, total, worst time.Duration
	var fullBytes, incrBytes, inlineBytes, maxIncr int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		be := pebble.New(benchOptions(b))
		if err := be.Open(full(maxP), maxP); err != nil {
			b.Fatal(err)
		}
		sf := newDirShared(b)
		v := loadValues(b, be, n)
		settle(b, be)
		statetest.PersistFiles(b, be, sf)
		_, before := sf.counts()
		fullBytes += before
		r := rand.New(rand.NewPCG(uint64(i), 9))
		for range rounds {
			for range n / 100 {
				k := int64(r.IntN(n))
				c, _ := v.Get(k)
				v.Put(k, c+1)
			}
			b.StartTimer()
			t0 := time.Now()
			c, err := be.Capture()
			if err != nil {
				b.Fatal(err)
			}
			capture += time.Since(t0)
			fs, err := c.(state.FileCaptured).PersistFiles(sf)
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			total += d
			worst = max(worst, d)
			b.StopTimer()
			_, after := sf.counts()
			incrBytes += after - before
			maxIncr = max(maxIncr, after-before)
			before = after
			inlineBytes += int64(inline(fs))
		}
		if err := be.Close(); err != nil {
			b.Fatal(err)
		}
	}
	ckpts := float64(b.N * rounds)
	b.ReportMetric(float64(capture.Milliseconds())/ckpts, "capture-ms")
	b.ReportMetric(float64(total.Milliseconds())/ckpts, "ckpt-ms")
	b.ReportMetric(float64(worst.Milliseconds()), "max-ckpt-ms")
	b.ReportMetric(float64(incrBytes)/ckpts/1e6, "upload-MB")
	b.ReportMetric(float64(maxIncr)/1e6, "max-upload-MB")
	b.ReportMetric(float64(inlineBytes)/ckpts/1e6, "inline-MB")
	b.ReportMetric(float64(fullBytes)/float64(b.N)/1e6, "full-MB")
	b.ReportMetric(0, "ns/op")
}
