package metrics

import (
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestModeAndSwitchCounters(t *testing.T) {
	r := New()
	r.ModeStamped(ModeUnaligned)
	r.ModeStamped(ModeUnaligned)
	r.ModeStamped(ModeAligned)
	r.AdaptiveSwitch()

	const want = `
# HELP clink_ckpt_adaptive_switch_total Times the adaptive mode policy flipped between aligned and unaligned.
# TYPE clink_ckpt_adaptive_switch_total counter
clink_ckpt_adaptive_switch_total 1
# HELP clink_ckpt_mode_total Triggered checkpoints by the mode stamped on their barriers.
# TYPE clink_ckpt_mode_total counter
clink_ckpt_mode_total{mode="aligned"} 1
clink_ckpt_mode_total{mode="unaligned"} 2
`
	if err := testutil.GatherAndCompare(r.Prometheus(), strings.NewReader(want),
		NameModeTotal, NameAdaptiveSwitchTotal); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(r.modes.WithLabelValues(ModeUnaligned)); got != 2 {
		t.Fatalf("clink_ckpt_mode_total{mode=\"unaligned\"} = %v, want 2", got)
	}
}

func TestBothModesExportedBeforeFirstCheckpoint(t *testing.T) {
	r := New()
	const want = `
# HELP clink_ckpt_mode_total Triggered checkpoints by the mode stamped on their barriers.
# TYPE clink_ckpt_mode_total counter
clink_ckpt_mode_total{mode="aligned"} 0
clink_ckpt_mode_total{mode="unaligned"} 0
`
	if err := testutil.GatherAndCompare(r.Prometheus(), strings.NewReader(want), NameModeTotal); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointOutcomes(t *testing.T) {
	r := New()
	r.CheckpointCompleted(ModeAligned, 1500*time.Millisecond, 4096, 8192)
	r.CheckpointCompleted(ModeAligned, 250*time.Millisecond, 2048, 9000)
	r.CheckpointAborted(false)
	r.CheckpointAborted(true)
	r.CheckpointAborted(true)

	const want = `
# HELP clink_checkpoints_total Checkpoints that ended, by result (completed, aborted or failed).
# TYPE clink_checkpoints_total counter
clink_checkpoints_total{result="aborted"} 1
clink_checkpoints_total{result="completed"} 2
clink_checkpoints_total{result="failed"} 2
`
	if err := testutil.GatherAndCompare(r.Prometheus(), strings.NewReader(want), NameCheckpointsTotal); err != nil {
		t.Fatal(err)
	}

	got := r.Summary()
	wantSummary := Summary{
		CheckpointsCompleted:    2,
		CheckpointsAborted:      1,
		CheckpointsFailed:       2,
		LastCheckpointDuration:  250 * time.Millisecond,
		LastCheckpointBytes:     2048,
		LastCheckpointFullBytes: 9000,
	}
	if got != wantSummary {
		t.Fatalf("Summary() = %+v, want %+v", got, wantSummary)
	}
}

func TestCheckpointHistograms(t *testing.T) {
	r := New()
	r.CheckpointCompleted(ModeUnaligned, 1500*time.Millisecond, 4096, 10000)
	r.CheckpointCompleted(ModeUnaligned, 500*time.Millisecond, 1024, 10100)
	r.AlignmentTime(20 * time.Millisecond)

	mfs, err := r.Prometheus().Gather()
	if err != nil {
		t.Fatal(err)
	}
	type hist struct {
		labels string
		count  uint64
		sum    float64
	}
	got := map[string]hist{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()] = hist{strings.Join(labels, ","), h.GetSampleCount(), h.GetSampleSum()}
		}
	}
	want := map[string]hist{
		NameCheckpointDuration:  {"mode=unaligned", 2, 2.0},
		NameCheckpointSize:      {"mode=unaligned", 2, 5120},
		NameCheckpointFullSize:  {"mode=unaligned", 2, 20100},
		NameCheckpointAlignment: {"", 1, 0.02},
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s = %+v (present %v), want %+v", name, g, ok, w)
		}
	}
	// Histograms must also be present in the exposition with their buckets.
	if n, err := testutil.GatherAndCount(r.Prometheus(), NameCheckpointDuration, NameCheckpointSize, NameCheckpointFullSize, NameCheckpointAlignment); err != nil || n != 4 {
		t.Fatalf("GatherAndCount = %d, %v; want 4 series", n, err)
	}
}

func TestOperatorCounters(t *testing.T) {
	r := New()
	a0 := r.Operator("map-1", 0)
	if r.Operator("map-1", 0) != a0 {
		t.Fatal("Operator returned a different object for the same (uid, subtask)")
	}
	a1 := r.Operator("map-1", 1)
	if a1 == a0 {
		t.Fatal("Operator returned the same object for different subtasks")
	}
	a0.In.Add(10)
	a0.Out.Add(7)
	a1.In.Add(5)
	r.Operator("sink", 0).In.Add(7)

	const want = `
# HELP clink_operator_records_in_total Records an operator subtask consumed.
# TYPE clink_operator_records_in_total counter
clink_operator_records_in_total{operator="map-1",subtask="0"} 10
clink_operator_records_in_total{operator="map-1",subtask="1"} 5
clink_operator_records_in_total{operator="sink",subtask="0"} 7
# HELP clink_operator_records_out_total Records an operator subtask produced.
# TYPE clink_operator_records_out_total counter
clink_operator_records_out_total{operator="map-1",subtask="0"} 7
clink_operator_records_out_total{operator="map-1",subtask="1"} 0
clink_operator_records_out_total{operator="sink",subtask="0"} 0
`
	if err := testutil.GatherAndCompare(r.Prometheus(), strings.NewReader(want),
		NameOperatorRecordsIn, NameOperatorRecordsOut); err != nil {
		t.Fatal(err)
	}
	s := r.Summary()
	if s.RecordsIn != 22 || s.RecordsOut != 7 {
		t.Fatalf("Summary records in/out = %d/%d, want 22/7", s.RecordsIn, s.RecordsOut)
	}
}

func TestRegistriesAreIndependent(t *testing.T) {
	a, b := New(), New()
	a.ModeStamped(ModeAligned)
	a.Operator("x", 0).In.Add(1)
	if got := testutil.ToFloat64(b.modes.WithLabelValues(ModeAligned)); got != 0 {
		t.Fatalf("second registry sees %v aligned checkpoints, want 0", got)
	}
	if s := b.Summary(); s.RecordsIn != 0 {
		t.Fatalf("second registry sees %d records, want 0", s.RecordsIn)
	}
}

func TestLint(t *testing.T) {
	problems, err := testutil.GatherAndLint(New().Prometheus())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "clink_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

func TestHandlerServesClinkMetrics(t *testing.T) {
	r := New()
	r.ModeStamped(ModeUnaligned)
	r.Operator("src", 3).Out.Add(42)

	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`clink_ckpt_mode_total{mode="unaligned"} 1`,
		`clink_operator_records_out_total{operator="src",subtask="3"} 42`,
		`clink_checkpoints_total{result="completed"} 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// TestConcurrentUse is meant for -race: tasks register and count while the
// driver reports checkpoints and a scraper gathers.
func TestConcurrentUse(t *testing.T) {
	r := New()
	const tasks, perTask = 8, 1000
	var wg sync.WaitGroup
	for i := range tasks {
		wg.Go(func() {
			c := r.Operator("op", i%4)
			for range perTask {
				c.In.Add(1)
				c.Out.Add(2)
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			r.ModeStamped(ModeAligned)
			r.AlignmentTime(time.Millisecond)
			if i%10 == 0 {
				r.AdaptiveSwitch()
				r.CheckpointAborted(i%20 == 0)
			} else {
				r.CheckpointCompleted(ModeAligned, time.Duration(i)*time.Millisecond, int64(i), int64(2*i))
			}
		}
	})
	wg.Go(func() {
		for range 20 {
			if _, err := r.Prometheus().Gather(); err != nil {
				t.Error(err)
				return
			}
			_ = r.Summary()
		}
	})
	wg.Wait()

	s := r.Summary()
	if s.RecordsIn != tasks*perTask || s.RecordsOut != 2*tasks*perTask {
		t.Errorf("records in/out = %d/%d, want %d/%d", s.RecordsIn, s.RecordsOut, tasks*perTask, 2*tasks*perTask)
	}
	if s.CheckpointsCompleted != 90 || s.CheckpointsAborted+s.CheckpointsFailed != 10 {
		t.Errorf("checkpoints = %+v, want 90 completed and 10 ended otherwise", s)
	}
}

func BenchmarkOperatorCountersParallel(b *testing.B) {
	r := New()
	b.RunParallel(func(pb *testing.PB) {
		c := r.Operator("op", 0)
		for pb.Next() {
			c.In.Add(1)
		}
	})
}

func TestCheckpointPhases(t *testing.T) {
	r := New()
	p := CheckpointPhases{
		Longest:   CheckpointParts{StartDelay: 30 * time.Millisecond, Alignment: 5 * time.Millisecond, Sync: 2 * time.Millisecond, Async: 120 * time.Millisecond},
		Last:      "join-0",
		LastParts: CheckpointParts{StartDelay: 10 * time.Millisecond, Sync: time.Millisecond, Async: 120 * time.Millisecond},
	}
	r.CheckpointPhases(p)
	r.CheckpointCompleted(ModeAligned, 150*time.Millisecond, 10, 20)
	if got := r.Summary().LastCheckpointPhases; got != p {
		t.Fatalf("Summary().LastCheckpointPhases = %+v, want %+v", got, p)
	}
	mfs, err := r.Prometheus().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil && h.GetSampleCount() == 1 {
				sums[mf.GetName()] = h.GetSampleSum()
			}
		}
	}
	for name, want := range map[string]float64{NameCheckpointStart: 0.030, NameCheckpointSync: 0.002, NameCheckpointAsync: 0.120} {
		if got, ok := sums[name]; !ok || got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%s: one observation of %v, want %v (found %v)", name, got, want, ok)
		}
	}
}

// TestSummaryLastCheckpointConsistent reads summaries while checkpoints
// complete: the count, the duration and the phases of a summary are those
// of one checkpoint, never the phases of the one about to complete.
func TestSummaryLastCheckpointConsistent(t *testing.T) {
	r := New()
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			r.CheckpointPhases(CheckpointPhases{Last: strconv.Itoa(i), Terminal: i == n})
			r.CheckpointCompleted(ModeAligned, time.Duration(i), 1, 1)
		}
	}()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		s := r.Summary()
		if s.CheckpointsCompleted == 0 {
			continue
		}
		if want := strconv.FormatInt(s.CheckpointsCompleted, 10); s.LastCheckpointPhases.Last != want || s.LastCheckpointDuration != time.Duration(s.CheckpointsCompleted) {
			t.Fatalf("summary after %d checkpoints: duration %d, phases of %q", s.CheckpointsCompleted, s.LastCheckpointDuration, s.LastCheckpointPhases.Last)
		}
		if s.LastCheckpointPhases.Terminal != (s.CheckpointsCompleted == n) {
			t.Fatalf("summary after %d checkpoints: terminal %v", s.CheckpointsCompleted, s.LastCheckpointPhases.Terminal)
		}
	}
}

// TestCompletedSince checks that a poller sees every completed checkpoint,
// in order with its own duration and phases, however many completed
// between two polls (a Summary shows only the last), while checkpoints
// complete on another goroutine (fewer than the registry keeps, so that
// no schedule can make the poller miss one); and that the registry keeps
// the last keptCheckpoints of them.
func TestCompletedSince(t *testing.T) {
	r := New()
	complete := func(i int64) {
		r.CheckpointPhases(CheckpointPhases{Last: strconv.FormatInt(i, 10)})
		r.CheckpointCompleted(ModeAligned, time.Duration(i), 1, 1)
	}
	const n = keptCheckpoints - 1
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(1); i <= n; i++ {
			complete(i)
		}
	}()
	var seen int64
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		for _, c := range r.CompletedSince(seen) {
			if c.N != seen+1 || c.Duration != time.Duration(c.N) || c.Phases.Last != strconv.FormatInt(c.N, 10) {
				t.Fatalf("after checkpoint %d: got checkpoint %d, duration %d, phases of %q", seen, c.N, c.Duration, c.Phases.Last)
			}
			seen = c.N
		}
	}
	if seen != n {
		t.Fatalf("saw %d of %d checkpoints", seen, n)
	}
	for i := int64(n + 1); i <= 3*keptCheckpoints; i++ {
		complete(i)
	}
	if got := r.CompletedSince(0); len(got) != keptCheckpoints || got[0].N != 2*keptCheckpoints+1 || got[len(got)-1].N != 3*keptCheckpoints {
		t.Fatalf("kept %d checkpoints, %d to %d; want the last %d", len(got), got[0].N, got[len(got)-1].N, keptCheckpoints)
	}
	if got := r.CompletedSince(3 * keptCheckpoints); len(got) != 0 {
		t.Fatalf("%d checkpoints after the last", len(got))
	}
}
