package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/clinkstream/clink/sql/types"
)

// joinState is one join key's rows of both sides of a regular join.
type joinState struct {
	Left, Right joinRows
}

// joinRows is one join key's rows of one side of a regular join, encoded
// one after the other in arrival order. A record is
//
//	flags    1 byte: joinNullKey for a row whose key has a NULL that
//	         equals nothing (such a row meets no other); joinExpires for
//	         a record that says when its row expires
//	expires  varint, with joinExpires only: the watermark at which no row
//	         still to come can meet this one (see planner.JoinRetention)
//	assoc    uvarint: the other side's rows it joins with; kept up to date
//	         for a side whose unmatched rows are padded (an outer side)
//	length   uvarint: the length of the row's encoding
//	row      the row's values, types.AppendValues
//
// A row that arrives twice has two records. The bytes within the slice's
// length never change, since the state backend may hold the slice in a
// checkpoint that is being written: a new row is appended past its end,
// any other change builds a new slice. That keeps a key's rows in one
// pointer-free allocation, which the garbage collector does not scan and
// a checkpoint copies as it is.
type joinRows []byte

const (
	joinNullKey byte = 1 << 0
	// joinExpires marks a record of a side with a retention: its expiry
	// follows the flags, so that dropping the rows that expired reads no
	// row. (Records written before it have none; their rows are read.)
	joinExpires byte = 1 << 1
	// joinFlags are the flags a record may carry.
	joinFlags = joinNullKey | joinExpires
)

// errJoinState is wrapped by the errors of a join state that does not
// decode.
var errJoinState = errors.New("corrupt join state")

// joinRec is one record of a joinRows: its flags, its expiry (with
// joinExpires), its association count, its row's encoding, and where it
// ends in the joinRows.
type joinRec struct {
	flags   byte
	expires int64
	assoc   int64
	row     []byte
	end     int
}

// rec decodes the record at off.
func (rs joinRows) rec(off int) (joinRec, error) {
	if off >= len(rs) || rs[off]&^joinFlags != 0 {
		return joinRec{}, fmt.Errorf("%w: bad record flags at byte %d", errJoinState, off)
	}
	r := joinRec{flags: rs[off]}
	p := off + 1
	if r.flags&joinExpires != 0 {
		e, n := binary.Varint(rs[p:])
		if n <= 0 {
			return joinRec{}, fmt.Errorf("%w: bad expiry at byte %d", errJoinState, p)
		}
		r.expires = e
		p += n
	}
	assoc, n := binary.Uvarint(rs[p:])
	if n <= 0 || assoc > 1<<62 {
		return joinRec{}, fmt.Errorf("%w: bad association count at byte %d", errJoinState, p)
	}
	p += n
	l, n := binary.Uvarint(rs[p:])
	if n <= 0 || l > uint64(len(rs)-p-n) {
		return joinRec{}, fmt.Errorf("%w: bad row length at byte %d", errJoinState, p)
	}
	p += n
	r.assoc, r.row, r.end = int64(assoc), rs[p:p+int(l):p+int(l)], p+int(l)
	return r, nil
}

// appendJoinRec appends a record without an expiry of a row whose
// encoding is row, growing rs at most once.
func appendJoinRec(rs joinRows, flags byte, assoc int64, row []byte) joinRows {
	return appendJoinRecExpiring(rs, flags&^joinExpires, 0, assoc, row)
}

// appendJoinRecExpiring appends a record as appendJoinRec does, with the
// expiry expires when flags has joinExpires.
func appendJoinRecExpiring(rs joinRows, flags byte, expires, assoc int64, row []byte) joinRows {
	need := 1 + uvarintLen(uint64(assoc)) + uvarintLen(uint64(len(row))) + len(row)
	if flags&joinExpires != 0 {
		need += varintLen(expires)
	}
	if cap(rs)-len(rs) < need {
		if len(rs) == 0 {
			// The first row of a key: most keys keep one or two rows, so
			// no room is left for more.
			rs = make(joinRows, 0, need)
		} else {
			rs = slices.Grow(rs, need)
		}
	}
	rs = append(rs, flags)
	if flags&joinExpires != 0 {
		rs = binary.AppendVarint(rs, expires)
	}
	rs = binary.AppendUvarint(rs, uint64(assoc))
	rs = binary.AppendUvarint(rs, uint64(len(row)))
	return append(rs, row...)
}

// uvarintLen returns the length of x's uvarint encoding.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// varintLen returns the length of x's varint (zig-zag) encoding.
func varintLen(x int64) int { return uvarintLen(uint64(x<<1) ^ uint64(x>>63)) }

// decodeJoinRow decodes a record's row into dst (one value per column)
// and checks that the encoding holds exactly that many values. String
// values share row's bytes, which never change (see joinRows).
func decodeJoinRow(dst []types.Value, row []byte) error {
	if len(row) == 0 {
		if len(dst) == 0 {
			return nil
		}
		return fmt.Errorf("%w: an empty row of %d columns", errJoinState, len(dst))
	}
	n, err := types.DecodeValuesInto(dst, unsafe.String(&row[0], len(row)))
	if err != nil {
		return fmt.Errorf("%w: %w", errJoinState, err)
	}
	if n != len(row) {
		return fmt.Errorf("%w: %d bytes after a row of %d columns", errJoinState, len(row)-n, len(dst))
	}
	return nil
}

// rewrite returns a copy of rs without the record at skip (-1: none) and
// with delta added to the association count of the records at the offsets
// in bump (ascending).
func (rs joinRows) rewrite(skip int, bump []int, delta int64) (joinRows, error) {
	out := make(joinRows, 0, len(rs))
	for off := 0; off < len(rs); {
		r, err := rs.rec(off)
		if err != nil {
			return nil, err
		}
		switch {
		case off == skip:
		case len(bump) > 0 && bump[0] == off:
			bump = bump[1:]
			out = appendJoinRecExpiring(out, r.flags, r.expires, max(0, r.assoc+delta), r.row)
		default:
			out = append(out, rs[off:r.end]...)
		}
		off = r.end
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// retained returns rs without the records whose expiry keep reports false
// for, and whether any went; rs itself when none did. A record's expiry is
// its own (joinExpires), or else expiryOf's of its row's first cols
// columns (the rest is not decoded); a record without one (ok false) goes.
func (rs joinRows) retained(cols int, expiryOf func(row []types.Value) (int64, bool), keep func(expires int64) bool) (joinRows, bool, error) {
	var tmp []types.Value
	var out joinRows
	dropped := false
	for off := 0; off < len(rs); {
		r, err := rs.rec(off)
		if err != nil {
			return nil, false, err
		}
		exp, ok := r.expires, true
		if r.flags&joinExpires == 0 {
			if tmp == nil {
				tmp = make([]types.Value, cols)
			}
			if _, err := types.DecodeValuesInto(tmp, unsafe.String(unsafe.SliceData(r.row), len(r.row))); err != nil {
				return nil, false, fmt.Errorf("%w: %w", errJoinState, err)
			}
			exp, ok = expiryOf(tmp)
		}
		if ok && keep(exp) {
			if dropped {
				if out == nil {
					out = make(joinRows, 0, len(rs)-off)
				}
				out = append(out, rs[off:r.end]...)
			}
		} else if !dropped {
			// The first record to go: a new slice with those before it
			// (the held one may be in a checkpoint), if any; records
			// kept after it are appended to it.
			dropped = true
			if off > 0 {
				out = append(make(joinRows, 0, len(rs)-(r.end-off)), rs[:off]...)
			}
		}
		off = r.end
	}
	if !dropped {
		return rs, false, nil
	}
	if len(out) == 0 {
		return nil, true, nil
	}
	return out, true, nil
}
