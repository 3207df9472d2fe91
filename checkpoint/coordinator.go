package checkpoint

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ParticipantID names one acknowledging participant of a checkpoint: one
// subtask of a task, for example "map-1#0".
type ParticipantID string

// ModeResolver decides the mode of the checkpoint about to be triggered with
// the given id. The Coordinator calls it once per successful, non-terminal
// Trigger that carries no mode override. AdaptiveModePolicy.Resolver builds
// one.
type ModeResolver func(id ID) Mode

// Config configures a Coordinator.
type Config struct {
	// DefaultMode is stamped on barriers when neither a per-trigger override
	// nor a Resolver decides.
	DefaultMode Mode
	// Timeout bounds how long a checkpoint may collect acknowledgements,
	// measured from its trigger. Zero disables the timeout.
	Timeout time.Duration
	// FirstID is the first id to allocate; zero means 1. A driver passes the
	// store's next id, which lies above every id a durable file names.
	FirstID ID
	// MaxConcurrent bounds the checkpoints in flight (triggered and neither
	// completed nor aborted). Zero means 1.
	MaxConcurrent int
	// Resolver, when set, decides the mode of each trigger that has no
	// override.
	Resolver ModeResolver
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	if !validMode(c.DefaultMode) {
		return fmt.Errorf("validating checkpoint config: default mode %v is not aligned or unaligned", c.DefaultMode)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("validating checkpoint config: timeout %v is negative", c.Timeout)
	}
	if c.MaxConcurrent < 0 {
		return fmt.Errorf("validating checkpoint config: max concurrent checkpoints %d is negative", c.MaxConcurrent)
	}
	return nil
}

func validMode(m Mode) bool { return m == Aligned || m == Unaligned }

// Errors Trigger returns. Test for them with errors.Is.
var (
	// ErrNoParticipants is returned when no participant is registered, so a
	// checkpoint could never collect an acknowledgement.
	ErrNoParticipants = errors.New("no participants registered")
	// ErrTooManyInFlight is returned when MaxConcurrent checkpoints are
	// already in flight.
	ErrTooManyInFlight = errors.New("too many checkpoints in flight")
	// ErrRewinding is returned after a checkpoint failed: the job is
	// restarting from its last completed checkpoint, and no checkpoint starts
	// until Reset.
	ErrRewinding = errors.New("rewinding to the last completed checkpoint")
)

// Errors wrapped by the Reason of NotifyAborted and FailJob effects. Test for
// them with errors.Is.
var (
	// ErrTimeout means the checkpoint did not collect every acknowledgement
	// before its deadline.
	ErrTimeout = errors.New("checkpoint timeout")
	// ErrDeclined means a participant could not snapshot the checkpoint.
	ErrDeclined = errors.New("checkpoint declined")
	// ErrMarkerWrite means writing the COMPLETED marker did not succeed.
	ErrMarkerWrite = errors.New("completion marker not written")
	// ErrSubsumed means a newer checkpoint completed first. The newer commit
	// covers everything this one staged, so a NotifyAborted carrying this
	// reason must not discard output the newer commit already published.
	ErrSubsumed = errors.New("checkpoint subsumed by a newer completed checkpoint")
	// ErrDiscarded means the checkpoint collected every acknowledgement while
	// the job was rewinding to below it, so it must not become a restore
	// point.
	ErrDiscarded = errors.New("checkpoint above the rewind floor discarded")
	// ErrAborted is the reason used when Abort is given a nil one.
	ErrAborted = errors.New("checkpoint aborted")
)

// AckInfo is what a participant reports with its acknowledgement.
type AckInfo struct {
	// Bytes is what the participant newly wrote for the checkpoint: its
	// snapshot and the shared files it stored for it (the incremental
	// size).
	Bytes int64
	// FullBytes is the whole size of the participant's state in the
	// checkpoint: its snapshot and every shared file the snapshot lists,
	// also those earlier checkpoints wrote (the full size).
	FullBytes int64
	// Alignment is how long the participant waited for barrier alignment.
	Alignment time.Duration
	// BarrierAt is when the participant received the checkpoint's first
	// barrier (a source: when it took the injected barrier between two
	// records); zero when unknown. The coordinator reads it against the
	// trigger time as the participant's start delay.
	BarrierAt time.Time
	// Sync is how long the participant's capture ran on its task
	// goroutine.
	Sync time.Duration
	// Async is the time from the end of the capture until the snapshot was
	// durable: the in-flight records an unaligned barrier overtook, the
	// wait for the snapshot worker, encoding, writes and fsyncs.
	Async time.Duration
}

// Timing is where one participant's part of a checkpoint went; summed up
// over the participants of a checkpoint, each field is the longest any of
// them reported (Flink's per-subtask checkpoint statistics).
type Timing struct {
	// StartDelay runs from the trigger until the participant received the
	// checkpoint's first barrier.
	StartDelay time.Duration
	// Alignment runs from the first barrier until the participant could
	// forward it.
	Alignment time.Duration
	// Sync is the capture on the task goroutine.
	Sync time.Duration
	// Async runs from the end of the capture until the snapshot was
	// durable.
	Async time.Duration
}

// String formats the timing for logs and test output.
func (t Timing) String() string {
	return fmt.Sprintf("start-delay=%v alignment=%v sync=%v async=%v", t.StartDelay, t.Alignment, t.Sync, t.Async)
}

// timing is the participant's Timing of a checkpoint triggered at
// triggeredAt.
func (info AckInfo) timing(triggeredAt time.Time) Timing {
	t := Timing{Alignment: info.Alignment, Sync: info.Sync, Async: info.Async}
	if !info.BarrierAt.IsZero() && !triggeredAt.IsZero() {
		t.StartDelay = max(info.BarrierAt.Sub(triggeredAt), 0)
	}
	return t
}

// longest returns each field's maximum of t and u.
func (t Timing) longest(u Timing) Timing {
	return Timing{
		StartDelay: max(t.StartDelay, u.StartDelay),
		Alignment:  max(t.Alignment, u.Alignment),
		Sync:       max(t.Sync, u.Sync),
		Async:      max(t.Async, u.Async),
	}
}

// TriggerOptions adjusts one Trigger.
type TriggerOptions struct {
	// Mode, when set, overrides the Resolver and the DefaultMode.
	Mode *Mode
	// Terminal marks the final checkpoint of a bounded job. Its barrier is
	// always Aligned, and it may exceed MaxConcurrent.
	Terminal bool
}

// Effect is one thing the caller of a Coordinator must carry out. The
// concrete types are WriteMarker, NotifyComplete, NotifyAborted and FailJob.
type Effect interface {
	isEffect()
	String() string
}

// WriteMarker asks the driver to write the COMPLETED-<ID> marker durably and
// then call MarkerWritten(ID), or MarkerFailed(ID, err) if it could not. Every
// participant has acknowledged ID when this effect is emitted.
type WriteMarker struct {
	ID          ID
	Mode        Mode
	Terminal    bool
	TriggeredAt time.Time
	// Bytes and FullBytes sum the participants' AckInfo of the same names.
	Bytes     int64
	FullBytes int64
}

// NotifyComplete asks the driver to tell sources and sinks to commit ID: its
// marker is durable. The metrics of the checkpoint are the driver's now minus
// TriggeredAt (duration), Bytes and FullBytes (incremental and full size),
// Max (the longest of each part over the participants) and Last (the
// participant whose acknowledgement was the last one the checkpoint waited
// for) with its LastTiming.
type NotifyComplete struct {
	ID          ID
	Mode        Mode
	Terminal    bool
	TriggeredAt time.Time
	Bytes       int64
	FullBytes   int64
	// Max holds the longest of each part of the checkpoint any participant
	// reported; Max.Alignment is the longest alignment wait.
	Max Timing
	// Last is the participant whose acknowledgement completed the
	// collection, and LastTiming its parts: the end of the checkpoint's
	// critical path.
	Last       ParticipantID
	LastTiming Timing
}

// NotifyAborted asks the driver to tell sources and sinks that checkpoint ID
// will never complete.
type NotifyAborted struct {
	ID     ID
	Reason error
}

// FailJob tells the driver that checkpoint ID failed: the whole job must
// restart from its last completed checkpoint and then call Reset. It follows
// the NotifyAborted of the same ID. Until Reset, the Coordinator refuses new
// triggers and discards any checkpoint above ID that finishes collecting
// acknowledgements. A further failure before Reset emits another FailJob; a
// driver already restarting ignores it.
type FailJob struct {
	ID     ID
	Reason error
}

func (WriteMarker) isEffect()    {}
func (NotifyComplete) isEffect() {}
func (NotifyAborted) isEffect()  {}
func (FailJob) isEffect()        {}

// String formats the effect for traces and test output.
func (e WriteMarker) String() string {
	return fmt.Sprintf("write-marker %s bytes=%d full=%d", describe(e.ID, e.Mode, e.Terminal), e.Bytes, e.FullBytes)
}

// String formats the effect for traces and test output.
func (e NotifyComplete) String() string {
	return fmt.Sprintf("notify-complete %s bytes=%d full=%d max-alignment=%v",
		describe(e.ID, e.Mode, e.Terminal), e.Bytes, e.FullBytes, e.Max.Alignment)
}

// String formats the effect for traces and test output.
func (e NotifyAborted) String() string {
	return fmt.Sprintf("notify-aborted %d: %v", e.ID, e.Reason)
}

// String formats the effect for traces and test output.
func (e FailJob) String() string {
	return fmt.Sprintf("fail-job %d: %v", e.ID, e.Reason)
}

func describe(id ID, m Mode, terminal bool) string {
	s := fmt.Sprintf("%d %s", id, m)
	if terminal {
		s += " terminal"
	}
	return s
}

// phase is where an in-flight checkpoint stands.
type phase uint8

const (
	// collecting: waiting for acknowledgements.
	collecting phase = iota
	// writingMarker: every participant acknowledged, WriteMarker was
	// emitted, and the driver has not yet reported the outcome. The
	// checkpoint can no longer be aborted: once the marker may be durable,
	// only the marker's outcome decides.
	writingMarker
)

func (p phase) String() string {
	switch p {
	case collecting:
		return "collecting"
	case writingMarker:
		return "writing-marker"
	default:
		return fmt.Sprintf("phase(%d)", uint8(p))
	}
}

type inFlight struct {
	id          ID
	mode        Mode
	terminal    bool
	phase       phase
	triggeredAt time.Time
	deadline    time.Time // zero: no deadline
	pending     map[ParticipantID]struct{}
	bytes       int64
	fullBytes   int64
	// longest is the longest of each part over the acks so far; last and
	// lastTiming are the latest ack's participant and parts.
	longest    Timing
	last       ParticipantID
	lastTiming Timing
}

// Coordinator is the checkpoint coordinator state machine. It allocates ids,
// tracks acknowledgements and decides when a checkpoint completes, aborts or
// fails. It does no I/O and reads no clock; see the package documentation
// for the caller's duties. A Coordinator is not safe for concurrent use.
type Coordinator struct {
	cfg           Config
	participants  map[ParticipantID]struct{}
	nextID        ID
	lastCompleted ID
	// floor is the rewind floor: the lowest id that failed since the last
	// Reset; zero when the job is not rewinding.
	floor    ID
	inFlight map[ID]*inFlight
	effects  []Effect
}

// NewCoordinator returns a Coordinator with no participants and no
// checkpoint in flight.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.FirstID == 0 {
		cfg.FirstID = 1
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 1
	}
	return &Coordinator{
		cfg:          cfg,
		participants: make(map[ParticipantID]struct{}),
		nextID:       cfg.FirstID,
		inFlight:     make(map[ID]*inFlight),
	}, nil
}

// Register adds p to the participants of every checkpoint triggered from now
// on. Checkpoints already in flight keep their pending sets. Registering a
// participant twice has no effect.
func (c *Coordinator) Register(p ParticipantID) {
	if p == "" {
		panic("checkpoint: registering an empty participant id")
	}
	c.participants[p] = struct{}{}
}

// Participants returns the registered participants, sorted.
func (c *Coordinator) Participants() []ParticipantID {
	return slices.Sorted(maps.Keys(c.participants))
}

// Trigger starts the next checkpoint and returns the barrier the driver must
// inject into every source. The pending set is every registered participant.
// The mode is the override, else the Resolver's decision, else DefaultMode; a
// terminal barrier is always Aligned. When Timeout is set the checkpoint's
// deadline is now+Timeout.
//
// Trigger returns ErrRewinding while a failed checkpoint awaits Reset,
// ErrNoParticipants when nobody is registered, and ErrTooManyInFlight when
// MaxConcurrent checkpoints are in flight (a terminal trigger ignores that
// limit). A refused trigger allocates no id.
func (c *Coordinator) Trigger(now time.Time, opts TriggerOptions) (Barrier, error) {
	id := c.nextID
	if c.floor != 0 {
		return Barrier{}, fmt.Errorf("triggering checkpoint %d: %w after checkpoint %d failed", id, ErrRewinding, c.floor)
	}
	if len(c.participants) == 0 {
		return Barrier{}, fmt.Errorf("triggering checkpoint %d: %w", id, ErrNoParticipants)
	}
	if !opts.Terminal && len(c.inFlight) >= c.cfg.MaxConcurrent {
		return Barrier{}, fmt.Errorf("triggering checkpoint %d: %w (%d of %d: %v)",
			id, ErrTooManyInFlight, len(c.inFlight), c.cfg.MaxConcurrent, c.InFlight())
	}
	if opts.Mode != nil && !validMode(*opts.Mode) {
		return Barrier{}, fmt.Errorf("triggering checkpoint %d: mode override %v is not aligned or unaligned", id, *opts.Mode)
	}

	mode := c.cfg.DefaultMode
	switch {
	case opts.Terminal:
		mode = Aligned
	case opts.Mode != nil:
		mode = *opts.Mode
	case c.cfg.Resolver != nil:
		mode = c.cfg.Resolver(id)
		if !validMode(mode) {
			panic(fmt.Sprintf("checkpoint: mode resolver returned %v for checkpoint %d", mode, id))
		}
	}

	f := &inFlight{
		id:          id,
		mode:        mode,
		terminal:    opts.Terminal,
		phase:       collecting,
		triggeredAt: now,
		pending:     maps.Clone(c.participants),
	}
	if c.cfg.Timeout > 0 {
		f.deadline = now.Add(c.cfg.Timeout)
	}
	c.inFlight[id] = f
	c.nextID++
	return Barrier{ID: id, Terminal: opts.Terminal, Mode: mode}, nil
}

// collectingCheckpoint returns the in-flight checkpoint id if it is still
// collecting acknowledgements, and nil otherwise.
func (c *Coordinator) collectingCheckpoint(id ID) *inFlight {
	f := c.inFlight[id]
	if f == nil || f.phase != collecting {
		return nil
	}
	return f
}

// Ack records that participant p's snapshot for checkpoint id is durable.
// When it was the last pending participant, the checkpoint emits WriteMarker,
// or, when it lies above the rewind floor, is discarded with NotifyAborted.
// An ack for an id that is not collecting (unknown, completed, aborted, or
// already writing its marker), from a participant outside the pending set,
// or a duplicate, is ignored.
func (c *Coordinator) Ack(id ID, p ParticipantID, info AckInfo) {
	f := c.collectingCheckpoint(id)
	if f == nil {
		return
	}
	if _, ok := f.pending[p]; !ok {
		return
	}
	delete(f.pending, p)
	f.bytes += info.Bytes
	f.fullBytes += info.FullBytes
	tm := info.timing(f.triggeredAt)
	f.longest = f.longest.longest(tm)
	f.last, f.lastTiming = p, tm
	if len(f.pending) > 0 {
		return
	}
	if c.floor != 0 && id > c.floor {
		c.finish(f, NotifyAborted{ID: id, Reason: fmt.Errorf(
			"completing checkpoint %d while rewinding to before failed checkpoint %d: %w", id, c.floor, ErrDiscarded)})
		return
	}
	c.becomeWritingMarker(f)
}

func (c *Coordinator) becomeWritingMarker(f *inFlight) {
	if f.phase != collecting || len(f.pending) != 0 {
		panic(fmt.Sprintf("checkpoint: checkpoint %d cannot write its marker from phase %v with %d pending participants",
			f.id, f.phase, len(f.pending)))
	}
	f.phase = writingMarker
	c.emit(WriteMarker{ID: f.id, Mode: f.mode, Terminal: f.terminal, TriggeredAt: f.triggeredAt, Bytes: f.bytes, FullBytes: f.fullBytes})
}

// Decline records that participant p could not snapshot checkpoint id: the
// checkpoint fails (NotifyAborted, then FailJob). A decline that Ack would
// ignore is ignored.
func (c *Coordinator) Decline(id ID, p ParticipantID, reason error) {
	f := c.collectingCheckpoint(id)
	if f == nil {
		return
	}
	if _, ok := f.pending[p]; !ok {
		return
	}
	if reason == nil {
		reason = errors.New("no reason given")
	}
	c.fail(f, fmt.Errorf("snapshotting checkpoint %d at %s: %w: %w", id, p, ErrDeclined, reason))
}

// Abort gives up on checkpoint id without failing the job (for example at
// shutdown): it emits NotifyAborted. Aborting an id that is not collecting is
// a no-op, so Abort is idempotent; in particular a checkpoint whose marker
// write is under way cannot be aborted, because the marker may already be
// durable.
func (c *Coordinator) Abort(id ID, reason error) {
	f := c.collectingCheckpoint(id)
	if f == nil {
		return
	}
	if reason == nil {
		reason = ErrAborted
	}
	c.finish(f, NotifyAborted{ID: id, Reason: fmt.Errorf("aborting checkpoint %d: %w", id, reason)})
}

// Tick fails every collecting checkpoint whose deadline is at or before now,
// in id order.
func (c *Coordinator) Tick(now time.Time) {
	for _, id := range c.InFlight() {
		f := c.inFlight[id]
		if f.phase != collecting || f.deadline.IsZero() || now.Before(f.deadline) {
			continue
		}
		c.fail(f, fmt.Errorf("waiting %v for %s to acknowledge checkpoint %d: %w",
			now.Sub(f.triggeredAt), formatParticipants(f.pending), id, ErrTimeout))
	}
}

// MarkerWritten records that the driver durably wrote COMPLETED-id. The
// checkpoint completes: LastCompleted advances to id (never down), the
// checkpoint emits NotifyComplete, and every collecting checkpoint below id is
// aborted as subsumed (NotifyAborted after the NotifyComplete).
//
// While the job is rewinding, NotifyComplete is withheld: a commit broadcast
// into a job that is being torn down would commit some sinks and not others.
// The marker stands, and the restarted job commits it when it restores.
//
// MarkerWritten for an id no longer in flight (finished, or dropped by Reset)
// is ignored. For an id still collecting acknowledgements, or never
// allocated, it panics: no marker was requested.
func (c *Coordinator) MarkerWritten(id ID) {
	f := c.markerCheckpoint(id, "MarkerWritten")
	if f == nil {
		return
	}
	delete(c.inFlight, id)
	c.lastCompleted = max(c.lastCompleted, id)
	if c.floor == 0 {
		c.emit(NotifyComplete{
			ID: id, Mode: f.mode, Terminal: f.terminal, TriggeredAt: f.triggeredAt,
			Bytes: f.bytes, FullBytes: f.fullBytes, Max: f.longest, Last: f.last, LastTiming: f.lastTiming,
		})
	}
	for _, older := range c.InFlight() {
		if older >= id {
			break
		}
		if o := c.collectingCheckpoint(older); o != nil {
			c.finish(o, NotifyAborted{ID: older, Reason: fmt.Errorf(
				"completing checkpoint %d: aborting checkpoint %d: %w", id, older, ErrSubsumed)})
		}
	}
}

// MarkerFailed records that writing COMPLETED-id did not succeed: the
// checkpoint fails (NotifyAborted, then FailJob). Ignored and refused like
// MarkerWritten.
func (c *Coordinator) MarkerFailed(id ID, err error) {
	f := c.markerCheckpoint(id, "MarkerFailed")
	if f == nil {
		return
	}
	if err == nil {
		err = errors.New("no reason given")
	}
	c.fail(f, fmt.Errorf("writing marker COMPLETED-%d: %w: %w", id, ErrMarkerWrite, err))
}

// markerCheckpoint returns the checkpoint whose marker outcome the driver
// reports, nil when the report is late, and panics when no marker was asked
// for.
func (c *Coordinator) markerCheckpoint(id ID, event string) *inFlight {
	if id == 0 || id >= c.nextID {
		panic(fmt.Sprintf("checkpoint: %s(%d) for an id never allocated (next id %d)", event, id, c.nextID))
	}
	f := c.inFlight[id]
	if f == nil {
		return nil
	}
	if f.phase != writingMarker {
		panic(fmt.Sprintf("checkpoint: %s(%d) in phase %v: no marker was requested (pending %s)",
			event, id, f.phase, formatParticipants(f.pending)))
	}
	return f
}

// Reset follows a whole-job restart from checkpoint restoredFrom (zero for a
// fresh start): every in-flight checkpoint is dropped without effects, since
// the tasks that could act on them are gone, and the rewind floor is
// cleared. Ids keep increasing and are never reused; LastCompleted is
// unchanged. The driver calls Reset only after every WriteMarker it was
// handed has an outcome (MarkerWritten or MarkerFailed), because the restore
// point must see every durable marker. Reset panics when restoredFrom is at
// or above NextID: no job restores from a checkpoint that never started.
func (c *Coordinator) Reset(restoredFrom ID) {
	if restoredFrom >= c.nextID {
		panic(fmt.Sprintf("checkpoint: resetting to checkpoint %d at or above next id %d", restoredFrom, c.nextID))
	}
	clear(c.inFlight)
	c.floor = 0
}

// fail ends f as a failed checkpoint: NotifyAborted, FailJob, and the rewind
// floor drops to f's id if that is lower.
func (c *Coordinator) fail(f *inFlight, reason error) {
	c.finish(f, NotifyAborted{ID: f.id, Reason: reason})
	c.emit(FailJob{ID: f.id, Reason: reason})
	if c.floor == 0 || f.id < c.floor {
		c.floor = f.id
	}
}

// finish removes f from flight and emits its abort.
func (c *Coordinator) finish(f *inFlight, abort NotifyAborted) {
	if c.inFlight[f.id] != f {
		panic(fmt.Sprintf("checkpoint: finishing checkpoint %d that is not in flight", f.id))
	}
	delete(c.inFlight, f.id)
	c.emit(abort)
}

func (c *Coordinator) emit(e Effect) { c.effects = append(c.effects, e) }

// Ready returns the effects accumulated since the last Advance, in the order
// they must be carried out. It returns the same effects until Advance.
func (c *Coordinator) Ready() []Effect {
	return slices.Clone(c.effects)
}

// Advance tells the Coordinator that the caller carried out every effect the
// last Ready returned.
func (c *Coordinator) Advance() {
	c.effects = c.effects[:0]
}

// LastCompleted returns the newest checkpoint whose marker the driver
// reported written, or zero. It never decreases.
func (c *Coordinator) LastCompleted() ID { return c.lastCompleted }

// InFlight returns the ids of the checkpoints that are collecting
// acknowledgements or writing their marker, sorted.
func (c *Coordinator) InFlight() []ID {
	return slices.Sorted(maps.Keys(c.inFlight))
}

// Pending returns the participants that have not acknowledged checkpoint id,
// sorted; empty when its marker is being written, nil when it is not in
// flight.
func (c *Coordinator) Pending(id ID) []ParticipantID {
	f := c.inFlight[id]
	if f == nil {
		return nil
	}
	return append([]ParticipantID{}, slices.Sorted(maps.Keys(f.pending))...)
}

// NextID returns the id the next successful Trigger allocates.
func (c *Coordinator) NextID() ID { return c.nextID }

// RewindFloor returns the lowest checkpoint that failed since the last Reset,
// or zero when the job is not rewinding.
func (c *Coordinator) RewindFloor() ID { return c.floor }

func formatParticipants(set map[ParticipantID]struct{}) string {
	ps := slices.Sorted(maps.Keys(set))
	ss := make([]string, len(ps))
	for i, p := range ps {
		ss[i] = string(p)
	}
	return "[" + strings.Join(ss, " ") + "]"
}
