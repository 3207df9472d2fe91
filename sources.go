package clink

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/runtime"
	"github.com/clinkstream/clink/state"
)

// sourceProducer is a typed source as its member sees it.
type sourceMember[T any] struct {
	name  string
	o     *out[T]
	c     *counters
	batch int
	// ramp, after a restore, is how many records the next read asks for
	// (0: batch): 1 at first, doubling up to batch. A keyed operator may
	// still be decoding its restored state in the background and decodes
	// the key groups a batch reaches before the batch is done (see the
	// state package's background restore); small batches first let the
	// job's first output leave after the key groups of a few records, not
	// after nearly all of them.
	ramp int
	impl sourceImpl[T]
	// emit counts and forwards one record; built once, not per call.
	emit func(T, int64) error
	n    int64
}

// sourceImpl is one subtask's reader of a replayable input.
type sourceImpl[T any] interface {
	// open positions the reader: at offset (nil: the beginning), or, when
	// the job was rescaled, at this subtask's share of the offsets of every
	// old subtask (rescaled holds them in old subtask order).
	open(subtask, parallelism, maxParallelism int, offset []byte, rescaled [][]byte) error
	// read emits up to n records through emit.
	read(n int, emit func(T, int64) error) (runtime.ProduceStatus, error)
	// offset returns the position after the last record read, and a
	// human-readable form of it.
	offset() ([]byte, string)
	close() error
}

func (m *sourceMember[T]) uid() string { return m.name }

func (m *sourceMember[T]) open(tc *runtime.TaskContext, rs restoreState) error {
	var off []byte
	if rs.own != nil {
		off = rs.own.Offset
	}
	var rescaled [][]byte
	if rs.rescaled != nil {
		rescaled = make([][]byte, 0, len(rs.rescaled))
		for _, s := range rs.rescaled {
			rescaled = append(rescaled, s.Offset)
		}
	}
	if err := m.impl.open(tc.Subtask, tc.Parallelism, tc.MaxParallelism, off, rescaled); err != nil {
		return fmt.Errorf("source %q: %w", m.name, err)
	}
	if rs.own != nil || rs.rescaled != nil {
		m.ramp = 1
	}
	return nil
}

func (m *sourceMember[T]) snapshot(checkpoint.ID) (*store.OperatorSnapshot, error) {
	off, text := m.impl.offset()
	return &store.OperatorSnapshot{UID: m.name, Offset: off, OffsetText: text, Watermark: runtime.MinWatermark}, nil
}

func (m *sourceMember[T]) produce() (runtime.ProduceStatus, error) {
	if m.emit == nil {
		next := m.o.rec
		m.emit = func(v T, ts int64) error {
			m.n++
			return next(v, ts)
		}
	}
	n := m.batch
	if m.ramp > 0 {
		n = min(m.ramp, n)
		if m.ramp *= 2; m.ramp >= m.batch {
			m.ramp = 0
		}
	}
	st, err := m.impl.read(n, m.emit)
	m.c.out += m.n
	m.n = 0
	return st, err
}

func (m *sourceMember[T]) endOfInput() error { return m.o.wm(runtime.MaxWatermark) }
func (m *sourceMember[T]) close() error      { return m.impl.close() }

func addSource[T any](env *Environment, name string, parallelism int, newImpl func() sourceImpl[T]) Stream[T] {
	n := env.newNode(name, parallelism)
	n.port = newPort[T]()
	n.build = func(bc *buildCtx, o any) ([]any, producer, error) {
		m := &sourceMember[T]{name: name, o: o.(*out[T]), c: bc.counters(name), batch: bc.batchSize, impl: newImpl()}
		bc.add(m)
		return nil, m, nil
	}
	return Stream[T]{node: n}
}

// indexSource reads elements 0..count-1 (count < 0: unbounded) of an
// indexed input. The index space is cut into as many splits as the job has
// key groups: split j holds indexes j, j+S, j+2S, ... A subtask reads its
// splits round robin; at first subtask s of p owns the splits j with
// j mod p = s, so it emits s, s+p, s+2p, ... in order. Its offset is the
// next index of every split it owns, kept as operator list state with
// split redistribution: a job restored at another parallelism deals the
// splits out to its new subtasks, each split resuming where it stopped.
type indexSource[T any] struct {
	count  int64
	get    func(i int64) T
	ts     func(i int64) int64
	rate   float64 // records per second per subtask, 0 unlimited
	splits *state.OperatorListState[splitPos]
	// pos are the owned splits' positions; cur the next one to read.
	pos    []splitPos
	cur    int
	stride int64
	start  time.Time
	served int64
}

// splitPos is the next index of one split.
type splitPos struct {
	Split int64
	Next  int64
}

func (s *indexSource[T]) open(subtask, parallelism, maxParallelism int, offset []byte, rescaled [][]byte) error {
	st, err := state.NewOperatorList[splitPos]("splits", state.Split)
	if err != nil {
		return err
	}
	s.splits, s.stride = st, int64(maxParallelism)
	switch {
	case rescaled != nil:
		err = st.Restore(rescaled, subtask, parallelism)
	case offset != nil:
		err = st.Restore([][]byte{offset}, 0, 1)
	default:
		var own []splitPos
		for j := subtask; j < maxParallelism; j += parallelism {
			own = append(own, splitPos{Split: int64(j), Next: int64(j)})
		}
		st.Update(own)
	}
	if err != nil {
		return fmt.Errorf("restoring the read position: %w", err)
	}
	s.pos = append([]splitPos(nil), st.Get()...)
	// Read in index order while the splits advance together.
	slices.SortFunc(s.pos, func(a, b splitPos) int { return cmp.Compare(a.Next, b.Next) })
	for _, p := range s.pos {
		if p.Split < 0 || p.Split >= s.stride || p.Next < p.Split || (p.Next-p.Split)%s.stride != 0 {
			return fmt.Errorf("read position %+v is not a position of one of %d splits", p, s.stride)
		}
	}
	s.start = time.Now()
	return nil
}

func (s *indexSource[T]) done(p splitPos) bool { return s.count >= 0 && p.Next >= s.count }

// nextLive moves the cursor to the next split that is not exhausted; false
// if none is.
func (s *indexSource[T]) nextLive() bool {
	for range s.pos {
		if !s.done(s.pos[s.cur]) {
			return true
		}
		if s.cur++; s.cur == len(s.pos) {
			s.cur = 0
		}
	}
	return false
}

func (s *indexSource[T]) read(n int, emit func(T, int64) error) (runtime.ProduceStatus, error) {
	if s.rate > 0 {
		allowed := int64(time.Since(s.start).Seconds()*s.rate) - s.served
		if allowed <= 0 {
			return runtime.Idle, nil
		}
		n = int(min(int64(n), allowed))
	}
	if len(s.pos) == 0 {
		// More subtasks than splits: this one reads nothing.
		return runtime.Done, nil
	}
	for i := 0; i < n; i++ {
		p := &s.pos[s.cur]
		if s.done(*p) {
			// Skip exhausted splits; stop when all are.
			if !s.nextLive() {
				return runtime.Done, nil
			}
			p = &s.pos[s.cur]
		}
		ts := NoTimestamp
		if s.ts != nil {
			ts = s.ts(p.Next)
		}
		if err := emit(s.get(p.Next), ts); err != nil {
			return runtime.Produced, err
		}
		p.Next += s.stride
		if s.cur++; s.cur == len(s.pos) {
			s.cur = 0
		}
		s.served++
	}
	for _, p := range s.pos {
		if !s.done(p) {
			return runtime.Produced, nil
		}
	}
	return runtime.Done, nil
}

// offset returns the split positions, and as text the number of records
// this subtask's splits have emitted in all runs.
func (s *indexSource[T]) offset() ([]byte, string) {
	s.splits.Update(s.pos)
	var emitted int64
	for _, p := range s.pos {
		emitted += (p.Next - p.Split) / s.stride
	}
	return s.splits.Snapshot(), fmt.Sprintf("emitted %d records of %d splits", emitted, len(s.pos))
}

func (s *indexSource[T]) close() error { return nil }

// FromSlice is a bounded source of the elements of items. With parallelism
// p, subtask s emits items s, s+p, s+2p, ...; its offset is the next index.
func FromSlice[T any](env *Environment, name string, items []T) Stream[T] {
	return addSource(env, name, env.opts.Parallelism, func() sourceImpl[T] {
		return &indexSource[T]{count: int64(len(items)), get: func(i int64) T { return items[i] }}
	})
}

// GeneratorOptions configures FromGenerator.
type GeneratorOptions struct {
	// Count is the number of records; negative means unbounded.
	Count int64
	// RatePerSecond limits each subtask's rate (0: as fast as possible).
	RatePerSecond float64
	// Timestamp, if set, gives record i its event time in milliseconds.
	Timestamp func(i int64) int64
}

// FromGenerator is a source of gen(0), gen(1), ... . gen must be a pure
// function of i: a restored job regenerates records from its offset.
func FromGenerator[T any](env *Environment, name string, opts GeneratorOptions, gen func(i int64) T) Stream[T] {
	if opts.RatePerSecond < 0 {
		env.fail(fmt.Errorf("generator %q: negative rate %v", name, opts.RatePerSecond))
	}
	return addSource(env, name, env.opts.Parallelism, func() sourceImpl[T] {
		return &indexSource[T]{count: opts.Count, get: gen, ts: opts.Timestamp, rate: opts.RatePerSecond}
	})
}

// lineSource reads lines of one file; its offset is the byte offset of the
// next line.
type lineSource struct {
	path string
	f    *os.File
	r    *bufio.Reader
	pos  int64
	done bool
}

func (s *lineSource) open(subtask, parallelism, _ int, offset []byte, rescaled [][]byte) error {
	if rescaled != nil {
		return fmt.Errorf("a file source cannot change its parallelism")
	}
	if offset != nil {
		v, err := decodeIndex(offset)
		if err != nil {
			return err
		}
		s.pos = v
	}
	if subtask != 0 {
		s.done = true
		return nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", s.path, err)
	}
	if s.pos > 0 {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		if s.pos > fi.Size() {
			f.Close()
			return fmt.Errorf("restoring %s at byte %d: the file has only %d bytes", s.path, s.pos, fi.Size())
		}
		if _, err := f.Seek(s.pos, io.SeekStart); err != nil {
			f.Close()
			return err
		}
	}
	s.f = f
	s.r = bufio.NewReaderSize(f, 64<<10)
	return nil
}

func (s *lineSource) read(n int, emit func(string, int64) error) (runtime.ProduceStatus, error) {
	if s.done {
		return runtime.Done, nil
	}
	for i := 0; i < n; i++ {
		line, err := s.r.ReadString('\n')
		if len(line) > 0 && (err == nil || errors.Is(err, io.EOF)) {
			s.pos += int64(len(line))
			if line[len(line)-1] == '\n' {
				line = line[:len(line)-1]
				if len(line) > 0 && line[len(line)-1] == '\r' {
					line = line[:len(line)-1]
				}
			}
			if err := emit(line, NoTimestamp); err != nil {
				return runtime.Produced, err
			}
		}
		if errors.Is(err, io.EOF) {
			s.done = true
			return runtime.Done, nil
		}
		if err != nil {
			return runtime.Produced, fmt.Errorf("reading %s at byte %d: %w", s.path, s.pos, err)
		}
	}
	return runtime.Produced, nil
}

func decodeIndex(b []byte) (int64, error) {
	v, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return 0, fmt.Errorf("decoding source offset %x: not a varint", b)
	}
	return v, nil
}

func (s *lineSource) offset() ([]byte, string) {
	return binary.AppendVarint(nil, s.pos), fmt.Sprintf("file=%s offset=%d", s.path, s.pos)
}

func (s *lineSource) close() error {
	if s.f != nil {
		return s.f.Close()
	}
	return nil
}

// FromLines is a bounded source of the lines of the file at path (without
// line terminators). It runs at parallelism 1; its offset is the byte
// offset of the next line, so a restored job continues where it stopped.
func FromLines(env *Environment, name, path string) Stream[string] {
	s := addSource(env, name, 1, func() sourceImpl[string] { return &lineSource{path: path} })
	s.node.fixedParallelism = true
	return s
}

// FromSource reads a connector's replayable source at the given
// parallelism.
func FromSource[T any](env *Environment, name string, parallelism int, src connector.Source[T]) Stream[T] {
	return addSource(env, name, parallelism, func() sourceImpl[T] { return &connectorSource[T]{name: name, src: src} })
}

// connectorSource adapts a connector.Source to the source member.
type connectorSource[T any] struct {
	name string
	src  connector.Source[T]
	r    connector.SourceReader[T]
}

func (s *connectorSource[T]) open(subtask, parallelism, maxParallelism int, offset []byte, rescaled [][]byte) error {
	r, err := s.src.Open(connector.SourceContext{UID: s.name, Subtask: subtask, Parallelism: parallelism, MaxParallelism: maxParallelism}, offset, rescaled)
	if err != nil {
		return err
	}
	s.r = r
	return nil
}

func (s *connectorSource[T]) read(n int, emit func(T, int64) error) (runtime.ProduceStatus, error) {
	st, err := s.r.Read(n, emit)
	switch st {
	case connector.Idle:
		return runtime.Idle, err
	case connector.Done:
		return runtime.Done, err
	}
	return runtime.Produced, err
}

func (s *connectorSource[T]) offset() ([]byte, string) { return s.r.Offset() }

func (s *connectorSource[T]) close() error {
	if s.r == nil {
		return nil
	}
	return s.r.Close()
}
