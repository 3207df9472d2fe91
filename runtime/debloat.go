package runtime

import (
	"math"
	"time"
)

// DefaultDebloatTarget is Config.DebloatTarget when it is zero: as Flink's
// taskmanager.network.memory.buffer-debloat.target.
const DefaultDebloatTarget = time.Second

// debloatPeriod is how often a task samples its throughput and resizes its
// input channels (Flink's buffer-debloat.period).
const debloatPeriod = 200 * time.Millisecond

// debloatMinCapacity is the fewest record batches a debloated channel
// holds: one that the producer fills while the consumer takes the other,
// so that a slow consumer always finds a batch queued.
const debloatMinCapacity = 2

// debloater sizes the input channels of one task so that the record
// batches queued in front of it take about target to process, which is
// Flink's buffer debloating. Under backpressure the queues in front of a
// slow task are full: with a fixed capacity they hold seconds of its work,
// which an aligned checkpoint waits for and an unaligned one encodes and
// writes. A task that is not a bottleneck keeps the configured capacity.
//
// A task starts with its channels at the fewest batches, so that queues
// in front of a task that turns out to be a bottleneck do not fill with
// seconds of its work before the first sample (they would take that long
// to drain, and the first checkpoints would wait for them); the first
// sample gives a task that is none its full capacity.
//
// It is a pure calculation on the task goroutine: the task reports the
// batches it processed and the time it spent waiting for input, and calls
// tick with the time now; tick returns the capacity per channel to set.
// Capacities count batches, so the rate it measures is in batches too.
type debloater struct {
	target   time.Duration
	min, max int // capacity bounds per channel, in batches

	// The sample under way.
	start   time.Time
	idle    time.Duration
	batches int

	// rate is the smoothed throughput in batches per busy second; zero
	// before the first busy sample.
	rate     float64
	capacity int // per channel, as last returned
}

// newDebloater returns a debloater for channels of capacity max, starting
// its first sample at now; the channels start at its capacity.
func newDebloater(target time.Duration, max int, now time.Time) *debloater {
	lo := min(debloatMinCapacity, max)
	return &debloater{target: target, min: lo, max: max, start: now, capacity: lo}
}

// processed counts a batch the task processed.
func (d *debloater) processed() { d.batches++ }

// idled counts time the task waited for input.
func (d *debloater) idled(dur time.Duration) { d.idle += dur }

// debloatAlpha weighs a new sample in the smoothed rate.
const debloatAlpha = 0.3

// tick ends the sample under way once a period has passed since it began
// and returns the capacity per channel for inputs open inputs, and whether
// it changed. A task that waited for input for half the period or more is
// no bottleneck: its channels go back to the full capacity.
func (d *debloater) tick(now time.Time, inputs int) (capacity int, changed bool) {
	elapsed := now.Sub(d.start)
	if elapsed < debloatPeriod {
		return d.capacity, false
	}
	busy := elapsed - d.idle
	batches := d.batches
	d.start, d.idle, d.batches = now, 0, 0
	want := d.max
	if batches > 0 && busy > elapsed/2 && inputs > 0 {
		rate := float64(batches) / busy.Seconds()
		if d.rate == 0 {
			d.rate = rate
		} else {
			d.rate += debloatAlpha * (rate - d.rate)
		}
		queued := math.Ceil(d.rate * d.target.Seconds() / float64(inputs))
		want = max(int(min(queued, float64(d.max))), d.min)
	} else {
		d.rate = 0
	}
	if want == d.capacity {
		return want, false
	}
	d.capacity = want
	return want, true
}
