package clink

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/runtime"
	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
)

// stateBackends makes the state backend of one keyed operator subtask, by
// the name Options.StateBackend gives.
var stateBackends = map[string]func(opts *Options, dir string) (state.Backend, error){
	"memory": func(opts *Options, _ string) (state.Backend, error) {
		// Without a checkpoint directory no checkpoint is ever taken, and
		// the change lists of incremental checkpoints would only grow.
		return state.NewMemoryBackendWith(state.MemoryOptions{
			Incremental:      opts.CheckpointDir != "" && (opts.StateIncremental == nil || *opts.StateIncremental),
			MaterializeBytes: opts.StateMaterializeBytes,
		})
	},
	"pebble": func(_ *Options, dir string) (state.Backend, error) {
		opts := pebble.Options{Dir: dir}
		if err := opts.Validate(); err != nil {
			return nil, err
		}
		return pebble.New(opts), nil
	},
}

// fileEntryPrefix marks the operator state entries that hold a file-based
// backend's inline files.
const fileEntryPrefix = store.FileEntryPrefix

// openBackend creates, opens and restores the state backend of a keyed
// operator in one subtask.
func openBackend(opts *Options, tc *runtime.TaskContext, uid string, rs restoreState) (state.Backend, error) {
	mk, ok := stateBackends[opts.StateBackend]
	if !ok {
		return nil, fmt.Errorf("unknown state backend %q", opts.StateBackend)
	}
	dir := ""
	if opts.StateDir != "" {
		dir = fmt.Sprintf("%s/%s-%d", opts.StateDir, uid, tc.Subtask)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating state directory: %w", err)
		}
	}
	b, err := mk(opts, dir)
	if err != nil {
		return nil, err
	}
	if err := b.Open(state.RangeForSubtask(tc.Subtask, tc.MaxParallelism, tc.Parallelism), tc.MaxParallelism); err != nil {
		return nil, err
	}
	if u, ok := b.(state.SharedUser); ok && tc.Shared != nil {
		u.UseShared(tc.Shared)
	}
	if fr, ok := b.(state.FileRestorer); ok {
		if snaps := rs.fileStates(); len(snaps) > 0 {
			if tc.Shared == nil {
				return nil, fmt.Errorf("restoring %s: the %s state backend needs the checkpoint's shared files", uid, b.Name())
			}
			if err := fr.RestoreFiles(snaps, tc.Shared); err != nil {
				return nil, fmt.Errorf("restoring %s: %w", uid, err)
			}
		}
		return b, nil
	}
	if err := b.Restore(rs.keyGroups()); err != nil {
		return nil, fmt.Errorf("restoring %s: %w", uid, err)
	}
	return b, nil
}

// fileStates returns what a file-based backend persisted, per old subtask.
func (rs restoreState) fileStates() []*state.FileState {
	var snaps []*store.OperatorSnapshot
	if rs.own != nil {
		snaps = []*store.OperatorSnapshot{rs.own}
	}
	snaps = append(snaps, rs.rescaled...)
	var out []*state.FileState
	for _, s := range snaps {
		fs := &state.FileState{}
		for _, g := range s.KeyGroups {
			fs.KeyGroups = append(fs.KeyGroups, state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data})
		}
		for _, n := range s.OperatorState {
			switch {
			case n.Name == store.SharedRefsState:
				fs.Shared = store.ParseSharedRefs(n.Data)
			case strings.HasPrefix(n.Name, fileEntryPrefix):
				fs.Named = append(fs.Named, state.NamedData{Name: strings.TrimPrefix(n.Name, fileEntryPrefix), Data: n.Data})
			}
		}
		if len(fs.KeyGroups)+len(fs.Named)+len(fs.Shared) > 0 {
			out = append(out, fs)
		}
	}
	return out
}

// backendCaptures is embedded in the chain members that hold a state
// backend. It remembers the captures the snapshot worker has not begun to
// persist, so that the capture of a checkpoint that is aborted (or
// subsumed by a newer one that completed) is discarded at once: a Pebble
// capture's hard links would otherwise keep compacted files on disk, and
// persisting it would upload files for nothing. It implements
// listenerMember; the driver calls it concurrently with the task and the
// snapshot worker.
type backendCaptures struct {
	mu      sync.Mutex
	pending map[checkpoint.ID]state.Captured
}

func (bc *backendCaptures) add(id checkpoint.ID, c state.Captured) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.pending == nil {
		bc.pending = map[checkpoint.ID]state.Captured{}
	}
	bc.pending[id] = c
}

// take removes the capture of id before it is persisted; false if it was
// discarded.
func (bc *backendCaptures) take(id checkpoint.ID) bool {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if _, ok := bc.pending[id]; !ok {
		return false
	}
	delete(bc.pending, id)
	return true
}

// discard drops the pending captures of the ids keep refuses.
func (bc *backendCaptures) discard(drop func(checkpoint.ID) bool) {
	bc.mu.Lock()
	var cs []state.Captured
	for id, c := range bc.pending {
		if drop(id) {
			cs = append(cs, c)
			delete(bc.pending, id)
		}
	}
	bc.mu.Unlock()
	for _, c := range cs {
		if d, ok := c.(interface{ Discard() error }); ok {
			// A capture that cannot be removed now goes with the
			// backend's working directory at Close; nothing depends on it.
			_ = d.Discard()
		}
	}
}

// notifyComplete implements listenerMember: a capture still pending for an
// older checkpoint belongs to one that is subsumed.
func (bc *backendCaptures) notifyComplete(id checkpoint.ID) {
	bc.discard(func(p checkpoint.ID) bool { return p < id })
}

// notifyAborted implements listenerMember.
func (bc *backendCaptures) notifyAborted(id checkpoint.ID) {
	bc.discard(func(p checkpoint.ID) bool { return p == id })
}

// backendSnapshot freezes a keyed operator's backend for checkpoint id and
// returns the step that persists it on the snapshot worker: key-group data
// for the memory backend; shared files, inline files and their list for
// file-based ones. The capture waits in captures until the step runs.
func backendSnapshot(uid string, id checkpoint.ID, b state.Backend, shared *store.Shared, wm int64, captures *backendCaptures) (func() (*store.OperatorSnapshot, error), error) {
	c, err := b.Capture()
	if err != nil {
		return nil, err
	}
	captures.add(id, c)
	return func() (*store.OperatorSnapshot, error) {
		if !captures.take(id) {
			return nil, fmt.Errorf("checkpoint %d was aborted: its capture of %s was discarded", id, uid)
		}
		s := &store.OperatorSnapshot{UID: uid, Watermark: wm}
		var groups []state.KeyGroupData
		fc, files := c.(state.FileCaptured)
		if files && shared == nil && b.Name() == "memory" {
			// Without a checkpoint directory there is nowhere to share
			// files: the memory backend's capture writes its state whole.
			files = false
		}
		if files {
			if shared == nil {
				if d, ok := c.(interface{ Discard() error }); ok {
					_ = d.Discard()
				}
				return nil, fmt.Errorf("the %s state backend needs a checkpoint directory for its files", b.Name())
			}
			// Files are pinned for id until it completes or is discarded.
			fs, err := fc.PersistFiles(shared.For(id))
			if err != nil {
				return nil, err
			}
			groups = fs.KeyGroups
			named := append([]state.NamedData(nil), fs.Named...)
			sort.Slice(named, func(i, j int) bool { return named[i].Name < named[j].Name })
			for _, n := range named {
				s.OperatorState = append(s.OperatorState, store.NamedState{Name: fileEntryPrefix + n.Name, Data: n.Data})
			}
			s.OperatorState = append(s.OperatorState, store.NamedState{Name: store.SharedRefsState, Data: store.FormatSharedRefs(fs.Shared)})
		} else {
			groups, err = c.Persist()
			if err != nil {
				return nil, err
			}
		}
		s.KeyGroups = make([]store.KeyGroupState, len(groups))
		for i, g := range groups {
			s.KeyGroups[i] = store.KeyGroupState{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data}
		}
		return s, nil
	}, nil
}

// backendHolder is a chain member that holds a state backend once open.
type backendHolder interface {
	stateBackend() state.Backend
}

func (m *keyedMember[K, V]) stateBackend() state.Backend   { return m.backend }
func (m *joinMember[K, A, B]) stateBackend() state.Backend { return m.backend }

// preemptive is state.Preemptive, as the chain asks for it.
type preemptive interface{ PersistPreemptively() error }

// backgroundRestorer is a state backend that may still be restoring after
// the operator opened (state.MemoryBackend.Restored).
type backgroundRestorer interface{ Restored() <-chan struct{} }
