package checkpoint

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var participantPool = []ParticipantID{"a", "b", "c", "d"}

// modelCheckpoint is the model's view of one in-flight checkpoint.
type modelCheckpoint struct {
	mode        Mode
	terminal    bool
	triggeredAt time.Time
	deadline    time.Time
	pending     map[ParticipantID]bool
	writing     bool
	bytes       int64
	fullBytes   int64
	longest     Timing
	last        ParticipantID
	lastTiming  Timing
}

// expectEffect is what the model predicts one effect to be.
type expectEffect struct {
	kind string // "write", "complete", "aborted", "fail"
	id   ID
	// cause is the sentinel an aborted or fail effect's reason must wrap.
	cause error
}

// coordinatorModel is a deliberately naive restatement of the Coordinator's
// rules, used to predict its effects.
type coordinatorModel struct {
	cfg           Config
	registered    map[ParticipantID]bool
	nextID        ID
	lastCompleted ID
	floor         ID
	inFlight      map[ID]*modelCheckpoint
}

func (m *coordinatorModel) ids() []ID { return slices.Sorted(maps.Keys(m.inFlight)) }

func (m *coordinatorModel) fail(id ID, cause error) []expectEffect {
	delete(m.inFlight, id)
	if m.floor == 0 || id < m.floor {
		m.floor = id
	}
	return []expectEffect{{"aborted", id, cause}, {"fail", id, cause}}
}

// coordinatorHistory checks, from the effects alone, the safety properties
// any correct coordinator has, whatever its rules in detail.
type coordinatorHistory struct {
	firstID      ID
	lastTrigger  ID
	participants map[ID]map[ParticipantID]bool // at trigger time
	acked        map[ID]map[ParticipantID]bool // acks handed to the coordinator
	marker       map[ID]bool                   // WriteMarker emitted
	completed    map[ID]bool                   // NotifyComplete emitted
	aborted      map[ID]bool                   // NotifyAborted emitted
	floor        ID                            // from FailJob effects, cleared by Reset
}

func (h *coordinatorHistory) check(t *rapid.T, event string, markerID ID, effects []Effect) {
	for i, e := range effects {
		switch e := e.(type) {
		case WriteMarker:
			for p := range h.participants[e.ID] {
				if !h.acked[e.ID][p] {
					t.Fatalf("%s: WriteMarker(%d) before %s acked", event, e.ID, p)
				}
			}
			if h.marker[e.ID] || h.aborted[e.ID] {
				t.Fatalf("%s: WriteMarker(%d) for a checkpoint already marked or aborted", event, e.ID)
			}
			if h.floor != 0 && e.ID > h.floor {
				t.Fatalf("%s: WriteMarker(%d) above rewind floor %d", event, e.ID, h.floor)
			}
			h.marker[e.ID] = true
		case NotifyComplete:
			if event != "MarkerWritten" || e.ID != markerID || !h.marker[e.ID] {
				t.Fatalf("%s(%d): NotifyComplete(%d) without its marker written", event, markerID, e.ID)
			}
			if h.completed[e.ID] || h.aborted[e.ID] {
				t.Fatalf("%s: second outcome NotifyComplete(%d)", event, e.ID)
			}
			h.completed[e.ID] = true
		case NotifyAborted:
			if h.completed[e.ID] || h.aborted[e.ID] {
				t.Fatalf("%s: second outcome NotifyAborted(%d)", event, e.ID)
			}
			if h.marker[e.ID] && (event != "MarkerFailed" || e.ID != markerID) {
				t.Fatalf("%s: NotifyAborted(%d) while its marker may be durable", event, e.ID)
			}
			if e.Reason == nil {
				t.Fatalf("%s: NotifyAborted(%d) without a reason", event, e.ID)
			}
			h.aborted[e.ID] = true
		case FailJob:
			var prev NotifyAborted
			if i > 0 {
				prev, _ = effects[i-1].(NotifyAborted)
			}
			if prev.ID != e.ID {
				t.Fatalf("%s: FailJob(%d) not preceded by its NotifyAborted", event, e.ID)
			}
			if h.floor == 0 || e.ID < h.floor {
				h.floor = e.ID
			}
		default:
			t.Fatalf("%s: unknown effect %T", event, e)
		}
	}
}

func TestCoordinatorStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			DefaultMode:   rapid.SampledFrom([]Mode{Aligned, Unaligned}).Draw(t, "defaultMode"),
			Timeout:       time.Duration(rapid.SampledFrom([]int{0, 10, 30, 60}).Draw(t, "timeoutSec")) * time.Second,
			FirstID:       ID(rapid.IntRange(0, 50).Draw(t, "firstID")),
			MaxConcurrent: rapid.IntRange(0, 4).Draw(t, "maxConcurrent"),
		}
		if rapid.Bool().Draw(t, "resolver") {
			cfg.Resolver = func(id ID) Mode { return Mode(id % 2) }
		}
		c, err := NewCoordinator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		firstID := max(cfg.FirstID, 1)
		m := &coordinatorModel{
			cfg:        cfg,
			registered: map[ParticipantID]bool{},
			nextID:     firstID,
			inFlight:   map[ID]*modelCheckpoint{},
		}
		h := &coordinatorHistory{
			firstID:      firstID,
			participants: map[ID]map[ParticipantID]bool{},
			acked:        map[ID]map[ParticipantID]bool{},
			marker:       map[ID]bool{},
			completed:    map[ID]bool{},
			aborted:      map[ID]bool{},
		}
		now := epoch

		// step hands the coordinator's effects to the history checks and
		// compares them with the model's prediction.
		step := func(t *rapid.T, event string, markerID ID, want []expectEffect) {
			lastBefore := c.LastCompleted()
			got := c.Ready()
			c.Advance()
			h.check(t, event, markerID, got)
			if len(got) != len(want) {
				t.Fatalf("%s: effects %v, model predicts %v", event, got, want)
			}
			for i, e := range got {
				w := want[i]
				var kind string
				var id ID
				var reason error
				switch e := e.(type) {
				case WriteMarker:
					kind, id = "write", e.ID
				case NotifyComplete:
					kind, id = "complete", e.ID
				case NotifyAborted:
					kind, id, reason = "aborted", e.ID, e.Reason
				case FailJob:
					kind, id, reason = "fail", e.ID, e.Reason
				}
				if kind != w.kind || id != w.id {
					t.Fatalf("%s: effect %d is %v, model predicts %s %d (all: %v)", event, i, e, w.kind, w.id, got)
				}
				if w.cause != nil && !errors.Is(reason, w.cause) {
					t.Fatalf("%s: %v does not wrap %v", event, e, w.cause)
				}
			}
			if lc := c.LastCompleted(); lc != lastBefore && event != "MarkerWritten" {
				t.Fatalf("%s moved LastCompleted from %d to %d", event, lastBefore, lc)
			}
		}

		// pickID mostly picks an in-flight checkpoint, sometimes any id
		// around the allocated range (unknown, finished, never allocated).
		pickID := func(t *rapid.T) ID {
			if ids := m.ids(); len(ids) > 0 && rapid.IntRange(0, 4).Draw(t, "inFlight") > 0 {
				return rapid.SampledFrom(ids).Draw(t, "id")
			}
			return ID(rapid.IntRange(0, int(m.nextID)+1).Draw(t, "anyID"))
		}
		// pickParticipant mostly picks one that id is waiting for.
		pickParticipant := func(t *rapid.T, id ID) ParticipantID {
			if mc := m.inFlight[id]; mc != nil && len(mc.pending) > 0 && rapid.IntRange(0, 4).Draw(t, "pending") > 0 {
				return rapid.SampledFrom(slices.Sorted(maps.Keys(mc.pending))).Draw(t, "p")
			}
			return rapid.SampledFrom(participantPool).Draw(t, "anyP")
		}
		// trigger calls Trigger once and checks it against the model.
		trigger := func(t *rapid.T) {
			now = now.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "advanceSec")) * time.Second)
			var opts TriggerOptions
			if rapid.Bool().Draw(t, "override") {
				mode := rapid.SampledFrom([]Mode{Aligned, Unaligned}).Draw(t, "mode")
				opts.Mode = &mode
			}
			opts.Terminal = rapid.IntRange(0, 9).Draw(t, "terminal") == 0
			b, err := c.Trigger(now, opts)

			var wantErr error
			switch {
			case m.floor != 0:
				wantErr = ErrRewinding
			case len(m.registered) == 0:
				wantErr = ErrNoParticipants
			case !opts.Terminal && len(m.inFlight) >= max(m.cfg.MaxConcurrent, 1):
				wantErr = ErrTooManyInFlight
			}
			if wantErr != nil {
				if !errors.Is(err, wantErr) {
					t.Fatalf("Trigger(%+v) = %v, %v; model predicts %v", opts, b, err, wantErr)
				}
				step(t, "Trigger", 0, nil)
				return
			}
			if err != nil {
				t.Fatalf("Trigger(%+v) = %v; model predicts success", opts, err)
			}
			mode := m.cfg.DefaultMode
			switch {
			case opts.Terminal:
				mode = Aligned
			case opts.Mode != nil:
				mode = *opts.Mode
			case m.cfg.Resolver != nil:
				mode = Mode(m.nextID % 2)
			}
			want := Barrier{ID: m.nextID, Terminal: opts.Terminal, Mode: mode}
			if b != want {
				t.Fatalf("Trigger(%+v) = %v, model %v", opts, b, want)
			}
			if b.ID < h.firstID || b.ID <= h.lastTrigger {
				t.Fatalf("Trigger allocated %d after %d (first id %d)", b.ID, h.lastTrigger, h.firstID)
			}
			h.lastTrigger = b.ID
			h.participants[b.ID] = maps.Clone(m.registered)
			h.acked[b.ID] = map[ParticipantID]bool{}

			mc := &modelCheckpoint{mode: mode, terminal: opts.Terminal, triggeredAt: now, pending: map[ParticipantID]bool{}}
			for p := range m.registered {
				mc.pending[p] = true
			}
			if m.cfg.Timeout > 0 {
				mc.deadline = now.Add(m.cfg.Timeout)
			}
			m.inFlight[b.ID] = mc
			m.nextID++
			step(t, "Trigger", 0, nil)
		}

		// ack hands one acknowledgement to the coordinator and checks it
		// against the model.
		ack := func(t *rapid.T, id ID, p ParticipantID) {
			info := AckInfo{
				Bytes:     int64(rapid.IntRange(0, 100).Draw(t, "bytes")),
				FullBytes: int64(rapid.IntRange(0, 1000).Draw(t, "fullBytes")),
				Alignment: time.Duration(rapid.IntRange(0, 100).Draw(t, "alignMs")) * time.Millisecond,
				Sync:      time.Duration(rapid.IntRange(0, 100).Draw(t, "syncMs")) * time.Millisecond,
				Async:     time.Duration(rapid.IntRange(0, 100).Draw(t, "asyncMs")) * time.Millisecond,
			}
			if mc := m.inFlight[id]; mc != nil && rapid.Bool().Draw(t, "barrierAt") {
				info.BarrierAt = mc.triggeredAt.Add(time.Duration(rapid.IntRange(-5, 100).Draw(t, "startDelayMs")) * time.Millisecond)
			}
			c.Ack(id, p, info)
			if h.acked[id] != nil {
				h.acked[id][p] = true
			}
			var want []expectEffect
			if mc := m.inFlight[id]; mc != nil && !mc.writing && mc.pending[p] {
				delete(mc.pending, p)
				mc.bytes += info.Bytes
				mc.fullBytes += info.FullBytes
				tm := Timing{Alignment: info.Alignment, Sync: info.Sync, Async: info.Async}
				if !info.BarrierAt.IsZero() && info.BarrierAt.After(mc.triggeredAt) {
					tm.StartDelay = info.BarrierAt.Sub(mc.triggeredAt)
				}
				mc.longest = Timing{
					StartDelay: max(mc.longest.StartDelay, tm.StartDelay), Alignment: max(mc.longest.Alignment, tm.Alignment),
					Sync: max(mc.longest.Sync, tm.Sync), Async: max(mc.longest.Async, tm.Async),
				}
				mc.last, mc.lastTiming = p, tm
				if len(mc.pending) == 0 {
					if m.floor != 0 && id > m.floor {
						delete(m.inFlight, id)
						want = []expectEffect{{"aborted", id, ErrDiscarded}}
					} else {
						mc.writing = true
						want = []expectEffect{{"write", id, nil}}
						wm := WriteMarker{ID: id, Mode: mc.mode, Terminal: mc.terminal, TriggeredAt: mc.triggeredAt, Bytes: mc.bytes, FullBytes: mc.fullBytes}
						if ready := c.Ready(); len(ready) != 1 || ready[0] != Effect(wm) {
							t.Fatalf("Ack(%d, %s) emitted %v, model %v", id, p, ready, wm)
						}
					}
				}
			}
			step(t, "Ack", 0, want)
		}
		writing := func() []ID {
			var ids []ID
			for _, id := range m.ids() {
				if m.inFlight[id].writing {
					ids = append(ids, id)
				}
			}
			return ids
		}

		t.Repeat(map[string]func(*rapid.T){
			"": func(t *rapid.T) {
				if got, want := c.InFlight(), m.ids(); !slices.Equal(got, want) {
					t.Fatalf("InFlight() = %v, model %v", got, want)
				}
				for _, id := range m.ids() {
					mc := m.inFlight[id]
					want := []ParticipantID{}
					for p, pending := range mc.pending {
						if pending {
							want = append(want, p)
						}
					}
					slices.Sort(want)
					if got := c.Pending(id); !slices.Equal(got, want) || got == nil {
						t.Fatalf("Pending(%d) = %#v, model %v", id, got, want)
					}
				}
				if got := c.Pending(m.nextID); got != nil {
					t.Fatalf("Pending(%d) of an unallocated id = %v", m.nextID, got)
				}
				if c.LastCompleted() != m.lastCompleted || c.NextID() != m.nextID || c.RewindFloor() != m.floor {
					t.Fatalf("coordinator last=%d next=%d floor=%d, model last=%d next=%d floor=%d",
						c.LastCompleted(), c.NextID(), c.RewindFloor(), m.lastCompleted, m.nextID, m.floor)
				}
				if h.floor != m.floor {
					t.Fatalf("floor from FailJob effects %d, model %d", h.floor, m.floor)
				}
			},

			"Register": func(t *rapid.T) {
				p := rapid.SampledFrom(participantPool).Draw(t, "p")
				c.Register(p)
				m.registered[p] = true
				step(t, "Register", 0, nil)
			},

			// Trigger starts up to three checkpoints in a row, so that
			// several are in flight at once.
			"Trigger": func(t *rapid.T) {
				for range rapid.IntRange(1, 3).Draw(t, "triggers") {
					trigger(t)
				}
			},

			"Ack": func(t *rapid.T) {
				id := pickID(t)
				ack(t, id, pickParticipant(t, id))
			},

			// AckRest acks every participant some collecting checkpoints
			// still wait for, in random order, so that checkpoints complete
			// often and several may write their markers at once.
			"AckRest": func(t *rapid.T) {
				var collecting []ID
				for _, id := range m.ids() {
					if !m.inFlight[id].writing {
						collecting = append(collecting, id)
					}
				}
				if len(collecting) == 0 {
					t.Skip("nothing collecting")
				}
				for _, id := range rapid.Permutation(collecting).Draw(t, "ids") {
					if mc := m.inFlight[id]; mc == nil || !rapid.Bool().Draw(t, "complete") {
						continue
					}
					ps := rapid.Permutation(slices.Sorted(maps.Keys(m.inFlight[id].pending))).Draw(t, "order")
					for _, p := range ps {
						ack(t, id, p)
					}
				}
			},

			"Decline": func(t *rapid.T) {
				id := pickID(t)
				p := pickParticipant(t, id)
				c.Decline(id, p, errors.New("injected"))
				var want []expectEffect
				if mc := m.inFlight[id]; mc != nil && !mc.writing && mc.pending[p] {
					want = m.fail(id, ErrDeclined)
				}
				step(t, "Decline", 0, want)
			},

			"Abort": func(t *rapid.T) {
				id := pickID(t)
				cause := errors.New("shutdown")
				c.Abort(id, cause)
				var want []expectEffect
				if mc := m.inFlight[id]; mc != nil && !mc.writing {
					delete(m.inFlight, id)
					want = []expectEffect{{"aborted", id, cause}}
				}
				step(t, "Abort", 0, want)
			},

			"Tick": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(0, 10).Draw(t, "advanceSec")) * time.Second)
				c.Tick(now)
				var want []expectEffect
				for _, id := range m.ids() {
					mc := m.inFlight[id]
					if !mc.writing && !mc.deadline.IsZero() && !now.Before(mc.deadline) {
						want = append(want, m.fail(id, ErrTimeout)...)
					}
				}
				step(t, "Tick", 0, want)
			},

			"MarkerWritten": func(t *rapid.T) {
				ids := writing()
				if len(ids) == 0 {
					t.Skip("no marker requested")
				}
				id := rapid.SampledFrom(ids).Draw(t, "id")
				mc := m.inFlight[id]
				before := c.LastCompleted()
				c.MarkerWritten(id)
				// Read the effects before step advances, to check the
				// completion's fields.
				if m.floor == 0 {
					ready := c.Ready()
					nc, ok := ready[0].(NotifyComplete)
					want := NotifyComplete{ID: id, Mode: mc.mode, Terminal: mc.terminal,
						TriggeredAt: mc.triggeredAt, Bytes: mc.bytes, FullBytes: mc.fullBytes,
						Max: mc.longest, Last: mc.last, LastTiming: mc.lastTiming}
					if !ok || nc != want {
						t.Fatalf("MarkerWritten(%d) emitted %v first, model %v", id, ready[0], want)
					}
				}
				delete(m.inFlight, id)
				m.lastCompleted = max(m.lastCompleted, id)
				var want []expectEffect
				if m.floor == 0 {
					want = append(want, expectEffect{"complete", id, nil})
				}
				for _, older := range m.ids() {
					if older < id && !m.inFlight[older].writing {
						delete(m.inFlight, older)
						want = append(want, expectEffect{"aborted", older, ErrSubsumed})
					}
				}
				step(t, "MarkerWritten", id, want)
				if got := c.LastCompleted(); got < before || got < id {
					t.Fatalf("LastCompleted() = %d after MarkerWritten(%d), was %d", got, id, before)
				}
			},

			"LateMarkerOutcome": func(t *rapid.T) {
				var finished []ID
				for id := h.firstID; id < m.nextID; id++ {
					if m.inFlight[id] == nil {
						finished = append(finished, id)
					}
				}
				if len(finished) == 0 {
					t.Skip("nothing finished")
				}
				id := rapid.SampledFrom(finished).Draw(t, "id")
				if rapid.Bool().Draw(t, "written") {
					c.MarkerWritten(id)
					step(t, "MarkerWritten", id, nil)
				} else {
					c.MarkerFailed(id, errors.New("late"))
					step(t, "MarkerFailed", id, nil)
				}
			},

			"MarkerOutcomeNeverRequested": func(t *rapid.T) {
				var collecting []ID
				for _, id := range m.ids() {
					if !m.inFlight[id].writing {
						collecting = append(collecting, id)
					}
				}
				collecting = append(collecting, m.nextID, 0)
				id := rapid.SampledFrom(collecting).Draw(t, "id")
				written := rapid.Bool().Draw(t, "written")
				func() {
					defer func() {
						if recover() == nil {
							t.Fatalf("marker outcome (written=%v) for checkpoint %d without WriteMarker did not panic", written, id)
						}
					}()
					if written {
						c.MarkerWritten(id)
					} else {
						c.MarkerFailed(id, errors.New("bogus"))
					}
				}()
				step(t, "MarkerOutcomeNeverRequested", 0, nil)
			},

			"MarkerFailed": func(t *rapid.T) {
				ids := writing()
				if len(ids) == 0 {
					t.Skip("no marker requested")
				}
				id := rapid.SampledFrom(ids).Draw(t, "id")
				c.MarkerFailed(id, errors.New("no space"))
				step(t, "MarkerFailed", id, m.fail(id, ErrMarkerWrite))
			},

			"Reset": func(t *rapid.T) {
				from := ID(rapid.IntRange(0, int(m.nextID)-1).Draw(t, "from"))
				c.Reset(from)
				clear(m.inFlight)
				m.floor = 0
				h.floor = 0
				step(t, fmt.Sprintf("Reset(%d)", from), 0, nil)
			},
		})
	})
}
