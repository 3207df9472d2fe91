package state

import (
	"encoding/binary"
	"hash/fnv"
	"math/bits"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func parallelismsFor(maxP int) []int {
	var ps []int
	for p := 1; p <= min(maxP, 10); p++ {
		ps = append(ps, p)
	}
	for _, p := range []int{13, 64, 100, 127, 128, 1000, 4097, maxP - 1, maxP} {
		if p > 10 && p <= maxP && (len(ps) == 0 || p > ps[len(ps)-1]) {
			ps = append(ps, p)
		}
	}
	return ps
}

func TestRangeForSubtaskPartitionsKeyGroups(t *testing.T) {
	for _, maxP := range []int{1, 7, 128, DefaultMaxParallelism, MaxMaxParallelism} {
		for _, p := range parallelismsFor(maxP) {
			owner := make([]int, maxP)
			for i := range owner {
				owner[i] = -1
			}
			next := 0
			minSize, maxSize := maxP+1, -1
			for s := range p {
				r := RangeForSubtask(s, maxP, p)
				if r.Start != next {
					t.Fatalf("maxP=%d p=%d: subtask %d starts at %d, previous range ended at %d", maxP, p, s, r.Start, next)
				}
				if r.End < r.Start || r.End > maxP {
					t.Fatalf("maxP=%d p=%d: subtask %d has range %v", maxP, p, s, r)
				}
				size := r.End - r.Start
				minSize, maxSize = min(minSize, size), max(maxSize, size)
				for kg := r.Start; kg < r.End; kg++ {
					if owner[kg] != -1 {
						t.Fatalf("maxP=%d p=%d: key group %d in the ranges of subtasks %d and %d", maxP, p, kg, owner[kg], s)
					}
					owner[kg] = s
					if !r.Contains(kg) {
						t.Fatalf("maxP=%d p=%d: %v does not contain %d", maxP, p, r, kg)
					}
					if got := SubtaskForKeyGroup(kg, maxP, p); got != s {
						t.Fatalf("maxP=%d p=%d: key group %d is in the range of subtask %d but SubtaskForKeyGroup = %d", maxP, p, kg, s, got)
					}
				}
				if r.Contains(r.Start-1) || r.Contains(r.End) {
					t.Fatalf("maxP=%d p=%d: %v contains a key group outside it", maxP, p, r)
				}
				next = r.End
			}
			if next != maxP {
				t.Fatalf("maxP=%d p=%d: ranges end at %d", maxP, p, next)
			}
			// Every subtask gets a share, and the shares differ by at most
			// one key group.
			if minSize < 1 || maxSize-minSize > 1 {
				t.Fatalf("maxP=%d p=%d: range sizes between %d and %d", maxP, p, minSize, maxSize)
			}
			for kg, s := range owner {
				if s == -1 {
					t.Fatalf("maxP=%d p=%d: key group %d owned by no subtask", maxP, p, kg)
				}
			}
		}
	}
}

func TestKeyGroupRangeString(t *testing.T) {
	if got := (KeyGroupRange{Start: 3, End: 17}).String(); got != "[3,17)" {
		t.Errorf("String() = %q", got)
	}
	if (KeyGroupRange{Start: 4, End: 4}).Contains(4) {
		t.Error("an empty range contains its start")
	}
}

func TestKeyGroupForInRange(t *testing.T) {
	for _, maxP := range []int{1, 7, 128, MaxMaxParallelism} {
		for _, h := range []uint64{0, 1, 1 << 63, ^uint64(0), 0xdeadbeef} {
			if kg := KeyGroupFor(h, maxP); kg < 0 || kg >= maxP {
				t.Errorf("KeyGroupFor(%#x, %d) = %d", h, maxP, kg)
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		h := rapid.Uint64().Draw(t, "hash")
		maxP := rapid.IntRange(1, MaxMaxParallelism).Draw(t, "maxP")
		kg := KeyGroupFor(h, maxP)
		if kg < 0 || kg >= maxP {
			t.Fatalf("KeyGroupFor(%#x, %d) = %d", h, maxP, kg)
		}
		if again := KeyGroupFor(h, maxP); again != kg {
			t.Fatalf("KeyGroupFor(%#x, %d) gave %d then %d", h, maxP, kg, again)
		}
	})
}

// TestKeyGroupForSpreadsSequentialHashes checks that the finalizer spreads
// hashes that differ in few bits (small integers) over all key groups.
func TestKeyGroupForSpreadsSequentialHashes(t *testing.T) {
	const maxP = 128
	counts := make([]int, maxP)
	for h := uint64(0); h < 128*64; h++ {
		counts[KeyGroupFor(h<<32, maxP)]++
	}
	for kg, c := range counts {
		if c == 0 {
			t.Errorf("key group %d got none of %d sequential hashes", kg, 128*64)
		}
	}
}

// hashBytesReference follows the description of HashBytes: FNV-1a 64 whose
// 8-byte words are folded with one multiply and a rotation.
func hashBytesReference(b []byte) uint64 {
	const prime = 0x100000001b3
	h := uint64(0xcbf29ce484222325)
	for ; len(b) >= 8; b = b[8:] {
		h = bits.RotateLeft64((h^binary.LittleEndian.Uint64(b))*prime, 31)
	}
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return h
}

func TestHashBytesShortInputsAreFNV1a(t *testing.T) {
	for _, s := range []string{"", "a", "ab", "hello", "1234567"} {
		f := fnv.New64a()
		f.Write([]byte(s))
		if got, want := HashBytes([]byte(s)), f.Sum64(); got != want {
			t.Errorf("HashBytes(%q) = %#x, FNV-1a 64 = %#x", s, got, want)
		}
	}
}

// TestHashGolden pins hash values and key groups: they decide where the
// entries of existing checkpoints live, so they must never change.
func TestHashGolden(t *testing.T) {
	for _, tc := range []struct {
		s            string
		hash         uint64
		kg128, kg32k int
	}{
		{"", 0xcbf29ce484222325, 38, 10534},
		{"a", 0xaf63dc4c8601ec8c, 91, 20059},
		{"hello", 0xa430d84680aabd0b, 68, 12868},
		{"abcdefgh", 0x0770f3461c8cf758, 62, 25022},
		{"user-42", 0x32c6d7a54d35dacb, 13, 7821},
		{"the quick brown fox jumps", 0xe9becddda12baa63, 39, 5671},
	} {
		if got := HashString(tc.s); got != tc.hash {
			t.Errorf("HashString(%q) = %#x, want %#x", tc.s, got, tc.hash)
		}
		if got := HashBytes([]byte(tc.s)); got != tc.hash {
			t.Errorf("HashBytes(%q) = %#x, want %#x", tc.s, got, tc.hash)
		}
		if got := KeyGroupFor(tc.hash, 128); got != tc.kg128 {
			t.Errorf("KeyGroupFor(hash of %q, 128) = %d, want %d", tc.s, got, tc.kg128)
		}
		if got := KeyGroupFor(tc.hash, MaxMaxParallelism); got != tc.kg32k {
			t.Errorf("KeyGroupFor(hash of %q, 32768) = %d, want %d", tc.s, got, tc.kg32k)
		}
	}
	for _, tc := range []struct {
		v, hash uint64
		kg128   int
	}{
		{0, 0x4300dbefd7b1dea6, 21},
		{1, 0x4300db1657b1de26, 38},
		{42, 0x4300c93ed7b1d3a6, 101},
		{1 << 63, 0x4300dbef97b1dea6, 11},
		{^uint64(0), 0xbcff2337284e20d9, 26},
	} {
		if got := HashUint64(tc.v); got != tc.hash {
			t.Errorf("HashUint64(%d) = %#x, want %#x", tc.v, got, tc.hash)
		}
		if got := KeyGroupFor(tc.hash, 128); got != tc.kg128 {
			t.Errorf("KeyGroupFor(HashUint64(%d), 128) = %d, want %d", tc.v, got, tc.kg128)
		}
	}
	for _, tc := range []struct {
		h                uint64
		kg128, kg7, kg32 int
	}{
		{0, 0, 0, 0},
		{1, 44, 0, 19244},
		{0xdeadbeef, 44, 5, 7596},
	} {
		if got := KeyGroupFor(tc.h, 128); got != tc.kg128 {
			t.Errorf("KeyGroupFor(%#x, 128) = %d, want %d", tc.h, got, tc.kg128)
		}
		if got := KeyGroupFor(tc.h, 7); got != tc.kg7 {
			t.Errorf("KeyGroupFor(%#x, 7) = %d, want %d", tc.h, got, tc.kg7)
		}
		if got := KeyGroupFor(tc.h, MaxMaxParallelism); got != tc.kg32 {
			t.Errorf("KeyGroupFor(%#x, 32768) = %d, want %d", tc.h, got, tc.kg32)
		}
	}
}

type structKey struct {
	A string
	B int
}

// TestHasherForGolden pins the hashes of keys as the runtime computes them
// (HasherFor over CodecFor).
func TestHasherForGolden(t *testing.T) {
	hs := HasherFor(CodecFor[string]())
	if got := hs("user-42"); got != 0x32c6d7a54d35dacb {
		t.Errorf("string key hash = %#x", got)
	}
	h64 := HasherFor(CodecFor[int64]())
	if got := h64(42); got != 0x4300c93ed7b1d3a6 {
		t.Errorf("int64 key hash = %#x", got)
	}
	h32 := HasherFor(CodecFor[int32]())
	if got := h32(-1); got != 0xbcff2337284e20d9 {
		t.Errorf("int32 key hash = %#x", got)
	}
	hst := HasherFor(CodecFor[structKey]())
	if got := hst(structKey{"a", 1}); got != 0xd113bb18678675ef {
		t.Errorf("struct key hash = %#x", got)
	}
	if got := hst(structKey{}); got != 0x08328807b4eb6fed {
		t.Errorf("zero struct key hash = %#x", got)
	}
	if got := KeyGroupFor(hst(structKey{"a", 1}), 128); got != KeyGroupFor(0xd113bb18678675ef, 128) {
		t.Errorf("struct key group = %d", got)
	}
}

func TestHashStringMatchesHashBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOf(rapid.Byte()).Draw(t, "b")
		if HashString(string(b)) != HashBytes(b) {
			t.Fatalf("HashString(%q) = %#x, HashBytes = %#x", b, HashString(string(b)), HashBytes(b))
		}
		if HashBytes(b) != hashBytesReference(b) {
			t.Fatalf("HashBytes(%q) = %#x, reference = %#x", b, HashBytes(b), hashBytesReference(b))
		}
		s := rapid.String().Draw(t, "s")
		if HashString(s) != HashBytes([]byte(s)) {
			t.Fatalf("HashString(%q) = %#x, HashBytes = %#x", s, HashString(s), HashBytes([]byte(s)))
		}
	})
	// Every length around the 8-byte words.
	long := strings.Repeat("0123456789abcdef", 3)
	for n := 0; n <= len(long); n++ {
		if HashString(long[:n]) != HashBytes([]byte(long[:n])) {
			t.Errorf("HashString and HashBytes differ for length %d", n)
		}
	}
}

func TestHashUint64MatchesHashBytes(t *testing.T) {
	check := func(t rapid.TB, v uint64) {
		b := binary.LittleEndian.AppendUint64(nil, v)
		if HashUint64(v) != HashBytes(b) {
			t.Fatalf("HashUint64(%#x) = %#x, HashBytes of its bytes = %#x", v, HashUint64(v), HashBytes(b))
		}
	}
	for _, v := range []uint64{0, 1, 255, 256, 1 << 63, ^uint64(0)} {
		check(t, v)
	}
	rapid.Check(t, func(t *rapid.T) { check(t, rapid.Uint64().Draw(t, "v")) })
}

// TestHasherForMatchesEncoding checks that keys hash as the bytes of their
// encoding, whatever shortcut HasherFor takes: the hash of a key is the hash
// of CodecFor's bytes.
func TestHasherForMatchesEncoding(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		i := rapid.Int64().Draw(t, "i")
		k := structKey{A: rapid.String().Draw(t, "A"), B: rapid.Int().Draw(t, "B")}

		// Strings hash as their bytes (without the length prefix).
		if got, want := HasherFor(CodecFor[string]())(s), HashBytes([]byte(s)); got != want {
			t.Fatalf("string %q hashes to %#x, its bytes to %#x", s, got, want)
		}
		checkIntHash(t, i)
		checkIntHash(t, int(i))
		checkIntHash(t, int32(i))
		checkIntHash(t, int16(i))
		checkIntHash(t, int8(i))
		checkIntHash(t, uint64(i))
		checkIntHash(t, uint(i))
		checkIntHash(t, uint32(i))
		checkIntHash(t, uint16(i))
		checkIntHash(t, uint8(i))

		c := CodecFor[structKey]()
		if got, want := HasherFor(c)(k), HashBytes(c.Append(nil, k)); got != want {
			t.Fatalf("%#v hashes to %#x, its encoding to %#x", k, got, want)
		}
	})
}

// checkIntHash checks that an integer key hashes as its 8-byte encoding, so
// that the same number hashes the same whatever the key's width.
func checkIntHash[T integer](t *rapid.T, v T) {
	c := CodecFor[T]()
	h := HasherFor(c)
	if got, want := h(v), HashBytes(c.Append(nil, v)); got != want {
		t.Fatalf("%T %d hashes to %#x, its encoding to %#x", v, v, got, want)
	}
	var want uint64
	if v < 0 {
		want = HashUint64(uint64(int64(v)))
	} else {
		want = HashUint64(uint64(v))
	}
	if got := h(v); got != want {
		t.Fatalf("%T %d hashes to %#x, as a 64-bit integer to %#x", v, v, got, want)
	}
}

func TestHasherForEqualKeysEqualHashes(t *testing.T) {
	hs := HasherFor(CodecFor[string]())
	h64 := HasherFor(CodecFor[int64]())
	h32 := HasherFor(CodecFor[int32]())
	hst := HasherFor(CodecFor[structKey]())
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		other := rapid.String().Draw(t, "other")
		i := rapid.Int64().Draw(t, "i")
		j := rapid.Int64().Draw(t, "j")

		// Equal keys built separately (different backing memory).
		s2 := strings.Clone(s)
		if hs(s) != hs(s2) {
			t.Fatalf("equal strings %q hash differently", s)
		}
		k1 := structKey{A: s, B: int(i)}
		k2 := structKey{A: strings.Clone(s), B: int(i)}
		h1 := hst(k1)
		// The hasher keeps scratch space: hashing another key in between
		// must not change the answer.
		hst(structKey{A: other + "x", B: int(j)})
		if h2 := hst(k2); h1 != h2 {
			t.Fatalf("equal keys %#v hash to %#x and %#x", k1, h1, h2)
		}
		if h64(i) != h64(i) || h32(int32(i)) != h32(int32(i)) || hs(s) != hs(s) {
			t.Fatal("hash of the same key changed")
		}
		// A fresh hasher gives the same answers.
		if HasherFor(CodecFor[structKey]())(k1) != h1 || HasherFor(CodecFor[string]())(s) != hs(s) || HasherFor(CodecFor[int64]())(i) != h64(i) {
			t.Fatal("a second hasher disagrees with the first")
		}
		if s != other && hs(s) == hs(other) {
			// Not impossible, but for random strings a 64-bit collision
			// means the hash ignores its input.
			t.Fatalf("%q and %q hash alike", s, other)
		}
	})
}

func TestUnmix64InvertsMix64(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := rapid.Uint64().Draw(t, "h")
		if got := mix64(unmix64(h)); got != h {
			t.Fatalf("mix64(unmix64(%#x)) = %#x", h, got)
		}
		if got := unmix64(mix64(h)); got != h {
			t.Fatalf("unmix64(mix64(%#x)) = %#x", h, got)
		}
	})
}

// TestHashInKeyGroup checks that an entry's hash lands in its group's key
// group for every max parallelism, and that entries of one group still
// spread over the slots of a table (home) rather than share one.
func TestHashInKeyGroup(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		group := rapid.Uint64().Draw(t, "group")
		entry := rapid.Uint64().Draw(t, "entry")
		mp := rapid.IntRange(1, MaxMaxParallelism).Draw(t, "maxParallelism")
		if got, want := KeyGroupFor(HashInKeyGroup(group, entry, mp), mp), KeyGroupFor(group, mp); got != want {
			t.Fatalf("maxParallelism %d: key group %d, want the group's %d", mp, got, want)
		}
	})
	// The edge where the entry's mixed hash lies above the last multiple
	// of a max parallelism that does not divide 2^64.
	for _, mp := range []int{3, 7, 100, 127, MaxMaxParallelism - 1} {
		for kg := range min(mp, 50) {
			e := unmix64(^uint64(0) - uint64(kg))
			var g uint64
			for KeyGroupFor(g, mp) != mp-1 {
				g++
			}
			if got := KeyGroupFor(HashInKeyGroup(g, e, mp), mp); got != mp-1 {
				t.Fatalf("maxParallelism %d, entry near 2^64: key group %d, want %d", mp, got, mp-1)
			}
		}
	}
	homes := map[int]bool{}
	for e := uint64(0); e < 1000; e++ {
		homes[home(mix64(HashInKeyGroup(42, HashUint64(e), DefaultMaxParallelism)), 1024)] = true
	}
	if len(homes) < 500 {
		t.Fatalf("1000 entries of one group take %d of 1024 home slots: they do not spread", len(homes))
	}
}
