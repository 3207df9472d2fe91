package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"unicode/utf8"

	"github.com/clinkstream/clink/checkpoint"
)

// Snapshot file format, version 1. All varints are minimal (a longer
// encoding of the same value is rejected, so every snapshot has exactly one
// encoding); fixed-width integers are big-endian.
//
//	magic          "CLNKSNAP"
//	version        uint16
//	checkpoint     uvarint
//	task           string
//	subtask        uvarint
//	parallelism    uvarint
//	maxParallelism uvarint
//	operators      uvarint count, then per operator:
//	  uid            string
//	  offset         uvarint len+1 (0 for nil), then the bytes
//	  offsetText     string
//	  watermark      varint (zigzag)
//	  keyGroups      uvarint count, then per group: keyGroup uvarint, entries uvarint, data bytes
//	  operatorState  uvarint count, then per entry: name string, data bytes
//	  inFlight       uvarint count, then per input: input uvarint, records uvarint, data bytes
//	crc            uint32 CRC-32C (Castagnoli) of every byte before it
//
// string and bytes are a uvarint length followed by that many bytes.
const (
	snapshotMagic = "CLNKSNAP"
	// SnapshotFormatVersion is the version Marshal writes and the only one
	// UnmarshalTaskSnapshot reads.
	SnapshotFormatVersion uint16 = 1

	headerLen  = len(snapshotMagic) + 2
	trailerLen = 4

	// MaxParallelismLimit bounds MaxParallelism, as in Flink.
	MaxParallelismLimit = 1 << 15
	// MaxInputs bounds the input index of in-flight records.
	MaxInputs = 1 << 16
)

// Smallest encodings of one element, used to reject counts that the bytes
// left cannot hold before allocating for them.
const (
	minOperatorLen = 2 + 1 + 1 + 1 + 3
	minKeyGroupLen = 3
	minNamedLen    = 3
	minInFlightLen = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NoWatermark is the Watermark of an operator that has not seen one.
const NoWatermark int64 = math.MinInt64

// TaskSnapshot is the content of one snapshot file: the state of one task
// (a chain of operators running as one subtask) at one checkpoint.
type TaskSnapshot struct {
	Checkpoint checkpoint.ID
	// Task names the task and its file: "<operator-uid>-<subtask>".
	Task           string
	Subtask        int
	Parallelism    int
	MaxParallelism int
	Operators      []OperatorSnapshot
}

// OperatorSnapshot is the state of one operator of a task.
type OperatorSnapshot struct {
	UID string
	// Offset is a source's read position, opaque to the store; nil for an
	// operator that is not a source.
	Offset []byte
	// OffsetText is Offset for people, e.g. "file=/x offset=1234".
	OffsetText string
	// Watermark is the last watermark the operator emitted or saw, or
	// NoWatermark.
	Watermark int64
	// KeyGroups holds keyed state, by ascending key group.
	KeyGroups     []KeyGroupState
	OperatorState []NamedState
	// InFlight holds the records that an unaligned barrier overtook, by
	// ascending input.
	InFlight []InFlight
}

// Operator returns the state of operator uid in s, or nil.
func (s *TaskSnapshot) Operator(uid string) *OperatorSnapshot {
	for i := range s.Operators {
		if s.Operators[i].UID == uid {
			return &s.Operators[i]
		}
	}
	return nil
}

// KeyGroupState is the keyed state of one key group.
type KeyGroupState struct {
	KeyGroup int
	// Entries is the number of entries encoded in Data.
	Entries int
	Data    []byte
}

// NamedState is one named piece of operator (non-keyed) state.
type NamedState struct {
	Name string
	Data []byte
}

// InFlight is the in-flight records of one input, captured at an unaligned
// barrier.
type InFlight struct {
	Input   int
	Records int
	Data    []byte
}

// Validate reports what makes s impossible to encode or restore. Marshal
// assumes it passes; UnmarshalTaskSnapshot returns only snapshots that pass
// it.
func (s *TaskSnapshot) Validate() error {
	if err := checkID(s.Checkpoint); err != nil {
		return err
	}
	if err := checkTask(s.Task); err != nil {
		return err
	}
	if err := checkParallelism(s.Subtask, s.Parallelism, s.MaxParallelism); err != nil {
		return err
	}
	uids := make(map[string]bool, len(s.Operators))
	for i := range s.Operators {
		op := &s.Operators[i]
		if err := checkLabel("operator uid", op.UID); err != nil {
			return fmt.Errorf("operator %d: %w", i, err)
		}
		if uids[op.UID] {
			return fmt.Errorf("operator %d: duplicate uid %q", i, op.UID)
		}
		uids[op.UID] = true
		prev := -1
		for j, kg := range op.KeyGroups {
			if kg.KeyGroup < 0 || kg.KeyGroup >= s.MaxParallelism {
				return fmt.Errorf("operator %q key group %d: key group %d outside [0, %d)", op.UID, j, kg.KeyGroup, s.MaxParallelism)
			}
			if kg.KeyGroup <= prev {
				return fmt.Errorf("operator %q key group %d: key group %d not above %d", op.UID, j, kg.KeyGroup, prev)
			}
			prev = kg.KeyGroup
			if kg.Entries < 0 {
				return fmt.Errorf("operator %q key group %d: negative entry count %d", op.UID, kg.KeyGroup, kg.Entries)
			}
		}
		names := make(map[string]bool, len(op.OperatorState))
		for j, ns := range op.OperatorState {
			if err := checkLabel("state name", ns.Name); err != nil {
				return fmt.Errorf("operator %q state %d: %w", op.UID, j, err)
			}
			if names[ns.Name] {
				return fmt.Errorf("operator %q state %d: duplicate name %q", op.UID, j, ns.Name)
			}
			names[ns.Name] = true
		}
		prev = -1
		for j, in := range op.InFlight {
			if in.Input < 0 || in.Input >= MaxInputs {
				return fmt.Errorf("operator %q in-flight %d: input %d outside [0, %d)", op.UID, j, in.Input, MaxInputs)
			}
			if in.Input <= prev {
				return fmt.Errorf("operator %q in-flight %d: input %d not above %d", op.UID, j, in.Input, prev)
			}
			prev = in.Input
			if in.Records < 0 {
				return fmt.Errorf("operator %q in-flight input %d: negative record count %d", op.UID, in.Input, in.Records)
			}
		}
	}
	return nil
}

func checkTask(task string) error {
	if err := checkLabel("task name", task); err != nil {
		return err
	}
	return checkName(task)
}

func checkLabel(what, s string) error {
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not UTF-8", what, s)
	}
	return nil
}

func checkParallelism(subtask, parallelism, maxParallelism int) error {
	switch {
	case maxParallelism < 1 || maxParallelism > MaxParallelismLimit:
		return fmt.Errorf("max parallelism %d outside [1, %d]", maxParallelism, MaxParallelismLimit)
	case parallelism < 1 || parallelism > maxParallelism:
		return fmt.Errorf("parallelism %d outside [1, max parallelism %d]", parallelism, maxParallelism)
	case subtask < 0 || subtask >= parallelism:
		return fmt.Errorf("subtask %d outside [0, parallelism %d)", subtask, parallelism)
	}
	return nil
}

// Size returns the length of Marshal's result.
func (s *TaskSnapshot) Size() int {
	n := headerLen + uvarintLen(uint64(s.Checkpoint)) + stringLen(len(s.Task)) +
		uvarintLen(uint64(s.Subtask)) + uvarintLen(uint64(s.Parallelism)) + uvarintLen(uint64(s.MaxParallelism)) +
		uvarintLen(uint64(len(s.Operators)))
	for i := range s.Operators {
		op := &s.Operators[i]
		n += stringLen(len(op.UID))
		if op.Offset == nil {
			n++
		} else {
			n += uvarintLen(uint64(len(op.Offset))+1) + len(op.Offset)
		}
		n += stringLen(len(op.OffsetText)) + varintLen(op.Watermark)
		n += uvarintLen(uint64(len(op.KeyGroups)))
		for _, kg := range op.KeyGroups {
			n += uvarintLen(uint64(kg.KeyGroup)) + uvarintLen(uint64(kg.Entries)) + stringLen(len(kg.Data))
		}
		n += uvarintLen(uint64(len(op.OperatorState)))
		for _, ns := range op.OperatorState {
			n += stringLen(len(ns.Name)) + stringLen(len(ns.Data))
		}
		n += uvarintLen(uint64(len(op.InFlight)))
		for _, in := range op.InFlight {
			n += uvarintLen(uint64(in.Input)) + uvarintLen(uint64(in.Records)) + stringLen(len(in.Data))
		}
	}
	return n + trailerLen
}

// Marshal encodes s. s must pass Validate; nil and empty byte slices other
// than Offset encode alike.
func (s *TaskSnapshot) Marshal() []byte {
	return s.marshal(math.MaxInt)[0]
}

// PartMin is the length from which MarshalParts passes a byte string on as
// a part of its own instead of copying it.
const PartMin = 4 << 10

// MarshalParts encodes s as Marshal does, as a sequence of byte slices
// whose concatenation is Marshal's result. Key group, operator state and
// in-flight data of at least PartMin bytes are parts of their own: s's
// slices, not copies, so that a snapshot whose in-flight records are
// megabytes is not copied once more to be written. s must not change until
// the parts have been written; the other parts share one new buffer.
func (s *TaskSnapshot) MarshalParts() [][]byte {
	return s.marshal(PartMin)
}

// marshal encodes s into one buffer, except for byte strings of at least
// big bytes, which become parts of their own.
func (s *TaskSnapshot) marshal(big int) [][]byte {
	size := s.Size()
	// b holds every byte that is not a part of s: it is allocated at its
	// final size, so the parts cut from it never move.
	bigParts := 0
	s.forData(func(d []byte) {
		if len(d) >= big {
			size -= len(d)
			bigParts++
		}
	})
	b := make([]byte, 0, size)
	parts := make([][]byte, 0, 2*bigParts+1)
	cut := 0 // start of b's part under way
	crc := uint32(0)
	// data appends a length-prefixed byte string, as a part of its own
	// when it is big.
	data := func(d []byte) {
		b = binary.AppendUvarint(b, uint64(len(d)))
		if len(d) < big {
			b = append(b, d...)
			return
		}
		parts = append(parts, b[cut:len(b):len(b)], d)
		crc = crc32.Update(crc32.Update(crc, castagnoli, b[cut:]), castagnoli, d)
		cut = len(b)
	}
	b = append(b, snapshotMagic...)
	b = binary.BigEndian.AppendUint16(b, SnapshotFormatVersion)
	b = binary.AppendUvarint(b, uint64(s.Checkpoint))
	b = appendString(b, s.Task)
	b = binary.AppendUvarint(b, uint64(s.Subtask))
	b = binary.AppendUvarint(b, uint64(s.Parallelism))
	b = binary.AppendUvarint(b, uint64(s.MaxParallelism))
	b = binary.AppendUvarint(b, uint64(len(s.Operators)))
	for i := range s.Operators {
		op := &s.Operators[i]
		b = appendString(b, op.UID)
		if op.Offset == nil {
			b = append(b, 0)
		} else {
			b = binary.AppendUvarint(b, uint64(len(op.Offset))+1)
			b = append(b, op.Offset...)
		}
		b = appendString(b, op.OffsetText)
		b = binary.AppendVarint(b, op.Watermark)
		b = binary.AppendUvarint(b, uint64(len(op.KeyGroups)))
		for _, kg := range op.KeyGroups {
			b = binary.AppendUvarint(b, uint64(kg.KeyGroup))
			b = binary.AppendUvarint(b, uint64(kg.Entries))
			data(kg.Data)
		}
		b = binary.AppendUvarint(b, uint64(len(op.OperatorState)))
		for _, ns := range op.OperatorState {
			b = appendString(b, ns.Name)
			data(ns.Data)
		}
		b = binary.AppendUvarint(b, uint64(len(op.InFlight)))
		for _, in := range op.InFlight {
			b = binary.AppendUvarint(b, uint64(in.Input))
			b = binary.AppendUvarint(b, uint64(in.Records))
			data(in.Data)
		}
	}
	crc = crc32.Update(crc, castagnoli, b[cut:])
	b = binary.BigEndian.AppendUint32(b, crc)
	return append(parts, b[cut:])
}

// forData calls f with every key group, operator state and in-flight byte
// string of s.
func (s *TaskSnapshot) forData(f func([]byte)) {
	for i := range s.Operators {
		op := &s.Operators[i]
		for _, kg := range op.KeyGroups {
			f(kg.Data)
		}
		for _, ns := range op.OperatorState {
			f(ns.Data)
		}
		for _, in := range op.InFlight {
			f(in.Data)
		}
	}
}

func appendString[T string | []byte](b []byte, s T) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

func stringLen(n int) int { return uvarintLen(uint64(n)) + n }

// DecodeError reports why bytes are not a valid snapshot and where.
type DecodeError struct {
	// Offset is the byte offset of the field that is wrong.
	Offset int
	Msg    string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("at byte offset %d: %s", e.Offset, e.Msg)
}

// UnmarshalTaskSnapshot decodes a snapshot file. It checks the magic, the
// version, the checksum, every length and count against the bytes that are
// left, and everything Validate checks, and reports the first problem as a
// *DecodeError. It allocates no more than a small multiple of len(b).
// The returned snapshot does not share memory with b.
func UnmarshalTaskSnapshot(b []byte) (*TaskSnapshot, error) {
	if len(b) < headerLen+trailerLen {
		return nil, &DecodeError{Offset: len(b), Msg: fmt.Sprintf(
			"truncated: %d bytes, a snapshot has at least %d", len(b), headerLen+trailerLen)}
	}
	if !bytes.Equal(b[:len(snapshotMagic)], []byte(snapshotMagic)) {
		return nil, &DecodeError{Offset: 0, Msg: fmt.Sprintf("bad magic %q, not a clink snapshot", b[:len(snapshotMagic)])}
	}
	if v := binary.BigEndian.Uint16(b[len(snapshotMagic):]); v != SnapshotFormatVersion {
		return nil, &DecodeError{Offset: len(snapshotMagic), Msg: fmt.Sprintf(
			"unsupported snapshot format version %d (this build reads %d)", v, SnapshotFormatVersion)}
	}
	end := len(b) - trailerLen
	if stored, computed := binary.BigEndian.Uint32(b[end:]), crc32.Checksum(b[:end], castagnoli); stored != computed {
		return nil, &DecodeError{Offset: end, Msg: fmt.Sprintf(
			"checksum mismatch: stored %#08x, computed %#08x (truncated or corrupt)", stored, computed)}
	}
	d := &decoder{b: b[:end], off: headerLen, op: -1}
	s, err := d.snapshot()
	if err != nil {
		return nil, err
	}
	if d.off != end {
		return nil, &DecodeError{Offset: d.off, Msg: fmt.Sprintf("%d unexpected bytes after the last operator", end-d.off)}
	}
	return s, nil
}

// decoder reads the body of a snapshot; b ends before the checksum.
type decoder struct {
	b   []byte
	off int
	// Context for error messages: the operator and the element within it
	// being read.
	op      int
	elem    string
	elemIdx int
}

func (d *decoder) fail(at int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if d.op >= 0 {
		ctx := fmt.Sprintf("operator %d", d.op)
		if d.elem != "" {
			ctx += fmt.Sprintf(" %s %d", d.elem, d.elemIdx)
		}
		msg = ctx + ": " + msg
	}
	return &DecodeError{Offset: at, Msg: msg}
}

func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) uvarint(what string) (uint64, error) {
	at := d.off
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		return 0, d.fail(at, "truncated %s", what)
	case n < 0:
		return 0, d.fail(at, "%s overflows 64 bits", what)
	case n != uvarintLen(v):
		return 0, d.fail(at, "non-minimal encoding of %s", what)
	}
	d.off += n
	return v, nil
}

func (d *decoder) varint(what string) (int64, error) {
	at := d.off
	v, n := binary.Varint(d.b[d.off:])
	switch {
	case n == 0:
		return 0, d.fail(at, "truncated %s", what)
	case n < 0:
		return 0, d.fail(at, "%s overflows 64 bits", what)
	case n != varintLen(v):
		return 0, d.fail(at, "non-minimal encoding of %s", what)
	}
	d.off += n
	return v, nil
}

// intField reads a uvarint that must be at most limit.
func (d *decoder) intField(what string, limit int) (int, error) {
	at := d.off
	v, err := d.uvarint(what)
	if err != nil {
		return 0, err
	}
	if v > uint64(limit) {
		return 0, d.fail(at, "%s %d exceeds %d", what, v, limit)
	}
	return int(v), nil
}

// count reads an element count and checks that the bytes left can hold that
// many elements of at least minLen bytes each.
func (d *decoder) count(what string, minLen int) (int, error) {
	at := d.off
	v, err := d.uvarint(what + " count")
	if err != nil {
		return 0, err
	}
	if v > uint64(d.left()/minLen) {
		return 0, d.fail(at, "%s count %d exceeds what the %d bytes left can hold", what, v, d.left())
	}
	return int(v), nil
}

// span reads a length-prefixed byte string and returns its bounds.
func (d *decoder) span(what string) (int, int, error) {
	at := d.off
	n, err := d.uvarint(what + " length")
	if err != nil {
		return 0, 0, err
	}
	if n > uint64(d.left()) {
		return 0, 0, d.fail(at, "%s length %d exceeds the %d bytes left", what, n, d.left())
	}
	start := d.off
	d.off += int(n)
	return start, d.off, nil
}

func (d *decoder) bytes(what string) ([]byte, error) {
	i, j, err := d.span(what)
	if err != nil || i == j {
		return nil, err
	}
	return bytes.Clone(d.b[i:j]), nil
}

func (d *decoder) string(what string) (string, error) {
	i, j, err := d.span(what)
	if err != nil {
		return "", err
	}
	return string(d.b[i:j]), nil
}

// label reads a string that must be a non-empty UTF-8 name.
func (d *decoder) label(what string) (string, error) {
	at := d.off
	s, err := d.string(what)
	if err != nil {
		return "", err
	}
	if err := checkLabel(what, s); err != nil {
		return "", d.fail(at, "%v", err)
	}
	return s, nil
}

func (d *decoder) snapshot() (*TaskSnapshot, error) {
	s := &TaskSnapshot{}
	at := d.off
	id, err := d.uvarint("checkpoint id")
	if err != nil {
		return nil, err
	}
	s.Checkpoint = checkpoint.ID(id)
	if err := checkID(s.Checkpoint); err != nil {
		return nil, d.fail(at, "%v", err)
	}
	at = d.off
	if s.Task, err = d.string("task name"); err != nil {
		return nil, err
	}
	if err := checkTask(s.Task); err != nil {
		return nil, d.fail(at, "%v", err)
	}
	at = d.off
	if s.Subtask, err = d.intField("subtask", MaxParallelismLimit); err != nil {
		return nil, err
	}
	if s.Parallelism, err = d.intField("parallelism", MaxParallelismLimit); err != nil {
		return nil, err
	}
	if s.MaxParallelism, err = d.intField("max parallelism", MaxParallelismLimit); err != nil {
		return nil, err
	}
	if err := checkParallelism(s.Subtask, s.Parallelism, s.MaxParallelism); err != nil {
		return nil, d.fail(at, "%v", err)
	}
	n, err := d.count("operator", minOperatorLen)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		s.Operators = make([]OperatorSnapshot, n)
	}
	uids := make(map[string]bool, n)
	for i := range s.Operators {
		d.op, d.elem = i, ""
		op := &s.Operators[i]
		at := d.off
		if op.UID, err = d.label("operator uid"); err != nil {
			return nil, err
		}
		if uids[op.UID] {
			return nil, d.fail(at, "duplicate operator uid %q", op.UID)
		}
		uids[op.UID] = true
		if err := d.operator(op, s.MaxParallelism); err != nil {
			return nil, err
		}
	}
	d.op, d.elem = -1, ""
	return s, nil
}

func (d *decoder) operator(op *OperatorSnapshot, maxParallelism int) error {
	at := d.off
	n, err := d.uvarint("offset length")
	if err != nil {
		return err
	}
	if n > 0 {
		n--
		if n > uint64(d.left()) {
			return d.fail(at, "offset length %d exceeds the %d bytes left", n, d.left())
		}
		op.Offset = append([]byte{}, d.b[d.off:d.off+int(n)]...)
		d.off += int(n)
	}
	if op.OffsetText, err = d.string("offset text"); err != nil {
		return err
	}
	if op.Watermark, err = d.varint("watermark"); err != nil {
		return err
	}

	if n, err := d.count("key group", minKeyGroupLen); err != nil {
		return err
	} else if n > 0 {
		op.KeyGroups = make([]KeyGroupState, n)
	}
	d.elem = "key group"
	for j := range op.KeyGroups {
		d.elemIdx = j
		kg := &op.KeyGroups[j]
		at := d.off
		if kg.KeyGroup, err = d.intField("key group", maxParallelism-1); err != nil {
			return err
		}
		if j > 0 && kg.KeyGroup <= op.KeyGroups[j-1].KeyGroup {
			return d.fail(at, "key group %d not above %d", kg.KeyGroup, op.KeyGroups[j-1].KeyGroup)
		}
		if kg.Entries, err = d.intField("entry count", math.MaxInt); err != nil {
			return err
		}
		if kg.Data, err = d.bytes("key group data"); err != nil {
			return err
		}
	}

	d.elem = ""
	if n, err := d.count("operator state", minNamedLen); err != nil {
		return err
	} else if n > 0 {
		op.OperatorState = make([]NamedState, n)
	}
	d.elem = "operator state"
	names := make(map[string]bool, len(op.OperatorState))
	for j := range op.OperatorState {
		d.elemIdx = j
		ns := &op.OperatorState[j]
		at := d.off
		if ns.Name, err = d.label("state name"); err != nil {
			return err
		}
		if names[ns.Name] {
			return d.fail(at, "duplicate state name %q", ns.Name)
		}
		names[ns.Name] = true
		if ns.Data, err = d.bytes("state data"); err != nil {
			return err
		}
	}

	d.elem = ""
	if n, err := d.count("in-flight input", minInFlightLen); err != nil {
		return err
	} else if n > 0 {
		op.InFlight = make([]InFlight, n)
	}
	d.elem = "in-flight input"
	for j := range op.InFlight {
		d.elemIdx = j
		in := &op.InFlight[j]
		at := d.off
		if in.Input, err = d.intField("input", MaxInputs-1); err != nil {
			return err
		}
		if j > 0 && in.Input <= op.InFlight[j-1].Input {
			return d.fail(at, "input %d not above %d", in.Input, op.InFlight[j-1].Input)
		}
		if in.Records, err = d.intField("record count", math.MaxInt); err != nil {
			return err
		}
		if in.Data, err = d.bytes("in-flight data"); err != nil {
			return err
		}
	}
	d.elem = ""
	return nil
}
