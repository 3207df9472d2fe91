package filesystem

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/clinkstream/clink/connector"
)

// Source is a bounded, replayable source of the records in a set of files
// (see NewSource). It implements connector.Source.
type Source[T any] struct {
	pattern string
	format  Format
	codec   codec[T]
	// records is set for a source made by NewRecordSource: the caller's
	// framing and decoder instead of codec.
	records *RecordFormat[T]

	// The listing that every fresh subtask deals from: made by the first
	// one to open, so that all subtasks of the job see the same files
	// (subtasks listing for themselves at different moments could deal a
	// file twice or not at all when the directory changes in between).
	listOnce sync.Once
	listed   []string
	listErr  error
}

// NewSource returns a source of the records of type T, in format, held in
// the files that path names: a file, a directory (its committed files, not
// those in subdirectories) or a glob pattern (filepath.Match syntax). Files
// whose names start with "." or "_" are never read, so a filesystem sink's
// output directory can be read while it is written.
//
// The set of files is listed once, when the first subtask of a fresh job
// opens, and that one listing is every subtask's; it is sorted by path and
// dealt out round robin, file i to subtask i mod parallelism, each subtask
// reading its files one after another. The Source value keeps the listing:
// build a new one with NewSource for each job. The offset of a subtask is
// the byte offset and line number of every file it owns, so a restored job
// resumes each file after its last checkpointed record. A job restored at
// another parallelism deals the files out again and keeps every file's
// position. Files added after the first start are not read; files named in
// a checkpoint must still exist, at least as long as they were, when the job
// is restored.
func NewSource[T any](path string, format Format) (*Source[T], error) {
	abs, err := sourcePattern(path)
	if err != nil {
		return nil, err
	}
	c, err := newCodec[T](format)
	if err != nil {
		return nil, fmt.Errorf("file source %s: %w", path, err)
	}
	return &Source[T]{pattern: abs, format: format, codec: c}, nil
}

// RecordFormat describes records that the caller decodes itself (see
// NewRecordSource): how records are framed in a file, and the decoder.
type RecordFormat[T any] struct {
	// Quote is the character that opens and closes a quoted csv field, in
	// which a line break does not end the record; 0 when every line is one
	// record. A quote opens a field only at the field's start (the
	// record's start, or after a Delimiter); elsewhere it is a character
	// of the field. A doubled quote inside a quoted field is one quote.
	Quote byte
	// Escape, when not 0, makes the character after it part of the field,
	// inside a quoted field or not, so that an escaped quote neither opens
	// nor closes a field and an escaped delimiter does not start one. (A
	// line break after it outside quotes still ends the record.)
	Escape byte
	// Delimiter separates the fields of a csv record (0: ',').
	Delimiter byte
	// Comment, when not 0, makes a record that starts with it a comment
	// line: it ends at its line break, whatever quotes it holds. Decode
	// still sees it, and skips it.
	Comment byte
	// SkipBlank leaves out lines that hold only white space.
	SkipBlank bool
	// Decode decodes one record, given without its line terminator; rec
	// is only valid during the call. skip leaves the record out (a
	// comment, or a malformed record the caller chose to ignore). An error
	// fails the job; the source prefixes it with the file and line.
	Decode func(rec []byte) (v T, skip bool, err error)
}

// NewRecordSource is NewSource for records in a format of the caller's:
// the source frames records as f says and hands each to f.Decode. Listing,
// dealing, offsets and restores are NewSource's.
func NewRecordSource[T any](path string, f RecordFormat[T]) (*Source[T], error) {
	if f.Decode == nil {
		return nil, fmt.Errorf("file source %s: no Decode function given", path)
	}
	if f.Quote != 0 && f.Quote == f.Escape {
		return nil, fmt.Errorf("file source %s: the quote and escape characters are both %q", path, f.Quote)
	}
	abs, err := sourcePattern(path)
	if err != nil {
		return nil, err
	}
	return &Source[T]{pattern: abs, records: &f}, nil
}

// sourcePattern checks a source's path and makes it absolute.
func sourcePattern(path string) (string, error) {
	if path == "" {
		return "", errors.New("file source: the path is empty")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("file source %s: making the path absolute: %w", path, err)
	}
	if _, err := filepath.Match(filepath.Base(abs), ""); err != nil {
		return "", fmt.Errorf("file source %s: bad pattern: %w", path, err)
	}
	return abs, nil
}

// filePos is the read position in one file: the byte offset and line
// number (1-based) of the next record.
type filePos struct {
	Path   string
	Offset int64
	Line   int64
}

// offsetVersion is the first byte of an encoded source offset.
const offsetVersion = 1

func encodeOffset(files []filePos) []byte {
	b := []byte{offsetVersion}
	b = binary.AppendUvarint(b, uint64(len(files)))
	for _, f := range files {
		b = appendString(b, f.Path)
		b = binary.AppendUvarint(b, uint64(f.Offset))
		b = binary.AppendUvarint(b, uint64(f.Line))
	}
	return b
}

func decodeOffset(b []byte) ([]filePos, error) {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != offsetVersion {
		return nil, fmt.Errorf("decoding a file source offset: version %d, want %d", v, offsetVersion)
	}
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%d files but only %d bytes left", n, len(d.b))
	}
	var files []filePos
	for i := uint64(0); i < n && d.err == nil; i++ {
		p := filePos{Path: d.string()}
		off, line := d.uvarint(), d.uvarint()
		if d.err == nil && (off > 1<<62 || line == 0 || line > 1<<62) {
			d.err = fmt.Errorf("file %s: offset %d line %d out of range", p.Path, off, line)
		}
		p.Offset, p.Line = int64(off), int64(line)
		files = append(files, p)
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes left after the offset", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("decoding a file source offset: %w", d.err)
	}
	return files, nil
}

// list returns the files the source reads, sorted.
func (s *Source[T]) list() ([]string, error) {
	var paths []string
	fi, err := os.Stat(s.pattern)
	switch {
	case err == nil && fi.IsDir():
		entries, err := os.ReadDir(s.pattern)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", s.pattern, pathCause(err))
		}
		for _, e := range entries {
			if Committed(e.Name()) && e.Type().IsRegular() {
				paths = append(paths, filepath.Join(s.pattern, e.Name()))
			}
		}
	case err == nil:
		paths = []string{s.pattern}
	case errors.Is(err, fs.ErrNotExist):
		matches, gerr := filepath.Glob(s.pattern)
		if gerr != nil {
			return nil, fmt.Errorf("listing %s: %w", s.pattern, gerr)
		}
		for _, m := range matches {
			if !Committed(filepath.Base(m)) {
				continue
			}
			if mi, err := os.Stat(m); err == nil && mi.Mode().IsRegular() {
				paths = append(paths, m)
			}
		}
	default:
		return nil, fmt.Errorf("listing %s: %w", s.pattern, pathCause(err))
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("listing %s: no files to read", s.pattern)
	}
	slices.Sort(paths)
	return paths, nil
}

// Open implements connector.Source.
func (s *Source[T]) Open(ctx connector.SourceContext, offset []byte, rescaled [][]byte) (connector.SourceReader[T], error) {
	var files []filePos
	switch {
	case rescaled != nil:
		var all []filePos
		seen := map[string]int{}
		for old, b := range rescaled {
			owned, err := decodeOffset(b)
			if err != nil {
				return nil, fmt.Errorf("file source %s: restoring old subtask %d: %w", s.pattern, old, err)
			}
			for _, f := range owned {
				if prev, dup := seen[f.Path]; dup {
					return nil, fmt.Errorf("file source %s: the restored offsets of old subtasks %d and %d both hold %s", s.pattern, prev, old, f.Path)
				}
				seen[f.Path] = old
				all = append(all, f)
			}
		}
		slices.SortFunc(all, func(a, b filePos) int { return cmp.Compare(a.Path, b.Path) })
		for i, f := range all {
			if i%ctx.Parallelism == ctx.Subtask {
				files = append(files, f)
			}
		}
	case offset != nil:
		owned, err := decodeOffset(offset)
		if err != nil {
			return nil, fmt.Errorf("file source %s: restoring subtask %d: %w", s.pattern, ctx.Subtask, err)
		}
		files = owned
	default:
		s.listOnce.Do(func() { s.listed, s.listErr = s.list() })
		if s.listErr != nil {
			return nil, fmt.Errorf("file source: %w", s.listErr)
		}
		paths := s.listed
		for i, p := range paths {
			if i%ctx.Parallelism == ctx.Subtask {
				files = append(files, filePos{Path: p, Line: 1})
			}
		}
	}
	for _, f := range files {
		if f.Offset == 0 {
			continue
		}
		fi, err := os.Stat(f.Path)
		if err != nil {
			return nil, fmt.Errorf("file source: restoring %s at byte %d (line %d): %w", f.Path, f.Offset, f.Line, pathCause(err))
		}
		if fi.Size() < f.Offset {
			return nil, fmt.Errorf("file source: restoring %s at byte %d (line %d): the file has only %d bytes", f.Path, f.Offset, f.Line, fi.Size())
		}
	}
	r := &sourceReader[T]{files: files}
	switch c := s.codec.(type) {
	case nil:
		r.decode = s.records.Decode
		f := s.records
		r.frame = csvFramer{quote: f.Quote, escape: f.Escape, delim: f.Delimiter, comment: f.Comment}
		r.skipBlank = f.SkipBlank
	case *csvCodec[T]:
		r.decode = decodeWith(c)
		r.frame.quote, r.skipBlank = '"', !c.strings
	default:
		r.decode = decodeWith(c)
		r.skipBlank = true
	}
	return r, nil
}

func decodeWith[T any](c codec[T]) func([]byte) (T, bool, error) {
	return func(rec []byte) (T, bool, error) {
		v, err := c.decode(rec)
		return v, false, err
	}
}

// sourceReader reads one subtask's files in order.
type sourceReader[T any] struct {
	decode func(rec []byte) (T, bool, error)
	files  []filePos
	cur    int
	f      *os.File
	r      *bufio.Reader
	// frame tells where a record ends: csv's quoted fields may span lines.
	// skipBlank is set when a blank line cannot be a record (json, and
	// csv into a struct).
	frame     csvFramer
	skipBlank bool
	rec       []byte
}

// Read implements connector.SourceReader.
func (r *sourceReader[T]) Read(n int, emit func(v T, ts int64) error) (connector.ReadStatus, error) {
	for i := 0; i < n; {
		if r.cur == len(r.files) {
			return connector.Done, nil
		}
		pos := &r.files[r.cur]
		if r.f == nil {
			if err := r.openFile(pos); err != nil {
				return connector.More, err
			}
		}
		rec, size, lines, err := r.next()
		if err != nil {
			return connector.More, fmt.Errorf("reading %s:%d (byte %d): %w", pos.Path, pos.Line, pos.Offset, err)
		}
		if size == 0 {
			if err := r.f.Close(); err != nil {
				return connector.More, fmt.Errorf("closing %s: %w", pos.Path, pathCause(err))
			}
			r.f = nil
			r.cur++
			continue
		}
		if r.skipBlank && len(bytes.TrimSpace(rec)) == 0 {
			pos.Offset += size
			pos.Line += lines
			continue
		}
		v, skip, err := r.decode(rec)
		if err != nil {
			return connector.More, fmt.Errorf("%s:%d: %w", pos.Path, pos.Line, err)
		}
		if !skip {
			if err := emit(v, connector.NoTimestamp); err != nil {
				return connector.More, err
			}
			i++
		}
		pos.Offset += size
		pos.Line += lines
	}
	return connector.More, nil
}

func (r *sourceReader[T]) openFile(pos *filePos) error {
	f, err := os.Open(pos.Path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", pos.Path, pathCause(err))
	}
	if pos.Offset > 0 {
		if _, err := f.Seek(pos.Offset, io.SeekStart); err != nil {
			f.Close()
			return fmt.Errorf("seeking %s to byte %d: %w", pos.Path, pos.Offset, pathCause(err))
		}
	}
	r.f = f
	if r.r == nil {
		r.r = bufio.NewReaderSize(f, 64<<10)
	} else {
		r.r.Reset(f)
	}
	return nil
}

// next reads the next record of the open file: its bytes without the line
// terminator, how many bytes it took in the file and how many lines. size
// 0 means the file is exhausted. A csv record continues past a line break
// while a quoted field is open.
func (r *sourceReader[T]) next() (rec []byte, size, lines int64, err error) {
	r.rec = r.rec[:0]
	fr := r.frame
	fr.start()
	for {
		chunk, err := r.r.ReadSlice('\n')
		r.rec = append(r.rec, chunk...)
		size += int64(len(chunk))
		if errors.Is(err, bufio.ErrBufferFull) {
			fr.scan(chunk)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, 0, pathCause(err)
		}
		if len(chunk) > 0 {
			lines++
		}
		eof := err != nil
		if !fr.scan(chunk) && !eof {
			continue // a quoted field holds a line break
		}
		rec = r.rec
		if n := len(rec); n > 0 && rec[n-1] == '\n' {
			rec = rec[:n-1]
			if n := len(rec); n > 0 && rec[n-1] == '\r' {
				rec = rec[:n-1]
			}
		}
		return rec, size, lines, nil
	}
}

// csvFramer finds the line break that ends a csv record, reading the
// record as the field parser does (sql/exec's splitCSV and this package's
// own): a quote opens a quoted field only at a field's start, an escape
// takes the next character literally inside quotes and out, a doubled
// quote in a quoted field is a quote, and a comment line ends at its line
// break. Its state carries across the chunks of a long record.
type csvFramer struct {
	quote, escape, delim, comment byte

	state   framerState
	escaped bool // the last byte was the escape character
}

type framerState uint8

const (
	recordStart framerState = iota // before the record's first byte
	fieldStart                     // after a delimiter
	unquoted                       // in an unquoted field
	quoted                         // in a quoted field
	quoteSeen                      // a quote in a quoted field: it closes it unless doubled
	commentLine                    // in a comment line
)

// start readies f for a new record.
func (f *csvFramer) start() { f.state, f.escaped = recordStart, false }

// scan advances f over chunk and reports whether a line break in it ended
// the record (a chunk holds at most one line break, at its end).
func (f *csvFramer) scan(chunk []byte) (ended bool) {
	if f.quote == 0 {
		// Every line is a record.
		return len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
	}
	delim := f.delim
	if delim == 0 {
		delim = ','
	}
	for _, c := range chunk {
		if f.escaped {
			f.escaped = false
			if c != '\n' || f.state != unquoted {
				continue
			}
			// An escape before the line break is the record's last
			// character: the break still ends the record.
		}
		switch f.state {
		case recordStart:
			if f.comment != 0 && c == f.comment {
				f.state = commentLine
				continue
			}
			fallthrough
		case fieldStart:
			if c == f.quote {
				f.state = quoted
				continue
			}
			f.state = unquoted
			ended = f.unquotedByte(c, delim)
		case unquoted:
			ended = f.unquotedByte(c, delim)
		case quoted:
			switch {
			case f.escape != 0 && c == f.escape:
				f.escaped = true
			case c == f.quote:
				f.state = quoteSeen
			}
		case quoteSeen:
			if c == f.quote {
				f.state = quoted // a doubled quote
				continue
			}
			// The field is closed; anything but the delimiter or the
			// end of the record after it makes the record malformed,
			// which the parser reports: read on as in an unquoted field.
			f.state = unquoted
			ended = f.unquotedByte(c, delim)
		case commentLine:
			ended = c == '\n'
		}
	}
	return ended
}

// unquotedByte advances f over c in an unquoted field.
func (f *csvFramer) unquotedByte(c, delim byte) (ended bool) {
	switch {
	case c == '\n':
		return true
	case c == delim:
		f.state = fieldStart
	case f.escape != 0 && c == f.escape:
		f.escaped = true
	}
	return false
}

// Offset implements connector.SourceReader.
func (r *sourceReader[T]) Offset() ([]byte, string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d files done", min(r.cur, len(r.files)), len(r.files))
	if r.cur < len(r.files) {
		p := r.files[r.cur]
		fmt.Fprintf(&b, "; at %s byte %d line %d", p.Path, p.Offset, p.Line)
	}
	return encodeOffset(r.files), b.String()
}

// Close implements connector.SourceReader.
func (r *sourceReader[T]) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	if err != nil {
		return fmt.Errorf("closing %s: %w", r.files[r.cur].Path, pathCause(err))
	}
	return nil
}
