package expr

import (
	"encoding/binary"
	"fmt"

	"github.com/clinkstream/clink/sql/types"
)

// An operator that keeps many small groups (a window aggregation keeps one
// per key and window) may hold the accumulators of COUNT and of an
// integer SUM, SUM0 or AVG as int64 slots of its own instead of an
// Accumulator each: adding a row then changes a slot in place and reading
// the result allocates nothing. The slots encode as the accumulator they
// stand for (AppendInline writes MarshalBinary's bytes and DecodeInline
// reads them), so state written by either layout restores in the other.

// inlineKind is how an accumulator is kept in int64 slots.
type inlineKind uint8

const (
	notInline inlineKind = iota
	// inlineCountStar is COUNT(*): slot 0 counts rows.
	inlineCountStar
	// inlineCount is COUNT(x): slot 0 counts non-NULL values.
	inlineCount
	// inlineSum, inlineSum0 and inlineAvg are SUM, SUM0 and AVG of an
	// integer type: slot 0 counts the values, slot 1 is their sum
	// (wrapping as Java's long, as sumAcc does).
	inlineSum
	inlineSum0
	inlineAvg
)

// InlineSlots is how many int64 slots hold an accumulator of f kept
// inline (see AddInline), or 0 when f's accumulators cannot be: COUNT and
// the SUM, SUM0 and AVG of an integer type, without DISTINCT, can.
// A new accumulator is its slots set to zero.
func (f *AggFunc) InlineSlots() int {
	switch f.inline {
	case inlineCountStar, inlineCount:
		return 1
	case inlineSum, inlineSum0, inlineAvg:
		return 2
	}
	return 0
}

// AddInline accumulates v into the InlineSlots() slots s, as Add does.
func (f *AggFunc) AddInline(s []int64, v types.Value) {
	switch f.inline {
	case inlineCountStar:
		s[0]++
	case inlineCount:
		if !v.IsNull() {
			s[0]++
		}
	default:
		if !v.IsNull() {
			s[0]++
			s[1] += v.Int64()
		}
	}
}

// InlineResult returns the result of the accumulator held in s, as
// Result does.
func (f *AggFunc) InlineResult(s []int64) types.Value {
	switch f.inline {
	case inlineCountStar, inlineCount:
		return types.Int64(s[0])
	}
	k := f.arg.Kind
	switch {
	case s[0] == 0 && f.inline == inlineSum0:
		return types.IntOf(k, 0)
	case s[0] == 0:
		return types.Null
	case f.inline == inlineAvg:
		return types.IntOf(k, s[1]/s[0])
	}
	return types.IntOf(k, s[1])
}

// AppendInline appends the encoding of the accumulator held in s: the
// bytes MarshalBinary of the same accumulator gives.
func (f *AggFunc) AppendInline(dst []byte, s []int64) []byte {
	switch f.inline {
	case inlineCountStar, inlineCount:
		return binary.AppendVarint(dst, s[0])
	}
	// sumAcc's encoding: count, integer sum, float sum (0), overflow (no),
	// DECIMAL sum (NULL).
	dst = binary.AppendVarint(dst, s[0])
	dst = binary.AppendVarint(dst, s[1])
	dst = binary.LittleEndian.AppendUint64(dst, 0)
	dst = append(dst, 0)
	return types.AppendKey(dst, types.Null)
}

// DecodeInline sets the slots s to the accumulator encoded in b (by
// MarshalBinary or AppendInline).
func (f *AggFunc) DecodeInline(b []byte, s []int64) error {
	var err error
	switch f.inline {
	case inlineCountStar, inlineCount:
		var a countAcc
		if err = a.UnmarshalBinary(b); err == nil {
			s[0] = a.n
		}
	case inlineSum, inlineSum0, inlineAvg:
		var a sumAcc
		if err = a.UnmarshalBinary(b); err == nil {
			if a.f != 0 || a.overflow || !a.d.IsNull() {
				// An integer sum never sets these.
				err = errCorruptAcc
			}
			s[0], s[1] = a.count, a.i
		}
	default:
		return fmt.Errorf("decoding %s accumulator: it is not kept inline", f.Spec.Name)
	}
	if err != nil {
		return fmt.Errorf("decoding %s accumulator: %w", f.Spec.Name, err)
	}
	return nil
}
