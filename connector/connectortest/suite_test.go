package connectortest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/connector"
)

// system is an external store with staged and published areas.
type system struct {
	mu        sync.Mutex
	staged    map[string][]string
	published []string
}

type handle struct {
	Name string
	N    int64
}

// memSink is a reference committing sink: it stages an interval under
// StageName and publishes it at commit.
type memSink struct {
	connector.StateCodec[handle]
	sys *system
	ctx connector.InitContext[handle]
	buf []string
}

func (s *memSink) Open(ctx connector.InitContext[handle]) error { s.ctx = ctx; return nil }
func (s *memSink) Write(v int) error {
	s.buf = append(s.buf, fmt.Sprint(v))
	return nil
}
func (s *memSink) PrepareCommit(ckpt checkpoint.ID) (handle, bool, error) {
	if len(s.buf) == 0 {
		return handle{}, false, nil
	}
	name := s.ctx.StageName(ckpt)
	s.sys.mu.Lock()
	s.sys.staged[name] = s.buf
	s.sys.mu.Unlock()
	h := handle{Name: name, N: int64(len(s.buf))}
	s.buf = nil
	return h, true, nil
}
func (s *memSink) Commit(h handle) error {
	s.sys.mu.Lock()
	defer s.sys.mu.Unlock()
	recs, ok := s.sys.staged[h.Name]
	if !ok {
		return nil // published before
	}
	if int64(len(recs)) != h.N {
		return errors.New("staged interval has the wrong length")
	}
	s.sys.published = append(s.sys.published, recs...)
	delete(s.sys.staged, h.Name)
	return nil
}
func (s *memSink) Abort(h handle) error {
	s.sys.mu.Lock()
	delete(s.sys.staged, h.Name)
	s.sys.mu.Unlock()
	return nil
}
func (s *memSink) Close() error { s.buf = nil; return nil }

func memTarget() Target[int, handle] {
	sys := &system{staged: map[string][]string{}}
	return Target[int, handle]{
		New:    func() connector.CommittingSink[int, handle] { return &memSink{sys: sys} },
		Record: func(i int) int { return i },
		Key:    func(i int) string { return fmt.Sprint(i) },
		Visible: func(testing.TB) []string {
			sys.mu.Lock()
			defer sys.mu.Unlock()
			return append([]string(nil), sys.published...)
		},
		Reset: func(testing.TB) {
			sys.mu.Lock()
			sys.staged, sys.published = map[string][]string{}, nil
			sys.mu.Unlock()
		},
	}
}

func TestReferenceSink(t *testing.T) { Run(t, memTarget()) }

func FuzzReferenceCodec(f *testing.F) {
	FuzzCodec(f, memTarget(), handle{Name: "sub0-abcd-3", N: 12})
}
