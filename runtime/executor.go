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

// Vertex is one node of a job graph: a chain of operators called one from
// the other (joined by forward edges, or by keyed ones at parallelism 1),
// run as Parallelism tasks.
type Vertex struct {
	// UID identifies the vertex in checkpoints; it must be stable across
	// runs of the same job.
	UID         string
	Parallelism int
	// Operators are the uids of the chain's operators, head first (nil
	// stands for UID alone). A restore finds each one's state by its uid,
	// in whichever task of the checkpoint holds it (see restoreLayout), so
	// an operator uid must be unique in the whole job, not only in its
	// chain: a checkpoint in which two tasks hold state of one uid is
	// refused at restore.
	Operators []string
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
	// DebloatTarget is how long the record batches queued in front of a
	// task should take it to process: a task that is a bottleneck shrinks
	// its input channels below ChannelCapacity (to no fewer than two
	// batches) so that they hold about that much of its work (Flink's
	// buffer debloating). Zero means DefaultDebloatTarget; a negative
	// value keeps every channel at ChannelCapacity.
	DebloatTarget time.Duration
	// SourceIdleWait is how long a source that reported Idle waits before
	// it is asked again.
	SourceIdleWait time.Duration
	// Restart says whether and when a failed job restarts in this process
	// (the zero value: never).
	Restart RestartPolicy
	// OnRestore, if set, is called when a run of the job (the first or a
	// restart) begins restoring a checkpoint, before its tasks open; the
	// function it returns is called once every task holds its restored
	// state and runs, or the run ended first. A program may change its
	// own pacing for the restore in between (the clink binary pauses its
	// garbage collector: a restore allocates the state it reads and frees
	// little).
	OnRestore func() (restored func())
	Logger    *slog.Logger
	Metrics   *metrics.Registry
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
	if err := c.Restart.Validate(); err != nil {
		return err
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
// a task or checkpoint fails (that error: a *TaskError, a *CheckpointError,
// or another failure of the checkpoint driver).
//
// With cfg.Restart enabled, a failure does not end the job: Execute tears
// every task down, waits the policy's delay and runs the job again, every
// task rebuilt from the graph (the Vertex constructors are called again) and
// restored from the newest checkpoint this job completed, in any attempt;
// before the first completes, from cfg.Restore, or from the start. When the
// budget is spent, it returns the last failure, wrapped with the number of
// restarts. Errors a restart cannot fix are returned at once (see Fatal):
// an invalid configuration or graph, a refused restore, a checkpoint
// directory that cannot be opened. ctx ending stops the loop at once, also
// during a delay (then the last failure is returned, wrapped).
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
	if cfg.DebloatTarget == 0 {
		cfg.DebloatTarget = DefaultDebloatTarget
	}
	if cfg.SourceIdleWait <= 0 {
		cfg.SourceIdleWait = time.Millisecond
	}
	if err := cfg.validate(g); err != nil {
		return Fatal(err)
	}
	j := &job{g: g, cfg: cfg, log: cfg.Logger}
	if cfg.CheckpointDir != "" {
		if err := j.openStore(); err != nil {
			return Fatal(err)
		}
	}
	l := &restartLoop{
		policy: cfg.Restart, log: cfg.Logger, metrics: cfg.Metrics,
		attempt: j.attempt, rewind: j.rewind,
	}
	return l.run(ctx)
}

// job is what outlives one attempt of a job: the checkpoint store and the
// restore point of the next attempt.
type job struct {
	g     *JobGraph
	cfg   Config
	log   *slog.Logger
	store *store.Store
	// initial is the restore point of the first attempt (zero: a fresh
	// start).
	initial checkpoint.ID
	// firstID is the first checkpoint id this job could take: every id at
	// or above it is one of this job's, whatever the directory held before.
	firstID checkpoint.ID
	// restore is the restore point of the next attempt.
	restore checkpoint.ID
}

// attempt runs the job once from j.restore. It returns after every task,
// snapshot worker and the checkpoint driver of the attempt stopped.
func (j *job) attempt(ctx context.Context) error {
	ex := &execution{g: j.g, cfg: j.cfg, log: j.log, store: j.store, restore: j.restore}
	return ex.run(ctx)
}

// rewind makes the newest checkpoint the job completed, in any attempt, the
// restore point of the next attempt; without one it keeps the first
// attempt's. It reads the markers in the directory, not what the driver
// reported, because a marker can be durable although its driver stopped
// before it heard so (the restore point must see every durable marker). A
// checkpoint below firstID belongs to an earlier run whose history this job
// does not continue, e.g. one newer than an explicitly chosen Restore.
func (j *job) rewind() (string, error) {
	if j.store == nil {
		return "none (no checkpoint directory: starting over)", nil
	}
	ids, err := j.store.Completed()
	if err != nil {
		return "", err
	}
	restore := j.initial
	for _, id := range ids {
		if id >= j.firstID {
			restore = max(restore, id)
		}
	}
	j.restore = restore
	if restore == 0 {
		return "none (no checkpoint completed yet: starting over)", nil
	}
	return fmt.Sprintf("checkpoint %d", restore), nil
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
	done := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(done) }) }
	defer stop()
	if err := ex.build(done); err != nil {
		// The graph, the configuration or the restore point is at fault;
		// building again would fail the same way.
		return Fatal(err)
	}
	if ex.restore != 0 && ex.cfg.OnRestore != nil && ex.drv != nil {
		restored := ex.cfg.OnRestore()
		var once sync.Once
		ex.drv.running = func() { once.Do(restored) }
		defer ex.drv.running()
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
				record(&TaskError{Task: b.name, Err: err})
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
	ex.discardInFlight()
	errMu.Lock()
	defer errMu.Unlock()
	return firstErr
}

// discardInFlight discards the checkpoints the stopped driver left in
// flight: no attempt will complete them, and the shared files they pinned
// must become collectable. A completed one is refused by the store. So
// goes the checkpoint the driver prepared but never triggered (its empty
// directory and staged marker), which would otherwise stay in the
// checkpoint directory after the job.
func (ex *execution) discardInFlight() {
	if ex.drv == nil || ex.store == nil {
		return
	}
	for _, id := range ex.drv.coord.InFlight() {
		if err := ex.store.Discard(id); err != nil {
			ex.log.Debug("discarding a checkpoint left in flight", "checkpoint", id, "err", err)
		}
	}
	if p := ex.drv.prepared; p != 0 && p >= ex.drv.coord.NextID() {
		if err := ex.store.Discard(p); err != nil {
			ex.log.Debug("discarding a prepared checkpoint", "checkpoint", p, "err", err)
		}
	}
}

// openStore opens the checkpoint directory once for every attempt, so that
// ids stay above everything any attempt wrote, and resolves the first
// attempt's restore point. Only here is a directory that holds completed
// checkpoints refused without Restore: a restart starting over finds the
// incomplete checkpoints of its predecessor, and must not be refused.
func (j *job) openStore() error {
	st, err := store.Open(j.cfg.CheckpointDir, store.Options{Retain: j.cfg.Retain, Logger: j.log})
	if err != nil {
		return fmt.Errorf("opening checkpoint directory: %w", err)
	}
	j.store = st
	j.firstID = st.NextID()
	if j.cfg.Restore != "" {
		id, err := st.Resolve(j.cfg.Restore)
		if err != nil {
			return fmt.Errorf("resolving checkpoint to restore: %w", err)
		}
		j.initial, j.restore = id, id
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
				if cfg.DebloatTarget > 0 {
					// As the consumer's debloater starts (debloater): so
					// also before the consumer runs.
					c.SetCapacity(debloatMinCapacity)
				}
				in.chans = append(in.chans, c)
				in.logical = append(in.logical, e.Input)
				targets = append(targets, c)
				ex.chans = append(ex.chans, c)
			}
			outs[e.From][u] = append(outs[e.From][u], targets)
		}
	}

	var layout *restoreLayout
	if ex.restore != 0 {
		var err error
		if layout, err = readLayout(ex.store, ex.restore, cfg.MaxParallelism); err != nil {
			return err
		}
		if err := layout.checkInFlight(g); err != nil {
			return err
		}
	}
	var participants []checkpoint.ParticipantID
	var sources []*sourceTask
	var listeners []CheckpointListener
	for v, vx := range g.Vertices {
		var old []*store.TaskSnapshot
		var oldOps map[string][]*store.OperatorSnapshot
		if layout != nil {
			r, err := layout.vertex(vx)
			if err != nil {
				return err
			}
			old, oldOps = r.tasks, r.ops
			for _, uid := range vx.Operators {
				if n := len(oldOps[uid]); n != 0 && n != vx.Parallelism {
					ex.log.Info("rescaling operator on restore", "operator", uid, "from", n, "to", vx.Parallelism)
				}
			}
		}
		for s := 0; s < vx.Parallelism; s++ {
			name := fmt.Sprintf("%s-%d", vx.UID, s)
			failing := make(chan struct{})
			tc := &TaskContext{
				Vertex: vx.UID, Name: name,
				Subtask: s, Parallelism: vx.Parallelism, MaxParallelism: cfg.MaxParallelism,
				Out:     NewOutputs(outs[v][s], done),
				Done:    done,
				Failing: failing,
				Shared:  ex.shared(),
				Logger:  ex.log.With("task", name),
				Metrics: cfg.Metrics,
			}
			tc.RestoredOperators = oldOps
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
				name: name, participant: p, tc: tc, wake: in.wake, done: done, failing: failing,
				bufferTimeout: cfg.BufferTimeout, debloatTarget: cfg.DebloatTarget,
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
			if _, ok := op.(ResumableOperator); ok {
				ot.intr = tc.Out.interruptible(in.chans)
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
		starting:    len(ex.tasks),
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
		b.running = d.taskRunning
		b.final = d.final
		b.worker = newSnapshotWorker(b.name, b.tc.Vertex, b.participant, ex.store, b.tc.Shared, d)
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

// Failure is a panic value that is a task's error rather than a bug: code
// without an error result panics with one when what it stands on failed
// (a state whose store failed or holds bytes that do not decode:
// state.StoreError).
// The task then fails with it as its error, without a stack trace.
type Failure interface {
	error
	// TaskFailure marks the type; it does nothing.
	TaskFailure()
}

// runGuarded runs a task, turning a panic in user code (a map function, a
// sink) into the task's error so that it fails the job instead of the
// process.
func runGuarded(run func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = PanicError(r)
		}
	}()
	return run()
}

// PanicError returns the error of a recovered panic value r: r itself if
// it is (or wraps) a Failure, else r and the stack that panicked. Call it
// from the deferred function that recovered r.
func PanicError(r any) error {
	var f Failure
	if e, ok := r.(error); ok && errors.As(e, &f) {
		return e
	}
	return fmt.Errorf("panic: %v\n%s", r, debug.Stack())
}

func (ex *execution) shared() *store.Shared {
	if ex.store == nil {
		return nil
	}
	return ex.store.Shared()
}
