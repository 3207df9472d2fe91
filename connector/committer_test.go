package connector

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// stubSink records the verbs it is given; commit can be made to block or
// fail.
type stubSink struct {
	StateCodec[int64]
	mu         sync.Mutex
	n          int
	committed  []int64
	aborted    []int64
	closed     bool
	commitErr  error
	block      chan struct{} // when set, Commit waits on it
	entered    chan struct{}
	afterClose bool
}

func (s *stubSink) Open(InitContext[int64]) error { return nil }
func (s *stubSink) Write(int) error               { s.n++; return nil }
func (s *stubSink) PrepareCommit(c checkpoint.ID) (int64, bool, error) {
	if s.n == 0 {
		return 0, false, nil
	}
	s.n = 0
	return int64(c), true, nil
}
func (s *stubSink) Commit(c int64) error {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.block != nil {
		<-s.block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.afterClose = true
	}
	if s.commitErr != nil {
		return s.commitErr
	}
	s.committed = append(s.committed, c)
	return nil
}
func (s *stubSink) Abort(c int64) error {
	s.mu.Lock()
	s.aborted = append(s.aborted, c)
	s.mu.Unlock()
	return nil
}
func (s *stubSink) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func openStub(t *testing.T, s *stubSink, done chan struct{}, restored [][]store.NamedState) *Committer[int, int64] {
	t.Helper()
	c := NewCommitter[int, int64](s)
	if err := c.Open(OpenContext{UID: "k", Parallelism: 1, MaxParallelism: 128, Checkpointing: true,
		Done: done, Logger: slog.New(slog.DiscardHandler), CloseWait: 200 * time.Millisecond, Restored: restored}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPendingNames(t *testing.T) {
	for _, c := range []struct {
		sub  int
		ckpt checkpoint.ID
	}{{0, 1}, {3, 17}, {127, 1 << 40}} {
		s, id, ok := ParsePendingName(PendingName(c.sub, c.ckpt))
		if !ok || s != c.sub || id != c.ckpt {
			t.Fatalf("round trip of %d/%d gave %d/%d/%v", c.sub, c.ckpt, s, id, ok)
		}
	}
	for _, bad := range []string{"_xo_pending_sub", "_xo_pending_subx_1", "_xo_pending_sub1_0", "_xo_pending_sub-1_3", "_xo_pending_sub1", "other"} {
		if _, _, ok := ParsePendingName(bad); ok {
			t.Fatalf("%q parsed as a handle name", bad)
		}
	}
}

func TestCommitFailureFailsTheTask(t *testing.T) {
	s := &stubSink{commitErr: errors.New("store down")}
	c := openStub(t, s, make(chan struct{}), nil)
	_ = c.Write(1)
	if _, err := c.Snapshot(1); err != nil {
		t.Fatal(err)
	}
	c.NotifyComplete(1)
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		err = c.Write(2)
		time.Sleep(time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), "store down") || !strings.Contains(err.Error(), "checkpoint 1") {
		t.Fatalf("write after a failed commit: %v", err)
	}
	if _, err := c.Snapshot(2); err == nil {
		t.Fatal("snapshot after a failed commit succeeded")
	}
	if err := c.Close(); err == nil {
		t.Fatal("close after a failed commit reported no error")
	}
}

func TestCleanCloseWaitsThenFails(t *testing.T) {
	s := &stubSink{}
	c := openStub(t, s, make(chan struct{}), nil)
	_ = c.Write(1)
	if _, err := c.Snapshot(4); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 4 never completes: the clean close gives up after the
	// close wait and says why.
	err := c.Close()
	if err == nil || !strings.Contains(err.Error(), "1 staged commits still outstanding") {
		t.Fatalf("close with an outstanding handle: %v", err)
	}
	if !s.closed {
		t.Fatal("connector not closed")
	}
}

func TestTeardownLetsARunningCommitFinishAndRefusesLaterOnes(t *testing.T) {
	s := &stubSink{block: make(chan struct{}), entered: make(chan struct{}, 4)}
	done := make(chan struct{})
	c := openStub(t, s, done, nil)
	_ = c.Write(1)
	if _, err := c.Snapshot(1); err != nil {
		t.Fatal(err)
	}
	_ = c.Write(2)
	if _, err := c.Snapshot(2); err != nil {
		t.Fatal(err)
	}
	c.NotifyComplete(1)
	<-s.entered // commit of 1 is running
	close(done)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
		t.Fatal("close returned while a commit was running")
	case <-time.After(50 * time.Millisecond):
	}
	c.NotifyComplete(2) // after the teardown began: refused
	s.block <- struct{}{}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if s.afterClose {
		t.Fatal("a commit ran after close")
	}
	if len(s.committed) != 1 || s.committed[0] != 1 {
		t.Fatalf("committed %v, want [1]", s.committed)
	}
	if got := c.StagedCommitsOutstanding(); got != 1 {
		t.Fatalf("outstanding %d, want 1 (checkpoint 2, left for the next restore)", got)
	}
}

func TestAbortOnlyTheAbortedHandle(t *testing.T) {
	s := &stubSink{}
	c := openStub(t, s, make(chan struct{}), nil)
	_ = c.Write(1)
	_, _ = c.Snapshot(1)
	_ = c.Write(1)
	_, _ = c.Snapshot(2)
	c.NotifyAborted(2)
	c.NotifyComplete(1)
	deadline := time.Now().Add(5 * time.Second)
	for c.StagedCommitsOutstanding() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	_ = c.Close()
	if len(s.aborted) != 1 || s.aborted[0] != 2 || len(s.committed) != 1 || s.committed[0] != 1 {
		t.Fatalf("aborted %v committed %v; want [2] and [1]", s.aborted, s.committed)
	}
}

func TestCorruptRestoredHandleIsNamed(t *testing.T) {
	c := NewCommitter[int, int64](&stubSink{})
	err := c.Open(OpenContext{UID: "k", Parallelism: 1, MaxParallelism: 128,
		Restored: [][]store.NamedState{{{Name: PendingName(0, 9), Data: []byte{1, 2}}}}})
	if err == nil || !strings.Contains(err.Error(), PendingName(0, 9)) || !strings.Contains(err.Error(), "checkpoint 9") {
		t.Fatalf("corrupt handle: %v", err)
	}
	c = NewCommitter[int, int64](&stubSink{})
	err = c.Open(OpenContext{UID: "k", Parallelism: 1, MaxParallelism: 128,
		Restored: [][]store.NamedState{{{Name: "_xo_pending_subx", Data: nil}}}})
	if err == nil || !strings.Contains(err.Error(), "_xo_pending_subx") {
		t.Fatalf("malformed handle name: %v", err)
	}
}

func TestGenerationAdvancesOnRescale(t *testing.T) {
	var gens []int
	for _, par := range []int{2, 3} {
		s := &genSink{}
		c := NewCommitter[int, int64](s)
		err := c.Open(OpenContext{UID: "k", Parallelism: par, MaxParallelism: 128, RestoredParallelism: 2,
			Restored: [][]store.NamedState{{{Name: GenerationState, Data: []byte{4}}}}})
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, s.gen, s.prev)
		_ = c.Close()
	}
	if gens[0] != 4 || gens[1] != 4 || gens[2] != 5 || gens[3] != 4 {
		t.Fatalf("generations (same parallelism, rescaled) = %v, want [4 4 5 4]", gens)
	}
}

type genSink struct {
	stubSink
	gen, prev int
}

func (s *genSink) Open(ctx InitContext[int64]) error {
	s.gen, s.prev = ctx.Generation, ctx.PreviousGeneration
	return nil
}

func TestAbortNeverUndoesACompletedCheckpoint(t *testing.T) {
	s := &stubSink{}
	c := openStub(t, s, make(chan struct{}), nil)
	wait := func(n int) {
		deadline := time.Now().Add(5 * time.Second)
		for c.StagedCommitsOutstanding() > n && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	_ = c.Write(1)
	_, _ = c.Snapshot(3)
	c.NotifyComplete(3)
	c.NotifyAborted(3) // a late or mistaken abort of a completed checkpoint
	wait(0)
	_ = c.Write(1)
	_, _ = c.Snapshot(2) // an id at or below a completed one: covered by it
	c.NotifyAborted(2)
	time.Sleep(20 * time.Millisecond)
	done := make(chan struct{})
	close(done)
	c.ctx.Done = done
	_ = c.Close()
	if len(s.aborted) != 0 || len(s.committed) != 1 || s.committed[0] != 3 {
		t.Fatalf("aborted %v committed %v; want no abort and [3]", s.aborted, s.committed)
	}
	if c.StagedCommitsOutstanding() != 1 {
		t.Fatalf("checkpoint 2's handle was dropped; it must stay for the next restore")
	}
}

func TestCloseAfterOwnFailureDoesNotWait(t *testing.T) {
	s := &stubSink{}
	c := NewCommitter[int, int64](s)
	failing := make(chan struct{})
	if err := c.Open(OpenContext{UID: "k", Parallelism: 1, MaxParallelism: 128, Checkpointing: true,
		Done: make(chan struct{}), Failing: failing, Logger: slog.New(slog.DiscardHandler), CloseWait: time.Hour}); err != nil {
		t.Fatal(err)
	}
	_ = c.Write(1)
	if _, err := c.Snapshot(1); err != nil {
		t.Fatal(err)
	}
	close(failing) // the task is ending with an error; checkpoint 1 will never complete
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close after the task's own failure waited for commits")
	}
}
