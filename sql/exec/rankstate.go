package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/sql/types"
	"github.com/clinkstream/clink/state"
)

// The state of a deduplication and of a Top-N over insert-only input is
// kept as bytes rather than as Go rows: one pointer-free allocation per
// key, which the garbage collector does not scan and a checkpoint copies
// as it is. The bytes are the ones the reflection codec wrote for the
// earlier types.Row and rankState values, so checkpoints of either form
// restore into the other. They never change once stored: the state
// backend may hold them in a checkpoint being written, so every change
// builds new bytes, and rows decoded from them may share their strings.

// errRankState is wrapped by the errors of a deduplication or Top-N state
// that does not decode.
var errRankState = errors.New("corrupt Top-N state")

// appendStoredRow appends the encoding of an insert row of values, as
// types.Row's AppendBinary writes it (kind, column count, values).
func appendStoredRow(dst []byte, values []types.Value) []byte {
	dst = append(dst, byte(changelog.Insert))
	dst = binary.AppendUvarint(dst, uint64(len(values)))
	return types.AppendValues(dst, values)
}

// decodeStoredRow decodes the first len(dst) values of a row encoded by
// appendStoredRow into dst; strings share b's bytes. The row must have at
// least len(dst) columns.
func decodeStoredRow(dst []types.Value, b []byte) error {
	vals, err := storedRowValues(b, len(dst))
	if err != nil || len(dst) == 0 {
		return err
	}
	if _, err := types.DecodeValuesInto(dst, vals); err != nil {
		return fmt.Errorf("%w: %w", errRankState, err)
	}
	return nil
}

// decodeStoredColumns decodes the values at the indexes cols lists
// (ascending, each at most once) of a row encoded by appendStoredRow into
// dst at the same indexes, passing over the others; strings share b's
// bytes. The row must have more columns than the last of cols.
func decodeStoredColumns(dst []types.Value, cols []int, b []byte) error {
	if len(cols) == 0 {
		_, err := storedRowValues(b, 0)
		return err
	}
	vals, err := storedRowValues(b, cols[len(cols)-1]+1)
	if err != nil {
		return err
	}
	if err := types.DecodeColumnsInto(dst, cols, vals); err != nil {
		return fmt.Errorf("%w: %w", errRankState, err)
	}
	return nil
}

// storedRowValues checks the header of a row encoded by appendStoredRow,
// which must have at least cols columns, and returns the encoding of its
// values, sharing b's bytes (empty for cols 0).
func storedRowValues(b []byte, cols int) (string, error) {
	if len(b) == 0 || b[0] > byte(changelog.Delete) {
		return "", fmt.Errorf("%w: bad row kind", errRankState)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n < uint64(cols) {
		return "", fmt.Errorf("%w: bad column count", errRankState)
	}
	if cols == 0 {
		return "", nil
	}
	rest := b[1+k:]
	if len(rest) == 0 {
		return "", fmt.Errorf("%w: a row ends after its column count", errRankState)
	}
	return unsafe.String(&rest[0], len(rest)), nil
}

// storedRowColumns returns the column count of a row encoded by
// appendStoredRow.
func storedRowColumns(b []byte) (int, error) {
	if len(b) == 0 || b[0] > byte(changelog.Delete) {
		return 0, fmt.Errorf("%w: bad row kind", errRankState)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)) {
		return 0, fmt.Errorf("%w: bad column count", errRankState)
	}
	return int(n), nil
}

// checkStoredRow checks that b is exactly one row's encoding.
func checkStoredRow(b []byte) error {
	n, err := types.CheckRow(b)
	if err != nil {
		return fmt.Errorf("%w: %w", errRankState, err)
	}
	if n != len(b) {
		return fmt.Errorf("%w: %d bytes after a row", errRankState, len(b)-n)
	}
	return nil
}

// dedupRow is the row a deduplication keeps for a key: its encoding by
// appendStoredRow.
type dedupRow []byte

// dedupCodec encodes a dedupRow as the reflection codec encoded the
// types.Row kept before: the length, then the row's encoding.
type dedupCodec struct{}

func (dedupCodec) Append(dst []byte, v dedupRow) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func (dedupCodec) Decode(src []byte) (dedupRow, int, error) {
	return decodeDedup(src, nil)
}

// NewDecoder implements state.RunDecoder: the rows of a restore's run
// share the chunks of a state.Arena.
func (dedupCodec) NewDecoder() func(src []byte) (dedupRow, int, error) {
	a := &state.Arena{}
	return func(src []byte) (dedupRow, int, error) { return decodeDedup(src, a) }
}

// decodeDedup decodes a dedupRow, its bytes copied into a, or allocated
// alone if a is nil.
func decodeDedup(src []byte, a *state.Arena) (dedupRow, int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 || l > uint64(len(src)-n) {
		return nil, 0, fmt.Errorf("%w: bad row length", errRankState)
	}
	b := src[n : n+int(l)]
	if err := checkStoredRow(b); err != nil {
		return nil, 0, err
	}
	return dedupRow(arenaCopy(a, b)), n + int(l), nil
}

// arenaCopy returns a copy of b in a, or allocated alone if a is nil.
func arenaCopy(a *state.Arena, b []byte) []byte {
	if a == nil {
		return append([]byte(nil), b...)
	}
	return a.Copy(b)
}

// topRows is one partition's rows of a ROW_NUMBER Top-N over insert-only
// input, the first RankEnd in ranking order, encoded as the reflection
// codec encoded rankState:
//
//	count    uvarint: the number of rows plus one (0: none)
//	rows     per row its length (uvarint) and its encoding by
//	         appendStoredRow
type topRows []byte

// topCodec writes a topRows as it is, and checks every row it decodes.
type topCodec struct{}

func (topCodec) Append(dst []byte, v topRows) []byte {
	if len(v) == 0 {
		return append(dst, 0)
	}
	return append(dst, v...)
}

func (topCodec) Decode(src []byte) (topRows, int, error) {
	var offs []int
	return decodeTop(src, &offs, nil)
}

// NewDecoder implements state.RunDecoder: the rows of a restore's run
// share the chunks of a state.Arena.
func (topCodec) NewDecoder() func(src []byte) (topRows, int, error) {
	a := &state.Arena{}
	var offs []int
	return func(src []byte) (topRows, int, error) { return decodeTop(src, &offs, a) }
}

// decodeTop decodes a topRows with the room offs, its bytes copied into
// a, or allocated alone if a is nil.
func decodeTop(src []byte, offs *[]int, a *state.Arena) (topRows, int, error) {
	end, err := topRows(src).records(offs, true)
	if err != nil {
		return nil, 0, err
	}
	return topRows(arenaCopy(a, src[:end])), end, nil
}

// records sets *offs to the start of each row's encoding followed by the
// end of the last row (so row i is t[offs[i]:offs[i+1]] minus its length
// prefix: see row) and returns where the rows end. check decodes each
// row.
func (t topRows) records(offs *[]int, check bool) (int, error) {
	*offs = (*offs)[:0]
	c, p := binary.Uvarint(t)
	if p <= 0 {
		return 0, fmt.Errorf("%w: bad row count", errRankState)
	}
	if c == 0 {
		*offs = append(*offs, p)
		return p, nil
	}
	if c-1 > uint64(len(t)-p) {
		return 0, fmt.Errorf("%w: %d rows in %d bytes", errRankState, c-1, len(t))
	}
	for range c - 1 {
		*offs = append(*offs, p)
		l, n := binary.Uvarint(t[p:])
		if n <= 0 || l > uint64(len(t)-p-n) {
			return 0, fmt.Errorf("%w: bad row length at byte %d", errRankState, p)
		}
		if check {
			if err := checkStoredRow(t[p+n : p+n+int(l)]); err != nil {
				return 0, fmt.Errorf("row at byte %d: %w", p, err)
			}
		}
		p += n + int(l)
	}
	*offs = append(*offs, p)
	return p, nil
}

// row returns the encoding of the row whose record spans t[from:to].
func (t topRows) row(from, to int) []byte {
	_, n := binary.Uvarint(t[from:to])
	return t[from+n : to]
}
