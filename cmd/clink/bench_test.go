package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clinkapi "github.com/clinkstream/clink"
	"github.com/clinkstream/clink/sql"
)

func TestBenchNexmarkFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		// q6 does not plan; the error names the query file's line.
		{[]string{"bench", "nexmark", "--query", "q6", "--events", "10"}, "planning Nexmark q6: OVER aggregates take an insert-only input, but the input of AVG(...) OVER is updating (it has retractions) at q6.sql line 16, column 5"},
		{[]string{"bench", "nexmark", "--query", "q23"}, `unknown query "q23": want gen or one of q0..q22`},
		{[]string{"bench", "nexmark", "--query", ""}, `unknown query ""`},
		{[]string{"bench", "nexmark", "--events", "0"}, "--events must be at least 1, got 0"},
		{[]string{"bench", "nexmark", "--events", "10", "--kill-after", "10"}, "--kill-after must be between 1 and --events - 1 (0: never), got 10"},
		{[]string{"bench", "nexmark", "--events", "many"}, `invalid argument "many" for "--events"`},
		{[]string{"bench", "nexmark", "--parallelism", "0"}, "--parallelism must be at least 1, got 0"},
		{[]string{"bench", "nexmark", "--checkpoint-interval", "-1s"}, "--checkpoint-interval must be positive, or 0 for no checkpoints, got -1s"},
		{[]string{"bench", "nexmark", "--checkpoint-interval", "0", "--backpressure"}, "--checkpoint-interval 0 cannot be combined with --backpressure"},
		{[]string{"bench", "nexmark", "--checkpoint-interval", "0", "--events", "10", "--kill-after", "5"}, "--checkpoint-interval 0 cannot be combined with --kill-after"},
		{[]string{"bench", "nexmark", "--set", "no-value"}, `--set "no-value": want key=value`},
		{[]string{"bench", "nexmark", "--backpressure", "--checkpoint-details"}, "--checkpoint-details cannot be combined with --backpressure"},
		{[]string{"bench", "nexmark", "--checkpoint-mode", "fast"}, `--checkpoint-mode must be aligned, unaligned or adaptive, got "fast"`},
		// A --set runs as the script's SET, with its error.
		{[]string{"bench", "nexmark", "--query", "q1", "--events", "10", "--set", "taskmanager.network.memory.buffer-debloat.target=soon"}, "SET 'taskmanager.network.memory.buffer-debloat.target': want a positive duration"},
		{[]string{"bench", "nexmark", "--query", "q1", "--events", "10", "--set", "table.local-time-zone=Mars/Base's"}, "SET 'table.local-time-zone': want a time zone name such as 'UTC' or 'Europe/Berlin', got 'Mars/Base's'"},
		{[]string{"bench", "nexmark", "extra"}, `unknown command "extra"`},
		{[]string{"bench"}, "name a benchmark: clink bench nexmark"},
	} {
		code, out, errs := clink(t, c.args...)
		if code == 0 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("clink %s: exit %d, stdout %q, stderr %q; want a non-zero exit and %q", strings.Join(c.args, " "), code, out, errs, c.want)
		}
	}
}

func TestBenchNexmarkQuery(t *testing.T) {
	// q13 reads the side input file that the bench writes.
	for _, q := range []string{"q1", "q10", "q13", "q17"} {
		code, out, errs := clink(t, "bench", "nexmark", "--query", q, "--events", "20000", "--parallelism", "2", "--checkpoint-interval", "20ms", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", q, code, errs)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: output %q is not one JSON object: %v", q, out, err)
		}
		_, periodic := got["ckpt_periodic_p99_ms"]
		if len(got) != 12+bit(periodic) || got["query"] != q || got["events"] != 20000.0 || got["checkpoints"].(float64) < 1 ||
			got["events_per_cpu_s"].(float64) <= 0 || got["peak_rss_mb"].(float64) <= 0 {
			t.Errorf("%s: implausible result: %s", q, out)
		}
		checkSlowest(t, q, got, out)
		checkFinal(t, q, got, out)
	}
}

// checkpointDetails runs clink with args (a --checkpoint-details --json
// bench) and returns its ckpt_details, checked against its checkpoint
// count and its slowest checkpoint.
func checkpointDetails(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	code, out, errs := clink(t, args...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q is not one JSON object: %v", out, err)
	}
	list, ok := got["ckpt_details"].([]any)
	if !ok || len(list) == 0 || float64(len(list)) != got["checkpoints"].(float64) {
		t.Fatalf("want one ckpt_details entry per checkpoint: %s", out)
	}
	details := make([]map[string]any, len(list))
	slowest := 0.0
	for i, d := range list {
		c := d.(map[string]any)
		if c["last_task"] == "" || c["duration_ms"].(float64) <= 0 {
			t.Errorf("checkpoint %d: implausible details %v", i+1, c)
		}
		details[i] = c
		slowest = max(slowest, c["duration_ms"].(float64))
	}
	if s := got["ckpt_slowest"].(map[string]any)["duration_ms"].(float64); s != slowest {
		t.Errorf("the slowest checkpoint took %v ms, the longest of the details %v ms", s, slowest)
	}
	return details
}

// TestBenchNexmarkCheckpointDetails: --checkpoint-details reports every
// checkpoint, in the JSON object and in the text report.
func TestBenchNexmarkCheckpointDetails(t *testing.T) {
	details := checkpointDetails(t, "bench", "nexmark", "--query", "q1", "--events", "20000", "--checkpoint-interval", "20ms", "--checkpoint-details", "--json")
	for i, c := range details {
		// The last checkpoint of the bounded run, and only it, is the
		// terminal one, which has the field terminal.
		last := i == len(details)-1
		if want := 10 + bit(last); len(c) != want || last != (c["terminal"] == true) {
			t.Errorf("checkpoint %d of %d: want %d fields, terminal %v; got %v", i+1, len(details), want, last, c)
		}
	}
	code, out, errs := clink(t, "bench", "nexmark", "--query", "q1", "--events", "20000", "--checkpoint-interval", "20ms", "--checkpoint-details")
	if code != 0 || !strings.Contains(out, "\nckpt 1 ") || !strings.Contains(out, "waited last for") ||
		!strings.Contains(out, "ms (terminal), waited last for") || !strings.Contains(out, "\nterminal     ") {
		t.Errorf("text report: exit %d, stdout %q, stderr %q; want a line per checkpoint, the terminal one marked", code, out, errs)
	}
}

// bit is 1 for true, 0 for false.
func bit(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkFinal checks the terminal checkpoint's figures of a bounded run's
// JSON result: its duration and the p99 of the others are at most the
// slowest checkpoint's.
func checkFinal(t *testing.T, what string, got map[string]any, out string) {
	t.Helper()
	final, ok := got["ckpt_final_ms"].(float64)
	if !ok {
		t.Errorf("%s: a bounded run's result lacks ckpt_final_ms: %s", what, out)
		return
	}
	// Without periodic checkpoints (a short run), there is no p99 of them.
	periodic, _ := got["ckpt_periodic_p99_ms"].(float64)
	slowest := got["ckpt_slowest"].(map[string]any)["duration_ms"].(float64)
	if final <= 0 || final > slowest || periodic < 0 || periodic > slowest {
		t.Errorf("%s: terminal checkpoint %v ms, periodic p99 %v ms: implausible: %s", what, final, periodic, out)
	}
}

func TestBenchNexmarkWithoutCheckpoints(t *testing.T) {
	for _, q := range []string{"gen", "q1"} {
		code, out, errs := clink(t, "bench", "nexmark", "--query", q, "--events", "20000", "--parallelism", "2", "--checkpoint-interval", "0", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", q, code, errs)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: output %q is not one JSON object: %v", q, out, err)
		}
		// Not even the final checkpoint of the bounded job is taken.
		if got["events"] != 20000.0 || got["checkpoints"] != 0.0 || got["events_per_cpu_s"].(float64) <= 0 {
			t.Errorf("%s: want 20000 events and no checkpoint, got %s", q, out)
		}
	}
}

// TestMain runs main instead of the tests when a --kill-after run starts
// this binary as its job process.
func TestMain(m *testing.M) {
	if os.Getenv("CLINK_TEST_MAIN") == "1" {
		main()
	}
	childEnv = []string{"CLINK_TEST_MAIN=1"}
	os.Exit(m.Run())
}

func TestBenchNexmarkKillAfter(t *testing.T) {
	// q17's processes take unaligned checkpoints: the mode reaches both.
	for _, q := range []string{"q1", "q17"} {
		args := []string{"bench", "nexmark", "--query", q, "--events", "200000", "--kill-after", "100000", "--checkpoint-interval", "20ms", "--json"}
		if q == "q17" {
			args = append(args, "--checkpoint-mode", "unaligned")
		}
		code, out, errs := clink(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", q, code, errs)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: output %q is not one JSON object: %v", q, out, err)
		}
		// The run fails unless the first process ended by SIGKILL and the
		// second ran to the end; 0 <= replayed_events < killed_at_events
		// says the second restored a checkpoint taken before the kill (it
		// replays nothing when that checkpoint holds every event the killed
		// process had reported).
		// The child reports its progress every millisecond and counts a
		// source's events per batch, so the first output record may be
		// reported before the first event: only replay_s follows restart_s.
		const slack = 0.005
		rec, rst, rpl := got["recovery_s"].(float64), got["restart_s"].(float64), got["replay_s"].(float64)
		killed, replayed := got["killed_at_events"].(float64), got["replayed_events"].(float64)
		if len(got) != 19 || got["restarts"] != 1.0 || got["events"] != 200000.0 || got["checkpoints"].(float64) < 1 ||
			rst <= 0 || rec <= 0 || rpl < rst-slack || killed < 100000 || replayed < 0 || replayed >= killed {
			t.Errorf("%s: implausible result: %s", q, out)
		}
		checkFinal(t, q, got, out)
	}
}

// TestBenchNexmarkKillAfterDetails reports every checkpoint of both
// processes of a --kill-after run, the restored job's marked.
func TestBenchNexmarkKillAfterDetails(t *testing.T) {
	details := checkpointDetails(t, "bench", "nexmark", "--query", "q1", "--events", "200000", "--kill-after", "100000", "--checkpoint-interval", "20ms", "--checkpoint-details", "--json")
	restored := 0
	for i, c := range details {
		if c["restored"] == true {
			restored++
		} else if restored > 0 {
			t.Errorf("checkpoint %d of the killed job after one of the restored job's", i+1)
		}
		// Only the restored job ends, with its terminal checkpoint.
		if last := i == len(details)-1; last != (c["terminal"] == true) {
			t.Errorf("checkpoint %d of %d: terminal %v, want %v", i+1, len(details), c["terminal"], last)
		}
	}
	// The killed job completed one checkpoint at least, and the restored
	// job its terminal one.
	if restored == 0 || restored == len(details) {
		t.Errorf("%d of %d checkpoints marked restored: %v", restored, len(details), details)
	}
	code, out, errs := clink(t, "bench", "nexmark", "--query", "q1", "--events", "200000", "--kill-after", "100000", "--checkpoint-interval", "20ms", "--checkpoint-details")
	if code != 0 || !strings.Contains(out, "\nrestored     ") || !strings.Contains(out, "\nckpt 1 ") || !strings.Contains(out, "\nrecovery ") {
		t.Errorf("text report: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestBenchNexmarkKillAfterProfiles profiles the restored job's process:
// the kill run passes --cpuprofile and --trace to it, and it writes both
// by the time its sinks took their first record.
func TestBenchNexmarkKillAfterProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.out"), filepath.Join(dir, "trace.out")
	code, out, errs := clink(t, "bench", "nexmark", "--query", "q1", "--events", "200000", "--kill-after", "100000",
		"--checkpoint-interval", "20ms", "--cpuprofile", cpu, "--trace", tr, "--json")
	if code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	f, err := os.Open(cpu)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A CPU profile is a gzipped protocol buffer.
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("CPU profile: %v", err)
	}
	if n, err := io.Copy(io.Discard, zr); err != nil || n == 0 {
		t.Fatalf("CPU profile: %d bytes, %v", n, err)
	}
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Fatalf("execution trace of %d bytes begins %q", len(b), b[:min(len(b), 16)])
	}
}

func TestBenchNexmarkGen(t *testing.T) {
	code, out, errs := clink(t, "bench", "nexmark", "--query", "gen", "--events", "20000", "--parallelism", "2", "--checkpoint-interval", "10ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q is not one JSON object: %v", out, err)
	}
	for _, k := range []string{"query", "events", "wall_s", "events_per_s", "cpu_s", "events_per_cpu_s", "checkpoints", "ckpt_p50_ms", "ckpt_p99_ms", "peak_rss_mb"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON output lacks %q: %s", k, out)
		}
	}
	checkSlowest(t, "gen", got, out)
	// A run this short takes its terminal checkpoint only, or periodic
	// ones too.
	_, periodic := got["ckpt_periodic_p99_ms"]
	if _, final := got["ckpt_final_ms"].(float64); !final {
		t.Errorf("a bounded run's result lacks ckpt_final_ms: %s", out)
	}
	if len(got) != 12+bit(periodic) || got["query"] != "gen" || got["events"] != 20000.0 || got["checkpoints"].(float64) < 1 ||
		got["ckpt_p99_ms"].(float64) < got["ckpt_p50_ms"].(float64) || got["ckpt_p50_ms"].(float64) <= 0 ||
		got["events_per_cpu_s"].(float64) <= 0 || got["peak_rss_mb"].(float64) <= 0 {
		t.Errorf("implausible result: %s", out)
	}

	code, out, errs = clink(t, "bench", "nexmark", "--events", "1000")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, w := range []string{"query        gen\n", "events       1000\n", "events per CPU-second", "checkpoints  ", "peak RSS", "slowest ckpt ", ", waited last for "} {
		if !strings.Contains(out, w) {
			t.Errorf("text output lacks %q:\n%s", w, out)
		}
	}
}

func TestBenchNexmarkBackpressure(t *testing.T) {
	code, out, errs := clink(t, "bench", "nexmark", "--query", "q1", "--backpressure", "--duration", "1500ms", "--parallelism", "2", "--checkpoint-interval", "100ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var got struct {
		Query           string
		DurationS       float64 `json:"duration_s"`
		Parallelism     int
		SinkUsPerRecord float64 `json:"sink_us_per_record"`
		Aligned         map[string]any
		Unaligned       map[string]any
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q is not one JSON object: %v", out, err)
	}
	if got.Query != "q1" || got.DurationS != 1.5 || got.Parallelism != 2 || got.SinkUsPerRecord != 200 {
		t.Errorf("implausible result: %s", out)
	}
	for name, raw := range map[string]map[string]any{"aligned": got.Aligned, "unaligned": got.Unaligned} {
		run := map[string]float64{}
		for k, v := range raw {
			if f, ok := v.(float64); ok {
				run[k] = f
			}
		}
		if run["checkpoints"] > 0 {
			if _, ok := raw["ckpt_slowest"].(map[string]any); !ok {
				t.Errorf("%s: no ckpt_slowest object: %s", name, out)
			}
		}
		// An aligned checkpoint waits for seconds of queued records, so
		// only the unaligned run is sure to complete one in 1.5s.
		if name == "unaligned" && run["checkpoints"] < 1 {
			t.Errorf("no unaligned checkpoint completed: %s", out)
		}
		if len(run) != 8 || run["records"] < 100 || run["events"] < run["records"] || run["wall_s"] < 1.5 ||
			run["checkpoints"] > 0 && run["ckpt_p50_ms"] <= 0 || run["ckpt_p99_ms"] < run["ckpt_p50_ms"] || run["ckpt_max_ms"] < run["ckpt_p99_ms"] {
			t.Errorf("implausible %s figures: %s", name, out)
		}
		// The sink takes 200µs per record: at most 5000 records per second.
		if run["records_per_s"] <= 0 || run["records_per_s"] > 5100 {
			t.Errorf("%s: the sink was not slow: %s", name, out)
		}
	}

	code, out, errs = clink(t, "bench", "nexmark", "--query", "gen", "--backpressure", "--duration", "300ms")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, w := range []string{"query        gen at parallelism 1, into one sink subtask taking 200 µs per record\n", "\naligned ", "\nunaligned ", "checkpoints"} {
		if !strings.Contains(out, w) {
			t.Errorf("text output lacks %q:\n%s", w, out)
		}
	}
}

func TestBenchNexmarkBackpressureErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backpressure", "--kill-after", "10"}, "--kill-after cannot be combined with --backpressure"},
		{[]string{"--backpressure", "--cpuprofile", "cpu.out"}, "--cpuprofile cannot be combined with --backpressure"},
		{[]string{"--backpressure", "--trace", "trace.out"}, "--trace cannot be combined with --backpressure"},
		{[]string{"--backpressure", "--events", "1000"}, "--events cannot be combined with --backpressure, which runs for --duration"},
		{[]string{"--duration", "1s"}, "--duration needs --backpressure and must be positive, got 1s"},
		{[]string{"--backpressure", "--checkpoint-mode", "aligned"}, "--checkpoint-mode cannot be combined with --backpressure, which runs aligned and then unaligned checkpoints"},
		{[]string{"--backpressure", "--set", "execution.checkpointing.unaligned=true"}, `--set "execution.checkpointing.unaligned=true" cannot be combined with --backpressure`},
		{[]string{"--backpressure", "--duration", "-1s"}, "--duration needs --backpressure and must be positive, got -1s"},
		{[]string{"--backpressure", "--query", "q10"}, "--backpressure replaces the query's blackhole sinks, and Nexmark q10 writes to none"},
		{[]string{"--backpressure", "--query", "q17"}, "--backpressure needs a query without updates: Nexmark q17 writes update changes into nexmark_q17"},
	} {
		args := append([]string{"bench", "nexmark", "--duration", "100ms"}, c.args...)
		if c.args[0] == "--duration" {
			args = append([]string{"bench", "nexmark"}, c.args...)
		}
		code, out, errs := clink(t, args...)
		if code == 0 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("clink %s: exit %d, stdout %q, stderr %q; want a non-zero exit and %q", strings.Join(args, " "), code, out, errs, c.want)
		}
	}
}

// checkSlowest checks the ckpt_slowest object of a run's JSON result: the
// slowest checkpoint's duration is the run's p99 or more, and it names the
// task it waited for last, whose parts are at most the longest ones.
func checkSlowest(t *testing.T, what string, got map[string]any, out string) {
	t.Helper()
	s, ok := got["ckpt_slowest"].(map[string]any)
	if !ok {
		t.Errorf("%s: JSON output lacks the ckpt_slowest object: %s", what, out)
		return
	}
	if len(s) != 10+bit(s["terminal"] == true) || s["last_task"] == "" || s["duration_ms"].(float64) < got["ckpt_p99_ms"].(float64) {
		t.Errorf("%s: implausible slowest checkpoint: %s", what, out)
	}
	for _, part := range []string{"start_delay_ms", "alignment_ms", "sync_ms", "async_ms"} {
		last, longest := s[part].(float64), s["max_"+part].(float64)
		if last < 0 || longest < last || longest > s["duration_ms"].(float64) {
			t.Errorf("%s: %s %v, longest %v, in a checkpoint of %v ms: %s", what, part, last, longest, s["duration_ms"], out)
		}
	}
}

// TestBenchOptionsCheckpointMode: --checkpoint-mode chooses the mode the
// run's job gets (queryJob and genJob pass o.mode on).
func TestBenchOptionsCheckpointMode(t *testing.T) {
	for in, want := range map[string]clinkapi.CheckpointMode{"aligned": clinkapi.Aligned, "unaligned": clinkapi.Unaligned, "adaptive": clinkapi.Adaptive} {
		o := benchOptions{query: "q1", events: 10, parallelism: 1, checkpointInterval: time.Second, checkpointMode: in}
		if err := o.validate(); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if o.mode != want {
			t.Errorf("--checkpoint-mode %s: mode %v, want %v", in, o.mode, want)
		}
	}
	// The keys --backpressure refuses are SET keys clink reads.
	for _, k := range checkpointModeKeys {
		if _, ok := sql.Settings[k]; !ok {
			t.Errorf("checkpointModeKeys holds %q, which is no SET key", k)
		}
	}
}
