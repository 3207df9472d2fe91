package checkpoint

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Advance is what an Alignment tells its runner after an input event.
type Advance struct {
	// Forward: snapshot now and forward Barrier downstream.
	Forward bool
	// Barrier is the barrier to forward, carrying its pinned mode. Set only
	// with Forward.
	Barrier Barrier
	// UnalignedFirst: the forward happened on the first delivery of an
	// unaligned barrier while other inputs still owe it. Into checkpoint
	// Barrier.ID's snapshot the runner must capture the records each input in
	// CaptureInputs delivers until that input's own copy of the barrier, or
	// its end. Those records are processed as usual as well.
	UnalignedFirst bool
	// CaptureInputs lists, with UnalignedFirst, the inputs that still owe the
	// barrier, sorted.
	CaptureInputs []int
	// CaptureDone lists, ascending, the checkpoints whose in-flight capture
	// ended with this event (every open input delivered its copy or closed).
	// The runner finalises those snapshots.
	CaptureDone []ID
}

// alignState is one barrier id that some input still owes.
type alignState struct {
	// barrier is pinned by the first delivery.
	barrier Barrier
	// owed[i]: input i is open and has not delivered the barrier.
	owed []bool
}

func (s *alignState) owing() []int {
	var in []int
	for i, o := range s.owed {
		if o {
			in = append(in, i)
		}
	}
	return in
}

func (s *alignState) settled() bool { return !slices.Contains(s.owed, true) }

// Alignment is the barrier alignment state machine of one multi-input task
// (Chandy-Lamport). The runner reports each barrier an input delivers and
// each input that ends; Alignment answers when to snapshot and forward, which
// inputs to stop polling (aligned mode) and whose records to capture
// (unaligned mode).
//
// Each checkpoint's mode is pinned by the first delivery of its id: Unaligned
// only when the barrier is stamped Unaligned, is not terminal and the task
// can capture in-flight records (canUnalign); Aligned otherwise. Every open
// input must deliver every barrier id in increasing order; a runner that
// breaks this, or polls a paused or closed input, is a bug, and Alignment
// panics describing its state. An Alignment is not safe for concurrent use.
type Alignment struct {
	canUnalign bool
	closed     []bool
	// last[i] is the highest barrier id input i delivered; zero if none.
	last []ID
	// pending holds the barrier ids that some open input still owes. At most
	// one of them is aligned, and it is the highest.
	pending map[ID]*alignState
}

// NewAlignment returns the alignment of a task with numInputs inputs, all
// open. canUnalign says whether the task can capture in-flight records; when
// false, unaligned barriers are handled (and forwarded) as aligned.
func NewAlignment(numInputs int, canUnalign bool) *Alignment {
	if numInputs < 1 {
		panic(fmt.Sprintf("checkpoint: alignment needs at least one input, got %d", numInputs))
	}
	return &Alignment{
		canUnalign: canUnalign,
		closed:     make([]bool, numInputs),
		last:       make([]ID, numInputs),
		pending:    make(map[ID]*alignState),
	}
}

// pin fixes the mode a barrier id runs under at this task.
func (a *Alignment) pin(b Barrier) Barrier {
	if b.Terminal || !a.canUnalign {
		b.Mode = Aligned
	}
	return b
}

// OnBarrier handles input delivering barrier b.
func (a *Alignment) OnBarrier(input int, b Barrier) Advance {
	a.checkInput(input, "delivering "+b.String())
	if a.closed[input] {
		a.violation("input %d delivered %v after it closed", input, b)
	}
	if a.Paused(input) {
		a.violation("input %d delivered %v while paused", input, b)
	}
	if b.ID == 0 {
		a.violation("input %d delivered %v with id zero", input, b)
	}
	if b.ID <= a.last[input] {
		a.violation("input %d delivered %v after barrier %d", input, b, a.last[input])
	}
	for _, id := range a.Pending() {
		if id < b.ID && a.pending[id].owed[input] {
			a.violation("input %d delivered %v while it still owes barrier %d", input, b, id)
		}
	}

	if st, ok := a.pending[b.ID]; ok {
		if !st.owed[input] {
			a.violation("input %d delivered %v twice", input, b)
		}
		a.last[input] = b.ID
		st.owed[input] = false
		if !st.settled() {
			return Advance{}
		}
		delete(a.pending, b.ID)
		if st.barrier.Mode == Aligned {
			return Advance{Forward: true, Barrier: st.barrier}
		}
		return Advance{CaptureDone: []ID{b.ID}}
	}

	// First delivery of this id. Every other input, open or closed, must not
	// have passed it.
	for j, last := range a.last {
		if j != input && last >= b.ID {
			a.violation("input %d delivered %v first, but input %d already delivered barrier %d", input, b, j, last)
		}
	}
	a.last[input] = b.ID
	st := &alignState{barrier: a.pin(b), owed: make([]bool, len(a.closed))}
	for j, closed := range a.closed {
		st.owed[j] = j != input && !closed
	}
	if st.settled() {
		return Advance{Forward: true, Barrier: st.barrier}
	}
	a.becomePending(st)
	if st.barrier.Mode == Aligned {
		return Advance{}
	}
	return Advance{Forward: true, Barrier: st.barrier, UnalignedFirst: true, CaptureInputs: st.owing()}
}

// becomePending starts waiting for the inputs that owe st's barrier.
func (a *Alignment) becomePending(st *alignState) {
	for id, other := range a.pending {
		if id >= st.barrier.ID || other.barrier.Mode == Aligned {
			a.violation("barrier %v became pending beside barrier %v", st.barrier, other.barrier)
		}
	}
	a.pending[st.barrier.ID] = st
}

// OnInputClosed handles the end of input. A closed input satisfies every
// barrier it owes, which may complete an aligned barrier (Forward) or end
// captures (CaptureDone). Closing an input twice is a no-op.
func (a *Alignment) OnInputClosed(input int) Advance {
	a.checkInput(input, "closing")
	if a.closed[input] {
		return Advance{}
	}
	a.closed[input] = true
	var adv Advance
	for _, id := range a.Pending() {
		st := a.pending[id]
		if !st.owed[input] {
			continue
		}
		st.owed[input] = false
		if !st.settled() {
			continue
		}
		delete(a.pending, id)
		if st.barrier.Mode == Unaligned {
			adv.CaptureDone = append(adv.CaptureDone, id)
			continue
		}
		if adv.Forward {
			a.violation("closing input %d completes both %v and %v", input, adv.Barrier, st.barrier)
		}
		adv.Forward, adv.Barrier = true, st.barrier
	}
	return adv
}

// Paused reports whether the runner must not poll input: in aligned mode it
// delivered the pending barrier, which other open inputs still owe.
func (a *Alignment) Paused(input int) bool {
	a.checkInput(input, "asking whether paused")
	if a.closed[input] {
		return false
	}
	for _, st := range a.pending {
		if st.barrier.Mode == Aligned && !st.owed[input] {
			return true
		}
	}
	return false
}

// Capturing returns, ascending, the unaligned checkpoints into whose
// snapshots the records input delivers must be captured.
func (a *Alignment) Capturing(input int) []ID {
	a.checkInput(input, "asking what is captured")
	var ids []ID
	for _, id := range a.Pending() {
		st := a.pending[id]
		if st.barrier.Mode == Unaligned && st.owed[input] {
			ids = append(ids, id)
		}
	}
	return ids
}

// PendingInputs returns, sorted, the open inputs that still owe barrier id;
// nil when id is not pending.
func (a *Alignment) PendingInputs(id ID) []int {
	st := a.pending[id]
	if st == nil {
		return nil
	}
	return st.owing()
}

// Pending returns, ascending, the barrier ids some open input still owes.
func (a *Alignment) Pending() []ID {
	return slices.Sorted(maps.Keys(a.pending))
}

// String describes the state for panics and test output.
func (a *Alignment) String() string {
	var b strings.Builder
	b.WriteString("inputs [")
	for i := range a.closed {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d: last %d", i, a.last[i])
		if a.closed[i] {
			b.WriteString(" closed")
		} else if a.Paused(i) {
			b.WriteString(" paused")
		}
	}
	b.WriteString("] pending [")
	for k, id := range a.Pending() {
		if k > 0 {
			b.WriteString(", ")
		}
		st := a.pending[id]
		fmt.Fprintf(&b, "%v owed by %v", st.barrier, st.owing())
	}
	b.WriteString("]")
	return b.String()
}

func (a *Alignment) checkInput(input int, doing string) {
	if input < 0 || input >= len(a.closed) {
		panic(fmt.Sprintf("checkpoint: %s on input %d of %d", doing, input, len(a.closed)))
	}
}

func (a *Alignment) violation(format string, args ...any) {
	panic(fmt.Sprintf("checkpoint: barrier protocol violation: %s; %s", fmt.Sprintf(format, args...), a))
}
