package clink

import (
	"fmt"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/runtime"
	"github.com/clinkstream/clink/state"
)

// IntervalJoin joins two keyed streams on their key and event time: a
// record a of the first stream meets every record b of the second with the
// same key and a.ts+lower <= b.ts <= a.ts+upper (Flink's interval join).
// fn sees each pair once; its results carry the later of the two
// timestamps. Both sides are buffered in keyed state until the watermark
// passes the last time they can match, then dropped; records that arrive
// behind the watermark are dropped, as in Flink.
func IntervalJoin[K comparable, A, B, U any](a KeyedStream[K, A], b KeyedStream[K, B], name string,
	lower, upper time.Duration, fn func(a A, b B, out *Collector[U]) error) Stream[U] {
	ua, ub := a.stream.node, b.stream.node
	env := ua.env
	lo, hi := lower.Milliseconds(), upper.Milliseconds()
	if lo > hi {
		env.fail(fmt.Errorf("interval join %q: lower bound %v is above upper bound %v", name, lower, upper))
	}
	if ub.env != env {
		env.fail(fmt.Errorf("interval join %q: streams belong to different environments", name))
	}
	checkStateTypes[K, []A](env, name)
	checkStateTypes[K, []B](env, name)
	n := env.newNode(name, env.opts.Parallelism)
	n.port = newPort[U]()
	n.inPorts = []portOps{ua.port, ub.port}
	maxPar := env.opts.MaxParallelism
	connect(ua, n, 0, partHash, a.selector(maxPar))
	connect(ub, n, 1, partHash, b.selector(maxPar))
	n.build = func(bc *buildCtx, o any) ([]any, producer, error) {
		down := o.(*out[U])
		cnt := bc.counters(name)
		col := &Collector[U]{o: down, c: cnt}
		m := &joinMember[K, A, B]{name: name, keyCodec: a.codec, lower: lo, upper: hi, wm: runtime.MinWatermark, opts: &env.opts}
		bc.add(m)
		emit := func(x A, y B, ts int64) error {
			col.ts = ts
			if err := fn(x, y, col); err != nil {
				return err
			}
			return col.err
		}
		wm := func(w int64) error {
			if err := m.onWatermark(w); err != nil {
				return err
			}
			return down.wm(w)
		}
		keyA, keyB := a.key, b.key
		inA := &out[A]{rec: func(v A, ts int64) error {
			cnt.in++
			if ts == NoTimestamp {
				return fmt.Errorf("interval join %q: a record of the first stream has no timestamp (assign timestamps upstream)", name)
			}
			if ts < m.wm {
				return nil // late
			}
			k := keyA(v)
			held := m.leftAt(k, ts)
			m.left.Put(k, ts, append(held, v))
			if len(held) == 0 {
				// The first record of (k, ts) sets the timer that drops them.
				m.timers.Register(EventTime, k, ts+hi+1)
			}
			var err error
			m.right.Range(k, func(bts int64, bs []B) bool {
				if bts < ts+lo || bts > ts+hi {
					return true
				}
				for _, y := range bs {
					if err = emit(v, y, max(ts, bts)); err != nil {
						return false
					}
				}
				return true
			})
			return err
		}, wm: wm}
		inB := &out[B]{rec: func(v B, ts int64) error {
			cnt.in++
			if ts == NoTimestamp {
				return fmt.Errorf("interval join %q: a record of the second stream has no timestamp (assign timestamps upstream)", name)
			}
			if ts < m.wm {
				return nil // late
			}
			k := keyB(v)
			held := m.rightAt(k, ts)
			m.right.Put(k, ts, append(held, v))
			if len(held) == 0 {
				m.timers.Register(EventTime, k, ts-lo+1)
			}
			var err error
			m.left.Range(k, func(ats int64, as []A) bool {
				if ts < ats+lo || ts > ats+hi {
					return true
				}
				for _, x := range as {
					if err = emit(x, v, max(ts, ats)); err != nil {
						return false
					}
				}
				return true
			})
			return err
		}, wm: wm}
		return []any{inA, inB}, nil, nil
	}
	return Stream[U]{node: n}
}

// joinMember buffers both sides of an interval join by key and timestamp.
// Each buffered (key, timestamp) of a side has a timer at the first
// watermark its records can no longer match at, which drops them. On the
// memory backend the timers are not state (state.UnkeptEventTimers): the
// buffers say where they are, and a restore sets them again from those.
// A timer that fires twice (one of each side at the same time) drops
// nothing the second time.
type joinMember[K comparable, A, B any] struct {
	name         string
	keyCodec     state.Codec[K]
	lower, upper int64
	wm           int64
	backend      state.Backend
	shared       *store.Shared
	opts         *Options
	left         *state.MapState[K, int64, []A]
	right        *state.MapState[K, int64, []B]
	timers       *state.Timers[K]
	backendCaptures
}

func (m *joinMember[K, A, B]) leftAt(k K, ts int64) []A {
	v, _ := m.left.Get(k, ts)
	return v[:len(v):len(v)] // never append into a slice a checkpoint holds
}

func (m *joinMember[K, A, B]) rightAt(k K, ts int64) []B {
	v, _ := m.right.Get(k, ts)
	return v[:len(v):len(v)]
}

// onWatermark drops the buffered records the watermark has passed the
// last matching time of (their cleanup timers).
func (m *joinMember[K, A, B]) onWatermark(wm int64) error {
	m.wm = wm
	return m.timers.Fire(EventTime, wm, func(k K, ts int64) error {
		// A left record at t matches until t+upper, a right one until
		// t-lower; their timers are at those times + 1.
		var dropA []int64
		m.left.Range(k, func(t int64, _ []A) bool {
			if t+m.upper < ts {
				dropA = append(dropA, t)
			}
			return true
		})
		for _, t := range dropA {
			m.left.Remove(k, t)
		}
		var dropB []int64
		m.right.Range(k, func(t int64, _ []B) bool {
			if t-m.lower < ts {
				dropB = append(dropB, t)
			}
			return true
		})
		for _, t := range dropB {
			m.right.Remove(k, t)
		}
		return nil
	})
}

func (m *joinMember[K, A, B]) uid() string { return m.name }

func (m *joinMember[K, A, B]) open(tc *runtime.TaskContext, rs restoreState) error {
	b, err := openBackend(m.opts, tc, m.name, rs)
	if err != nil {
		return err
	}
	m.backend, m.shared = b, tc.Shared
	if m.left, err = state.NewMap[K, int64, []A](m.backend, "left", m.keyCodec); err != nil {
		return err
	}
	if m.right, err = state.NewMap[K, int64, []B](m.backend, "right", m.keyCodec); err != nil {
		return err
	}
	if m.timers, err = state.NewTimers(m.backend, m.keyCodec, state.UnkeptEventTimers()); err != nil {
		return err
	}
	if m.timers.EventUnkept() {
		m.left.RangeAll(func(k K, t int64, _ []A) bool {
			m.timers.Register(EventTime, k, t+m.upper+1)
			return true
		})
		m.right.RangeAll(func(k K, t int64, _ []B) bool {
			m.timers.Register(EventTime, k, t-m.lower+1)
			return true
		})
	}
	if !rs.empty() {
		m.wm = rs.watermark()
	}
	return nil
}

func (m *joinMember[K, A, B]) snapshot(id checkpoint.ID) (*store.OperatorSnapshot, error) {
	build, err := m.deferredSnapshot(id)
	if err != nil {
		return nil, err
	}
	return build()
}

func (m *joinMember[K, A, B]) deferredSnapshot(id checkpoint.ID) (func() (*store.OperatorSnapshot, error), error) {
	return backendSnapshot(m.name, id, m.backend, m.shared, m.wm, &m.backendCaptures)
}

func (m *joinMember[K, A, B]) endOfInput() error { return nil }

func (m *joinMember[K, A, B]) close() error {
	if m.backend == nil {
		return nil
	}
	return m.backend.Close()
}
