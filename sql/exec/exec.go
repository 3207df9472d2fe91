// Package exec turns a physical SQL plan (package planner) into a clink
// job: every plan node becomes operators of the root clink API over
// types.Row, named by the node's uid.
//
//	TableSourceScan    clink.FromGenerator (datagen), clink.FromSource
//	                   (filesystem: connectors/filesystem's file source;
//	                   nexmark), one source per scan
//	Calc               clink.FlatMap: chained into the task of its input, one
//	                   FlatMap with the Calcs that feed it alone
//	WatermarkAssigner  clink.AssignTimestamps, bounded out-of-orderness
//	GroupAggregate     clink.KeyBy on the encoded group key + clink.KeyedProcess,
//	                   accumulators (sql/expr) encoded in the key's value state;
//	                   DISTINCT values one entry each in a second keyed
//	                   state (distinct.go)
//	WindowTableFunction clink.FlatMap: a row per window with its bounds;
//	                   SESSION: clink.Aggregate with session windows keyed by
//	                   the PARTITION BY columns, holding the rows
//	WindowAggregate    clink.KeyBy on the encoded group key + clink.KeyedProcess:
//	                   the key's open windows with live accumulators in value
//	                   state, one event-time timer per key (windowagg.go);
//	                   HOP and CUMULATE: per-key slices merged when a
//	                   window fires (windowslice.go);
//	                   SESSION: clink.Aggregate with accumulators encoded per
//	                   window, merged when sessions merge; also
//	                   GroupWindowAggregate
//	Rank, Deduplicate  clink.KeyBy on the encoded partition key + clink.Process,
//	                   the partition's ranked rows (or kept row) in value state
//	WindowRank         clink.KeyBy + clink.KeyedProcess: rows per window and
//	                   partition, emitted by an event-time timer at the window end
//	                   processing-time TUMBLE: clink.KeyedProcess with
//	                   processing-time timers (proctime_window.go)
//	LookupJoin         clink.FlatMap over the probe side; the bounded lookup
//	                   table read whole into memory (lookup.go)
//	Union              clink.Union
//	Join, IntervalJoin,
//	WindowJoin         clink.Connect + clink.CoProcess on the encoded join key
//	                   (see join.go)
//	Sink               clink.SinkTo (print, blackhole, postgres upsert behind a
//	                   hash exchange on the key); clink.CommitTo (filesystem,
//	                   postgres XA: two-phase commit, exactly once)
//
// Plan nodes with the same uid (a sub-plan two INSERTs share) are built
// once and their stream is read by both consumers.
//
// Callers' duties:
//
//  1. Give the catalog the connectors of Connectors(), so that the plans
//     name only connectors this package can build.
//  2. Build every sink of one job into one Environment, then Execute it.
package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/connectors/blackhole"
	"github.com/clinkstream/clink/connectors/datagen"
	"github.com/clinkstream/clink/connectors/print"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
	"github.com/clinkstream/clink/state"
)

// Options are what the operators need from the outside world.
type Options struct {
	// Stdout receives the print connector's rows (default os.Stdout), and
	// Stderr those of a print table with 'standard-error' = 'true'.
	Stdout, Stderr io.Writer
}

// Connectors describes the connectors this package can build.
func Connectors() []*catalog.Connector {
	cs := []*catalog.Connector{
		{
			Name:   "datagen",
			Source: true,
			Options: map[string]string{
				"rows-per-second":  "rows per second over all subtasks (default 10000)",
				"number-of-rows":   "total number of rows (default unbounded)",
				"seed":             "seed of the random values (default 0)",
				"scan.parallelism": "parallelism of the source (default: the job's)",
			},
			ValidKey: func(key string, t *catalog.Table) bool { return datagen.ValidKey(key, datagenFields(t)) },
			Validate: func(t *catalog.Table) error {
				if _, err := datagen.New(datagenFields(t), t.Options); err != nil {
					return optionError(t, err)
				}
				return parallelismOption(t, "scan.parallelism")
			},
		},
		{
			Name: "print", Sink: true, Updates: true,
			Options: map[string]string{
				"print-identifier": "prefix of every printed line",
				"standard-error":   "true: print to stderr instead of stdout",
				"sink.parallelism": "parallelism of the sink (default: that of its input)",
			},
			Validate: func(t *catalog.Table) error {
				if v, ok := t.Options["standard-error"]; ok {
					if _, err := strconv.ParseBool(v); err != nil {
						return &types.Error{Pos: t.OptionPosition("standard-error"), Msg: fmt.Sprintf("option 'standard-error' must be true or false, got '%s'", v)}
					}
				}
				return parallelismOption(t, "sink.parallelism")
			},
		},
		{Name: "blackhole", Sink: true, Updates: true, Options: map[string]string{}},
		withFileSource(filesystemConnector()),
	}
	for _, c := range registered {
		cs = append(cs, c.desc)
	}
	return cs
}

// connectorImpl is a connector kept in a file of its own: its catalog
// description and how to read (scan) and write (sink) its tables; either
// may be nil.
type connectorImpl struct {
	desc *catalog.Connector
	scan func(b *builder, n *planner.Scan) (clink.Stream[types.Row], error)
	sink func(b *builder, in clink.Stream[types.Row], n *planner.Sink) error
}

// registered are the connectors registered by registerConnector, in
// registration order.
var registered []connectorImpl

// registerConnector adds a connector; call it from an init function.
func registerConnector(c connectorImpl) { registered = append(registered, c) }

func lookupConnector(name string) (connectorImpl, bool) {
	for _, c := range registered {
		if c.desc.Name == name {
			return c, true
		}
	}
	return connectorImpl{}, false
}

// nodeBuilders build the plan node kinds kept in files of their own,
// keyed by the node's type.
var nodeBuilders = map[reflect.Type]func(*builder, planner.Node) (clink.Stream[types.Row], error){}

// registerNode adds the builder of node kind N; call it from an init
// function.
func registerNode[N planner.Node](f func(*builder, N) (clink.Stream[types.Row], error)) {
	var zero N
	nodeBuilders[reflect.TypeOf(zero)] = func(b *builder, n planner.Node) (clink.Stream[types.Row], error) { return f(b, n.(N)) }
}

func datagenFields(t *catalog.Table) []datagen.Field {
	var fs []datagen.Field
	for _, c := range t.Physical() {
		fs = append(fs, datagen.Field{Name: c.Name, Type: c.Type})
	}
	return fs
}

func optionError(t *catalog.Table, err error) error {
	var oe *datagen.OptionError
	if errors.As(err, &oe) {
		return &types.Error{Pos: t.OptionPosition(oe.Key), Msg: fmt.Sprintf("table '%s': %s", t.Name, oe.Msg)}
	}
	return &types.Error{Pos: t.Pos, Msg: fmt.Sprintf("table '%s': %v", t.Name, err)}
}

func parallelismOption(t *catalog.Table, key string) error {
	v, ok := t.Options[key]
	if !ok {
		return nil
	}
	if n, err := strconv.Atoi(v); err != nil || n < 1 {
		return &types.Error{Pos: t.OptionPosition(key), Msg: fmt.Sprintf("option '%s' must be a positive integer, got '%s'", key, v)}
	}
	return nil
}

// builder builds one job.
type builder struct {
	env     *clink.Environment
	opts    Options
	streams map[string]clink.Stream[types.Row]
	// consumers counts the distinct nodes that read each node, by uid, and
	// readers lists them.
	consumers map[string]int
	readers   map[string][]planner.Node
	// owned marks the nodes whose rows their one consumer may overwrite
	// (see ownedInput in calc.go).
	owned map[string]bool
	// windowProj holds, by the uid of a window aggregation, the
	// projection of the Calc folded into it (see windowOutput).
	windowProj map[string]*windowProjection
	// calcWidth holds, by uid, the output width of the Calcs whose
	// projections another Calc's picks narrowed (see
	// foldThroughWatermark).
	calcWidth map[string]int
}

// Build adds the operators of sinks (one job's plan) to env.
func Build(env *clink.Environment, sinks []*planner.Sink, opts Options) error {
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	// Every print table of the job writes through one lock per writer, so
	// that lines of different tables never interleave or race.
	out := &lockedWriter{w: opts.Stdout}
	errw := out
	if opts.Stderr != opts.Stdout {
		errw = &lockedWriter{w: opts.Stderr}
	}
	opts.Stdout, opts.Stderr = out, errw
	b := &builder{env: env, opts: opts, streams: map[string]clink.Stream[types.Row]{}, consumers: map[string]int{},
		readers: map[string][]planner.Node{}, owned: map[string]bool{},
		windowProj: map[string]*windowProjection{}, calcWidth: map[string]int{}}
	seen := map[string]bool{}
	var count func(n planner.Node)
	count = func(n planner.Node) {
		if seen[n.UID()] {
			return
		}
		seen[n.UID()] = true
		for _, in := range n.Inputs() {
			b.consumers[in.UID()]++
			b.readers[in.UID()] = append(b.readers[in.UID()], n)
			count(in)
		}
	}
	for _, s := range sinks {
		count(s)
	}
	for _, s := range sinks {
		if err := b.sink(s); err != nil {
			return err
		}
	}
	return nil
}

// outputReads returns which columns of n's output the nodes reading it
// read (true at their index), or nil when any of them may read every
// column. A Calc reads what its filter and the projections read above it
// read (Calc.ReadsFor); a Rank or a
// Deduplicate reads its partition or key and order columns, and passes on
// the rest to what reads it: so a join under a Top-N whose result is
// projected learns that the columns nobody selects need not be kept. Any
// other reader (a sink, a join, an aggregation) counts as reading every
// column.
func (b *builder) outputReads(n planner.Node) []bool {
	readers := b.readers[n.UID()]
	if len(readers) == 0 {
		return nil
	}
	width := len(n.Fields())
	reads := make([]bool, width)
	for _, r := range readers {
		var in []bool
		switch r := r.(type) {
		case *planner.Calc:
			in = r.ReadsFor(b.outputReads(r))
		case *planner.Rank:
			in = b.passedReads(r, width)
			for _, c := range r.PartitionBy {
				in = markRead(in, c)
			}
			for _, k := range r.OrderBy {
				in = markRead(in, k.Col)
			}
		case *planner.Deduplicate:
			in = b.passedReads(r, width)
			for _, c := range r.Keys {
				in = markRead(in, c)
			}
			in = markRead(in, r.OrderCol)
		}
		if len(in) != width {
			return nil
		}
		for i, x := range in {
			reads[i] = reads[i] || x
		}
	}
	return reads
}

// passedReads returns which of the first width columns of n's output,
// those n passes on from its input unchanged, the nodes reading n read;
// nil when that is not known.
func (b *builder) passedReads(n planner.Node, width int) []bool {
	out := b.outputReads(n)
	if len(out) < width {
		return nil
	}
	return slices.Clone(out[:width])
}

// markRead marks column c of reads as read; nil stays nil (every column
// is read).
func markRead(reads []bool, c int) []bool {
	if reads != nil && c >= 0 && c < len(reads) {
		reads[c] = true
	}
	return reads
}

func (b *builder) stream(n planner.Node) (clink.Stream[types.Row], error) {
	if s, ok := b.streams[n.UID()]; ok {
		return s, nil
	}
	var s clink.Stream[types.Row]
	var err error
	switch n := n.(type) {
	case *planner.Scan:
		s, err = b.scan(n)
	case *planner.Calc:
		s, err = b.calc(n)
	case *planner.WatermarkAssigner:
		s, err = b.watermark(n)
	case *planner.GroupAggregate:
		s, err = b.groupAggregate(n)
	case *planner.WindowTableFunction:
		s, err = b.windowTableFunction(n)
	case *planner.WindowAggregate:
		if n.Window.ProcTime {
			s, err = b.procWindowAggregate(n)
		} else {
			s, err = b.windowAggregate(n)
		}
	default:
		f, ok := nodeBuilders[reflect.TypeOf(n)]
		if !ok {
			return s, fmt.Errorf("executing plan node %T is not implemented", n)
		}
		s, err = f(b, n)
	}
	if err != nil {
		return s, err
	}
	b.streams[n.UID()] = s
	return s, nil
}

func (b *builder) scan(n *planner.Scan) (clink.Stream[types.Row], error) {
	t := n.Table
	switch t.Connector.Name {
	case "datagen":
		g, err := datagen.New(datagenFields(t), t.Options)
		if err != nil {
			return clink.Stream[types.Row]{}, optionError(t, err)
		}
		par := b.env.Options().Parallelism
		if v, ok := t.Options["scan.parallelism"]; ok {
			par, _ = strconv.Atoi(v)
		}
		// Each row is made for its record alone, with room for what the
		// Calcs below write into it, cut from a block of rowBlock rows
		// (see rowBlock). The subtasks of the source call row
		// concurrently: each takes its block from a pool and puts it back.
		width, capacity := g.Width(), max(g.Width(), b.rowCapacity(n))
		var blocks sync.Pool
		row := func(i int64) types.Row {
			bl, _ := blocks.Get().(*[]types.Value)
			if bl == nil {
				bl = new([]types.Value)
			}
			if len(*bl) < capacity {
				*bl = make([]types.Value, capacity*rowBlock)
			}
			vals := (*bl)[:width:capacity]
			*bl = (*bl)[capacity:]
			blocks.Put(bl)
			g.Fill(i, vals)
			return types.Row{Kind: changelog.Insert, Values: vals}
		}
		b.owned[n.UID()] = true
		s := clink.FromGenerator(b.env, n.UID(), clink.GeneratorOptions{Count: g.Count(), RatePerSecond: g.RowsPerSecond() / float64(par)}, row)
		if par != b.env.Options().Parallelism {
			s = s.SetParallelism(par)
		}
		return s, nil
	case "filesystem":
		return b.fileSource(n)
	}
	if c, ok := lookupConnector(t.Connector.Name); ok && c.scan != nil {
		return c.scan(b, n)
	}
	return clink.Stream[types.Row]{}, fmt.Errorf("reading connector '%s' is not implemented", t.Connector.Name)
}

func (b *builder) watermark(n *planner.WatermarkAssigner) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	// The assigner passes rows on unchanged and keeps none.
	b.owned[n.UID()] = b.ownedInput(n.Input)
	return b.assignTimestamps(in, n, n.Rowtime()), nil
}

// assignTimestamps is the assigner n over in, whose rows have the rowtime
// in column col.
func (b *builder) assignTimestamps(in clink.Stream[types.Row], n *planner.WatermarkAssigner, col int) clink.Stream[types.Row] {
	ts := func(r types.Row) int64 {
		v := r.Values[col]
		if v.IsNull() {
			return clink.NoTimestamp
		}
		return v.EpochMillis()
	}
	// AssignTimestamps emits max - bound - 1 ms; Flink SQL emits
	// max(rowtime - delay).
	return clink.AssignTimestamps(in, n.UID(), ts, time.Duration(n.DelayMs-1)*time.Millisecond)
}

// groupState is one group's state: how many rows it holds and its live
// accumulators. The value state copies it (groupState.clone) the first time
// a group changes after a checkpoint captured it, so the accumulators are
// changed in place otherwise; groupCodec writes them into checkpoints.
//
// With DISTINCT aggregates, their values are entries of a table of their
// own (distinct.go) and accs holds those aggregates' accumulators without
// their sets; key is then the group's key, shared by its entries (empty
// until the group's first row after a restore).
type groupState struct {
	count int64
	accs  []expr.Accumulator
	key   string
}

func (g *groupState) clone() *groupState {
	c := &groupState{count: g.count, accs: make([]expr.Accumulator, len(g.accs)), key: g.key}
	for i, a := range g.accs {
		c.accs[i] = a.Clone()
	}
	return c
}

// groupCodec encodes a groupState: the row count, then each accumulator's
// encoding with its length. With DISTINCT aggregates (distinct non-nil)
// the encoding starts with groupFormatDistinct: their accumulators then
// hold no set of values. The row count is at least 1, so the first byte
// of an encoding without the prefix is never 0.
type groupCodec struct {
	aggs     []planner.AggCall
	distinct []bool
	uid      string
}

// groupFormatDistinct starts the group state of an operator with DISTINCT
// aggregates whose values are kept as entries of their own.
var groupFormatDistinct = [2]byte{0, 1}

func (c groupCodec) Append(dst []byte, g *groupState) []byte {
	if c.distinct != nil {
		dst = append(dst, groupFormatDistinct[:]...)
	}
	dst = binary.AppendVarint(dst, g.count)
	for _, a := range g.accs {
		enc, err := a.MarshalBinary()
		if err != nil {
			// The accumulators of sql/expr encode without failing; a
			// failure would be a bug, and a checkpoint must not hide it.
			panic(fmt.Sprintf("operator %s: encoding an accumulator: %v", c.uid, err))
		}
		dst = binary.AppendUvarint(dst, uint64(len(enc)))
		dst = append(dst, enc...)
	}
	return dst
}

func (c groupCodec) Decode(src []byte) (*groupState, int, error) {
	g := &groupState{accs: make([]expr.Accumulator, len(c.aggs))}
	used := 0
	if c.distinct != nil {
		if len(src) < 2 || src[0] != groupFormatDistinct[0] {
			return nil, 0, fmt.Errorf("operator %s: group state was written by an older version that kept the values of DISTINCT aggregates inside each group; it cannot be restored, start the job without this checkpoint", c.uid)
		}
		if src[1] != groupFormatDistinct[1] {
			return nil, 0, fmt.Errorf("operator %s: group state of unknown format %d", c.uid, src[1])
		}
		src, used = src[2:], 2
	}
	n, m := binary.Varint(src)
	if m <= 0 {
		return nil, 0, fmt.Errorf("operator %s: group state: bad row count", c.uid)
	}
	g.count, src = n, src[m:]
	used += m
	for i, a := range c.aggs {
		l, m := binary.Uvarint(src)
		if m <= 0 || l > uint64(len(src)-m) {
			return nil, 0, fmt.Errorf("operator %s: group state: %s's accumulator is truncated", c.uid, a.Text)
		}
		decode := a.Func.Decode
		if c.distinct != nil && c.distinct[i] {
			decode = a.Func.DecodeDeduplicated
		}
		acc, err := decode(src[m : m+int(l)])
		if err != nil {
			return nil, 0, fmt.Errorf("operator %s: %w", c.uid, err)
		}
		g.accs[i] = acc
		src = src[m+int(l):]
		used += m + int(l)
	}
	return g, used, nil
}

func (b *builder) groupAggregate(n *planner.GroupAggregate) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	keys, aggs, uid := n.Keys, n.Aggs, n.UID()
	keyOf := func(r types.Row) string {
		var k []byte
		for _, i := range keys {
			k = types.AppendKey(k, r.Values[i])
		}
		return string(k)
	}
	result := func(r types.Row, accs []expr.Accumulator) []types.Value {
		vals := make([]types.Value, 0, len(keys)+len(accs))
		for _, i := range keys {
			vals = append(vals, r.Values[i])
		}
		for _, a := range accs {
			vals = append(vals, a.Result())
		}
		return vals
	}
	slots, distinct := planDistinct(aggs)
	insertOnly := !n.Input.Updating()
	codec := groupCodec{aggs: aggs, uid: uid}
	if len(slots) == 0 {
		distinct = nil
	} else {
		codec.distinct = distinct
	}
	fn := func(ctx *clink.KeyedContext[string, *groupState], r types.Row, out *clink.Collector[types.Row]) error {
		add := r.Kind.IsAccumulate()
		var prev, now []types.Value
		var ferr error
		had := false
		// An addition to a group held already (most rows) notes each
		// accumulator it changes with its result before (changed): the
		// group's earlier row is the new one with those results back, and
		// only they can differ. A retraction, which may end the group,
		// computes the earlier row in full first.
		var buf [16]changedAcc
		changed := buf[:0]
		ctx.UpdateValue(func(st *groupState, ok bool) (*groupState, bool) {
			had = ok
			if !ok {
				if !add {
					// A retraction of a group this operator does not hold
					// (its state expired or never existed): nothing to
					// retract, as in Flink.
					return nil, false
				}
				st = &groupState{accs: make([]expr.Accumulator, len(aggs)), key: ctx.Key()}
				for i, a := range aggs {
					if distinct != nil && distinct[i] {
						st.accs[i] = a.Func.NewDeduplicated()
					} else {
						st.accs[i] = a.Func.New()
					}
				}
			} else {
				if !add {
					prev = result(r, st.accs)
				}
				if st.key == "" {
					st.key = ctx.Key()
				}
			}
			for i, a := range aggs {
				if distinct != nil && distinct[i] {
					continue
				}
				v, ok := aggInput(&a, r)
				if !ok {
					continue
				}
				if had && add {
					changed = append(changed, changedAcc{i: i, before: st.accs[i].Result()})
				}
				if err := addOrRetract(st.accs[i], v, add); err != nil {
					// The accumulators may be half-changed: fail the job
					// (the state is restored from the last checkpoint).
					ferr = fmt.Errorf("operator %s: %s: %w", uid, a.Text, err)
					return st, true
				}
			}
			if distinct != nil {
				var err error
				changed, err = accumulateDistinct(ctx.State().(*distinctTables), slots, aggs, st, r, add, insertOnly, had && add, changed)
				if err != nil {
					ferr = fmt.Errorf("operator %s: %w", uid, err)
					return st, true
				}
			}
			if add {
				st.count++
			} else {
				st.count--
			}
			if st.count <= 0 {
				return nil, false
			}
			now = result(r, st.accs)
			return st, true
		})
		switch {
		case ferr != nil:
			return ferr
		case now == nil:
			if had {
				out.Collect(types.Row{Kind: changelog.Delete, Values: prev})
			}
		case !had:
			out.Collect(types.Row{Kind: changelog.Insert, Values: now})
		case add:
			if prev = earlierResult(now, len(keys), changed); prev != nil {
				out.Collect(types.Row{Kind: changelog.UpdateBefore, Values: prev})
				out.Collect(types.Row{Kind: changelog.UpdateAfter, Values: now})
			}
		case !sameValues(prev, now):
			out.Collect(types.Row{Kind: changelog.UpdateBefore, Values: prev})
			out.Collect(types.Row{Kind: changelog.UpdateAfter, Values: now})
		}
		return nil
	}
	f := clink.KeyedProcessFunction[string, types.Row, *groupState, types.Row]{
		ProcessElement: fn,
		ValueCodec:     codec,
		ValueCopy:      (*groupState).clone,
	}
	if distinct != nil {
		f.State = func(b state.Backend, _ state.Codec[string]) (any, error) { return newDistinctState(b, slots) }
	}
	return clink.KeyedProcess(clink.KeyBy(in, keyOf), uid, f), nil
}

// sameValues compares two result rows, NULL equal to NULL: an unchanged
// result emits nothing (Flink's GroupAggFunction without state TTL).
func sameValues(a, b []types.Value) bool { return sameKept(a, b, nil) }

// changedAcc is an accumulator (its index among the aggregates) that a
// row changed, and its result before the row.
type changedAcc struct {
	i      int
	before types.Value
}

// earlierResult returns the result row a group had before the row that
// changed the accumulators in changed: now, the row after it (keys key
// columns, then a value per aggregate), with their earlier results back;
// or nil when none of them changed its result, so that the row emits
// nothing (as sameValues would find).
func earlierResult(now []types.Value, keys int, changed []changedAcc) []types.Value {
	differs := false
	for _, c := range changed {
		if !sameValue(now[keys+c.i], c.before) {
			differs = true
			break
		}
	}
	if !differs {
		return nil
	}
	prev := slices.Clone(now)
	for _, c := range changed {
		prev[keys+c.i] = c.before
	}
	return prev
}

func (b *builder) sink(n *planner.Sink) error {
	in, err := b.stream(n.Input)
	if err != nil {
		return err
	}
	t := n.Table
	switch t.Connector.Name {
	case "print":
		w := b.opts.Stdout
		if v, _ := strconv.ParseBool(t.Options["standard-error"]); v {
			w = b.opts.Stderr
		}
		if in, err = withSinkParallelism(in, n); err != nil {
			return err
		}
		clink.SinkTo(in, n.UID(), clink.Sink[types.Row](print.New(print.Options{Identifier: t.Options["print-identifier"], Out: w})))
		return nil
	case "blackhole":
		clink.SinkTo(in, n.UID(), clink.Sink[types.Row](blackhole.Sink[types.Row]{}))
		return nil
	case "filesystem":
		return fileSink(in, n)
	}
	if c, ok := lookupConnector(t.Connector.Name); ok && c.sink != nil {
		return c.sink(b, in, n)
	}
	return fmt.Errorf("writing connector '%s' is not implemented", t.Connector.Name)
}

// lockedWriter serializes writes to a writer shared by several sinks.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
