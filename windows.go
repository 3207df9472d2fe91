package clink

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/clinkstream/clink/state"
)

// Window is the event-time interval [Start, End) in milliseconds.
type Window struct {
	Start, End int64
}

// MaxTimestamp is the last millisecond of the window; its results carry it
// as their timestamp, and they are emitted when the watermark reaches it.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

// String formats the window as [start,end).
func (w Window) String() string { return fmt.Sprintf("[%d,%d)", w.Start, w.End) }

// WindowAssigner gives a record the windows it belongs to, from its event
// time.
type WindowAssigner interface {
	// Assign returns the windows of a record at ts.
	Assign(ts int64) []Window
	// Merging reports whether overlapping windows merge (sessions).
	Merging() bool
}

type tumbling struct{ size int64 }

// TumblingWindows assigns each record to the one window of the given size
// that holds it; windows are aligned to the epoch.
func TumblingWindows(size time.Duration) WindowAssigner { return tumbling{size: size.Milliseconds()} }

func (a tumbling) Assign(ts int64) []Window {
	start := floorMod(ts, a.size)
	return []Window{{Start: start, End: start + a.size}}
}
func (a tumbling) Merging() bool { return false }

type sliding struct{ size, slide int64 }

// SlidingWindows assigns each record to every window of the given size,
// starting every slide, that holds it (Flink's HOP).
func SlidingWindows(size, slide time.Duration) WindowAssigner {
	return sliding{size: size.Milliseconds(), slide: slide.Milliseconds()}
}

func (a sliding) Assign(ts int64) []Window {
	var ws []Window
	for start := floorMod(ts, a.slide); start > ts-a.size; start -= a.slide {
		ws = append(ws, Window{Start: start, End: start + a.size})
	}
	return ws
}
func (a sliding) Merging() bool { return false }

type session struct{ gap int64 }

// SessionWindows assigns each record the window [ts, ts+gap) and merges
// the windows of a key that overlap: a session ends after gap without
// records.
func SessionWindows(gap time.Duration) WindowAssigner { return session{gap: gap.Milliseconds()} }

func (a session) Assign(ts int64) []Window { return []Window{{Start: ts, End: ts + a.gap}} }
func (a session) Merging() bool            { return true }

type cumulate struct{ step, size int64 }

// CumulateWindows assigns each record to the windows that start at the
// beginning of its size-long period and end at each later multiple of step
// (Flink's CUMULATE): [s, s+step), [s, s+2·step), ..., [s, s+size).
func CumulateWindows(step, size time.Duration) WindowAssigner {
	return cumulate{step: step.Milliseconds(), size: size.Milliseconds()}
}

func (a cumulate) Assign(ts int64) []Window {
	start := floorMod(ts, a.size)
	var ws []Window
	for end := start + (floorMod(ts-start, a.step) + a.step); end <= start+a.size; end += a.step {
		ws = append(ws, Window{Start: start, End: end})
	}
	return ws
}
func (a cumulate) Merging() bool { return false }

// floorMod rounds ts down to a multiple of size (also for negative ts).
func floorMod(ts, size int64) int64 {
	r := ts % size
	if r < 0 {
		r += size
	}
	return ts - r
}

func checkAssigner(a WindowAssigner) error {
	switch a := a.(type) {
	case tumbling:
		if a.size <= 0 {
			return fmt.Errorf("tumbling window size must be at least 1ms, got %dms", a.size)
		}
	case sliding:
		if a.size <= 0 || a.slide <= 0 {
			return fmt.Errorf("sliding window size and slide must be at least 1ms, got %dms and %dms", a.size, a.slide)
		}
	case session:
		if a.gap <= 0 {
			return fmt.Errorf("session gap must be at least 1ms, got %dms", a.gap)
		}
	case cumulate:
		if a.step <= 0 || a.size <= 0 || a.size%a.step != 0 {
			return fmt.Errorf("cumulate window size (%dms) must be a positive multiple of its step (%dms)", a.size, a.step)
		}
	case nil:
		return errors.New("no window assigner")
	}
	return nil
}

// AggregateFunction folds records into an accumulator and derives a
// result, as Flink's AggregateFunction. Accumulators must be values: Add
// returns the new accumulator and must not modify one it was given in a
// way that changes the old value (a checkpoint may hold it).
type AggregateFunction[IN, ACC, OUT any] = state.AggregateFunction[IN, ACC, OUT]

// MergingAggregateFunction can also merge two accumulators; session
// windows need it.
type MergingAggregateFunction[IN, ACC, OUT any] interface {
	AggregateFunction[IN, ACC, OUT]
	Merge(a, b ACC) ACC
}

// WindowOptions configures a window operator.
type WindowOptions struct {
	// AllowedLateness keeps a window's state after the watermark passed
	// its end: a late record within it updates the window and emits its
	// result again. Records later than that go to the late output.
	AllowedLateness time.Duration
}

// WindowResult is the result of one window of one key.
type WindowResult[K comparable, OUT any] struct {
	Key    K
	Window Window
	Value  OUT
}

// windowOutput carries either a window result or a record too late for
// every window it belongs to.
type windowOutput[K comparable, T, OUT any] struct {
	Result WindowResult[K, OUT]
	Late   bool
	Record T
}

// WindowedStream is the output of a window operator: its results, and the
// records that arrived too late.
type WindowedStream[K comparable, T, OUT any] struct {
	all     Stream[windowOutput[K, T, OUT]]
	name    string
	results *Stream[WindowResult[K, OUT]]
	late    *Stream[T]
}

// Results returns the stream of window results.
func (w *WindowedStream[K, T, OUT]) Results() Stream[WindowResult[K, OUT]] {
	if w.results == nil {
		r := Map(Filter(w.all, w.name+".results_only", func(o windowOutput[K, T, OUT]) bool { return !o.Late }),
			w.name+".results", func(o windowOutput[K, T, OUT]) WindowResult[K, OUT] { return o.Result })
		w.results = &r
	}
	return *w.results
}

// Late returns the stream of records that arrived after every window they
// belong to had passed the watermark plus the allowed lateness (Flink's
// late-data side output).
func (w *WindowedStream[K, T, OUT]) Late() Stream[T] {
	if w.late == nil {
		l := Map(Filter(w.all, w.name+".late_only", func(o windowOutput[K, T, OUT]) bool { return o.Late }),
			w.name+".late", func(o windowOutput[K, T, OUT]) T { return o.Record })
		w.late = &l
	}
	return *w.late
}

// Aggregate folds the records of a keyed stream into event-time windows
// and emits each window's result when the watermark passes its end. The
// window state and timers are keyed state: checkpointed, restored, and
// redistributed by key group on rescale. Records need timestamps
// (AssignTimestamps upstream).
func Aggregate[K comparable, T, ACC, OUT any](ks KeyedStream[K, T], name string, assigner WindowAssigner,
	agg AggregateFunction[T, ACC, OUT], opts WindowOptions) *WindowedStream[K, T, OUT] {
	env := ks.stream.node.env
	if err := checkAssigner(assigner); err != nil {
		env.fail(fmt.Errorf("window operator %q: %w", name, err))
	}
	if opts.AllowedLateness < 0 {
		env.fail(fmt.Errorf("window operator %q: negative allowed lateness %v", name, opts.AllowedLateness))
	}
	var merge func(a, b ACC) ACC
	if assigner != nil && assigner.Merging() {
		m, ok := agg.(MergingAggregateFunction[T, ACC, OUT])
		if !ok {
			env.fail(fmt.Errorf("window operator %q: session windows merge accumulators; the aggregate function needs a Merge method", name))
		} else {
			merge = m.Merge
		}
	}
	checkStateTypes[K, ACC](env, name)
	w := &windowOp[K, T, ACC, OUT]{assigner: assigner, agg: agg, merge: merge, lateness: opts.AllowedLateness.Milliseconds()}
	all := KeyedProcess(ks, name, KeyedProcessFunction[K, T, struct{}, windowOutput[K, T, OUT]]{
		ProcessElement: w.element,
		OnTimer:        w.timer,
		State: func(b state.Backend, kc state.Codec[K]) (any, error) {
			return state.NewMap[K, Window, ACC](b, "windows", kc)
		},
	})
	return &WindowedStream[K, T, OUT]{all: all, name: name}
}

// windowOp keeps the accumulators of a key's open windows in a map state
// from window to accumulator: the backend copies a key's map once after a
// checkpoint captured it, not on every record. Accumulators are values:
// Add returns the new one and the state keeps it.
type windowOp[K comparable, T, ACC, OUT any] struct {
	assigner WindowAssigner
	agg      AggregateFunction[T, ACC, OUT]
	merge    func(a, b ACC) ACC
	lateness int64
}

type windowCtx[K comparable] = KeyedContext[K, struct{}]

func (w *windowOp[K, T, ACC, OUT]) windows(ctx *windowCtx[K]) *state.MapState[K, Window, ACC] {
	return ctx.ext.(*state.MapState[K, Window, ACC])
}

func (w *windowOp[K, T, ACC, OUT]) late(win Window, wm int64) bool {
	return wm != NoTimestamp && win.MaxTimestamp()+w.lateness <= wm
}

func (w *windowOp[K, T, ACC, OUT]) element(ctx *windowCtx[K], v T, out *Collector[windowOutput[K, T, OUT]]) error {
	ts := ctx.Timestamp()
	if ts == NoTimestamp {
		return errors.New("a record without a timestamp reached an event-time window (assign timestamps upstream)")
	}
	wm := ctx.CurrentWatermark()
	wins := w.windows(ctx)
	key := ctx.Key()
	var assigned []Window
	if w.merge != nil {
		// Merge first, then judge lateness on the merged window, as Flink
		// does: a late record that reaches an open session joins it. A
		// merged window is never late (the sessions it absorbed are still
		// open), so only a record whose own window merges with nothing can
		// be dropped here, and then nothing was stored.
		assigned = []Window{w.mergeSessions(ctx, wins, w.assigner.Assign(ts)[0])}
	} else {
		assigned = w.assigner.Assign(ts)
		if len(assigned) == 0 {
			// A gap between sliding windows smaller than their slide: the
			// record belongs to no window and is not late (Flink skips it).
			return nil
		}
	}
	dropped := true
	for _, win := range assigned {
		if w.late(win, wm) {
			continue
		}
		dropped = false
		acc, ok := wins.Get(key, win)
		if !ok {
			acc = w.agg.CreateAccumulator()
		}
		acc = w.agg.Add(acc, v)
		wins.Put(key, win, acc)
		if w.lateness > 0 {
			ctx.RegisterEventTimeTimer(win.MaxTimestamp() + w.lateness)
		}
		if wm == NoTimestamp || win.MaxTimestamp() > wm {
			ctx.RegisterEventTimeTimer(win.MaxTimestamp())
			continue
		}
		// Late, but within the allowed lateness: the window already
		// fired, so emit its updated result now (no timer: it would fire
		// it once more at the next watermark).
		out.CollectWithTimestamp(windowOutput[K, T, OUT]{Result: WindowResult[K, OUT]{Key: key, Window: win, Value: w.agg.Result(acc)}}, win.MaxTimestamp())
	}
	if dropped {
		out.Collect(windowOutput[K, T, OUT]{Late: true, Record: v})
	}
	return nil
}

// mergeSessions merges the new session window nw with every window of the
// key it intersects (touching counts, as in Flink), repeatedly, since a
// grown window may reach windows it did not intersect before. The merged
// windows' accumulators are merged into the result, which is stored under
// the merged window and their own entries are deleted. It returns the
// window the record belongs to.
func (w *windowOp[K, T, ACC, OUT]) mergeSessions(ctx *windowCtx[K], wins *state.MapState[K, Window, ACC], nw Window) Window {
	key := ctx.Key()
	var acc ACC
	found := false
	for {
		var hit []Window
		wins.Range(key, func(win Window, _ ACC) bool {
			if !(win.Start > nw.End || nw.Start > win.End) {
				hit = append(hit, win)
			}
			return true
		})
		if len(hit) == 0 {
			break
		}
		// In time order, whatever order the state gives them: merging
		// accumulators (a float sum, a session's rows) in the same order
		// every run keeps results equal across restores.
		slices.SortFunc(hit, func(a, b Window) int { return cmp.Compare(a.Start, b.Start) })
		for _, win := range hit {
			a, _ := wins.Get(key, win)
			if found {
				acc = w.merge(acc, a)
			} else {
				acc, found = a, true
			}
			wins.Remove(key, win)
			// The absorbed window's timers stay: another window of the key
			// may own a timer at the same time (an end meeting an expiry),
			// and a timer that finds no window ending at its time does
			// nothing.
			nw = Window{Start: min(win.Start, nw.Start), End: max(win.End, nw.End)}
		}
	}
	if found {
		wins.Put(key, nw, acc)
	}
	return nw
}

func (w *windowOp[K, T, ACC, OUT]) timer(ctx *windowCtx[K], ts int64, d TimeDomain, out *Collector[windowOutput[K, T, OUT]]) error {
	if d != EventTime {
		return nil
	}
	wins := w.windows(ctx)
	key := ctx.Key()
	if w.exact() {
		// Every window of a built-in fixed assigner holding ts is among
		// Assign(ts): the one ending at ts fires, the one ending at
		// ts-lateness expires; no need to visit the key's other windows
		// (a watermark that jumps leaves many open windows per key).
		for _, win := range w.assigner.Assign(ts) {
			if win.MaxTimestamp() != ts {
				continue
			}
			if acc, ok := wins.Get(key, win); ok {
				out.CollectWithTimestamp(windowOutput[K, T, OUT]{Result: WindowResult[K, OUT]{Key: key, Window: win, Value: w.agg.Result(acc)}}, win.MaxTimestamp())
				if w.lateness == 0 {
					wins.Remove(key, win)
				}
			}
		}
		if w.lateness > 0 {
			for _, win := range w.assigner.Assign(ts - w.lateness) {
				if win.MaxTimestamp() == ts-w.lateness {
					wins.Remove(key, win)
				}
			}
		}
		return nil
	}
	var expired []Window
	wins.Range(key, func(win Window, acc ACC) bool {
		if win.MaxTimestamp() == ts {
			out.CollectWithTimestamp(windowOutput[K, T, OUT]{Result: WindowResult[K, OUT]{Key: key, Window: win, Value: w.agg.Result(acc)}}, win.MaxTimestamp())
		}
		if win.MaxTimestamp()+w.lateness <= ts {
			expired = append(expired, win)
		}
		return true
	})
	for _, win := range expired {
		wins.Remove(key, win)
	}
	return nil
}

// exact reports whether the assigner is a built-in one of fixed windows,
// which assigns a timestamp to every window that holds it.
func (w *windowOp[K, T, ACC, OUT]) exact() bool {
	switch w.assigner.(type) {
	case tumbling, sliding, cumulate:
		return true
	}
	return false
}
