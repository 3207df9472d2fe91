package state

import (
	"encoding/binary"
	"strings"
	"testing"
)

// bytesGroup builds byte-store key-group data from (storage key without
// the key-group prefix, value) pairs.
func bytesGroup(kg int, kvs ...[]byte) KeyGroupData {
	g := KeyGroupData{KeyGroup: kg}
	for i := 0; i+1 < len(kvs); i += 2 {
		g.Data = binary.AppendUvarint(g.Data, uint64(len(kvs[i])))
		g.Data = append(g.Data, kvs[i]...)
		g.Data = binary.AppendUvarint(g.Data, uint64(len(kvs[i+1])))
		g.Data = append(g.Data, kvs[i+1]...)
		g.Entries++
	}
	return g
}

func tableKey(table string, key []byte, suffix ...byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(table)))
	b = append(append(b, table...), key...)
	return append(b, suffix...)
}

func TestLookupBytesKey(t *testing.T) {
	const maxPar = 16
	sc := CodecFor[string]()
	key := func(s string) []byte { return sc.Append(nil, s) }
	kgOf := func(s string) int { return KeyGroupFor(HashString(s), maxPar) }
	val := func(v uint64) []byte { return binary.LittleEndian.AppendUint64([]byte{0}, v) }
	ts := binary.LittleEndian.AppendUint64(nil, 1500)
	var groups []KeyGroupData
	for _, k := range []string{"a", "b", "c"} {
		groups = append(groups, bytesGroup(kgOf(k),
			tableKey("count", key(k)), val(uint64(len(k)*7)),
			tableKey("__timers_event", key(k), mapHeader), []byte{0, 1},
			tableKey("__timers_event", key(k), append([]byte{mapEntry}, ts...)...), nil,
		))
	}
	res, err := LookupBytesKey(groups, maxPar, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.KeyEncodings) != 1 || res.KeyEncodings[0] != KeyString {
		t.Fatalf("key encodings %v, want string", res.KeyEncodings)
	}
	var count, timer int
	for _, m := range res.Matches {
		if m.Table == "count" && m.Layout.Value == ValueFixed8 && binary.LittleEndian.Uint64(m.Value) == 7 {
			count++
		}
	}
	for _, u := range res.Undelimited {
		if u.Table == "__timers_event" && len(u.MapKey) == 8 && binary.LittleEndian.Uint64(u.MapKey) == 1500 {
			timer++
		}
	}
	if count != 1 || timer != 1 {
		t.Fatalf("matches %+v, undelimited %+v: want the count 7 and the timer at 1500", res.Matches, res.Undelimited)
	}
	res, err = LookupBytesKey(groups, maxPar, "zz")
	if err != nil || len(res.Matches)+len(res.Undelimited) != 0 {
		t.Fatalf("an absent key: %+v, %v", res, err)
	}

	tables, err := BytesKeyGroupTables(groups[0])
	if err != nil || len(tables) != 2 || tables[0].Name != "count" || tables[1].Entries != 2 {
		t.Fatalf("tables %+v, %v", tables, err)
	}
	bad := groups[0]
	bad.Data = bad.Data[:len(bad.Data)-3]
	if _, err := BytesKeyGroupTables(bad); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated data: err = %v", err)
	}
	bad = groups[0]
	bad.Entries++
	if _, err := LookupBytesKey([]KeyGroupData{bad}, maxPar, "a"); err == nil || !strings.Contains(err.Error(), "the snapshot says") {
		t.Fatalf("wrong entry count: err = %v", err)
	}
}

// FuzzLookupBytesKey: whatever the data, inspection returns or fails, and
// never panics.
func FuzzLookupBytesKey(f *testing.F) {
	sc := CodecFor[string]()
	f.Add(bytesGroup(3, tableKey("v", sc.Append(nil, "k")), []byte{0, 1, 2}).Data, 1, 8, "k")
	f.Add([]byte{1, 0, 0}, 1, 4, "1")
	f.Fuzz(func(t *testing.T, data []byte, entries, maxPar int, key string) {
		g := KeyGroupData{KeyGroup: 0, Entries: entries, Data: data}
		_, _ = BytesKeyGroupTables(g)
		if maxPar < 1 || maxPar > 1024 {
			return
		}
		_, _ = LookupBytesKey([]KeyGroupData{g}, maxPar, key)
	})
}
