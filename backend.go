package clink

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/runtime"
	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
)

// stateBackends makes the state backend of one keyed operator subtask, by
// the name Options.StateBackend gives.
var stateBackends = map[string]func(dir string) (state.Backend, error){
	"memory": func(string) (state.Backend, error) { return state.NewMemoryBackend(), nil },
	"pebble": func(dir string) (state.Backend, error) {
		opts := pebble.Options{Dir: dir}
		if err := opts.Validate(); err != nil {
			return nil, err
		}
		return pebble.New(opts), nil
	},
}

// fileEntryPrefix marks the operator state entries that hold a file-based
// backend's inline files.
const fileEntryPrefix = "file:"

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
	b, err := mk(dir)
	if err != nil {
		return nil, err
	}
	if err := b.Open(state.RangeForSubtask(tc.Subtask, tc.MaxParallelism, tc.Parallelism), tc.MaxParallelism); err != nil {
		return nil, err
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

// backendSnapshot freezes a keyed operator's backend and returns the step
// that persists it on the snapshot worker: key-group data for the memory
// backend; shared files, inline files and their list for file-based ones.
func backendSnapshot(uid string, b state.Backend, shared *store.Shared, wm int64) (func() (*store.OperatorSnapshot, error), error) {
	c, err := b.Capture()
	if err != nil {
		return nil, err
	}
	return func() (*store.OperatorSnapshot, error) {
		s := &store.OperatorSnapshot{UID: uid, Watermark: wm}
		var groups []state.KeyGroupData
		if fc, ok := c.(state.FileCaptured); ok {
			if shared == nil {
				return nil, fmt.Errorf("the %s state backend needs a checkpoint directory for its files", b.Name())
			}
			fs, err := fc.PersistFiles(shared)
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
