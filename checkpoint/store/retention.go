package store

import (
	"errors"
	"fmt"
	"os"

	"github.com/clinkstream/clink/checkpoint"
)

// Discard removes chk-<id> of an aborted checkpoint, so that a later restore
// can never assemble a checkpoint from its files. A completed checkpoint is
// refused: only retention removes those. Discarding an id with no directory
// is not an error, and later snapshot writes for id are refused.
func (s *Store) Discard(id checkpoint.ID) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("discarding checkpoint: %w", err)
	}
	s.structMu.Lock()
	defer s.structMu.Unlock()
	if _, err := s.fs.Stat(s.markerPath(completedPrefix, id)); err == nil {
		return fmt.Errorf("discarding checkpoint %d: it is completed", id)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("discarding checkpoint %d: %w", id, pathCause(err))
	}
	s.drop(id)
	if s.staged.id == id {
		s.dropStaged()
	}
	// What id uploaded is deleted by the next retention unless another
	// checkpoint lists it.
	s.shared.release(id, true)
	if err := s.fs.RemoveAll(s.chkDir(id)); err != nil {
		return fmt.Errorf("discarding checkpoint %d: %w", id, pathCause(err))
	}
	if FsyncEnabled() {
		s.syncDirLogged(s.dir)
	}
	return nil
}

func (s *Store) drop(id checkpoint.ID) {
	// A discarded id is never handed out again: its files must not mix
	// with a later checkpoint's.
	s.noteID(id)
	s.dirs.Lock()
	defer s.dirs.Unlock()
	s.dirs.dropped[id] = true
	delete(s.dirs.made, id)
}

// ApplyRetention keeps the newest Options.Retain completed checkpoints and
// removes what lies below the oldest of them (the retention floor): older
// completed checkpoints with their markers, incomplete chk directories, and
// temp files of marker writes that a crash left behind. Nothing at or above
// the floor is touched; an incomplete checkpoint newer than the floor may
// still complete. With no completed checkpoint it removes nothing.
//
// Crash order: all markers of the purged checkpoints go first (CONFIRMED
// before COMPLETED), then the directory is synced, and only then are their
// chk directories removed. A crash at any point therefore leaves either a
// complete checkpoint or a chk directory without a marker, which the next
// retention removes; never a marker that names missing snapshots. For the
// same reason a failed sync after the marker removals stops retention before
// any snapshot is removed.
func (s *Store) ApplyRetention() error {
	return s.applyRetention(0)
}

// ApplyRetentionFloor is ApplyRetention that also keeps every checkpoint
// whose id is floor or above, e.g. the newest confirmed checkpoint, which is
// the restore point of a job whose sinks cannot repeat a commit, while newer
// checkpoints are completed but not yet confirmed. A zero floor keeps
// nothing extra.
func (s *Store) ApplyRetentionFloor(floor checkpoint.ID) error {
	return s.applyRetention(floor)
}

func (s *Store) applyRetention(floor checkpoint.ID) error {
	s.structMu.Lock()
	defer s.structMu.Unlock()
	d, err := s.scan()
	if err != nil {
		return fmt.Errorf("applying retention: %w", err)
	}
	completed := sortedIDs(d.completed)
	if len(completed) == 0 {
		return nil
	}
	keepFrom := completed[max(0, len(completed)-s.retain)]
	if floor > 0 && floor < keepFrom {
		keepFrom = floor
	}
	fsync := FsyncEnabled()

	// A temp file at the top level can only be a marker write that a crash
	// cut short (this Store writes markers under structMu), or the marker
	// Prepare staged, which stays.
	for _, name := range d.temps {
		if s.staged.id != 0 && s.staged.err == nil && s.fs.PathJoin(s.dir, name) == s.staged.tmp {
			continue
		}
		if err := s.fs.Remove(s.fs.PathJoin(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("applying retention: removing %s: %w", name, pathCause(err))
		}
	}

	var purged []checkpoint.ID
	removedMarker := false
	for _, id := range d.all() {
		if id >= keepFrom {
			break
		}
		// CONFIRMED first: it never outlives the COMPLETED it refines.
		for _, m := range []struct {
			prefix string
			has    bool
		}{{confirmedPrefix, d.confirmed[id]}, {completedPrefix, d.completed[id]}} {
			if !m.has {
				continue
			}
			if err := s.fs.Remove(s.markerPath(m.prefix, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("applying retention: removing %s%d: %w", m.prefix, id, pathCause(err))
			}
			removedMarker = true
		}
		if d.completed[id] {
			purged = append(purged, id)
		}
	}
	if removedMarker && fsync {
		if err := syncDir(s.fs, s.dir); err != nil {
			return fmt.Errorf("applying retention: %w", err)
		}
	}

	// Shared files the removed checkpoints list: deleted below once no
	// remaining checkpoint lists them.
	candidates := map[string]bool{}
	var remaining []checkpoint.ID
	for _, id := range sortedIDs(d.chk) {
		if id < keepFrom {
			s.refsOf(id, candidates)
		} else {
			remaining = append(remaining, id)
		}
	}

	var stale []checkpoint.ID
	for _, id := range sortedIDs(d.chk) {
		if id >= keepFrom {
			break
		}
		s.drop(id)
		if err := s.fs.RemoveAll(s.chkDir(id)); err != nil {
			return fmt.Errorf("applying retention: removing %s: %w", s.chkDir(id), pathCause(err))
		}
		if !d.completed[id] {
			stale = append(stale, id)
		}
	}
	if err := s.collectShared(candidates, remaining); err != nil {
		return fmt.Errorf("applying retention: %w", err)
	}
	if len(purged)+len(stale) > 0 {
		if fsync {
			s.syncDirLogged(s.dir)
		}
		s.log.Info("checkpoint retention", "dir", s.dir, "floor", uint64(keepFrom),
			"removed_completed", formatIDs(purged), "removed_incomplete", formatIDs(stale))
	}
	return nil
}
