// Package connectortest is the conformance suite every committing sink
// runs: it drives a connector through the connector.Committer the way the
// runtime does (open, write, prepare at a barrier, commit or abort, crash,
// restore, rescale) and checks what the external system shows.
package connectortest

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/connector"
)

// Target describes a committing sink under test and how to read what it
// has published.
type Target[In, C any] struct {
	// New returns a fresh instance of the sink, as a new process would
	// build it. The suite opens each instance once.
	New func() connector.CommittingSink[In, C]
	// Record returns the i-th test record (i >= 0); records differ.
	Record func(i int) In
	// Key returns the string by which Visible reports record i.
	Key func(i int) string
	// Visible returns the committed output: one string per published
	// record, in any order.
	Visible func(t testing.TB) []string
	// Reset empties the external system; it runs before every case.
	Reset func(t testing.TB)
	// UID is the sink's operator uid (default "sink").
	UID string
}

// Run runs every case of the suite against target.
func Run[In, C any](t *testing.T, target Target[In, C]) {
	if target.UID == "" {
		target.UID = "sink"
	}
	cases := []struct {
		name string
		run  func(t *testing.T, tg Target[In, C])
	}{
		{"CommitPublishesOnlyAtCommit", commitPublishes[In, C]},
		{"CommitIsIdempotent", commitIdempotent[In, C]},
		{"AbortIsIdempotentAndDiscards", abortIdempotent[In, C]},
		{"NothingPreparedNothingCommitted", nothingPrepared[In, C]},
		{"CompletionSubsumesEarlierHandles", subsumes[In, C]},
		{"RecoverAfterCrash", recoverAfterCrash[In, C]},
		{"UnpreparedWritesDieWithTheProcess", unpreparedLost[In, C]},
		{"NoCommitAfterClose", noCommitAfterClose[In, C]},
		{"CodecRoundTrip", codecRoundTrip[In, C]},
		{"WritesDuringCommit", writesDuringCommit[In, C]},
		{"RescaleDown4To2", func(t *testing.T, tg Target[In, C]) { rescale(t, tg, 4, 2) }},
		{"RescaleUp2To4", func(t *testing.T, tg Target[In, C]) { rescale(t, tg, 2, 4) }},
		{"RescaleUneven3To2", func(t *testing.T, tg Target[In, C]) { rescale(t, tg, 3, 2) }},
		{"EndOfInputWithoutCheckpoints", endWithoutCheckpoints[In, C]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if target.Reset != nil {
				target.Reset(t)
			}
			c.run(t, target)
		})
	}
}

const maxParallelism = 128

// subtask is one opened Committer with the channel that cancels it.
type subtask[In, C any] struct {
	cm   *connector.Committer[In, C]
	done chan struct{}
	once sync.Once
}

// cancel makes the next Close a teardown after a failure.
func (s *subtask[In, C]) cancel() { s.once.Do(func() { close(s.done) }) }

type openOpts struct {
	sub, par       int
	restored       [][]store.NamedState
	restoredPar    int
	noCheckpointig bool
}

func open[In, C any](t testing.TB, tg Target[In, C], o openOpts) *subtask[In, C] {
	t.Helper()
	if o.par == 0 {
		o.par = 1
	}
	s := &subtask[In, C]{cm: connector.NewCommitter(tg.New()), done: make(chan struct{})}
	err := s.cm.Open(connector.OpenContext{
		UID: tg.UID, Subtask: o.sub, Parallelism: o.par, MaxParallelism: maxParallelism,
		Restored: o.restored, RestoredParallelism: o.restoredPar,
		Checkpointing: !o.noCheckpointig, Done: s.done,
		Logger:    slog.New(slog.DiscardHandler),
		CloseWait: 20 * time.Second,
	})
	if err != nil {
		t.Fatalf("opening subtask %d/%d: %v", o.sub, o.par, err)
	}
	return s
}

func write[In, C any](t testing.TB, tg Target[In, C], s *subtask[In, C], from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.cm.Write(tg.Record(i)); err != nil {
			t.Fatalf("writing record %d: %v", i, err)
		}
	}
}

func snapshot[In, C any](t testing.TB, s *subtask[In, C], id checkpoint.ID) []store.NamedState {
	t.Helper()
	st, err := s.cm.Snapshot(id)
	if err != nil {
		t.Fatalf("snapshot %d: %v", id, err)
	}
	return st
}

// awaitCommitted waits until no handle is outstanding.
func awaitCommitted[In, C any](t testing.TB, s *subtask[In, C]) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.cm.StagedCommitsOutstanding() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d handles still outstanding after 20 s", s.cm.StagedCommitsOutstanding())
		}
		time.Sleep(time.Millisecond)
	}
}

func closeClean[In, C any](t testing.TB, s *subtask[In, C]) {
	t.Helper()
	if err := s.cm.Close(); err != nil {
		t.Fatalf("closing: %v", err)
	}
}

// crash tears the subtask down as a failed job does: the gate is retired
// and nothing outstanding is committed.
func crash[In, C any](t testing.TB, s *subtask[In, C]) {
	t.Helper()
	s.cancel()
	if err := s.cm.Close(); err != nil {
		t.Logf("closing after a failure: %v", err)
	}
}

func keys[In, C any](tg Target[In, C], ranges ...[2]int) []string {
	var out []string
	for _, r := range ranges {
		for i := r[0]; i < r[1]; i++ {
			out = append(out, tg.Key(i))
		}
	}
	slices.Sort(out)
	return out
}

func expectVisible[In, C any](t testing.TB, tg Target[In, C], what string, want []string) {
	t.Helper()
	got := slices.Clone(tg.Visible(t))
	slices.Sort(got)
	if want == nil {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: visible output differs\n got %d records: %s\nwant %d records: %s", what, len(got), abbrev(got), len(want), abbrev(want))
	}
}

func abbrev(s []string) string {
	if len(s) > 12 {
		return fmt.Sprintf("%q ... %q", s[:6], s[len(s)-6:])
	}
	return fmt.Sprintf("%q", s)
}

func commitPublishes[In, C any](t *testing.T, tg Target[In, C]) {
	s := open(t, tg, openOpts{})
	write(t, tg, s, 0, 10)
	expectVisible(t, tg, "after writes, before the barrier", nil)
	snapshot(t, s, 1)
	write(t, tg, s, 10, 15)
	expectVisible(t, tg, "after the barrier, before the commit", nil)
	s.cm.NotifyComplete(1)
	awaitCommitted(t, s)
	expectVisible(t, tg, "after checkpoint 1 committed", keys(tg, [2]int{0, 10}))
	snapshot(t, s, 2)
	s.cm.NotifyComplete(2)
	awaitCommitted(t, s)
	closeClean(t, s)
	expectVisible(t, tg, "after checkpoint 2 committed", keys(tg, [2]int{0, 15}))
}

// direct drives the verbs without the Committer, as a connector's own
// recovery would see them.
func direct[In, C any](t *testing.T, tg Target[In, C]) connector.CommittingSink[In, C] {
	t.Helper()
	sink := tg.New()
	if err := sink.Open(connector.InitContext[C]{UID: tg.UID, Parallelism: 1, RunToken: "t0direct", PreviousGeneration: -1, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatalf("open: %v", err)
	}
	return sink
}

func writeDirect[In, C any](t *testing.T, tg Target[In, C], sink connector.CommittingSink[In, C], from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := sink.Write(tg.Record(i)); err != nil {
			t.Fatalf("writing record %d: %v", i, err)
		}
	}
}

func prepare[In, C any](t *testing.T, sink connector.CommittingSink[In, C], id checkpoint.ID) C {
	t.Helper()
	c, ok, err := sink.PrepareCommit(id)
	if err != nil {
		t.Fatalf("prepare %d: %v", id, err)
	}
	if !ok {
		t.Fatalf("prepare %d after writes returned no handle", id)
	}
	return c
}

func commitIdempotent[In, C any](t *testing.T, tg Target[In, C]) {
	sink := direct(t, tg)
	defer sink.Close()
	writeDirect(t, tg, sink, 0, 5)
	c := prepare(t, sink, 1)
	for k := 0; k < 3; k++ {
		if err := sink.Commit(c); err != nil {
			t.Fatalf("commit #%d: %v", k+1, err)
		}
	}
	expectVisible(t, tg, "after three commits of one handle", keys(tg, [2]int{0, 5}))
}

func abortIdempotent[In, C any](t *testing.T, tg Target[In, C]) {
	sink := direct(t, tg)
	defer sink.Close()
	writeDirect(t, tg, sink, 0, 5)
	c := prepare(t, sink, 1)
	for k := 0; k < 2; k++ {
		if err := sink.Abort(c); err != nil {
			t.Fatalf("abort #%d: %v", k+1, err)
		}
	}
	expectVisible(t, tg, "after aborting the only handle", nil)
	writeDirect(t, tg, sink, 5, 8)
	c2 := prepare(t, sink, 2)
	if err := sink.Commit(c2); err != nil {
		t.Fatal(err)
	}
	expectVisible(t, tg, "after committing the next handle", keys(tg, [2]int{5, 8}))
}

func nothingPrepared[In, C any](t *testing.T, tg Target[In, C]) {
	s := open(t, tg, openOpts{})
	st := snapshot(t, s, 1)
	for _, ns := range st {
		if _, _, ok := connector.ParsePendingName(ns.Name); ok {
			t.Fatalf("an empty interval persisted handle %s", ns.Name)
		}
	}
	s.cm.NotifyComplete(1)
	awaitCommitted(t, s)
	closeClean(t, s)
	expectVisible(t, tg, "after an empty checkpoint", nil)
}

func subsumes[In, C any](t *testing.T, tg Target[In, C]) {
	s := open(t, tg, openOpts{})
	write(t, tg, s, 0, 4)
	snapshot(t, s, 1)
	write(t, tg, s, 4, 9)
	st := snapshot(t, s, 2)
	n := 0
	for _, ns := range st {
		if _, _, ok := connector.ParsePendingName(ns.Name); ok {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("checkpoint 2 holds %d handles, want 2 (its own and checkpoint 1's, not yet committed)", n)
	}
	s.cm.NotifyComplete(2) // checkpoint 1's notification was lost
	awaitCommitted(t, s)
	closeClean(t, s)
	expectVisible(t, tg, "after completing checkpoint 2 only", keys(tg, [2]int{0, 9}))
}

func recoverAfterCrash[In, C any](t *testing.T, tg Target[In, C]) {
	a := open(t, tg, openOpts{})
	write(t, tg, a, 0, 6)
	st := snapshot(t, a, 3) // checkpoint 3 completes, but the process dies before its commit
	write(t, tg, a, 6, 9)   // the next interval: lost with the process
	crash(t, a)
	expectVisible(t, tg, "after the crash", nil)

	b := open(t, tg, openOpts{restored: [][]store.NamedState{st}})
	if b.cm.Recovered() != 1 {
		t.Fatalf("recovered %d handles at open, want 1", b.cm.Recovered())
	}
	expectVisible(t, tg, "after recovery at open", keys(tg, [2]int{0, 6}))
	crash(t, b) // dies again before its first checkpoint

	c := open(t, tg, openOpts{restored: [][]store.NamedState{st}})
	expectVisible(t, tg, "after a second recovery of the same handle", keys(tg, [2]int{0, 6}))
	write(t, tg, c, 6, 9)
	snapshot(t, c, 4)
	c.cm.NotifyComplete(4)
	awaitCommitted(t, c)
	closeClean(t, c)
	expectVisible(t, tg, "after the replayed interval committed", keys(tg, [2]int{0, 9}))
}

func unpreparedLost[In, C any](t *testing.T, tg Target[In, C]) {
	a := open(t, tg, openOpts{})
	write(t, tg, a, 0, 5)
	st := snapshot(t, a, 1)
	a.cm.NotifyComplete(1)
	awaitCommitted(t, a)
	write(t, tg, a, 5, 9)
	snapshot(t, a, 2) // checkpoint 2 never completes
	crash(t, a)
	b := open(t, tg, openOpts{restored: [][]store.NamedState{st}})
	closeClean(t, b)
	expectVisible(t, tg, "after restoring checkpoint 1 (checkpoint 2 never completed)", keys(tg, [2]int{0, 5}))
}

func noCommitAfterClose[In, C any](t *testing.T, tg Target[In, C]) {
	s := open(t, tg, openOpts{})
	write(t, tg, s, 0, 5)
	snapshot(t, s, 1)
	crash(t, s)
	s.cm.NotifyComplete(1) // arrives after the teardown: refused
	time.Sleep(20 * time.Millisecond)
	expectVisible(t, tg, "after a completion that reached a closed sink", nil)
}

func codecRoundTrip[In, C any](t *testing.T, tg Target[In, C]) {
	sink := direct(t, tg)
	defer sink.Close()
	if err := sink.Write(tg.Record(0)); err != nil {
		t.Fatal(err)
	}
	c := prepare(t, sink, 7)
	b, err := sink.MarshalCommittable(c)
	if err != nil {
		t.Fatal(err)
	}
	other := tg.New() // a different instance decodes it, as after a crash
	c2, err := other.UnmarshalCommittable(b)
	if err != nil {
		t.Fatalf("decoding a handle encoded by another instance: %v", err)
	}
	b2, err := other.MarshalCommittable(c2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("handle does not round-trip:\n%x\n%x", b, b2)
	}
	if _, err := other.UnmarshalCommittable(nil); err == nil {
		t.Log("note: an empty handle decodes without error")
	}
	if err := sink.Abort(c); err != nil {
		t.Fatal(err)
	}
}

func writesDuringCommit[In, C any](t *testing.T, tg Target[In, C]) {
	s := open(t, tg, openOpts{})
	const per = 20
	for k := 0; k < 10; k++ {
		write(t, tg, s, k*per, k*per+per/2)
		snapshot(t, s, checkpoint.ID(k+1))
		s.cm.NotifyComplete(checkpoint.ID(k + 1)) // commits while the next writes run
		write(t, tg, s, k*per+per/2, k*per+per)
	}
	snapshot(t, s, 11)
	s.cm.NotifyComplete(11)
	awaitCommitted(t, s)
	closeClean(t, s)
	expectVisible(t, tg, "after ten overlapping intervals", keys(tg, [2]int{0, 10 * per}))
}

// rescale prepares one handle in each of from subtasks, crashes them all,
// restores at to subtasks (each handed every old subtask's state, as a
// file-based checkpoint does) and checks that every handle was recovered
// exactly once.
func rescale[In, C any](t *testing.T, tg Target[In, C], from, to int) {
	const per = 7
	var states [][]store.NamedState
	for sub := 0; sub < from; sub++ {
		s := open(t, tg, openOpts{sub: sub, par: from})
		write(t, tg, s, sub*per, sub*per+per)
		states = append(states, snapshot(t, s, 5))
		crash(t, s)
	}
	expectVisible(t, tg, "before the restore", nil)
	total := 0
	var subs []*subtask[In, C]
	for sub := 0; sub < to; sub++ {
		s := open(t, tg, openOpts{sub: sub, par: to, restored: states, restoredPar: from})
		total += s.cm.Recovered()
		subs = append(subs, s)
	}
	if total != from {
		t.Fatalf("%d -> %d: %d handles recovered in all, want %d (one per old subtask)", from, to, total, from)
	}
	// The new run writes on; its handles must not collide with the
	// recovered ones.
	for i, s := range subs {
		write(t, tg, s, 1000+i*per, 1000+i*per+per)
		snapshot(t, s, 6)
		s.cm.NotifyComplete(6)
	}
	for _, s := range subs {
		awaitCommitted(t, s)
		closeClean(t, s)
	}
	expectVisible(t, tg, fmt.Sprintf("after rescaling %d -> %d", from, to),
		keys(tg, [2]int{0, from * per}, [2]int{1000, 1000 + to*per}))
}

func endWithoutCheckpoints[In, C any](t *testing.T, tg Target[In, C]) {
	s := open(t, tg, openOpts{noCheckpointig: true})
	write(t, tg, s, 0, 5)
	if err := s.cm.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	closeClean(t, s)
	expectVisible(t, tg, "a job without checkpoints, at end of input", keys(tg, [2]int{0, 5}))
}

// FuzzCodec checks that decoding arbitrary bytes as a handle never panics
// and that every handle that decodes re-encodes to a stable form. seed is
// a valid handle added to the corpus.
func FuzzCodec[In, C any](f *testing.F, target Target[In, C], seed C) {
	sink := target.New()
	if b, err := sink.MarshalCommittable(seed); err == nil {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := sink.UnmarshalCommittable(b)
		if err != nil {
			return
		}
		b2, err := sink.MarshalCommittable(c)
		if err != nil {
			t.Fatalf("a decoded handle does not encode: %v", err)
		}
		c2, err := sink.UnmarshalCommittable(b2)
		if err != nil {
			t.Fatalf("a re-encoded handle does not decode: %v", err)
		}
		b3, err := sink.MarshalCommittable(c2)
		if err != nil || !bytes.Equal(b2, b3) {
			t.Fatalf("handle encoding is not stable: %x vs %x (%v)", b2, b3, err)
		}
	})
}
