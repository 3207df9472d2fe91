package metrics

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metric names clink exports. They are part of the user-visible contract
// (dashboards and alerts depend on them), so they never change.
const (
	NameCheckpointDuration  = "clink_checkpoint_duration_seconds"
	NameCheckpointSize      = "clink_checkpoint_size_bytes"
	NameCheckpointFullSize  = "clink_checkpoint_full_size_bytes"
	NameCheckpointsTotal    = "clink_checkpoints_total"
	NameCheckpointAlignment = "clink_checkpoint_alignment_seconds"
	NameCheckpointStart     = "clink_checkpoint_start_delay_seconds"
	NameCheckpointSync      = "clink_checkpoint_sync_duration_seconds"
	NameCheckpointAsync     = "clink_checkpoint_async_duration_seconds"
	NameModeTotal           = "clink_ckpt_mode_total"
	NameAdaptiveSwitchTotal = "clink_ckpt_adaptive_switch_total"
	NameOperatorRecordsIn   = "clink_operator_records_in_total"
	NameOperatorRecordsOut  = "clink_operator_records_out_total"
	NameJobRestartsTotal    = "clink_job_restarts_total"
)

// Values of the result label of clink_checkpoints_total.
const (
	ResultCompleted = "completed"
	ResultAborted   = "aborted"
	ResultFailed    = "failed"
)

// Values of the mode label of clink_ckpt_mode_total. They equal the String
// form of checkpoint.Mode; this package cannot import checkpoint, so they are
// repeated here.
const (
	ModeAligned   = "aligned"
	ModeUnaligned = "unaligned"
)

// Values of the cause label of clink_job_restarts_total.
const (
	CauseTask       = "task"       // a task failed
	CauseCheckpoint = "checkpoint" // a checkpoint failed
	CauseOther      = "other"      // anything else the job driver reported
)

// Registry is clink's metric registry. It wraps its own *prometheus.Registry
// rather than the global default one, so that two jobs in one process (or two
// tests) never share counters. The zero value is not usable; call New.
type Registry struct {
	prom *prometheus.Registry

	duration  *prometheus.HistogramVec
	size      *prometheus.HistogramVec
	fullSize  *prometheus.HistogramVec
	alignment prometheus.Histogram
	start     prometheus.Histogram
	sync      prometheus.Histogram
	async     prometheus.Histogram
	modes     *prometheus.CounterVec
	switches  prometheus.Counter
	restarts  *prometheus.CounterVec

	// Checkpoint outcomes live in atomics rather than in a CounterVec so that
	// Summary and the scrape read the same numbers; checkpointCollector
	// exports them.
	completed, aborted, failed atomic.Int64
	lastDurationNanos          atomic.Int64
	lastBytes                  atomic.Int64
	lastFullBytes              atomic.Int64
	restartsTotal              atomic.Int64

	mu struct {
		sync.Mutex
		// operators maps (uid, subtask) to counters handed to tasks. Guarded
		// by mu; the *OperatorCounters values themselves are atomics and are
		// read without the lock once obtained.
		operators map[operatorKey]*OperatorCounters
		// phases describes the last completed checkpoint, and reported
		// those CheckpointPhases reported for the checkpoint about to
		// complete. CheckpointCompleted moves reported to phases under mu
		// as it counts the checkpoint and stores its duration and sizes,
		// and Summary reads all of them under mu, so that a summary never
		// pairs one checkpoint's count or duration with another's phases.
		phases, reported CheckpointPhases
		// recent holds the last keptCheckpoints completed checkpoints,
		// oldest first (CompletedSince).
		recent []CompletedCheckpoint
	}
}

// keptCheckpoints is how many completed checkpoints CompletedSince keeps.
const keptCheckpoints = 1024

// CompletedCheckpoint is one completed checkpoint as the driver reported
// it: its number among the completed ones (the first is 1), its duration
// and where its time went.
type CompletedCheckpoint struct {
	N        int64
	Duration time.Duration
	Phases   CheckpointPhases
}

// CheckpointParts is where one task's part of a checkpoint went, or over
// every task of a checkpoint, the longest of each part.
type CheckpointParts struct {
	// StartDelay runs from the trigger until the task received the
	// checkpoint's first barrier.
	StartDelay time.Duration
	// Alignment runs from the first barrier until the task forwarded it.
	Alignment time.Duration
	// Sync is the capture on the task goroutine.
	Sync time.Duration
	// Async runs from the end of the capture until the snapshot was
	// durable.
	Async time.Duration
}

// CheckpointPhases is where a completed checkpoint's time went.
type CheckpointPhases struct {
	// Longest holds each part's maximum over the checkpoint's tasks.
	Longest CheckpointParts
	// Last is the task whose acknowledgement the checkpoint waited for
	// last, and LastParts its parts: the end of the critical path.
	Last      string
	LastParts CheckpointParts
	// Terminal marks the terminal checkpoint of a bounded job: its
	// barriers pass a task only once it has processed the end of its
	// input (every window and timer fired), so its duration includes that
	// work.
	Terminal bool
}

// OperatorCounters counts the records one subtask of one operator consumed
// (In) and produced (Out). A task adds to them directly; they are exported as
// clink_operator_records_in_total and clink_operator_records_out_total with
// labels operator (the uid) and subtask.
type OperatorCounters struct {
	In, Out atomic.Int64
}

type operatorKey struct {
	uid     string
	subtask int
}

// Summary is a point-in-time copy of the values the CLI status line shows.
// Fields are read one at a time, so a Summary taken while a checkpoint ends
// may mix its before and after values.
type Summary struct {
	// CheckpointsCompleted, CheckpointsAborted and CheckpointsFailed are
	// the values of clink_checkpoints_total by result.
	CheckpointsCompleted int64
	CheckpointsAborted   int64
	CheckpointsFailed    int64
	// LastCheckpointDuration, LastCheckpointBytes and
	// LastCheckpointFullBytes describe the most recently completed
	// checkpoint; zero before the first one. LastCheckpointBytes is what
	// the checkpoint newly wrote (incremental size), LastCheckpointFullBytes
	// what it references, including shared files earlier checkpoints wrote
	// (full size).
	LastCheckpointDuration  time.Duration
	LastCheckpointBytes     int64
	LastCheckpointFullBytes int64
	// LastCheckpointPhases is where the most recently completed
	// checkpoint's time went, as far as the driver reported it.
	LastCheckpointPhases CheckpointPhases
	// Restarts is clink_job_restarts_total summed over causes.
	Restarts int64
	// RecordsIn and RecordsOut are sums over every registered operator.
	RecordsIn, RecordsOut int64
}

// New returns a Registry with clink's metrics and the Go runtime and process
// collectors registered.
func New() *Registry {
	r := &Registry{
		prom: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: NameCheckpointDuration,
			Help: "Time from trigger to completion of each completed checkpoint, by stamped mode.",
			// 5ms .. ~11min.
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 18),
		}, []string{"mode"}),
		size: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: NameCheckpointSize,
			Help: "Bytes each completed checkpoint newly wrote (its snapshot files and the shared files first stored for it: the incremental size), by stamped mode.",
			// 1KiB .. 4TiB.
			Buckets: prometheus.ExponentialBuckets(1024, 4, 16),
		}, []string{"mode"}),
		fullSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    NameCheckpointFullSize,
			Help:    "Bytes each completed checkpoint references (its snapshot files and every shared file they list, also those earlier checkpoints wrote: the full size), by stamped mode.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 16),
		}, []string{"mode"}),
		alignment: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: NameCheckpointAlignment,
			Help: "Time a multi-input task spent between the first and the last barrier of a checkpoint.",
			// 100µs .. ~13s.
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		start: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    NameCheckpointStart,
			Help:    "Per completed checkpoint, the longest time any task waited from the trigger until the checkpoint's first barrier reached it.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		sync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    NameCheckpointSync,
			Help:    "Per completed checkpoint, the longest capture of a task's state on its task goroutine (the synchronous part).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		async: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    NameCheckpointAsync,
			Help:    "Per completed checkpoint, the longest time any task took from its capture until its snapshot was durable (the asynchronous part).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		modes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NameModeTotal,
			Help: "Triggered checkpoints by the mode stamped on their barriers.",
		}, []string{"mode"}),
		switches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: NameAdaptiveSwitchTotal,
			Help: "Times the adaptive mode policy flipped between aligned and unaligned.",
		}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NameJobRestartsTotal,
			Help: "Whole-job restarts by the restart strategy, by the cause of the failure (task, checkpoint or other).",
		}, []string{"cause"}),
	}
	r.mu.operators = make(map[operatorKey]*OperatorCounters)

	// Both modes are exported from the start, so a rate() over either works
	// before the first checkpoint of that mode.
	r.modes.WithLabelValues(ModeAligned)
	r.modes.WithLabelValues(ModeUnaligned)
	for _, c := range []string{CauseTask, CauseCheckpoint, CauseOther} {
		r.restarts.WithLabelValues(c)
	}

	r.prom.MustRegister(
		r.duration, r.size, r.fullSize, r.alignment, r.start, r.sync, r.async, r.modes, r.switches, r.restarts,
		(*checkpointCollector)(r),
		(*operatorCollector)(r),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return r
}

// Prometheus returns the underlying registry, for callers that register
// collectors of their own or gather directly.
func (r *Registry) Prometheus() *prometheus.Registry { return r.prom }

// Handler returns an http.Handler that serves this registry in the Prometheus
// exposition formats.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.prom, promhttp.HandlerOpts{})
}

// CheckpointCompleted records a completed checkpoint: its stamped mode, the
// time from trigger to completion, the bytes it newly wrote (incremental
// size) and the bytes it references (full size; with incremental
// checkpoints this includes shared files earlier checkpoints wrote).
func (r *Registry) CheckpointCompleted(mode string, duration time.Duration, bytes, fullBytes int64) {
	r.duration.WithLabelValues(mode).Observe(duration.Seconds())
	r.size.WithLabelValues(mode).Observe(float64(bytes))
	r.fullSize.WithLabelValues(mode).Observe(float64(fullBytes))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.phases, r.mu.reported = r.mu.reported, CheckpointPhases{}
	r.lastDurationNanos.Store(int64(duration))
	r.lastBytes.Store(bytes)
	r.lastFullBytes.Store(fullBytes)
	n := r.completed.Add(1)
	if len(r.mu.recent) == keptCheckpoints {
		r.mu.recent = append(r.mu.recent[:0], r.mu.recent[1:]...)
	}
	r.mu.recent = append(r.mu.recent, CompletedCheckpoint{N: n, Duration: duration, Phases: r.mu.phases})
}

// CompletedSince returns the completed checkpoints numbered above n, in
// order, of the last 1,024: a caller that polls sees every checkpoint,
// however many completed between two polls, where a Summary shows only
// the last.
func (r *Registry) CompletedSince(n int64) []CompletedCheckpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.mu.recent)
	for i > 0 && r.mu.recent[i-1].N > n {
		i--
	}
	return slices.Clone(r.mu.recent[i:])
}

// CheckpointPhases records where a checkpoint's time went. The driver calls
// it just before CheckpointCompleted of the same checkpoint; a Summary
// reports them once that counted the checkpoint.
func (r *Registry) CheckpointPhases(p CheckpointPhases) {
	r.start.Observe(p.Longest.StartDelay.Seconds())
	r.sync.Observe(p.Longest.Sync.Seconds())
	r.async.Observe(p.Longest.Async.Seconds())
	r.mu.Lock()
	r.mu.reported = p
	r.mu.Unlock()
}

// CheckpointAborted records a checkpoint that ended without completing.
// failed distinguishes a checkpoint that ended because something went wrong
// (a task declined, a snapshot could not be written) from one that was
// aborted on purpose (superseded, job cancelled, timed out).
func (r *Registry) CheckpointAborted(failed bool) {
	if failed {
		r.failed.Add(1)
	} else {
		r.aborted.Add(1)
	}
}

// ModeStamped records the mode stamped on a triggered checkpoint's barriers:
// "aligned" or "unaligned" (checkpoint.Mode's String).
func (r *Registry) ModeStamped(mode string) {
	r.modes.WithLabelValues(mode).Inc()
}

// AdaptiveSwitch records one flip of the adaptive mode policy.
func (r *Registry) AdaptiveSwitch() {
	r.switches.Inc()
}

// JobRestarted records one whole-job restart; cause is CauseTask,
// CauseCheckpoint or CauseOther.
func (r *Registry) JobRestarted(cause string) {
	r.restarts.WithLabelValues(cause).Inc()
	r.restartsTotal.Add(1)
}

// AlignmentTime records how long one multi-input task waited between the
// first and the last barrier of one checkpoint.
func (r *Registry) AlignmentTime(d time.Duration) {
	r.alignment.Observe(d.Seconds())
}

// Operator returns the counters for subtask of the operator with the given
// uid, creating them on first use. Every call with the same (uid, subtask)
// returns the same object, so a restarted task continues the counts of its
// predecessor, as Prometheus counters require.
func (r *Registry) Operator(uid string, subtask int) *OperatorCounters {
	k := operatorKey{uid, subtask}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.mu.operators[k]
	if !ok {
		c = new(OperatorCounters)
		r.mu.operators[k] = c
	}
	return c
}

// Summary returns the current values for the CLI status line and tests.
func (r *Registry) Summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Summary{
		CheckpointsCompleted:    r.completed.Load(),
		CheckpointsAborted:      r.aborted.Load(),
		CheckpointsFailed:       r.failed.Load(),
		LastCheckpointDuration:  time.Duration(r.lastDurationNanos.Load()),
		LastCheckpointBytes:     r.lastBytes.Load(),
		LastCheckpointFullBytes: r.lastFullBytes.Load(),
		Restarts:                r.restartsTotal.Load(),
	}
	s.LastCheckpointPhases = r.mu.phases
	for _, c := range r.mu.operators {
		s.RecordsIn += c.In.Load()
		s.RecordsOut += c.Out.Load()
	}
	return s
}
