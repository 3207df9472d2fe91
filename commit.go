package clink

import (
	"fmt"
	"sync/atomic"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/runtime"
)

// CommitTo ends s in a two-phase-commit sink: output becomes visible only
// when a checkpoint that covers it completes, and exactly once across
// crashes and restores (see package connector). The sink operator runs at
// the parallelism of s and is chained to it. Without checkpointing the sink
// commits when its input ends.
func CommitTo[T, C any](s Stream[T], name string, sink func() connector.CommittingSink[T, C]) {
	up := s.node
	n := up.env.newNode(name, up.parallelism)
	n.inPorts = []portOps{up.port}
	connect(up, n, 0, partForward, nil)
	n.build = func(bc *buildCtx, _ any) ([]any, producer, error) {
		m := &commitMember[T, C]{name: name, cm: connector.NewCommitter(sink())}
		bc.add(m)
		c := bc.counters(name)
		cm := m.cm
		in := &out[T]{
			rec: func(v T, _ int64) error {
				c.in++
				return cm.Write(v)
			},
			wm: func(int64) error { return nil },
		}
		return []any{in}, nil, nil
	}
}

// commitMember runs a connector.Committer as a chain member.
type commitMember[T, C any] struct {
	name string
	cm   *connector.Committer[T, C]
}

func (m *commitMember[T, C]) uid() string { return m.name }

func (m *commitMember[T, C]) open(tc *runtime.TaskContext, rs restoreState) error {
	ctx := connector.OpenContext{
		UID: m.name, Subtask: tc.Subtask, Parallelism: tc.Parallelism, MaxParallelism: tc.MaxParallelism,
		// The runtime hands out the shared area exactly when it checkpoints.
		Checkpointing: tc.Shared != nil,
		Done:          tc.Done,
		Failing:       tc.Failing,
		Logger:        tc.Logger,
	}
	switch {
	case rs.own != nil:
		ctx.Restored = [][]store.NamedState{rs.own.OperatorState}
		ctx.RestoredParallelism = tc.Parallelism
	case rs.rescaled != nil:
		for _, s := range rs.rescaled {
			ctx.Restored = append(ctx.Restored, s.OperatorState)
		}
		ctx.RestoredParallelism = rs.from
	}
	return m.cm.Open(ctx)
}

func (m *commitMember[T, C]) snapshot(id checkpoint.ID) (*store.OperatorSnapshot, error) {
	states, err := m.cm.Snapshot(id)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", m.name, err)
	}
	return &store.OperatorSnapshot{UID: m.name, Watermark: runtime.MinWatermark, OperatorState: states}, nil
}

func (m *commitMember[T, C]) endOfInput() error { return m.cm.EndOfInput() }
func (m *commitMember[T, C]) close() error      { return m.cm.Close() }

func (m *commitMember[T, C]) notifyComplete(id checkpoint.ID) { m.cm.NotifyComplete(id) }
func (m *commitMember[T, C]) notifyAborted(id checkpoint.ID)  { m.cm.NotifyAborted(id) }

// listenerMember is a member that hears of completed and aborted
// checkpoints. It must not block: the checkpoint driver calls it.
type listenerMember interface {
	notifyComplete(id checkpoint.ID)
	notifyAborted(id checkpoint.ID)
}

// chainListeners holds a chain's listener members, published once the
// chain is built; the driver reads it from its own goroutine.
type chainListeners struct {
	members atomic.Pointer[[]listenerMember]
}

// NotifyCheckpointComplete implements runtime.CheckpointListener.
func (l *chainListeners) NotifyCheckpointComplete(id checkpoint.ID) error {
	if ms := l.members.Load(); ms != nil {
		for _, m := range *ms {
			m.notifyComplete(id)
		}
	}
	return nil
}

// NotifyCheckpointAborted implements runtime.CheckpointListener.
func (l *chainListeners) NotifyCheckpointAborted(id checkpoint.ID) {
	if ms := l.members.Load(); ms != nil {
		for _, m := range *ms {
			m.notifyAborted(id)
		}
	}
}
