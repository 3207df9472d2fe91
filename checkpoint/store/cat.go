package store

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clinkstream/clink/checkpoint"
)

// CatOptions configure Cat.
type CatOptions struct {
	// FS is the filesystem to read; nil means vfs.Default.
	FS vfs.FS
	// Summary leaves out the line per key group of the checkpoint view:
	// keyed state is then only totalled per operator.
	Summary bool
	// DescribeKeyGroup, when set, adds what it returns to the line of each
	// key group in the checkpoint view, e.g. the entries of each table
	// ("value=40, __timers_event=2"). The store does not know how keyed
	// state is laid out in a key group (package state does), so the caller
	// supplies it. An error is printed on the key group's line, and Cat
	// fails after printing everything.
	// inFiles says that data came from FileKeyedState (a byte-store
	// backend's entries) rather than from the snapshot.
	DescribeKeyGroup func(kg, entries int, data []byte, inFiles bool) (string, error)
	// FileKeyedState, when set, reads the keyed state of an operator whose
	// state backend keeps it in files (Pebble) rather than in the
	// snapshot: such a snapshot lists the backend's files in its operator
	// state and holds no key groups. It returns the operator's key groups
	// in the backend's own entry format and the number of key groups of
	// the job, or nil when op keeps no state in files. Cat then prints
	// them as the operator's keyed state and hands them to
	// DescribeKeyGroup and KeyLookup.Find marked as coming from files. A
	// memory backend's incremental checkpoint is read the same way, but
	// its key groups come back in the snapshot's own format
	// (FileKeyed.SnapshotFormat) and are handed on as such. An error is
	// printed under the operator, and Cat fails after printing
	// everything.
	FileKeyedState func(op *OperatorSnapshot, shared *Shared) (*FileKeyed, error)
	// Key, when set, makes the checkpoint view look up one key in the
	// keyed state of every operator instead of printing each snapshot.
	Key *KeyLookup
}

// FileKeyed is the keyed state CatOptions.FileKeyedState read from a
// state backend's files.
type FileKeyed struct {
	Groups         []KeyGroupState
	MaxParallelism int
	// SnapshotFormat says that Groups are encoded as the key groups of a
	// snapshot are (the memory backend's incremental checkpoints merge
	// their files into that format), not in the backend's entry format.
	SnapshotFormat bool
}

// KeyLookup is the lookup of one key by Cat.
type KeyLookup struct {
	// Key is the key as the user wrote it.
	Key string
	// Find returns the lines to print about the key for the keyed state of
	// one operator. An error is printed under the operator, and Cat fails
	// after printing everything.
	Find func(KeyedState) ([]string, error)
}

// KeyedState is the keyed state of one operator in one checkpoint, gathered
// from the snapshot files of all its subtasks.
type KeyedState struct {
	Operator       string
	MaxParallelism int
	// KeyGroups holds the key groups by ascending key group.
	KeyGroups []KeyGroupState
	// Files[i] names the file KeyGroups[i] comes from, relative to the
	// checkpoint directory ("chk-3/count-1.snap").
	Files []string
	// InFiles says that the key groups were read from the state backend's
	// files (CatOptions.FileKeyedState), in its own entry format.
	InFiles bool
}

// Cat writes a human-readable account of the checkpoint directory dir to w;
// it is the body of `clink state-cat`. It never creates or changes anything.
//
// With id nil it prints a table of every checkpoint (id, completed,
// confirmed, number of files, total bytes), then the snapshot files of each.
// With an id it decodes every snapshot file of that checkpoint and prints
// the task and, per operator, its source offset, watermark, keyed state,
// operator state and in-flight records. A file that cannot be decoded gets
// an error line and Cat moves on to the next; the returned error then says
// how many failed. Keyed state is listed per key group (see
// CatOptions.Summary and CatOptions.DescribeKeyGroup). With opts.Key set,
// Cat prints instead what every operator's keyed state holds for that key.
func Cat(w io.Writer, dir string, id *checkpoint.ID, opts CatOptions) error {
	if opts.Key != nil && (id == nil || opts.Key.Find == nil) {
		return errors.New("looking up a key needs a checkpoint id and a Find function")
	}
	s, err := openExisting(dir, Options{FS: opts.FS})
	if err != nil {
		return err
	}
	ew := &errWriter{w: w}
	if id == nil {
		err = s.catList(ew)
	} else {
		err = s.catCheckpoint(ew, *id, opts)
	}
	if ew.err != nil {
		return fmt.Errorf("writing state-cat output: %w", ew.err)
	}
	return err
}

// errWriter keeps the first write error, so that Cat can print freely and
// report a broken output once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if stem, ok := strings.CutSuffix(noun, "y"); ok && stem != "" && !strings.ContainsRune("aeiou", rune(stem[len(stem)-1])) {
		return fmt.Sprintf("%d %sies", n, stem) // entry, entries
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (s *Store) catList(w io.Writer) error {
	infos, err := s.List()
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		_, err := fmt.Fprintf(w, "no checkpoints in %s\n", s.dir)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCOMPLETED\tCONFIRMED\tFILES\tBYTES")
	for _, ci := range infos {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\n", ci.ID, yesNo(ci.Completed), yesNo(ci.Confirmed), len(ci.Files), ci.Bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, ci := range infos {
		fmt.Fprintf(w, "\n%s%d/\n", chkPrefix, ci.ID)
		if !ci.HasDir {
			fmt.Fprintf(w, "  missing\n")
			continue
		}
		nameW, sizeW := 0, 0
		for _, f := range ci.Files {
			nameW = max(nameW, len(f.Name))
			sizeW = max(sizeW, len(strconv.FormatInt(f.Size, 10)))
		}
		for _, f := range ci.Files {
			fmt.Fprintf(w, "  %-*s  %*d\n", nameW, f.Name, sizeW, f.Size)
		}
	}
	return nil
}

func (s *Store) catCheckpoint(w io.Writer, id checkpoint.ID, opts CatOptions) error {
	infos, err := s.List()
	if err != nil {
		return err
	}
	var ci *CheckpointInfo
	for i := range infos {
		if infos[i].ID == id {
			ci = &infos[i]
		}
	}
	if ci == nil {
		return fmt.Errorf("no checkpoint %d in %s", id, s.dir)
	}
	state := "not completed"
	if ci.Completed {
		state = "completed"
		if ci.Confirmed {
			state += ", confirmed"
		} else {
			state += ", not confirmed"
		}
	}
	fmt.Fprintf(w, "checkpoint %d in %s: %s, %s, %d bytes\n", id, s.dir, state, plural(len(ci.Files), "file"), ci.Bytes)
	if !ci.HasDir {
		fmt.Fprintf(w, "error: %s is missing\n", s.chkDir(id))
		return fmt.Errorf("checkpoint %d in %s has markers but no %s%d directory", id, s.dir, chkPrefix, id)
	}
	if opts.Key != nil {
		return s.catKey(w, ci, opts)
	}
	failed, badGroups := 0, 0
	for _, f := range ci.Files {
		name := strings.TrimSuffix(f.Name, snapSuffix)
		fmt.Fprintf(w, "\n%s%d/%s (%d bytes)\n", chkPrefix, id, f.Name, f.Size)
		snap, err := s.ReadTaskSnapshot(id, name)
		if err != nil {
			failed++
			fmt.Fprintf(w, "  error: %v\n", err)
			continue
		}
		badGroups += s.catSnapshot(w, snap, opts)
	}
	var errs []string
	if failed > 0 {
		errs = append(errs, fmt.Sprintf("%d of %d snapshot files of checkpoint %d in %s could not be read", failed, len(ci.Files), id, s.dir))
	}
	if badGroups > 0 {
		errs = append(errs, fmt.Sprintf("%s of checkpoint %d in %s could not be decoded", plural(badGroups, "key group"), id, s.dir))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// catKey prints what the keyed state of each operator of checkpoint ci
// holds for one key.
func (s *Store) catKey(w io.Writer, ci *CheckpointInfo, opts CatOptions) error {
	k := opts.Key
	var ops []*KeyedState
	byUID := map[string]*KeyedState{}
	failed, failedOps := 0, 0
	for _, f := range ci.Files {
		path := fmt.Sprintf("%s%d/%s", chkPrefix, ci.ID, f.Name)
		snap, err := s.ReadTaskSnapshot(ci.ID, strings.TrimSuffix(f.Name, snapSuffix))
		if err != nil {
			failed++
			fmt.Fprintf(w, "error: %s: %v\n", path, err)
			continue
		}
		bad := false
		for i := range snap.Operators {
			op := &snap.Operators[i]
			_, inFiles, err := s.expandFiles(op, snap.MaxParallelism, opts)
			if err != nil {
				bad = true
				fmt.Fprintf(w, "error: %s: operator %s: %v\n", path, op.UID, err)
				continue
			}
			if len(op.KeyGroups) == 0 {
				continue
			}
			ks := byUID[op.UID]
			if ks == nil {
				ks = &KeyedState{Operator: op.UID, MaxParallelism: snap.MaxParallelism, InFiles: inFiles}
				byUID[op.UID] = ks
				ops = append(ops, ks)
			} else if ks.MaxParallelism != snap.MaxParallelism {
				bad = true
				fmt.Fprintf(w, "error: %s: operator %s has max parallelism %d here and %d in %s\n",
					path, op.UID, snap.MaxParallelism, ks.MaxParallelism, ks.Files[0])
				continue
			}
			for _, g := range op.KeyGroups {
				ks.KeyGroups = append(ks.KeyGroups, g)
				ks.Files = append(ks.Files, path)
			}
		}
		if bad {
			failed++
		}
	}
	if len(ops) == 0 {
		fmt.Fprintf(w, "key %q: no operator of checkpoint %d has keyed state\n", k.Key, ci.ID)
	} else {
		fmt.Fprintf(w, "key %q in the keyed state of %s\n", k.Key, plural(len(ops), "operator"))
	}
	for _, ks := range ops {
		// Files are read in name order; key groups go in ascending order.
		type located struct {
			g    KeyGroupState
			file string
		}
		all := make([]located, len(ks.KeyGroups))
		for i := range all {
			all[i] = located{ks.KeyGroups[i], ks.Files[i]}
		}
		slices.SortStableFunc(all, func(a, b located) int { return cmp.Compare(a.g.KeyGroup, b.g.KeyGroup) })
		groups, files := make([]KeyGroupState, len(all)), make([]string, len(all))
		for i, l := range all {
			groups[i], files[i] = l.g, l.file
		}
		ks.KeyGroups, ks.Files = groups, files
		fmt.Fprintf(w, "\noperator %s\n", ks.Operator)
		for i := 1; i < len(groups); i++ {
			if groups[i].KeyGroup == groups[i-1].KeyGroup {
				fmt.Fprintf(w, "  warning: key group %d is in both %s and %s\n", groups[i].KeyGroup, files[i-1], files[i])
			}
		}
		lines, err := k.Find(*ks)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if err != nil {
			failedOps++
			fmt.Fprintf(w, "  error: %v\n", err)
		}
	}
	var errs []string
	if failed > 0 {
		errs = append(errs, fmt.Sprintf("%d of %d snapshot files of checkpoint %d in %s could not be read", failed, len(ci.Files), ci.ID, s.dir))
	}
	if failedOps > 0 {
		errs = append(errs, fmt.Sprintf("the keyed state of %s of checkpoint %d in %s could not be searched", plural(failedOps, "operator"), ci.ID, s.dir))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// sizeText formats a byte count for people: "837 bytes", "1.2 KiB".
func sizeText(n int) string {
	const unit = 1024
	if n < unit {
		return plural(n, "byte")
	}
	f, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if f < unit {
			break
		}
		f, suffix = f/unit, s
	}
	return fmt.Sprintf("%.1f %s", f, suffix)
}

// catSnapshot prints one snapshot and returns how many of its key groups
// DescribeKeyGroup failed on.
func (s *Store) catSnapshot(w io.Writer, snap *TaskSnapshot, opts CatOptions) int {
	bad := 0
	fmt.Fprintf(w, "  task %s: subtask %d of parallelism %d, max parallelism %d\n",
		snap.Task, snap.Subtask, snap.Parallelism, snap.MaxParallelism)
	for i := range snap.Operators {
		op := &snap.Operators[i]
		fmt.Fprintf(w, "  operator %s\n", op.UID)
		expanded, inFiles, err := s.expandFiles(op, snap.MaxParallelism, opts)
		if err != nil {
			bad++
			fmt.Fprintf(w, "    keyed state:    error reading the state backend's files: %v\n", err)
		}
		if op.Offset != nil || op.OffsetText != "" {
			text := op.OffsetText
			if text == "" {
				text = fmt.Sprintf("(%d opaque bytes)", len(op.Offset))
			}
			fmt.Fprintf(w, "    offset:         %s\n", text)
		}
		if op.Watermark == NoWatermark {
			fmt.Fprintf(w, "    watermark:      none\n")
		} else {
			fmt.Fprintf(w, "    watermark:      %d\n", op.Watermark)
		}
		entries, keyed := 0, 0
		for _, kg := range op.KeyGroups {
			entries += kg.Entries
			keyed += len(kg.Data)
		}
		where := ""
		if expanded {
			where = " (in the state backend's files)"
		}
		if err == nil {
			fmt.Fprintf(w, "    keyed state:    %d key groups, %d entries, %d bytes%s\n", len(op.KeyGroups), entries, keyed, where)
		}
		if !opts.Summary {
			bad += catKeyGroups(w, op.KeyGroups, opts.DescribeKeyGroup, inFiles)
		}
		if len(op.OperatorState) == 0 {
			fmt.Fprintf(w, "    operator state: none\n")
		} else {
			parts := make([]string, len(op.OperatorState))
			for i, ns := range op.OperatorState {
				parts[i] = fmt.Sprintf("%s (%d bytes)", ns.Name, len(ns.Data))
			}
			fmt.Fprintf(w, "    operator state: %s\n", strings.Join(parts, ", "))
		}
		if len(op.InFlight) == 0 {
			fmt.Fprintf(w, "    in-flight:      none\n")
		} else {
			parts := make([]string, len(op.InFlight))
			for i, in := range op.InFlight {
				parts[i] = fmt.Sprintf("input %d: %d records (%d bytes)", in.Input, in.Records, len(in.Data))
			}
			fmt.Fprintf(w, "    in-flight:      %s\n", strings.Join(parts, ", "))
		}
	}
	return bad
}

// catKeyGroups prints one line per key group, aligned on the key group
// number: "kg  17: 42 entries, 1.2 KiB (value=40, __timers_event=2)".
func catKeyGroups(w io.Writer, groups []KeyGroupState, describe func(kg, entries int, data []byte, inFiles bool) (string, error), inFiles bool) int {
	width := 0
	for _, g := range groups {
		width = max(width, len(strconv.Itoa(g.KeyGroup)))
	}
	bad := 0
	for _, g := range groups {
		line := fmt.Sprintf("      kg %*d: %s, %s", width, g.KeyGroup, plural(g.Entries, "entry"), sizeText(len(g.Data)))
		if describe != nil {
			d, err := describe(g.KeyGroup, g.Entries, g.Data, inFiles)
			switch {
			case err != nil:
				bad++
				line += fmt.Sprintf(" (error: %v)", err)
			case d != "":
				line += " (" + d + ")"
			}
		}
		fmt.Fprintln(w, line)
	}
	return bad
}

// expandFiles puts the keyed state that op's backend keeps in files into
// op.KeyGroups (CatOptions.FileKeyedState). It reports whether it did
// (expanded) and whether they are in the backend's entry format (inFiles).
func (s *Store) expandFiles(op *OperatorSnapshot, maxParallelism int, opts CatOptions) (expanded, inFiles bool, err error) {
	if opts.FileKeyedState == nil || len(op.KeyGroups) > 0 {
		return false, false, nil
	}
	fk, err := opts.FileKeyedState(op, s.Shared())
	if err != nil || fk == nil {
		return false, false, err
	}
	if fk.MaxParallelism != maxParallelism {
		return false, false, fmt.Errorf("its files hold %d key groups, the snapshot says %d", fk.MaxParallelism, maxParallelism)
	}
	op.KeyGroups = fk.Groups
	return true, !fk.SnapshotFormat, nil
}
