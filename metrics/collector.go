package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	checkpointsDesc = prometheus.NewDesc(NameCheckpointsTotal,
		"Checkpoints that ended, by result (completed, aborted or failed).",
		[]string{"result"}, nil)
	recordsInDesc = prometheus.NewDesc(NameOperatorRecordsIn,
		"Records an operator subtask consumed.",
		[]string{"operator", "subtask"}, nil)
	recordsOutDesc = prometheus.NewDesc(NameOperatorRecordsOut,
		"Records an operator subtask produced.",
		[]string{"operator", "subtask"}, nil)
)

// checkpointCollector exports the checkpoint outcome atomics as
// clink_checkpoints_total.
type checkpointCollector Registry

// Describe implements prometheus.Collector.
func (c *checkpointCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- checkpointsDesc
}

// Collect implements prometheus.Collector.
func (c *checkpointCollector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range []struct {
		result string
		n      int64
	}{
		{ResultCompleted, c.completed.Load()},
		{ResultAborted, c.aborted.Load()},
		{ResultFailed, c.failed.Load()},
	} {
		ch <- prometheus.MustNewConstMetric(checkpointsDesc, prometheus.CounterValue, float64(v.n), v.result)
	}
}

// operatorCollector exports every OperatorCounters at scrape time. Reading
// the atomics here, rather than keeping a Prometheus counter per operator,
// keeps Prometheus off the per-record path.
type operatorCollector Registry

// Describe implements prometheus.Collector.
func (c *operatorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- recordsInDesc
	ch <- recordsOutDesc
}

// Collect implements prometheus.Collector.
func (c *operatorCollector) Collect(ch chan<- prometheus.Metric) {
	type sample struct {
		key     operatorKey
		in, out int64
	}
	// Copy under the lock and send after releasing it: the channel send can
	// block on the gatherer, and Operator must not wait for a scrape.
	c.mu.Lock()
	samples := make([]sample, 0, len(c.mu.operators))
	for k, v := range c.mu.operators {
		samples = append(samples, sample{k, v.In.Load(), v.Out.Load()})
	}
	c.mu.Unlock()
	for _, s := range samples {
		sub := strconv.Itoa(s.key.subtask)
		ch <- prometheus.MustNewConstMetric(recordsInDesc, prometheus.CounterValue, float64(s.in), s.key.uid, sub)
		ch <- prometheus.MustNewConstMetric(recordsOutDesc, prometheus.CounterValue, float64(s.out), s.key.uid, sub)
	}
}
