package sql_test

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/clinkstream/clink/sql"
)

// cpuTime returns the process's user + system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchScript runs script (with %d for the number of rows) over b.N
// rows at parallelism 1 with a checkpoint every second, and reports rows
// per CPU-second of the whole process (source, operators, sink and the
// runtime) beside the wall-clock figures.
func benchScript(b *testing.B, script string) {
	b.Helper()
	text := fmt.Sprintf(script, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	err := sql.Run(context.Background(), text, sql.Options{
		Parallelism: 1, CheckpointDir: b.TempDir(), CheckpointInterval: time.Second,
		Stdout: io.Discard, Stderr: io.Discard,
	})
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "rows/cpu-s")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkFilterProjection: datagen → WHERE + computed columns →
// blackhole, all chained into the source's task.
func BenchmarkFilterProjection(b *testing.B) {
	benchScript(b, `
CREATE TABLE src (id BIGINT, price BIGINT, channel STRING) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000000',
  'fields.price.min' = '1', 'fields.price.max' = '100000', 'fields.channel.length' = '8');
CREATE TABLE out (id BIGINT, euros DECIMAL(23, 3), channel STRING) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT id, price * 0.908, UPPER(channel) FROM src WHERE price > 10;
`)
}

// BenchmarkTumbleCount: datagen with an event time → TUMBLE(1 s) COUNT(*)
// per key (1000 keys) → blackhole.
func BenchmarkTumbleCount(b *testing.B) {
	benchScript(b, `
CREATE TABLE src (id BIGINT, k BIGINT, ts AS TO_TIMESTAMP_LTZ(id, 3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000000',
  'fields.k.min' = '1', 'fields.k.max' = '1000');
CREATE TABLE out (k BIGINT, c BIGINT, ws TIMESTAMP(3)) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT k, COUNT(*), window_start FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '1' SECOND))
GROUP BY k, window_start, window_end;
`)
}

// BenchmarkFilterProjectColumns: datagen → WHERE on a column → two of its
// columns → blackhole: the engine's own cost per row, with the least
// expression work.
func BenchmarkFilterProjectColumns(b *testing.B) {
	benchScript(b, `
CREATE TABLE src (id BIGINT, price BIGINT) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000000',
  'fields.price.min' = '1', 'fields.price.max' = '100000');
CREATE TABLE out (id BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT id, price FROM src WHERE price > 10;
`)
}

// BenchmarkFilterProjectSwap: as BenchmarkFilterProjectColumns with the two
// columns swapped, so that the projection moves values (the output is not
// the input row unchanged).
func BenchmarkFilterProjectSwap(b *testing.B) {
	benchScript(b, `
CREATE TABLE src (id BIGINT, price BIGINT) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000000',
  'fields.price.min' = '1', 'fields.price.max' = '100000');
CREATE TABLE out (price BIGINT, id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT price, id FROM src WHERE price > 10;
`)
}

// BenchmarkGroupCountDistinct: datagen → GROUP BY k (10 keys) with
// COUNT(*), SUM and COUNT(DISTINCT) of a value with many distinct values →
// blackhole: the updating aggregate with its accumulators kept live in
// state (a distinct set grows to hundreds of thousands of values).
func BenchmarkGroupCountDistinct(b *testing.B) {
	benchScript(b, `
CREATE TABLE src (k BIGINT, u BIGINT) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d',
  'fields.k.min' = '1', 'fields.k.max' = '10', 'fields.u.min' = '1', 'fields.u.max' = '10000000');
CREATE TABLE out (k BIGINT, c BIGINT, s BIGINT, d BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT k, COUNT(*), SUM(u), COUNT(DISTINCT u) FROM src GROUP BY k;
`)
}

// BenchmarkTumbleCountSparse: as BenchmarkTumbleCount with 100000 keys
// and 1-minute windows, so that a key has one or two windows open at a time
// (about one row per key and window).
func BenchmarkTumbleCountSparse(b *testing.B) {
	benchScript(b, `
CREATE TABLE src (id BIGINT, k BIGINT, ts AS TO_TIMESTAMP_LTZ(id, 3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000000',
  'fields.k.min' = '1', 'fields.k.max' = '100000');
CREATE TABLE out (k BIGINT, c BIGINT, ws TIMESTAMP(3)) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT k, COUNT(*), window_start FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY k, window_start, window_end;
`)
}

// BenchmarkHopCountSum: datagen → HOP(1 s slide, 5 s size) COUNT(*) and
// SUM per key (1000 keys) → blackhole: five windows per row.
func BenchmarkHopCountSum(b *testing.B) {
	benchScript(b, `
CREATE TABLE src (id BIGINT, k BIGINT, ts AS TO_TIMESTAMP_LTZ(id, 3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (
  'connector' = 'datagen', 'rows-per-second' = '0', 'number-of-rows' = '%d',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000000',
  'fields.k.min' = '1', 'fields.k.max' = '1000');
CREATE TABLE out (k BIGINT, c BIGINT, s BIGINT, ws TIMESTAMP(3)) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT k, COUNT(*), SUM(id), window_start FROM TABLE(HOP(TABLE src, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' SECOND))
GROUP BY k, window_start, window_end;
`)
}
