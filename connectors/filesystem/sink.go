package filesystem

import (
	"bufio"
	"fmt"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/connector"
)

// SinkOptions configures NewSink. The zero value is valid.
type SinkOptions struct {
	// Prefix starts the name of every committed file (default "part"). It
	// must not start with "." or "_".
	Prefix string
	// RollSize, when positive, starts a new part file within a checkpoint
	// interval once the current one holds at least this many bytes. Every
	// file of the interval is committed with the checkpoint. Zero writes
	// one file per subtask and checkpoint.
	RollSize int64
	// BufferSize is the size of the write buffer in front of each part file
	// (default 256 KiB).
	BufferSize int
	// CSVDelimiter separates the fields of a CSV record (default ','); a
	// field holding it is quoted. It cannot be a quote or a line break.
	CSVDelimiter byte
}

// Validate checks the options and fills in defaults.
func (o *SinkOptions) Validate() error {
	if o.Prefix == "" {
		o.Prefix = "part"
	}
	if o.RollSize < 0 {
		return fmt.Errorf("negative roll size %d", o.RollSize)
	}
	if o.BufferSize < 0 {
		return fmt.Errorf("negative buffer size %d", o.BufferSize)
	}
	if o.BufferSize == 0 {
		o.BufferSize = 256 << 10
	}
	switch o.CSVDelimiter {
	case 0:
		o.CSVDelimiter = ','
	case '"', '\n', '\r':
		return fmt.Errorf("csv delimiter %q cannot be a quote or a line break", o.CSVDelimiter)
	}
	return nil
}

// NewSink returns the factory of an exactly-once sink that writes records
// of type T in format to part files in the directory path (created if
// missing), for clink.CommitTo. It checks T against the format and the
// options now, so that a job is refused before it runs.
func NewSink[T any](path string, format Format, opts SinkOptions) (func() connector.CommittingSink[T, Committable], error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("file sink %s: %w", path, err)
	}
	c, err := newCodec[T](format)
	if err != nil {
		return nil, fmt.Errorf("file sink %s: %w", path, err)
	}
	if cc, ok := c.(*csvCodec[T]); ok {
		cc.comma = opts.CSVDelimiter
	}
	// Checks path and prefix once; every subtask builds its own.
	parts, err := NewPartFiles(path, opts.Prefix, format.Ext())
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	dir := parts.Dir()
	return func() connector.CommittingSink[T, Committable] {
		p, _ := NewPartFiles(dir, opts.Prefix, format.Ext())
		return &Sink[T]{codec: c, parts: p, opts: opts}
	}, nil
}

// Sink is one subtask of the exactly-once file sink (see NewSink). Its
// methods are called by connector.Committer.
type Sink[T any] struct {
	Publisher
	codec codec[T]
	parts *PartFiles
	opts  SinkOptions
	ctx   connector.InitContext[Committable]
	// w buffers the open part file; live says whether one is open.
	w    *bufio.Writer
	live bool
	buf  []byte
	// size is the number of bytes written to the open part file; records
	// the number of records.
	size, records int64
}

// Open implements connector.CommittingSink.
func (s *Sink[T]) Open(ctx connector.InitContext[Committable]) error {
	s.ctx = ctx
	return s.parts.Open(ctx)
}

// Write implements connector.CommittingSink: it appends v to the open part
// file, creating one if needed, and rolls to a new file at the roll size.
func (s *Sink[T]) Write(v T) error {
	if !s.live {
		f, err := s.parts.Create()
		if err != nil {
			return err
		}
		if s.w == nil {
			s.w = bufio.NewWriterSize(f, s.opts.BufferSize)
		} else {
			s.w.Reset(f)
		}
		s.live, s.size, s.records = true, 0, 0
	}
	var err error
	s.buf, err = s.codec.appendRecord(s.buf[:0], v)
	if err != nil {
		return fmt.Errorf("writing record %d of %s: %w", s.records+1, s.parts.Path(), err)
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return fmt.Errorf("writing record %d of %s at byte %d: %w", s.records+1, s.parts.Path(), s.size, pathCause(err))
	}
	s.size += int64(len(s.buf))
	s.records++
	if s.opts.RollSize > 0 && s.size >= s.opts.RollSize {
		return s.finish()
	}
	return nil
}

// finish flushes, fsyncs and closes the open part file.
func (s *Sink[T]) finish() error {
	if !s.live {
		return nil
	}
	s.live = false
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("flushing %s at byte %d: %w", s.parts.Path(), s.size, pathCause(err))
	}
	s.w.Reset(nil)
	return s.parts.Finish()
}

// PrepareCommit implements connector.CommittingSink: it finishes the open
// part file and stages every file written since the last checkpoint.
func (s *Sink[T]) PrepareCommit(ckpt checkpoint.ID) (Committable, bool, error) {
	if err := s.finish(); err != nil {
		return Committable{}, false, err
	}
	return s.parts.Stage(s.ctx.StageName(ckpt))
}

// Close implements connector.CommittingSink: what was written but not
// staged is removed.
func (s *Sink[T]) Close() error {
	s.live = false
	if s.w != nil {
		s.w.Reset(nil)
	}
	return s.parts.Discard()
}
