package store

import (
	"fmt"
	"io"
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
// how many failed.
func Cat(w io.Writer, dir string, id *checkpoint.ID, opts CatOptions) error {
	s, err := openExisting(dir, Options{FS: opts.FS})
	if err != nil {
		return err
	}
	ew := &errWriter{w: w}
	if id == nil {
		err = s.catList(ew)
	} else {
		err = s.catCheckpoint(ew, *id)
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

func (s *Store) catCheckpoint(w io.Writer, id checkpoint.ID) error {
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
	failed := 0
	for _, f := range ci.Files {
		name := strings.TrimSuffix(f.Name, snapSuffix)
		fmt.Fprintf(w, "\n%s%d/%s (%d bytes)\n", chkPrefix, id, f.Name, f.Size)
		snap, err := s.ReadTaskSnapshot(id, name)
		if err != nil {
			failed++
			fmt.Fprintf(w, "  error: %v\n", err)
			continue
		}
		catSnapshot(w, snap)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d snapshot files of checkpoint %d in %s could not be read", failed, len(ci.Files), id, s.dir)
	}
	return nil
}

func catSnapshot(w io.Writer, snap *TaskSnapshot) {
	fmt.Fprintf(w, "  task %s: subtask %d of parallelism %d, max parallelism %d\n",
		snap.Task, snap.Subtask, snap.Parallelism, snap.MaxParallelism)
	for _, op := range snap.Operators {
		fmt.Fprintf(w, "  operator %s\n", op.UID)
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
		fmt.Fprintf(w, "    keyed state:    %d key groups, %d entries, %d bytes\n", len(op.KeyGroups), entries, keyed)
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
}
