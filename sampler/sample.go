package sampler

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
)

// Draw is one sampled token with its log-prob and the entropy (nats) of the
// temperature-scaled full-vocabulary distribution it was drawn from.
type Draw struct {
	Token   int32
	LogProb float32
	Entropy float32
	// KeptMass is the probability, under the same distribution, of the tokens
	// that top-k, top-p and min-p kept: exactly 1 when they cut nothing
	// drawable, and 1 for greedy.
	KeptMass float32
}

const (
	// Tokens are bucketed by y = (x - max)/T in steps of 1/scale nat, where
	// scale is a power of two (so -y*scale is exact and a bucket's bounds are
	// exact): minScale by default, more when the candidates span fewer nats
	// (high temperature), so that buckets stay small.
	minScale = 32
	maxScale = 1 << 20
	// The regular buckets cover y in (-1024/scale, 0]: at minScale that is
	// (-32, 0], and a finer scale is only chosen when every candidate fits.
	// Everything lower lands in the overflow bucket; its quantised weight is
	// 0 (e^-28.5 * 2^40 < 1/2), so it can be neither kept by top-p nor drawn.
	regularBuckets = 1024
	overflowBucket = regularBuckets
	// tailNats: the bucket scale is chosen to fit the tokens within this many
	// nats of the maximum; those further down weigh 0 after quantisation.
	tailNats = 40
)

// cand is a token of a bucket that has to be ordered token by token.
type cand struct {
	x  float32
	id int32
	q  uint64
}

// rankKey is a token's place in the sampling order (higher logit first,
// lower id on ties) as an integer, so that a bucket sorts without a
// comparison function. The float bits are mapped to an unsigned order
// (negatives flipped), after x+0 turns -0 into +0, which ranks equal.
func rankKey(x float32, id int32) uint64 {
	u := math.Float32bits(x + 0)
	if u>>31 != 0 {
		u = ^u
	} else {
		u |= 1 << 31
	}
	return uint64(^u)<<32 | uint64(uint32(id))
}

type sortedBucket struct {
	bucket int // -1 when empty
	toks   []cand
}

// scratch is the reusable working memory of one sampling goroutine.
type scratch struct {
	// the row being sampled
	logits []float32
	max    float32
	invT   float64
	scale  float64 // buckets per nat

	bk      []uint16 // every token's bucket, filled by weigh
	stB     []int32  // weigh's staging: bucket and weight of regular tokens
	stQ     []uint64
	ids     []int32  // the tokens of one bucket
	keys    []uint64 // their rankKeys
	cnt     [histSlots]uint32
	mass    [histSlots]uint64
	cumCnt  [regularBuckets + 1]uint32 // tokens in the buckets before b
	cumMass [regularBuckets + 1]uint64 // quantised weight of the buckets before b
	sorted  [2]sortedBucket
	evict   int
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Sample draws one token from one row of logits (len = vocabulary size) and
// advances rng by exactly one value. It is safe for concurrent use with
// distinct streams; Batch spreads many rows over a worker pool.
func Sample(logits []float32, p Params, rng *Stream) (Draw, error) {
	s := scratchPool.Get().(*scratch)
	d, err := s.sample(logits, p, rng)
	scratchPool.Put(s)
	return d, err
}

func (s *scratch) sample(logits []float32, p Params, rng *Stream) (Draw, error) {
	if err := p.Validate(); err != nil {
		return Draw{}, err
	}
	switch {
	case rng == nil:
		return Draw{}, errors.New("sample: nil random stream")
	case len(logits) == 0:
		return Draw{}, fmt.Errorf("%w: empty row", ErrLogits)
	case len(logits) > MaxVocab:
		return Draw{}, fmt.Errorf("%w: row of %d logits exceeds the maximum vocabulary %d", ErrLogits, len(logits), MaxVocab)
	}
	s.logits = logits
	defer func() { s.logits = nil }()
	argmax, logZ, entropy, err := s.prepare(p.Temperature)
	if err != nil {
		return Draw{}, err
	}
	u := rng.Uint64()
	if p.Temperature == 0 {
		return Draw{Token: int32(argmax), LogProb: float32(-logZ), Entropy: float32(entropy), KeptMass: 1}, nil
	}
	kept := s.prefixMass(s.keptRank(p))
	tok, ok := s.tokenAt(drawTarget(u, kept))
	if !ok {
		return Draw{}, errors.New("sample: draw target beyond the kept mass (sampler bug)")
	}
	lp := scaled(logits[tok], float64(s.max), s.invT) - logZ
	return Draw{Token: tok, LogProb: float32(lp), Entropy: float32(entropy), KeptMass: s.keptMass(kept)}, nil
}

// keptMass is the kept share of the quantised weight. Each token's weight is
// rounded by at most 2^-41 of the maximum and Z >= 1 in those units, so it is
// within V*2^-40 (1.4e-7 at V = 151,936) of the exact probability.
func (s *scratch) keptMass(kept uint64) float32 {
	total := s.cumMass[regularBuckets]
	if kept == total {
		return 1
	}
	return float32(float64(kept) / float64(total))
}

// prepare runs the passes over s.logits at temperature t (greedy: 1): it
// returns the argmax, log Z with Z = sum e^((x-max)/T), and the entropy, and
// leaves the bucket histogram ready for truncation and the draw.
func (s *scratch) prepare(t float64) (argmax int, logZ, entropy float64, err error) {
	if t == 0 {
		t = 1
	}
	s.invT = 1 / t
	if s.max, argmax, err = rowMax(s.logits); err != nil {
		return 0, 0, 0, err
	}
	s.chooseScale(t)
	z, sx := s.weigh()
	logZ = math.Log(z)
	// With y = (x - max)/T and w = e^y: H = -sum p log p = log Z - sum(y w)/Z.
	return argmax, logZ, logZ - sx/z, nil
}

// lowerThreshold returns a float32 no greater than x - lag.
func lowerThreshold(x float32, lag float64) float32 {
	t := float64(x) - lag
	t32 := float32(t)
	if float64(t32) > t {
		t32 = math.Nextafter32(t32, float32(math.Inf(-1)))
	}
	return t32
}

// scaled is y = (x - max)/T, the log of the token's weight relative to the
// most probable token. Both differences of float32 values and the scaling
// are monotone, so y never increases along the sampling order.
func scaled(x float32, m, invT float64) float64 {
	return (float64(x) - m) * invT
}

// clampTail raises y to expFloor, the domain of expNeg and bucketOf.
func clampTail(y float64) float64 {
	if y < expFloor {
		return expFloor
	}
	return y
}

// bucketOf maps y in [expFloor, 0] to its bucket; it never decreases as y
// decreases. Branch-free: the integer min compiles to a conditional move.
func bucketOf(y, scale float64) int {
	return min(int(-y*scale), overflowBucket)
}

// chooseScale picks the finest bucket scale at which all tokens within
// tailNats of the maximum still fall in regular buckets; at high temperature
// y spans a fraction of a nat and the default 1/32-nat buckets would hold
// most of the vocabulary.
func (s *scratch) chooseScale(t float64) {
	s.scale = minScale
	lowest := minAtLeast(s.logits, lowerThreshold(s.max, tailNats*t))
	span := -scaled(lowest, float64(s.max), s.invT)
	for s.scale < maxScale && 2*s.scale*span < regularBuckets {
		s.scale *= 2
	}
}

// weigh is the one pass over the row: it returns Z = sum e^y and
// sum y e^y in float64 (lane sums added in a fixed order) and fills every
// token's bucket, the per-bucket token counts and quantised weights, and
// their prefix sums.
func (s *scratch) weigh() (z, sx float64) {
	clear(s.cnt[:])
	clear(s.mass[:])
	n := len(s.logits)
	if cap(s.bk) < n {
		s.bk = make([]uint16, n)
	}
	if s.stB == nil {
		s.stB, s.stQ = make([]int32, weighBlock+lanes), make([]uint64, weighBlock+lanes)
	}
	s.bk = s.bk[:n]
	f := weighFrame{max: float64(s.max), invT: s.invT, scale: s.scale, cnt: &s.cnt, mass: &s.mass}
	for lo := 0; lo < n; lo += weighBlock {
		hi := min(lo+weighBlock, n)
		k := weighTokens(&f, s.logits[lo:hi], s.bk[lo:hi], s.stB, s.stQ)
		stQ := s.stQ[:k]
		for j, b := range s.stB[:k] {
			s.cnt[b]++
			s.mass[b] += stQ[j]
		}
	}
	for l := range lanes {
		z += f.z[l]
		sx += f.sx[l]
	}
	for b := range regularBuckets {
		s.cumCnt[b+1] = s.cumCnt[b] + s.cnt[b]
		s.cumMass[b+1] = s.cumMass[b] + s.mass[b]
	}
	s.sorted[0].bucket, s.sorted[1].bucket = -1, -1
	return z, sx
}

// bucket returns the tokens of regular bucket b in sampling order. The last
// two buckets are cached, because the truncation and the draw usually land in
// the same one or two buckets.
func (s *scratch) bucket(b int) []cand {
	for i := range s.sorted {
		if s.sorted[i].bucket == b {
			return s.sorted[i].toks
		}
	}
	slot := &s.sorted[s.evict]
	s.evict ^= 1
	toks := slot.toks[:0]
	if c := int(s.cnt[b]); cap(s.ids) < c {
		s.ids = make([]int32, c)
	}
	ids := s.ids[:matchBucket(s.bk, uint16(b), s.ids[:s.cnt[b]])]
	logits, m, invT := s.logits, float64(s.max), s.invT
	keys := s.keys[:0]
	for _, i := range ids {
		keys = append(keys, rankKey(logits[i], i))
	}
	slices.Sort(keys)
	s.keys = keys
	for _, k := range keys {
		i := int32(uint32(k))
		x := logits[i]
		toks = append(toks, cand{x: x, id: i, q: quantise(expNeg(clampTail(scaled(x, m, invT))))})
	}
	slot.bucket, slot.toks = b, toks
	return toks
}

// regularCount is the number of tokens in the regular buckets; every token
// ranked after them has weight 0.
func (s *scratch) regularCount() int { return int(s.cumCnt[regularBuckets]) }

// prefixMass is the quantised weight of the first n tokens in sampling order.
func (s *scratch) prefixMass(n int) uint64 {
	if n >= s.regularCount() {
		return s.cumMass[regularBuckets]
	}
	b := sort.Search(regularBuckets, func(b int) bool { return int(s.cumCnt[b+1]) > n })
	w := s.cumMass[b]
	if off := n - int(s.cumCnt[b]); off > 0 {
		for _, c := range s.bucket(b)[:off] {
			w += c.q
		}
	}
	return w
}

// keptRank applies top-k, then top-p, then min-p, and returns how many tokens
// (in sampling order) remain. Tokens past regularCount weigh 0, so the count
// is capped there.
func (s *scratch) keptRank(p Params) int {
	n := s.regularCount()
	if p.TopK > 0 && p.TopK < n {
		n = p.TopK
	}
	if p.TopP < 1 {
		n = s.rankReaching(topPNeed(p.TopP, s.prefixMass(n)), n)
	}
	if p.MinP > 0 {
		n = min(n, s.rankAbove(math.Log(p.MinP)))
	}
	return n
}

// topPNeed is the weight the top-p prefix must reach: tokens are kept while
// the weight before them is below it.
func topPNeed(topP float64, total uint64) uint64 {
	return uint64(math.Ceil(topP * float64(total)))
}

// rankReaching returns the length of the shortest prefix whose weight
// reaches need, at most limit.
func (s *scratch) rankReaching(need uint64, limit int) int {
	b := sort.Search(regularBuckets, func(b int) bool { return s.cumMass[b+1] >= need })
	if b == regularBuckets { // need exceeds the total only through float rounding
		return limit
	}
	cum := s.cumMass[b]
	for off, c := range s.bucket(b) {
		cum += c.q
		if cum >= need {
			return min(limit, int(s.cumCnt[b])+off+1)
		}
	}
	return limit
}

// rankAbove returns how many tokens have y >= lnMinP, i.e. probability at
// least min-p times the maximum. Those are a prefix of the sampling order.
func (s *scratch) rankAbove(lnMinP float64) int {
	b := bucketOf(lnMinP, s.scale)
	if b == overflowBucket {
		return s.regularCount()
	}
	n := int(s.cumCnt[b])
	for _, c := range s.bucket(b) {
		if scaled(c.x, float64(s.max), s.invT) < lnMinP {
			break
		}
		n++
	}
	return n
}

// drawTarget maps 64 random bits to an integer uniform in [0, total) without
// rounding: the high word of u*total.
func drawTarget(u, total uint64) uint64 {
	hi, _ := bits.Mul64(u, total)
	return hi
}

// tokenAt returns the first token in sampling order whose cumulative weight
// exceeds target (inverse-CDF draw). ok is false only if target is not below
// the total weight, which drawTarget rules out.
func (s *scratch) tokenAt(target uint64) (tok int32, ok bool) {
	b := sort.Search(regularBuckets, func(b int) bool { return s.cumMass[b+1] > target })
	if b == regularBuckets {
		return 0, false
	}
	cum := s.cumMass[b]
	for _, c := range s.bucket(b) {
		cum += c.q
		if cum > target {
			return c.id, true
		}
	}
	return 0, false
}
