package bench

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/trainlog"
)

// TrainStep is one measured training step and what it is measured against.
type TrainStep struct {
	Shape       string // e.g. "random qwen2.5-0.5b, 4 of 24 layers"
	Setup       string // the step's size, e.g. "2 problems x G 4, at most 32 tokens"
	Device      string // where the trainer and the rollouts ran
	Command     string
	Metrics     trainlog.StepMetrics // the step's line (one agent, one turn)
	Step        int                  // its number; step 1 includes the warm-up
	MatmulShape string               // the matrix product that gave the peak, e.g. "390 x 896 by 896 x 4864"
	DType       string               // the trainer's compute dtype
	PeakFLOPS   float64              // libtorch's best matrix product at the step's shapes on the trainer's device
	Bandwidth   float64              // bytes/s where llama.cpp decodes
	BWHow       string               // what Bandwidth measured
	// MatmulParams are the weights a token goes through as a matrix product (the embedding
	// lookup is not one; a tied lm_head is), RolloutBytes their bytes in
	// llama.cpp, ParallelSeqs the sequences the rollout decodes together at most.
	MatmulParams, RolloutBytes int64
	HeadParams                 int64 // the lm_head's share of MatmulParams (vocabulary x hidden)
	ParallelSeqs               int
	LoRA                       bool
	PeakRSS                    int64         // the process's peak resident memory during the run
	Plan                       *memplan.Plan // the run's memory plan
}

// phaseRow is one line of the phase table.
type phaseRow struct {
	name    string
	seconds float64
	tokens  float64 // tokens the phase went through (0: not a token phase)
	flops   float64 // model FLOPs of the phase (0: not a matrix phase)
	target  string
}

// phases are the step's rows: rollout, log-probs, reference, update, sync, and the rest.
// A forward is 2 FLOPs per matrix weight and token, the lm_head's for the response tokens
// alone (the plugin multiplies only their rows by it); the backward twice that, or once
// with LoRA (no weight gradients of the frozen base).
func (t TrainStep) phases() []phaseRow {
	m := t.Metrics
	seqTokens := float64(m.PromptTokens + m.Tokens)
	fwd := 2 * (float64(t.MatmulParams-t.HeadParams)*seqTokens + float64(t.HeadParams)*float64(m.Tokens))
	bwd := 2 * fwd
	if t.LoRA {
		bwd = fwd
	}
	rows := []phaseRow{
		{name: "rollout", seconds: m.Times.Rollout, tokens: m.RolloutTokensPerSec * m.Times.Rollout},
		{name: "log-probs", seconds: m.Times.LogProbs, tokens: seqTokens, flops: fwd},
		{name: "reference", seconds: m.Times.Reference, tokens: seqTokens, flops: fwd},
		{name: "update", seconds: m.Times.Update, tokens: seqTokens, flops: fwd + bwd, target: ">= 50% of matmul peak"},
		{name: "sync", seconds: m.Times.Sync, target: "<= 2% of the step"},
	}
	other := m.Times.Step
	for _, r := range rows {
		other -= r.seconds
	}
	return append(rows, phaseRow{name: "other (grading, advantages)", seconds: math.Max(other, 0)})
}

// decode is the rollout's decode rate against its roofline: bytes/s of weights read
// (one read per decode step of ParallelSeqs sequences), and the share of the binding
// bound, bandwidth (weights bytes / Bandwidth per step) or compute (2 x MatmulParams per
// token at PeakFLOPS).
func (t TrainStep) decode() (bytesPerSec, share float64, binds string) {
	tokS := t.Metrics.RolloutTokensPerSec
	steps := tokS / float64(max(t.ParallelSeqs, 1))
	bytesPerSec = steps * float64(t.RolloutBytes)
	memStep := float64(t.RolloutBytes) / t.Bandwidth
	computeStep := float64(max(t.ParallelSeqs, 1)) * 2 * float64(t.MatmulParams) / t.PeakFLOPS
	binds, bound := "bandwidth", memStep
	if computeStep > memStep {
		binds, bound = "compute", computeStep
	}
	return bytesPerSec, bound * steps, binds
}

// peakShare is a phase's FLOP/s as a share of its run's matmul peak (0: not a matrix phase).
func (t TrainStep) peakShare(r phaseRow) float64 {
	if r.flops == 0 || r.seconds <= 0 {
		return 0
	}
	return r.flops / r.seconds / t.PeakFLOPS
}

// TrainSection is the Markdown section of bench/RESULTS.md for runs of the same step, each
// against the peak and bandwidth measured in that run: every figure as min / median / max
// over the runs. A phase above its run's matmul peak is an error, with the section: that
// peak is not the machine's.
func TrainSection(runs []TrainStep) (string, error) {
	if len(runs) == 0 {
		return "", errors.New("no run to report")
	}
	t := runs[0]
	var b strings.Builder
	m := t.Metrics
	fmt.Fprintf(&b, "## Training step (%s, %s)\n\n", t.Shape, t.Device)
	fmt.Fprintf(&b, "%s, on %s\n\nCommand: `umad %s`\n\n", Today(), Machine(), t.Command)
	warm := ""
	if t.Step == 1 {
		warm = " (the first: it includes the warm-up)"
	}
	fmt.Fprintf(&b, "Step %d%s of one grpo agent, %s: %d response and %d prompt tokens. Model FLOPs: 2N per token\n"+
		"forward, 6N forward and backward (4N with LoRA), N = %.1fM matrix weights (attention's own products left out),\n"+
		"the lm_head's %.1fM for the response tokens only, whose rows alone it multiplies.\n"+
		"Every figure is min / median / max over %d runs, each against the peak and bandwidth measured in it.\n\n",
		t.Step, warm, t.Setup, m.Tokens, m.PromptTokens, float64(t.MatmulParams)/1e6, float64(t.HeadParams)/1e6, len(runs))
	b.WriteString("| phase | seconds | share of step | tokens/s | FLOP/s | share of matmul peak | target |\n|---|---|---|---|---|---|---|\n")
	var over []string
	for i, r := range t.phases() {
		var secs, step, tokS, flops, peak []float64
		for _, run := range runs {
			rr := run.phases()[i]
			secs, step = append(secs, rr.seconds), append(step, rr.seconds/run.Metrics.Times.Step)
			if rr.tokens > 0 && rr.seconds > 0 {
				tokS = append(tokS, rr.tokens/rr.seconds)
			}
			if sh := run.peakShare(rr); sh > 0 {
				flops, peak = append(flops, rr.flops/rr.seconds), append(peak, sh)
				if sh > 1 {
					over = append(over, fmt.Sprintf("%s at %.3g%% of its run's peak %s", r.name, 100*sh, si(run.PeakFLOPS, "FLOP/s")))
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.name, spread(secs, func(v float64) string { return fmt.Sprintf("%.4f", v) }),
			spread(step, percent), spread(tokS, func(v float64) string { return fmt.Sprintf("%.0f", v) }),
			spread(flops, func(v float64) string { return si(v, "FLOP/s") }), spread(peak, percent), r.target)
	}
	var steps, peaks, bws, tokS, weights, decodes []float64
	var rss int64
	for _, run := range runs {
		bps, share, _ := run.decode()
		steps, peaks, bws = append(steps, run.Metrics.Times.Step), append(peaks, run.PeakFLOPS), append(bws, run.Bandwidth)
		tokS, weights, decodes = append(tokS, run.Metrics.RolloutTokensPerSec), append(weights, bps), append(decodes, share)
		rss = max(rss, run.PeakRSS)
	}
	fmt.Fprintf(&b, "| step | %s | 100%% | | | | |\n\n", spread(steps, func(v float64) string { return fmt.Sprintf("%.4f", v) }))
	_, _, binds := t.decode()
	fmt.Fprintf(&b, "- matmul peak: %s (libtorch, %s, %s on the trainer's threads, each product the best of repeats until it stops improving)\n",
		spread(peaks, func(v float64) string { return si(v, "FLOP/s") }), t.MatmulShape, t.DType)
	fmt.Fprintf(&b, "- memory bandwidth: %s (%s)\n", spread(bws, func(v float64) string { return si(v, "B/s") }), t.BWHow)
	fmt.Fprintf(&b, "- rollout decode: %s tok/s, %s of weights (%s per decode step of up to %d sequences), %s of the %s bound (target >= 60%%; prefill, sampling and grading count in the rollout's time)\n",
		spread(tokS, func(v float64) string { return fmt.Sprintf("%.0f", v) }), spread(weights, func(v float64) string { return si(v, "B/s") }),
		memplan.Size(t.RolloutBytes), t.ParallelSeqs, spread(decodes, percent), binds)
	host, agent, phase := t.Plan.Peak(false)
	fmt.Fprintf(&b, "- peak RSS: %s (the largest run's) against the plan's %s (agent %d, %s phase): %.2fx\n", memplan.Size(rss), memplan.Size(host), agent, phase, float64(rss)/float64(host))
	if dev, _, _ := t.Plan.Peak(true); dev > 0 {
		fmt.Fprintf(&b, "- GPU memory planned: %s (not measured here; bench/gpu.sh samples nvidia-smi)\n", memplan.Size(dev))
	}
	if len(over) > 0 {
		return b.String(), fmt.Errorf("a phase exceeds the matmul peak at the step's own shapes, so the peak or the phase's FLOP count is wrong (a peak measured while other work ran?): %s", strings.Join(over, "; "))
	}
	return b.String(), nil
}

// spread formats values' min / median / max ("-" for none, one figure when they agree).
func spread(values []float64, format func(float64) string) string {
	if len(values) == 0 {
		return "-"
	}
	s := SpreadOf(values)
	lo, mid, hi := format(s.Min), format(s.Median), format(s.Max)
	if lo == hi {
		return mid
	}
	return lo + " / " + mid + " / " + hi
}

func percent(v float64) string { return fmt.Sprintf("%.3g%%", 100*v) }

// si formats v in unit with an SI prefix and three significant digits.
func si(v float64, unit string) string {
	for _, p := range []struct {
		f float64
		s string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= p.f {
			return fmt.Sprintf("%.3g %s%s", v/p.f, p.s, unit)
		}
	}
	return fmt.Sprintf("%.3g %s", v, unit)
}
