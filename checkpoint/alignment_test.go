package checkpoint

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"pgregory.net/rapid"
)

func formatAdvance(adv Advance) string {
	var parts []string
	if adv.Forward {
		parts = append(parts, "forward "+adv.Barrier.String())
	}
	if adv.UnalignedFirst {
		parts = append(parts, fmt.Sprintf("unaligned-first capture=%v", adv.CaptureInputs))
	}
	if len(adv.CaptureDone) > 0 {
		parts = append(parts, fmt.Sprintf("capture-done=%v", adv.CaptureDone))
	}
	if len(parts) == 0 {
		return "wait"
	}
	return strings.Join(parts, "; ")
}

func describeAlignment(a *Alignment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v\n", a)
	for i := range a.closed {
		if ids := a.Capturing(i); len(ids) > 0 {
			fmt.Fprintf(&b, "input %d capturing for %v\n", i, ids)
		}
	}
	return b.String()
}

func TestAlignmentScripts(t *testing.T) {
	var a *Alignment // replaced by each "new"
	datadriven.RunTest(t, "testdata/alignment.txt", func(t *testing.T, td *datadriven.TestData) string {
		return catchPanic(func() string {
			switch td.Cmd {
			case "new":
				var inputs int
				td.ScanArgs(t, "inputs", &inputs)
				a = NewAlignment(inputs, td.HasArg("can-unalign"))
				return describeAlignment(a)
			case "barrier":
				var input int
				var id uint64
				td.ScanArgs(t, "in", &input)
				td.ScanArgs(t, "id", &id)
				b := Barrier{ID: ID(id), Terminal: td.HasArg("terminal")}
				if td.HasArg("mode") {
					b.Mode = scanMode(t, td, "mode")
				}
				return formatAdvance(a.OnBarrier(input, b)) + "\n" + describeAlignment(a)
			case "close":
				var input int
				td.ScanArgs(t, "in", &input)
				return formatAdvance(a.OnInputClosed(input)) + "\n" + describeAlignment(a)
			}
			t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			return ""
		})
	})
}

// alignmentStep is one event of a table test and what it must yield.
type alignmentStep struct {
	input   int
	barrier *Barrier // nil: the input closes
	want    Advance
	paused  []int // inputs paused afterwards
}

func deliver(id ID, mode Mode) *Barrier { return &Barrier{ID: id, Mode: mode} }

func TestAlignmentTable(t *testing.T) {
	terminal := &Barrier{ID: 4, Mode: Unaligned, Terminal: true}
	for _, tc := range []struct {
		name       string
		inputs     int
		canUnalign bool
		steps      []alignmentStep
	}{
		{
			name: "aligned pauses each delivering input until all delivered", inputs: 3, canUnalign: true,
			steps: []alignmentStep{
				{input: 1, barrier: deliver(1, Aligned), paused: []int{1}},
				{input: 0, barrier: deliver(1, Aligned), paused: []int{0, 1}},
				{input: 2, barrier: deliver(1, Aligned), want: Advance{Forward: true, Barrier: Barrier{ID: 1}}},
			},
		},
		{
			name: "a closed input satisfies the pending aligned barrier", inputs: 2,
			steps: []alignmentStep{
				{input: 0, barrier: deliver(3, Aligned), paused: []int{0}},
				{input: 1, want: Advance{Forward: true, Barrier: Barrier{ID: 3}}},
				{input: 0, barrier: deliver(4, Aligned), want: Advance{Forward: true, Barrier: Barrier{ID: 4}}},
			},
		},
		{
			name: "closing a paused input does not forward", inputs: 3,
			steps: []alignmentStep{
				{input: 0, barrier: deliver(1, Aligned), paused: []int{0}},
				{input: 0, paused: nil},
				{input: 1, barrier: deliver(1, Aligned), paused: []int{1}},
				{input: 2, barrier: deliver(1, Aligned), want: Advance{Forward: true, Barrier: Barrier{ID: 1}}},
			},
		},
		{
			name: "unaligned forwards on first delivery and pauses nothing", inputs: 3, canUnalign: true,
			steps: []alignmentStep{
				{input: 2, barrier: deliver(1, Unaligned), want: Advance{
					Forward: true, Barrier: Barrier{ID: 1, Mode: Unaligned}, UnalignedFirst: true, CaptureInputs: []int{0, 1}}},
				{input: 0, barrier: deliver(1, Unaligned)},
				{input: 1, barrier: deliver(1, Unaligned), want: Advance{CaptureDone: []ID{1}}},
			},
		},
		{
			name: "cannot unalign: unaligned degrades to aligned", inputs: 2, canUnalign: false,
			steps: []alignmentStep{
				{input: 0, barrier: deliver(1, Unaligned), paused: []int{0}},
				{input: 1, barrier: deliver(1, Unaligned), want: Advance{Forward: true, Barrier: Barrier{ID: 1, Mode: Aligned}}},
			},
		},
		{
			name: "terminal barriers are aligned", inputs: 2, canUnalign: true,
			steps: []alignmentStep{
				{input: 1, barrier: terminal, paused: []int{1}},
				{input: 0, barrier: terminal, want: Advance{Forward: true, Barrier: Barrier{ID: 4, Mode: Aligned, Terminal: true}}},
			},
		},
		{
			name: "the first delivery pins the mode", inputs: 2, canUnalign: true,
			steps: []alignmentStep{
				{input: 0, barrier: deliver(5, Aligned), paused: []int{0}},
				{input: 1, barrier: deliver(5, Unaligned), want: Advance{Forward: true, Barrier: Barrier{ID: 5, Mode: Aligned}}},
				{input: 1, barrier: deliver(6, Unaligned), want: Advance{
					Forward: true, Barrier: Barrier{ID: 6, Mode: Unaligned}, UnalignedFirst: true, CaptureInputs: []int{0}}},
				{input: 0, barrier: deliver(6, Aligned), want: Advance{CaptureDone: []ID{6}}},
			},
		},
		{
			name: "one input forwards at once in either mode", inputs: 1, canUnalign: true,
			steps: []alignmentStep{
				{input: 0, barrier: deliver(1, Aligned), want: Advance{Forward: true, Barrier: Barrier{ID: 1}}},
				{input: 0, barrier: deliver(2, Unaligned), want: Advance{Forward: true, Barrier: Barrier{ID: 2, Mode: Unaligned}}},
			},
		},
		{
			name: "overlapping unaligned checkpoints capture an input for both", inputs: 2, canUnalign: true,
			steps: []alignmentStep{
				{input: 0, barrier: deliver(1, Unaligned), want: Advance{
					Forward: true, Barrier: Barrier{ID: 1, Mode: Unaligned}, UnalignedFirst: true, CaptureInputs: []int{1}}},
				{input: 0, barrier: deliver(2, Unaligned), want: Advance{
					Forward: true, Barrier: Barrier{ID: 2, Mode: Unaligned}, UnalignedFirst: true, CaptureInputs: []int{1}}},
				{input: 1, barrier: deliver(1, Unaligned), want: Advance{CaptureDone: []ID{1}}},
				{input: 1, barrier: deliver(2, Unaligned), want: Advance{CaptureDone: []ID{2}}},
			},
		},
		{
			name: "closing ends every capture and completes the aligned barrier above them", inputs: 2, canUnalign: true,
			steps: []alignmentStep{
				{input: 0, barrier: deliver(1, Unaligned), want: Advance{
					Forward: true, Barrier: Barrier{ID: 1, Mode: Unaligned}, UnalignedFirst: true, CaptureInputs: []int{1}}},
				{input: 0, barrier: deliver(2, Unaligned), want: Advance{
					Forward: true, Barrier: Barrier{ID: 2, Mode: Unaligned}, UnalignedFirst: true, CaptureInputs: []int{1}}},
				{input: 0, barrier: deliver(3, Aligned), paused: []int{0}},
				{input: 1, want: Advance{Forward: true, Barrier: Barrier{ID: 3}, CaptureDone: []ID{1, 2}}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAlignment(tc.inputs, tc.canUnalign)
			for i, s := range tc.steps {
				var got Advance
				event := fmt.Sprintf("step %d: close input %d", i, s.input)
				if s.barrier != nil {
					event = fmt.Sprintf("step %d: input %d delivers %v", i, s.input, *s.barrier)
					got = a.OnBarrier(s.input, *s.barrier)
				} else {
					got = a.OnInputClosed(s.input)
				}
				if formatAdvance(got) != formatAdvance(s.want) {
					t.Fatalf("%s: got %s, want %s (state %v)", event, formatAdvance(got), formatAdvance(s.want), a)
				}
				var paused []int
				for in := range tc.inputs {
					if a.Paused(in) {
						paused = append(paused, in)
					}
				}
				if !slices.Equal(paused, s.paused) {
					t.Fatalf("%s: paused inputs %v, want %v (state %v)", event, paused, s.paused, a)
				}
			}
			if p := a.Pending(); len(p) != 0 {
				t.Fatalf("barriers %v still pending at the end (state %v)", p, a)
			}
		})
	}
}

func TestAlignmentViolationsPanic(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(a *Alignment)
		want string
	}{
		{"repeated id on one input", func(a *Alignment) {
			a.OnBarrier(0, Barrier{ID: 1, Mode: Unaligned})
			a.OnBarrier(0, Barrier{ID: 1, Mode: Unaligned})
		}, "input 0 delivered barrier(1,unaligned) after barrier 1"},
		{"id going down on one input", func(a *Alignment) {
			a.OnBarrier(0, Barrier{ID: 5, Mode: Unaligned})
			a.OnBarrier(1, Barrier{ID: 5, Mode: Unaligned})
			a.OnBarrier(1, Barrier{ID: 4, Mode: Unaligned})
		}, "after barrier 5"},
		{"polling a paused input", func(a *Alignment) {
			a.OnBarrier(0, Barrier{ID: 1})
			a.OnBarrier(0, Barrier{ID: 2})
		}, "while paused"},
		{"barrier after close", func(a *Alignment) {
			a.OnInputClosed(1)
			a.OnBarrier(1, Barrier{ID: 1})
		}, "after it closed"},
		{"skipping an owed barrier", func(a *Alignment) {
			a.OnBarrier(0, Barrier{ID: 1, Mode: Unaligned})
			a.OnBarrier(1, Barrier{ID: 2, Mode: Unaligned})
		}, "still owes barrier 1"},
		{"a new id below one another input passed", func(a *Alignment) {
			a.OnBarrier(0, Barrier{ID: 3, Mode: Unaligned})
			a.OnInputClosed(0)
			a.OnBarrier(1, Barrier{ID: 2, Mode: Unaligned})
		}, "input 0 already delivered barrier 3"},
		{"id zero", func(a *Alignment) {
			a.OnBarrier(0, Barrier{})
		}, "id zero"},
		{"input out of range", func(a *Alignment) {
			a.OnBarrier(2, Barrier{ID: 1})
		}, "input 2 of 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAlignment(2, true)
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Fatalf("recovered %v, want a panic containing %q", r, tc.want)
				}
			}()
			tc.run(a)
		})
	}
}

// TestAlignmentStateMachine delivers, in random interleavings, the barriers
// every input carries, and checks the outcome against what Chandy-Lamport
// demands: each barrier forwarded once, in order, under the mode its first
// delivery pinned; aligned ones only when every open input has delivered
// them, unaligned ones on first delivery with capture bookkeeping that ends
// exactly when the last owing input delivers or closes.
func TestAlignmentStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		inputs := rapid.IntRange(1, 4).Draw(t, "inputs")
		canUnalign := rapid.Bool().Draw(t, "canUnalign")
		numBarriers := rapid.IntRange(1, 6).Draw(t, "barriers")
		firstID := ID(rapid.IntRange(1, 10).Draw(t, "firstID"))
		a := NewAlignment(inputs, canUnalign)

		// Every input carries every barrier, in order, possibly with a stamp
		// differing from other inputs' (a per-operator override upstream),
		// and may end after any prefix.
		type stream struct {
			barriers []Barrier
			next     int
			endAfter int // close once next reaches endAfter
			closed   bool
		}
		streams := make([]*stream, inputs)
		for i := range streams {
			s := &stream{endAfter: numBarriers}
			if rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("ends%d", i)) == 0 {
				s.endAfter = rapid.IntRange(0, numBarriers).Draw(t, fmt.Sprintf("endAfter%d", i))
			}
			for k := range numBarriers {
				id := firstID + ID(k)
				s.barriers = append(s.barriers, Barrier{
					ID:       id,
					Mode:     rapid.SampledFrom([]Mode{Aligned, Unaligned}).Draw(t, fmt.Sprintf("mode%d.%d", i, id)),
					Terminal: k == numBarriers-1 && rapid.Bool().Draw(t, fmt.Sprintf("terminal%d", i)),
				})
			}
			streams[i] = s
		}

		pinned := map[ID]Mode{}      // mode pinned by first delivery
		delivered := map[ID][]bool{} // delivered[id][i]
		forwarded := map[ID]bool{}
		unalignedFirst := map[ID]bool{}
		captureDone := map[ID]bool{}
		var lastForward ID

		owing := func(id ID) []int {
			var in []int
			for i, s := range streams {
				if !s.closed && !delivered[id][i] {
					in = append(in, i)
				}
			}
			return in
		}
		checkCaptureDone := func(done []ID) {
			for _, id := range done {
				if !unalignedFirst[id] || captureDone[id] {
					t.Fatalf("CaptureDone(%d) without an open capture (state %v)", id, a)
				}
				if o := owing(id); len(o) != 0 {
					t.Fatalf("CaptureDone(%d) while inputs %v still owe it", id, o)
				}
				captureDone[id] = true
			}
			if !slices.IsSorted(done) {
				t.Fatalf("CaptureDone %v not ascending", done)
			}
		}
		checkForward := func(adv Advance) {
			if !adv.Forward {
				return
			}
			id := adv.Barrier.ID
			if forwarded[id] || id <= lastForward {
				t.Fatalf("forwarded %v after %d (forwarded before: %v)", adv.Barrier, lastForward, forwarded[id])
			}
			forwarded[id], lastForward = true, id
			if adv.Barrier.Mode != pinned[id] {
				t.Fatalf("forwarded %v, but its first delivery pinned %v", adv.Barrier, pinned[id])
			}
			if adv.UnalignedFirst {
				unalignedFirst[id] = true
				if !slices.Equal(adv.CaptureInputs, owing(id)) || len(adv.CaptureInputs) == 0 {
					t.Fatalf("forwarded %v capturing %v, owing inputs %v", adv.Barrier, adv.CaptureInputs, owing(id))
				}
			} else if o := owing(id); len(o) != 0 {
				t.Fatalf("forwarded %v aligned while inputs %v still owe it", adv.Barrier, o)
			}
		}

		// deliverNext hands input i's next barrier to the alignment and
		// checks the outcome.
		deliverNext := func(t *rapid.T, i int) {
			s := streams[i]
			b := s.barriers[s.next]
			s.next++
			if _, seen := pinned[b.ID]; !seen {
				mode := b.Mode
				if b.Terminal || !canUnalign {
					mode = Aligned
				}
				pinned[b.ID] = mode
				delivered[b.ID] = make([]bool, inputs)
			}
			delivered[b.ID][i] = true
			adv := a.OnBarrier(i, b)
			checkForward(adv)
			checkCaptureDone(adv.CaptureDone)
			if !forwarded[b.ID] && pinned[b.ID] == Unaligned && len(owing(b.ID)) > 0 {
				t.Fatalf("unaligned %v not forwarded on its first delivery", b)
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"": func(t *rapid.T) {
				for i, s := range streams {
					// Paused exactly when the input delivered the pending
					// aligned barrier that another open input still owes.
					want := false
					for id, mode := range pinned {
						if mode == Aligned && !forwarded[id] && !s.closed && delivered[id][i] {
							want = true
						}
					}
					if a.Paused(i) != want {
						t.Fatalf("Paused(%d) = %v, want %v (state %v)", i, a.Paused(i), want, a)
					}
					var capturing []ID
					for id := range unalignedFirst {
						if !captureDone[id] && !s.closed && !delivered[id][i] {
							capturing = append(capturing, id)
						}
					}
					slices.Sort(capturing)
					if got := a.Capturing(i); !slices.Equal(got, capturing) {
						t.Fatalf("Capturing(%d) = %v, want %v (state %v)", i, got, capturing, a)
					}
				}
				for _, id := range a.Pending() {
					if got := a.PendingInputs(id); !slices.Equal(got, owing(id)) || len(got) == 0 {
						t.Fatalf("PendingInputs(%d) = %v, want %v", id, got, owing(id))
					}
				}
			},
			"Deliver": func(t *rapid.T) {
				var ready []int
				for i, s := range streams {
					if !s.closed && !a.Paused(i) && s.next < min(s.endAfter, len(s.barriers)) {
						ready = append(ready, i)
					}
				}
				if len(ready) == 0 {
					return // every input is paused, closed or done
				}
				deliverNext(t, rapid.SampledFrom(ready).Draw(t, "input"))
			},
			"Close": func(t *rapid.T) {
				var ready []int
				for i, s := range streams {
					// A paused input may close too: its end needs no polling
					// when the channel is torn down.
					if !s.closed && s.next >= s.endAfter {
						ready = append(ready, i)
					}
				}
				if len(ready) == 0 {
					return // every input is closed or has barriers left
				}
				i := rapid.SampledFrom(ready).Draw(t, "input")
				streams[i].closed = true
				adv := a.OnInputClosed(i)
				checkForward(adv)
				checkCaptureDone(adv.CaptureDone)
				if adv.UnalignedFirst {
					t.Fatalf("closing input %d started a capture: %+v", i, adv)
				}
			},
		})

		// Drain: deliver what is left in id order, then close everything.
		for progress := true; progress; {
			progress = false
			for i, s := range streams {
				if !s.closed && !a.Paused(i) && s.next < min(s.endAfter, len(s.barriers)) {
					deliverNext(t, i)
					progress = true
				}
			}
		}
		for i, s := range streams {
			if !s.closed {
				s.closed = true
				adv := a.OnInputClosed(i)
				checkForward(adv)
				checkCaptureDone(adv.CaptureDone)
			}
		}
		if p := a.Pending(); len(p) != 0 {
			t.Fatalf("pending %v after every input closed (state %v)", p, a)
		}
		for id := range pinned {
			if !forwarded[id] {
				t.Fatalf("barrier %d delivered but never forwarded", id)
			}
			if unalignedFirst[id] != captureDone[id] {
				t.Fatalf("barrier %d: capture started %v, finished %v", id, unalignedFirst[id], captureDone[id])
			}
		}
	})
}
