package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// tracker records what the runtime did to the test chains of one job. All
// methods are safe for concurrent use: every task calls them.
type tracker struct {
	mu     sync.Mutex
	opened map[string]int
	closed map[string]int
	ended  map[string]int
	// values holds the record values each task received, in order.
	values map[string][]int
	// events holds per task what its chain saw: "wm <n>", "end", "batch".
	events map[string][]string
	// restored holds whether each task was opened with a snapshot.
	restored map[string]bool
}

func newTracker() *tracker {
	return &tracker{
		opened: map[string]int{}, closed: map[string]int{}, ended: map[string]int{},
		values: map[string][]int{}, events: map[string][]string{}, restored: map[string]bool{},
	}
}

func (tr *tracker) open(tc *TaskContext) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.opened[tc.Name]++
	tr.restored[tc.Name] = tc.Restored != nil
}

func (tr *tracker) close(name string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.closed[name]++
}

func (tr *tracker) event(name, ev string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events[name] = append(tr.events[name], ev)
	if ev == "end" {
		tr.ended[name]++
	}
}

func (tr *tracker) addValues(name string, b intBatch) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.values[name] = append(tr.values[name], b...)
}

func (tr *tracker) totalOpened() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, c := range tr.opened {
		n += c
	}
	return n
}

// checkOpenedClosed checks that every task that was opened was closed
// exactly once, and that the tasks named in want were opened.
func (tr *tracker) checkOpenedClosed(t *testing.T, want ...string) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, name := range want {
		if tr.opened[name] != 1 {
			t.Errorf("task %s opened %d times, want 1", name, tr.opened[name])
		}
	}
	for name, n := range tr.opened {
		if tr.closed[name] != n {
			t.Errorf("task %s opened %d times but closed %d times", name, n, tr.closed[name])
		}
	}
}

func encodeInts(dst []byte, b intBatch) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	for _, v := range b {
		dst = binary.AppendVarint(dst, int64(v))
	}
	return dst
}

func decodeInts(data []byte) (intBatch, error) {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)) {
		return nil, errors.New("bad batch length")
	}
	data = data[k:]
	b := make(intBatch, 0, n)
	for i := uint64(0); i < n; i++ {
		v, k := binary.Varint(data)
		if k <= 0 {
			return nil, fmt.Errorf("bad value %d", i)
		}
		b = append(b, int(v))
		data = data[k:]
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("%d bytes left", len(data))
	}
	return b, nil
}

// intSource emits the values subtask, subtask+p, subtask+2p, ... (count of
// them, or forever when count is negative) in batches, round-robin over the
// targets of its only outgoing edge. Its offset is the number of values
// emitted.
type intSource struct {
	tr    *tracker
	tc    *TaskContext
	count int
	batch int
	next  int
	calls int
}

func (s *intSource) Open(tc *TaskContext) error {
	s.tc = tc
	s.tr.open(tc)
	if tc.Restored != nil {
		for _, op := range tc.Restored.Operators {
			if op.UID != tc.Vertex {
				continue
			}
			n, k := binary.Uvarint(op.Offset)
			if k <= 0 {
				return fmt.Errorf("bad offset %x", op.Offset)
			}
			s.next = int(n)
		}
	}
	return nil
}

func (s *intSource) Produce() (ProduceStatus, error) {
	if s.count >= 0 && s.next >= s.count {
		return Done, nil
	}
	n := s.batch
	if s.count >= 0 {
		n = min(n, s.count-s.next)
	}
	b := make(intBatch, n)
	for i := range b {
		b[i] = (s.next+i)*s.tc.Parallelism + s.tc.Subtask
	}
	target := s.calls % s.tc.Out.Targets(0)
	s.calls++
	if err := s.tc.Out.Send(0, target, b); err != nil {
		return Produced, err
	}
	s.next += n
	return Produced, nil
}

func (s *intSource) Snapshot(checkpoint.ID) ([]store.OperatorSnapshot, error) {
	return []store.OperatorSnapshot{{
		UID: s.tc.Vertex, Offset: binary.AppendUvarint(nil, uint64(s.next)),
		OffsetText: fmt.Sprintf("next %d", s.next), Watermark: store.NoWatermark,
	}}, nil
}

func (s *intSource) Flush() error { return nil }

func (s *intSource) EndOfInput() error {
	s.tr.event(s.tc.Name, "end")
	return nil
}

func (s *intSource) Close() error {
	s.tr.close(s.tc.Name)
	return nil
}

// intOp is an operator over intBatch. It records what it sees, runs the
// optional hooks, and, with forward, sends every batch on to target 0 of
// its first outgoing edge.
type intOp struct {
	tr      *tracker
	tc      *TaskContext
	forward bool
	batch   func(o *intOp, input int, b intBatch) error
	wm      func(o *intOp, wm int64) error
	seen    int
}

func (o *intOp) Open(tc *TaskContext) error {
	o.tc = tc
	o.tr.open(tc)
	if tc.Restored != nil {
		for _, op := range tc.Restored.Operators {
			for _, ns := range op.OperatorState {
				if op.UID == tc.Vertex && ns.Name == "seen" {
					n, k := binary.Uvarint(ns.Data)
					if k <= 0 {
						return fmt.Errorf("bad state %x", ns.Data)
					}
					o.seen = int(n)
				}
			}
		}
	}
	return nil
}

func (o *intOp) ProcessBatch(input int, b Batch) error {
	ib := b.(intBatch)
	o.seen += len(ib)
	o.tr.addValues(o.tc.Name, ib)
	o.tr.event(o.tc.Name, fmt.Sprintf("batch %d %v", input, []int(ib)))
	if o.batch != nil {
		if err := o.batch(o, input, ib); err != nil {
			return err
		}
	}
	if o.forward {
		return o.tc.Out.Send(0, 0, ib)
	}
	return nil
}

func (o *intOp) ProcessWatermark(wm int64) error {
	ev := fmt.Sprintf("wm %d", wm)
	if wm == MaxWatermark {
		ev = "wm max"
	}
	o.tr.event(o.tc.Name, ev)
	if o.wm != nil {
		if err := o.wm(o, wm); err != nil {
			return err
		}
	}
	if o.forward && o.tc.Out.Edges() > 0 {
		return o.tc.Out.Watermark(wm)
	}
	return nil
}

func (o *intOp) EndOfInput() error {
	o.tr.event(o.tc.Name, "end")
	o.tr.mu.Lock()
	o.tr.events[o.tc.Name] = append(o.tr.events[o.tc.Name], fmt.Sprintf("seen %d", o.seen))
	o.tr.mu.Unlock()
	return nil
}

func (o *intOp) Snapshot(checkpoint.ID) ([]store.OperatorSnapshot, error) {
	return []store.OperatorSnapshot{{
		UID: o.tc.Vertex, Watermark: store.NoWatermark,
		OperatorState: []store.NamedState{{Name: "seen", Data: binary.AppendUvarint(nil, uint64(o.seen))}},
	}}, nil
}

func (o *intOp) Flush() error { return nil }

func (o *intOp) Close() error {
	o.tr.close(o.tc.Name)
	return nil
}

func (o *intOp) CanUnalign() bool { return true }

func (o *intOp) EncodeBatch(_ int, b Batch, dst []byte) []byte {
	return encodeInts(dst, b.(intBatch))
}

func (o *intOp) DecodeBatch(_ int, data []byte) (Batch, error) { return decodeInts(data) }

func sourceVertex(uid string, p int, newSrc func(subtask int) Source) *Vertex {
	return &Vertex{UID: uid, Parallelism: p, NewSource: newSrc}
}

func opVertex(uid string, p int, newOp func(subtask int) Operator) *Vertex {
	return &Vertex{UID: uid, Parallelism: p, NewOperator: newOp}
}

// pipeline is src (parallelism 2, count values per subtask; negative:
// unbounded) -> mid (parallelism 2, all to all) -> sink (parallelism 1).
func pipeline(tr *tracker, count int, mid, sink func(o *intOp)) *JobGraph {
	return &JobGraph{
		Vertices: []*Vertex{
			sourceVertex("src", 2, func(int) Source { return &intSource{tr: tr, count: count, batch: 7} }),
			opVertex("mid", 2, func(int) Operator {
				o := &intOp{tr: tr, forward: true}
				if mid != nil {
					mid(o)
				}
				return o
			}),
			opVertex("sink", 1, func(int) Operator {
				o := &intOp{tr: tr}
				if sink != nil {
					sink(o)
				}
				return o
			}),
		},
		Edges: []Edge{{From: 0, To: 1}, {From: 1, To: 2}},
	}
}

// perSourceOrder fails a mid operator when the values of one source subtask
// (value mod 2) arrive out of order: channels are FIFO.
func perSourceOrder(o *intOp) {
	last := map[int]int{0: -1, 1: -1}
	o.batch = func(o *intOp, _ int, b intBatch) error {
		for _, v := range b {
			if v <= last[v%2] {
				return fmt.Errorf("value %d after %d from source subtask %d", v, last[v%2], v%2)
			}
			last[v%2] = v
		}
		return nil
	}
}

func TestExecuteEndOfInputPropagates(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	const perSubtask = 500
	for _, tc := range []struct {
		name string
		cfg  func(dir string) Config
	}{
		{"no checkpoints", func(string) Config { return Config{MaxParallelism: 4} }},
		{"aligned checkpoints", func(dir string) Config {
			return Config{MaxParallelism: 4, CheckpointDir: dir, CheckpointInterval: time.Millisecond, ChannelCapacity: 2}
		}},
		{"unaligned checkpoints", func(dir string) Config {
			return Config{MaxParallelism: 4, CheckpointDir: dir, CheckpointInterval: time.Millisecond, ChannelCapacity: 2, CheckpointMode: ModeUnaligned}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			dir := t.TempDir()
			cfg := tc.cfg(dir)
			if err := Execute(context.Background(), pipeline(tr, perSubtask, perSourceOrder, nil), cfg); err != nil {
				t.Fatalf("Execute: %v", err)
			}
			tr.checkOpenedClosed(t, "src-0", "src-1", "mid-0", "mid-1", "sink-0")
			tr.mu.Lock()
			defer tr.mu.Unlock()
			for _, name := range []string{"src-0", "src-1", "mid-0", "mid-1", "sink-0"} {
				if tr.ended[name] != 1 {
					t.Errorf("EndOfInput of %s called %d times, want 1", name, tr.ended[name])
				}
			}
			got := slices.Sorted(slices.Values(tr.values["sink-0"]))
			if len(got) != 2*perSubtask {
				t.Fatalf("sink received %d values, want %d", len(got), 2*perSubtask)
			}
			for i, v := range got {
				if v != i {
					t.Fatalf("sink values sorted: position %d holds %d (lost or duplicated records)", i, v)
				}
			}
			// The sink learns that its inputs ended only after every
			// record: the final watermark, then end of input, then nothing.
			evs := tr.events["sink-0"]
			tail := evs[max(0, len(evs)-3):]
			want := []string{"wm max", "end", fmt.Sprintf("seen %d", 2*perSubtask)}
			if !slices.Equal(tail, want) {
				t.Fatalf("sink events end with %q, want %q", tail, want)
			}
			if n := strings.Count(strings.Join(evs, "\n"), "wm max"); n != 1 {
				t.Errorf("sink saw the final watermark %d times, want 1", n)
			}
			if cfg.CheckpointDir == "" {
				return
			}
			// The job ended with its terminal checkpoint, which holds
			// every task and the sources' final offsets.
			st, err := store.Open(dir, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ids, err := st.Completed()
			if err != nil || len(ids) == 0 {
				t.Fatalf("completed checkpoints = %v, %v; want the terminal one", ids, err)
			}
			last := ids[len(ids)-1]
			for _, name := range []string{"src-0", "src-1"} {
				snap, err := st.ReadTaskSnapshot(last, name)
				if err != nil {
					t.Fatal(err)
				}
				if n, _ := binary.Uvarint(snap.Operators[0].Offset); n != perSubtask {
					t.Errorf("terminal checkpoint %d: %s offset %d, want %d", last, name, n, perSubtask)
				}
			}
			for _, name := range []string{"mid-0", "mid-1", "sink-0"} {
				if _, err := st.ReadTaskSnapshot(last, name); err != nil {
					t.Errorf("terminal checkpoint %d: %v", last, err)
				}
			}
		})
	}
}

func TestExecuteOperatorFailureNamesTask(t *testing.T) {
	errBoom := errors.New("boom")
	tr := newTracker()
	g := pipeline(tr, -1, func(o *intOp) {
		batches := 0
		o.batch = func(o *intOp, _ int, _ intBatch) error {
			batches++
			if o.tc.Subtask == 1 && batches == 3 {
				return errBoom
			}
			return nil
		}
	}, nil)
	err := Execute(context.Background(), g, Config{MaxParallelism: 4, ChannelCapacity: 2})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Execute = %v, want an error wrapping %v", err, errBoom)
	}
	if !strings.Contains(err.Error(), "mid-1") {
		t.Errorf("Execute error %q does not name the failing task mid-1", err)
	}
	if strings.Contains(err.Error(), "mid-0") {
		t.Errorf("Execute error %q names mid-0, which did not fail", err)
	}
	tr.checkOpenedClosed(t, "src-0", "src-1", "mid-0", "mid-1", "sink-0")
}

// failure is a panic value that is a task's error (Failure).
type failure struct{ cause error }

func (f *failure) Error() string { return "state failed: " + f.cause.Error() }
func (f *failure) Unwrap() error { return f.cause }
func (f *failure) TaskFailure()  {}

// TestExecutePanicWithFailure: an operator that panics with a Failure
// fails its task with that error as it is, without a stack trace; any
// other panic is reported as a panic with its stack.
func TestExecutePanicWithFailure(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		what  string
		value any
		check func(err error) bool
	}{
		{"a Failure", &failure{cause: errBoom}, func(err error) bool {
			var f *failure
			return errors.As(err, &f) && errors.Is(err, errBoom) && !strings.Contains(err.Error(), "panic") && !strings.Contains(err.Error(), "goroutine")
		}},
		{"an error wrapping a Failure", fmt.Errorf("reading: %w", &failure{cause: errBoom}), func(err error) bool {
			var f *failure
			return errors.As(err, &f) && strings.Contains(err.Error(), "reading: state failed: boom") && !strings.Contains(err.Error(), "goroutine")
		}},
		{"a string", "bad state", func(err error) bool {
			return strings.Contains(err.Error(), "panic: bad state") && strings.Contains(err.Error(), "goroutine")
		}},
	} {
		tr := newTracker()
		g := pipeline(tr, -1, func(o *intOp) {
			o.batch = func(o *intOp, _ int, _ intBatch) error {
				if o.tc.Subtask == 1 {
					panic(tc.value)
				}
				return nil
			}
		}, nil)
		err := Execute(context.Background(), g, Config{MaxParallelism: 4, ChannelCapacity: 2})
		if err == nil || !tc.check(err) {
			t.Errorf("panic with %s: Execute = %v", tc.what, err)
		}
	}
}

func TestExecuteCancelStopsUnboundedJob(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	for _, tc := range []struct {
		name string
		// sink returns the hook of the sink and a channel closed once the
		// job is far enough along to be canceled.
		sink func() (func(o *intOp), <-chan struct{})
	}{
		{"running", func() (func(o *intOp), <-chan struct{}) {
			ready := make(chan struct{})
			var once sync.Once
			return func(o *intOp) {
				o.batch = func(o *intOp, _ int, _ intBatch) error {
					if o.seen >= 1000 {
						once.Do(func() { close(ready) })
					}
					return nil
				}
			}, ready
		}},
		{"backpressured", func() (func(o *intOp), <-chan struct{}) {
			// The sink stops taking records, so every channel fills and
			// the sources block in Push.
			ready := make(chan struct{})
			var once sync.Once
			return func(o *intOp) {
				o.batch = func(o *intOp, _ int, _ intBatch) error {
					once.Do(func() { close(ready) })
					<-o.tc.Done
					return ErrCanceled
				}
			}, ready
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			hook, ready := tc.sink()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := make(chan error, 1)
			go func() {
				res <- Execute(ctx, pipeline(tr, -1, nil, hook), Config{
					MaxParallelism: 4, ChannelCapacity: 2,
					CheckpointDir: t.TempDir(), CheckpointInterval: time.Millisecond,
				})
			}()
			select {
			case <-ready:
			case err := <-res:
				t.Fatalf("Execute of an unbounded job returned before it was canceled: %v", err)
			}
			cancel()
			if err := <-res; err != nil {
				t.Fatalf("Execute after cancel = %v, want nil", err)
			}
			tr.checkOpenedClosed(t, "src-0", "src-1", "mid-0", "mid-1", "sink-0")
		})
	}
}

// scriptedSource emits what the test tells it to, one command per Produce.
type scriptedSource struct {
	tc   *TaskContext
	tr   *tracker
	cmds <-chan srcCmd
}

type srcCmd struct {
	wm  int64
	val int
	end bool
}

func (s *scriptedSource) Open(tc *TaskContext) error {
	s.tc = tc
	s.tr.open(tc)
	return nil
}

func (s *scriptedSource) Produce() (ProduceStatus, error) {
	select {
	case c := <-s.cmds:
		switch {
		case c.end:
			return Done, nil
		case c.wm != 0:
			return Produced, s.tc.Out.Watermark(c.wm)
		default:
			return Produced, s.tc.Out.Send(0, 0, intBatch{c.val})
		}
	case <-s.tc.Done:
		return Idle, nil
	}
}

func (s *scriptedSource) Snapshot(checkpoint.ID) ([]store.OperatorSnapshot, error) { return nil, nil }
func (s *scriptedSource) Flush() error                                             { return nil }
func (s *scriptedSource) EndOfInput() error                                        { return nil }
func (s *scriptedSource) Close() error {
	s.tr.close(s.tc.Name)
	return nil
}

// A task with two inputs processes the minimum of its inputs' watermarks,
// only when that minimum rises; an input that ended no longer holds it back.
func TestExecuteTwoInputWatermarkIsMinOverOpenInputs(t *testing.T) {
	tr := newTracker()
	cmdA, cmdB := make(chan srcCmd), make(chan srcCmd)
	events := make(chan string, 100)
	g := &JobGraph{
		Vertices: []*Vertex{
			sourceVertex("a", 1, func(int) Source { return &scriptedSource{tr: tr, cmds: cmdA} }),
			sourceVertex("b", 1, func(int) Source { return &scriptedSource{tr: tr, cmds: cmdB} }),
			opVertex("join", 1, func(int) Operator {
				return &intOp{tr: tr,
					batch: func(_ *intOp, input int, b intBatch) error {
						events <- fmt.Sprintf("batch %d %d", input, b[0])
						return nil
					},
					wm: func(_ *intOp, wm int64) error {
						if wm == MaxWatermark {
							events <- "wm max"
						} else {
							events <- fmt.Sprintf("wm %d", wm)
						}
						return nil
					},
				}
			}),
		},
		Edges: []Edge{{From: 0, To: 2, Input: 0}, {From: 1, To: 2, Input: 1}},
	}
	res := make(chan error, 1)
	go func() { res <- Execute(context.Background(), g, Config{MaxParallelism: 1}) }()

	// Each step sends commands to one source and lists the events the
	// join must show. A step that ends with a record proves, by FIFO
	// order, that nothing else came of its watermark.
	steps := []struct {
		src  chan srcCmd
		cmds []srcCmd
		want []string
	}{
		{cmdA, []srcCmd{{wm: 10}, {val: 100}}, []string{"batch 0 100"}},
		{cmdB, []srcCmd{{wm: 5}, {val: 200}}, []string{"wm 5", "batch 1 200"}},
		{cmdB, []srcCmd{{wm: 20}, {val: 201}}, []string{"wm 10", "batch 1 201"}},
		{cmdA, []srcCmd{{wm: 15}, {val: 101}}, []string{"wm 15", "batch 0 101"}},
		{cmdA, []srcCmd{{wm: 12}, {val: 102}}, []string{"batch 0 102"}}, // a regression is ignored
		{cmdB, []srcCmd{{wm: 18}, {val: 202}}, []string{"batch 1 202"}}, // as is a regression of the other input
		{cmdA, []srcCmd{{end: true}}, []string{"wm 20"}},                // a closed input counts as +inf
		{cmdB, []srcCmd{{wm: 30}, {val: 203}}, []string{"wm 30", "batch 1 203"}},
		{cmdB, []srcCmd{{end: true}}, []string{"wm max"}},
	}
	for i, st := range steps {
		for _, c := range st.cmds {
			st.src <- c
		}
		for _, want := range st.want {
			select {
			case got := <-events:
				if got != want {
					t.Fatalf("step %d: join saw %q, want %q", i, got, want)
				}
			case err := <-res:
				t.Fatalf("step %d: Execute returned early: %v", i, err)
			}
		}
	}
	if err := <-res; err != nil {
		t.Fatalf("Execute: %v", err)
	}
	close(events)
	for ev := range events {
		t.Errorf("unexpected event after the last step: %q", ev)
	}
	tr.checkOpenedClosed(t, "a-0", "b-0", "join-0")
}

// simpleJob is src (parallelism 1) -> op (parallelism 1).
func simpleJob(tr *tracker, count int) *JobGraph {
	return &JobGraph{
		Vertices: []*Vertex{
			sourceVertex("src", 1, func(int) Source { return &intSource{tr: tr, count: count, batch: 5} }),
			opVertex("op", 1, func(int) Operator { return &intOp{tr: tr} }),
		},
		Edges: []Edge{{From: 0, To: 1}},
	}
}

func TestExecuteRefusesUnusableCheckpointDir(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	dir := t.TempDir()
	cfg := Config{MaxParallelism: 2, CheckpointDir: dir, CheckpointInterval: time.Millisecond}
	if err := Execute(context.Background(), simpleJob(newTracker(), 100), cfg); err != nil {
		t.Fatalf("first run: %v", err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := st.Completed()
	if err != nil || len(ids) == 0 {
		t.Fatalf("completed checkpoints after the first run = %v, %v", ids, err)
	}

	t.Run("completed checkpoints without restore", func(t *testing.T) {
		tr := newTracker()
		err := Execute(context.Background(), simpleJob(tr, 100), cfg)
		if err == nil {
			t.Fatal("Execute into a directory holding completed checkpoints, without Restore, succeeded")
		}
		if !strings.Contains(err.Error(), dir) {
			t.Errorf("error %q does not name the directory %s", err, dir)
		}
		if !strings.Contains(err.Error(), "restore") {
			t.Errorf("error %q does not say how to restore", err)
		}
		if n := tr.totalOpened(); n != 0 {
			t.Errorf("%d tasks were opened before the directory was refused", n)
		}
	})

	t.Run("restore latest", func(t *testing.T) {
		// The control case: the same directory is fine to restore from.
		tr := newTracker()
		rcfg := cfg
		rcfg.Restore = "latest"
		if err := Execute(context.Background(), simpleJob(tr, 100), rcfg); err != nil {
			t.Fatalf("restoring from %s: %v", dir, err)
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if !tr.restored["src-0"] || !tr.restored["op-0"] {
			t.Errorf("tasks opened with a snapshot: %v, want both", tr.restored)
		}
		if n := len(tr.values["op-0"]); n != 0 {
			t.Errorf("restoring from the terminal checkpoint replayed %d records, want 0", n)
		}
	})

	t.Run("missing snapshot file", func(t *testing.T) {
		ids, err := st.Completed()
		if err != nil {
			t.Fatal(err)
		}
		last := ids[len(ids)-1]
		path := st.SnapshotPath(last, "op-0")
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		for _, restore := range []string{"latest", fmt.Sprint(last)} {
			tr := newTracker()
			rcfg := cfg
			rcfg.Restore = restore
			err := Execute(context.Background(), simpleJob(tr, 100), rcfg)
			if err == nil {
				t.Fatalf("restore %s from a checkpoint missing %s succeeded", restore, path)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("restore %s: error %q does not name the missing file %s", restore, err, path)
			}
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("restore %s: error %q does not wrap fs.ErrNotExist", restore, err)
			}
			if n := tr.totalOpened(); n != 0 {
				t.Errorf("restore %s: %d tasks were opened before the restore was refused", restore, n)
			}
		}
	})
}

// noStateOp is an intOp whose chain keeps no state: Snapshot returns no
// operator, and the runtime fills in the task's own entry.
type noStateOp struct{ *intOp }

func (o noStateOp) Snapshot(checkpoint.ID) ([]store.OperatorSnapshot, error) { return nil, nil }

// The terminal checkpoint is taken after the final watermark and the end
// of input were processed, so it records the maximum watermark (not a
// made-up 0 for a chain without state), and a task restored from it does
// not go back to an earlier watermark.
func TestExecuteTerminalCheckpointRecordsFinalWatermark(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	dir := t.TempDir()
	run := func(restore string, script []srcCmd, wantEvents []string) {
		t.Helper()
		tr := newTracker()
		cmds := make(chan srcCmd)
		events := make(chan string, 100)
		g := &JobGraph{
			Vertices: []*Vertex{
				sourceVertex("a", 1, func(int) Source { return &scriptedSource{tr: tr, cmds: cmds} }),
				opVertex("op", 1, func(int) Operator {
					return noStateOp{&intOp{tr: tr,
						batch: func(_ *intOp, _ int, b intBatch) error {
							events <- fmt.Sprintf("batch %d", b[0])
							return nil
						},
						wm: func(_ *intOp, wm int64) error {
							if wm == MaxWatermark {
								events <- "wm max"
							} else {
								events <- fmt.Sprintf("wm %d", wm)
							}
							return nil
						},
					}}
				}),
			},
			Edges: []Edge{{From: 0, To: 1}},
		}
		res := make(chan error, 1)
		go func() {
			res <- Execute(context.Background(), g, Config{MaxParallelism: 1, CheckpointDir: dir, Restore: restore})
		}()
		for _, c := range script {
			cmds <- c
		}
		if err := <-res; err != nil {
			t.Fatalf("Execute (restore %q): %v", restore, err)
		}
		close(events)
		var got []string
		for ev := range events {
			got = append(got, ev)
		}
		if !slices.Equal(got, wantEvents) {
			t.Fatalf("restore %q: operator saw %q, want %q", restore, got, wantEvents)
		}
	}

	run("", []srcCmd{{val: 1}, {end: true}}, []string{"batch 1", "wm max"})
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := st.Completed()
	if err != nil || len(ids) != 1 {
		t.Fatalf("completed checkpoints = %v, %v; want the terminal one", ids, err)
	}
	snap, err := st.ReadTaskSnapshot(ids[0], "op-0")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Operators) != 1 || snap.Operators[0].UID != "op" {
		t.Fatalf("snapshot of op-0 holds operators %+v, want one entry for op", snap.Operators)
	}
	if wm := snap.Operators[0].Watermark; wm != MaxWatermark {
		t.Errorf("terminal snapshot of op-0 records watermark %d, want the maximum", wm)
	}
	run("latest", []srcCmd{{wm: -5}, {val: 2}, {end: true}}, []string{"batch 2"})
}

// resumableIntOp is an intOp whose batches the task can interrupt between
// records: it hands the records up to the interruption to the intOp as one
// batch. slow makes every fifth record take a little time.
type resumableIntOp struct {
	*intOp
	stops *atomic.Int64
	slow  bool
}

func (o resumableIntOp) ProcessBatchFrom(input int, b Batch, from int, in *Interrupt) (int, error) {
	ib := b.(intBatch)
	i := from
	for ; i < len(ib); i++ {
		if in != nil && in.Requested() {
			o.stops.Add(1)
			break
		}
		if o.slow && ib[i]%5 == 0 {
			time.Sleep(10 * time.Microsecond) // load shaping, not synchronisation
		}
	}
	if i == from {
		return i, nil
	}
	return i, o.intOp.ProcessBatch(input, ib[from:i])
}

func (o resumableIntOp) EncodeBatchFrom(_ int, b Batch, from int, dst []byte) []byte {
	return encodeInts(dst, b.(intBatch)[from:])
}

// alignedOnlyOp is an intOp whose chain cannot capture in-flight records, so
// unaligned barriers must degrade to aligned ones at its task.
type alignedOnlyOp struct{ *intOp }

func (alignedOnlyOp) CanUnalign() bool { return false }

// taskCounts reads what checkpoint id holds for one task: the source offset
// or the operator's "seen" count, and the in-flight records it captured.
func taskCounts(t *testing.T, st *store.Store, id checkpoint.ID, task string) (n, inflight int) {
	t.Helper()
	snap, err := st.ReadTaskSnapshot(id, task)
	if err != nil {
		t.Fatal(err)
	}
	op := snap.Operators[0]
	if op.Offset != nil {
		v, _ := binary.Uvarint(op.Offset)
		n = int(v)
	}
	for _, ns := range op.OperatorState {
		if ns.Name == "seen" {
			v, _ := binary.Uvarint(ns.Data)
			n = int(v)
		}
	}
	for _, f := range op.InFlight {
		inflight += f.Records
	}
	return n, inflight
}

// Every completed checkpoint is a consistent cut: what the sources had
// emitted at the barrier is exactly what mid processed before its snapshot
// plus what it captured in flight, and likewise from mid to sink. Restoring
// from any of them ends with every record processed exactly once. A mid
// chain that cannot capture in-flight records must get the same guarantee
// from unaligned barriers, by processing what they overtook first.
func TestExecuteCheckpointsAreConsistentCuts(t *testing.T) {
	t.Setenv(store.FsyncEnvVar, "0")
	const perSubtask = 1500
	for _, tc := range []struct {
		name       string
		mode       ModeSetting
		canUnalign bool
		// resumable: mid and sink can be interrupted between records, and
		// the sources emit batches of 64.
		resumable bool
	}{
		{"aligned", ModeAligned, true, false},
		{"unaligned", ModeUnaligned, true, false},
		{"unaligned at a chain that cannot capture", ModeUnaligned, false, false},
		{"unaligned, taken inside batches", ModeUnaligned, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stops atomic.Int64
			job := func(tr *tracker) *JobGraph {
				g := pipeline(tr, perSubtask, nil, func(o *intOp) {
					o.batch = func(o *intOp, _ int, _ intBatch) error {
						if o.seen%32 < 7 {
							time.Sleep(20 * time.Microsecond) // load shaping, not synchronisation
						}
						return nil
					}
				})
				if !tc.canUnalign {
					g.Vertices[1].NewOperator = func(int) Operator {
						o := &intOp{tr: tr, forward: true}
						perSourceOrder(o)
						return alignedOnlyOp{o}
					}
				}
				if tc.resumable {
					g.Vertices[0].NewSource = func(int) Source { return &intSource{tr: tr, count: perSubtask, batch: 64} }
					g.Vertices[1].NewOperator = func(int) Operator {
						o := &intOp{tr: tr, forward: true}
						perSourceOrder(o)
						return resumableIntOp{intOp: o, stops: &stops}
					}
					sink := g.Vertices[2].NewOperator
					g.Vertices[2].NewOperator = func(s int) Operator {
						return resumableIntOp{intOp: sink(s).(*intOp), stops: &stops, slow: true}
					}
				}
				return g
			}
			dir := t.TempDir()
			cfg := Config{
				MaxParallelism: 4, CheckpointDir: dir, CheckpointInterval: 2 * time.Millisecond,
				CheckpointMode: tc.mode, ChannelCapacity: 2, Retain: 1000,
			}
			if err := Execute(context.Background(), job(newTracker()), cfg); err != nil {
				t.Fatalf("Execute: %v", err)
			}
			st, err := store.Open(dir, store.Options{Retain: 1000})
			if err != nil {
				t.Fatal(err)
			}
			ids, err := st.Completed()
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) < 2 {
				t.Fatalf("completed checkpoints %v; want periodic ones besides the terminal one", ids)
			}
			captured := 0
			for _, id := range ids {
				emitted := 0
				for _, task := range []string{"src-0", "src-1"} {
					n, _ := taskCounts(t, st, id, task)
					emitted += n
				}
				mid, midIn := 0, 0
				for _, task := range []string{"mid-0", "mid-1"} {
					n, in := taskCounts(t, st, id, task)
					mid += n
					midIn += in
				}
				sink, sinkIn := taskCounts(t, st, id, "sink-0")
				captured += midIn + sinkIn
				if emitted != mid+midIn {
					t.Errorf("checkpoint %d: sources emitted %d records, mid processed %d and holds %d in flight", id, emitted, mid, midIn)
				}
				if mid != sink+sinkIn {
					t.Errorf("checkpoint %d: mid processed %d records, sink processed %d and holds %d in flight", id, mid, sink, sinkIn)
				}
				if (tc.mode == ModeAligned || !tc.canUnalign) && midIn != 0 {
					t.Errorf("checkpoint %d: mid captured %d in-flight records, but its checkpoints are aligned", id, midIn)
				}
			}
			t.Logf("%d completed checkpoints, %d in-flight records captured in all", len(ids), captured)
			if tc.mode == ModeUnaligned && tc.canUnalign && captured == 0 {
				t.Errorf("no checkpoint of the unaligned run captured in-flight records; the test did not exercise capture")
			}
			if tc.resumable {
				t.Logf("the chains stopped inside a batch %d times", stops.Load())
				if stops.Load() == 0 {
					t.Errorf("no barrier was taken inside a batch; the test did not exercise interruption")
				}
			}

			for _, id := range ids {
				rdir := t.TempDir()
				rst, err := store.Open(rdir, store.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, task := range []string{"src-0", "src-1", "mid-0", "mid-1", "sink-0"} {
					data, err := st.ReadSnapshot(id, task)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := rst.WriteSnapshot(id, task, data); err != nil {
						t.Fatal(err)
					}
				}
				if err := rst.WriteCompleted(id); err != nil {
					t.Fatal(err)
				}
				tr := newTracker()
				rcfg := cfg
				rcfg.CheckpointDir, rcfg.CheckpointInterval, rcfg.Restore = rdir, 0, fmt.Sprint(id)
				if err := Execute(context.Background(), job(tr), rcfg); err != nil {
					t.Fatalf("restoring checkpoint %d: %v", id, err)
				}
				tr.mu.Lock()
				evs := tr.events["sink-0"]
				tr.mu.Unlock()
				if want := fmt.Sprintf("seen %d", 2*perSubtask); len(evs) == 0 || evs[len(evs)-1] != want {
					t.Errorf("restored from checkpoint %d: the sink ended with %q, want %q", id, evs[max(0, len(evs)-1):], want)
				}
			}
		})
	}
}

// Restoring needs a checkpoint directory to restore from; a Restore
// without one must be refused, not ignored (the job would start from
// scratch and repeat its output).
func TestExecuteRefusesRestoreWithoutCheckpointDir(t *testing.T) {
	tr := newTracker()
	err := Execute(context.Background(), simpleJob(tr, 10), Config{MaxParallelism: 1, Restore: "latest"})
	if err == nil {
		t.Fatal("Execute with Restore but no CheckpointDir succeeded; the restore was silently skipped")
	}
	if n := tr.totalOpened(); n != 0 {
		t.Errorf("%d tasks were opened before the configuration was refused", n)
	}
}

func TestExecuteRefusesMalformedGraphs(t *testing.T) {
	src := func(int) Source { return &countSource{n: 1} }
	op := func(int) Operator { return &sumOp{} }
	for _, tc := range []struct {
		name string
		g    *JobGraph
		want string
	}{
		{"duplicate uid", &JobGraph{Vertices: []*Vertex{
			{UID: "a", Parallelism: 1, NewSource: src},
			{UID: "a", Parallelism: 1, NewOperator: op},
		}, Edges: []Edge{{From: 0, To: 1}}}, `two operators have the uid "a"`},
		{"uid with a slash", &JobGraph{Vertices: []*Vertex{
			{UID: "../a", Parallelism: 1, NewSource: src},
		}}, `operator uid "../a"`},
		{"edge into a source", &JobGraph{Vertices: []*Vertex{
			{UID: "a", Parallelism: 1, NewSource: src},
			{UID: "b", Parallelism: 1, NewSource: src},
		}, Edges: []Edge{{From: 0, To: 1}}}, `edge a->b leads into a source`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Execute(context.Background(), tc.g, Config{MaxParallelism: 8})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Execute = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
