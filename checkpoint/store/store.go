package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clinkstream/clink/checkpoint"
)

// Names in the checkpoint directory.
const (
	chkPrefix       = "chk-"
	completedPrefix = "COMPLETED-"
	confirmedPrefix = "CONFIRMED-"
	snapSuffix      = ".snap"
	// ReceiptsDirName is the directory beside the checkpoints that holds
	// commit receipts.
	ReceiptsDirName = "receipts"
)

// DefaultRetain is the number of completed checkpoints retention keeps when
// Options.Retain is zero.
const DefaultRetain = 3

// Options configure a Store.
type Options struct {
	// FS is the filesystem the store works on; nil means vfs.Default.
	FS vfs.FS
	// Retain is how many completed checkpoints ApplyRetention keeps; zero
	// means DefaultRetain.
	Retain int
	// Logger receives retention decisions and ignored directory-sync
	// failures; nil discards them.
	Logger *slog.Logger
}

// Validate reports settings that cannot work.
func (o Options) Validate() error {
	if o.Retain < 0 {
		return fmt.Errorf("checkpoint retention must keep at least one completed checkpoint, got %d", o.Retain)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Retain == 0 {
		o.Retain = DefaultRetain
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Store is the checkpoint directory of one job. Its methods are safe for
// concurrent use: subtasks write their snapshots in parallel while the
// coordinator writes markers.
//
// Lock order: structMu before dirs, structMu before shared.
type Store struct {
	dir    string
	fs     vfs.FS
	retain int
	log    *slog.Logger

	// maxID is the largest checkpoint id that a durable name in the
	// directory carried at Open or that this Store has written since. It
	// only grows.
	maxID atomic.Uint64

	// structMu serialises the operations that change which checkpoints
	// exist: marker writes, Discard and retention. Snapshot writes do not
	// take it.
	structMu sync.Mutex
	// staged is the COMPLETED marker that Prepare wrote ahead, under
	// structMu: its temp file tmp holds the marker, synced, unless err
	// says why it does not. id is zero when there is none.
	staged struct {
		id  checkpoint.ID
		tmp string
		err error
	}
	// shared pins the shared files of checkpoints in flight (see Shared).
	shared sharedPins
	// tempSeq numbers the temp files of Shared.Put.
	tempSeq atomic.Uint64
	// sharedDirMade: shared/ exists and its entry was synced.
	sharedDirMade atomic.Bool

	dirs struct {
		sync.Mutex
		// made holds the ids whose chk directory this Store has created or
		// found, so that only the first snapshot of a checkpoint pays for
		// the mkdir and the directory sync.
		made map[checkpoint.ID]bool
		// dropped holds the ids whose chk directory Discard or retention
		// removed; a late snapshot write for one of them is refused rather
		// than recreating the directory.
		dropped map[checkpoint.ID]bool
	}
}

// Open opens the checkpoint directory dir, creating it if needed, and scans
// it once for the ids that durable names carry (see NextID).
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := newStore(dir, opts)
	if _, err := s.fs.Stat(dir); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("opening checkpoint directory %s: %w", dir, pathCause(err))
		}
		if err := s.fs.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating checkpoint directory %s: %w", dir, pathCause(err))
		}
		s.syncDirLogged(s.fs.PathDir(dir))
	}
	if err := s.scanIDs(); err != nil {
		return nil, err
	}
	return s, nil
}

// openExisting opens dir for reading without creating it.
func openExisting(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	s := newStore(dir, opts)
	st, err := s.fs.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("opening checkpoint directory %s: %w", dir, pathCause(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("opening checkpoint directory %s: not a directory", dir)
	}
	if err := s.scanIDs(); err != nil {
		return nil, err
	}
	return s, nil
}

func newStore(dir string, opts Options) *Store {
	s := &Store{dir: dir, fs: opts.FS, retain: opts.Retain, log: opts.Logger}
	s.dirs.made = make(map[checkpoint.ID]bool)
	s.dirs.dropped = make(map[checkpoint.ID]bool)
	s.shared.init()
	return s
}

func (s *Store) scanIDs() error {
	d, err := s.scan()
	if err != nil {
		return err
	}
	for _, id := range d.all() {
		s.noteID(id)
	}
	return nil
}

// Dir returns the checkpoint directory.
func (s *Store) Dir() string { return s.dir }

// NextID returns the id the next checkpoint should take: one more than the
// largest id named by any durable file or directory found at Open (chk-N
// directories, even empty ones of checkpoints that never completed, and
// COMPLETED-N and CONFIRMED-N markers), and than any id this Store has
// written since. It is 1 for an empty directory and never decreases, even
// when retention removes the newest files. NextID does not reserve the id;
// the caller's first write with it does.
func (s *Store) NextID() checkpoint.ID {
	return checkpoint.ID(s.maxID.Load() + 1)
}

// noteID raises maxID to id.
func (s *Store) noteID(id checkpoint.ID) {
	for {
		cur := s.maxID.Load()
		if uint64(id) <= cur || s.maxID.CompareAndSwap(cur, uint64(id)) {
			return
		}
	}
}

// SnapshotName returns the snapshot name of one task: "<uid>-<subtask>".
func SnapshotName(operatorUID string, subtask int) string {
	return operatorUID + "-" + strconv.Itoa(subtask)
}

// CheckName reports whether name can name a snapshot file: it must not be
// empty, start with a dot (temp files do) or contain a path separator.
func CheckName(name string) error { return checkName(name) }

// checkName rejects snapshot names that could escape the chk directory or
// be taken for a temp file.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty snapshot name")
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("snapshot name %q starts with a dot", name)
	case strings.ContainsAny(name, `/\`+"\x00"):
		return fmt.Errorf("snapshot name %q contains a path separator or NUL", name)
	}
	return nil
}

func checkID(id checkpoint.ID) error {
	if id == 0 || uint64(id) == math.MaxUint64 {
		return fmt.Errorf("invalid checkpoint id %d", uint64(id))
	}
	return nil
}

func (s *Store) chkDir(id checkpoint.ID) string {
	return s.fs.PathJoin(s.dir, chkPrefix+strconv.FormatUint(uint64(id), 10))
}

func (s *Store) markerPath(prefix string, id checkpoint.ID) string {
	return s.fs.PathJoin(s.dir, prefix+strconv.FormatUint(uint64(id), 10))
}

// SnapshotPath returns the path of a task's snapshot file.
func (s *Store) SnapshotPath(id checkpoint.ID, name string) string {
	return s.fs.PathJoin(s.chkDir(id), name+snapSuffix)
}

// WriteSnapshot durably writes the snapshot of one task of checkpoint id to
// chk-<id>/<name>.snap and returns the number of bytes written. The first
// snapshot of a checkpoint creates its chk directory and syncs the
// checkpoint directory. The caller acks the checkpoint only after
// WriteSnapshot returns nil.
func (s *Store) WriteSnapshot(id checkpoint.ID, name string, data []byte) (int64, error) {
	return s.WriteSnapshotParts(id, name, [][]byte{data})
}

// WriteSnapshotParts is WriteSnapshot of the concatenation of parts (see
// TaskSnapshot.MarshalParts), which it writes one after the other.
func (s *Store) WriteSnapshotParts(id checkpoint.ID, name string, parts [][]byte) (int64, error) {
	if err := checkID(id); err != nil {
		return 0, fmt.Errorf("writing snapshot %s: %w", name, err)
	}
	if err := checkName(name); err != nil {
		return 0, fmt.Errorf("writing snapshot of checkpoint %d: %w", id, err)
	}
	s.noteID(id)
	if err := s.ensureChkDir(id); err != nil {
		return 0, err
	}
	if err := s.writeDurable(s.SnapshotPath(id, name), parts); err != nil {
		return 0, fmt.Errorf("writing snapshot of checkpoint %d: %w", id, err)
	}
	var n int64
	for _, p := range parts {
		n += int64(len(p))
	}
	return n, nil
}

// WriteTaskSnapshot validates, encodes and writes snap under the name
// snap.Task in checkpoint snap.Checkpoint.
func (s *Store) WriteTaskSnapshot(snap *TaskSnapshot) (int64, error) {
	if err := snap.Validate(); err != nil {
		return 0, fmt.Errorf("writing snapshot %s of checkpoint %d: %w", snap.Task, snap.Checkpoint, err)
	}
	return s.WriteSnapshotParts(snap.Checkpoint, snap.Task, snap.MarshalParts())
}

// ensureChkDir creates chk-<id> if this Store has not yet seen it.
func (s *Store) ensureChkDir(id checkpoint.ID) error {
	s.dirs.Lock()
	defer s.dirs.Unlock()
	if s.dirs.dropped[id] {
		return fmt.Errorf("writing snapshot of checkpoint %d: the checkpoint was discarded", id)
	}
	if s.dirs.made[id] {
		return nil
	}
	dir := s.chkDir(id)
	if _, err := s.fs.Stat(dir); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("creating %s: %w", dir, pathCause(err))
		}
		if err := s.fs.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", dir, pathCause(err))
		}
		if FsyncEnabled() {
			s.syncDirLogged(s.dir)
		}
	}
	s.dirs.made[id] = true
	return nil
}

// writeDurable is WriteFileDurable with the fsync setting read now and an
// ignored directory-sync failure logged.
func (s *Store) writeDurable(path string, parts [][]byte) error {
	dirErr, err := writeFileDurable(s.fs, path, parts, FsyncEnabled())
	if dirErr != nil {
		s.log.Warn("directory sync failed; a crash may lose the new file", "path", path, "err", dirErr)
	}
	return err
}

// syncDirLogged syncs dir on the best-effort terms of WriteFileDurable.
func (s *Store) syncDirLogged(dir string) {
	if err := syncDir(s.fs, dir); err != nil {
		s.log.Warn("directory sync failed; a crash may lose the new entry", "dir", dir, "err", err)
	}
}

// ReadSnapshot returns the bytes of a task's snapshot file.
func (s *Store) ReadSnapshot(id checkpoint.ID, name string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("reading snapshot of checkpoint %d: %w", id, err)
	}
	path := s.SnapshotPath(id, name)
	b, err := s.readFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", path, err)
	}
	return b, nil
}

// ReadTaskSnapshot reads and decodes a task's snapshot file, and checks that
// it belongs where it lies: its checkpoint id and task name must match.
func (s *Store) ReadTaskSnapshot(id checkpoint.ID, name string) (*TaskSnapshot, error) {
	b, err := s.ReadSnapshot(id, name)
	if err != nil {
		return nil, err
	}
	path := s.SnapshotPath(id, name)
	snap, err := UnmarshalTaskSnapshot(b)
	if err != nil {
		return nil, fmt.Errorf("decoding snapshot %s: %w", path, err)
	}
	if snap.Checkpoint != id || snap.Task != name {
		return nil, fmt.Errorf("decoding snapshot %s: it holds task %q of checkpoint %d", path, snap.Task, snap.Checkpoint)
	}
	return snap, nil
}

func (s *Store) readFile(path string) ([]byte, error) {
	f, err := s.fs.Open(path)
	if err != nil {
		return nil, pathCause(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, pathCause(err)
	}
	return b, nil
}

// Prepare readies checkpoint id before it starts, so that its critical
// path does not pay for two syncs: it creates chk-<id> as the first
// snapshot write would (the directory and the sync of the checkpoint
// directory), and it stages the COMPLETED-<id> marker: its temp file is
// written, synced and closed, and WriteCompleted(id) then only renames it
// and syncs the directory. Nothing Prepare writes makes id a restore
// point; the chk directory counts for NextID, as any does. At most one
// marker is staged: preparing another id removes the staged one, and so
// does Discard of its id.
//
// Prepare reports no error: a failure shows where it matters, at the
// first snapshot write of id (the directory) or at WriteCompleted(id),
// which returns the staging's error.
func (s *Store) Prepare(id checkpoint.ID) {
	if checkID(id) != nil {
		return
	}
	s.noteID(id)
	if s.ensureChkDir(id) != nil {
		return
	}
	s.structMu.Lock()
	defer s.structMu.Unlock()
	s.dropStaged()
	path := s.markerPath(completedPrefix, id)
	tmp := tempPath(s.fs, path)
	err := stageDurable(s.fs, path, tmp, createWith(s.fs, tmp, [][]byte{markerContent(id)}), FsyncEnabled())
	if err != nil {
		err = fmt.Errorf("staging %s%d: %w", completedPrefix, id, err)
	}
	s.staged.id, s.staged.tmp, s.staged.err = id, tmp, err
}

// dropStaged removes the staged marker, if any; structMu is held.
func (s *Store) dropStaged() {
	if s.staged.id == 0 {
		return
	}
	if s.staged.err == nil {
		_ = s.fs.Remove(s.staged.tmp)
	}
	s.staged.id, s.staged.tmp, s.staged.err = 0, "", nil
}

// WriteCompleted durably writes the COMPLETED-<id> marker that makes
// checkpoint id a restore point, by publishing the marker Prepare staged
// for id if there is one. The caller writes it only after every task's
// WriteSnapshot for id has returned nil; it is refused when the chk-<id>
// directory does not exist.
func (s *Store) WriteCompleted(id checkpoint.ID) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("writing completed marker: %w", err)
	}
	s.structMu.Lock()
	defer s.structMu.Unlock()
	dir := s.chkDir(id)
	if st, err := s.fs.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("writing %s%d: checkpoint directory %s does not exist", completedPrefix, id, dir)
	}
	s.noteID(id)
	var err error
	if s.staged.id == id {
		staged := s.staged
		s.staged.id, s.staged.tmp, s.staged.err = 0, "", nil
		err = staged.err
		if err == nil {
			err = s.publishMarker(completedPrefix, id, staged.tmp)
		}
	} else {
		err = s.writeMarker(completedPrefix, id)
	}
	if err != nil {
		return err
	}
	// The snapshots of id list the shared files it pinned.
	s.shared.release(id, false)
	return nil
}

// WriteConfirmed durably writes the CONFIRMED-<id> marker, recording that
// every sink whose commit cannot be repeated has committed checkpoint id. It
// is refused unless id is completed.
func (s *Store) WriteConfirmed(id checkpoint.ID) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("writing confirmed marker: %w", err)
	}
	s.structMu.Lock()
	defer s.structMu.Unlock()
	if _, err := s.fs.Stat(s.markerPath(completedPrefix, id)); err != nil {
		return fmt.Errorf("writing %s%d: checkpoint %d is not completed", confirmedPrefix, id, id)
	}
	s.noteID(id)
	return s.writeMarker(confirmedPrefix, id)
}

// markerContent is what a marker file holds. It is for people looking at
// the directory; only the name counts.
func markerContent(id checkpoint.ID) []byte {
	return []byte(strconv.FormatUint(uint64(id), 10) + "\n")
}

func (s *Store) writeMarker(prefix string, id checkpoint.ID) error {
	path := s.markerPath(prefix, id)
	dirErr, err := writeFileDurable(s.fs, path, [][]byte{markerContent(id)}, FsyncEnabled())
	return markerErr(prefix, id, path, dirErr, err)
}

// publishMarker renames the staged temp file tmp of a marker into place and
// syncs the directory.
func (s *Store) publishMarker(prefix string, id checkpoint.ID, tmp string) error {
	path := s.markerPath(prefix, id)
	dirErr, err := publishDurable(s.fs, path, tmp, FsyncEnabled())
	return markerErr(prefix, id, path, dirErr, err)
}

// markerErr is the error of a marker write that ended with dirErr and err.
// A marker is a commit decision: sinks publish once it is written, so a
// directory sync that fails fails the marker too (a crash could otherwise
// lose a marker whose output is published).
func markerErr(prefix string, id checkpoint.ID, path string, dirErr, err error) error {
	if err == nil && dirErr != nil {
		err = fmt.Errorf("syncing the directory of %s: %w", path, dirErr)
	}
	if err != nil {
		return fmt.Errorf("writing %s%d: %w", prefix, id, err)
	}
	return nil
}

// ReceiptsDir returns the directory for commit receipts, creating it on
// first use.
func (s *Store) ReceiptsDir() (string, error) {
	dir := s.fs.PathJoin(s.dir, ReceiptsDirName)
	if _, err := s.fs.Stat(dir); err == nil {
		return dir, nil
	}
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, pathCause(err))
	}
	if FsyncEnabled() {
		s.syncDirLogged(s.dir)
	}
	return dir, nil
}

// dirState is what one listing of the checkpoint directory shows.
type dirState struct {
	chk       map[checkpoint.ID]bool
	completed map[checkpoint.ID]bool
	confirmed map[checkpoint.ID]bool
	temps     []string // temp files at the top level
}

// all returns every id the listing names, ascending.
func (d *dirState) all() []checkpoint.ID {
	seen := make(map[checkpoint.ID]bool)
	for _, m := range []map[checkpoint.ID]bool{d.chk, d.completed, d.confirmed} {
		for id := range m {
			seen[id] = true
		}
	}
	return sortedIDs(seen)
}

func sortedIDs(m map[checkpoint.ID]bool) []checkpoint.ID {
	ids := make([]checkpoint.ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// parseID returns the id that name carries after prefix. Only the canonical
// decimal form counts: "COMPLETED-05" names nothing.
func parseID(name, prefix string) (checkpoint.ID, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != rest || checkID(checkpoint.ID(n)) != nil {
		return 0, false
	}
	return checkpoint.ID(n), true
}

func (s *Store) scan() (*dirState, error) {
	names, err := s.fs.List(s.dir)
	if err != nil {
		return nil, fmt.Errorf("listing checkpoint directory %s: %w", s.dir, pathCause(err))
	}
	d := &dirState{
		chk:       make(map[checkpoint.ID]bool),
		completed: make(map[checkpoint.ID]bool),
		confirmed: make(map[checkpoint.ID]bool),
	}
	for _, name := range names {
		if id, ok := parseID(name, chkPrefix); ok {
			d.chk[id] = true
		} else if id, ok := parseID(name, completedPrefix); ok {
			d.completed[id] = true
		} else if id, ok := parseID(name, confirmedPrefix); ok {
			d.confirmed[id] = true
		} else if isTemp(name) {
			d.temps = append(d.temps, name)
		}
	}
	return d, nil
}

// Completed returns the ids of the checkpoints with a COMPLETED marker,
// ascending.
func (s *Store) Completed() ([]checkpoint.ID, error) {
	d, err := s.scan()
	if err != nil {
		return nil, err
	}
	return sortedIDs(d.completed), nil
}

// Confirmed returns the ids of the checkpoints with a CONFIRMED marker,
// ascending.
func (s *Store) Confirmed() ([]checkpoint.ID, error) {
	d, err := s.scan()
	if err != nil {
		return nil, err
	}
	return sortedIDs(d.confirmed), nil
}

// Resolve turns a --restore argument into a checkpoint id: "latest" is the
// newest completed checkpoint, and a decimal id must name a completed one.
func (s *Store) Resolve(spec string) (checkpoint.ID, error) {
	completed, err := s.Completed()
	if err != nil {
		return 0, err
	}
	if spec == "latest" {
		if len(completed) == 0 {
			return 0, fmt.Errorf("no completed checkpoint in %s", s.dir)
		}
		return completed[len(completed)-1], nil
	}
	n, err := strconv.ParseUint(spec, 10, 64)
	if err != nil || checkID(checkpoint.ID(n)) != nil {
		return 0, fmt.Errorf("invalid checkpoint to restore %q: want \"latest\" or a checkpoint id (1, 2, ...)", spec)
	}
	id := checkpoint.ID(n)
	if !slices.Contains(completed, id) {
		if len(completed) == 0 {
			return 0, fmt.Errorf("checkpoint %d in %s is not completed (there is no completed checkpoint)", id, s.dir)
		}
		return 0, fmt.Errorf("checkpoint %d in %s is not completed (completed: %s)", id, s.dir, formatIDs(completed))
	}
	return id, nil
}

func formatIDs(ids []checkpoint.ID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(parts, ", ")
}

// FileInfo describes one snapshot file of a checkpoint.
type FileInfo struct {
	// Name is the file name, "<operator-uid>-<subtask>.snap".
	Name string
	Size int64
}

// Snapshots lists the snapshot files of checkpoint id, sorted by name.
// Temp files of unfinished writes are left out.
func (s *Store) Snapshots(id checkpoint.ID) ([]FileInfo, error) {
	dir := s.chkDir(id)
	names, err := s.fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, pathCause(err))
	}
	var out []FileInfo
	for _, name := range names {
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, snapSuffix) {
			continue
		}
		st, err := s.fs.Stat(s.fs.PathJoin(dir, name))
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", dir, pathCause(err))
		}
		if st.IsDir() {
			continue
		}
		out = append(out, FileInfo{Name: name, Size: st.Size()})
	}
	slices.SortFunc(out, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// TaskNames returns the task names ("<uid>-<subtask>") of the snapshot
// files of checkpoint id, sorted: what ReadTaskSnapshot reads.
func (s *Store) TaskNames(id checkpoint.ID) ([]string, error) {
	files, err := s.Snapshots(id)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(f.Name, snapSuffix)
	}
	return names, nil
}

// CheckpointInfo describes one checkpoint id found in the directory.
type CheckpointInfo struct {
	ID        checkpoint.ID
	Completed bool
	Confirmed bool
	// HasDir is false when a marker names the id but chk-<id> is missing.
	HasDir bool
	Files  []FileInfo
	// Bytes is the total size of Files.
	Bytes int64
}

// List describes every checkpoint id that a directory or marker names,
// ascending.
func (s *Store) List() ([]CheckpointInfo, error) {
	d, err := s.scan()
	if err != nil {
		return nil, err
	}
	var out []CheckpointInfo
	for _, id := range d.all() {
		ci := CheckpointInfo{ID: id, Completed: d.completed[id], Confirmed: d.confirmed[id]}
		if d.chk[id] {
			st, err := s.fs.Stat(s.chkDir(id))
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", s.chkDir(id), pathCause(err))
			}
			if st.IsDir() {
				ci.HasDir = true
				if ci.Files, err = s.Snapshots(id); err != nil {
					return nil, err
				}
				for _, f := range ci.Files {
					ci.Bytes += f.Size
				}
			}
		}
		out = append(out, ci)
	}
	return out, nil
}
