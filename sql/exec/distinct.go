package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

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

// distinctNumKey is the key of an entry of an integer column's value: the
// group's key (as the operator's value state keys it), the slot, and the
// value. Its slots hold no second string, as the keys of other columns'
// values do (distinctStrKey): DISTINCT over integers is the common case
// and can hold millions of entries.
type distinctNumKey struct {
	group string
	slot  uint32
	num   int64
}

// distinctStrKey is the key of an entry of any other column's value: str
// is the value's types.AppendKey encoding.
type distinctStrKey struct {
	group string
	slot  uint32
	str   string
}

// distinctCounts holds, per lane of the slot, how many rows of the group
// added the value and were not retracted. An entry whose counts are all 0
// is removed. A count that would pass maxDistinctCount fails the job.
type distinctCounts [distinctLanes]uint32

// maxDistinctCount is the most rows of one group that a lane counts with
// one value at once.
const maxDistinctCount = math.MaxUint32

// The tables of DISTINCT values, as checkpoints name them. The integer
// table keeps the key encoding of the single table that held every value
// before string values moved to a table of their own; it refuses a string
// value's entry, which only a checkpoint of that time holds.
const (
	distinctNumStateName = "distinct"
	distinctStrStateName = "distinct-str"
)

// distinctTables are a group aggregation's DISTINCT values; str is nil
// when no slot needs it.
type distinctTables struct {
	num *state.ValueState[distinctNumKey, distinctCounts]
	str *state.ValueState[distinctStrKey, distinctCounts]
}

// newDistinctState registers with a subtask's backend the tables the
// slots need.
func newDistinctState(b state.Backend, slots []distinctSlot) (*distinctTables, error) {
	mp, ok := b.(interface{ MaxParallelism() int })
	if !ok {
		return nil, fmt.Errorf("state backend %q does not say its max parallelism", b.Name())
	}
	var str bool
	for _, sl := range slots {
		str = str || !sl.num
	}
	// The integer table is registered even when no slot is of integers:
	// restored from a checkpoint of the single table, its string entries
	// fail the decode rather than stay unread while the string table
	// starts empty.
	var ts distinctTables
	var err error
	if ts.num, err = state.NewValue(b, distinctNumStateName, distinctNumKeyCodec{maxPar: mp.MaxParallelism()}, distinctCountsCodec{}); err != nil {
		return nil, err
	}
	if str {
		if ts.str, err = state.NewValue(b, distinctStrStateName, distinctStrKeyCodec{maxPar: mp.MaxParallelism()}, distinctCountsCodec{}); err != nil {
			return nil, err
		}
	}
	return &ts, nil
}

// distinctNumKeyCodec encodes distinctNumKeys (group, slot, value and an
// empty string, the old single table's encoding) and hashes them into the
// key group of their group's key, so that they stay with the group when a
// job is rescaled.
type distinctNumKeyCodec struct{ maxPar int }

// HashKey implements state.KeyHasher: the key group is that of the group
// key (hashed as the operator's string keys are), the rest comes from the
// slot and value.
func (c distinctNumKeyCodec) HashKey(k distinctNumKey) uint64 {
	e := state.HashUint64(uint64(k.num) + uint64(k.slot)*0x9e3779b97f4a7c15)
	return state.HashInKeyGroup(state.HashString(k.group), e, c.maxPar)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func (distinctNumKeyCodec) Append(dst []byte, k distinctNumKey) []byte {
	dst = appendString(dst, k.group)
	dst = binary.AppendUvarint(dst, uint64(k.slot))
	dst = binary.AppendVarint(dst, k.num)
	return binary.AppendUvarint(dst, 0)
}

var errDistinctKey = errors.New("corrupt DISTINCT value key")

func (distinctNumKeyCodec) Decode(src []byte) (distinctNumKey, int, error) {
	return decodeDistinctNumKey(src, nil)
}

// NewDecoder implements state.RunDecoder: a key group's entries are those
// of the groups whose keys hash to it, a few hundred at most in a large
// job, so a key takes the string of its group decoded first in the run
// rather than a copy of its own (up to distinctSharedGroups groups).
func (distinctNumKeyCodec) NewDecoder() func(src []byte) (distinctNumKey, int, error) {
	groups := map[string]string{}
	return func(src []byte) (distinctNumKey, int, error) {
		return decodeDistinctNumKey(src, groups)
	}
}

func decodeDistinctNumKey(src []byte, groups map[string]string) (distinctNumKey, int, error) {
	var k distinctNumKey
	group, slot, at, err := decodeDistinctHead(src, groups)
	if err != nil {
		return k, 0, err
	}
	num, n := binary.Varint(src[at:])
	if n <= 0 {
		return k, 0, errDistinctKey
	}
	at += n
	switch l, n := binary.Uvarint(src[at:]); {
	case n <= 0:
		return k, 0, errDistinctKey
	case l != 0:
		return k, 0, fmt.Errorf("DISTINCT value key of slot %d in table %q holds a string value: "+
			"the checkpoint was written by an older version, which kept every DISTINCT value in one table", slot, distinctNumStateName)
	default:
		at += n
	}
	k.group, k.slot, k.num = group, slot, num
	return k, at, nil
}

// distinctStrKeyCodec encodes distinctStrKeys (group, slot, value) and
// hashes them as distinctNumKeyCodec does.
type distinctStrKeyCodec struct{ maxPar int }

// HashKey implements state.KeyHasher.
func (c distinctStrKeyCodec) HashKey(k distinctStrKey) uint64 {
	e := state.HashUint64(uint64(k.slot)*0x9e3779b97f4a7c15) ^ state.HashString(k.str)
	return state.HashInKeyGroup(state.HashString(k.group), e, c.maxPar)
}

func (distinctStrKeyCodec) Append(dst []byte, k distinctStrKey) []byte {
	dst = appendString(dst, k.group)
	dst = binary.AppendUvarint(dst, uint64(k.slot))
	return appendString(dst, k.str)
}

func (distinctStrKeyCodec) Decode(src []byte) (distinctStrKey, int, error) {
	return decodeDistinctStrKey(src, nil)
}

// NewDecoder implements state.RunDecoder, as distinctNumKeyCodec's does.
func (distinctStrKeyCodec) NewDecoder() func(src []byte) (distinctStrKey, int, error) {
	groups := map[string]string{}
	return func(src []byte) (distinctStrKey, int, error) {
		return decodeDistinctStrKey(src, groups)
	}
}

func decodeDistinctStrKey(src []byte, groups map[string]string) (distinctStrKey, int, error) {
	var k distinctStrKey
	group, slot, at, err := decodeDistinctHead(src, groups)
	if err != nil {
		return k, 0, err
	}
	l, n := binary.Uvarint(src[at:])
	if n <= 0 || l > uint64(len(src)-at-n) {
		return k, 0, errDistinctKey
	}
	at += n
	k.group, k.slot, k.str = group, slot, string(src[at:at+int(l)])
	return k, at + int(l), nil
}

// distinctSharedGroups bounds the group strings a run decoder keeps.
const distinctSharedGroups = 4096

// decodeDistinctHead decodes a key's group and slot and returns where its
// value starts; with groups not nil, the group is the string of an equal
// group in it, or added to it while it has room.
func decodeDistinctHead(src []byte, groups map[string]string) (group string, slot uint32, at int, err error) {
	l, n := binary.Uvarint(src)
	if n <= 0 || l > uint64(len(src)-n) {
		return "", 0, 0, errDistinctKey
	}
	at = n + int(l)
	g := src[n:at]
	if groups == nil {
		group = string(g)
	} else if shared, ok := groups[string(g)]; ok {
		group = shared
	} else {
		group = string(g)
		if len(groups) < distinctSharedGroups {
			groups[group] = group
		}
	}
	s, n := binary.Uvarint(src[at:])
	if n <= 0 || s > 1<<31 {
		return "", 0, 0, errDistinctKey
	}
	return group, uint32(s), at + n, nil
}

// distinctCountsCodec encodes the counts as varints (as signed integers:
// the encoding of the int64 counts of earlier versions).
type distinctCountsCodec struct{}

func (distinctCountsCodec) Append(dst []byte, c distinctCounts) []byte {
	for _, n := range c {
		dst = binary.AppendVarint(dst, int64(n))
	}
	return dst
}

func (distinctCountsCodec) Decode(src []byte) (distinctCounts, int, error) {
	var c distinctCounts
	if len(src) >= len(c) {
		// Counts below 64 (most of them) are a byte each, even: the
		// varint of a non-negative count n is the byte 2n.
		var or byte
		for _, b := range src[:len(c)] {
			or |= b
		}
		if or&0x81 == 0 {
			for i, b := range src[:len(c)] {
				c[i] = uint32(b >> 1)
			}
			return c, len(c), nil
		}
	}
	at := 0
	for i := range c {
		n, m := binary.Varint(src[at:])
		if n < 0 || n > maxDistinctCount || m <= 0 {
			return c, 0, errors.New("corrupt DISTINCT value counts")
		}
		c[i], at = uint32(n), at+m
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
// each value's first addition and last retraction. With note, it appends
// each accumulator it feeds, with its result before, to noted, which it
// returns.
//
// Over an input without retractions (insertOnly) a lane's count only says
// whether the value was seen: it stays 1, and a value every lane of the
// row has seen leaves its entry as it is. The entries then change only
// when values arrive that the group had not seen, so a checkpoint's delta
// holds the new values alone, however often the old ones recur. (An entry
// restored with a count above 1 keeps it; only zero and non-zero differ.)
func accumulateDistinct(ds *distinctTables, slots []distinctSlot, aggs []planner.AggCall, st *groupState, r types.Row, add, insertOnly, note bool, noted []changedAcc) ([]changedAcc, error) {
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
		var changed uint
		var err error
		if sl.num {
			k := distinctNumKey{group: st.key, slot: uint32(si), num: v.Int64()}
			changed, err = countDistinct(ds.num, k, sl, aggs, v, lanes, add, insertOnly)
		} else {
			k := distinctStrKey{group: st.key, slot: uint32(si), str: string(types.AppendKey(buf[:0], v))}
			changed, err = countDistinct(ds.str, k, sl, aggs, v, lanes, add, insertOnly)
		}
		if err != nil {
			return noted, err
		}
		for l, i := range sl.aggs {
			if changed&(1<<l) == 0 {
				continue
			}
			if note {
				noted = append(noted, changedAcc{i: i, before: st.accs[i].Result()})
			}
			if err := addOrRetract(st.accs[i], v, add); err != nil {
				return noted, fmt.Errorf("%s: %w", aggs[i].Text, err)
			}
		}
	}
	return noted, nil
}

// countDistinct counts value v, keyed k, in the lanes of slot sl that the
// row feeds, and returns the lanes whose count went from 0 to 1 or from 1
// to 0.
func countDistinct[K comparable](ds *state.ValueState[K, distinctCounts], k K, sl *distinctSlot, aggs []planner.AggCall, v types.Value, lanes uint, add, insertOnly bool) (changed uint, err error) {
	c, _ := ds.Get(k)
	for l := range sl.aggs {
		if lanes&(1<<l) == 0 {
			continue
		}
		if add {
			switch {
			case c[l] == 0:
				changed |= 1 << l
			case insertOnly:
				continue
			case c[l] == maxDistinctCount:
				a := aggs[sl.aggs[l]]
				return 0, fmt.Errorf("%s: value %s is in more than %d rows of the group", a.Text, v, uint32(maxDistinctCount))
			}
			c[l]++
			continue
		}
		if c[l] == 0 {
			a := aggs[sl.aggs[l]]
			return 0, fmt.Errorf("%s: retracting %s, which was never added", a.Text, v)
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
	return changed, nil
}
