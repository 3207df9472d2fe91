package nexmark

// javaRandom is java.util.Random's 48-bit linear congruential generator,
// reproduced bit for bit (including Java's int32 wrap-around and truncating
// division), so that a generator seeded with an event id draws the same
// numbers as the reference's per-event Random. It is a value type: seeding
// one per event allocates nothing.
type javaRandom struct{ seed uint64 }

const (
	jrMultiplier = 0x5DEECE66D
	jrAddend     = 0xB
	jrMask       = 1<<48 - 1
)

func newJavaRandom(seed int64) javaRandom {
	return javaRandom{seed: (uint64(seed) ^ jrMultiplier) & jrMask}
}

// next returns the next bits (at most 32) random bits as Java's next(int).
func (r *javaRandom) next(bits uint) int32 {
	r.seed = (r.seed*jrMultiplier + jrAddend) & jrMask
	return int32(uint32(r.seed >> (48 - bits)))
}

// nextInt is Java's nextInt(): 32 random bits.
func (r *javaRandom) nextInt() int32 { return r.next(32) }

// intn is Java's nextInt(bound), bound > 0, with its rejection loop.
func (r *javaRandom) intn(bound int32) int32 {
	v := r.next(31)
	m := bound - 1
	if bound&m == 0 {
		return int32((int64(bound) * int64(v)) >> 31)
	}
	for u := v; ; u = r.next(31) {
		v = u % bound
		if u-v+m >= 0 { // int32 overflow, as in Java, rejects the tail
			return v
		}
	}
}

// nextLong is Java's nextLong().
func (r *javaRandom) nextLong() int64 {
	hi := int64(r.next(32)) << 32
	return hi + int64(r.next(32))
}

// nextDouble is Java's nextDouble(): 53 random bits in [0, 1).
func (r *javaRandom) nextDouble() float64 {
	hi := int64(r.next(26)) << 27
	return float64(hi+int64(r.next(27))) * (1.0 / (1 << 53))
}

// longn is the reference's LongGenerator.nextLong(random, n): a value in
// [0, n), skewed (as in the reference) when n does not fit an int.
func (r *javaRandom) longn(n int64) int64 {
	if n < 1<<31-1 {
		return int64(r.intn(int32(n)))
	}
	v := r.nextLong() % n
	if v < 0 {
		v = -v
	}
	return v
}
