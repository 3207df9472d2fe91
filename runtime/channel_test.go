package runtime

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"pgregory.net/rapid"

	"github.com/clinkstream/clink/checkpoint"
)

// intBatch is the record batch of the runtime tests: plain ints.
type intBatch []int

func (b intBatch) Len() int { return len(b) }

func rec(vs ...int) Element { return RecordsElement(intBatch(vs)) }

func wmark(ts int64) Element { return WatermarkElement(ts) }

func bar(id int) Element {
	return BarrierElement(checkpoint.Barrier{ID: checkpoint.ID(id), Mode: checkpoint.Unaligned})
}

// describe renders an element compactly: r1 (records [1]), w5, b3/2 (barrier
// 3 that overtook 2), end.
func describe(e Element) string {
	switch e.Kind {
	case KindRecords:
		var parts []string
		for _, v := range e.Batch.(intBatch) {
			parts = append(parts, fmt.Sprint(v))
		}
		return "r" + strings.Join(parts, ",")
	case KindWatermark:
		return fmt.Sprintf("w%d", e.Watermark)
	case KindBarrier:
		return fmt.Sprintf("b%d/%d", e.Barrier.ID, e.Overtaken)
	case KindEnd:
		return "end"
	}
	return "?"
}

func describeAll(es []Element) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = describe(e)
	}
	return strings.Join(parts, " ")
}

// never is a done channel that is never closed.
var never = make(chan struct{})

// closedDone is a done channel that is already closed: a Push that would
// block returns ErrCanceled at once instead.
func closedDone() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func mustPush(t *testing.T, c *Channel, es ...Element) {
	t.Helper()
	for _, e := range es {
		if err := c.Push(e, never); err != nil {
			t.Fatalf("Push(%s): %v", describe(e), err)
		}
	}
}

func expectQueue(t *testing.T, c *Channel, want string) {
	t.Helper()
	if got := describeAll(c.Drain()); got != want {
		t.Fatalf("queue = %q, want %q", got, want)
	}
}

func TestChannelFIFO(t *testing.T) {
	wake := make(chan struct{}, 1)
	c := NewChannel(4, wake)
	if c.Cap() != 4 {
		t.Fatalf("Cap() = %d, want 4", c.Cap())
	}
	if _, ok := c.TryPop(); ok {
		t.Fatal("TryPop on a new channel returned an element")
	}
	mustPush(t, c, rec(1), wmark(10), rec(2, 3), bar(1), rec(4), wmark(20), rec(5), EndElement())
	select {
	case <-wake:
	default:
		t.Fatal("Push did not signal the consumer's wake channel")
	}
	if got := c.Len(); got != 8 {
		t.Fatalf("Len() = %d, want 8", got)
	}
	expectQueue(t, c, "r1 w10 r2,3 b1/0 r4 w20 r5 end")
	if _, ok := c.TryPop(); ok {
		t.Fatal("TryPop on a drained channel returned an element")
	}

	// Many rounds through the ring buffer, with control elements making it
	// grow past its initial size while records wrap around.
	next, want := 0, 0
	for round := 0; round < 50; round++ {
		for i := 0; i < 3; i++ {
			mustPush(t, c, rec(next))
			next++
		}
		for i := 0; i < round%11; i++ {
			mustPush(t, c, wmark(int64(round)))
		}
		for {
			e, ok := c.TryPop()
			if !ok {
				break
			}
			if e.Kind != KindRecords {
				continue
			}
			if got := e.Batch.(intBatch)[0]; got != want {
				t.Fatalf("round %d: popped record %d, want %d", round, got, want)
			}
			want++
		}
	}
	if want != next {
		t.Fatalf("popped %d records, pushed %d", want, next)
	}
}

func TestChannelRecordLaneBoundedByCap(t *testing.T) {
	c := NewChannel(3, make(chan struct{}, 1))
	done := closedDone()
	// With done already closed, a Push that would have to wait returns
	// ErrCanceled and one that has room returns nil: this tells exactly
	// when Push blocks.
	for i := 0; i < 3; i++ {
		if err := c.Push(rec(i), done); err != nil {
			t.Fatalf("Push of record batch %d into a channel of capacity 3: %v", i, err)
		}
	}
	if err := c.Push(rec(3), done); !errors.Is(err, ErrCanceled) {
		t.Fatalf("Push of a 4th record batch into a full channel = %v, want ErrCanceled (it must block)", err)
	}
	if c.Len() != 3 {
		t.Fatalf("a canceled Push changed the queue: Len() = %d, want 3", c.Len())
	}
	if got := c.Pressure(); got != 1 {
		t.Fatalf("Pressure() of a full record lane = %v, want 1", got)
	}
	// Control elements never block, however full the record lane.
	for i, e := range []Element{wmark(1), bar(1), wmark(2), bar(2), wmark(3), bar(3), wmark(4), bar(4), EndElement()} {
		if err := c.Push(e, done); err != nil {
			t.Fatalf("Push of control element %d (%s) into a full channel = %v, want nil", i, describe(e), err)
		}
	}
	c.PushPriority(bar(5))
	if got := c.Pressure(); got != 1 {
		t.Fatalf("Pressure() = %v after control elements, want 1", got)
	}
	expectQueue(t, c, "r0 r1 r2 w1 b1/0 w2 b2/0 w3 b3/0 w4 b4/0 end b5/0")

	// Control elements do not take record slots, so popping one makes no
	// room; popping a record batch makes room for exactly one.
	c = NewChannel(1, make(chan struct{}, 1))
	if err := c.Push(rec(0), done); err != nil {
		t.Fatal(err)
	}
	c.PushPriority(bar(1))
	if e, _ := c.TryPop(); describe(e) != "b1/1" {
		t.Fatalf("head = %s, want b1/1", describe(e))
	}
	if err := c.Push(rec(1), done); !errors.Is(err, ErrCanceled) {
		t.Fatalf("Push of a record batch after popping a barrier = %v, want ErrCanceled (the record lane is still full)", err)
	}
	if e, _ := c.TryPop(); describe(e) != "r0" {
		t.Fatalf("popped %s, want r0", describe(e))
	}
	if err := c.Push(rec(1), done); err != nil {
		t.Fatalf("Push after a record batch was popped: %v", err)
	}
	if err := c.Push(rec(2), done); !errors.Is(err, ErrCanceled) {
		t.Fatalf("second Push after one pop = %v, want ErrCanceled", err)
	}
	expectQueue(t, c, "r1")
}

func TestChannelPushBlocksUntilTryPop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewChannel(2, make(chan struct{}, 1))
		mustPush(t, c, rec(0), rec(1))
		pushed := make(chan error, 1)
		// The done channel must belong to the bubble for the wait on it to
		// count as durably blocked.
		open := make(chan struct{})
		go func() { pushed <- c.Push(rec(2), open) }()
		synctest.Wait() // the pusher is durably blocked
		select {
		case err := <-pushed:
			t.Fatalf("Push into a full channel returned %v without waiting", err)
		default:
		}
		if c.Len() != 2 {
			t.Fatalf("Len() = %d while the push waits, want 2", c.Len())
		}
		// A control element from the consumer side of the test does not
		// release the waiting record.
		mustPush(t, c, wmark(7))
		synctest.Wait()
		select {
		case err := <-pushed:
			t.Fatalf("Push returned %v after a watermark was queued; want it still waiting", err)
		default:
		}
		if e, _ := c.TryPop(); describe(e) != "r0" {
			t.Fatalf("popped %s, want r0", describe(e))
		}
		if err := <-pushed; err != nil {
			t.Fatalf("Push after TryPop made room: %v", err)
		}
		expectQueue(t, c, "r1 w7 r2")
	})
}

func TestChannelPushCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewChannel(1, make(chan struct{}, 1))
		mustPush(t, c, rec(0))
		done := make(chan struct{})
		pushed := make(chan error, 1)
		go func() { pushed <- c.Push(rec(1), done) }()
		synctest.Wait()
		select {
		case err := <-pushed:
			t.Fatalf("Push into a full channel returned %v before done was closed", err)
		default:
		}
		close(done)
		if err := <-pushed; !errors.Is(err, ErrCanceled) {
			t.Fatalf("Push after done was closed = %v, want ErrCanceled", err)
		}
		if c.Len() != 1 {
			t.Fatalf("a canceled Push queued its element: Len() = %d, want 1", c.Len())
		}

		// The wake-up the consumer sends for the abandoned wait must not
		// let a later Push into a full channel through.
		if e, _ := c.TryPop(); describe(e) != "r0" {
			t.Fatalf("popped %s, want r0", describe(e))
		}
		mustPush(t, c, rec(2))
		open := make(chan struct{})
		go func() { pushed <- c.Push(rec(3), open) }()
		synctest.Wait()
		select {
		case err := <-pushed:
			t.Fatalf("Push into a full channel returned %v without waiting (stale wake-up?)", err)
		default:
		}
		if c.Len() != 1 {
			t.Fatalf("Len() = %d, want 1", c.Len())
		}
		if e, _ := c.TryPop(); describe(e) != "r2" {
			t.Fatalf("popped %s, want r2", describe(e))
		}
		if err := <-pushed; err != nil {
			t.Fatal(err)
		}
		expectQueue(t, c, "r3")
	})
}

func TestChannelPushPriority(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queued []Element
		want   string // the queue after PushPriority(bar(9))
	}{
		{"empty", nil, "b9/0"},
		{"records and watermarks", []Element{rec(1), wmark(5), rec(2)}, "b9/3 r1 w5 r2"},
		{"behind a queued barrier", []Element{rec(1), bar(1), rec(2), rec(3)}, "r1 b1/0 b9/2 r2 r3"},
		{"behind the last of several barriers", []Element{bar(1), rec(1), bar(2), wmark(4)}, "b1/0 r1 b2/0 b9/1 w4"},
		{"barrier at the tail", []Element{rec(1), rec(2), bar(1)}, "r1 r2 b1/0 b9/0"},
		{"behind end of input", []Element{rec(1), EndElement()}, "r1 end b9/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChannel(8, make(chan struct{}, 1))
			mustPush(t, c, tc.queued...)
			c.PushPriority(bar(9))
			expectQueue(t, c, tc.want)
		})
	}
}

func TestChannelPushPriorityNeverBlocks(t *testing.T) {
	wake := make(chan struct{}, 1)
	c := NewChannel(2, wake)
	mustPush(t, c, rec(1), rec(2))
	<-wake
	// The record lane is full; a priority barrier still goes in, and
	// grows the buffer as needed.
	for i := 1; i <= 20; i++ {
		c.PushPriority(bar(i))
	}
	select {
	case <-wake:
	default:
		t.Fatal("PushPriority did not signal the consumer's wake channel")
	}
	var want []string
	for i := 1; i <= 20; i++ {
		want = append(want, fmt.Sprintf("b%d/2", i))
	}
	expectQueue(t, c, strings.Join(want, " ")+" r1 r2")
}

func TestChannelPushPriorityRejectsNonBarrier(t *testing.T) {
	for _, e := range []Element{rec(1), wmark(1), EndElement()} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("PushPriority(%s) did not panic", describe(e))
				}
			}()
			NewChannel(1, make(chan struct{}, 1)).PushPriority(e)
		}()
	}
}

// After the consumer pops a priority barrier that overtook k elements, those
// k elements still belong before that barrier; a later priority barrier must
// not jump them, or the consumer would see the second barrier inside the
// first one's region.
func TestChannelPriorityBarrierKeepsPoppedRegion(t *testing.T) {
	t.Run("region untouched", func(t *testing.T) {
		c := NewChannel(8, make(chan struct{}, 1))
		mustPush(t, c, rec(1), wmark(5), rec(2))
		c.PushPriority(bar(1))
		if e, _ := c.TryPop(); describe(e) != "b1/3" {
			t.Fatalf("popped %s, want b1/3", describe(e))
		}
		mustPush(t, c, rec(3))
		c.PushPriority(bar(2))
		expectQueue(t, c, "r1 w5 r2 b2/1 r3")
	})
	t.Run("region partly consumed", func(t *testing.T) {
		c := NewChannel(8, make(chan struct{}, 1))
		mustPush(t, c, rec(1), rec(2), rec(3))
		c.PushPriority(bar(1))
		for _, want := range []string{"b1/3", "r1"} {
			if e, _ := c.TryPop(); describe(e) != want {
				t.Fatalf("popped %s, want %s", describe(e), want)
			}
		}
		mustPush(t, c, rec(4), rec(5))
		c.PushPriority(bar(2))
		expectQueue(t, c, "r2 r3 b2/2 r4 r5")
	})
	t.Run("region consumed", func(t *testing.T) {
		c := NewChannel(8, make(chan struct{}, 1))
		mustPush(t, c, rec(1), rec(2))
		c.PushPriority(bar(1))
		for _, want := range []string{"b1/2", "r1", "r2"} {
			if e, _ := c.TryPop(); describe(e) != want {
				t.Fatalf("popped %s, want %s", describe(e), want)
			}
		}
		mustPush(t, c, rec(3), rec(4))
		c.PushPriority(bar(2))
		expectQueue(t, c, "b2/2 r3 r4")
	})
	t.Run("empty region", func(t *testing.T) {
		c := NewChannel(8, make(chan struct{}, 1))
		c.PushPriority(bar(1))
		if e, _ := c.TryPop(); describe(e) != "b1/0" {
			t.Fatalf("popped %s, want b1/0", describe(e))
		}
		mustPush(t, c, rec(1))
		c.PushPriority(bar(2))
		expectQueue(t, c, "b2/1 r1")
	})
}

// Two priority barriers pushed while the first is still queued: the second
// lands right behind the first, so it overtakes everything the first did
// plus what was queued since.
func TestChannelBackToBackPriorityBarriers(t *testing.T) {
	c := NewChannel(8, make(chan struct{}, 1))
	mustPush(t, c, rec(1), rec(2))
	c.PushPriority(bar(1))
	c.PushPriority(bar(2))
	mustPush(t, c, rec(3))
	c.PushPriority(bar(3))
	for _, want := range []string{"b1/2", "b2/2", "b3/3"} {
		if e, _ := c.TryPop(); describe(e) != want {
			t.Fatalf("popped %s, want %s", describe(e), want)
		}
	}
	// All three regions are now owed; the largest (3) is protected.
	mustPush(t, c, rec(4))
	c.PushPriority(bar(4))
	expectQueue(t, c, "r1 r2 r3 b4/1 r4")
}

// queueModel restates the channel's contract as a list. It remembers which
// queued elements an already popped priority barrier overtook (by identity,
// not by a counter as the implementation does).
type queueModel struct {
	items   []modelItem
	owed    map[int]bool // seqs of queued elements a popped barrier overtook
	records int
}

type modelItem struct {
	seq       int
	kind      Kind
	overtaken int // barriers only
}

func (m *queueModel) insertPriority(seq int) int {
	pos := 0
	for i, it := range m.items {
		if it.kind == KindBarrier || it.kind == KindEnd || m.owed[it.seq] {
			pos = i + 1
		}
	}
	it := modelItem{seq: seq, kind: KindBarrier, overtaken: len(m.items) - pos}
	m.items = append(m.items[:pos], append([]modelItem{it}, m.items[pos:]...)...)
	return it.overtaken
}

func (m *queueModel) pop() (modelItem, bool) {
	if len(m.items) == 0 {
		return modelItem{}, false
	}
	it := m.items[0]
	m.items = m.items[1:]
	delete(m.owed, it.seq)
	if it.kind == KindRecords {
		m.records--
	}
	if it.kind == KindBarrier {
		n := 0
		for _, q := range m.items {
			if n == it.overtaken {
				break
			}
			if q.kind != KindBarrier && q.kind != KindEnd {
				m.owed[q.seq] = true
				n++
			}
		}
	}
	return it, true
}

// elementSeq reads back the sequence number a test element carries.
func elementSeq(e Element) int {
	switch e.Kind {
	case KindRecords:
		return e.Batch.(intBatch)[0]
	case KindWatermark:
		return int(e.Watermark)
	case KindBarrier:
		return int(e.Barrier.ID)
	}
	return -1
}

func TestChannelRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		capacity := rapid.IntRange(1, 4).Draw(rt, "cap")
		c := NewChannel(capacity, make(chan struct{}, 1))
		m := &queueModel{owed: map[int]bool{}}
		done := closedDone()
		seq := 0
		poppedAt := map[int]int{}  // seq -> pop index
		kinds := map[int]Kind{}    // seq -> kind
		overtook := map[int]int{}  // barrier seq -> Overtaken as popped
		priority := map[int]bool{} // barrier seq -> pushed with PushPriority
		pops := 0
		var order []int // non-barrier seqs in pop order

		check := func(e Element, ok bool) {
			want, wantOK := m.pop()
			if ok != wantOK {
				rt.Fatalf("TryPop ok = %v, model says %v", ok, wantOK)
			}
			if !ok {
				return
			}
			got := modelItem{seq: elementSeq(e), kind: e.Kind, overtaken: e.Overtaken}
			if e.Kind == KindEnd {
				got.seq = want.seq // end carries no number
			}
			if got != want {
				rt.Fatalf("TryPop = %+v, model says %+v", got, want)
			}
			poppedAt[want.seq] = pops
			pops++
			if e.Kind == KindBarrier {
				overtook[want.seq] = e.Overtaken
			} else {
				order = append(order, want.seq)
			}
		}

		steps := rapid.IntRange(0, 80).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			op := rapid.SampledFrom([]string{"records", "records", "watermark", "barrier", "priority", "priority", "end", "pop", "pop", "pop"}).Draw(rt, "op")
			s := seq + 1
			k := KindBarrier
			switch op {
			case "records", "watermark", "barrier", "end":
				var e Element
				k = KindRecords
				switch op {
				case "records":
					e = rec(s)
				case "watermark":
					e, k = wmark(int64(s)), KindWatermark
				case "barrier":
					e, k = bar(s), KindBarrier
				default:
					e, k = EndElement(), KindEnd
				}
				err := c.Push(e, done)
				if k == KindRecords && m.records >= capacity {
					if !errors.Is(err, ErrCanceled) {
						rt.Fatalf("Push of records into a full lane (%d of %d) = %v, want ErrCanceled", m.records, capacity, err)
					}
					continue
				}
				if err != nil {
					rt.Fatalf("Push(%s) = %v, want nil", describe(e), err)
				}
				if k == KindRecords {
					m.records++
				}
				m.items = append(m.items, modelItem{seq: s, kind: k})
			case "priority":
				c.PushPriority(bar(s))
				m.insertPriority(s)
				priority[s] = true
			case "pop":
				e, ok := c.TryPop()
				check(e, ok)
				continue
			}
			seq = s // sequence numbers are the push order
			kinds[s] = k
			if c.Len() != len(m.items) {
				rt.Fatalf("Len() = %d, model has %d", c.Len(), len(m.items))
			}
		}
		for {
			e, ok := c.TryPop()
			check(e, ok)
			if !ok {
				break
			}
		}

		// Order of everything that is not a barrier is the push order.
		for i := 1; i < len(order); i++ {
			if order[i] <= order[i-1] {
				rt.Fatalf("non-barrier elements popped out of order: %v", order)
			}
		}
		// A barrier's Overtaken is the number of elements pushed before it
		// and popped after it; a plain-pushed barrier overtakes nothing.
		for b, n := range overtook {
			jumped := 0
			for s, k := range kinds {
				if k != KindBarrier && s < b && poppedAt[s] > poppedAt[b] {
					jumped++
				}
			}
			if n != jumped {
				rt.Fatalf("barrier %d says it overtook %d elements, but %d pushed before it were popped after it", b, n, jumped)
			}
			if !priority[b] && n != 0 {
				rt.Fatalf("barrier %d was pushed in order but says it overtook %d", b, n)
			}
		}
		// Barriers and ends keep their push order among themselves.
		last := -1
		for s := 1; s <= seq; s++ {
			k, ok := kinds[s]
			if !ok || (k != KindBarrier && k != KindEnd) {
				continue
			}
			if poppedAt[s] < last {
				rt.Fatalf("barrier or end %d popped before an earlier one", s)
			}
			last = poppedAt[s]
		}
	})
}
