package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// This file reads the key-group data of a backend whose tables live in a
// BytesStore (Pebble), in the format of its Capture.Persist: per entry,
// uvarint length + the storage key without its key-group prefix, uvarint
// length + the value. Unlike a memory snapshot's sections, every entry is
// delimited, so a key's entries are found exactly; only the types of keys
// and values are guessed, as for memory snapshots.

// bytesEntry is one entry of byte-store key-group data.
type bytesEntry struct {
	kg    int
	table string
	// rest is the storage key after the table name: the key's encoding,
	// then for a map table 0x00 (its header) or 0x01 + a user key.
	rest []byte
	// written is the value's write time (map entries have none) and value
	// the value's encoding after it.
	value []byte
}

// bytesMetaTable names the entries of a key group's metadata (the capture
// clocks of tables with a TTL) in inspection output.
const bytesMetaTable = "(ttl clocks)"

// parseBytesGroup splits one key group's data into its entries.
func parseBytesGroup(g KeyGroupData) ([]bytesEntry, error) {
	var out []bytesEntry
	b := g.Data
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, fmt.Errorf("key group %d, entry %d: key is truncated", g.KeyGroup, len(out))
		}
		key := b[n : n+int(l)]
		b = b[n+int(l):]
		l, n = binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, fmt.Errorf("key group %d, entry %d: value is truncated", g.KeyGroup, len(out))
		}
		value := b[n : n+int(l)]
		b = b[n+int(l):]
		nl, m := binary.Uvarint(key)
		if m <= 0 || nl > uint64(len(key)-m) {
			return nil, fmt.Errorf("key group %d, entry %d: table name is truncated", g.KeyGroup, len(out))
		}
		e := bytesEntry{kg: g.KeyGroup, table: string(key[m : m+int(nl)]), rest: key[m+int(nl):], value: value}
		if nl == 0 {
			e.table = bytesMetaTable
		}
		out = append(out, e)
	}
	if len(out) != g.Entries {
		return out, fmt.Errorf("key group %d: it holds %d entries, the snapshot says %d", g.KeyGroup, len(out), g.Entries)
	}
	return out, nil
}

// BytesKeyGroupTables is KeyGroupTables for the key-group data of a
// byte-store backend: the entries and bytes of each table (a map's header
// and each of its entries count as entries).
func BytesKeyGroupTables(g KeyGroupData) ([]TableStat, error) {
	es, err := parseBytesGroup(g)
	if err != nil {
		return nil, err
	}
	var out []TableStat
	for _, e := range es {
		size := len(e.rest) + len(e.value) + len(e.table)
		if i := slices.IndexFunc(out, func(t TableStat) bool { return t.Name == e.table }); i >= 0 {
			out[i].Entries++
			out[i].Bytes += size
			continue
		}
		out = append(out, TableStat{Name: e.table, Entries: 1, Bytes: size})
	}
	return out, nil
}

// bytesKeyLen reads the key at the front of rest with ks and reports its
// length, whether the entry is one of a map (a suffix follows) and whether
// the key belongs to key group kg.
func bytesKeyLen(rest []byte, ks inspectKeyScheme, kg, maxParallelism int) (n int, isMap, ok bool) {
	n, hash, err := ks.read(rest)
	if err != nil || KeyGroupFor(hash, maxParallelism) != kg {
		return 0, false, false
	}
	switch {
	case n == len(rest):
		return n, false, true
	case rest[n] == mapHeader && n+1 == len(rest), rest[n] == mapEntry:
		return n, true, true
	}
	return 0, false, false
}

// LookupBytesKey is LookupKey for the key-group data of a byte-store
// backend. Entries are delimited, so a key is found or not found for
// certain; a value that no known encoding reads is reported as
// Undelimited with its bytes. Entries of a map (MapState, timers) are
// matched one by one, with their user key in KeyMatch.MapKey; a map's
// header is not reported.
func LookupBytesKey(groups []KeyGroupData, maxParallelism int, text string) (*KeyLookup, error) {
	if maxParallelism < 1 || maxParallelism > MaxMaxParallelism {
		return nil, fmt.Errorf("max parallelism %d is out of range [1, %d]", maxParallelism, MaxMaxParallelism)
	}
	type table struct {
		name  string
		isMap bool
		// keyOK[i]: every key reads as scheme i; valueOK[j]: every value
		// (map entries' values for a map) reads as inspectValueOrder[j].
		keyOK, valueOK []bool
	}
	schemes := inspectKeySchemes()
	var tables []*table
	byName := map[string]*table{}
	var all []bytesEntry
	for _, g := range groups {
		es, err := parseBytesGroup(g)
		if err != nil {
			return nil, err
		}
		all = append(all, es...)
	}
	for _, e := range all {
		if e.table == bytesMetaTable {
			continue
		}
		t := byName[e.table]
		if t == nil {
			t = &table{name: e.table, keyOK: make([]bool, len(schemes)), valueOK: make([]bool, len(inspectValueOrder))}
			for i := range t.keyOK {
				t.keyOK[i] = true
			}
			for i := range t.valueOK {
				t.valueOK[i] = true
			}
			byName[e.table] = t
			tables = append(tables, t)
		}
		// kind: 0 a value or list entry, 1 a map header, 2 a map entry, as
		// the first key scheme that reads the key says.
		kind := -1
		for i, ks := range schemes {
			if !t.keyOK[i] {
				continue
			}
			n, isMap, ok := bytesKeyLen(e.rest, ks, e.kg, maxParallelism)
			if !ok {
				t.keyOK[i] = false
				continue
			}
			if kind < 0 {
				kind = 0
				if isMap {
					t.isMap = true
					kind = 2
					if e.rest[n] == mapHeader {
						kind = 1
					}
				}
			}
		}
		if kind == 1 {
			continue
		}
		val, ok := entryValue(e, kind == 2)
		for j, ve := range inspectValueOrder {
			if !t.valueOK[j] {
				continue
			}
			if !ok {
				t.valueOK[j] = false
				continue
			}
			if m, err := inspectValueSkippers[ve](val); err != nil || m != len(val) {
				t.valueOK[j] = false
			}
		}
	}
	res := &KeyLookup{Key: text, Readings: KeyReadings(text, maxParallelism)}
	for _, t := range tables {
		tl := TableLayout{Name: t.name}
		for i, ks := range schemes {
			if !t.keyOK[i] {
				continue
			}
			for j, ve := range inspectValueOrder {
				if t.valueOK[j] {
					tl.Layouts = append(tl.Layouts, Layout{Key: ks.enc, Value: ve})
				}
			}
			if !slices.Contains(res.KeyEncodings, ks.enc) {
				res.KeyEncodings = append(res.KeyEncodings, ks.enc)
			}
		}
		res.Tables = append(res.Tables, tl)
	}
	// Keys are delimited whatever their values are: the key encodings
	// every table reads as settle the key type.
	common := res.KeyEncodings
	for _, t := range tables {
		common = slices.DeleteFunc(slices.Clone(common), func(enc KeyEncoding) bool {
			i := slices.IndexFunc(schemes, func(ks inspectKeyScheme) bool { return ks.enc == enc })
			return !t.keyOK[i]
		})
	}
	if len(common) > 0 {
		res.KeyEncodings = common
	}
	slices.Sort(res.KeyEncodings)
	for _, r := range res.Readings {
		if len(res.KeyEncodings) == 0 || slices.Contains(res.KeyEncodings, r.Encoding) {
			res.Searched = append(res.Searched, r)
		}
	}
	for _, r := range res.Searched {
		for _, e := range all {
			if e.kg != r.KeyGroup || e.table == bytesMetaTable || !bytes.HasPrefix(e.rest, r.Bytes) {
				continue
			}
			t := byName[e.table]
			suffix := e.rest[len(r.Bytes):]
			var mapKey []byte
			switch {
			case len(suffix) == 0 && !t.isMap:
			case t.isMap && len(suffix) == 1 && suffix[0] == mapHeader:
				continue
			case t.isMap && len(suffix) > 0 && suffix[0] == mapEntry:
				mapKey = suffix[1:]
			default:
				continue
			}
			val, ok := entryValue(e, mapKey != nil)
			if !ok {
				return nil, fmt.Errorf("key group %d, table %q: an entry's write time is malformed", e.kg, e.table)
			}
			written := int64(0)
			if !t.isMap {
				written, _ = binary.Varint(e.value)
			}
			var layouts []Layout
			for _, tl := range res.Tables {
				if tl.Name == e.table {
					for _, l := range tl.Layouts {
						if l.Key == r.Encoding {
							layouts = append(layouts, l)
						}
					}
				}
			}
			if len(layouts) == 0 {
				res.Undelimited = append(res.Undelimited, Undelimited{
					Reading: r, Table: e.table, KeyGroup: e.kg, Entries: 1, Bytes: len(val),
					First: true, Value: val, MapKey: mapKey,
				})
				continue
			}
			for _, l := range layouts {
				res.Matches = append(res.Matches, KeyMatch{
					Reading: r, Table: e.table, KeyGroup: e.kg, Layout: l,
					Value: val, Written: written, MapKey: mapKey,
				})
			}
		}
	}
	return res, nil
}

// entryValue returns the encoding of an entry's value: after the write
// time for a value or list entry, the whole value of a map entry (which
// has none). ok is false when the write time does not read.
func entryValue(e bytesEntry, mapEntry bool) (val []byte, ok bool) {
	if mapEntry {
		return e.value, true
	}
	_, m := binary.Varint(e.value)
	if m <= 0 {
		return nil, false
	}
	return e.value[m:], true
}
