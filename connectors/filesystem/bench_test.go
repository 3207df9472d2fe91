package filesystem

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/clinkstream/clink"
)

// benchRecords is the length of the benchmark job: long enough for several
// 1 s checkpoints.
const benchRecords = 10_000_000

type benchRow struct {
	ID    int64
	Name  string
	Score float64
}

// plainSink writes the same csv as the file sink, one file per subtask,
// without two-phase commit: flushed at every barrier, never fsynced.
type plainSink struct {
	dir   string
	codec codec[benchRow]
}

func (s plainSink) Open(ctx clink.SinkContext) (clink.SinkWriter[benchRow], error) {
	path := filepath.Join(s.dir, fmt.Sprintf("plain-%d.csv", ctx.Subtask))
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &plainWriter{codec: s.codec, f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

type plainWriter struct {
	codec codec[benchRow]
	f     *os.File
	w     *bufio.Writer
	buf   []byte
}

func (p *plainWriter) Write(v benchRow) error {
	var err error
	if p.buf, err = p.codec.appendRecord(p.buf[:0], v); err != nil {
		return err
	}
	_, err = p.w.Write(p.buf)
	return err
}

func (p *plainWriter) Flush() error { return p.w.Flush() }

func (p *plainWriter) Close() error {
	if err := p.w.Flush(); err != nil {
		p.f.Close()
		return err
	}
	return p.f.Close()
}

// BenchmarkJobSink runs one job (generator → map → csv files, parallelism
// 2, checkpoints every second) writing through the exactly-once file sink
// and through a plain sink of the same format. The 2pc and plain
// sub-benchmarks report each one's records/s; paired runs the two
// alternately, so that load from other processes hits both alike, and
// reports the throughput of 2pc as a percentage of plain's.
//
//	go test -run '^$' -bench BenchmarkJobSink -benchtime 3x ./connectors/filesystem
func BenchmarkJobSink(b *testing.B) {
	c, err := newCodec[benchRow](CSV)
	if err != nil {
		b.Fatal(err)
	}
	for _, arm := range []string{"2pc", "plain"} {
		b.Run(arm, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += runBenchJob(b, arm, c)
			}
			b.ReportMetric(float64(benchRecords)*float64(b.N)/total.Seconds(), "records/s")
		})
	}
	b.Run("paired", func(b *testing.B) {
		var twoPC, plain time.Duration
		for i := 0; i < b.N; i++ {
			plain += runBenchJob(b, "plain", c)
			twoPC += runBenchJob(b, "2pc", c)
		}
		b.ReportMetric(100*plain.Seconds()/twoPC.Seconds(), "2pc/plain-%")
	})
}

// runBenchJob runs the benchmark job once into the sink arm names and
// returns how long it took.
func runBenchJob(b *testing.B, arm string, c codec[benchRow]) time.Duration {
	b.Helper()
	out, ckpt := b.TempDir(), b.TempDir()
	env, err := clink.NewEnvironment(clink.Options{
		Parallelism: 2, CheckpointDir: ckpt, CheckpointInterval: time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: benchRecords}, func(i int64) int64 { return i })
	rows := clink.Map(src, "row", func(i int64) benchRow {
		return benchRow{ID: i, Name: "name-" + strconv.FormatInt(i%1000, 10), Score: float64(i) / 7}
	})
	if arm == "2pc" {
		sink, err := NewSink[benchRow](out, CSV, SinkOptions{})
		if err != nil {
			b.Fatal(err)
		}
		clink.CommitTo(rows, "out", sink)
	} else {
		clink.SinkTo(rows, "out", clink.Sink[benchRow](plainSink{dir: out, codec: c}))
	}
	start := time.Now()
	if err := env.Execute(context.Background()); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	if err := os.RemoveAll(out); err != nil {
		b.Fatal(err)
	}
	return took
}
