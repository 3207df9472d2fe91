package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clinkstream/clink/checkpoint"
)

// SharedRefsState is the name of the operator state entry in which a task
// snapshot lists, one per line, the files under shared/ that the operator's
// state needs (incremental checkpoints of file-based state backends).
// Retention deletes a shared file once no remaining checkpoint lists it.
const SharedRefsState = "shared.refs"

// FileEntryPrefix begins the names of the operator state entries in which
// a task keeps the small files of a file-based state backend's checkpoint
// (Pebble's MANIFEST and OPTIONS, its file list): "file:" + the file's
// name.
const FileEntryPrefix = "file:"

const sharedDirName = "shared"

// Shared stores the files that incremental checkpoints share, under
// <dir>/shared/. It is safe for concurrent use, also of Put with one name.
//
// A Shared of a checkpoint (Store.SharedFor) pins every file it puts or
// finds with Has until that checkpoint completes (its snapshots list the
// files then) or is discarded, so that retention never deletes a file a
// checkpoint in flight is about to list. The Shared of Store.Shared pins
// nothing: a file put through it and listed by no remaining checkpoint may
// be deleted by any retention.
//
// A Shared counts, per checkpoint, the bytes of the files it wrote for
// that checkpoint, together with the Shareds derived from it by For (one
// task's handle and the handles its operators use per checkpoint); see
// TakeWritten.
type Shared struct {
	s    *Store
	id   checkpoint.ID // 0: not of a checkpoint
	acct *sharedAccount
}

// sharedAccount is the written-bytes count of a Shared and the Shareds
// derived from it.
type sharedAccount struct {
	mu      sync.Mutex
	written map[checkpoint.ID]int64
}

func (a *sharedAccount) add(id checkpoint.ID, n int64) {
	if id == 0 || n == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.written == nil {
		a.written = map[checkpoint.ID]int64{}
	}
	a.written[id] += n
}

// Shared returns the store's shared-file area, for restores and tools. Files
// that a checkpoint will list must be put with SharedFor or with For of the
// returned Shared.
func (s *Store) Shared() *Shared { return &Shared{s: s, acct: &sharedAccount{}} }

// SharedFor returns the shared-file area as used by the snapshots of
// checkpoint id: what it puts or finds is pinned until id completes or is
// discarded, and after Discard(id) its Put fails and its Has reports
// false, so that an aborted checkpoint stops uploading.
func (s *Store) SharedFor(id checkpoint.ID) *Shared {
	return &Shared{s: s, id: id, acct: &sharedAccount{}}
}

// For returns the shared-file area of sh's store as used by checkpoint id
// (see Store.SharedFor). What it writes counts in sh's TakeWritten.
func (sh *Shared) For(id checkpoint.ID) *Shared { return &Shared{s: sh.s, id: id, acct: sh.acct} }

// TakeWritten returns the bytes of the shared files that sh and the
// Shareds derived from it stored for checkpoint id, and forgets them. A
// file counts where it is new in shared/: a Put or Write that finds the
// file there already adds nothing. A file written by WriteUnpinned (a
// background materialization) counts for the first checkpoint whose Has
// or Put pins it. This is the part of a checkpoint's incremental size that
// lies outside its snapshot files.
func (sh *Shared) TakeWritten(id checkpoint.ID) int64 {
	a := sh.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.written[id]
	delete(a.written, id)
	return n
}

// Sizes returns the total size of the named files in shared/, each counted
// once: the part of a checkpoint's full size that its snapshots reference.
// A name that is not there is an error, as the checkpoint listing it could
// not be restored.
func (sh *Shared) Sizes(names []string) (int64, error) {
	seen := make(map[string]bool, len(names))
	var total int64
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		p, err := sh.path(name)
		if err != nil {
			return 0, err
		}
		st, err := sh.s.fs.Stat(p)
		if err != nil {
			return 0, fmt.Errorf("sizing shared file %s: %w", p, pathCause(err))
		}
		total += st.Size()
	}
	return total, nil
}

// written records that sh stored the file at dst, name in shared/.
func (sh *Shared) written(dst string) {
	st, err := sh.s.fs.Stat(dst)
	if err != nil {
		// Only the size report misses it; the file was stored durably.
		sh.s.log.Warn("sizing a stored shared file", "file", dst, "err", err)
		return
	}
	sh.acct.add(sh.id, st.Size())
}

func (sh *Shared) dir() string { return sh.s.fs.PathJoin(sh.s.dir, sharedDirName) }

func (sh *Shared) path(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("shared file: %w", err)
	}
	return sh.s.fs.PathJoin(sh.dir(), name), nil
}

// pin records that sh's checkpoint will list name; it fails once the
// checkpoint was discarded. With put, it also counts a Put under way.
func (sh *Shared) pin(name string, put bool) error {
	m := &sh.s.shared
	m.Lock()
	defer m.Unlock()
	if m.discarded[sh.id] {
		return fmt.Errorf("checkpoint %d was discarded", sh.id)
	}
	pins := m.pins[sh.id]
	if pins == nil {
		pins = map[string]bool{}
		m.pins[sh.id] = pins
	}
	if !pins[name] {
		pins[name] = true
		m.held[name]++
	}
	if n, ok := m.unclaimed[name]; ok {
		delete(m.unclaimed, name)
		sh.acct.add(sh.id, n)
	}
	if put {
		m.held[name]++
	}
	return nil
}

// putDone ends the count of a Put of name. If its checkpoint was
// discarded meanwhile, the file is an orphan: the discard could not see
// it.
func (sh *Shared) putDone(name string) {
	m := &sh.s.shared
	m.Lock()
	defer m.Unlock()
	m.unhold(name)
	if m.discarded[sh.id] {
		m.orphans[name] = true
	}
}

// Put stores the local file at path as shared/name durably, unless a file
// of that name is already there (names are unique per content). It streams
// the file, or hard-links it when the store is on the local filesystem and
// path is on the same one (Pebble never changes a written data file);
// either way the stored file is synced, renamed into place and its
// directory synced as WriteFileDurable does.
func (sh *Shared) Put(name, path string) error {
	dst, err := sh.path(name)
	if err != nil {
		return err
	}
	if sh.id != 0 {
		if err := sh.pin(name, true); err != nil {
			return fmt.Errorf("storing shared file %s: %w", name, err)
		}
		defer sh.putDone(name)
	}
	if sh.exists(dst) {
		return nil
	}
	if err := sh.ensureDir(); err != nil {
		return err
	}
	// Concurrent puts of one name write temp files of their own and rename
	// the same content into place.
	tmp := fmt.Sprintf("%s%s.%d%s", tempPrefix, name, sh.s.tempSeq.Add(1), tempSuffix)
	dirErr, err := copyFileDurable(sh.s.fs, dst, tmp, path, FsyncEnabled())
	if err != nil {
		return fmt.Errorf("storing shared file %s: %w", name, err)
	}
	if dirErr != nil {
		sh.s.log.Warn("syncing directory after storing a shared file", "file", dst, "err", dirErr)
	}
	sh.written(dst)
	return nil
}

// ensureDir creates shared/ and syncs its entry, once per Store: a file
// synced into a directory whose own entry is not would be lost in a crash.
func (sh *Shared) ensureDir() error {
	if sh.s.sharedDirMade.Load() {
		return nil
	}
	d := sh.dir()
	if _, err := sh.s.fs.Stat(d); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("creating %s: %w", d, pathCause(err))
		}
		if err := sh.s.fs.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, pathCause(err))
		}
		if FsyncEnabled() {
			sh.s.syncDirLogged(sh.s.dir)
		}
	}
	sh.s.sharedDirMade.Store(true)
	return nil
}

func (sh *Shared) exists(p string) bool {
	_, err := sh.s.fs.Stat(p)
	return err == nil
}

// Has reports whether shared/name exists. The Shared of a checkpoint pins
// name first (see Shared), and reports false once its checkpoint was
// discarded.
func (sh *Shared) Has(name string) bool {
	p, err := sh.path(name)
	if err != nil {
		return false
	}
	if sh.id != 0 {
		if sh.pin(name, false) != nil {
			return false
		}
	}
	return sh.exists(p)
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

// sharedPins is what a Store knows about the shared files in use by
// checkpoints that have not completed. Lock order: structMu before it.
type sharedPins struct {
	sync.Mutex
	// pins holds, per checkpoint, the files its Shared put or found.
	pins map[checkpoint.ID]map[string]bool
	// held counts per file its pins and the Puts under way; a held file is
	// never deleted.
	held map[string]int
	// discarded are the checkpoints Discard removed: their Shared pins
	// nothing more.
	discarded map[checkpoint.ID]bool
	// orphans may be referenced by no checkpoint: the files a discarded
	// checkpoint pinned, and at the first retention of the Store every file
	// in shared/ (left by earlier runs). Retention deletes those that no
	// remaining checkpoint lists and nothing holds.
	orphans map[string]bool
	// listed: shared/ was listed for leftovers of earlier runs.
	listed bool
	// unclaimed holds the sizes of the files WriteUnpinned stored that no
	// checkpoint has pinned yet; the first to pin one counts its bytes as
	// newly written (see Shared.TakeWritten).
	unclaimed map[string]int64
}

func (m *sharedPins) init() {
	m.pins = map[checkpoint.ID]map[string]bool{}
	m.held = map[string]int{}
	m.discarded = map[checkpoint.ID]bool{}
	m.orphans = map[string]bool{}
	m.unclaimed = map[string]int64{}
}

func (m *sharedPins) unhold(name string) {
	if m.held[name]--; m.held[name] <= 0 {
		delete(m.held, name)
	}
}

// release drops the pins of checkpoint id: its snapshots list the files
// (completed), or they may be orphans (discarded).
func (m *sharedPins) release(id checkpoint.ID, discarded bool) {
	m.Lock()
	defer m.Unlock()
	if discarded {
		m.discarded[id] = true
	}
	for name := range m.pins[id] {
		m.unhold(name)
		if discarded {
			m.orphans[name] = true
		}
	}
	delete(m.pins, id)
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

// refsOf adds the shared files the snapshots of chk-<id> list to into. It
// reports false if a snapshot could not be read or decoded: a file only it
// lists would look unreferenced. (A snapshot is renamed into place whole,
// so a crash never leaves one cut short.)
func (s *Store) refsOf(id checkpoint.ID, into map[string]bool) bool {
	names, err := s.fs.List(s.chkDir(id))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	ok := true
	for _, n := range names {
		if !strings.HasSuffix(n, snapSuffix) || isTemp(n) {
			continue
		}
		data, err := s.readFile(s.fs.PathJoin(s.chkDir(id), n))
		if err != nil {
			ok = false
			continue
		}
		snap, err := UnmarshalTaskSnapshot(data)
		if err != nil {
			ok = false
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
	return ok
}

// tempTarget returns the name of the shared file a temp file of Put was
// to become: ".<name>.<seq>.part" (or ".<name>.part").
func tempTarget(temp string) string {
	n := strings.TrimSuffix(strings.TrimPrefix(temp, tempPrefix), tempSuffix)
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		if _, err := strconv.ParseUint(n[i+1:], 10, 64); err == nil {
			return n[:i]
		}
	}
	return n
}

// collectShared deletes the shared files that are provably unreferenced:
// no remaining checkpoint lists them (remaining: every chk directory
// retention keeps, complete or not) and no checkpoint in flight pinned
// them (see Shared). It considers the files the removed checkpoints listed
// (candidates), the files of discarded checkpoints, and once per Store
// everything in shared/, which covers uploads of checkpoints a crash cut
// short and temp files of Puts a crash interrupted. If a remaining
// snapshot cannot be read, only candidates are deleted, as before the
// orphans were tracked: a file of a remaining checkpoint is then never
// deleted on a guess.
//
// The caller holds structMu: no checkpoint completes or is discarded
// meanwhile. Puts may run: a Put pins its name before it creates any file,
// and the files are deleted under the pin lock, so a file is either held
// when it is examined or created after its deletion.
func (s *Store) collectShared(candidates map[string]bool, remaining []checkpoint.ID) error {
	sh := s.Shared()
	m := &s.shared
	var temps []string
	m.Lock()
	if !m.listed {
		names, err := s.fs.List(sh.dir())
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			m.Unlock()
			return fmt.Errorf("listing %s: %w", sh.dir(), pathCause(err))
		}
		m.listed = true
		for _, n := range names {
			if isTemp(n) {
				temps = append(temps, n)
			} else if checkName(n) == nil {
				m.orphans[n] = true
			}
		}
	}
	orphans := 0
	for n := range m.orphans {
		if m.held[n] > 0 {
			// Its checkpoint will list it, or release it again.
			delete(m.orphans, n)
		} else if !candidates[n] {
			orphans++
		}
	}
	m.Unlock()
	if len(candidates)+orphans+len(temps) == 0 {
		return nil
	}
	live := map[string]bool{}
	readAll := true
	for _, id := range remaining {
		if !s.refsOf(id, live) {
			readAll = false
		}
	}

	m.Lock()
	defer m.Unlock()
	removed := 0
	remove := func(name string) error {
		if err := s.fs.Remove(s.fs.PathJoin(sh.dir(), name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing shared file %s: %w", s.fs.PathJoin(sh.dir(), name), pathCause(err))
		}
		delete(m.unclaimed, name)
		removed++
		return nil
	}
	for name := range m.orphans {
		if !readAll && !candidates[name] {
			continue // tried again at the next retention
		}
		candidates[name] = true
	}
	for name := range candidates {
		delete(m.orphans, name)
		if live[name] || m.held[name] > 0 || checkName(name) != nil {
			continue
		}
		if err := remove(name); err != nil {
			return err
		}
	}
	for _, t := range temps {
		if m.held[tempTarget(t)] > 0 {
			continue // a Put of this Store is writing it
		}
		if err := remove(t); err != nil {
			return err
		}
	}
	if removed > 0 {
		s.log.Info("removed unreferenced shared files", "dir", sh.dir(), "files", removed)
	}
	return nil
}

// Write stores what write writes as shared/name durably, as Put does for a
// local file, unless a file of that name is already there; it pins name
// for sh's checkpoint. Backends that keep their state in memory write
// their files with it, so that nothing is written twice.
func (sh *Shared) Write(name string, write func(w io.Writer) error) error {
	if sh.id != 0 {
		if err := sh.pin(name, true); err != nil {
			return fmt.Errorf("storing shared file %s: %w", name, err)
		}
		defer sh.putDone(name)
	}
	dst, written, err := sh.write(name, write)
	if written {
		sh.written(dst)
	}
	return err
}

// WriteUnpinned is Write for a file that no checkpoint in flight lists
// yet (a state backend's background materialization): the file is held
// while it is written, and pinned by the first checkpoint that calls Has
// for it. Until then a retention may delete it as unreferenced, and Has
// reports false; the backend then writes it again.
func (sh *Shared) WriteUnpinned(name string, write func(w io.Writer) error) error {
	m := &sh.s.shared
	m.Lock()
	m.held[name]++
	m.Unlock()
	dst, written, err := sh.write(name, write)
	var size int64 = -1
	if written {
		if st, serr := sh.s.fs.Stat(dst); serr == nil {
			size = st.Size()
		}
	}
	m.Lock()
	defer m.Unlock()
	if size >= 0 {
		m.unclaimed[name] = size
	}
	m.unhold(name)
	return err
}

// write stores name as Write does; written reports that it created the
// file at dst rather than finding it there.
func (sh *Shared) write(name string, write func(w io.Writer) error) (dst string, written bool, err error) {
	dst, err = sh.path(name)
	if err != nil {
		return "", false, err
	}
	if sh.exists(dst) {
		return dst, false, nil
	}
	if err := sh.ensureDir(); err != nil {
		return dst, false, err
	}
	tmp := sh.s.fs.PathJoin(sh.dir(), fmt.Sprintf("%s%s.%d%s", tempPrefix, name, sh.s.tempSeq.Add(1), tempSuffix))
	create := func() (vfs.File, error) {
		f, err := sh.s.fs.Create(tmp, vfs.WriteCategoryUnspecified)
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", tmp, pathCause(err))
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		if err := write(bw); err != nil {
			return f, fmt.Errorf("writing %s: %w", tmp, err)
		}
		if err := bw.Flush(); err != nil {
			return f, fmt.Errorf("writing %s: %w", tmp, pathCause(err))
		}
		return f, nil
	}
	dirErr, err := writeDurable(sh.s.fs, dst, tmp, create, FsyncEnabled())
	if err != nil {
		return dst, false, fmt.Errorf("storing shared file %s: %w", name, err)
	}
	if dirErr != nil {
		sh.s.log.Warn("syncing directory after storing a shared file", "file", dst, "err", dirErr)
	}
	return dst, true, nil
}
