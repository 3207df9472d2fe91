package connector

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/internal/fault"
)

// Names of the operator state the Committer keeps.
const (
	// PendingPrefix starts the name of a persisted handle:
	// _xo_pending_sub<N>_<ckpt>, N the subtask that prepared it.
	PendingPrefix = "_xo_pending_sub"
	// GenerationState holds the topology generation.
	GenerationState = "_xo_generation"
)

// Fault points on the commit path, for crash tests (CLINK_FAULT).
const (
	// FaultAfterPrepare is reached when a handle was prepared and is about
	// to enter the checkpoint's snapshot.
	FaultAfterPrepare = "sink.after-prepare"
	// FaultBeforeCommit is reached before a completed checkpoint's handle
	// is committed; FaultAfterCommit after the connector committed it and
	// before the Committer forgets it.
	FaultBeforeCommit = "sink.before-commit"
	FaultAfterCommit  = "sink.after-commit"
	// FaultRecover is reached before each restored handle is recovered at
	// open.
	FaultRecover = "sink.recover"
)

// DefaultCloseWait bounds how long a clean close waits for outstanding
// commits before it fails (and leaves them to the next restore).
const DefaultCloseWait = 30 * time.Second

// PendingName returns the operator state name of the handle that subtask
// prepared for checkpoint ckpt.
func PendingName(subtask int, ckpt checkpoint.ID) string {
	return fmt.Sprintf("%s%d_%d", PendingPrefix, subtask, ckpt)
}

// ParsePendingName is the inverse of PendingName.
func ParsePendingName(name string) (subtask int, ckpt checkpoint.ID, ok bool) {
	rest, found := strings.CutPrefix(name, PendingPrefix)
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "_")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.Atoi(a)
	c, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil || s < 0 || c == 0 {
		return 0, 0, false
	}
	return s, checkpoint.ID(c), true
}

// OpenContext is what the runtime tells a Committer when its subtask opens.
type OpenContext struct {
	UID                  string
	Subtask, Parallelism int
	MaxParallelism       int
	// Restored holds the operator state of the sink in every subtask of the
	// restored checkpoint that had any (one entry without a rescale); nil
	// on a fresh start.
	Restored [][]store.NamedState
	// RestoredParallelism is the parallelism of the run that took the
	// restored checkpoint (0 on a fresh start).
	RestoredParallelism int
	// Checkpointing is false when the job takes no checkpoints: the sink
	// then commits what it holds when its input ends.
	Checkpointing bool
	// Done is closed when the task must stop (a failure or cancel).
	Done <-chan struct{}
	// Failing is closed when this subtask is ending with an error.
	Failing <-chan struct{}
	Logger  *slog.Logger
	// CloseWait bounds the wait for outstanding commits at a clean close;
	// DefaultCloseWait when zero.
	CloseWait time.Duration
}

type handle[C any] struct {
	author int
	ckpt   checkpoint.ID
	data   []byte
	c      C
}

type dispatch struct {
	complete bool
	ckpt     checkpoint.ID
}

// Committer runs a CommittingSink for one subtask: it owns the two-phase
// commit choreography. Write, Snapshot, EndOfInput and Close belong to the
// task goroutine; NotifyComplete and NotifyAborted may be called from any
// goroutine.
type Committer[In, C any] struct {
	sink CommittingSink[In, C]
	ctx  OpenContext
	log  *slog.Logger
	gate *DispatchGate
	gen  int

	failed atomic.Bool

	mu      sync.Mutex
	changed sync.Cond // pending shrank, queue grew, or err set
	pending map[checkpoint.ID]*handle[C]
	// completed is the newest checkpoint whose completion was dispatched.
	completed checkpoint.ID
	queue     []dispatch
	stop      bool
	err       error

	dispatcherDone chan struct{}
	closed         bool
	recovered      int
}

// NewCommitter wraps sink.
func NewCommitter[In, C any](sink CommittingSink[In, C]) *Committer[In, C] {
	c := &Committer[In, C]{sink: sink, gate: NewDispatchGate(), pending: map[checkpoint.ID]*handle[C]{}}
	c.changed.L = &c.mu
	return c
}

// Gate returns the commit-dispatch gate.
func (c *Committer[In, C]) Gate() *DispatchGate { return c.gate }

// Recovered returns how many restored handles Open finalised.
func (c *Committer[In, C]) Recovered() int { return c.recovered }

// Open restores the subtask's handles, opens the connector, recovers the
// handles this subtask owns and starts the commit dispatcher.
func (c *Committer[In, C]) Open(ctx OpenContext) error {
	c.ctx = ctx
	if ctx.CloseWait <= 0 {
		c.ctx.CloseWait = DefaultCloseWait
	}
	c.log = ctx.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("channel", "sink.2pc", "sink", ctx.UID)
	owned, succeeds, prevGen, err := c.restore(ctx)
	if err != nil {
		return err
	}
	token, err := newRunToken()
	if err != nil {
		return err
	}
	pend := make([]C, len(owned))
	for i, h := range owned {
		pend[i] = h.c
	}
	if err := c.sink.Open(InitContext[C]{
		UID: ctx.UID, Subtask: ctx.Subtask, Parallelism: ctx.Parallelism,
		Generation: c.gen, PreviousGeneration: prevGen, RunToken: token,
		Pending: pend, Succeeds: succeeds, Logger: ctx.Logger,
	}); err != nil {
		return fmt.Errorf("opening sink %s subtask %d: %w", ctx.UID, ctx.Subtask, err)
	}
	rec, hasRecover := c.sink.(Recoverer[C])
	for _, h := range owned {
		if err := fault.Point(FaultRecover); err != nil {
			return err
		}
		if hasRecover {
			err = rec.Recover(h.c)
		} else {
			err = c.sink.Commit(h.c)
		}
		if err != nil {
			return fmt.Errorf("sink %s subtask %d: recovering the handle that subtask %d prepared for checkpoint %d: %w",
				ctx.UID, ctx.Subtask, h.author, h.ckpt, err)
		}
		c.recovered++
	}
	c.log.Info("recovered prepared handles at open", "subtask", ctx.Subtask, "handles", len(owned), "generation", c.gen)
	c.dispatcherDone = make(chan struct{})
	go c.dispatcher()
	return nil
}

// restore decodes the restored handles and keeps those this subtask owns.
func (c *Committer[In, C]) restore(ctx OpenContext) (owned []*handle[C], succeeds []int, prevGen int, err error) {
	prevGen = -1
	if len(ctx.Restored) == 0 {
		return nil, nil, prevGen, nil
	}
	oldP := ctx.RestoredParallelism
	if oldP == 0 {
		oldP = ctx.Parallelism
	}
	succ := checkpoint.Succession{OldParallelism: oldP, NewParallelism: ctx.Parallelism, MaxParallelism: ctx.MaxParallelism}
	if err := succ.Validate(); err != nil {
		return nil, nil, prevGen, fmt.Errorf("sink %s: %w", ctx.UID, err)
	}
	succeeds = succ.Parents(ctx.Subtask)
	seen := map[[2]uint64]bool{}
	for _, states := range ctx.Restored {
		for _, ns := range states {
			if ns.Name == GenerationState {
				g, n := binary.Uvarint(ns.Data)
				if n <= 0 || n != len(ns.Data) {
					return nil, nil, prevGen, fmt.Errorf("sink %s: restored %s is corrupt", ctx.UID, GenerationState)
				}
				prevGen = max(prevGen, int(g))
				continue
			}
			author, ckpt, ok := ParsePendingName(ns.Name)
			if !ok {
				if strings.HasPrefix(ns.Name, "_xo_") {
					return nil, nil, prevGen, fmt.Errorf("sink %s: restored operator state %q is not a handle name (%s<subtask>_<checkpoint>)", ctx.UID, ns.Name, PendingPrefix)
				}
				continue
			}
			if !succ.Succeeds(ctx.Subtask, author) {
				continue // its owner finalises it
			}
			k := [2]uint64{uint64(author), uint64(ckpt)}
			if seen[k] {
				continue
			}
			seen[k] = true
			v, err := c.sink.UnmarshalCommittable(ns.Data)
			if err != nil {
				return nil, nil, prevGen, fmt.Errorf("sink %s: decoding restored handle %s (prepared by subtask %d for checkpoint %d): %w",
					ctx.UID, ns.Name, author, ckpt, err)
			}
			owned = append(owned, &handle[C]{author: author, ckpt: ckpt, data: ns.Data, c: v})
		}
	}
	slices.SortFunc(owned, func(a, b *handle[C]) int {
		return cmp.Or(cmp.Compare(a.ckpt, b.ckpt), cmp.Compare(a.author, b.author))
	})
	if prevGen < 0 {
		prevGen = 0
	}
	c.gen = prevGen
	if oldP != ctx.Parallelism {
		c.gen = prevGen + 1
	}
	return owned, succeeds, prevGen, nil
}

// newRunToken returns 64 random bits in hex: reruns that take the same
// checkpoint ids (a job that only commits at the end of its input, rerun
// daily into one directory) must not collide.
func newRunToken() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making a run token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Write hands one record to the connector. It fails once a commit has
// failed, so that the job restarts and the restore finalises the handle.
func (c *Committer[In, C]) Write(v In) error {
	if c.failed.Load() {
		return c.asyncErr()
	}
	return c.sink.Write(v)
}

func (c *Committer[In, C]) asyncErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Snapshot prepares the commit of checkpoint ckpt and returns the operator
// state that the checkpoint must hold: the generation and every handle not
// yet committed, this one included.
func (c *Committer[In, C]) Snapshot(ckpt checkpoint.ID) ([]store.NamedState, error) {
	if err := c.asyncErr(); err != nil {
		return nil, err
	}
	v, ok, err := c.sink.PrepareCommit(ckpt)
	if err != nil {
		return nil, fmt.Errorf("preparing the commit of checkpoint %d: %w", ckpt, err)
	}
	if ok {
		data, err := c.sink.MarshalCommittable(v)
		if err != nil {
			return nil, fmt.Errorf("encoding the handle of checkpoint %d: %w", ckpt, err)
		}
		c.mu.Lock()
		c.pending[ckpt] = &handle[C]{author: c.ctx.Subtask, ckpt: ckpt, data: data, c: v}
		c.mu.Unlock()
		if err := fault.Point(FaultAfterPrepare); err != nil {
			return nil, err
		}
	}
	out := []store.NamedState{{Name: GenerationState, Data: binary.AppendUvarint(nil, uint64(c.gen))}}
	c.mu.Lock()
	for _, h := range c.pending {
		out = append(out, store.NamedState{Name: PendingName(h.author, h.ckpt), Data: h.data})
	}
	c.mu.Unlock()
	slices.SortFunc(out[1:], func(a, b store.NamedState) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// NotifyComplete commits, on the dispatch goroutine, every pending handle
// of a checkpoint up to ckpt, oldest first.
func (c *Committer[In, C]) NotifyComplete(ckpt checkpoint.ID) {
	c.enqueue(dispatch{complete: true, ckpt: ckpt})
}

// NotifyAborted aborts the handle of checkpoint ckpt if it is still
// pending. A failed checkpoint makes the job rewind to an earlier one, so
// no later checkpoint can need it.
func (c *Committer[In, C]) NotifyAborted(ckpt checkpoint.ID) {
	c.enqueue(dispatch{complete: false, ckpt: ckpt})
}

func (c *Committer[In, C]) enqueue(d dispatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop || c.dispatcherDone == nil {
		c.log.Warn("commit dispatch refused: the sink is closed; the next restore finalises the handle", "checkpoint", d.ckpt, "commit", d.complete)
		return
	}
	c.queue = append(c.queue, d)
	c.changed.Broadcast()
}

// PendingCommittables returns the handles prepared and not yet finalised,
// oldest first.
func (c *Committer[In, C]) PendingCommittables() []C {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]checkpoint.ID, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]C, len(ids))
	for i, id := range ids {
		out[i] = c.pending[id].c
	}
	return out
}

// StagedCommitsOutstanding returns how many prepared handles await their
// commit.
func (c *Committer[In, C]) StagedCommitsOutstanding() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

func (c *Committer[In, C]) dispatcher() {
	defer close(c.dispatcherDone)
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.stop {
			c.changed.Wait()
		}
		if c.stop {
			c.mu.Unlock()
			return
		}
		d := c.queue[0]
		c.queue = c.queue[1:]
		if d.complete {
			c.completed = max(c.completed, d.ckpt)
		}
		var due []*handle[C]
		for id, h := range c.pending {
			switch {
			case d.complete && id <= d.ckpt:
				due = append(due, h)
			case !d.complete && id == d.ckpt && id > c.completed && c.err == nil:
				// Never roll back what a completed checkpoint covers, nor
				// anything once a commit failed: a restore finalises it.
				due = append(due, h)
			}
		}
		c.mu.Unlock()
		slices.SortFunc(due, func(a, b *handle[C]) int { return cmp.Compare(a.ckpt, b.ckpt) })
		for _, h := range due {
			if !c.finalise(h, d.complete) {
				break
			}
		}
	}
}

// finalise commits or aborts one handle inside the gate; false stops the
// dispatch (teardown or failure).
func (c *Committer[In, C]) finalise(h *handle[C], commit bool) bool {
	if !c.gate.Enter() {
		c.log.Info("commit dispatch declined: the sink's teardown has begun; the next restore finalises the handle", "checkpoint", h.ckpt, "commit", commit)
		return false
	}
	var err error
	if commit {
		if err = fault.Point(FaultBeforeCommit); err == nil {
			err = c.sink.Commit(h.c)
		}
		if err == nil {
			err = fault.Point(FaultAfterCommit)
		}
	} else {
		err = c.sink.Abort(h.c)
	}
	c.gate.Exit()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		verb := "committing"
		if !commit {
			verb = "aborting"
		}
		if c.err == nil {
			c.err = fmt.Errorf("sink %s subtask %d: %s the handle of checkpoint %d: %w", c.ctx.UID, c.ctx.Subtask, verb, h.ckpt, err)
			c.failed.Store(true)
		}
		c.changed.Broadcast()
		return false
	}
	delete(c.pending, h.ckpt)
	c.changed.Broadcast()
	return true
}

// EndOfInput commits the tail of a job that takes no checkpoints; with
// checkpoints the terminal checkpoint commits it.
func (c *Committer[In, C]) EndOfInput() error {
	if c.ctx.Checkpointing {
		return nil
	}
	v, ok, err := c.sink.PrepareCommit(0)
	if err != nil {
		return fmt.Errorf("preparing the final commit: %w", err)
	}
	if !ok {
		return nil
	}
	if err := c.sink.Commit(v); err != nil {
		return fmt.Errorf("committing at end of input: %w", err)
	}
	return nil
}

// Close ends the subtask. On a clean end (the task's Done channel is open)
// it first waits, bounded by the close wait, until every prepared handle is
// committed; then it retires the gate (a commit already running finishes,
// later ones are refused), stops the dispatcher and closes the connector.
func (c *Committer[In, C]) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	if c.dispatcherDone != nil {
		if !c.cancelled() {
			if err := c.awaitCommits(); err != nil {
				errs = append(errs, err)
			}
		}
		c.gate.Retire()
		c.mu.Lock()
		c.stop = true
		c.changed.Broadcast()
		c.mu.Unlock()
		<-c.dispatcherDone
	} else {
		c.gate.Retire()
	}
	if err := c.sink.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing sink %s: %w", c.ctx.UID, err))
	}
	return errors.Join(errs...)
}

func (c *Committer[In, C]) cancelled() bool {
	for _, ch := range []<-chan struct{}{c.ctx.Done, c.ctx.Failing} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
			return true
		default:
		}
	}
	return false
}

func (c *Committer[In, C]) awaitCommits() error {
	deadline := time.Now().Add(c.ctx.CloseWait)
	timer := time.AfterFunc(c.ctx.CloseWait, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	watchDone := make(chan struct{})
	defer close(watchDone)
	if c.ctx.Done != nil {
		go func() {
			select {
			case <-c.ctx.Done:
				c.mu.Lock()
				c.changed.Broadcast()
				c.mu.Unlock()
			case <-watchDone:
			}
		}()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) > 0 && c.err == nil {
		if c.cancelled() {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("sink %s subtask %d: %d staged commits still outstanding after %v; the next restore finalises them",
				c.ctx.UID, c.ctx.Subtask, len(c.pending), c.ctx.CloseWait)
		}
		c.changed.Wait()
	}
	return c.err
}
