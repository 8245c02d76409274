package sampler

import (
	"math"
	"math/rand/v2"
)

// Vocabulary of Qwen2/Qwen3, the shape the benchmarks and the large tests use.
const qwenVocab = 151936

// lmLikeRow imitates a language model's next-token logits: a broad Gaussian
// body (sd 2.5) and a few dozen plausible tokens 8-16 logits above it.
func lmLikeRow(r *rand.Rand, vocab int) []float32 {
	row := make([]float32, vocab)
	for i := range row {
		row[i] = float32(2.5 * r.NormFloat64())
	}
	for range min(32, vocab) {
		row[r.IntN(vocab)] = float32(12 + 4*r.NormFloat64())
	}
	return row
}

// gaussianRow is i.i.d. N(0, sd^2): with sd 1 at T = 0.6 the top-p 0.95
// nucleus holds about half of a large vocabulary, the worst case for
// candidate selection.
func gaussianRow(r *rand.Rand, vocab int, sd float64) []float32 {
	row := make([]float32, vocab)
	for i := range row {
		row[i] = float32(sd * r.NormFloat64())
	}
	return row
}

// tiedRow draws integer logits from a small range, so many tokens tie.
func tiedRow(r *rand.Rand, vocab, levels int) []float32 {
	row := make([]float32, vocab)
	for i := range row {
		row[i] = float32(r.IntN(levels))
	}
	return row
}

// maskedRow is a Gaussian row with a fraction of its tokens set to -Inf;
// token 0 is never masked, so the row stays valid.
func maskedRow(r *rand.Rand, vocab int, frac float64) []float32 {
	row := gaussianRow(r, vocab, 2)
	for i := 1; i < len(row); i++ {
		if r.Float64() < frac {
			row[i] = float32(math.Inf(-1))
		}
	}
	return row
}
