package sampler

import "math/bits"

// Stream is the random number stream of one sequence: xoshiro256** with its
// whole state exported, so a caller can copy it, store it with a run (JSON,
// gob, ...) and resume the sequence later exactly where it stopped.
//
// A Stream must not be used by two goroutines at once; each sequence owns one.
type Stream struct {
	State [4]uint64
}

// golden is 2^64 divided by the golden ratio: adding it walks a Weyl sequence
// whose consecutive values differ in many bits before mixing.
const golden = 0x9e3779b97f4a7c15

// mix64 is a bijective 64-bit finaliser (the SplitMix64 output function):
// every input bit affects every output bit.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// NewStream derives the stream of one sequence from the run seed and the ids
// that name the sequence, e.g. (request, sample index) or (problem, agent,
// turn, trajectory). The ids are hashed in order together with their count,
// so (seed, 1, 2), (seed, 2, 1) and (seed, 1, 2, 0) are unrelated streams, and
// a sequence's draws depend on nothing but these numbers: not on batch size,
// row order or worker count.
func NewStream(seed uint64, ids ...uint64) Stream {
	h := mix64(seed + golden)
	for _, id := range ids {
		h = mix64(h ^ mix64(id+golden))
	}
	h = mix64(h + uint64(len(ids)))
	// Four Weyl steps from h, mixed: at most one of them can be zero, so the
	// xoshiro state is never all zero.
	var s Stream
	for i := range s.State {
		h += golden
		s.State[i] = mix64(h)
	}
	return s
}

// Uint64 returns the next 64 uniformly distributed bits.
func (s *Stream) Uint64() uint64 {
	st := &s.State
	out := bits.RotateLeft64(st[1]*5, 7) * 9
	t := st[1] << 17
	st[2] ^= st[0]
	st[3] ^= st[1]
	st[1] ^= st[2]
	st[0] ^= st[3]
	st[2] ^= t
	st[3] = bits.RotateLeft64(st[3], 45)
	return out
}

// Float64 returns a uniform number in [0, 1) with 53 random bits.
func (s *Stream) Float64() float64 {
	return float64(s.Uint64()>>11) * 0x1p-53
}
