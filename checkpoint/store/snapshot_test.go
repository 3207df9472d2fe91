package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/clinkstream/clink/checkpoint"
)

func sampleSnapshots() map[string]*TaskSnapshot {
	return map[string]*TaskSnapshot{
		"minimal": {Checkpoint: 1, Task: "a-0", Parallelism: 1, MaxParallelism: 1},
		"source": {
			Checkpoint: 7, Task: "src-2", Subtask: 2, Parallelism: 4, MaxParallelism: 128,
			Operators: []OperatorSnapshot{{
				UID: "src", Offset: []byte{0, 1, 2, 0xff}, OffsetText: "file=/x offset=1234",
				Watermark: 1_700_000_000_000,
			}},
		},
		"empty offset is not nil": {
			Checkpoint: 2, Task: "src-0", Parallelism: 1, MaxParallelism: 1,
			Operators: []OperatorSnapshot{{UID: "src", Offset: []byte{}, Watermark: NoWatermark}},
		},
		"chain": {
			Checkpoint: math.MaxUint64 - 1, Task: "join-1", Subtask: 1, Parallelism: 2, MaxParallelism: MaxParallelismLimit,
			Operators: []OperatorSnapshot{
				{
					UID: "join", Watermark: -1,
					KeyGroups: []KeyGroupState{
						{KeyGroup: 0, Entries: 0},
						{KeyGroup: 5, Entries: 2, Data: []byte("k1v1k2v2")},
						{KeyGroup: MaxParallelismLimit - 1, Entries: math.MaxInt, Data: []byte{9}},
					},
					OperatorState: []NamedState{{Name: "pending", Data: []byte("p")}, {Name: "ëmpty"}},
					InFlight: []InFlight{
						{Input: 0, Records: 3, Data: []byte("r1r2r3")},
						{Input: MaxInputs - 1, Records: 0},
					},
				},
				{UID: "map", Watermark: math.MaxInt64},
				{UID: "sink", Watermark: math.MinInt64 + 1, OperatorState: []NamedState{{Name: "txn", Data: bytes.Repeat([]byte{7}, 300)}}},
			},
		},
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	for name, s := range sampleSnapshots() {
		t.Run(name, func(t *testing.T) {
			if err := s.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			b := s.Marshal()
			if s.Size() != len(b) {
				t.Fatalf("Size() = %d, len(Marshal()) = %d", s.Size(), len(b))
			}
			got, err := UnmarshalTaskSnapshot(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, s) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
			}
			if !bytes.Equal(got.Marshal(), b) {
				t.Fatal("re-encoding differs")
			}
		})
	}
}

// TestSnapshotEncoding pins the bytes of a small snapshot, so that a change
// of the format cannot slip in without a new version.
func TestSnapshotEncoding(t *testing.T) {
	s := &TaskSnapshot{
		Checkpoint: 3, Task: "a-0", Subtask: 0, Parallelism: 1, MaxParallelism: 128,
		Operators: []OperatorSnapshot{{
			UID: "a", Offset: []byte{0xaa}, OffsetText: "o", Watermark: -2,
			KeyGroups:     []KeyGroupState{{KeyGroup: 4, Entries: 1, Data: []byte{0xbb}}},
			OperatorState: []NamedState{{Name: "n", Data: []byte{0xcc}}},
			InFlight:      []InFlight{{Input: 1, Records: 2, Data: []byte{0xdd}}},
		}},
	}
	body := []byte("CLNKSNAP\x00\x01" + // magic, version 1
		"\x03" + "\x03a-0" + "\x00\x01\x80\x01" + // checkpoint, task, subtask, parallelism, max parallelism 128
		"\x01" + "\x01a" + "\x02\xaa" + "\x01o" + "\x03" + // 1 operator: uid, offset (len+1), text, watermark -2 zigzag
		"\x01" + "\x04\x01\x01\xbb" + // key groups
		"\x01" + "\x01n\x01\xcc" + // operator state
		"\x01" + "\x01\x02\x01\xdd") // in-flight
	want := binary.BigEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	if got := s.Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("Marshal() =\n  %x\nwant\n  %x", got, want)
	}
}

func genSnapshot(t *rapid.T) *TaskSnapshot {
	maxPar := rapid.IntRange(1, MaxParallelismLimit).Draw(t, "maxParallelism")
	par := rapid.IntRange(1, min(maxPar, 64)).Draw(t, "parallelism")
	s := &TaskSnapshot{
		Checkpoint:     checkpoint.ID(rapid.Uint64Range(1, math.MaxUint64-1).Draw(t, "checkpoint")),
		Task:           rapid.StringMatching(`[a-z][a-z0-9_-]{0,10}`).Draw(t, "task"),
		Subtask:        rapid.IntRange(0, par-1).Draw(t, "subtask"),
		Parallelism:    par,
		MaxParallelism: maxPar,
	}
	nilIfEmpty := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		return b
	}
	uids := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-zé][a-z0-9]{0,6}`), 0, 4, rapid.ID[string]).Draw(t, "uids")
	for _, uid := range uids {
		op := OperatorSnapshot{UID: uid, Watermark: rapid.Int64().Draw(t, "watermark")}
		if rapid.Bool().Draw(t, "source") {
			op.Offset = rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(t, "offset")
			op.OffsetText = rapid.String().Draw(t, "offsetText")
		}
		groups := rapid.SliceOfNDistinct(rapid.IntRange(0, maxPar-1), 0, 6, rapid.ID[int]).Draw(t, "keyGroups")
		slicesSortInts(groups)
		for _, g := range groups {
			op.KeyGroups = append(op.KeyGroups, KeyGroupState{
				KeyGroup: g,
				Entries:  rapid.IntRange(0, math.MaxInt).Draw(t, "entries"),
				Data:     nilIfEmpty(rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "data")),
			})
		}
		for _, n := range rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z_]{1,8}`), 0, 3, rapid.ID[string]).Draw(t, "stateNames") {
			op.OperatorState = append(op.OperatorState, NamedState{Name: n, Data: nilIfEmpty(rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "state"))})
		}
		inputs := rapid.SliceOfNDistinct(rapid.IntRange(0, MaxInputs-1), 0, 3, rapid.ID[int]).Draw(t, "inputs")
		slicesSortInts(inputs)
		for _, in := range inputs {
			op.InFlight = append(op.InFlight, InFlight{
				Input:   in,
				Records: rapid.IntRange(0, 1<<40).Draw(t, "records"),
				Data:    nilIfEmpty(rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "inflight")),
			})
		}
		s.Operators = append(s.Operators, op)
	}
	return s
}

func slicesSortInts(s []int) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestSnapshotRoundTripRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		if err := s.Validate(); err != nil {
			t.Fatalf("generated snapshot invalid: %v", err)
		}
		b := s.Marshal()
		if len(b) != s.Size() {
			t.Fatalf("Size() = %d, len(Marshal()) = %d", s.Size(), len(b))
		}
		got, err := UnmarshalTaskSnapshot(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
		}
	})
}

// TestSnapshotInvalid checks that Validate rejects each broken snapshot and
// that the decoder rejects its encoding too, so that the two agree.
func TestSnapshotInvalid(t *testing.T) {
	base := func() *TaskSnapshot {
		return &TaskSnapshot{
			Checkpoint: 1, Task: "t-0", Parallelism: 2, MaxParallelism: 8,
			Operators: []OperatorSnapshot{{
				UID:           "a",
				KeyGroups:     []KeyGroupState{{KeyGroup: 1}, {KeyGroup: 3}},
				OperatorState: []NamedState{{Name: "x"}},
				InFlight:      []InFlight{{Input: 0}, {Input: 1}},
			}},
		}
	}
	for _, tt := range []struct {
		name    string
		mutate  func(s *TaskSnapshot)
		wantErr string
	}{
		{"checkpoint 0", func(s *TaskSnapshot) { s.Checkpoint = 0 }, "invalid checkpoint id 0"},
		{"empty task", func(s *TaskSnapshot) { s.Task = "" }, "empty task name"},
		{"task with slash", func(s *TaskSnapshot) { s.Task = "a/b" }, "path separator"},
		{"task with dot", func(s *TaskSnapshot) { s.Task = ".t" }, "starts with a dot"},
		{"task not utf-8", func(s *TaskSnapshot) { s.Task = "t\xff" }, "not UTF-8"},
		{"subtask negative", func(s *TaskSnapshot) { s.Subtask = -1 }, "subtask -1"},
		{"subtask too big", func(s *TaskSnapshot) { s.Subtask = 2 }, "subtask 2 outside [0, parallelism 2)"},
		{"parallelism 0", func(s *TaskSnapshot) { s.Parallelism = 0 }, "parallelism 0"},
		{"parallelism above max", func(s *TaskSnapshot) { s.Parallelism = 9 }, "parallelism 9"},
		{"max parallelism above limit", func(s *TaskSnapshot) { s.MaxParallelism = MaxParallelismLimit + 1 }, "max parallelism 32769"},
		{"empty uid", func(s *TaskSnapshot) { s.Operators[0].UID = "" }, "empty operator uid"},
		{"duplicate uid", func(s *TaskSnapshot) { s.Operators = append(s.Operators, OperatorSnapshot{UID: "a"}) }, `duplicate`},
		{"key group out of range", func(s *TaskSnapshot) { s.Operators[0].KeyGroups[1].KeyGroup = 8 }, "key group 8"},
		{"key group negative", func(s *TaskSnapshot) { s.Operators[0].KeyGroups[0].KeyGroup = -1 }, "key group -1"},
		{"key groups not ascending", func(s *TaskSnapshot) { s.Operators[0].KeyGroups[1].KeyGroup = 1 }, "not above"},
		{"negative entries", func(s *TaskSnapshot) { s.Operators[0].KeyGroups[0].Entries = -1 }, "entry count"},
		{"empty state name", func(s *TaskSnapshot) { s.Operators[0].OperatorState[0].Name = "" }, "empty state name"},
		{"duplicate state name", func(s *TaskSnapshot) {
			s.Operators[0].OperatorState = append(s.Operators[0].OperatorState, NamedState{Name: "x"})
		}, "duplicate"},
		{"inputs not ascending", func(s *TaskSnapshot) { s.Operators[0].InFlight[1].Input = 0 }, "not above"},
		{"input too big", func(s *TaskSnapshot) { s.Operators[0].InFlight[1].Input = MaxInputs }, "input 65536"},
		{"negative records", func(s *TaskSnapshot) { s.Operators[0].InFlight[0].Records = -5 }, "record count"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := base().Validate(); err != nil {
				t.Fatalf("base snapshot invalid: %v", err)
			}
			s := base()
			tt.mutate(s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
			if got, err := UnmarshalTaskSnapshot(s.Marshal()); err == nil {
				t.Fatalf("decoder accepted what Validate rejects: %+v", got)
			}
		})
	}
}

func decodeErr(t *testing.T, b []byte) *DecodeError {
	t.Helper()
	s, err := UnmarshalTaskSnapshot(b)
	if err == nil {
		t.Fatalf("decoded corrupt input %x as %+v", b, s)
	}
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
	}
	if de.Offset < 0 || de.Offset > len(b) {
		t.Fatalf("error offset %d outside the %d input bytes", de.Offset, len(b))
	}
	return de
}

func TestSnapshotTruncatedAtEveryByte(t *testing.T) {
	b := sampleSnapshots()["chain"].Marshal()
	for i := range len(b) {
		decodeErr(t, b[:i])
	}
	de := decodeErr(t, b[:5])
	if !strings.Contains(de.Error(), "truncated: 5 bytes") {
		t.Fatalf("error for 5 bytes: %v", de)
	}
}

func TestSnapshotFlippedBytes(t *testing.T) {
	b := sampleSnapshots()["chain"].Marshal()
	for i := range len(b) {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			c := bytes.Clone(b)
			c[i] ^= mask
			de := decodeErr(t, c)
			switch {
			case i < 8:
				if de.Offset != 0 || !strings.Contains(de.Msg, "bad magic") {
					t.Fatalf("byte %d flipped: %v, want bad magic at 0", i, de)
				}
			case i < 10:
				if de.Offset != 8 || !strings.Contains(de.Msg, "unsupported snapshot format version") {
					t.Fatalf("byte %d flipped: %v, want a version error at 8", i, de)
				}
			default:
				if de.Offset != len(b)-4 || !strings.Contains(de.Msg, "checksum mismatch") {
					t.Fatalf("byte %d flipped: %v, want a checksum error", i, de)
				}
			}
		}
	}
}

// withCRC frames body (everything after the version) as a snapshot with a
// correct checksum, to reach the checks behind the checksum.
func withCRC(body string) []byte {
	b := append([]byte("CLNKSNAP\x00\x01"), body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestSnapshotHostileBodies(t *testing.T) {
	const head = "\x01\x03t-0\x00\x01\x08" // checkpoint 1, task t-0, subtask 0, parallelism 1, max 8
	huge := string(binary.AppendUvarint(nil, 1<<62))
	for _, tt := range []struct {
		name       string
		body       string
		wantOffset int
		wantMsg    string
	}{
		{"empty body", "", 10, "truncated checkpoint id"},
		{"checkpoint 0", "\x00", 10, "invalid checkpoint id 0"},
		{"varint overflow", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10, "overflows 64 bits"},
		{"non-minimal varint", "\x81\x00", 10, "non-minimal encoding of checkpoint id"},
		{"task length past the end", "\x01\x7f", 11, "task name length 127 exceeds the 0 bytes left"},
		{"huge task length", "\x01" + huge + "x", 11, "exceeds the 1 bytes left"},
		{"subtask too big", "\x01\x03t-0\x80\x80\x04", 15, "subtask 65536 exceeds 32768"},
		{"bad parallelism", "\x01\x03t-0\x02\x01\x08", 15, "subtask 2 outside [0, parallelism 1)"},
		{"huge operator count", head + huge, 18, "operator count 4611686018427387904 exceeds what the 0 bytes left can hold"},
		{"operator count above the bytes", head + "\x02\x01a\x00\x00\x00\x00\x00\x00", 18, "operator count 2 exceeds"},
		{"uid not utf-8", head + "\x01\x01\xff\x00\x00\x00\x00\x00\x00", 19, "operator 0: operator uid \"\\xff\" is not UTF-8"},
		{"huge offset", head + "\x01\x01a" + huge, 21, "operator 0: offset length"},
		{"huge key group count", head + "\x01\x01a\x00\x00\x00" + huge, 24, "operator 0: key group count"},
		{"key group beyond max parallelism", head + "\x01\x01a\x00\x00\x00\x01\x08\x00\x00\x00\x00", 25, "operator 0 key group 0: key group 8 exceeds 7"},
		{"key groups descending", head + "\x01\x01a\x00\x00\x00\x02\x03\x00\x00\x02\x00\x00\x00\x00", 28, "key group 2 not above 3"},
		{"huge data length", head + "\x01\x01a\x00\x00\x00\x01\x01\x00" + huge, 27, "key group data length"},
		{"duplicate state", head + "\x01\x01a\x00\x00\x00\x00\x02\x01x\x00\x01x\x00\x00", 29, "duplicate state name \"x\""},
		{"duplicate uid", head + "\x02\x01a\x00\x00\x00\x00\x00\x00\x01a\x00\x00\x00\x00\x00\x00", 27, "duplicate operator uid"},
		{"trailing bytes", head + "\x00\xee\xee", 19, "2 unexpected bytes after the last operator"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			de := decodeErr(t, withCRC(tt.body))
			if de.Offset != tt.wantOffset || !strings.Contains(de.Msg, tt.wantMsg) {
				t.Fatalf("error %q, want %q at offset %d", de, tt.wantMsg, tt.wantOffset)
			}
		})
	}
	if _, err := UnmarshalTaskSnapshot(withCRC(head + "\x00")); err != nil {
		t.Fatalf("the valid base of the hostile bodies does not decode: %v", err)
	}
}

func TestSnapshotDecodeDoesNotAlias(t *testing.T) {
	b := sampleSnapshots()["chain"].Marshal()
	s, err := UnmarshalTaskSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(s.Operators[0].KeyGroups[1].Data)
	for i := range b {
		b[i] = 0
	}
	if !bytes.Equal(s.Operators[0].KeyGroups[1].Data, want) {
		t.Fatal("decoded data changed with the input buffer")
	}
}

// TestSnapshotDecodeAllocationBound feeds inputs whose counts claim as many
// elements as the bytes could hold and checks that decoding allocates a
// bounded multiple of the input.
func TestSnapshotDecodeAllocationBound(t *testing.T) {
	const n = 1 << 16
	head := "\x01\x03t-0\x00\x01\x08"
	for name, body := range map[string]string{
		// Claims n minimal operators, then stops.
		"operators": head + string(binary.AppendUvarint(nil, n/minOperatorLen)) + strings.Repeat("\x00", n),
		// One operator claiming n/3 key groups, all in key group 0.
		"key groups": head + "\x01\x01a\x00\x00\x00" + string(binary.AppendUvarint(nil, n/minKeyGroupLen)) + strings.Repeat("\x00", n),
		// One operator claiming n/3 in-flight inputs.
		"in-flight": head + "\x01\x01a\x00\x00\x00\x00\x00" + string(binary.AppendUvarint(nil, n/minInFlightLen)) + strings.Repeat("\x00", n),
	} {
		b := withCRC(body)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := UnmarshalTaskSnapshot(b)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%s: hostile input decoded", name)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32*uint64(len(b)) {
			t.Errorf("%s: decoding %d bytes allocated %d bytes", name, len(b), alloc)
		}
	}
}

// FuzzUnmarshalTaskSnapshot decodes arbitrary bytes, and the same bytes
// with the header and checksum repaired so that the body parser is reached.
// Whatever decodes must be valid and encode back to exactly the input.
func FuzzUnmarshalTaskSnapshot(f *testing.F) {
	for _, s := range sampleSnapshots() {
		b := s.Marshal()
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte("CLNKSNAP\x00\x01\x00\x00\x00\x00"))
	f.Add(withCRC("\x01\x03t-0\x00\x01\x08\x01\x01a\x00\x00\x00\x01\x01\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(in []byte) {
			s, err := UnmarshalTaskSnapshot(in)
			if err != nil {
				var de *DecodeError
				if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(in) {
					t.Fatalf("bad error %v (%T)", err, err)
				}
				return
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("decoded an invalid snapshot: %v", err)
			}
			if out := s.Marshal(); !bytes.Equal(out, in) {
				t.Fatalf("re-encoding differs:\n  in %x\n out %x", in, out)
			}
		}
		check(b)
		if len(b) >= headerLen+trailerLen {
			c := bytes.Clone(b)
			copy(c, "CLNKSNAP\x00\x01")
			end := len(c) - trailerLen
			binary.BigEndian.PutUint32(c[end:], crc32.Checksum(c[:end], castagnoli))
			check(c)
		}
	})
}

// enlarge makes some of s's byte strings as long as PartMin or about it,
// so that MarshalParts has parts of their own to pass on.
func enlarge(t *rapid.T, s *TaskSnapshot) {
	size := rapid.SampledFrom([]int{0, PartMin - 1, PartMin, PartMin + 1, 3 * PartMin})
	big := func(d []byte, label string) []byte {
		if n := size.Draw(t, label); n > 0 {
			return bytes.Repeat([]byte{byte(n)}, n)
		}
		return d
	}
	for i := range s.Operators {
		op := &s.Operators[i]
		for j := range op.KeyGroups {
			op.KeyGroups[j].Data = big(op.KeyGroups[j].Data, "bigKeyGroup")
		}
		for j := range op.OperatorState {
			op.OperatorState[j].Data = big(op.OperatorState[j].Data, "bigState")
		}
		for j := range op.InFlight {
			op.InFlight[j].Data = big(op.InFlight[j].Data, "bigInFlight")
		}
	}
}

// TestSnapshotMarshalParts checks that the parts add up to Marshal's bytes
// and that every byte string of at least PartMin bytes is one of them, not
// a copy.
func TestSnapshotMarshalParts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		enlarge(t, s)
		parts := s.MarshalParts()
		if got, want := bytes.Join(parts, nil), s.Marshal(); !bytes.Equal(got, want) {
			t.Fatalf("parts join to %d bytes that differ from Marshal's %d", len(got), len(want))
		}
		var big [][]byte
		s.forData(func(d []byte) {
			if len(d) >= PartMin {
				big = append(big, d)
			}
		})
		if len(parts) != 2*len(big)+1 {
			t.Fatalf("%d parts for %d byte strings of PartMin bytes or more, want %d", len(parts), len(big), 2*len(big)+1)
		}
		for k, d := range big {
			if p := parts[2*k+1]; len(p) != len(d) || &p[0] != &d[0] {
				t.Fatalf("part %d is not the snapshot's byte string %d of %d bytes", 2*k+1, k, len(d))
			}
		}
	})
}

// TestSnapshotMarshalPartsOfInFlight pins the parts of a snapshot with
// megabytes of in-flight records: the records are passed on, and the rest
// is one buffer on each side of them.
func TestSnapshotMarshalPartsOfInFlight(t *testing.T) {
	records := bytes.Repeat([]byte("record"), 300_000)
	s := &TaskSnapshot{
		Checkpoint: 4, Task: "sink-0", Parallelism: 1, MaxParallelism: 128,
		Operators: []OperatorSnapshot{
			{UID: "sink", Watermark: NoWatermark, InFlight: []InFlight{{Input: 0, Records: 300_000, Data: records}}},
			{UID: "after", Watermark: NoWatermark},
		},
	}
	parts := s.MarshalParts()
	if len(parts) != 3 || &parts[1][0] != &records[0] || len(parts[1]) != len(records) {
		t.Fatalf("parts of %v bytes, want the %d bytes of in-flight records between two others", lens(parts), len(records))
	}
	if n := len(parts[0]) + len(parts[2]); n > 100 {
		t.Fatalf("%d bytes besides the in-flight records", n)
	}
	got, err := UnmarshalTaskSnapshot(bytes.Join(parts, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatal("the parts decode to another snapshot")
	}
}

func lens(parts [][]byte) []int {
	n := make([]int, len(parts))
	for i, p := range parts {
		n[i] = len(p)
	}
	return n
}
