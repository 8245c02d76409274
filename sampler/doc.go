// Package sampler turns rows of logits into tokens, with the exact log-prob
// and entropy that the trainer needs, and gives every sequence its own
// reproducible random stream. It is pure Go.
//
// # What is reported
//
// For every drawn token, LogProb is its natural-log probability under
// softmax(logits/T) over the full vocabulary, before any truncation, and
// Entropy is the entropy (nats) of that same distribution. This is what a
// trainer recomputes from logits/T. At T = 0 (greedy) both are reported at
// T = 1. They are computed in float64 and stored as float32 (relative rounding
// 6e-8); the float64 values agree with a float64 log-softmax to 1e-6
// (TestLogProbExact). Logits of -Inf are masked tokens (probability 0);
// NaN or +Inf in a row is an error for that row.
//
// # How a token is chosen
//
// T = 0 picks the argmax, the lowest id on ties. Otherwise tokens are ranked
// in sampling order (higher logit first, lower id on ties) and truncated in
// the order of vLLM and Hugging Face:
//
//  1. top-k keeps the first k tokens (exactly k: ties at the boundary are
//     broken by id); 0 = off.
//  2. top-p keeps tokens while the weight before them is below top-p times
//     the weight of the top-k set (so the token that crosses top-p is kept);
//     1 = off.
//  3. min-p keeps tokens with probability >= min-p times the maximum
//     probability of the temperature-scaled distribution, i.e.
//     (x - max)/T >= ln(min-p); truncation does not change that ratio;
//     0 = off.
//
// The draw then walks the kept tokens in sampling order until their
// cumulative weight exceeds a uniform target in [0, kept weight). The weights
// used by top-p and the draw are e^((x-max)/T) in 40-bit fixed point (the top
// token weighs 2^40): integer sums are exact in any order, which lets the
// sampler find the cuts from per-bucket totals instead of sorting the
// vocabulary, and still equal a sort-based implementation bit for bit
// (TestTruncationMatchesReference). The cost is that tokens with probability
// below 4.5e-13 times the maximum can never be drawn, and weights are rounded
// to 2^-41 of the maximum: at vocabulary 151,936 the draw distribution is
// within 7e-8 (total variation) of the exact renormalised one.
//
// # Speed
//
// A row takes one pass for the maximum (then an early-exiting search for its
// first id), one for the lowest logit
// within 40 nats of it (which sets the bucket width), and one fused pass over
// all tokens for sum e^y and sum y e^y (entropy = log Z - E[y]) with a float64
// exp accurate to 1e-12 (a 16-entry table, which the AVX-512 kernel keeps in
// two registers, and a quintic) that also fills a histogram of 1024 buckets of
// y (1/32 nat wide, finer when the tokens within 40 nats span less than 16
// nats, as at high temperature). Truncation and the draw then sort only the
// one or two buckets where a cut or the draw falls. The passes run as AVX-512
// or AVX2 kernels where the CPU has them and in portable Go otherwise (build
// tag purego: always), with bit-identical results: the kernels do the same
// float64 operations per token, with the same fused multiply-adds (math.FMA in
// Go), and add into the same 8 lane sums (token j into lane j%8). At
// vocabulary 151,936 the passes take about 0.65-1.1 ns per token on one core
// with AVX-512 (BenchmarkFusedPass151936; LM-like rows are the faster end).
// Batch spreads rows over a fixed worker pool and allocates nothing in steady
// state.
//
// # Truncated mass
//
// Draw.KeptMass is the probability under softmax(logits/T) of the tokens the
// truncation kept, computed from the quantised weights: within V*2^-40
// (1.4e-7 at V = 151,936) of the exact value, and exactly 1 when nothing
// drawable was cut (and at T = 0).
//
// # Randomness
//
// Each successful Sample call consumes exactly one value of its Stream,
// greedy included, and a rejected one consumes none, so a sequence's stream
// position is the number of tokens it has drawn. A
// Stream is derived from (seed, ids...) by NewStream, for example (seed,
// request, sample index) or (seed, problem, agent, turn, trajectory), so the
// same seed gives the same tokens whatever the batch size, row order or
// worker count, and K samples of one prompt differ.
package sampler
