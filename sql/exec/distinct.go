package exec

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
	"github.com/clinkstream/clink/state"
)

// The DISTINCT aggregates of a group aggregation keep their values as
// keyed state entries of their own, as Flink's distinct aggregates keep a
// MapView: one entry per group, distinct column and value, with how many
// rows of the group added that value for each aggregate over the column
// (a FILTER makes them differ). The group's accumulator of such an
// aggregate (expr.AggFunc.NewDeduplicated) sees a value's first addition
// and the retraction of its last one. A change of one value then changes
// one entry, and an incremental checkpoint writes that entry, not the
// whole set.

// distinctLanes is how many aggregates over one column share an entry;
// more of them take further entries (slots) for the same value.
const distinctLanes = 4

// distinctSlot is up to distinctLanes DISTINCT aggregates over one input
// column: the unit that shares one entry per value.
type distinctSlot struct {
	col int
	// num: the column is an integer, and its values key entries by their
	// int64 (no encoding, no allocation).
	num bool
	// aggs are the aggregates' indexes in the operator's aggregates, and
	// filters their FILTER columns (-1: none), one per lane.
	aggs, filters []int
}

// planDistinct splits the DISTINCT aggregates into slots, by column in the
// order they first appear; distinct[i] says whether aggregate i is one.
func planDistinct(aggs []planner.AggCall) (slots []distinctSlot, distinct []bool) {
	distinct = make([]bool, len(aggs))
	for i, a := range aggs {
		if !a.Func.Spec.Distinct || a.Arg < 0 {
			continue
		}
		distinct[i] = true
		j := len(slots) - 1
		for ; j >= 0; j-- {
			if slots[j].col == a.Arg && len(slots[j].aggs) < distinctLanes {
				break
			}
		}
		if j < 0 {
			slots = append(slots, distinctSlot{col: a.Arg, num: a.Func.Spec.Args[0].Kind.IsInteger()})
			j = len(slots) - 1
		}
		slots[j].aggs = append(slots[j].aggs, i)
		slots[j].filters = append(slots[j].filters, a.Filter)
	}
	return slots, distinct
}

// distinctKey is the key of one entry: the group's key (as the operator's
// value state keys it), the slot, and the value: num for an integer
// column, otherwise str, the value's types.AppendKey encoding.
type distinctKey struct {
	group string
	slot  uint32
	num   int64
	str   string
}

// distinctCounts holds, per lane of the slot, how many rows of the group
// added the value and were not retracted. An entry whose counts are all 0
// is removed.
type distinctCounts [distinctLanes]int64

// distinctState is the table of a group aggregation's DISTINCT values.
type distinctState = state.ValueState[distinctKey, distinctCounts]

// distinctStateName names the table in checkpoints.
const distinctStateName = "distinct"

// newDistinctState registers the table with a subtask's backend.
func newDistinctState(b state.Backend) (*distinctState, error) {
	mp, ok := b.(interface{ MaxParallelism() int })
	if !ok {
		return nil, fmt.Errorf("state backend %q does not say its max parallelism", b.Name())
	}
	return state.NewValue(b, distinctStateName, distinctKeyCodec{maxPar: mp.MaxParallelism()}, distinctCountsCodec{})
}

// distinctKeyCodec encodes distinctKeys and hashes them into the key group
// of their group's key, so that they stay with the group when a job is
// rescaled.
type distinctKeyCodec struct{ maxPar int }

// HashKey implements state.KeyHasher: the key group is that of the group
// key (hashed as the operator's string keys are), the rest comes from the
// slot and value.
func (c distinctKeyCodec) HashKey(k distinctKey) uint64 {
	e := state.HashUint64(uint64(k.num) + uint64(k.slot)*0x9e3779b97f4a7c15)
	if k.str != "" {
		e ^= state.HashString(k.str)
	}
	return state.HashInKeyGroup(state.HashString(k.group), e, c.maxPar)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func (distinctKeyCodec) Append(dst []byte, k distinctKey) []byte {
	dst = appendString(dst, k.group)
	dst = binary.AppendUvarint(dst, uint64(k.slot))
	dst = binary.AppendVarint(dst, k.num)
	return appendString(dst, k.str)
}

var errDistinctKey = errors.New("corrupt DISTINCT value key")

func readString(src []byte, at int) (string, int, error) {
	l, n := binary.Uvarint(src[at:])
	if n <= 0 || l > uint64(len(src)-at-n) {
		return "", 0, errDistinctKey
	}
	at += n
	return string(src[at : at+int(l)]), at + int(l), nil
}

func (distinctKeyCodec) Decode(src []byte) (distinctKey, int, error) {
	return decodeDistinctKey(src, nil)
}

// NewDecoder implements state.RunDecoder: a key group's entries are those
// of the groups whose keys hash to it, a few hundred at most in a large
// job, so a key takes the string of its group decoded first in the run
// rather than a copy of its own (up to distinctSharedGroups groups).
func (distinctKeyCodec) NewDecoder() func(src []byte) (distinctKey, int, error) {
	groups := map[string]string{}
	return func(src []byte) (distinctKey, int, error) {
		return decodeDistinctKey(src, groups)
	}
}

// distinctSharedGroups bounds the group strings a run decoder keeps.
const distinctSharedGroups = 4096

// decodeDistinctKey decodes a key; with groups not nil, the key takes the
// string of an equal group in it, or adds its own while it has room.
func decodeDistinctKey(src []byte, groups map[string]string) (distinctKey, int, error) {
	var k distinctKey
	l, n := binary.Uvarint(src)
	if n <= 0 || l > uint64(len(src)-n) {
		return k, 0, errDistinctKey
	}
	at := n + int(l)
	g := src[n:at]
	if groups == nil {
		k.group = string(g)
	} else if shared, ok := groups[string(g)]; ok {
		k.group = shared
	} else {
		k.group = string(g)
		if len(groups) < distinctSharedGroups {
			groups[k.group] = k.group
		}
	}
	slot, n := binary.Uvarint(src[at:])
	if n <= 0 || slot > 1<<31 {
		return k, 0, errDistinctKey
	}
	at += n
	num, n := binary.Varint(src[at:])
	if n <= 0 {
		return k, 0, errDistinctKey
	}
	at += n
	str, at, err := readString(src, at)
	if err != nil {
		return k, 0, err
	}
	k.slot, k.num, k.str = uint32(slot), num, str
	return k, at, nil
}

// distinctCountsCodec encodes the counts as varints.
type distinctCountsCodec struct{}

func (distinctCountsCodec) Append(dst []byte, c distinctCounts) []byte {
	for _, n := range c {
		dst = binary.AppendVarint(dst, n)
	}
	return dst
}

func (distinctCountsCodec) Decode(src []byte) (distinctCounts, int, error) {
	var c distinctCounts
	at := 0
	for i := range c {
		n, m := binary.Varint(src[at:])
		if n < 0 || m <= 0 {
			return c, 0, errors.New("corrupt DISTINCT value counts")
		}
		c[i], at = n, at+m
	}
	return c, at, nil
}

// passes reports whether a FILTER column lets a row into an aggregate.
func passes(r types.Row, filter int) bool {
	if filter < 0 {
		return true
	}
	f := r.Values[filter]
	return !f.IsNull() && f.Bool()
}

// aggInput returns the value that aggregate call a takes from row r (NULL
// for COUNT(*)), and false when a's FILTER drops the row.
func aggInput(a *planner.AggCall, r types.Row) (types.Value, bool) {
	if !passes(r, a.Filter) {
		return types.Null, false
	}
	if a.Arg < 0 {
		return types.Null, true
	}
	return r.Values[a.Arg], true
}

// addOrRetract adds v to acc, or retracts it from acc.
func addOrRetract(acc expr.Accumulator, v types.Value, add bool) error {
	if add {
		return acc.Add(v)
	}
	return acc.Retract(v)
}

// accumulateDistinct adds (or retracts) row r's values of the DISTINCT
// aggregates of group st, whose key is group, and feeds st's accumulators
// each value's first addition and last retraction.
//
// Over an input without retractions (insertOnly) a lane's count only says
// whether the value was seen: it stays 1, and a value every lane of the
// row has seen leaves its entry as it is. The entries then change only
// when values arrive that the group had not seen, so a checkpoint's delta
// holds the new values alone, however often the old ones recur. (An entry
// restored with a count above 1 keeps it; only zero and non-zero differ.)
func accumulateDistinct(ds *distinctState, slots []distinctSlot, aggs []planner.AggCall, st *groupState, r types.Row, add, insertOnly bool) error {
	var buf [32]byte
	for si := range slots {
		sl := &slots[si]
		v := r.Values[sl.col]
		if v.IsNull() {
			continue
		}
		var lanes uint
		for l, f := range sl.filters {
			if passes(r, f) {
				lanes |= 1 << l
			}
		}
		if lanes == 0 {
			continue
		}
		k := distinctKey{group: st.key, slot: uint32(si)}
		if sl.num {
			k.num = v.Int64()
		} else {
			k.str = string(types.AppendKey(buf[:0], v))
		}
		c, _ := ds.Get(k)
		var changed uint // lanes whose count went from 0 to 1 or from 1 to 0
		for l := range sl.aggs {
			if lanes&(1<<l) == 0 {
				continue
			}
			if add {
				if c[l] == 0 {
					changed |= 1 << l
				} else if insertOnly {
					continue
				}
				c[l]++
				continue
			}
			if c[l] == 0 {
				a := aggs[sl.aggs[l]]
				return fmt.Errorf("%s: retracting %s, which was never added", a.Text, v)
			}
			if c[l]--; c[l] == 0 {
				changed |= 1 << l
			}
		}
		switch {
		case insertOnly && changed == 0:
			// Seen by every lane the row feeds: the entry stays.
		case c == (distinctCounts{}):
			ds.Delete(k)
		default:
			ds.Put(k, c)
		}
		for l, i := range sl.aggs {
			if changed&(1<<l) == 0 {
				continue
			}
			if err := addOrRetract(st.accs[i], v, add); err != nil {
				return fmt.Errorf("%s: %w", aggs[i].Text, err)
			}
		}
	}
	return nil
}
