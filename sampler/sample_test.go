package sampler

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// refLogSoftmax is an independent float64 log-softmax of logits/T with
// math.Exp and math.Log, in the textbook stable form (z - max) - log sum.
func refLogSoftmax(logits []float32, temp float64) []float64 {
	z := make([]float64, len(logits))
	mx := math.Inf(-1)
	for i, x := range logits {
		z[i] = float64(x) / temp
		mx = math.Max(mx, z[i])
	}
	sum := 0.0
	for _, v := range z {
		sum += math.Exp(v - mx)
	}
	logSum := math.Log(sum)
	for i := range z {
		z[i] = (z[i] - mx) - logSum
	}
	return z
}

func refEntropy(lp []float64) float64 {
	h := 0.0
	for _, v := range lp {
		if p := math.Exp(v); p > 0 {
			h -= p * v
		}
	}
	return h
}

// lpTolerance: 1e-6 absolute, plus 1e-12 relative for log-probs like -1e30,
// where x/T and (x - max)/T differ in their last bits.
func lpTolerance(ref float64) float64 { return 1e-6 + 1e-12*math.Abs(ref) }

type namedRow struct {
	name string
	row  []float32
}

// adversarialRows are the rows on which the log-prob bound must hold.
func adversarialRows() []namedRow {
	r := rand.New(rand.NewPCG(11, 12))
	v := qwenVocab
	fill := func(f func(i int) float32) []float32 {
		row := make([]float32, v)
		for i := range row {
			row[i] = f(i)
		}
		return row
	}
	return []namedRow{
		{"gaussian sd 1", gaussianRow(r, v, 1)},
		{"gaussian sd 30", gaussianRow(r, v, 30)},
		{"lm-like", lmLikeRow(r, v)},
		{"all equal", fill(func(int) float32 { return 3.5 })},
		{"all equal and huge", fill(func(int) float32 { return 1e30 })},
		{"one-hot among -1e30", fill(func(i int) float32 {
			if i == 777 {
				return 0
			}
			return -1e30
		})},
		{"huge range, random magnitudes 1e-3..1e30", fill(func(int) float32 {
			return float32(math.Copysign(math.Pow(10, -3+33*r.Float64()), r.Float64()-0.5))
		})},
		{"float32 extremes", fill(func(i int) float32 {
			return []float32{math.MaxFloat32, -math.MaxFloat32, 0, 1}[i%4]
		})},
		{"near-ties below the max", fill(func(i int) float32 { return 10 - float32(i%7)*1e-6 })},
		{"half masked", maskedRow(r, v, 0.5)},
		{"all masked but two", fill(func(i int) float32 {
			if i == 5 || i == v-1 {
				return 2
			}
			return float32(math.Inf(-1))
		})},
	}
}

// TestLogProbExact: log-probs of every token, the normaliser and the entropy
// match an independent float64 computation on adversarial rows at vocab
// 151,936, and exp(log-probs) sums to 1.
func TestLogProbExact(t *testing.T) {
	if testing.Short() {
		t.Skip("full-vocabulary rows")
	}
	for _, nr := range adversarialRows() {
		for _, temp := range []float64{0, 1e-3, 0.6, 1, 7} {
			t.Run(fmt.Sprintf("%s/T=%g", nr.name, temp), func(t *testing.T) {
				refT := temp
				if temp == 0 {
					refT = 1 // greedy reports at T = 1
				}
				ref := refLogSoftmax(nr.row, refT)
				s := new(scratch)
				s.logits = nr.row
				_, logZ, entropy, err := s.prepare(temp)
				if err != nil {
					t.Fatal(err)
				}
				worst, sum := 0.0, 0.0
				for i, x := range nr.row {
					lp := scaled(x, float64(s.max), s.invT) - logZ
					if math.IsInf(ref[i], -1) {
						if !math.IsInf(lp, -1) {
							t.Fatalf("token %d: masked in the reference, log-prob %v here", i, lp)
						}
						continue
					}
					if d := math.Abs(lp - ref[i]); d > lpTolerance(ref[i]) {
						t.Fatalf("token %d: log-prob %.17g, reference %.17g (|diff| %.3g)", i, lp, ref[i], d)
					} else if d > worst && math.Abs(ref[i]) < 1e6 {
						worst = d
					}
					sum += math.Exp(lp)
				}
				t.Logf("max |log-prob - reference| = %.3g", worst)
				if math.Abs(sum-1) > 1e-9 {
					t.Errorf("sum of exp(log-prob) = %.15f, want 1", sum)
				}
				if want := refEntropy(ref); math.Abs(entropy-want) > 1e-8 {
					t.Errorf("entropy %.15g, reference %.15g", entropy, want)
				}

				// The public API reports the drawn token's values as float32.
				rng := NewStream(99)
				d, err := Sample(nr.row, Params{Temperature: temp, TopP: 1}, &rng)
				if err != nil {
					t.Fatal(err)
				}
				want := ref[d.Token]
				if diff := math.Abs(float64(d.LogProb) - want); diff > lpTolerance(want)+6e-8*math.Abs(want) {
					t.Errorf("Sample: token %d log-prob %v, reference %v", d.Token, d.LogProb, want)
				}
				if h := refEntropy(ref); math.Abs(float64(d.Entropy)-h) > 1e-6+6e-8*h {
					t.Errorf("Sample: entropy %v, reference %v", d.Entropy, h)
				}
			})
		}
	}
}

// refTruncation is the definition of the package doc written the slow way:
// sort the whole vocabulary, then cut prefixes. It shares only the
// definitions of y and of the quantised weight with the sampler.
type refTruncation struct {
	order []int32  // every token in sampling order
	q     []uint64 // quantised weight by token id
	kept  int      // length of the kept prefix of order
}

// sampleOrder sorts all token ids by logit, highest first, lower id on ties.
func sampleOrder(row []float32) []int32 {
	order := make([]int32, len(row))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return byRank(cand{x: row[a], id: a}, cand{x: row[b], id: b}) })
	return order
}

func newRefTruncation(row []float32, order []int32, p Params) refTruncation {
	m := float32(math.Inf(-1))
	for _, x := range row {
		m = max(m, x)
	}
	invT := 1 / p.Temperature
	ref := refTruncation{order: order, q: make([]uint64, len(row))}
	for i, x := range row {
		ref.q[i] = quantise(expNeg(clampTail(scaled(x, float64(m), invT))))
	}
	n := len(row)
	if p.TopK > 0 {
		n = min(n, p.TopK)
	}
	if p.TopP < 1 {
		need := topPNeed(p.TopP, ref.mass(n))
		cum := uint64(0)
		for j, id := range ref.order[:n] {
			if cum >= need {
				n = j
				break
			}
			cum += ref.q[id]
		}
	}
	if p.MinP > 0 {
		for j, id := range ref.order[:n] {
			if scaled(row[id], float64(m), invT) < math.Log(p.MinP) {
				n = j
				break
			}
		}
	}
	ref.kept = n
	return ref
}

func (r refTruncation) mass(n int) uint64 {
	w := uint64(0)
	for _, id := range r.order[:n] {
		w += r.q[id]
	}
	return w
}

// extraKept returns a token with positive weight among ranks [a, b) or
// [b, a): if there is none, the kept prefixes of lengths a and b hold the
// same drawable tokens.
func (r refTruncation) extraKept(a, b int) (int32, bool) {
	for _, id := range r.order[min(a, b):max(a, b)] {
		if r.q[id] > 0 {
			return id, true
		}
	}
	return 0, false
}

// draw is the first kept token whose cumulative weight exceeds target.
func (r refTruncation) draw(target uint64) int32 {
	cum := uint64(0)
	for _, id := range r.order[:r.kept] {
		cum += r.q[id]
		if cum > target {
			return id
		}
	}
	return -1
}

func truncationRows() []namedRow {
	r := rand.New(rand.NewPCG(21, 22))
	var rows []namedRow
	for _, v := range []int{1, 2, 3, 7, 64, 1000, 5000} {
		rows = append(rows,
			namedRow{fmt.Sprintf("gaussian sd1 v%d", v), gaussianRow(r, v, 1)},
			namedRow{fmt.Sprintf("gaussian sd4 v%d", v), gaussianRow(r, v, 4)},
			namedRow{fmt.Sprintf("lm-like v%d", v), lmLikeRow(r, v)},
			namedRow{fmt.Sprintf("ties of 3 levels v%d", v), tiedRow(r, v, 3)},
			namedRow{fmt.Sprintf("masked v%d", v), maskedRow(r, v, 0.3)},
		)
	}
	oneHot := make([]float32, 500)
	for i := range oneHot {
		oneHot[i] = -1e30
	}
	oneHot[321] = 5
	allEqual := make([]float32, 300)
	rows = append(rows,
		namedRow{"all mass on one token", oneHot},
		namedRow{"all equal", allEqual},
		namedRow{"ties at the max", []float32{1, 3, 3, 0, 3, 2, 3}},
		// Ties straddling many bucket edges: y spacing 1/64 nat at T = 1.
		namedRow{"fine ladder", func() []float32 {
			row := make([]float32, 4000)
			for i := range row {
				row[i] = -float32(i%500) / 64
			}
			return row
		}()},
	)
	return rows
}

// TestTruncationMatchesReference: the bucketed selection keeps exactly the
// tokens the sort-based definition keeps, with the same total weight, and
// draws the same token for the same random value, on many rows and edge
// cases (ties, top-p = 1, top-k = 1, one-hot rows, -Inf entries).
func TestTruncationMatchesReference(t *testing.T) {
	rows := truncationRows()
	if !testing.Short() {
		r := rand.New(rand.NewPCG(31, 32))
		rows = append(rows,
			namedRow{"gaussian sd1 full vocab", gaussianRow(r, qwenVocab, 1)},
			namedRow{"lm-like full vocab", lmLikeRow(r, qwenVocab)})
	}
	temps := []float64{1e-3, 0.6, 1, 100}
	topKs := []int{0, 1, 2, 40, 2000}
	topPs := []float64{1, 0.95, 0.5, 1e-9}
	minPs := []float64{0, 0.05, 0.9}
	u := rand.New(rand.NewPCG(41, 42))
	s := new(scratch)
	for _, nr := range rows {
		order := sampleOrder(nr.row)
		for _, temp := range temps {
			s.logits = nr.row
			if _, _, _, err := s.prepare(temp); err != nil {
				t.Fatalf("%s: %v", nr.name, err)
			}
			for _, k := range append(topKs, len(nr.row)-1, len(nr.row)+3) {
				for _, topP := range topPs {
					for _, minP := range minPs {
						p := Params{Temperature: temp, TopK: k, TopP: topP, MinP: minP}
						if p.Validate() != nil {
							continue // k = -1 for a one-token row
						}
						checkTruncation(t, s, fmt.Sprintf("%s %+v", nr.name, p), newRefTruncation(nr.row, order, p), p, u)
					}
				}
			}
		}
	}
}

// checkTruncation compares the sampler's cut and draws, on the row prepared
// in s, with the reference.
func checkTruncation(t *testing.T, s *scratch, name string, ref refTruncation, p Params, u *rand.Rand) {
	t.Helper()
	// The sampler's kept set is the prefix of length n of the same sampling
	// order (the draws below check that order), so comparing prefixes
	// compares sets.
	n := s.keptRank(p)
	if id, ok := ref.extraKept(n, ref.kept); ok {
		t.Fatalf("%s: kept %d tokens, reference %d: token %d differs", name, n, ref.kept, id)
	}
	w := s.prefixMass(n)
	if want := ref.mass(ref.kept); w != want {
		t.Fatalf("%s: kept weight %d, reference %d", name, w, want)
	}
	// cums[j] is the weight of the first j+1 kept tokens; the reference draw
	// is the first j with cums[j] > target (draw, with a binary search, since
	// kept prefixes of full-vocabulary rows are long).
	cums := make([]uint64, ref.kept)
	cum := uint64(0)
	for j, id := range ref.order[:ref.kept] {
		cum += ref.q[id]
		cums[j] = cum
	}
	checkDraw := func(target uint64) {
		if target >= w {
			return // not a possible target
		}
		got, ok := s.tokenAt(target)
		j, _ := slices.BinarySearch(cums, target+1)
		if want := ref.order[j]; !ok || got != want {
			t.Fatalf("%s: target %d of %d drew %d (ok %v), reference %d", name, target, w, got, ok, want)
		}
	}
	// Edges of the cumulative weights of the first kept tokens, the
	// extremes, and random targets.
	checkDraw(0)
	for _, c := range cums[:min(len(cums), 6)] {
		checkDraw(c - 1)
		checkDraw(c)
	}
	checkDraw(w - 1)
	for range 8 {
		checkDraw(drawTarget(u.Uint64(), w))
	}
}

// TestSampleMatchesReferenceDraw runs the whole public path: the token Sample
// returns is the reference draw for the stream's next value.
func TestSampleMatchesReferenceDraw(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	params := []Params{
		{Temperature: 0.6, TopP: 0.95},
		{Temperature: 1, TopK: 50, TopP: 0.9, MinP: 0.02},
		{Temperature: 1.3, TopP: 1},
		{Temperature: 0.7, TopK: 1, TopP: 1},
	}
	for trial := range 200 {
		row := lmLikeRow(r, 2000)
		p := params[trial%len(params)]
		rng := NewStream(5, uint64(trial))
		peek := rng
		d, err := Sample(row, p, &rng)
		if err != nil {
			t.Fatal(err)
		}
		ref := newRefTruncation(row, sampleOrder(row), p)
		if want := ref.draw(drawTarget(peek.Uint64(), ref.mass(ref.kept))); d.Token != want {
			t.Fatalf("trial %d %+v: drew %d, reference %d", trial, p, d.Token, want)
		}
		if rng != peek {
			t.Fatalf("trial %d: Sample consumed other than exactly one value", trial)
		}
	}
}

// TestGreedy: T = 0 picks the argmax, the lowest id on ties, whatever the
// other filters say, reports log-prob and entropy at T = 1, and still
// consumes one value so stream positions count tokens.
func TestGreedy(t *testing.T) {
	cases := []struct {
		name string
		row  []float32
		want int32
	}{
		{"single maximum", []float32{0.1, 2, -3, 1.9}, 1},
		{"tie picks lowest id", []float32{1, 5, 2, 5, 5}, 1},
		{"masked tokens skipped", []float32{float32(math.Inf(-1)), -7, float32(math.Inf(-1))}, 1},
		{"single token", []float32{-2}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := NewStream(3)
			next := rng
			next.Uint64()
			d, err := Sample(c.row, Params{Temperature: 0, TopK: 3, TopP: 0.5, MinP: 0.5}, &rng)
			if err != nil {
				t.Fatal(err)
			}
			ref := refLogSoftmax(c.row, 1)
			if d.Token != c.want || math.Abs(float64(d.LogProb)-ref[c.want]) > 1e-6 ||
				math.Abs(float64(d.Entropy)-refEntropy(ref)) > 1e-6 {
				t.Fatalf("got %+v, want token %d log-prob %v entropy %v", d, c.want, ref[c.want], refEntropy(ref))
			}
			if rng != next {
				t.Fatal("greedy did not consume exactly one value")
			}
		})
	}
}

// TestTopKOneIsGreedy: top-k 1 at any temperature keeps only the argmax
// (lowest id on ties) but reports the log-prob at that temperature.
func TestTopKOneIsGreedy(t *testing.T) {
	row := []float32{1, 4, 0, 4, 3}
	for seed := range uint64(50) {
		rng := NewStream(seed)
		d, err := Sample(row, Params{Temperature: 2, TopK: 1, TopP: 1}, &rng)
		if err != nil {
			t.Fatal(err)
		}
		if want := refLogSoftmax(row, 2)[1]; d.Token != 1 || math.Abs(float64(d.LogProb)-want) > 1e-6 {
			t.Fatalf("got %+v, want token 1 with log-prob %v", d, want)
		}
	}
}

func TestNonFiniteLogits(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	ninf := -inf
	cases := []struct {
		name    string
		row     []float32
		wantErr string
	}{
		{"NaN first", []float32{nan, 1, 2}, "logit 0 is NaN"},
		{"NaN after the maximum", []float32{5, 1, nan}, "logit 2 is NaN"},
		{"NaN among masked", []float32{ninf, nan}, "logit 1 is NaN"},
		{"+Inf", []float32{1, inf, 2}, "logit 1 is +Inf"},
		{"all masked", []float32{ninf, ninf, ninf}, "all 3 logits are -Inf"},
		{"empty row", nil, "empty row"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, temp := range []float64{0, 1} {
				rng := NewStream(1)
				before := rng
				_, err := Sample(c.row, Params{Temperature: temp, TopP: 1}, &rng)
				if !errors.Is(err, ErrLogits) || !contains(err, c.wantErr) {
					t.Fatalf("T=%v: err = %v, want ErrLogits with %q", temp, err, c.wantErr)
				}
				if rng != before {
					t.Fatal("a rejected row advanced the stream")
				}
			}
		})
	}
	t.Run("row longer than MaxVocab", func(t *testing.T) {
		rng := NewStream(1)
		if _, err := Sample(make([]float32, MaxVocab+1), Params{Temperature: 1, TopP: 1}, &rng); !errors.Is(err, ErrLogits) {
			t.Fatalf("err = %v, want ErrLogits", err)
		}
	})
	t.Run("nil stream", func(t *testing.T) {
		if _, err := Sample([]float32{1}, Params{Temperature: 1, TopP: 1}, nil); err == nil {
			t.Fatal("want an error for a nil stream")
		}
	})
}

func contains(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}

// TestMaskedNeverDrawn: -Inf tokens have probability 0 even when the
// temperature flattens everything else.
func TestMaskedNeverDrawn(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	row := maskedRow(r, 300, 0.7)
	rng := NewStream(8)
	for _, temp := range []float64{0.5, 1, 1e6} {
		for range 3000 {
			d, err := Sample(row, Params{Temperature: temp, TopP: 1}, &rng)
			if err != nil {
				t.Fatal(err)
			}
			if math.IsInf(float64(row[d.Token]), -1) {
				t.Fatalf("T=%v drew masked token %d", temp, d.Token)
			}
		}
	}
}

// TestFrequencies: over many draws with a fixed seed, token frequencies match
// the renormalised truncated probabilities computed independently in float64
// (chi-square, loose threshold), and nothing outside the kept set appears.
func TestFrequencies(t *testing.T) {
	row := []float32{2.0, 1.5, 1.4, 0.3, 0.2, -0.5, 1.0, -3, 0.9, -1.2, 2.2, -8}
	cases := []struct {
		name string
		p    Params
	}{
		{"plain", Params{Temperature: 1, TopP: 1}},
		{"all filters", Params{Temperature: 0.8, TopK: 8, TopP: 0.9, MinP: 0.05}},
		{"hot", Params{Temperature: 3, TopP: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := truncatedProbs(row, c.p)
			const draws = 200000
			counts := make([]int, len(row))
			rng := NewStream(2024)
			for range draws {
				d, err := Sample(row, c.p, &rng)
				if err != nil {
					t.Fatal(err)
				}
				counts[d.Token]++
			}
			chi2, df := 0.0, -1
			for i, p := range want {
				if p == 0 {
					if counts[i] > 0 {
						t.Fatalf("token %d is truncated but was drawn %d times", i, counts[i])
					}
					continue
				}
				e := p * draws
				chi2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
				df++
			}
			if limit := chi2Critical(df); chi2 > limit {
				t.Fatalf("chi-square %.1f with %d degrees of freedom exceeds %.1f (p < 1e-6)", chi2, df, limit)
			}
		})
	}
}

// truncatedProbs applies the documented truncation to exact float64
// probabilities (no quantisation) and renormalises.
func truncatedProbs(row []float32, p Params) []float64 {
	lp := refLogSoftmax(row, p.Temperature)
	order := make([]int, len(row))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return -cmpFloat(row[a], row[b]) })
	n := len(order)
	if p.TopK > 0 {
		n = min(n, p.TopK)
	}
	mass := 0.0
	for _, i := range order[:n] {
		mass += math.Exp(lp[i])
	}
	cum := 0.0
	for j, i := range order[:n] {
		if cum >= p.TopP*mass {
			n = j
			break
		}
		cum += math.Exp(lp[i])
	}
	top := lp[order[0]]
	for j, i := range order[:n] {
		if math.Exp(lp[i]) < p.MinP*math.Exp(top) {
			n = j
			break
		}
	}
	probs := make([]float64, len(row))
	total := 0.0
	for _, i := range order[:n] {
		probs[i] = math.Exp(lp[i])
		total += probs[i]
	}
	for i := range probs {
		probs[i] /= total
	}
	return probs
}

func cmpFloat(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// chi2Critical is the Wilson-Hilferty approximation of the chi-square
// quantile at p = 1e-6 (z = 4.753).
func chi2Critical(df int) float64 {
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+4.753*math.Sqrt(a), 3)
}

// TestBucketsStaySmall: whatever the temperature, no bucket holds a large
// part of the vocabulary, so no sort approaches a full sort. (Exact ties at
// the maximum are the exception no bucketing can split; their candidates
// arrive already in sampling order.)
func TestBucketsStaySmall(t *testing.T) {
	row := gaussianRow(rand.New(rand.NewPCG(81, 82)), qwenVocab, 1)
	for _, temp := range []float64{0.3, 1, 10, 1000} {
		s := new(scratch)
		s.logits = row
		if _, _, _, err := s.prepare(temp); err != nil {
			t.Fatal(err)
		}
		largest := slices.Max(s.cnt[:regularBuckets])
		if largest > qwenVocab/100 {
			t.Errorf("T=%v: scale %v leaves %d tokens in one bucket", temp, s.scale, largest)
		}
	}
}
