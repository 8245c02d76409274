package sampler

import (
	"cmp"
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
	// Below this many candidates no bucket can be large: keep minScale.
	rescaleAbove = 4096
	// tailNats: tokens further than this below the maximum are left out of the
	// sums. All of them together change log Z by less than V*e^-40 (7e-13 at
	// V = 151,936) and the entropy by less than V*40*e^-40 (3e-11).
	tailNats = 40
)

// cand is a token of a bucket that has to be ordered token by token.
type cand struct {
	x  float32
	id int32
	q  uint64
}

// byRank is the sampling order: higher logit first, lower id on ties.
func byRank(a, b cand) int {
	if a.x != b.x {
		if a.x > b.x {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.id, b.id)
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

	surv    []int32  // tokens within tailNats of the maximum (a superset)
	survB   []uint16 // bucket of each surv token, filled by weigh
	cnt     [regularBuckets + 1]uint32
	mass    [regularBuckets + 1]uint64
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
		return Draw{Token: int32(argmax), LogProb: float32(-logZ), Entropy: float32(entropy)}, nil
	}
	tok, ok := s.tokenAt(drawTarget(u, s.prefixMass(s.keptRank(p))))
	if !ok {
		return Draw{}, errors.New("sample: draw target beyond the kept mass (sampler bug)")
	}
	lp := scaled(logits[tok], float64(s.max), s.invT) - logZ
	return Draw{Token: tok, LogProb: float32(lp), Entropy: float32(entropy)}, nil
}

// prepare runs the two passes over s.logits at temperature t (greedy: 1):
// it returns the argmax, log Z with Z = sum e^((x-max)/T), and the entropy,
// and leaves the bucket histogram ready for truncation and the draw.
func (s *scratch) prepare(t float64) (argmax int, logZ, entropy float64, err error) {
	if t == 0 {
		t = 1
	}
	s.invT = 1 / t
	if argmax, err = s.scan(tailNats * t); err != nil {
		return 0, 0, 0, err
	}
	s.chooseScale()
	z, sx := s.weigh()
	logZ = math.Log(z)
	// With y = (x - max)/T and w = e^y: H = -sum p log p = log Z - sum(y w)/Z.
	return argmax, logZ, logZ - sx/z, nil
}

// scan finds the maximum logit (lowest id on ties), rejects NaN and +Inf, and
// collects in s.surv every token within lag of the maximum. The threshold
// follows the running maximum, which only grows, so the set is a superset.
func (s *scratch) scan(lag float64) (argmax int, err error) {
	logits := s.logits
	if cap(s.surv) < len(logits) {
		s.surv = make([]int32, len(logits))
	}
	surv := s.surv[:len(logits)]
	negInf := float32(math.Inf(-1))
	m, thr, n := negInf, negInf, 0
	for i, x := range logits {
		if !(x <= m) { // a new maximum, or NaN
			if x != x {
				return 0, fmt.Errorf("%w: logit %d is NaN", ErrLogits, i)
			}
			if math.IsInf(float64(x), 1) {
				return 0, fmt.Errorf("%w: logit %d is +Inf", ErrLogits, i)
			}
			m, argmax, thr = x, i, lowerThreshold(x, lag)
		}
		// Branch-free compaction: the slot is overwritten unless x is kept.
		surv[n] = int32(i)
		if x >= thr {
			n++
		}
	}
	if m == negInf {
		return 0, fmt.Errorf("%w: all %d logits are -Inf", ErrLogits, len(logits))
	}
	s.surv, s.max = surv[:n], m
	return argmax, nil
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

// chooseScale picks the finest bucket scale at which all candidates still
// fall in regular buckets; at high temperature y spans a fraction of a nat
// and the default 1/32-nat buckets would hold most of the vocabulary.
func (s *scratch) chooseScale() {
	s.scale = minScale
	if len(s.surv) <= rescaleAbove {
		return
	}
	lowest := s.max
	for _, i := range s.surv {
		if x := s.logits[i]; x < lowest { // rarely true: a predictable branch, cheaper than min
			lowest = x
		}
	}
	span := -scaled(lowest, float64(s.max), s.invT)
	for s.scale < maxScale && 2*s.scale*span < regularBuckets {
		s.scale *= 2
	}
}

// weigh is the one pass over the candidate tokens: it returns Z = sum e^y and
// sum y e^y in float64 and fills the per-bucket token counts and quantised
// weights, followed by their prefix sums.
func (s *scratch) weigh() (z, sx float64) {
	// Locals, so that the histogram stores cannot force reloads.
	logits, m, invT, scale := s.logits, float64(s.max), s.invT, s.scale
	cnt, mass := &s.cnt, &s.mass
	clear(cnt[:])
	clear(mass[:])
	if cap(s.survB) < len(s.surv) {
		s.survB = make([]uint16, cap(s.surv))
	}
	survB := s.survB[:len(s.surv)]
	add := func(j int, y float64) (e float64) {
		e = expNeg(y)
		b := bucketOf(y, scale)
		cnt[b]++
		mass[b] += quantise(e)
		survB[j] = uint16(b)
		return e
	}
	// Two tokens per iteration with separate sums: the adds into z and sx
	// are serial dependencies, and two chains overlap.
	var z1, sx1 float64
	surv := s.surv
	j := 0
	for ; j+1 < len(surv); j += 2 {
		y0 := clampTail(scaled(logits[surv[j]], m, invT))
		y1 := clampTail(scaled(logits[surv[j+1]], m, invT))
		e0, e1 := add(j, y0), add(j+1, y1)
		z, z1 = z+e0, z1+e1
		sx, sx1 = sx+float64(y0*e0), sx1+float64(y1*e1)
	}
	if j < len(surv) {
		y := clampTail(scaled(logits[surv[j]], m, invT))
		e := add(j, y)
		z, sx = z+e, sx+float64(y*e)
	}
	z, sx = z+z1, sx+sx1
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
	logits, m, invT := s.logits, float64(s.max), s.invT
	survB := s.survB[:len(s.surv)]
	for j, i := range s.surv {
		if survB[j] == uint16(b) {
			x := logits[i]
			toks = append(toks, cand{x: x, id: i, q: quantise(expNeg(clampTail(scaled(x, m, invT))))})
		}
	}
	slices.SortFunc(toks, byRank)
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
