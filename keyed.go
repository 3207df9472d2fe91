package clink

import (
	"fmt"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/runtime"
	"github.com/clinkstream/clink/state"
)

// KeyedStream is a stream partitioned by a key: all records with the same
// key go to the same subtask of the next operator, which can keep state per
// key.
type KeyedStream[K comparable, T any] struct {
	stream Stream[T]
	key    func(T) K
	codec  state.Codec[K]
}

// KeyBy partitions s by key. Keys are hashed from their encoding (see
// state.CodecFor), so equal keys land in the same key group in every run.
func KeyBy[T any, K comparable](s Stream[T], key func(T) K) KeyedStream[K, T] {
	return KeyedStream[K, T]{stream: s, key: key, codec: state.CodecFor[K]()}
}

// selector returns the hash-partitioning function of the stream for one
// writer (key hashers keep scratch space, so each writer gets its own).
func (ks KeyedStream[K, T]) selector(maxParallelism int) func() any {
	return func() any {
		h := state.HasherFor(ks.codec)
		key := ks.key
		return func(v T, targets int) int {
			kg := state.KeyGroupFor(h(key(v)), maxParallelism)
			return state.SubtaskForKeyGroup(kg, maxParallelism, targets)
		}
	}
}

// KeyedContext is the view of a keyed operator on the record being
// processed: its key, timestamp, and the key's value state.
type KeyedContext[K comparable, V any] struct {
	key     K
	ts      int64
	wm      int64
	value   *state.ValueState[K, V]
	timers  *state.Timers[K]
	subtask int
	// ext is the operator's own further state (see
	// KeyedProcessFunction.state), nil without.
	ext any
}

// TimeDomain says which clock a timer follows: EventTime or ProcessingTime.
type TimeDomain = state.TimeDomain

const (
	// EventTime timers fire when the operator's watermark reaches them.
	EventTime = state.EventTime
	// ProcessingTime timers fire when the wall clock reaches them.
	ProcessingTime = state.ProcessingTime
)

// RegisterEventTimeTimer sets a timer of the current key that fires when
// the watermark reaches ts (milliseconds). Timers are checkpointed, unless
// the operator sets EventTimerOf and its state is on the memory backend.
func (c *KeyedContext[K, V]) RegisterEventTimeTimer(ts int64) {
	c.timers.Register(EventTime, c.key, ts)
}

// RegisterProcessingTimeTimer sets a timer of the current key that fires
// when the wall clock reaches ts (Unix milliseconds).
func (c *KeyedContext[K, V]) RegisterProcessingTimeTimer(ts int64) {
	c.timers.Register(ProcessingTime, c.key, ts)
}

// DeleteEventTimeTimer removes the current key's event-time timer at ts.
// Timers derived from the value state (EventTimerOf, on the memory
// backend) are not removed: the timer fires and OnTimer finds it does
// not apply.
func (c *KeyedContext[K, V]) DeleteEventTimeTimer(ts int64) { c.timers.Delete(EventTime, c.key, ts) }

// DeleteProcessingTimeTimer removes the current key's processing-time
// timer at ts.
func (c *KeyedContext[K, V]) DeleteProcessingTimeTimer(ts int64) {
	c.timers.Delete(ProcessingTime, c.key, ts)
}

// CurrentProcessingTime returns the wall clock in Unix milliseconds.
func (c *KeyedContext[K, V]) CurrentProcessingTime() int64 { return time.Now().UnixMilli() }

// Key returns the key of the current record.
func (c *KeyedContext[K, V]) Key() K { return c.key }

// Timestamp returns the event time of the current record in milliseconds,
// or NoTimestamp.
func (c *KeyedContext[K, V]) Timestamp() int64 { return c.ts }

// CurrentWatermark returns the operator's current event-time watermark.
func (c *KeyedContext[K, V]) CurrentWatermark() int64 { return c.wm }

// Value returns the current key's state and whether it is set.
func (c *KeyedContext[K, V]) Value() (V, bool) { return c.value.Get(c.key) }

// SetValue sets the current key's state.
func (c *KeyedContext[K, V]) SetValue(v V) { c.value.Put(c.key, v) }

// UpdateValue sets the current key's state to what f returns for the
// current one (ok false: none); keep false clears it. With
// KeyedProcessFunction.ValueCopy set, f may change the value it gets in
// place and return it; otherwise it must treat it as read-only (a
// checkpoint may still be writing it out).
func (c *KeyedContext[K, V]) UpdateValue(f func(v V, ok bool) (nv V, keep bool)) {
	c.value.Update(c.key, f)
}

// Clear removes the current key's state.
func (c *KeyedContext[K, V]) Clear() { c.value.Delete(c.key) }

// State returns what KeyedProcessFunction.State registered for this
// subtask, or nil without it.
func (c *KeyedContext[K, V]) State() any { return c.ext }

// Subtask returns the index of the subtask processing the record.
func (c *KeyedContext[K, V]) Subtask() int { return c.subtask }

// keyedMember holds one keyed operator's state backend and its value
// state. The backend freezes its tables at the barrier (copy-on-write) and
// the snapshot worker encodes them.
type keyedMember[K comparable, V any] struct {
	name     string
	keyCodec state.Codec[K]
	backend  state.Backend
	shared   *store.Shared
	opts     *Options
	ctx      *KeyedContext[K, V]
	backendCaptures
	// onTimer runs a fired timer of ctx.key at ctx.ts; nil: timers fire
	// silently.
	onTimer func(domain TimeDomain) error
	// extState registers further keyed state (KeyedProcessFunction.State).
	extState func(b state.Backend, kc state.Codec[K]) (any, error)
	// valueCodec and valueCopy are KeyedProcessFunction's, or nil.
	valueCodec state.Codec[V]
	valueCopy  func(V) V
	// eventTimerOf is the function's EventTimerOf, or nil.
	eventTimerOf EventTimerOf[K, V]
}

func (m *keyedMember[K, V]) uid() string { return m.name }

func (m *keyedMember[K, V]) open(tc *runtime.TaskContext, rs restoreState) error {
	b, err := openBackend(m.opts, tc, m.name, rs)
	if err != nil {
		return err
	}
	m.backend, m.shared = b, tc.Shared
	vc := m.valueCodec
	if vc == nil {
		vc = state.CodecFor[V]()
	}
	var opts []state.StateOption
	if m.valueCopy != nil {
		opts = append(opts, state.WithCopy(m.valueCopy))
	}
	value, err := state.NewValue(m.backend, "value", m.keyCodec, vc, opts...)
	if err != nil {
		return err
	}
	var topts []state.TimersOption
	if m.eventTimerOf != nil {
		topts = append(topts, state.UnkeptEventTimers())
	}
	timers, err := state.NewTimers(m.backend, m.keyCodec, topts...)
	if err != nil {
		return err
	}
	m.ctx.value, m.ctx.timers = value, timers
	if timers.EventUnkept() {
		// The restored keys' timers, from their values.
		value.Range(func(k K, v V) bool {
			if ts, ok := m.eventTimerOf(k, v); ok {
				timers.Register(state.EventTime, k, ts)
			}
			return true
		})
	}
	if !rs.empty() {
		// The watermark the operator had reached at the checkpoint: a
		// record replayed after a restore that was late then is late now,
		// and windows that fired do not open again.
		m.ctx.wm = rs.watermark()
	}
	if m.extState != nil {
		ext, err := m.extState(m.backend, m.keyCodec)
		if err != nil {
			return err
		}
		m.ctx.ext = ext
	}
	return nil
}

// fire runs the timers of domain d due at upTo.
func (m *keyedMember[K, V]) fire(d TimeDomain, upTo int64) error {
	return m.ctx.timers.Fire(d, upTo, func(k K, ts int64) error {
		m.ctx.key, m.ctx.ts = k, ts
		if m.onTimer == nil {
			return nil
		}
		return m.onTimer(d)
	})
}

// watermark fires the event-time timers the watermark passed.
func (m *keyedMember[K, V]) watermark(wm int64) error {
	m.ctx.wm = wm
	return m.fire(EventTime, wm)
}

// deadline implements timedMember: the earliest processing-time timer.
func (m *keyedMember[K, V]) deadline() (time.Time, bool) {
	if m.ctx.timers == nil {
		return time.Time{}, false
	}
	ts, ok := m.ctx.timers.Next(ProcessingTime)
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(ts), true
}

func (m *keyedMember[K, V]) onDeadline(now time.Time) error {
	return m.fire(ProcessingTime, now.UnixMilli())
}

func (m *keyedMember[K, V]) snapshot(id checkpoint.ID) (*store.OperatorSnapshot, error) {
	build, err := m.deferredSnapshot(id)
	if err != nil {
		return nil, err
	}
	return build()
}

// deferredSnapshot freezes the backend and returns the encoding step.
func (m *keyedMember[K, V]) deferredSnapshot(id checkpoint.ID) (func() (*store.OperatorSnapshot, error), error) {
	return backendSnapshot(m.name, id, m.backend, m.shared, m.ctx.wm, &m.backendCaptures)
}

func (m *keyedMember[K, V]) endOfInput() error { return nil }

func (m *keyedMember[K, V]) close() error {
	if m.backend == nil {
		return nil
	}
	return m.backend.Close()
}

// ProcessFunc is the function of a keyed Process operator: it sees each
// record with its key's context and emits any number of results.
type ProcessFunc[K comparable, T, V, U any] func(ctx *KeyedContext[K, V], in T, out *Collector[U]) error

// Process applies fn to every record of a keyed stream, with a value state
// of type V per key that is checkpointed and restored.
func Process[K comparable, T, V, U any](ks KeyedStream[K, T], name string, fn ProcessFunc[K, T, V, U]) Stream[U] {
	return KeyedProcess(ks, name, KeyedProcessFunction[K, T, V, U]{ProcessElement: fn})
}

// KeyedProcessFunction is the logic of a keyed operator with timers, as
// Flink's KeyedProcessFunction.
type KeyedProcessFunction[K comparable, T, V, U any] struct {
	// ProcessElement handles one record.
	ProcessElement ProcessFunc[K, T, V, U]
	// OnTimer handles a timer of ctx.Key() that fired at ts; ctx's value
	// state is the key's. Results carry the timer's timestamp.
	OnTimer func(ctx *KeyedContext[K, V], ts int64, domain TimeDomain, out *Collector[U]) error
	// ValueCodec, when set, encodes the value state in checkpoints instead
	// of state.CodecFor[V]: for values the reflection codec cannot encode
	// (interfaces) or encodes slowly.
	ValueCodec state.Codec[V]
	// ValueCopy, when set, deep-copies a value; it lets
	// KeyedContext.UpdateValue hand out values for change in place (see
	// state.WithCopy).
	ValueCopy func(V) V
	// State, when set, registers the operator's further keyed state with
	// each subtask's backend after the value state and timers (state.NewMap,
	// state.NewValue, ...; each under a name of its own other than "value"
	// and the timers'); what it returns is KeyedContext.State. The window
	// operator keeps its accumulators per key and window this way.
	State func(b state.Backend, kc state.Codec[K]) (any, error)
	// EventTimerOf, when set, derives the event-time timers from the value
	// state instead of checkpointing them (see EventTimerOf).
	EventTimerOf EventTimerOf[K, V]
}

// EventTimerOf returns when a key whose value is v needs its event-time
// timer (ok false: it needs none). Set on a keyed operator, it keeps the
// operator's event-time timers out of its checkpoints on the memory
// backend (state.UnkeptEventTimers): registering one writes no state, a
// timer registered twice fires twice, DeleteEventTimeTimer does nothing,
// and after a restore each key gets one timer, at EventTimerOf of its
// value. OnTimer must therefore check the key's value and do nothing when
// the timer no longer applies. On a bytes backend (pebble) timers stay
// checkpointed and EventTimerOf is not called.
type EventTimerOf[K comparable, V any] func(k K, v V) (ts int64, ok bool)

// KeyedProcess applies f to every record of a keyed stream, with a value
// state of type V and timers per key, both checkpointed and restored (the
// event-time timers derived from the value instead with EventTimerOf).
// Event-time timers fire when the operator's watermark passes them, before
// the watermark goes downstream.
func KeyedProcess[K comparable, T, V, U any](ks KeyedStream[K, T], name string, f KeyedProcessFunction[K, T, V, U]) Stream[U] {
	up := ks.stream.node
	env := up.env
	if f.ValueCodec == nil {
		checkStateTypes[K, V](env, name)
	} else {
		checkStateTypes[K, struct{}](env, name)
	}
	if f.ProcessElement == nil {
		env.fail(fmt.Errorf("keyed process %q: ProcessElement is nil", name))
	}
	n := env.newNode(name, env.opts.Parallelism)
	n.port = newPort[U]()
	n.inPorts = []portOps{up.port}
	connect(up, n, 0, partHash, ks.selector(env.opts.MaxParallelism))
	n.build = func(bc *buildCtx, o any) ([]any, producer, error) {
		ctx := &KeyedContext[K, V]{wm: runtime.MinWatermark, subtask: bc.tc.Subtask}
		m := &keyedMember[K, V]{name: name, keyCodec: ks.codec, ctx: ctx, opts: &env.opts, extState: f.State,
			valueCodec: f.ValueCodec, valueCopy: f.ValueCopy, eventTimerOf: f.EventTimerOf}
		bc.add(m)
		cnt := bc.counters(name)
		down := o.(*out[U])
		col := &Collector[U]{o: down, c: cnt}
		m.onTimer = timerHook(f.OnTimer, ctx, col)
		key, fn := ks.key, f.ProcessElement
		in := &out[T]{
			rec: func(v T, ts int64) error {
				cnt.in++
				ctx.key, ctx.ts = key(v), ts
				col.ts = ts
				if err := fn(ctx, v, col); err != nil {
					return err
				}
				return col.err
			},
			wm: func(wm int64) error {
				if err := m.watermark(wm); err != nil {
					return err
				}
				return down.wm(wm)
			},
		}
		return []any{in}, nil, nil
	}
	return Stream[U]{node: n}
}

// timerHook returns the keyedMember.onTimer that runs onTimer with the
// operator's context and collector (nil for a nil onTimer).
func timerHook[K comparable, V, U any](onTimer func(*KeyedContext[K, V], int64, TimeDomain, *Collector[U]) error, ctx *KeyedContext[K, V], col *Collector[U]) func(TimeDomain) error {
	if onTimer == nil {
		return nil
	}
	return func(d TimeDomain) error {
		col.ts = ctx.ts
		if err := onTimer(ctx, ctx.ts, d, col); err != nil {
			return err
		}
		return col.err
	}
}

// ConnectedStreams are two keyed streams with the same key type whose
// records meet in one operator (KeyedCoProcess).
type ConnectedStreams[K comparable, A, B any] struct {
	a KeyedStream[K, A]
	b KeyedStream[K, B]
}

// Connect joins two keyed streams with the same key type.
func Connect[K comparable, A, B any](a KeyedStream[K, A], b KeyedStream[K, B]) ConnectedStreams[K, A, B] {
	return ConnectedStreams[K, A, B]{a: a, b: b}
}

// CoProcess processes the records of both connected streams with shared
// value state per key: fnA for records of the first stream, fnB for the
// second. The operator has two inputs; its barrier alignment (aligned or
// unaligned) is what keeps the shared state consistent.
func CoProcess[K comparable, A, B, V, U any](cs ConnectedStreams[K, A, B], name string,
	fnA ProcessFunc[K, A, V, U], fnB ProcessFunc[K, B, V, U]) Stream[U] {
	return KeyedCoProcess(cs, name, KeyedCoProcessFunction[K, A, B, V, U]{ProcessElement1: fnA, ProcessElement2: fnB})
}

// KeyedCoProcessFunction is the logic of a keyed two-input operator with
// timers, as Flink's KeyedCoProcessFunction.
type KeyedCoProcessFunction[K comparable, A, B, V, U any] struct {
	// ProcessElement1 and ProcessElement2 handle a record of the first and
	// of the second stream.
	ProcessElement1 ProcessFunc[K, A, V, U]
	ProcessElement2 ProcessFunc[K, B, V, U]
	// OnTimer handles a timer of ctx.Key() that fired at ts, as
	// KeyedProcessFunction.OnTimer; nil: timers fire silently.
	OnTimer func(ctx *KeyedContext[K, V], ts int64, domain TimeDomain, out *Collector[U]) error
	// EventTimerOf, when set, derives the event-time timers from the value
	// state instead of checkpointing them (see EventTimerOf).
	EventTimerOf EventTimerOf[K, V]
}

// KeyedCoProcess is CoProcess with timers: event-time timers fire when
// the operator's watermark (the least of both inputs') passes them,
// before the watermark goes downstream.
func KeyedCoProcess[K comparable, A, B, V, U any](cs ConnectedStreams[K, A, B], name string, f KeyedCoProcessFunction[K, A, B, V, U]) Stream[U] {
	ua, ub := cs.a.stream.node, cs.b.stream.node
	env := ua.env
	if ub.env != env {
		env.fail(fmt.Errorf("co-process %q: streams belong to different environments", name))
	}
	checkStateTypes[K, V](env, name)
	if f.ProcessElement1 == nil || f.ProcessElement2 == nil {
		env.fail(fmt.Errorf("co-process %q: ProcessElement1 or ProcessElement2 is nil", name))
	}
	n := env.newNode(name, env.opts.Parallelism)
	n.port = newPort[U]()
	n.inPorts = []portOps{ua.port, ub.port}
	maxPar := env.opts.MaxParallelism
	connect(ua, n, 0, partHash, cs.a.selector(maxPar))
	connect(ub, n, 1, partHash, cs.b.selector(maxPar))
	n.build = func(bc *buildCtx, o any) ([]any, producer, error) {
		ctx := &KeyedContext[K, V]{wm: runtime.MinWatermark, subtask: bc.tc.Subtask}
		m := &keyedMember[K, V]{name: name, keyCodec: cs.a.codec, ctx: ctx, opts: &env.opts, eventTimerOf: f.EventTimerOf}
		bc.add(m)
		down := o.(*out[U])
		cnt := bc.counters(name)
		col := &Collector[U]{o: down, c: cnt}
		m.onTimer = timerHook(f.OnTimer, ctx, col)
		wm := func(wm int64) error {
			if err := m.watermark(wm); err != nil {
				return err
			}
			return down.wm(wm)
		}
		keyA, keyB, fnA, fnB := cs.a.key, cs.b.key, f.ProcessElement1, f.ProcessElement2
		inA := &out[A]{rec: func(v A, ts int64) error {
			cnt.in++
			ctx.key, ctx.ts, col.ts = keyA(v), ts, ts
			if err := fnA(ctx, v, col); err != nil {
				return err
			}
			return col.err
		}, wm: wm}
		inB := &out[B]{rec: func(v B, ts int64) error {
			cnt.in++
			ctx.key, ctx.ts, col.ts = keyB(v), ts, ts
			if err := fnB(ctx, v, col); err != nil {
				return err
			}
			return col.err
		}, wm: wm}
		return []any{inA, inB}, nil, nil
	}
	return Stream[U]{node: n}
}

// checkStateTypes refuses key and state types that cannot be checkpointed.
func checkStateTypes[K, V any](env *Environment, name string) {
	if err := state.CheckCodec[K](); err != nil {
		env.fail(fmt.Errorf("operator %q: its key cannot be checkpointed: %w", name, err))
	}
	if err := state.CheckCodec[V](); err != nil {
		env.fail(fmt.Errorf("operator %q: its state cannot be checkpointed: %w", name, err))
	}
}
