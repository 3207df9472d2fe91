package store

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/clinkstream/clink/checkpoint"
)

// SharedRefsState is the name of the operator state entry in which a task
// snapshot lists, one per line, the files under shared/ that the operator's
// state needs (incremental checkpoints of file-based state backends).
// Retention deletes a shared file once no remaining checkpoint lists it.
const SharedRefsState = "shared.refs"

const sharedDirName = "shared"

// Shared stores the files that incremental checkpoints share, under
// <dir>/shared/. It is safe for concurrent use, also of Put with one name.
type Shared struct{ s *Store }

// Shared returns the store's shared-file area.
func (s *Store) Shared() *Shared { return &Shared{s: s} }

func (sh *Shared) dir() string { return sh.s.fs.PathJoin(sh.s.dir, sharedDirName) }

func (sh *Shared) path(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("shared file: %w", err)
	}
	return sh.s.fs.PathJoin(sh.dir(), name), nil
}

// Put copies the local file at path into shared/name durably, unless a
// file of that name is already there (names are unique per content).
func (sh *Shared) Put(name, path string) error {
	dst, err := sh.path(name)
	if err != nil {
		return err
	}
	// Two puts of one name would share the temp file.
	sh.s.sharedMu.Lock()
	defer sh.s.sharedMu.Unlock()
	if sh.Has(name) {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s for shared file %s: %w", path, name, err)
	}
	if err := sh.s.fs.MkdirAll(sh.dir(), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", sh.dir(), pathCause(err))
	}
	if err := WriteFileDurable(sh.s.fs, dst, data, FsyncEnabled()); err != nil {
		return fmt.Errorf("storing shared file %s: %w", name, err)
	}
	return nil
}

// Has reports whether shared/name exists.
func (sh *Shared) Has(name string) bool {
	p, err := sh.path(name)
	if err != nil {
		return false
	}
	_, err = sh.s.fs.Stat(p)
	return err == nil
}

// Path returns the path of shared/name, which must exist. Backends read it
// with the operating system (the store's filesystem is the real one then).
func (sh *Shared) Path(name string) (string, error) {
	p, err := sh.path(name)
	if err != nil {
		return "", err
	}
	if _, err := sh.s.fs.Stat(p); err != nil {
		return "", fmt.Errorf("shared file %s: %w", p, pathCause(err))
	}
	return p, nil
}

// ParseSharedRefs splits a SharedRefsState entry into file names.
func ParseSharedRefs(data []byte) []string {
	var out []string
	for _, n := range strings.Split(string(data), "\n") {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// FormatSharedRefs joins file names into a SharedRefsState entry.
func FormatSharedRefs(names []string) []byte {
	names = append([]string(nil), names...)
	sort.Strings(names)
	return []byte(strings.Join(names, "\n"))
}

// refsOf returns the shared files the snapshots of chk-<id> list. Files
// that cannot be read are skipped: a snapshot cut short by a crash was
// never acknowledged, so nothing completed depends on what it listed.
func (s *Store) refsOf(id checkpoint.ID, into map[string]bool) {
	names, err := s.fs.List(s.chkDir(id))
	if err != nil {
		return
	}
	for _, n := range names {
		if !strings.HasSuffix(n, snapSuffix) || isTemp(n) {
			continue
		}
		data, err := s.readFile(s.fs.PathJoin(s.chkDir(id), n))
		if err != nil {
			continue
		}
		snap, err := UnmarshalTaskSnapshot(data)
		if err != nil {
			continue
		}
		for _, op := range snap.Operators {
			for _, st := range op.OperatorState {
				if st.Name == SharedRefsState {
					for _, r := range ParseSharedRefs(st.Data) {
						into[r] = true
					}
				}
			}
		}
	}
}

// collectShared deletes the shared files that the removed checkpoints
// listed and no remaining checkpoint lists. A file only an unfinished
// checkpoint uploaded is left alone: its checkpoint may still list it.
func (s *Store) collectShared(candidates map[string]bool, remaining []checkpoint.ID) error {
	if len(candidates) == 0 {
		return nil
	}
	live := map[string]bool{}
	for _, id := range remaining {
		s.refsOf(id, live)
	}
	sh := s.Shared()
	removed := 0
	for name := range candidates {
		if live[name] {
			continue
		}
		p, err := sh.path(name)
		if err != nil {
			continue
		}
		if err := s.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing shared file %s: %w", p, pathCause(err))
		}
		removed++
	}
	if removed > 0 {
		s.log.Info("removed unreferenced shared files", "dir", sh.dir(), "files", removed)
	}
	return nil
}
