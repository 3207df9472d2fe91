package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// MaxWatermark is the watermark of a closed input: it never holds back the
// minimum.
const MaxWatermark = math.MaxInt64

// MinWatermark is the watermark before any has arrived.
const MinWatermark = math.MinInt64

// region is a run of elements a priority barrier of an aligned checkpoint
// overtook on one input (the chain cannot capture in-flight records, or the
// checkpoint was pinned aligned): the barrier is handed to alignment only
// after the region has been processed. The region of an unaligned barrier
// is captured when the barrier is popped and needs no tracking.
type region struct {
	barrier   checkpoint.Barrier
	remaining int
}

// pendingSnapshot is a snapshot whose state is captured but whose in-flight
// records are still being collected (unaligned checkpoints).
type pendingSnapshot struct {
	id       checkpoint.ID
	snap     *captured
	inflight map[int]*store.InFlight // by channel index
	// tails are the encodings of what its barriers overtook, at most one
	// per channel; they follow inflight's records of their channel.
	tails     []*overtakenEncoding
	alignDone bool
	timing    snapshotTiming
}

// operatorTask runs one subtask of a vertex with inputs.
type operatorTask struct {
	base     *taskBase
	op       Operator
	inputs   []*Channel
	logical  []int // logical input of each channel
	align    *checkpoint.Alignment
	canAlign bool
	closed   []bool
	open     int
	inputWm  []int64
	curWm    int64
	regions  [][]region
	pinned   map[checkpoint.ID]checkpoint.Mode
	// arrived is when each checkpoint's first barrier reached the task,
	// until the task forwards it.
	arrived  map[checkpoint.ID]time.Time
	pending  map[checkpoint.ID]*pendingSnapshot
	pausedAt time.Time
	// inputEnded: endInput ran.
	inputEnded bool
	scratch    []byte
	lastFlush  time.Time
	// intr is set (by whoever builds the task, before its producers start)
	// when op is a ResumableOperator: the task then takes unaligned
	// priority barriers between two records of a batch (interruptBatch).
	intr *Interrupt
	// captured lists the checkpoints into whose in-flight records the
	// batch being processed is captured, from its first unprocessed
	// record on; reused between batches.
	captured []checkpoint.ID
	// popped counts the non-barrier elements popped from each channel:
	// the position of the next one, as overtakenEncoding counts them.
	popped []int64
	// encoding lists, per channel, the overtaken encodings that cover
	// elements not yet popped from it.
	encoding [][]*overtakenEncoding
	// encoders counts the encoding goroutines started; the task waits for
	// them before it closes its chain.
	encoders sync.WaitGroup
	// debloat sizes the input channels (nil: they keep their capacity).
	debloat *debloater
}

func (t *operatorTask) run() (err error) {
	b := t.base
	n := len(t.inputs)
	t.closed = make([]bool, n)
	t.open = n
	t.inputWm = make([]int64, n)
	for i := range t.inputWm {
		t.inputWm[i] = MinWatermark
	}
	t.curWm = MinWatermark
	t.regions = make([][]region, n)
	t.popped = make([]int64, n)
	t.encoding = make([][]*overtakenEncoding, n)
	t.pending = make(map[checkpoint.ID]*pendingSnapshot)
	t.pinned = make(map[checkpoint.ID]checkpoint.Mode)
	t.arrived = make(map[checkpoint.ID]time.Time)
	t.canAlign = t.op.CanUnalign()
	t.align = checkpoint.NewAlignment(n, t.canAlign)

	// Close also releases what a failed Open had already opened, once no
	// encoding of overtaken records still reads the chain's batches.
	defer func() {
		t.encoders.Wait()
		err = b.closeChain(t.op, err)
	}()
	if err := t.op.Open(b.tc); err != nil {
		return fmt.Errorf("opening %s: %w", b.name, err)
	}
	if b.tc.Restored != nil {
		if err := t.restore(b.tc.Restored); err != nil {
			return err
		}
	}
	if len(b.tc.Rescaled) > 0 {
		// The lowest watermark any old subtask had reached is safe.
		wm := int64(MaxWatermark)
		for _, s := range b.tc.Rescaled {
			if len(s.Operators) > 0 {
				wm = min(wm, s.Operators[0].Watermark)
			}
		}
		if wm != MaxWatermark && wm > t.curWm {
			t.curWm = wm
		}
	}
	b.reportRunning(t.op)
	t.lastFlush = time.Now()
	if b.debloatTarget > 0 && len(t.inputs) > 0 && t.inputs[0].max > debloatMinCapacity {
		t.debloat = newDebloater(b.debloatTarget, t.inputs[0].max, t.lastFlush)
		for _, c := range t.inputs {
			c.SetCapacity(t.debloat.capacity)
		}
	}
	timed, _ := t.op.(Timed)
	for t.open > 0 {
		progressed := false
		for i := 0; i < n; i++ {
			if t.closed[i] || t.align.Paused(i) {
				continue
			}
			e, ok := t.inputs[i].TryPop()
			if !ok {
				continue
			}
			progressed = true
			if err := t.handle(i, e); err != nil {
				return err
			}
		}
		if progressed {
			// A canceled job stops now, not once its queues ran dry: under
			// backpressure they hold seconds of work.
			select {
			case <-b.done:
				return ErrCanceled
			default:
			}
			if timed != nil {
				if err := runDeadline(timed, b.name); err != nil {
					return err
				}
			}
			if b.bufferTimeout >= 0 || t.debloat != nil {
				now := time.Now()
				if b.bufferTimeout >= 0 && now.Sub(t.lastFlush) >= b.bufferTimeout {
					if err := t.op.Flush(); err != nil {
						return fmt.Errorf("flushing %s: %w", b.name, err)
					}
					t.lastFlush = now
				}
				t.resizeInputs(now)
			}
			continue
		}
		if t.open == 0 {
			break
		}
		// Nothing queued on any pollable input: flush and wait.
		if err := t.op.Flush(); err != nil {
			return fmt.Errorf("flushing %s: %w", b.name, err)
		}
		t.lastFlush = time.Now()
		var timer *time.Timer
		var fire <-chan time.Time
		if timed != nil {
			if d, ok := timed.NextDeadline(); ok {
				timer = time.NewTimer(time.Until(d))
				fire = timer.C
			}
		}
		idleFrom := t.lastFlush
		select {
		case <-b.wake:
		case <-fire:
			if err := runDeadline(timed, b.name); err != nil {
				return err
			}
		case <-b.done:
			if timer != nil {
				timer.Stop()
			}
			return ErrCanceled
		}
		if timer != nil {
			timer.Stop()
		}
		if t.debloat != nil {
			now := time.Now()
			t.debloat.idled(now.Sub(idleFrom))
			t.resizeInputs(now)
		}
	}
	if err := t.endInput(); err != nil {
		return err
	}
	if len(t.pending) != 0 {
		return fmt.Errorf("%s ended with in-flight capture of checkpoints %v unfinished", b.name, t.pendingIDs())
	}
	if err := b.tc.Out.End(); err != nil {
		return err
	}
	return b.awaitFinal()
}

// endInput runs once, when no record can arrive any more: at the terminal
// barrier (before it is captured, so that the final checkpoint covers what
// the chain emits at end of input) or when every input ended.
func (t *operatorTask) endInput() error {
	if t.inputEnded {
		return nil
	}
	t.inputEnded = true
	b := t.base
	if t.curWm != MaxWatermark {
		t.curWm = MaxWatermark
		if err := t.op.ProcessWatermark(MaxWatermark); err != nil {
			return fmt.Errorf("processing final watermark in %s: %w", b.name, err)
		}
	}
	if err := t.op.EndOfInput(); err != nil {
		return fmt.Errorf("ending input of %s: %w", b.name, err)
	}
	if err := t.op.Flush(); err != nil {
		return fmt.Errorf("flushing %s: %w", b.name, err)
	}
	return nil
}

func (t *operatorTask) pendingIDs() []checkpoint.ID {
	ids := make([]checkpoint.ID, 0, len(t.pending))
	for id := range t.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// handle processes one element popped from channel i.
func (t *operatorTask) handle(i int, e Element) error {
	if e.Kind != KindBarrier {
		t.awaitEncoded(i)
	}
	inRegion := e.Kind != KindBarrier && len(t.regions[i]) > 0
	if err := t.handleElement(i, e); err != nil {
		return err
	}
	if inRegion {
		// e preceded the barriers of every open region on this input.
		var ready []checkpoint.Barrier
		kept := t.regions[i][:0]
		for _, r := range t.regions[i] {
			r.remaining--
			if r.remaining > 0 {
				kept = append(kept, r)
				continue
			}
			ready = append(ready, r.barrier)
		}
		t.regions[i] = kept
		for _, br := range ready {
			if err := t.onBarrier(i, br); err != nil {
				return err
			}
		}
	}
	return t.finishPending()
}

func (t *operatorTask) handleElement(i int, e Element) error {
	b := t.base
	switch e.Kind {
	case KindRecords:
		if t.debloat != nil {
			t.debloat.processed()
		}
		t.capture(i, e.Batch)
		if t.intr != nil {
			return t.processResumable(i, e.Batch)
		}
		if err := t.op.ProcessBatch(t.logical[i], e.Batch); err != nil {
			return fmt.Errorf("processing records in %s: %w", b.name, err)
		}
	case KindWatermark:
		if e.Watermark > t.inputWm[i] {
			t.inputWm[i] = e.Watermark
			if err := t.advanceWatermark(); err != nil {
				return err
			}
		}
	case KindBarrier:
		if e.Overtaken == 0 {
			return t.onBarrier(i, e.Barrier)
		}
		// The barrier took the priority lane. Under an aligned checkpoint
		// (pinned, or because the chain cannot capture) the overtaken
		// elements must be processed before alignment sees the barrier.
		if t.modeFor(e.Barrier) == checkpoint.Aligned {
			t.regions[i] = append(t.regions[i], region{barrier: e.Barrier, remaining: e.Overtaken})
			return nil
		}
		// Under an unaligned one they are captured now, while they are
		// still queued: the snapshot need not wait until they have been
		// processed, which under backpressure takes as long as alignment.
		if err := t.onBarrier(i, e.Barrier); err != nil {
			return err
		}
		t.captureOvertaken(i, e.Barrier.ID, e.Overtaken)
		return nil
	case KindEnd:
		t.closed[i] = true
		t.open--
		t.inputWm[i] = MaxWatermark
		if err := t.apply(t.align.OnInputClosed(i)); err != nil {
			return err
		}
		if t.open > 0 {
			return t.advanceWatermark()
		}
	}
	return nil
}

// resizeInputs gives the open input channels the capacity the debloater
// wants once its period has passed.
func (t *operatorTask) resizeInputs(now time.Time) {
	if t.debloat == nil {
		return
	}
	n, changed := t.debloat.tick(now, t.open)
	if !changed {
		return
	}
	for i, c := range t.inputs {
		if !t.closed[i] {
			c.SetCapacity(n)
		}
	}
}

// modeFor returns the mode checkpoint br.ID runs under in this task: the one
// pinned by its first delivery, or the one this delivery would pin.
func (t *operatorTask) modeFor(br checkpoint.Barrier) checkpoint.Mode {
	if m, ok := t.pinned[br.ID]; ok {
		return m
	}
	if br.Terminal || !t.canAlign {
		return checkpoint.Aligned
	}
	return br.Mode
}

func (t *operatorTask) advanceWatermark() error {
	wm := int64(MaxWatermark)
	for i, w := range t.inputWm {
		if !t.closed[i] {
			wm = min(wm, w)
		}
	}
	if wm <= t.curWm || wm == MaxWatermark {
		return nil
	}
	t.curWm = wm
	if err := t.op.ProcessWatermark(wm); err != nil {
		return fmt.Errorf("processing watermark %d in %s: %w", wm, t.base.name, err)
	}
	return nil
}

// capture appends a batch from channel i to every unaligned snapshot whose
// barrier it precedes and has not yet arrived on channel i, and notes those
// snapshots in t.captured.
func (t *operatorTask) capture(i int, batch Batch) {
	t.captured = t.captured[:0]
	if len(t.pending) == 0 {
		return
	}
	ids := t.align.Capturing(i)
	if len(ids) == 0 {
		return
	}
	t.scratch = t.op.EncodeBatch(t.logical[i], batch, t.scratch[:0])
	for _, id := range ids {
		t.appendInFlight(id, i, t.scratch, batch.Len())
	}
	t.captured = append(t.captured, ids...)
}

// processResumable processes a batch from channel i that the chain can
// interrupt: whenever a priority barrier is queued at an input, the chain
// returns before its next record and interruptBatch takes the barrier if
// it can, then the rest of the batch is processed.
func (t *operatorTask) processResumable(i int, batch Batch) error {
	op := t.op.(ResumableOperator)
	inRegion := len(t.regions[i]) > 0
	// A chain that processes the last record may recycle the batch: its
	// length is read before, and the batch is not touched after.
	n := batch.Len()
	from := 0
	for {
		t.intr.inBatch = true
		next, err := op.ProcessBatchFrom(t.logical[i], batch, from, t.intr)
		t.intr.inBatch = false
		if err != nil {
			return fmt.Errorf("processing records in %s: %w", t.base.name, err)
		}
		if next >= n {
			return nil
		}
		if next < from {
			panic(fmt.Sprintf("runtime: %s went back from record %d to %d of a batch", t.base.name, from, next))
		}
		from = next
		if err := t.interruptBatch(i, batch, from, inRegion); err != nil {
			return err
		}
	}
}

// interruptBatch runs between records of a batch from channel i whose
// records from index from on are not yet processed, when a priority barrier
// is queued at an input. It takes every such barrier at the head of an
// input that this task handles unaligned (capturing the rest of the batch
// into its checkpoint when that rest precedes the barrier) and declines the
// others until one of them is popped.
//
// A barrier taken on channel i itself follows the whole batch in that
// channel; one taken on another channel j finds channel i still owing it
// (or it would not be the first delivery that forwards). Either way the
// records from index from on precede the barrier on channel i and are
// processed after the snapshot, so they belong in its in-flight records,
// like every batch popped from an input that still owes an unaligned
// barrier (capture). t.captured keeps them from being captured twice.
//
// Aligned barriers are left queued: their checkpoint needs the whole batch
// processed first. So is everything while an aligned barrier's overtaken
// region is open on some input, where the region bookkeeping counts whole
// popped elements.
func (t *operatorTask) interruptBatch(i int, batch Batch, from int, inRegion bool) error {
	queued := t.intr.queued.Load()
	taken := int32(0)
	blocked := inRegion || !t.canAlign
	for j := range t.inputs {
		if len(t.regions[j]) > 0 {
			blocked = true
		}
	}
	for k := 0; k < len(t.inputs) && !blocked; k++ {
		j := (i + k) % len(t.inputs)
		for !t.closed[j] && !t.align.Paused(j) {
			e, ok := t.inputs[j].PeekPriority()
			if !ok || t.modeFor(e.Barrier) != checkpoint.Unaligned {
				break
			}
			if got, _ := t.inputs[j].TryPop(); got.Kind != KindBarrier || got.Barrier.ID != e.Barrier.ID {
				panic(fmt.Sprintf("runtime: %s peeked %s but popped %s on input %d", t.base.name, e.Barrier, got.Barrier, j))
			}
			taken++
			if err := t.onBarrier(j, e.Barrier); err != nil {
				return err
			}
			owners := t.align.Capturing(i)
			if j == i {
				owners = append(owners, e.Barrier.ID)
			}
			t.captureRest(i, batch, from, owners)
			t.captureOvertaken(j, e.Barrier.ID, e.Overtaken)
			if err := t.finishPending(); err != nil {
				return err
			}
		}
	}
	// Popping a priority barrier reset declined; what is still queued now
	// was looked at (or arrived since, and is looked at on the next call).
	t.intr.declined = max(0, queued-taken)
	return nil
}

// captureRest appends the records of batch (from channel i) from index from
// on to the snapshots of ids that do not hold them yet.
func (t *operatorTask) captureRest(i int, batch Batch, from int, ids []checkpoint.ID) {
	encoded := false
	for _, id := range ids {
		if slices.Contains(t.captured, id) || t.pending[id] == nil {
			continue
		}
		if !encoded {
			t.scratch = t.op.(ResumableOperator).EncodeBatchFrom(t.logical[i], batch, from, t.scratch[:0])
			encoded = true
		}
		t.appendInFlight(id, i, t.scratch, batch.Len()-from)
		t.captured = append(t.captured, id)
	}
}

// captureOvertaken captures the record batches among the n elements the
// just-popped priority barrier id overtook on channel i, still queued, as
// the last in-flight records of channel i in the snapshot of id. They are
// encoded on a goroutine of their own (overtakenEncoding), and processed
// later as usual, each once its encoding is past it (awaitEncoded).
func (t *operatorTask) captureOvertaken(i int, id checkpoint.ID, n int) {
	p := t.pending[id]
	if p == nil {
		return // the snapshot failed and was declined
	}
	elems := t.inputs[i].PeekOvertaken(n)
	if !slices.ContainsFunc(elems, func(e Element) bool { return e.Kind == KindRecords }) {
		return
	}
	enc := &overtakenEncoding{input: i, first: t.popped[i], n: len(elems), elems: elems}
	// What the task captured of channel i for id before the barrier arrived
	// there is complete (no later batch of channel i precedes the barrier):
	// the encoding takes it over as the head of its buffer.
	var head []byte
	var records int
	if f := p.inflight[i]; f != nil {
		head, records = f.Data, f.Records
		delete(p.inflight, i)
	}
	t.encoders.Add(1)
	enc.start(t.op, t.logical[i], head, records, t.encoders.Done)
	p.tails = append(p.tails, enc)
	t.encoding[i] = append(t.encoding[i], enc)
}

// awaitEncoded runs before the task processes the next non-barrier element
// of channel i: it waits until every encoding that captured the element is
// past it, and forgets the encodings that cover no later element.
func (t *operatorTask) awaitEncoded(i int) {
	pos := t.popped[i]
	t.popped[i]++
	if len(t.encoding[i]) == 0 {
		return
	}
	kept := t.encoding[i][:0]
	for _, enc := range t.encoding[i] {
		if enc.covers(pos) {
			enc.wait(pos)
		}
		if enc.covers(pos + 1) {
			kept = append(kept, enc)
		}
	}
	clear(t.encoding[i][len(kept):])
	t.encoding[i] = kept
}

// appendInFlight appends one encoded batch of channel i to the in-flight
// records of pending snapshot id.
func (t *operatorTask) appendInFlight(id checkpoint.ID, i int, frame []byte, records int) {
	p := t.pending[id]
	if p == nil {
		return
	}
	f := p.inflight[i]
	if f == nil {
		f = &store.InFlight{Input: i}
		p.inflight[i] = f
	}
	f.Data = appendFrame(f.Data, frame)
	f.Records += records
}

func (t *operatorTask) onBarrier(i int, br checkpoint.Barrier) error {
	if t.align.Paused(i) {
		panic(fmt.Sprintf("runtime: %s popped %v from paused input %d", t.base.name, br, i))
	}
	first := len(t.align.Pending()) == 0
	if _, ok := t.pinned[br.ID]; !ok {
		t.pinned[br.ID] = t.modeFor(br)
	}
	if _, ok := t.arrived[br.ID]; !ok {
		t.arrived[br.ID] = time.Now()
	}
	adv := t.align.OnBarrier(i, br)
	for id := range t.pinned {
		if t.pending[id] == nil && !slices.Contains(t.align.Pending(), id) && id != br.ID {
			delete(t.pinned, id)
		}
	}
	if first && !adv.Forward && t.pausedAt.IsZero() {
		t.pausedAt = time.Now()
	}
	return t.apply(adv)
}

// apply carries out an alignment advance: snapshot and forward.
func (t *operatorTask) apply(adv checkpoint.Advance) error {
	b := t.base
	if adv.Forward {
		br := adv.Barrier
		if br.Terminal {
			// Every input delivered the terminal barrier: only
			// end-of-input can follow, so end the input now and let the
			// final checkpoint include its results.
			if err := t.endInput(); err != nil {
				return err
			}
		}
		tm := snapshotTiming{barrierAt: t.arrived[br.ID]}
		for id := range t.arrived {
			if id <= br.ID {
				delete(t.arrived, id)
			}
		}
		start := time.Now()
		if !t.pausedAt.IsZero() {
			tm.align = start.Sub(t.pausedAt)
			t.pausedAt = time.Time{}
		}
		snap, err := b.capture(t.op, br.ID, t.curWm)
		tm.captured = time.Now()
		tm.sync = tm.captured.Sub(start)
		if err != nil {
			b.acks.decline(br.ID, b.participant, err)
		}
		// The barrier overtakes what the flush pushes when it takes the
		// priority lane, so that push need not wait for room.
		if overtakes(br) {
			b.tc.Out.beginOvertake()
		}
		err = t.op.Flush()
		if overtakes(br) {
			b.tc.Out.endOvertake()
		}
		if err != nil {
			return fmt.Errorf("flushing %s: %w", b.name, err)
		}
		if err := b.tc.Out.Barrier(br); err != nil {
			return err
		}
		if snap != nil {
			p := &pendingSnapshot{id: br.ID, snap: snap, inflight: map[int]*store.InFlight{}, timing: tm}
			p.alignDone = !adv.UnalignedFirst || len(adv.CaptureInputs) == 0 || slices.Contains(adv.CaptureDone, br.ID)
			t.pending[br.ID] = p
		}
	}
	for _, id := range adv.CaptureDone {
		if p := t.pending[id]; p != nil {
			p.alignDone = true
		}
	}
	return nil
}

// finishPending hands every snapshot whose capture is complete to the
// snapshot worker, in checkpoint order.
func (t *operatorTask) finishPending() error {
	if len(t.pending) == 0 {
		return nil
	}
	for _, id := range t.pendingIDs() {
		p := t.pending[id]
		if !p.alignDone {
			// Later ids wait for earlier ones so the worker sees them in order.
			return nil
		}
		delete(t.pending, id)
		if len(p.inflight) > 0 {
			keys := make([]int, 0, len(p.inflight))
			for k := range p.inflight {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				p.snap.inflight = append(p.snap.inflight, *p.inflight[k])
			}
		}
		p.snap.tails = p.tails
		if !t.base.submit(snapshotJob{id: id, snap: p.snap, timing: p.timing}) {
			return ErrCanceled
		}
	}
	return nil
}

// appendFrame appends a length-prefixed frame.
func appendFrame(dst, frame []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(frame)))
	return append(dst, frame...)
}

// restore brings back the task's watermark and replays the in-flight
// records an unaligned checkpoint captured, before any new input is read.
func (t *operatorTask) restore(snap *store.TaskSnapshot) error {
	if len(snap.Operators) == 0 {
		return nil
	}
	head := snap.Operators[0]
	if head.Watermark > t.curWm {
		t.curWm = head.Watermark
	}
	for _, f := range head.InFlight {
		if f.Input < 0 || f.Input >= len(t.inputs) {
			return fmt.Errorf("restoring %s: in-flight records of input %d, but the task has %d inputs", t.base.name, f.Input, len(t.inputs))
		}
		data, replayed := f.Data, 0
		for len(data) > 0 {
			n, k := binary.Uvarint(data)
			if k <= 0 || n > uint64(len(data)-k) {
				return fmt.Errorf("restoring %s: in-flight records of input %d are truncated after %d records", t.base.name, f.Input, replayed)
			}
			batch, err := t.op.DecodeBatch(t.logical[f.Input], data[k:k+int(n)])
			if err != nil {
				return fmt.Errorf("restoring %s: decoding in-flight records of input %d: %w", t.base.name, f.Input, err)
			}
			data = data[k+int(n):]
			replayed += batch.Len()
			if err := t.op.ProcessBatch(t.logical[f.Input], batch); err != nil {
				return fmt.Errorf("replaying in-flight records in %s: %w", t.base.name, err)
			}
		}
		if replayed != f.Records {
			return fmt.Errorf("restoring %s: in-flight records of input %d: snapshot says %d, found %d", t.base.name, f.Input, f.Records, replayed)
		}
	}
	return nil
}

// runDeadline runs a chain's processing-time work if its deadline passed.
func runDeadline(timed Timed, name string) error {
	d, ok := timed.NextDeadline()
	if !ok {
		return nil
	}
	now := time.Now()
	if now.Before(d) {
		return nil
	}
	if err := timed.OnDeadline(now); err != nil {
		return fmt.Errorf("running timers of %s: %w", name, err)
	}
	return nil
}
