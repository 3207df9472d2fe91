package state

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

type (
	userID    string
	accountNo int64
	counterNo uint32
	pair      struct {
		N    int64
		Name string
	}
)

// persist writes vals into the value state "value" of a memory backend with
// maxPar key groups, adds a processing-time timer at every ts in timers
// for its key, and returns the backend's snapshot.
func persist[K comparable, V any](t testing.TB, maxPar int, vals map[K]V, timers map[K][]int64) []KeyGroupData {
	t.Helper()
	b := NewMemoryBackend()
	if err := b.Open(KeyGroupRange{Start: 0, End: maxPar}, maxPar); err != nil {
		t.Fatal(err)
	}
	v, err := NewValue(b, "value", CodecFor[K](), CodecFor[V]())
	if err != nil {
		t.Fatal(err)
	}
	tm, err := NewTimers(b, CodecFor[K]())
	if err != nil {
		t.Fatal(err)
	}
	for k, x := range vals {
		v.Put(k, x)
	}
	for k, tss := range timers {
		for _, ts := range tss {
			tm.Register(ProcessingTime, k, ts)
		}
	}
	c, err := b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := c.Persist()
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

func keyGroupOf[K any](k K, maxPar int) int {
	return KeyGroupFor(HasherFor(CodecFor[K]())(k), maxPar)
}

func TestKeyGroupTables(t *testing.T) {
	vals := map[string]int64{}
	timers := map[string][]int64{}
	for i := range 300 {
		k := fmt.Sprintf("k%03d", i)
		vals[k] = int64(i)
		if i%3 == 0 {
			timers[k] = []int64{int64(i), 1 << 40}
		}
	}
	groups := persist(t, 64, vals, timers)
	values, err := ReadValues[string, int64](groups, "value", 64)
	if err != nil {
		t.Fatal(err)
	}
	perKG := map[int]int{}
	for k := range values {
		perKG[keyGroupOf(k, 64)]++
	}
	timersPerKG := map[int]int{}
	for k := range timers {
		timersPerKG[keyGroupOf(k, 64)]++
	}
	for _, g := range groups {
		got, err := KeyGroupTables(g)
		if err != nil {
			t.Fatal(err)
		}
		want := []TableStat{{Name: "value", Entries: perKG[g.KeyGroup]}}
		if n := timersPerKG[g.KeyGroup]; n > 0 {
			want = append(want, TableStat{Name: "__timers_proc", Entries: n})
		}
		bytes := 0
		for i := range got {
			bytes += got[i].Bytes
			got[i].Bytes = 0
		}
		if !slices.Equal(got, want) {
			t.Errorf("key group %d: %+v, want %+v", g.KeyGroup, got, want)
		}
		if bytes >= len(g.Data) || bytes == 0 {
			t.Errorf("key group %d: tables hold %d of %d bytes", g.KeyGroup, bytes, len(g.Data))
		}
		counts, err := TableEntries(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range got {
			if counts[ts.Name] != ts.Entries {
				t.Errorf("key group %d, table %s: %d entries, TableEntries says %d", g.KeyGroup, ts.Name, ts.Entries, counts[ts.Name])
			}
		}
	}

	g := groups[0]
	g.Entries++
	if _, err := KeyGroupTables(g); err == nil || !strings.Contains(err.Error(), "the snapshot says") {
		t.Errorf("wrong entry count: err = %v", err)
	}
	g = KeyGroupData{KeyGroup: 3, Entries: 1, Data: []byte{9, 'v'}}
	if _, err := KeyGroupTables(g); err == nil || !strings.Contains(err.Error(), "key group 3") {
		t.Errorf("truncated data: err = %v", err)
	}
}

// layoutsOf returns the layouts TableLayouts finds per table.
func layoutsOf(t *testing.T, groups []KeyGroupData, maxPar int) map[string][]Layout {
	t.Helper()
	tables, err := TableLayouts(groups, maxPar)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]Layout{}
	for _, tl := range tables {
		out[tl.Name] = tl.Layouts
	}
	return out
}

func manyKeys[K comparable, V any](n int, key func(int) K, val func(int) V) map[K]V {
	m := map[K]V{}
	for i := range n {
		m[key(i)] = val(i)
	}
	return m
}

func TestTableLayouts(t *testing.T) {
	const maxPar, n = 128, 400
	str := func(i int) string { return fmt.Sprintf("key-%d", i) }
	for _, c := range []struct {
		name   string
		groups []KeyGroupData
		want   Layout
	}{
		{"string to int64", persist(t, maxPar, manyKeys(n, str, func(i int) int64 { return int64(i) * 1000 }), nil),
			Layout{KeyString, ValueFixed8}},
		{"int64 to string", persist(t, maxPar, manyKeys(n, func(i int) int64 { return int64(i) - 50 }, str), nil),
			Layout{KeyInteger, ValueBytes}},
		{"int32 to float64", persist(t, maxPar, manyKeys(n, func(i int) int32 { return int32(i) }, func(i int) float64 { return float64(i) / 3 }), nil),
			Layout{KeyInteger, ValueFixed8}},
		{"uint8 to bool", persist(t, maxPar, manyKeys(200, func(i int) uint8 { return uint8(i) }, func(i int) bool { return i%2 == 0 }), nil),
			Layout{KeyInteger, ValueBool}},
		{"named string to float32", persist(t, maxPar, manyKeys(n, func(i int) userID { return userID(str(i)) }, func(i int) float32 { return float32(i) + 0.5 }), nil),
			Layout{KeyNamedString, ValueFixed4}},
		{"named int to []int64", persist(t, maxPar, manyKeys(n, func(i int) accountNo { return accountNo(i * 7919) }, func(i int) []int64 { return []int64{int64(i), -1} }), nil),
			Layout{KeyNamedInt, ValueIntegers}},
		{"named uint to named int", persist(t, maxPar, manyKeys(n, func(i int) counterNo { return counterNo(i) }, func(i int) accountNo { return accountNo(-i) }), nil),
			Layout{KeyNamedUint, ValueVarint}},
		{"string to []byte", persist(t, maxPar, manyKeys(n, str, func(i int) []byte { return []byte(str(i)) }), nil),
			Layout{KeyString, ValueBytes}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := layoutsOf(t, c.groups, maxPar)["value"]
			if len(got) == 0 || got[0] != c.want {
				t.Fatalf("layouts %v, want %v first", got, c.want)
			}
			// One-byte values read as bool, varint and empty list alike;
			// every other type is told apart by 400 entries.
			if c.want.Value != ValueBool && len(got) != 1 {
				t.Fatalf("layouts %v, want only %v", got, c.want)
			}
		})
	}

	// A struct value cannot be delimited; the timers of the same keys can,
	// and they tell the key type.
	vals := manyKeys(n, str, func(i int) pair { return pair{N: int64(i), Name: str(i)} })
	timers := manyKeys(n, str, func(i int) []int64 { return []int64{int64(i), 1 << 50} })
	got := layoutsOf(t, persist(t, maxPar, vals, timers), maxPar)
	if len(got["value"]) != 0 {
		t.Errorf("struct values read as %v", got["value"])
	}
	if want := []Layout{{KeyString, ValueIntegers}}; !slices.Equal(got["__timers_proc"], want) {
		t.Errorf("timers read as %v, want %v", got["__timers_proc"], want)
	}

	if _, err := TableLayouts(nil, 0); err == nil {
		t.Error("TableLayouts accepts max parallelism 0")
	}
}

func TestKeyReadingsHashLikeTheEngine(t *testing.T) {
	for _, maxPar := range []int{1, 64, 128, 1000, MaxMaxParallelism} {
		for _, text := range []string{"", "k007", "7", "-5", "0", "9223372036854775807", "18446744073709551615", "-9223372036854775808"} {
			got := map[KeyEncoding]KeyReading{}
			for _, r := range KeyReadings(text, maxPar) {
				got[r.Encoding] = r
			}
			check := func(enc KeyEncoding, bytes []byte, kg int) {
				t.Helper()
				r, ok := got[enc]
				if !ok {
					t.Errorf("%q: no %s reading", text, enc)
					return
				}
				if string(r.Bytes) != string(bytes) || r.KeyGroup != kg {
					t.Errorf("%q as %s: bytes %x, key group %d; want %x, %d", text, enc, r.Bytes, r.KeyGroup, bytes, kg)
				}
			}
			check(KeyString, CodecFor[string]().Append(nil, text), keyGroupOf(text, maxPar))
			check(KeyNamedString, CodecFor[userID]().Append(nil, userID(text)), keyGroupOf(userID(text), maxPar))
			var i int64
			if _, err := fmt.Sscan(text, &i); err == nil && fmt.Sprint(i) == text {
				enc := CodecFor[int64]().Append(nil, i)
				// Every built-in integer type encodes and hashes alike.
				check(KeyInteger, enc, keyGroupOf(i, maxPar))
				if i >= math.MinInt32 && i <= math.MaxInt32 {
					check(KeyInteger, CodecFor[int32]().Append(nil, int32(i)), keyGroupOf(int32(i), maxPar))
				}
				if i >= 0 && i < 256 {
					check(KeyInteger, CodecFor[uint8]().Append(nil, uint8(i)), keyGroupOf(uint8(i), maxPar))
				}
				check(KeyNamedInt, CodecFor[accountNo]().Append(nil, accountNo(i)), keyGroupOf(accountNo(i), maxPar))
				if i >= 0 && i <= math.MaxUint32 {
					check(KeyNamedUint, CodecFor[counterNo]().Append(nil, counterNo(i)), keyGroupOf(counterNo(i), maxPar))
				}
			} else if text == "18446744073709551615" {
				check(KeyInteger, CodecFor[uint64]().Append(nil, math.MaxUint64), keyGroupOf(uint64(math.MaxUint64), maxPar))
				if _, ok := got[KeyNamedInt]; ok {
					t.Errorf("%q reads as a named signed integer", text)
				}
			} else if _, ok := got[KeyInteger]; ok {
				t.Errorf("%q reads as an integer", text)
			}
		}
	}
	if KeyReadings("x", 0) != nil {
		t.Error("KeyReadings with max parallelism 0")
	}
}

func TestLookupKey(t *testing.T) {
	const maxPar = 64
	str := func(i int) string { return fmt.Sprintf("k%03d", i) }
	groups := persist(t, maxPar,
		manyKeys(50, str, func(i int) int64 { return int64(i) * 10 }),
		manyKeys(50, str, func(i int) []int64 { return []int64{1 << 40, int64(i)} }))

	res, err := LookupKey(groups, maxPar, "k007")
	if err != nil {
		t.Fatal(err)
	}
	kg := keyGroupOf("k007", maxPar)
	if !slices.Equal(res.KeyEncodings, []KeyEncoding{KeyString}) || len(res.Searched) != 1 || res.Searched[0].KeyGroup != kg {
		t.Fatalf("key encodings %v, searched %+v; want strings, in key group %d", res.KeyEncodings, res.Searched, kg)
	}
	if len(res.Matches) != 2 || len(res.Undelimited) != 0 {
		t.Fatalf("matches %+v, undelimited %+v", res.Matches, res.Undelimited)
	}
	v, ts := res.Matches[0], res.Matches[1]
	if v.Table != "value" || v.KeyGroup != kg || DescribeValue(v.Table, v.Layout.Value, v.Value) != "int64 70 [8 bytes 4600000000000000]" {
		t.Errorf("value match %+v: %s", v, DescribeValue(v.Table, v.Layout.Value, v.Value))
	}
	if ts.Table != "__timers_proc" || DescribeValue(ts.Table, ts.Layout.Value, ts.Value) != "2 timers at 7, 1099511627776" {
		t.Errorf("timer match %+v: %s", ts, DescribeValue(ts.Table, ts.Layout.Value, ts.Value))
	}

	// An absent key of the right type is searched in its key group only.
	res, err = LookupKey(groups, maxPar, "nope")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Searched) != 1 || res.Searched[0].KeyGroup != keyGroupOf("nope", maxPar) || len(res.Matches) != 0 {
		t.Fatalf("searched %+v, matches %+v", res.Searched, res.Matches)
	}
	// "7" is a string key here, not an integer one.
	res, err = LookupKey(groups, maxPar, "7")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Searched) != 1 || res.Searched[0].Encoding != KeyString {
		t.Fatalf("searched %+v, want the string reading only", res.Searched)
	}

	// Integer keys: a text that is not an integer is no key of them.
	ints := persist(t, maxPar, manyKeys(7, func(i int) int64 { return int64(i) }, func(i int) string { return str(i) }), nil)
	res, err = LookupKey(ints, maxPar, "k007")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.KeyEncodings, []KeyEncoding{KeyInteger}) || len(res.Searched) != 0 {
		t.Fatalf("key encodings %v, searched %+v", res.KeyEncodings, res.Searched)
	}
	res, err = LookupKey(ints, maxPar, "3")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 1 || DescribeValue("value", res.Matches[0].Layout.Value, res.Matches[0].Value) != `string "k003" (4 bytes)` {
		t.Fatalf("matches %+v", res.Matches)
	}
}

func TestLookupKeyUndelimited(t *testing.T) {
	const maxPar = 16
	str := func(i int) string { return fmt.Sprintf("user-%d", i) }
	vals := manyKeys(100, str, func(i int) pair { return pair{N: int64(i), Name: "x"} })
	groups := persist(t, maxPar, vals, manyKeys(100, str, func(i int) []int64 { return []int64{5} }))
	// Pick a key group holding one key and one holding several.
	perKG := map[int][]string{}
	for k := range vals {
		perKG[keyGroupOf(k, maxPar)] = append(perKG[keyGroupOf(k, maxPar)], k)
	}
	// A key group with several keys, and one of them whose reading as a
	// named string type falls in another key group (the two hashes differ,
	// but may land in one group): in key-group order, so that the choice
	// does not depend on map iteration.
	var several []string
	single := ""
	for kg := range maxPar {
		ks := perKG[kg]
		if len(ks) < 2 {
			continue
		}
		slices.Sort(ks)
		for _, k := range ks {
			if r := KeyReadings(k, maxPar); r[0].KeyGroup != r[1].KeyGroup {
				several, single = ks, k
				break
			}
		}
		if single != "" {
			break
		}
	}
	if several == nil {
		t.Fatal("no key group with several keys")
	}
	// A key group with a single key: remove the others.
	for _, k := range several {
		if k != single {
			delete(vals, k)
		}
	}
	one := persist(t, maxPar, vals, nil)

	res, err := LookupKey(one, maxPar, single)
	if err != nil {
		t.Fatal(err)
	}
	// Without a readable table the key type is unknown: the key is
	// looked up as a string and as a named string type, each in its key
	// group.
	if len(res.KeyEncodings) != 0 || len(res.Searched) != 2 || len(res.Matches) != 0 || len(res.Undelimited) != 2 {
		t.Fatalf("key encodings %v, searched %+v, matches %+v, undelimited %+v", res.KeyEncodings, res.Searched, res.Matches, res.Undelimited)
	}
	if u := res.Undelimited[1]; u.Reading.Encoding != KeyNamedString || u.First || u.At != -1 {
		t.Errorf("the named string reading's key group: %+v", u)
	}
	u := res.Undelimited[0]
	want := CodecFor[pair]().Append(nil, vals[single])
	if u.Table != "value" || !u.First || string(u.Value) != string(want) || u.At != 0 {
		t.Fatalf("undelimited %+v, want the only entry with value %x", u, want)
	}
	if got := DescribeUnknownValue(u.Value); !strings.HasPrefix(got, fmt.Sprintf("%d bytes %x", len(want), want)) {
		t.Errorf("DescribeUnknownValue = %q", got)
	}

	// With timers the key type is known; the struct values still cannot
	// be delimited, but a key whose bytes are absent is certainly absent.
	res, err = LookupKey(groups, maxPar, "absent")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.KeyEncodings, []KeyEncoding{KeyString}) || len(res.Searched) != 1 {
		t.Fatalf("key encodings %v, searched %+v", res.KeyEncodings, res.Searched)
	}
	for _, u := range res.Undelimited {
		if u.At != -1 || u.First {
			t.Errorf("absent key: %+v", u)
		}
	}
	// A present key is found where its table can be read, and in the
	// value table at an entry start or somewhere in the bytes.
	for _, k := range several {
		res, err = LookupKey(groups, maxPar, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Matches) != 1 || res.Matches[0].Table != "__timers_proc" {
			t.Errorf("%s: matches %+v", k, res.Matches)
		}
		if len(res.Undelimited) != 1 || res.Undelimited[0].At < 0 || res.Undelimited[0].Value != nil {
			t.Errorf("%s: undelimited %+v", k, res.Undelimited)
		}
	}
}

func TestLookupKeyAmbiguous(t *testing.T) {
	// One entry whose value 7 also reads as a 7-byte string of zeros.
	groups := persist(t, 8, map[string]int64{"a": 7}, nil)
	res, err := LookupKey(groups, 8, "a")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range res.Matches {
		got = append(got, DescribeValue(m.Table, m.Layout.Value, m.Value))
	}
	want := []string{"int64 7 [8 bytes 0700000000000000]", `string "\x00\x00\x00\x00\x00\x00\x00" (7 bytes)`}
	if !slices.Equal(got, want) {
		t.Fatalf("readings %q, want %q", got, want)
	}
}

func TestDescribeValue(t *testing.T) {
	le := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	for _, c := range []struct {
		table string
		enc   ValueEncoding
		b     []byte
		want  string
	}{
		{"value", ValueFixed8, le(120), "int64 120 [8 bytes 7800000000000000]"},
		{"value", ValueFixed8, le(uint64(math.MaxUint64)), "int64 -1, uint64 18446744073709551615 [8 bytes ffffffffffffffff]"},
		{"value", ValueFixed8, le(math.Float64bits(1.5)), "int64 4609434218613702656, float64 1.5 [8 bytes 000000000000f83f]"},
		{"value", ValueBytes, CodecFor[string]().Append(nil, "héllo"), `string "héllo" (6 bytes)`},
		{"value", ValueBytes, []byte{2, 0xff, 0xfe}, "bytes fffe (2 bytes)"},
		{"value", ValueIntegers, CodecFor[[]int64]().Append(nil, []int64{3, -1}), "2 integers [3 -1] (a []int64 or a set of int64)"},
		{"__timers_event", ValueIntegers, CodecFor[map[int64]struct{}]().Append(nil, map[int64]struct{}{9: {}, 2: {}}), "2 timers at 2, 9"},
		{"value", ValueIntegers, []byte{0}, "nil"},
		{"value", ValueVarint, binary.AppendVarint(nil, -3), "varint -3 (unsigned: 5)"},
		{"value", ValueBool, []byte{1}, "bool true"},
		{"value", ValueFixed4, binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.25)), "float32 0.25 [4 bytes 0000803e]"},
		{"value", ValueFixed8, []byte{1, 2}, "2 bytes as 8 bytes (integer or float64): 0102"},
	} {
		if got := DescribeValue(c.table, c.enc, c.b); got != c.want {
			t.Errorf("DescribeValue(%s, %v, %x) = %q, want %q", c.table, c.enc, c.b, got, c.want)
		}
	}
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{le(5), "8 bytes 0500000000000000 (perhaps int64 5 [8 bytes 0500000000000000])"},
		{CodecFor[string]().Append(nil, "ok"), `3 bytes 026f6b (perhaps string "ok")`},
		{[]byte{0xd0, 0x96, 0x01}, "3 bytes d09601"},
		{make([]byte, 70), strings.Repeat("00", 64) + "... (6 more bytes)"},
	} {
		if got := DescribeUnknownValue(c.b); !strings.HasSuffix(got, c.want) {
			t.Errorf("DescribeUnknownValue(%x) = %q, want it to end with %q", c.b, got, c.want)
		}
	}
}

// FuzzLookupKey feeds arbitrary key-group data to the inspection functions:
// they must report bad data, never panic.
func FuzzLookupKey(f *testing.F) {
	for _, g := range persist(f, 8, map[string]int64{"a": 1, "b": 2, "c": 3}, map[string][]int64{"a": {4}}) {
		f.Add(g.KeyGroup, g.Entries, g.Data, "a")
	}
	f.Add(0, 1, []byte{5, 'v', 'a', 'l', 'u', 'e', 1, 3, 1, 'a', 0x80}, "a")
	f.Fuzz(func(t *testing.T, kg, entries int, data []byte, key string) {
		kg = ((kg % 8) + 8) % 8
		g := []KeyGroupData{{KeyGroup: kg, Entries: entries, Data: data}}
		_, _ = KeyGroupTables(g[0])
		res, err := LookupKey(g, 8, key)
		if err != nil {
			return
		}
		for _, m := range res.Matches {
			_ = DescribeValue(m.Table, m.Layout.Value, m.Value)
		}
		for _, u := range res.Undelimited {
			if u.Value != nil {
				_ = DescribeUnknownValue(u.Value)
			}
		}
	})
}
