package clink

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/metrics"
	"github.com/clinkstream/clink/runtime"
	"github.com/clinkstream/clink/state"
)

// node is one operator of the logical job graph.
type node struct {
	env         *Environment
	id          int
	name        string
	parallelism int
	// fixedParallelism: the operator cannot run wider (a file source).
	fixedParallelism bool
	inputs           []*edge
	outputs          []*edge
	// port is the operator's output type; nil for sinks.
	port portOps
	// inPorts are the types of the operator's logical inputs.
	inPorts []portOps
	// build creates the operator's member for one subtask, given its typed
	// output (an *out[T], nil for sinks). Operators with inputs return
	// their typed input per logical input (*out[In]); sources return a
	// producer.
	build func(bc *buildCtx, o any) (ins []any, prod producer, err error)
	// canUnalign: the operator's in-flight input can be captured.
	vertex *vertexPlan
}

// producer is the typed source member as the source chain drives it.
type producer interface {
	produce() (runtime.ProduceStatus, error)
}

// counters counts one operator's records in one subtask. The task
// goroutine increments plain fields; publish moves them to the registry's
// atomics when the chain flushes, so the per-record cost is an increment.
type counters struct {
	in, out int64
	m       *metrics.OperatorCounters
}

func (c *counters) publish() {
	if c.m == nil {
		return
	}
	if c.in != 0 {
		c.m.In.Add(c.in)
		c.in = 0
	}
	if c.out != 0 {
		c.m.Out.Add(c.out)
		c.out = 0
	}
}

// buildCtx collects the members of one task's chain while it is built.
type buildCtx struct {
	tc        *runtime.TaskContext
	batchSize int
	members   []member
	flushers  []flusher
	timed     []timedMember
	// preemptive are the members' state backends that persist changes
	// ahead of checkpoints; the chain asks them after each batch.
	preemptive []preemptive
	// restored are the channels of the members' state backends that
	// still restore in the background, closed when they are done.
	restored   []<-chan struct{}
	edgeIndex  map[*edge]int
	all        []*counters
	opts       *Options
	sourceProd producer
}

// counters returns the record counters of operator name in this subtask.
func (bc *buildCtx) counters(name string) *counters {
	c := &counters{m: bc.tc.Metrics.Operator(name, bc.tc.Subtask)}
	bc.all = append(bc.all, c)
	return c
}

func (bc *buildCtx) publish() {
	for _, c := range bc.all {
		c.publish()
	}
}

func (bc *buildCtx) add(m member) {
	bc.members = append(bc.members, m)
	if a, ok := m.(timedMember); ok {
		bc.timed = append(bc.timed, a)
	}
}

// vertexPlan is a chain: a head operator and the operators chained to it.
type vertexPlan struct {
	head  *node
	nodes []*node
	index int
}

func (env *Environment) newNode(name string, parallelism int) *node {
	n := &node{env: env, id: len(env.nodes), name: name, parallelism: parallelism}
	env.nodes = append(env.nodes, n)
	return n
}

func connect(from, to *node, input int, part partKind, newSelector func() any) {
	e := &edge{from: from, to: to, input: input, part: part, newSelector: newSelector}
	from.outputs = append(from.outputs, e)
	to.inputs = append(to.inputs, e)
}

// chainable reports whether e joins two operators into one task: a forward
// edge between equal parallelisms into a single-input operator, or a hash
// edge between two operators of parallelism 1, which sends every record to
// the one subtask as a forward edge would. Chained, the records of a keyed
// operator at parallelism 1 cross no channel and no core: a job's
// parallelism is the number of cores it keeps busy, about. At parallelism
// 2 the same edge is an exchange again; a restore finds each operator's
// state wherever the checkpointed job's chains held it (see
// runtime.Vertex.Operators).
func chainable(e *edge) bool {
	if len(e.to.inputs) != 1 || e.from.parallelism != e.to.parallelism {
		return false
	}
	if e.part == partHash {
		kc := e.to.env.opts.KeyedChaining
		return e.to.parallelism == 1 && (kc == nil || *kc)
	}
	return e.part == partForward
}

// plan turns the logical graph into the runtime's job graph.
func (env *Environment) plan() (*runtime.JobGraph, error) {
	if len(env.nodes) == 0 {
		return nil, errors.New("job has no operators")
	}
	seen := map[string]bool{}
	for _, n := range env.nodes {
		if !uidPattern.MatchString(n.name) {
			return nil, fmt.Errorf("operator name %q: use letters, digits, '_' and '.' only (it names the operator's checkpoint files)", n.name)
		}
		if seen[n.name] {
			return nil, fmt.Errorf("operator name %q is used twice; names identify operators in checkpoints and must be unique", n.name)
		}
		seen[n.name] = true
		if n.port != nil && len(n.outputs) == 0 {
			return nil, fmt.Errorf("the output of operator %q goes nowhere; give it a sink", n.name)
		}
	}
	// Nodes are created after their inputs, so creation order is a
	// topological order: assign chains front to back.
	var vertices []*vertexPlan
	for _, n := range env.nodes {
		if len(n.inputs) == 1 && chainable(n.inputs[0]) {
			v := n.inputs[0].from.vertex
			v.nodes = append(v.nodes, n)
			n.vertex = v
			continue
		}
		v := &vertexPlan{head: n, nodes: []*node{n}, index: len(vertices)}
		n.vertex = v
		vertices = append(vertices, v)
	}
	g := &runtime.JobGraph{}
	for _, v := range vertices {
		rv := &runtime.Vertex{UID: v.head.name, Parallelism: v.head.parallelism}
		for _, n := range v.nodes {
			rv.Operators = append(rv.Operators, n.name)
		}
		if len(v.head.inputs) == 0 {
			rv.NewSource = func(int) runtime.Source { return &sourceChain{chain: chain{plan: v, opts: &env.opts}} }
		} else {
			rv.NewOperator = func(int) runtime.Operator { return &operatorChain{chain: chain{plan: v, opts: &env.opts}} }
		}
		g.Vertices = append(g.Vertices, rv)
	}
	// Edges between vertices, numbered per upstream vertex in order.
	for _, v := range vertices {
		for _, n := range v.nodes {
			for _, e := range n.outputs {
				if e.to.vertex == v && chainable(e) {
					continue
				}
				// A forward edge that is not chained (into a union) connects
				// subtask i to subtask i when the parallelisms match.
				pointwise := e.part == partForward && e.from.parallelism == e.to.parallelism
				g.Edges = append(g.Edges, runtime.Edge{From: v.index, To: e.to.vertex.index, Input: e.input, Pointwise: pointwise})
			}
		}
	}
	return g, nil
}

// chain is what operatorChain and sourceChain share: the members of one
// task and their wiring.
type chain struct {
	chainListeners
	plan *vertexPlan
	opts *Options
	bc   *buildCtx
	// ins are the head's typed inputs (operator chains only).
	ins []any
}

// build wires the chain's members back to front for one subtask.
func (c *chain) build(tc *runtime.TaskContext) error {
	bc := &buildCtx{
		tc:        tc,
		batchSize: c.opts.BatchSize,
		edgeIndex: map[*edge]int{},
		opts:      c.opts,
	}
	// Outgoing exchange edges in the same order plan numbered them.
	k := 0
	for _, n := range c.plan.nodes {
		for _, e := range n.outputs {
			if e.to.vertex == c.plan && chainable(e) {
				continue
			}
			bc.edgeIndex[e] = k
			k++
		}
	}
	c.bc = bc
	var build func(n *node) ([]any, error)
	build = func(n *node) ([]any, error) {
		var outs []any
		for _, e := range n.outputs {
			if e.to.vertex == c.plan && chainable(e) {
				ins, err := build(e.to)
				if err != nil {
					return nil, err
				}
				outs = append(outs, ins[0])
				continue
			}
			outs = append(outs, n.port.writer(bc, bc.edgeIndex[e], e))
		}
		var o any
		if n.port != nil {
			o = n.port.fanout(outs)
		}
		ins, prod, err := n.build(bc, o)
		if err != nil {
			return nil, fmt.Errorf("building operator %s: %w", n.name, err)
		}
		if prod != nil {
			bc.sourceProd = prod
		}
		return ins, nil
	}
	ins, err := build(c.plan.head)
	if err != nil {
		return err
	}
	c.ins = ins
	// Members were added back to front; restore chain order.
	for i, j := 0, len(bc.members)-1; i < j; i, j = i+1, j-1 {
		bc.members[i], bc.members[j] = bc.members[j], bc.members[i]
	}
	if err := c.openMembers(tc); err != nil {
		return err
	}
	var ls []listenerMember
	for _, m := range bc.members {
		if l, ok := m.(listenerMember); ok {
			ls = append(ls, l)
		}
		if h, ok := m.(backendHolder); ok {
			if p, ok := h.stateBackend().(preemptive); ok {
				bc.preemptive = append(bc.preemptive, p)
			}
			if r, ok := h.stateBackend().(backgroundRestorer); ok {
				if ch := r.Restored(); ch != nil {
					bc.restored = append(bc.restored, ch)
				}
			}
		}
	}
	c.members.Store(&ls)
	return nil
}

// restoreStateOf returns what member uid restores from: its snapshots
// where the checkpoint holds them (tc.RestoredOperators), at the
// parallelism it was checkpointed at, or else its entry in the task's own
// snapshots.
func restoreStateOf(tc *runtime.TaskContext, uid string) restoreState {
	var rs restoreState
	if tc.RestoredOperators != nil {
		switch list := tc.RestoredOperators[uid]; {
		case len(list) == 0:
		case len(list) == tc.Parallelism:
			rs.own = list[tc.Subtask]
		default:
			rs.rescaled, rs.from, rs.to = list, len(list), tc.Parallelism
		}
		return rs
	}
	if tc.Restored != nil {
		rs.own = tc.Restored.Operator(uid)
	}
	if len(tc.Rescaled) > 0 {
		rs.from, rs.to = tc.Rescaled[0].Parallelism, tc.Parallelism
		for _, snap := range tc.Rescaled {
			if op := snap.Operator(uid); op != nil {
				rs.rescaled = append(rs.rescaled, op)
			}
		}
	}
	return rs
}

// openMembers opens the chain's members in chain order and restores their
// state. When two or more keyed or join operators restore state, they
// open on goroutines of their own, at once, as they would in tasks of
// their own (a join and the aggregations after it, chained at parallelism
// 1); a panic there is the chain's error, as on the task goroutine. The
// first error in chain order is returned; no member opens after a failed
// one on the task goroutine.
func (c *chain) openMembers(tc *runtime.TaskContext) error {
	bc := c.bc
	rss := make([]restoreState, len(bc.members))
	restores := make([]bool, len(bc.members)) // a keyed operator with state
	n := 0
	for i, m := range bc.members {
		rss[i] = restoreStateOf(tc, m.uid())
		_, keyed := m.(backendHolder)
		if restores[i] = keyed && !rss[i].empty(); restores[i] {
			n++
		}
	}
	errs := make([]error, len(bc.members))
	var wg sync.WaitGroup
	for i, m := range bc.members {
		if restores[i] && n > 1 {
			wg.Go(func() {
				defer func() {
					if r := recover(); r != nil {
						errs[i] = runtime.PanicError(r)
					}
				}()
				errs[i] = m.open(tc, rss[i])
			})
			continue
		}
		if errs[i] = m.open(tc, rss[i]); errs[i] != nil {
			break
		}
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("opening operator %s: %w", bc.members[i].uid(), err)
		}
	}
	return nil
}

// deferredMember is a member whose state freezes at the barrier and is
// encoded later on the snapshot worker.
type deferredMember interface {
	deferredSnapshot(id checkpoint.ID) (func() (*store.OperatorSnapshot, error), error)
}

func (c *chain) Snapshot(id checkpoint.ID) ([]store.OperatorSnapshot, error) {
	build, err := c.SnapshotDeferred(id)
	if err != nil {
		return nil, err
	}
	return build()
}

// SnapshotDeferred implements runtime.DeferredSnapshotter: members freeze
// their state now, and the returned function encodes it.
func (c *chain) SnapshotDeferred(id checkpoint.ID) (func() ([]store.OperatorSnapshot, error), error) {
	builds := make([]func() (*store.OperatorSnapshot, error), len(c.bc.members))
	for i, m := range c.bc.members {
		if d, ok := m.(deferredMember); ok {
			b, err := d.deferredSnapshot(id)
			if err != nil {
				return nil, fmt.Errorf("snapshotting operator %s: %w", m.uid(), err)
			}
			builds[i] = b
			continue
		}
		s, err := m.snapshot(id)
		if err != nil {
			return nil, fmt.Errorf("snapshotting operator %s: %w", m.uid(), err)
		}
		if s == nil {
			s = &store.OperatorSnapshot{UID: m.uid(), Watermark: runtime.MinWatermark}
		}
		builds[i] = func() (*store.OperatorSnapshot, error) { return s, nil }
	}
	return func() ([]store.OperatorSnapshot, error) {
		ops := make([]store.OperatorSnapshot, 0, len(builds))
		for i, b := range builds {
			s, err := b()
			if err != nil {
				return nil, fmt.Errorf("snapshotting operator %s: %w", c.bc.members[i].uid(), err)
			}
			ops = append(ops, *s)
		}
		return ops, nil
	}, nil
}

// Restored implements runtime.Restorer.
func (c *chain) Restored() <-chan struct{} { return state.AllClosed(c.bc.restored) }

func (c *chain) Flush() error {
	for _, f := range c.bc.flushers {
		if err := f.flush(); err != nil {
			return err
		}
	}
	c.bc.publish()
	return nil
}

// NextDeadline implements runtime.Timed over the chain's timed members.
func (c *chain) NextDeadline() (time.Time, bool) {
	var first time.Time
	found := false
	for _, m := range c.bc.timed {
		if d, ok := m.deadline(); ok && (!found || d.Before(first)) {
			first, found = d, true
		}
	}
	return first, found
}

// OnDeadline implements runtime.Timed: it runs every member whose deadline
// passed.
func (c *chain) OnDeadline(now time.Time) error {
	for _, m := range c.bc.timed {
		if d, ok := m.deadline(); ok && !now.Before(d) {
			if err := m.onDeadline(now); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *chain) endOfInput() error {
	for _, m := range c.bc.members {
		if err := m.endOfInput(); err != nil {
			return fmt.Errorf("ending input of operator %s: %w", m.uid(), err)
		}
	}
	return nil
}

func (c *chain) Close() error {
	if c.bc == nil {
		return nil
	}
	var errs []error
	for _, m := range c.bc.members {
		if err := m.close(); err != nil {
			errs = append(errs, fmt.Errorf("closing operator %s: %w", m.uid(), err))
		}
	}
	c.bc.publish()
	return errors.Join(errs...)
}

// operatorChain is a chain whose head has inputs.
type operatorChain struct {
	chain
	feeders []feedFunc
	wm      func(int64) error
}

func (c *operatorChain) Open(tc *runtime.TaskContext) error {
	if err := c.build(tc); err != nil {
		return err
	}
	head := c.plan.head
	c.feeders = make([]feedFunc, len(c.ins))
	for i, in := range c.ins {
		c.feeders[i] = head.inPorts[i].feeder(in)
	}
	c.wm = head.inPorts[0].watermark(c.ins[0])
	return nil
}

func (c *operatorChain) ProcessBatch(input int, b runtime.Batch) error {
	if _, err := c.feeders[input](b, 0, nil); err != nil {
		return err
	}
	return c.persistPreemptively()
}

// ProcessBatchFrom lets the runtime take an unaligned barrier between two
// records of a batch (runtime.ResumableOperator): a chain that is slow per
// record would otherwise hold the checkpoint back by a whole batch.
func (c *operatorChain) ProcessBatchFrom(input int, b runtime.Batch, from int, in *runtime.Interrupt) (int, error) {
	next, err := c.feeders[input](b, from, in)
	if err != nil {
		return next, err
	}
	return next, c.persistPreemptively()
}

// persistPreemptively lets the chain's state backends write the changes
// gathered since their last capture ahead of the next checkpoint; it runs
// between two records.
func (c *chain) persistPreemptively() error {
	for _, p := range c.bc.preemptive {
		if err := p.PersistPreemptively(); err != nil {
			return fmt.Errorf("persisting state changes ahead of a checkpoint: %w", err)
		}
	}
	return nil
}

func (c *operatorChain) ProcessWatermark(wm int64) error { return c.wm(wm) }

func (c *operatorChain) EndOfInput() error { return c.endOfInput() }

// CanUnalign reports whether the records of every input can be encoded;
// a chain reading a type that cannot (it holds a func or an interface)
// takes aligned checkpoints only.
func (c *operatorChain) CanUnalign() bool {
	for _, p := range c.plan.head.inPorts {
		if !p.encodable() {
			return false
		}
	}
	return true
}

func (c *operatorChain) EncodeBatch(input int, b runtime.Batch, dst []byte) []byte {
	return c.plan.head.inPorts[input].encode(b, 0, dst)
}

// EncodeBatchFrom encodes the records of b from index from on, as
// EncodeBatch encodes a batch of only those.
func (c *operatorChain) EncodeBatchFrom(input int, b runtime.Batch, from int, dst []byte) []byte {
	return c.plan.head.inPorts[input].encode(b, from, dst)
}

func (c *operatorChain) DecodeBatch(input int, data []byte) (runtime.Batch, error) {
	return c.plan.head.inPorts[input].decode(data)
}

// sourceChain is a chain whose head is a source.
type sourceChain struct {
	chain
}

func (c *sourceChain) Open(tc *runtime.TaskContext) error { return c.build(tc) }

func (c *sourceChain) Produce() (runtime.ProduceStatus, error) {
	st, err := c.bc.sourceProd.produce()
	if err != nil || len(c.bc.preemptive) == 0 {
		return st, err
	}
	// A keyed operator chained to the source (at parallelism 1) writes
	// its state ahead of checkpoints as in a task of its own.
	return st, c.persistPreemptively()
}

func (c *sourceChain) EndOfInput() error { return c.endOfInput() }
