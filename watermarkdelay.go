package clink

import (
	"time"

	"github.com/clinkstream/clink/runtime"
)

// DelayWatermarks forwards the records of s unchanged and its watermarks
// d behind. An operator whose results can carry timestamps up to d behind
// its input watermark (a SQL interval join stamping a joined row with one
// side's time) puts it after itself, so that no result is late for the
// event-time operators downstream (Flink's watermark delay of the interval
// join). The first and the final watermark pass as they are.
func DelayWatermarks[T any](s Stream[T], name string, d time.Duration) Stream[T] {
	ms := d.Milliseconds()
	return addOp(s, name, func(o *out[T], c *counters) *out[T] {
		next, wm := o.rec, o.wm
		return &out[T]{rec: func(v T, ts int64) error {
			c.in++
			c.out++
			return next(v, ts)
		}, wm: func(w int64) error {
			if w == runtime.MinWatermark || w == runtime.MaxWatermark || w-ms < runtime.MinWatermark+1 {
				return wm(w)
			}
			return wm(w - ms)
		}}
	})
}
