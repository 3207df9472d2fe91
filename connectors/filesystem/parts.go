package filesystem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/connector"
)

// Suffixes of the hidden names a part file has before it is committed.
const (
	inProgressSuffix = ".inprogress"
	stagedSuffix     = ".staged"
)

// PartFile is one staged file of a Committable, by base name.
type PartFile struct {
	// Staged is the hidden name the file has until the commit.
	Staged string
	// Final is the name the commit gives it.
	Final string
}

// Committable is the handle of what one sink subtask staged for one
// checkpoint: files in Dir to be published from their staged to their final
// names.
type Committable struct {
	// Dir is the absolute path of the directory the files are in.
	Dir   string
	Files []PartFile
}

// committableVersion is the first byte of an encoded Committable.
const committableVersion = 1

// Publisher implements the verbs of connector.CommittingSink that depend
// only on a Committable: Commit, Abort and the handle codec. Embed it in a
// sink that stages files with PartFiles. It holds no state, so Commit and
// Abort are safe to run concurrently with the sink's writes.
type Publisher struct{}

// Commit publishes every staged file of c under its final name, never
// replacing a file that already has that name: it links the final name to
// the staged file (a link fails when the name exists), fsyncs the
// directory, and only then removes the staged names. Every step is safe to
// be killed after, and Commit is idempotent:
//
//   - the staged name gone and the final name present: committed before;
//   - both names present and the same file: killed between the link and the
//     removal; only the removal is left to do;
//   - both present and different files: the final name is another file,
//     which Commit refuses to replace (an error naming both);
//   - neither present: an error, since the file's records would be lost.
//
// On a filesystem without hard links Commit falls back to a rename after
// checking that the final name is free, which cannot exclude a file
// created between the check and the rename.
func (Publisher) Commit(c Committable) error {
	var remove []string
	for _, f := range c.Files {
		staged, final := filepath.Join(c.Dir, f.Staged), filepath.Join(c.Dir, f.Final)
		linked, err := publish(staged, final)
		if err != nil {
			return err
		}
		if linked {
			remove = append(remove, staged)
		}
	}
	if len(c.Files) > 0 && store.FsyncEnabled() {
		if err := syncDir(c.Dir); err != nil {
			return err
		}
	}
	// The final names are durable; the staged names are now spare links.
	// One that a crash leaves is removed by the next commit of the handle
	// or by the orphan sweep at open.
	for _, staged := range remove {
		if err := os.Remove(staged); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("committing %s: it is published, but removing the staged name failed: %w", staged, pathCause(err))
		}
	}
	return nil
}

// publish gives the staged file its final name without replacing another
// file. linked is true when the staged name is still a link to the
// published file and must be removed once the directory is synced.
func publish(staged, final string) (linked bool, err error) {
	name := filepath.Base(final)
	err = os.Link(staged, final)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		si, serr := os.Lstat(staged)
		if errors.Is(serr, fs.ErrNotExist) {
			// Staged gone since the link: committed concurrently.
			return false, nil
		}
		if serr != nil {
			return false, fmt.Errorf("committing %s: %w", staged, pathCause(serr))
		}
		fi, ferr := os.Lstat(final)
		if ferr != nil {
			return false, fmt.Errorf("committing %s: checking %s: %w", staged, name, pathCause(ferr))
		}
		if !os.SameFile(si, fi) {
			return false, fmt.Errorf("committing %s: %s exists and is not this commit's file; refusing to replace it", staged, name)
		}
		return true, nil // linked before a crash; the removal is left
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Lstat(final); serr == nil {
			return false, nil // committed before a crash
		} else if !errors.Is(serr, fs.ErrNotExist) {
			return false, fmt.Errorf("committing %s: checking whether %s exists: %w", staged, final, pathCause(serr))
		}
		return false, fmt.Errorf("committing %s: neither the staged file nor the committed file %s exists; the records it held are lost", staged, final)
	case linkUnsupported(err):
		if _, ferr := os.Lstat(final); ferr == nil {
			return false, fmt.Errorf("committing %s: %s exists and is not this commit's file; refusing to replace it", staged, name)
		} else if !errors.Is(ferr, fs.ErrNotExist) {
			return false, fmt.Errorf("committing %s: checking whether %s exists: %w", staged, final, pathCause(ferr))
		}
		if err := os.Rename(staged, final); err != nil {
			return false, fmt.Errorf("committing %s: renaming it to %s: %w", staged, name, pathCause(err))
		}
		return false, nil
	default:
		return false, fmt.Errorf("committing %s: linking it as %s: %w", staged, name, pathCause(err))
	}
}

// linkUnsupported reports whether a link failed because the filesystem has
// no hard links.
func linkUnsupported(err error) bool {
	return errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EPERM) ||
		errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP)
}

// Abort removes every staged file of c. It is idempotent: a file that is
// already gone is not an error.
func (Publisher) Abort(c Committable) error {
	var errs []error
	for _, f := range c.Files {
		p := filepath.Join(c.Dir, f.Staged)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("aborting: removing %s: %w", p, pathCause(err)))
		}
	}
	return errors.Join(errs...)
}

// MarshalCommittable encodes c: a version byte, then length-prefixed
// strings (the directory, the file count, each file's staged and final
// names). The encoding holds only c, never the sink's configuration.
func (Publisher) MarshalCommittable(c Committable) ([]byte, error) {
	b := []byte{committableVersion}
	b = appendString(b, c.Dir)
	b = binary.AppendUvarint(b, uint64(len(c.Files)))
	for _, f := range c.Files {
		b = appendString(b, f.Staged)
		b = appendString(b, f.Final)
	}
	return b, nil
}

// UnmarshalCommittable decodes a handle encoded by MarshalCommittable and
// checks that it can only name files inside its directory.
func (Publisher) UnmarshalCommittable(b []byte) (Committable, error) {
	var c Committable
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != committableVersion {
		return c, fmt.Errorf("decoding a file committable: version %d, want %d", v, committableVersion)
	}
	c.Dir = d.string()
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%d files but only %d bytes left", n, len(d.b))
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		f := PartFile{Staged: d.string(), Final: d.string()}
		c.Files = append(c.Files, f)
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes left after the committable", len(d.b))
	}
	if d.err != nil {
		return Committable{}, fmt.Errorf("decoding a file committable: %w", d.err)
	}
	if !filepath.IsAbs(c.Dir) {
		return Committable{}, fmt.Errorf("decoding a file committable: directory %q is not an absolute path", c.Dir)
	}
	for _, f := range c.Files {
		for _, name := range []string{f.Staged, f.Final} {
			if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
				return Committable{}, fmt.Errorf("decoding a file committable: %q is not a file name", name)
			}
		}
	}
	return c, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads the fields of an encoded handle or offset; the first error
// sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errors.New("unexpected end")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("bad or truncated varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("string of %d bytes but only %d left", n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// PartFiles creates, finishes and stages one sink subtask's part files in a
// directory. It is used by the task goroutine only. The caller:
//
//  1. calls Open once, when the subtask opens;
//  2. calls Create for a new in-progress file and writes to it;
//  3. calls Finish to fsync and close it (at a roll, or before staging);
//  4. at a barrier calls Stage, which renames the finished files to their
//     staged names and returns the checkpoint's Committable;
//  5. calls Discard when the subtask closes, which removes what was
//     written but never staged.
type PartFiles struct {
	dir, prefix, ext string
	// run is "sub<N>-<token>", set by Open.
	run string
	seq int
	// cur is the open in-progress file, curPath its path.
	cur     *os.File
	curPath string
	// finished are the in-progress paths finished since the last Stage.
	finished []string
}

// NewPartFiles returns the part files of a sink writing to dir, with names
// that start with prefix and end with ext (".csv"). dir is made absolute;
// prefix must be a plain name that does not start with "." or "_", or the
// committed files would be hidden.
func NewPartFiles(dir, prefix, ext string) (*PartFiles, error) {
	if dir == "" {
		return nil, errors.New("the sink path is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("making sink path %s absolute: %w", dir, err)
	}
	if prefix == "" || strings.HasPrefix(prefix, ".") || strings.HasPrefix(prefix, "_") || strings.ContainsAny(prefix, `/\`) {
		return nil, fmt.Errorf("sink path %s: file prefix %q must be a non-empty name that does not start with \".\" or \"_\"", abs, prefix)
	}
	if strings.ContainsAny(ext, `/\`) {
		return nil, fmt.Errorf("sink path %s: file extension %q contains a path separator", abs, ext)
	}
	return &PartFiles{dir: abs, prefix: prefix, ext: ext}, nil
}

// Dir returns the absolute path of the directory.
func (p *PartFiles) Dir() string { return p.dir }

// Open prepares the directory for the subtask that ctx describes: it
// creates the directory if needed, fsyncing the parent of every directory
// it creates, and removes the orphans of crashed runs (see RemoveOrphans).
func (p *PartFiles) Open(ctx connector.InitContext[Committable]) error {
	if ctx.RunToken == "" {
		return fmt.Errorf("opening sink directory %s: empty run token", p.dir)
	}
	if err := p.makeDir(); err != nil {
		return err
	}
	fi, err := os.Stat(p.dir)
	if err != nil {
		return fmt.Errorf("opening sink directory %s: %w", p.dir, pathCause(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("opening sink directory %s: not a directory", p.dir)
	}
	p.run = "sub" + strconv.Itoa(ctx.Subtask) + "-" + ctx.RunToken
	return p.removeOrphans(ctx)
}

// makeDir creates the sink directory and its missing ancestors, and fsyncs
// the parent of each one it creates (unless fsyncs are off), so that a
// power loss cannot drop a directory that committed files are in. A
// directory that another subtask creates at the same moment is synced
// too: both sync its parent.
func (p *PartFiles) makeDir() error {
	var missing []string
	for d := p.dir; ; {
		_, err := os.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("creating sink directory %s: %w", p.dir, pathCause(err))
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating sink directory %s: %w", p.dir, pathCause(err))
		}
		if store.FsyncEnabled() {
			if err := syncDir(filepath.Dir(d)); err != nil {
				return fmt.Errorf("creating sink directory %s: %w", p.dir, err)
			}
		}
	}
	return nil
}

// removeOrphans removes the hidden files (in progress or staged) that
// crashed runs of this sink (its prefix and extension) left in the
// directory. It relies on one job per directory and prefix. A file named
// for subtask j with run token t is removed when:
//
//   - t is not this run's token;
//   - no other subtask of this run writes files of index j: j is this
//     subtask, or j >= the parallelism;
//   - this subtask owns index j: j is in ctx.Succeeds, or j is this
//     subtask on a fresh start (ctx.PreviousGeneration < 0); an
//     in-progress file of this subtask's own index counts as owned, since
//     no handle names an in-progress file;
//   - a staged file: no handle in ctx.Pending names it (the Committer
//     recovers those after Open).
//
// After a rescale, staged orphans of an old subtask whose index another
// live subtask holds stay behind: telling them from that subtask's own
// staged files would need its run token.
func (p *PartFiles) removeOrphans(ctx connector.InitContext[Committable]) error {
	owned := map[int]bool{}
	if ctx.PreviousGeneration < 0 {
		owned[ctx.Subtask] = true
	}
	for _, j := range ctx.Succeeds {
		owned[j] = true
	}
	keep := map[string]bool{}
	for _, c := range ctx.Pending {
		for _, f := range c.Files {
			keep[f.Staged] = true
		}
	}
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("listing sink directory %s for orphans: %w", p.dir, pathCause(err))
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		j, token, staged, ok := p.parseHidden(name)
		if !ok || token == ctx.RunToken || !e.Type().IsRegular() {
			continue
		}
		if j != ctx.Subtask && j < ctx.Parallelism {
			continue // another live subtask's index
		}
		if staged && (!owned[j] || keep[name]) || !staged && !owned[j] && j != ctx.Subtask {
			continue
		}
		path := filepath.Join(p.dir, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing orphaned part file %s: %w", path, pathCause(err)))
			continue
		}
		removed = append(removed, name)
	}
	if len(removed) > 0 && ctx.Logger != nil {
		ctx.Logger.Info("removed orphaned part files of crashed runs", "dir", p.dir, "subtask", ctx.Subtask, "files", len(removed), "first", removed[0])
	}
	return errors.Join(errs...)
}

// parseHidden reports whether name is a hidden file of this sink,
// .<prefix>-sub<N>-<run>-<seq><ext>.inprogress or
// .<prefix>-sub<N>-<run>-<ckpt>[-<i>]<ext>.staged, and returns N, the run
// token and whether it is staged. The token and numbers must be plain
// (letters and digits), so that another prefix that starts with this one
// never parses.
func (p *PartFiles) parseHidden(name string) (subtask int, token string, staged, ok bool) {
	rest, inProgress := strings.CutSuffix(name, p.ext+inProgressSuffix)
	if !inProgress {
		if rest, staged = strings.CutSuffix(name, p.ext+stagedSuffix); !staged {
			return 0, "", false, false
		}
	}
	rest, ok = strings.CutPrefix(rest, "."+p.prefix+"-sub")
	if !ok {
		return 0, "", false, false
	}
	fields := strings.Split(rest, "-")
	if len(fields) != 3 && !(staged && len(fields) == 4) {
		return 0, "", false, false
	}
	for i, f := range fields {
		if f == "" {
			return 0, "", false, false
		}
		for _, r := range f {
			digit := r >= '0' && r <= '9'
			alnum := digit || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
			if i == 1 && !alnum || i != 1 && !digit {
				return 0, "", false, false
			}
		}
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, "", false, false
	}
	return n, fields[1], staged, true
}

// Create opens a new in-progress file and returns it. The previous one
// must have been finished.
func (p *PartFiles) Create() (*os.File, error) {
	if p.cur != nil {
		return nil, fmt.Errorf("creating a part file in %s: %s is still open", p.dir, p.curPath)
	}
	if p.run == "" {
		return nil, fmt.Errorf("creating a part file in %s: the sink is not open", p.dir)
	}
	p.seq++
	path := filepath.Join(p.dir, "."+p.prefix+"-"+p.run+"-"+strconv.Itoa(p.seq)+p.ext+inProgressSuffix)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating part file %s: %w", path, pathCause(err))
	}
	p.cur, p.curPath = f, path
	return f, nil
}

// Path returns the path of the open in-progress file ("" if none).
func (p *PartFiles) Path() string { return p.curPath }

// Finish fsyncs and closes the open in-progress file. Whatever buffers
// writes to it must have been flushed.
func (p *PartFiles) Finish() error {
	if p.cur == nil {
		return nil
	}
	f, path := p.cur, p.curPath
	p.cur, p.curPath = nil, ""
	if store.FsyncEnabled() {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("syncing part file %s: %w", path, pathCause(err))
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing part file %s: %w", path, pathCause(err))
	}
	p.finished = append(p.finished, path)
	return nil
}

// Stage finishes the open file, renames every finished file to its staged
// name and fsyncs the directory. stage names the checkpoint (see
// connector.InitContext.StageName); a single file is committed as
// <prefix>-<stage><ext>, several as <prefix>-<stage>-<i><ext>. ok is false
// when nothing was written since the last Stage.
func (p *PartFiles) Stage(stage string) (c Committable, ok bool, err error) {
	if err := p.Finish(); err != nil {
		return Committable{}, false, err
	}
	if len(p.finished) == 0 {
		return Committable{}, false, nil
	}
	c.Dir = p.dir
	for i, path := range p.finished {
		final := p.prefix + "-" + stage + p.ext
		if len(p.finished) > 1 {
			final = p.prefix + "-" + stage + "-" + strconv.Itoa(i) + p.ext
		}
		pf := PartFile{Staged: "." + final + stagedSuffix, Final: final}
		if err := os.Rename(path, filepath.Join(p.dir, pf.Staged)); err != nil {
			return Committable{}, false, fmt.Errorf("staging part file %s as %s: %w", path, pf.Staged, pathCause(err))
		}
		c.Files = append(c.Files, pf)
	}
	p.finished = p.finished[:0]
	if store.FsyncEnabled() {
		if err := syncDir(p.dir); err != nil {
			return Committable{}, false, err
		}
	}
	return c, true, nil
}

// Discard closes and removes the open in-progress file and the finished
// ones not yet staged.
func (p *PartFiles) Discard() error {
	var errs []error
	if p.cur != nil {
		p.cur.Close()
		p.finished = append(p.finished, p.curPath)
		p.cur, p.curPath = nil, ""
	}
	for _, path := range p.finished {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing unstaged part file %s: %w", path, pathCause(err)))
		}
	}
	p.finished = nil
	return errors.Join(errs...)
}

// syncDir fsyncs a directory (store.SyncDir); tests replace it to see
// which directories are synced.
var syncDir = store.SyncDir

// pathCause strips an *os.PathError or *os.LinkError, whose message
// repeats the path, from err, since the messages built here name the path
// themselves.
func pathCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// Committed reports whether a file named name is part of a directory's
// committed output: its name starts with neither "." nor "_".
func Committed(name string) bool {
	return name != "" && name[0] != '.' && name[0] != '_'
}
