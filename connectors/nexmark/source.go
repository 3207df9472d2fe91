package nexmark

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/clinkstream/clink/connector"
)

// Source is a replayable connector.Source of Nexmark events.
//
// The index space is cut into S splits, S being the job's maximum
// parallelism when it first starts: split j holds the indexes j, j+S,
// j+2S, ... Subtask s of p owns the splits j with j mod p = s and reads
// them round robin, so it emits s, s+p, s+2p, ... in order, each event
// with its event time. Its offset is the base time and the next index of
// every split it owns; a job restored at another parallelism deals the
// splits out again (split j to subtask j mod p), each resuming where it
// stopped. Which events exist and what they hold does not depend on the
// parallelism, nor on where a job was restored.
type Source struct {
	cfg Config
	// explicitBase records whether the configuration fixed the base time;
	// if not, a restored job takes the one its checkpoint recorded.
	explicitBase bool
	now          func() time.Time
}

// NewSource validates cfg and returns the source. A zero BaseTime is
// resolved to the wall clock now, once for all subtasks.
func NewSource(cfg Config) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, explicitBase: cfg.BaseTime != 0, now: time.Now}
	if !s.explicitBase {
		s.cfg.BaseTime = time.Now().UnixMilli()
	}
	return s, nil
}

// Config returns the source's configuration, its base time resolved.
func (s *Source) Config() Config { return s.cfg }

// offsetVersion is the first byte of an encoded offset.
const offsetVersion = 1

// split is the next index of one split.
type split struct{ id, next int64 }

// position is what an offset holds.
type position struct {
	baseTime int64
	splits   int64 // S, the number of splits
	own      []split
}

func (p position) encode() []byte {
	b := []byte{offsetVersion}
	b = binary.AppendVarint(b, p.baseTime)
	b = binary.AppendUvarint(b, uint64(p.splits))
	b = binary.AppendUvarint(b, uint64(len(p.own)))
	for _, sp := range p.own {
		b = binary.AppendUvarint(b, uint64(sp.id))
		b = binary.AppendUvarint(b, uint64(sp.next))
	}
	return b
}

func decodePosition(b []byte) (position, error) {
	var p position
	if len(b) == 0 || b[0] != offsetVersion {
		return p, fmt.Errorf("decoding nexmark offset %x: unknown version", b)
	}
	b = b[1:]
	bad := fmt.Errorf("decoding nexmark offset: truncated or corrupt")
	v, n := binary.Varint(b)
	if n <= 0 {
		return p, bad
	}
	p.baseTime, b = v, b[n:]
	var u [2]uint64
	for k := range u {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return p, bad
		}
		u[k], b = x, b[n:]
	}
	p.splits = int64(u[0])
	if p.splits <= 0 || p.splits > 1<<20 || u[1] > uint64(p.splits) {
		return p, fmt.Errorf("decoding nexmark offset: %d splits of %d", u[1], p.splits)
	}
	for range u[1] {
		var sp [2]uint64
		for k := range sp {
			x, n := binary.Uvarint(b)
			if n <= 0 {
				return p, bad
			}
			sp[k], b = x, b[n:]
		}
		id, next := int64(sp[0]), int64(sp[1])
		if id >= p.splits || next < id || next > 1<<62 || (next-id)%p.splits != 0 {
			return p, fmt.Errorf("decoding nexmark offset: %d is not a position of split %d of %d", next, id, p.splits)
		}
		p.own = append(p.own, split{id, next})
	}
	if len(b) != 0 {
		return p, fmt.Errorf("decoding nexmark offset: %d trailing bytes", len(b))
	}
	return p, nil
}

// Open returns subtask ctx.Subtask's reader. See Source for how the
// splits are owned and redistributed.
func (s *Source) Open(ctx connector.SourceContext, offset []byte, rescaled [][]byte) (connector.SourceReader[Event], error) {
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return nil, fmt.Errorf("opening nexmark source: subtask %d of %d", ctx.Subtask, ctx.Parallelism)
	}
	var pos position
	switch {
	case rescaled != nil:
		all := make(map[int64]split)
		for k, o := range rescaled {
			old, err := decodePosition(o)
			if err != nil {
				return nil, fmt.Errorf("restoring nexmark source from old subtask %d: %w", k, err)
			}
			if k == 0 {
				pos.baseTime, pos.splits = old.baseTime, old.splits
			} else if old.baseTime != pos.baseTime || old.splits != pos.splits {
				return nil, fmt.Errorf("restoring nexmark source: old subtasks disagree (base time %d vs %d, %d vs %d splits)",
					old.baseTime, pos.baseTime, old.splits, pos.splits)
			}
			for _, sp := range old.own {
				if _, dup := all[sp.id]; dup {
					return nil, fmt.Errorf("restoring nexmark source: split %d is owned by two old subtasks", sp.id)
				}
				all[sp.id] = sp
			}
		}
		if int64(len(all)) != pos.splits {
			return nil, fmt.Errorf("restoring nexmark source: the old subtasks hold %d of %d splits", len(all), pos.splits)
		}
		for j := int64(ctx.Subtask); j < pos.splits; j += int64(ctx.Parallelism) {
			pos.own = append(pos.own, all[j])
		}
	case offset != nil:
		p, err := decodePosition(offset)
		if err != nil {
			return nil, fmt.Errorf("restoring nexmark source subtask %d: %w", ctx.Subtask, err)
		}
		pos = p
	default:
		pos.baseTime = s.cfg.BaseTime
		pos.splits = int64(max(ctx.MaxParallelism, ctx.Parallelism))
		for j := int64(ctx.Subtask); j < pos.splits; j += int64(ctx.Parallelism) {
			pos.own = append(pos.own, split{j, j})
		}
	}
	if s.explicitBase && pos.baseTime != s.cfg.BaseTime {
		return nil, fmt.Errorf("restoring nexmark source: the checkpoint's timeline starts at base-time %d, the job sets %d",
			pos.baseTime, s.cfg.BaseTime)
	}
	cfg := s.cfg
	cfg.BaseTime = pos.baseTime
	g, err := NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	// Read in index order while the splits advance together.
	slices.SortFunc(pos.own, func(a, b split) int { return cmp.Compare(a.next, b.next) })
	r := &Reader{g: g, pos: pos, now: s.now}
	if cfg.RateLimited {
		if i, ok := r.peek(); ok {
			// Continue at the configured rate from now on.
			r.start = r.now().Add(-time.Duration(g.dueOffset(i)) * time.Millisecond)
		}
	}
	return r, nil
}

// Reader is one subtask's reader; see Source.
type Reader struct {
	g   *Generator
	pos position
	// cur is the split to read next.
	cur int
	// start is the wall time the timeline's start maps to, when paced.
	start time.Time
	now   func() time.Time
	ev    Event
}

func (r *Reader) done(sp split) bool { return r.g.cfg.Events > 0 && sp.next >= r.g.cfg.Events }

// peek moves the cursor to the next split with events left and returns
// its next index.
func (r *Reader) peek() (int64, bool) {
	for range r.pos.own {
		if !r.done(r.pos.own[r.cur]) {
			return r.pos.own[r.cur].next, true
		}
		if r.cur++; r.cur == len(r.pos.own) {
			r.cur = 0
		}
	}
	return 0, false
}

// Read emits up to n events with their event times. When paced, it emits
// only the events that are due and reports Idle when none is.
func (r *Reader) Read(n int, emit func(Event, int64) error) (connector.ReadStatus, error) {
	var dueBy int64 = -1
	if r.g.cfg.RateLimited {
		dueBy = r.now().Sub(r.start).Milliseconds()
	}
	for range n {
		i, ok := r.peek()
		if !ok {
			return connector.Done, nil
		}
		if dueBy >= 0 && r.g.dueOffset(i) > dueBy {
			return connector.Idle, nil
		}
		r.g.Fill(i, &r.ev)
		if err := emit(r.ev, r.ev.DateTime()); err != nil {
			return connector.More, err
		}
		r.pos.own[r.cur].next += r.pos.splits
		if r.cur++; r.cur == len(r.pos.own) {
			r.cur = 0
		}
	}
	if _, ok := r.peek(); !ok {
		return connector.Done, nil
	}
	return connector.More, nil
}

// Offset returns the base time and split positions, and as text the
// number of events this subtask's splits have emitted in all runs.
func (r *Reader) Offset() ([]byte, string) {
	var emitted int64
	for _, sp := range r.pos.own {
		emitted += (sp.next - sp.id) / r.pos.splits
	}
	return r.pos.encode(), fmt.Sprintf("base-time=%d emitted %d events of %d splits", r.pos.baseTime, emitted, len(r.pos.own))
}

// Close releases nothing; the reader holds no resources.
func (r *Reader) Close() error { return nil }

var _ connector.Source[Event] = (*Source)(nil)
