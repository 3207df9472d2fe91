package state

import (
	"fmt"
	"math/bits"
)

// DefaultMaxParallelism is the number of key groups when none is configured.
const DefaultMaxParallelism = 128

// MaxMaxParallelism bounds the number of key groups (Flink's upper bound).
const MaxMaxParallelism = 1 << 15

// KeyGroupFor returns the key group of a key hash.
func KeyGroupFor(hash uint64, maxParallelism int) int {
	return int(mix64(hash) % uint64(maxParallelism))
}

// SubtaskForKeyGroup returns the subtask that owns key group kg.
func SubtaskForKeyGroup(kg, maxParallelism, parallelism int) int {
	return kg * parallelism / maxParallelism
}

// KeyGroupRange is the half-open range [Start, End) of key groups one subtask
// owns.
type KeyGroupRange struct{ Start, End int }

// Contains reports whether kg is in the range.
func (r KeyGroupRange) Contains(kg int) bool { return kg >= r.Start && kg < r.End }

// String formats the range as [start,end).
func (r KeyGroupRange) String() string { return fmt.Sprintf("[%d,%d)", r.Start, r.End) }

// RangeForSubtask returns the key groups subtask owns, consistent with
// SubtaskForKeyGroup.
func RangeForSubtask(subtask, maxParallelism, parallelism int) KeyGroupRange {
	start := (subtask*maxParallelism + parallelism - 1) / parallelism
	end := ((subtask+1)*maxParallelism + parallelism - 1) / parallelism
	return KeyGroupRange{Start: start, End: end}
}

// mix64 is a finalizer (from MurmurHash3) so that poorly distributed hashes
// still spread over key groups.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// unmix64 inverts mix64: mix64(unmix64(m)) == m.
func unmix64(m uint64) uint64 {
	m ^= m >> 33
	m *= 0x9cb4b2f8129337db // the inverse of 0xc4ceb9fe1a85ec53 mod 2^64
	m ^= m >> 33
	m *= 0x4f74430c22a54005 // the inverse of 0xff51afd7ed558ccd mod 2^64
	m ^= m >> 33
	return m
}

// HashInKeyGroup returns a key hash that falls into the key group of the
// key hash group (KeyGroupFor(result, maxParallelism) ==
// KeyGroupFor(group, maxParallelism)) while its other bits come from the
// hash entry. A state whose entries belong to another state's key (the
// distinct values of a SQL group, each an entry of its own) hashes its
// keys with it, through a codec that implements KeyHasher: the entries
// then move with their group's key when a job is rescaled, yet spread over
// the slots of its key group's table.
func HashInKeyGroup(group, entry uint64, maxParallelism int) uint64 {
	mp := uint64(maxParallelism)
	kg := mix64(group) % mp
	e := mix64(entry)
	base := e - e%mp
	m := base + kg
	if m < base { // wrapped past 2^64: take the multiple of mp below
		m = base - mp + kg
	}
	return unmix64(m)
}

// HashBytes is the stable hash of an encoded key (FNV-1a 64 folded through
// a multiply per 8 bytes for speed). It never changes between releases:
// key groups of existing checkpoints depend on it.
func HashBytes(b []byte) uint64 {
	const prime = 0x100000001b3
	h := uint64(0xcbf29ce484222325)
	for len(b) >= 8 {
		v := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		h = bits.RotateLeft64((h^v)*prime, 31)
		b = b[8:]
	}
	for _, c := range b {
		h = (h ^ uint64(c)) * prime
	}
	return h
}

// HashString hashes s exactly as HashBytes hashes []byte(s), without copying.
func HashString(s string) uint64 {
	const prime = 0x100000001b3
	h := uint64(0xcbf29ce484222325)
	for len(s) >= 8 {
		v := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = bits.RotateLeft64((h^v)*prime, 31)
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * prime
	}
	return h
}

// HashUint64 hashes a fixed-width integer key (its 8 little-endian bytes).
func HashUint64(v uint64) uint64 {
	const prime = 0x100000001b3
	h := uint64(0xcbf29ce484222325)
	return bits.RotateLeft64((h^v)*prime, 31)
}
