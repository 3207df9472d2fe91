package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/metrics"
)

// Vertex is one node of a job graph: a chain of operators joined by forward
// edges, run as Parallelism tasks.
type Vertex struct {
	// UID identifies the vertex in checkpoints; it must be stable across
	// runs of the same job.
	UID         string
	Parallelism int
	// Exactly one of NewSource and NewOperator is set.
	NewSource   func(subtask int) Source
	NewOperator func(subtask int) Operator
}

// Edge connects two vertices. Partitioning happens in the upstream chain's
// typed output: the runtime only builds the channels.
type Edge struct {
	From, To int // vertex indexes
	// Input is the logical input of To this edge feeds (0 for single-input
	// chains, 0 or 1 for connected streams).
	Input int
	// Pointwise connects upstream subtask i to downstream subtask i only
	// (parallelisms must be equal); otherwise every upstream subtask has a
	// channel to every downstream subtask.
	Pointwise bool
}

// JobGraph is the vertices and edges of a job. The outgoing edges of a
// vertex are numbered in the order they appear in Edges; that is the edge
// index a chain passes to Outputs.Send.
type JobGraph struct {
	Vertices []*Vertex
	Edges    []Edge
}

// ModeSetting is the job's checkpoint alignment policy.
type ModeSetting uint8

const (
	// ModeAligned stamps every checkpoint aligned.
	ModeAligned ModeSetting = iota
	// ModeUnaligned stamps every checkpoint unaligned.
	ModeUnaligned
	// ModeAdaptive decides per checkpoint from measured channel pressure.
	ModeAdaptive
)

// Config configures one execution.
type Config struct {
	MaxParallelism     int
	CheckpointDir      string // empty disables checkpointing
	CheckpointInterval time.Duration
	CheckpointTimeout  time.Duration
	CheckpointMode     ModeSetting
	Adaptive           checkpoint.AdaptiveConfig
	Retain             int
	// Restore is "", "latest" or a checkpoint id.
	Restore         string
	ChannelCapacity int
	BufferTimeout   time.Duration
	// SourceIdleWait is how long a source that reported Idle waits before
	// it is asked again.
	SourceIdleWait time.Duration
	Logger         *slog.Logger
	Metrics        *metrics.Registry
}

// Validate checks the configuration and the graph against each other.
func (c *Config) validate(g *JobGraph) error {
	if c.MaxParallelism <= 0 {
		return fmt.Errorf("max parallelism must be positive, got %d", c.MaxParallelism)
	}
	if len(g.Vertices) == 0 {
		return errors.New("job has no operators")
	}
	if c.CheckpointDir == "" && c.Restore != "" {
		return fmt.Errorf("restoring %q needs a checkpoint directory", c.Restore)
	}
	if c.CheckpointDir == "" && c.CheckpointInterval > 0 {
		return errors.New("a checkpoint interval needs a checkpoint directory")
	}
	uids := make(map[string]bool, len(g.Vertices))
	for _, v := range g.Vertices {
		if uids[v.UID] {
			return fmt.Errorf("two operators have the uid %q; uids name snapshot files and must be unique", v.UID)
		}
		uids[v.UID] = true
		if err := store.CheckName(store.SnapshotName(v.UID, 0)); err != nil {
			return fmt.Errorf("operator uid %q: %w", v.UID, err)
		}
		if v.Parallelism <= 0 || v.Parallelism > c.MaxParallelism {
			return fmt.Errorf("operator %s: parallelism %d must be between 1 and the max parallelism %d", v.UID, v.Parallelism, c.MaxParallelism)
		}
		if (v.NewSource == nil) == (v.NewOperator == nil) {
			return fmt.Errorf("operator %s: exactly one of NewSource and NewOperator must be set", v.UID)
		}
	}
	for _, e := range g.Edges {
		if e.From < 0 || e.From >= len(g.Vertices) || e.To < 0 || e.To >= len(g.Vertices) {
			return fmt.Errorf("edge %d->%d names a missing vertex", e.From, e.To)
		}
		if g.Vertices[e.To].NewSource != nil {
			return fmt.Errorf("edge %s->%s leads into a source", g.Vertices[e.From].UID, g.Vertices[e.To].UID)
		}
		if e.Pointwise && g.Vertices[e.From].Parallelism != g.Vertices[e.To].Parallelism {
			return fmt.Errorf("pointwise edge %s->%s needs equal parallelism", g.Vertices[e.From].UID, g.Vertices[e.To].UID)
		}
	}
	return nil
}

// Execute runs the job in this process until every task has ended and the
// terminal checkpoint has completed, ctx is canceled (a clean stop: nil), or
// a task or checkpoint fails (that error).
func Execute(ctx context.Context, g *JobGraph, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.ChannelCapacity <= 0 {
		cfg.ChannelCapacity = 16
	}
	if cfg.BufferTimeout == 0 {
		cfg.BufferTimeout = 10 * time.Millisecond
	}
	if cfg.SourceIdleWait <= 0 {
		cfg.SourceIdleWait = time.Millisecond
	}
	if err := cfg.validate(g); err != nil {
		return err
	}
	ex := &execution{g: g, cfg: cfg, log: cfg.Logger}
	return ex.run(ctx)
}

type execution struct {
	g       *JobGraph
	cfg     Config
	log     *slog.Logger
	store   *store.Store
	restore checkpoint.ID
	drv     *driver
	tasks   []*taskBase
	runs    []func() error
	chans   []*Channel
}

func (ex *execution) run(ctx context.Context) error {
	if ex.cfg.CheckpointDir != "" {
		if err := ex.openStore(); err != nil {
			return err
		}
	}
	done := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(done) }) }
	defer stop()
	if err := ex.build(done); err != nil {
		return err
	}

	// The driver stops before the tasks are torn down: once a job fails or
	// is canceled, no checkpoint may complete and no listener may be told
	// to commit while chains are being closed.
	driverStop := make(chan struct{})
	driverExited := make(chan struct{})
	var driverStopOnce sync.Once
	stopDriver := func() {
		if ex.drv == nil {
			return
		}
		driverStopOnce.Do(func() { close(driverStop) })
		<-driverExited
	}

	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	record := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	if ex.drv != nil {
		go func() {
			defer close(driverExited)
			if err := ex.drv.run(driverStop); err != nil {
				record(err)
				stop()
			}
		}()
	}
	for i, runTask := range ex.runs {
		b := ex.tasks[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runGuarded(runTask)
			if err == nil {
				return
			}
			if b.worker != nil {
				b.worker.cancel()
			}
			if !errors.Is(err, ErrCanceled) {
				record(fmt.Errorf("task %s: %w", b.name, err))
				stopDriver()
				stop()
			}
		}()
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()

	select {
	case <-allDone:
	case <-done:
	case <-ctx.Done():
		stopDriver()
		stop()
	}
	<-allDone
	// Tasks end cleanly only after the terminal checkpoint completed, so
	// the driver has finished or is returning; otherwise it must stop.
	stopDriver()
	errMu.Lock()
	defer errMu.Unlock()
	return firstErr
}

func (ex *execution) openStore() error {
	st, err := store.Open(ex.cfg.CheckpointDir, store.Options{Retain: ex.cfg.Retain, Logger: ex.log})
	if err != nil {
		return fmt.Errorf("opening checkpoint directory: %w", err)
	}
	ex.store = st
	if ex.cfg.Restore != "" {
		id, err := st.Resolve(ex.cfg.Restore)
		if err != nil {
			return fmt.Errorf("resolving checkpoint to restore: %w", err)
		}
		ex.restore = id
	} else {
		if ids, err := st.Completed(); err != nil {
			return err
		} else if len(ids) > 0 {
			return fmt.Errorf("checkpoint directory %s already holds checkpoints (newest completed: %d); restore with --restore latest (or an id), or use an empty directory", st.Dir(), ids[len(ids)-1])
		}
	}
	return nil
}

func (ex *execution) build(done <-chan struct{}) error {
	g, cfg := ex.g, ex.cfg
	n := len(g.Vertices)
	// Input channels per downstream subtask, output channels per upstream
	// subtask per outgoing edge.
	type inputs struct {
		chans   []*Channel
		logical []int
		wake    chan struct{}
	}
	ins := make([][]*inputs, n)
	for v, vx := range g.Vertices {
		ins[v] = make([]*inputs, vx.Parallelism)
		for s := range ins[v] {
			ins[v][s] = &inputs{wake: make(chan struct{}, 1)}
		}
	}
	outs := make([][][][]*Channel, n) // vertex, subtask, edge, target
	for v, vx := range g.Vertices {
		outs[v] = make([][][]*Channel, vx.Parallelism)
	}
	for _, e := range g.Edges {
		up, down := g.Vertices[e.From], g.Vertices[e.To]
		for u := 0; u < up.Parallelism; u++ {
			var targets []*Channel
			for d := 0; d < down.Parallelism; d++ {
				if e.Pointwise && d != u {
					continue
				}
				in := ins[e.To][d]
				c := NewChannel(cfg.ChannelCapacity, in.wake)
				in.chans = append(in.chans, c)
				in.logical = append(in.logical, e.Input)
				targets = append(targets, c)
				ex.chans = append(ex.chans, c)
			}
			outs[e.From][u] = append(outs[e.From][u], targets)
		}
	}

	var participants []checkpoint.ParticipantID
	var sources []*sourceTask
	var listeners []CheckpointListener
	for v, vx := range g.Vertices {
		var old []*store.TaskSnapshot
		if ex.restore != 0 {
			var err error
			if old, err = ex.readVertex(vx); err != nil {
				return err
			}
		}
		for s := 0; s < vx.Parallelism; s++ {
			name := fmt.Sprintf("%s-%d", vx.UID, s)
			tc := &TaskContext{
				Vertex: vx.UID, Name: name,
				Subtask: s, Parallelism: vx.Parallelism, MaxParallelism: cfg.MaxParallelism,
				Out:     NewOutputs(outs[v][s], done),
				Done:    done,
				Shared:  ex.shared(),
				Logger:  ex.log.With("task", name),
				Metrics: cfg.Metrics,
			}
			if old != nil {
				if len(old) == vx.Parallelism {
					tc.Restored = old[s]
				} else {
					tc.Rescaled = old
				}
			}
			p := checkpoint.ParticipantID(name)
			participants = append(participants, p)
			in := ins[v][s]
			b := &taskBase{
				name: name, participant: p, tc: tc, wake: in.wake, done: done,
				bufferTimeout: cfg.BufferTimeout,
			}
			ex.tasks = append(ex.tasks, b)
			if vx.NewSource != nil {
				src := vx.NewSource(s)
				st := &sourceTask{base: b, src: src, inject: make(chan struct{}, 1), idle: cfg.SourceIdleWait}
				sources = append(sources, st)
				ex.runs = append(ex.runs, st.run)
				if l, ok := src.(CheckpointListener); ok {
					listeners = append(listeners, l)
				}
				continue
			}
			op := vx.NewOperator(s)
			ot := &operatorTask{base: b, op: op, inputs: in.chans, logical: in.logical}
			if len(in.chans) == 0 {
				return fmt.Errorf("operator %s has no inputs", vx.UID)
			}
			ex.runs = append(ex.runs, ot.run)
			if l, ok := op.(CheckpointListener); ok {
				listeners = append(listeners, l)
			}
		}
	}
	if ex.store == nil {
		return nil
	}
	ccfg := checkpoint.Config{
		Timeout: cfg.CheckpointTimeout,
		FirstID: ex.store.NextID(),
	}
	d := &driver{
		store:       ex.store,
		sources:     sources,
		listeners:   listeners,
		log:         ex.log,
		metrics:     cfg.Metrics,
		interval:    cfg.CheckpointInterval,
		events:      make(chan driverEvent, 1024),
		stopped:     make(chan struct{}),
		final:       make(chan struct{}),
		sourcesLeft: len(sources),
	}
	switch cfg.CheckpointMode {
	case ModeUnaligned:
		ccfg.DefaultMode = checkpoint.Unaligned
	case ModeAdaptive:
		pol, err := checkpoint.NewAdaptiveModePolicy(cfg.Adaptive)
		if err != nil {
			return err
		}
		d.policy = pol
		d.pressure = ex.pressure
		ccfg.Resolver = func(checkpoint.ID) checkpoint.Mode { return pol.Observe(d.pressure()) }
	}
	coord, err := checkpoint.NewCoordinator(ccfg)
	if err != nil {
		return err
	}
	for _, p := range participants {
		coord.Register(p)
	}
	d.coord = coord
	if ex.restore != 0 {
		ex.log.Info("restoring from checkpoint", "checkpoint", ex.restore, "dir", ex.store.Dir(), "next_checkpoint", ccfg.FirstID)
	}
	for _, b := range ex.tasks {
		b.acks = d
		b.final = d.final
		b.worker = newSnapshotWorker(b.name, b.tc.Vertex, b.participant, ex.store, d)
	}
	for _, st := range sources {
		st.finished = d.sourceFinished
	}
	ex.drv = d
	return nil
}

// pressure is the highest record-lane occupancy over all channels.
func (ex *execution) pressure() float64 {
	p := 0.0
	for _, c := range ex.chans {
		p = max(p, c.Pressure())
	}
	return p
}

// runGuarded runs a task, turning a panic in user code (a map function, a
// sink) into the task's error so that it fails the job instead of the
// process.
func runGuarded(run func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return run()
}

// readVertex reads the snapshots of every subtask a vertex had when the
// checkpoint was taken. The parallelism may differ from the job's now (a
// rescale); the max parallelism may not, and in-flight records cannot be
// redistributed.
func (ex *execution) readVertex(vx *Vertex) ([]*store.TaskSnapshot, error) {
	first, err := ex.store.ReadTaskSnapshot(ex.restore, store.SnapshotName(vx.UID, 0))
	if err != nil {
		return nil, fmt.Errorf("restoring checkpoint %d: %w", ex.restore, err)
	}
	if first.MaxParallelism != ex.cfg.MaxParallelism {
		return nil, fmt.Errorf("restoring checkpoint %d: operator %s was checkpointed with max parallelism %d, the job now has %d; the max parallelism (the number of key groups) cannot change between a checkpoint and its restore",
			ex.restore, vx.UID, first.MaxParallelism, ex.cfg.MaxParallelism)
	}
	snaps := []*store.TaskSnapshot{first}
	for s := 1; s < first.Parallelism; s++ {
		snap, err := ex.store.ReadTaskSnapshot(ex.restore, store.SnapshotName(vx.UID, s))
		if err != nil {
			return nil, fmt.Errorf("restoring checkpoint %d: %w", ex.restore, err)
		}
		if snap.Parallelism != first.Parallelism || snap.MaxParallelism != first.MaxParallelism {
			return nil, fmt.Errorf("restoring checkpoint %d: snapshot %s says parallelism %d / max parallelism %d, but %s says %d / %d",
				ex.restore, snap.Task, snap.Parallelism, snap.MaxParallelism, first.Task, first.Parallelism, first.MaxParallelism)
		}
		snaps = append(snaps, snap)
	}
	if first.Parallelism != vx.Parallelism {
		for _, snap := range snaps {
			for _, op := range snap.Operators {
				if len(op.InFlight) > 0 {
					return nil, fmt.Errorf("restoring checkpoint %d: task %s holds in-flight records of an unaligned checkpoint, which cannot be redistributed from parallelism %d to %d; restore it at parallelism %d, or restore an aligned checkpoint",
						ex.restore, snap.Task, first.Parallelism, vx.Parallelism, first.Parallelism)
				}
			}
		}
		ex.log.Info("rescaling operator on restore", "operator", vx.UID, "from", first.Parallelism, "to", vx.Parallelism)
	}
	return snaps, nil
}

func (ex *execution) shared() *store.Shared {
	if ex.store == nil {
		return nil
	}
	return ex.store.Shared()
}
