package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clinkapi "github.com/clinkstream/clink"
)

// sinkCost is the time the --backpressure sink spends per record.
const sinkCost = 200 * time.Microsecond

// defaultBackpressureDuration is --duration under --backpressure when not
// given.
const defaultBackpressureDuration = 10 * time.Second

// slowSink is the sink of --backpressure: it takes sinkCost per record
// on average. It sleeps until a deadline that moves by sinkCost per
// record, so a sleep that overshoots is made up by the next records
// instead of slowing the sink further; at most a millisecond of credit
// is kept after the sink went idle. As an io.Writer it takes one record
// per Write (the print connector writes one line per row).
type slowSink struct {
	records atomic.Int64
	mu      struct {
		sync.Mutex
		next time.Time // when the records taken so far are paid for
	}
}

// record takes one record.
func (s *slowSink) record() error {
	s.records.Add(1)
	s.mu.Lock()
	now := time.Now()
	s.mu.next = later(s.mu.next, now.Add(-time.Millisecond)).Add(sinkCost)
	d := s.mu.next.Sub(now)
	s.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Write takes one printed row.
func (s *slowSink) Write(p []byte) (int, error) {
	return len(p), s.record()
}

// blackholeWith is how the Nexmark query files declare their sinks.
const blackholeWith = "'connector' = 'blackhole'"

// slowSinks turns the script's blackhole sinks into print sinks of
// parallelism 1 (behind a round-robin exchange) whose output is the slow
// sink.
func slowSinks(query, script string) (string, error) {
	if !strings.Contains(script, blackholeWith) {
		return "", fmt.Errorf("--backpressure replaces the query's blackhole sinks, and Nexmark %s writes to none", query)
	}
	return strings.ReplaceAll(script, blackholeWith, "'connector' = 'print', 'sink.parallelism' = '1'"), nil
}

// backpressureRun is one mode's figures under --backpressure.
type backpressureRun struct {
	Events      int64   `json:"events"`
	Checkpoints int64   `json:"checkpoints"`
	CkptP50Ms   float64 `json:"ckpt_p50_ms"`
	CkptP99Ms   float64 `json:"ckpt_p99_ms"`
	CkptMaxMs   float64 `json:"ckpt_max_ms"`
	Records     int64   `json:"records"`
	WallS       float64 `json:"wall_s"`
	RecordsPerS float64 `json:"records_per_s"`
	// CkptSlowest is where the slowest checkpoint's time went.
	CkptSlowest *checkpointReport `json:"ckpt_slowest,omitempty"`
}

// backpressureResult is what clink bench nexmark --backpressure reports;
// the JSON keys are a contract for scripts.
type backpressureResult struct {
	Query           string          `json:"query"`
	DurationS       float64         `json:"duration_s"`
	Parallelism     int             `json:"parallelism"`
	SinkUsPerRecord float64         `json:"sink_us_per_record"`
	Aligned         backpressureRun `json:"aligned"`
	Unaligned       backpressureRun `json:"unaligned"`
}

func (r *backpressureResult) print(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "query        %s at parallelism %d, into one sink subtask taking %.0f µs per record\n", r.Query, r.Parallelism, r.SinkUsPerRecord)
	fmt.Fprintf(&b, "%-10s %9s %11s %9s %9s %9s %9s %8s %9s\n", "mode", "events", "checkpoints", "p50 ms", "p99 ms", "max ms", "records", "wall s", "records/s")
	for _, m := range []struct {
		name string
		run  *backpressureRun
	}{{"aligned", &r.Aligned}, {"unaligned", &r.Unaligned}} {
		fmt.Fprintf(&b, "%-10s %9d %11d %9.1f %9.1f %9.1f %9d %8.3f %9.0f\n", m.name, m.run.Events, m.run.Checkpoints, m.run.CkptP50Ms, m.run.CkptP99Ms, m.run.CkptMaxMs, m.run.Records, m.run.WallS, m.run.RecordsPerS)
	}
	for _, m := range []struct {
		name string
		run  *backpressureRun
	}{{"aligned", &r.Aligned}, {"unaligned", &r.Unaligned}} {
		if m.run.CkptSlowest != nil {
			fmt.Fprintf(&b, "slowest %s checkpoint: %s\n", m.name, m.run.CkptSlowest)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// runBackpressureBench runs the job with aligned and then with unaligned
// checkpoints into a fresh slow sink each time.
func runBackpressureBench(ctx context.Context, o benchOptions) (*backpressureResult, error) {
	res := &backpressureResult{Query: o.query, DurationS: o.duration.Seconds(), Parallelism: o.parallelism, SinkUsPerRecord: float64(sinkCost) / float64(time.Microsecond)}
	for _, m := range []struct {
		mode clinkapi.CheckpointMode
		run  *backpressureRun
	}{{clinkapi.Aligned, &res.Aligned}, {clinkapi.Unaligned, &res.Unaligned}} {
		run := o
		run.mode, run.slow = m.mode, &slowSink{}
		r, err := runNexmarkBench(ctx, run)
		if err != nil {
			return nil, fmt.Errorf("%s checkpoints: %w", m.mode, err)
		}
		records := run.slow.records.Load()
		*m.run = backpressureRun{
			Events:      r.Events,
			Checkpoints: r.Checkpoints,
			CkptP50Ms:   r.CkptP50Ms,
			CkptP99Ms:   r.CkptP99Ms,
			CkptMaxMs:   percentileMs(r.durations, 1),
			Records:     records,
			WallS:       r.WallS,
			RecordsPerS: float64(records) / r.WallS,
			CkptSlowest: r.CkptSlowest,
		}
	}
	return res, nil
}
