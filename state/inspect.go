package state

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reads key-group data without knowing the types of the
// operator's keys and values, for tools that inspect checkpoints
// (`clink state-cat`). A snapshot records neither type, and an entry
// (key, value, write time) does not store its value's length, so a table's
// entries can only be delimited by trying the encodings CodecFor gives the
// common types: a reading (Layout) is accepted when every entry of the
// table, in every key group, decodes under it, every key belongs to the
// key group it is stored in, and the bytes end exactly with the last
// entry.

// TableStat is one table's part of a key group.
type TableStat struct {
	Name    string
	Entries int
	Bytes   int
}

// KeyGroupTables returns the tables of one key group's data in the order
// they are stored, with their entry counts and sizes. It does not decode
// entries; it fails when the sections are malformed or their entry counts
// do not add up to g.Entries.
func KeyGroupTables(g KeyGroupData) ([]TableStat, error) {
	secs, err := parseSections(g.KeyGroup, g.Data)
	if err != nil {
		return nil, err
	}
	out := make([]TableStat, 0, len(secs))
	total := 0
	for _, s := range secs {
		total += s.entries
		if i := slices.IndexFunc(out, func(t TableStat) bool { return t.Name == s.name }); i >= 0 {
			out[i].Entries += s.entries
			out[i].Bytes += len(s.data)
			continue
		}
		out = append(out, TableStat{Name: s.name, Entries: s.entries, Bytes: len(s.data)})
	}
	if total != g.Entries {
		return out, fmt.Errorf("key group %d: its tables hold %d entries, the snapshot says %d", g.KeyGroup, total, g.Entries)
	}
	return out, nil
}

// KeyEncoding is how a table's keys are encoded and hashed, as CodecFor and
// HasherFor do it for a kind of key type.
type KeyEncoding uint8

// The key encodings state inspection recognises.
const (
	// KeyString is a string key: uvarint length and bytes, hashed by
	// HashString.
	KeyString KeyEncoding = iota + 1
	// KeyInteger is a key of a built-in integer type (int, int64, uint32,
	// ...): 8 bytes little-endian, hashed by HashUint64.
	KeyInteger
	// KeyNamedString is a key of a named string type (type ID string),
	// encoded by the reflection codec: the same bytes as KeyString, hashed
	// by HashBytes of them.
	KeyNamedString
	// KeyNamedInt is a key of a named signed integer type of kind int,
	// int64 or int32: a zigzag varint, hashed by HashUint64.
	KeyNamedInt
	// KeyNamedUint is a key of a named unsigned integer type of kind uint,
	// uint64 or uint32: a uvarint, hashed by HashUint64.
	KeyNamedUint
)

// String names the key type the encoding belongs to, e.g. "string".
func (e KeyEncoding) String() string {
	switch e {
	case KeyString:
		return "string"
	case KeyInteger:
		return "integer"
	case KeyNamedString:
		return "named string type"
	case KeyNamedInt:
		return "named signed integer type"
	case KeyNamedUint:
		return "named unsigned integer type"
	}
	return fmt.Sprintf("KeyEncoding(%d)", uint8(e))
}

// ValueEncoding is how a table's values are encoded, as CodecFor does it
// for a kind of value type.
type ValueEncoding uint8

// The value encodings state inspection recognises. Values of other types
// (structs, maps of other types, ...) cannot be delimited.
const (
	// ValueFixed8 is 8 bytes: any built-in integer type (little-endian),
	// or float64.
	ValueFixed8 ValueEncoding = iota + 1
	// ValueBytes is a uvarint length and bytes: string, []byte, a named
	// string type.
	ValueBytes
	// ValueIntegers is a uvarint count+1 (0 for nil) then one zigzag
	// varint per element: []int64 or map[int64]struct{} (timer tables).
	ValueIntegers
	// ValueVarint is one zigzag varint: a named integer type, or a struct
	// of one such field.
	ValueVarint
	// ValueBool is one byte, 0 or 1.
	ValueBool
	// ValueFixed4 is 4 bytes: float32.
	ValueFixed4
)

// String names the value types the encoding stands for.
func (e ValueEncoding) String() string {
	switch e {
	case ValueFixed8:
		return "8 bytes (integer or float64)"
	case ValueBytes:
		return "length-prefixed bytes (string or []byte)"
	case ValueIntegers:
		return "integer list or set"
	case ValueVarint:
		return "varint"
	case ValueBool:
		return "bool"
	case ValueFixed4:
		return "float32"
	}
	return fmt.Sprintf("ValueEncoding(%d)", uint8(e))
}

// Layout is one reading of a table's entries.
type Layout struct {
	Key   KeyEncoding
	Value ValueEncoding
}

// String formats the layout as "string keys, 8 bytes (integer or float64) values".
func (l Layout) String() string { return fmt.Sprintf("%s keys, %s values", l.Key, l.Value) }

type inspectNamedString string
type inspectNamedInt int64
type inspectNamedUint uint64

// inspectKeyScheme reads and encodes keys of one KeyEncoding with the
// codec and hasher the engine uses for such keys.
type inspectKeyScheme struct {
	enc KeyEncoding
	// read decodes the key at the front of b and returns its length and
	// hash.
	read func(b []byte) (n int, hash uint64, err error)
	// encode returns the encoding and hash of the key written as text,
	// ok=false if text cannot be such a key.
	encode func(text string) (b []byte, hash uint64, ok bool)
}

func inspectSchemeFor[K any](enc KeyEncoding, parse func(string) (K, bool)) inspectKeyScheme {
	c := CodecFor[K]()
	h := HasherFor(c)
	return inspectKeyScheme{
		enc: enc,
		read: func(b []byte) (int, uint64, error) {
			k, n, err := c.Decode(b)
			if err != nil {
				return 0, 0, err
			}
			return n, h(k), nil
		},
		encode: func(text string) ([]byte, uint64, bool) {
			k, ok := parse(text)
			if !ok {
				return nil, 0, false
			}
			return c.Append(nil, k), h(k), true
		},
	}
}

func parseKeyInt(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

func parseKeyUint(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// inspectKeySchemes returns a fresh set of key schemes (hashers keep
// scratch space, so schemes are not shared between calls).
func inspectKeySchemes() []inspectKeyScheme {
	return []inspectKeyScheme{
		inspectSchemeFor(KeyString, func(s string) (string, bool) { return s, true }),
		inspectSchemeFor(KeyInteger, func(s string) (uint64, bool) {
			if v, ok := parseKeyInt(s); ok {
				return uint64(v), true
			}
			return parseKeyUint(s)
		}),
		inspectSchemeFor(KeyNamedString, func(s string) (inspectNamedString, bool) { return inspectNamedString(s), true }),
		inspectSchemeFor(KeyNamedInt, func(s string) (inspectNamedInt, bool) {
			v, ok := parseKeyInt(s)
			return inspectNamedInt(v), ok
		}),
		inspectSchemeFor(KeyNamedUint, func(s string) (inspectNamedUint, bool) {
			v, ok := parseKeyUint(s)
			return inspectNamedUint(v), ok
		}),
	}
}

// inspectValueSkippers return the length of the value at the front of b,
// per ValueEncoding, decoding it with the codec the engine uses.
var inspectValueSkippers = map[ValueEncoding]func(b []byte) (int, error){
	ValueFixed8:   inspectSkipWith(CodecFor[uint64]()),
	ValueBytes:    inspectSkipWith(CodecFor[string]()),
	ValueIntegers: inspectSkipWith(CodecFor[[]int64]()),
	ValueVarint:   inspectSkipWith(CodecFor[inspectNamedInt]()),
	ValueBool:     inspectSkipWith(CodecFor[bool]()),
	ValueFixed4:   inspectSkipWith(CodecFor[float32]()),
}

func inspectSkipWith[V any](c Codec[V]) func(b []byte) (int, error) {
	return func(b []byte) (int, error) {
		_, n, err := c.Decode(b)
		return n, err
	}
}

// inspectValueOrder is the order layouts are tried and listed in: the
// most common value types first. Bytes 0 and 1 read as bool, varint and
// nil or empty list alike; bool is the likeliest of them.
var inspectValueOrder = []ValueEncoding{ValueFixed8, ValueBytes, ValueBool, ValueIntegers, ValueVarint, ValueFixed4}

// IsTimerTable reports whether table is one of the timer tables of a keyed
// operator (see NewTimers), whose values are sets of timestamps.
func IsTimerTable(table string) bool {
	return table == "__timers_event" || table == "__timers_proc"
}

// inspectedEntry is one entry of a table: its key's and value's encodings
// and its write time.
type inspectedEntry struct {
	key, value []byte
	written    int64
}

// walkSection splits one section of key group kg into its entries, reading
// keys with ks and values with skip, and checks that every key belongs to
// kg. It returns false when the section does not read that way; visit may
// have seen some entries by then.
func walkSection(s section, kg, maxParallelism int, ks inspectKeyScheme, skip func([]byte) (int, error), visit func(inspectedEntry)) bool {
	data := s.data
	for i := 0; i < s.entries; i++ {
		n, hash, err := ks.read(data)
		if err != nil || KeyGroupFor(hash, maxParallelism) != kg {
			return false
		}
		key := data[:n]
		data = data[n:]
		m, err := skip(data)
		if err != nil {
			return false
		}
		value := data[:m]
		data = data[m:]
		w, k := binary.Varint(data)
		if k <= 0 {
			return false
		}
		data = data[k:]
		if visit != nil {
			visit(inspectedEntry{key: key, value: value, written: w})
		}
	}
	return len(data) == 0
}

// TableLayout is a table of an operator with the layouts that every one of
// its entries, in every key group, reads as. No layout: its keys or its
// values are of a type state inspection cannot delimit. More than one: the
// checkpoint does not tell them apart (few entries).
type TableLayout struct {
	Name    string
	Layouts []Layout
}

// TableLayouts returns, for each table in groups (the key groups of one
// operator, from any number of its snapshots), in order of first
// appearance, the layouts its entries read as.
func TableLayouts(groups []KeyGroupData, maxParallelism int) ([]TableLayout, error) {
	if maxParallelism < 1 || maxParallelism > MaxMaxParallelism {
		return nil, fmt.Errorf("max parallelism %d is out of range [1, %d]", maxParallelism, MaxMaxParallelism)
	}
	type table struct {
		name string
		// alive[i] is whether layout i still reads every section seen.
		alive []bool
	}
	schemes := inspectKeySchemes()
	var layouts []Layout
	var skippers []func([]byte) (int, error)
	var kss []inspectKeyScheme
	for _, ks := range schemes {
		for _, ve := range inspectValueOrder {
			layouts = append(layouts, Layout{Key: ks.enc, Value: ve})
			skippers = append(skippers, inspectValueSkippers[ve])
			kss = append(kss, ks)
		}
	}
	var tables []*table
	byName := map[string]*table{}
	for _, g := range groups {
		secs, err := parseSections(g.KeyGroup, g.Data)
		if err != nil {
			return nil, err
		}
		for _, s := range secs {
			t := byName[s.name]
			if t == nil {
				t = &table{name: s.name, alive: make([]bool, len(layouts))}
				for i := range t.alive {
					t.alive[i] = true
				}
				byName[s.name] = t
				tables = append(tables, t)
			}
			for i := range layouts {
				if t.alive[i] && !walkSection(s, g.KeyGroup, maxParallelism, kss[i], skippers[i], nil) {
					t.alive[i] = false
				}
			}
		}
	}
	out := make([]TableLayout, len(tables))
	for i, t := range tables {
		out[i].Name = t.name
		for j, l := range layouts {
			if t.alive[j] {
				out[i].Layouts = append(out[i].Layouts, l)
			}
		}
		if IsTimerTable(t.name) {
			// A timer table's values are sets of timestamps
			// (map[int64]struct{}, see NewTimers): when that reading fits,
			// others (timer sets of equal sizes read as 8 bytes) are
			// coincidences.
			if timers := slices.DeleteFunc(slices.Clone(out[i].Layouts), func(l Layout) bool { return l.Value != ValueIntegers }); len(timers) > 0 {
				out[i].Layouts = timers
			}
		}
	}
	return out, nil
}

// KeyReading is one way the text of a key can be a key of the state: the
// key encoding, the key's bytes under it and the key group it belongs to.
type KeyReading struct {
	Encoding KeyEncoding
	Bytes    []byte
	KeyGroup int
}

// KeyReadings returns the readings of text as a key: as a string and a
// named string type always, and as an integer (built-in and named types)
// when text is a decimal integer. The key groups are those of
// maxParallelism key groups, computed with the engine's hashers.
func KeyReadings(text string, maxParallelism int) []KeyReading {
	if maxParallelism < 1 {
		return nil
	}
	var out []KeyReading
	for _, ks := range inspectKeySchemes() {
		b, h, ok := ks.encode(text)
		if !ok {
			continue
		}
		out = append(out, KeyReading{Encoding: ks.enc, Bytes: b, KeyGroup: KeyGroupFor(h, maxParallelism)})
	}
	return out
}

// KeyMatch is an entry of the key looked up.
type KeyMatch struct {
	Reading  KeyReading
	Table    string
	KeyGroup int
	// Layout is the reading of the table the entry was found under; when
	// a table has several, the key is reported once per layout.
	Layout  Layout
	Value   []byte
	Written int64
	// MapKey is the encoding of the user key of a map state's entry (a
	// byte-store backend's entries only; nil otherwise).
	MapKey []byte
}

// Undelimited is a table in a key group that was looked in but whose
// entries could not be delimited.
type Undelimited struct {
	Reading  KeyReading
	Table    string
	KeyGroup int
	Entries  int
	Bytes    int
	// At is the offset in the table's data of the first occurrence of the
	// key's bytes, -1 if they do not occur (then the key is certainly not
	// in the table).
	At int
	// First is whether the key is the table's first entry in the key
	// group: an entry starts at offset 0, so a key decoded there is
	// certain, whatever the value's type.
	First bool
	// Value, when not nil, is the value of the key: it is the table's only
	// entry in the key group and was written without TTL (write time 0, a
	// single 0 byte at the end), so its value is the bytes in between.
	Value []byte
	// MapKey is the user key's encoding for an entry of a map state (a
	// byte-store backend's entries only; nil otherwise).
	MapKey []byte
}

// KeyLookup is what LookupKey found for a key in one operator's state.
type KeyLookup struct {
	Key string
	// Readings are every reading of Key (see KeyReadings).
	Readings []KeyReading
	// Tables are the operator's tables and their layouts.
	Tables []TableLayout
	// KeyEncodings are the key encodings the operator's tables read as,
	// empty when no table's entries could be delimited.
	KeyEncodings []KeyEncoding
	// Searched are the readings looked up: those whose encoding is in
	// KeyEncodings, or all of them when KeyEncodings is empty.
	Searched []KeyReading
	// Matches are the entries found, by reading, then table order.
	Matches []KeyMatch
	// Undelimited lists the tables of a searched key group that could not
	// be read, by reading, then table order.
	Undelimited []Undelimited
}

// LookupKey finds the entries of the key written as text in the key groups
// of one operator (from any number of its snapshots). The key's type is
// not recorded, so text is read as every key type it can be (KeyReadings);
// the operator's tables tell which key encoding it uses (TableLayouts);
// each reading of that encoding is looked up in its own key group only.
func LookupKey(groups []KeyGroupData, maxParallelism int, text string) (*KeyLookup, error) {
	tables, err := TableLayouts(groups, maxParallelism)
	if err != nil {
		return nil, err
	}
	res := &KeyLookup{Key: text, Readings: KeyReadings(text, maxParallelism), Tables: tables}
	layoutsOf := map[string][]Layout{}
	for _, t := range tables {
		layoutsOf[t.Name] = t.Layouts
		for _, l := range t.Layouts {
			if !slices.Contains(res.KeyEncodings, l.Key) {
				res.KeyEncodings = append(res.KeyEncodings, l.Key)
			}
		}
	}
	// Tables that agree on one key encoding settle it; if they disagree
	// (a table with few entries fits several), keep every candidate.
	if common := commonKeyEncodings(tables); len(common) > 0 {
		res.KeyEncodings = common
	}
	slices.Sort(res.KeyEncodings)
	for _, r := range res.Readings {
		if len(res.KeyEncodings) == 0 || slices.Contains(res.KeyEncodings, r.Encoding) {
			res.Searched = append(res.Searched, r)
		}
	}
	schemes := map[KeyEncoding]inspectKeyScheme{}
	for _, ks := range inspectKeySchemes() {
		schemes[ks.enc] = ks
	}
	for _, r := range res.Searched {
		for _, g := range groups {
			if g.KeyGroup != r.KeyGroup {
				continue
			}
			secs, err := parseSections(g.KeyGroup, g.Data)
			if err != nil {
				return nil, err
			}
			for _, s := range secs {
				ls := layoutsOf[s.name]
				if len(ls) == 0 {
					u := Undelimited{
						Reading: r, Table: s.name, KeyGroup: g.KeyGroup,
						Entries: s.entries, Bytes: len(s.data), At: bytes.Index(s.data, r.Bytes),
					}
					if n, _, err := schemes[r.Encoding].read(s.data); err == nil && n == len(r.Bytes) && bytes.Equal(s.data[:n], r.Bytes) {
						u.First = true
						if rest := s.data[n:]; s.entries == 1 && len(rest) > 0 && rest[len(rest)-1] == 0 {
							// A minimal varint ends in a 0 byte only when it
							// is the one-byte encoding of 0.
							u.Value = rest[:len(rest)-1]
						}
					}
					res.Undelimited = append(res.Undelimited, u)
					continue
				}
				for _, l := range ls {
					if l.Key != r.Encoding {
						continue
					}
					walkSection(s, g.KeyGroup, maxParallelism, schemes[l.Key], inspectValueSkippers[l.Value], func(e inspectedEntry) {
						if bytes.Equal(e.key, r.Bytes) {
							res.Matches = append(res.Matches, KeyMatch{
								Reading: r, Table: s.name, KeyGroup: g.KeyGroup, Layout: l,
								Value: e.value, Written: e.written,
							})
						}
					})
				}
			}
		}
	}
	return res, nil
}

// commonKeyEncodings returns the key encodings every table with a layout
// reads as.
func commonKeyEncodings(tables []TableLayout) []KeyEncoding {
	var common []KeyEncoding
	first := true
	for _, t := range tables {
		if len(t.Layouts) == 0 {
			continue
		}
		var encs []KeyEncoding
		for _, l := range t.Layouts {
			if !slices.Contains(encs, l.Key) {
				encs = append(encs, l.Key)
			}
		}
		if first {
			common, first = encs, false
			continue
		}
		common = slices.DeleteFunc(common, func(e KeyEncoding) bool { return !slices.Contains(encs, e) })
	}
	return common
}

// DescribeValue formats a value of table encoded as enc for people: its
// decodings and, for fixed-width values, its bytes in hex, e.g.
// "int64 120 [8 bytes 7800000000000000]".
func DescribeValue(table string, enc ValueEncoding, b []byte) string {
	switch enc {
	case ValueFixed8:
		if len(b) == 8 {
			u := binary.LittleEndian.Uint64(b)
			s := "int64 " + strconv.FormatInt(int64(u), 10)
			if u > math.MaxInt64 {
				s += ", uint64 " + strconv.FormatUint(u, 10)
			}
			// Integers below 2^52 read as subnormal floats: show the
			// float64 reading only when it is a normal number.
			if exp := (u >> 52) & 0x7ff; exp != 0 && exp != 0x7ff {
				s += ", float64 " + strconv.FormatFloat(math.Float64frombits(u), 'g', -1, 64)
			}
			return s + " [8 bytes " + hex.EncodeToString(b) + "]"
		}
	case ValueBytes:
		if v, n, err := CodecFor[string]().Decode(b); err == nil && n == len(b) {
			if utf8.ValidString(v) {
				return fmt.Sprintf("string %s (%s)", strconv.Quote(v), countNoun(len(v), "byte"))
			}
			return fmt.Sprintf("bytes %s (%s)", hexPreview(v), countNoun(len(v), "byte"))
		}
	case ValueIntegers:
		if v, n, err := CodecFor[[]int64]().Decode(b); err == nil && n == len(b) {
			if v == nil {
				return "nil"
			}
			strs := make([]string, len(v))
			if IsTimerTable(table) {
				slices.Sort(v)
			}
			for i, x := range v {
				strs[i] = strconv.FormatInt(x, 10)
			}
			if IsTimerTable(table) {
				return fmt.Sprintf("%s at %s", countNoun(len(v), "timer"), strings.Join(strs, ", "))
			}
			return fmt.Sprintf("%s [%s] (a []int64 or a set of int64)", countNoun(len(v), "integer"), strings.Join(strs, " "))
		}
	case ValueVarint:
		if v, n := binary.Varint(b); n == len(b) && n > 0 {
			u, _ := binary.Uvarint(b)
			return fmt.Sprintf("varint %d (unsigned: %d)", v, u)
		}
	case ValueBool:
		if len(b) == 1 && b[0] <= 1 {
			return "bool " + strconv.FormatBool(b[0] == 1)
		}
	case ValueFixed4:
		if len(b) == 4 {
			f := math.Float32frombits(binary.LittleEndian.Uint32(b))
			return "float32 " + strconv.FormatFloat(float64(f), 'g', -1, 32) + " [4 bytes " + hex.EncodeToString(b) + "]"
		}
	}
	return fmt.Sprintf("%s as %s: %s", countNoun(len(b), "byte"), enc, hexPreview(string(b)))
}

// DescribeUnknownValue formats the encoding of a value of unknown type: its
// bytes in hex and, as a guess, its decodings as the types that could have
// written exactly these bytes (int64 or float64 for 8 bytes, a string for
// a length-prefixed run of printable text).
func DescribeUnknownValue(b []byte) string {
	s := fmt.Sprintf("%s %s", countNoun(len(b), "byte"), hexPreview(string(b)))
	var guesses []string
	if len(b) == 8 {
		guesses = append(guesses, DescribeValue("", ValueFixed8, b))
	}
	if v, n, err := CodecFor[string]().Decode(b); err == nil && n == len(b) && printable(v) {
		guesses = append(guesses, "string "+strconv.Quote(v))
	}
	if len(guesses) > 0 {
		s += " (perhaps " + strings.Join(guesses, ", or ") + ")"
	}
	return s
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// hexPreview formats b in hex, cut after 64 bytes.
func hexPreview(b string) string {
	const limit = 64
	if len(b) > limit {
		return hex.EncodeToString([]byte(b[:limit])) + fmt.Sprintf("... (%d more bytes)", len(b)-limit)
	}
	return hex.EncodeToString([]byte(b))
}

func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
