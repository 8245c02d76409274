package bench

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/trainlog"
)

// TrainStep is one measured training step and what it is measured against.
type TrainStep struct {
	Shape     string // e.g. "random qwen2.5-0.5b, 4 of 24 layers"
	Setup     string // the step's size, e.g. "2 problems x G 4, at most 32 tokens"
	Device    string // where the trainer and the rollouts ran
	Command   string
	Metrics   trainlog.StepMetrics // the step's line (one agent, one turn)
	Step      int                  // its number; step 1 includes the warm-up
	MatmulN   int                  // size of the matrix product the peak was measured on
	DType     string               // the trainer's compute dtype
	PeakFLOPS float64              // libtorch's n x n matrix product on the trainer's device
	Bandwidth float64              // bytes/s where llama.cpp decodes
	BWHow     string               // what Bandwidth measured
	// MatmulParams are the weights every token goes through as a matrix product (the
	// embedding lookup is not one; a tied lm_head is), RolloutBytes their bytes in
	// llama.cpp, ParallelSeqs the sequences the rollout decodes together at most.
	MatmulParams, RolloutBytes int64
	ParallelSeqs               int
	LoRA                       bool
	PeakRSS                    int64         // the process's peak resident memory during the run
	Plan                       *memplan.Plan // the run's memory plan
}

// ReadBandwidth is the best of three passes of threads goroutines summing a buffer of
// bytes (each its own slice) in bytes read per second: the rate llama.cpp's CPU decode
// can at best stream its weights at.
func ReadBandwidth(bytes int64, threads int) float64 {
	threads = max(threads, 1)
	buf := make([]uint64, bytes/8)
	for i := range buf {
		buf[i] = uint64(i) // touch every page before timing
	}
	chunk := len(buf) / threads
	var best time.Duration
	for range 3 {
		var wg sync.WaitGroup
		sums := make([]uint64, threads)
		t0 := time.Now()
		for w := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var s uint64
				for _, v := range buf[w*chunk : (w+1)*chunk] {
					s += v
				}
				sums[w] = s
			}()
		}
		wg.Wait()
		if el := time.Since(t0); best == 0 || el < best {
			best = el
		}
	}
	return float64(chunk*threads*8) / best.Seconds()
}

// phaseRow is one line of the phase table.
type phaseRow struct {
	name          string
	seconds       float64
	tokens        float64 // tokens the phase went through (0: not a token phase)
	flopsPerToken float64 // model FLOPs per token (0: not a matrix phase)
	target        string
}

// phases are the step's rows: rollout, log-probs, reference, update, sync, and the rest.
func (t TrainStep) phases() []phaseRow {
	m := t.Metrics
	seqTokens := float64(m.PromptTokens + m.Tokens)
	fwd := 2 * float64(t.MatmulParams)
	bwd := 2 * fwd // gradients of activations and of weights
	if t.LoRA {
		bwd = fwd // no weight gradients of the frozen base
	}
	rows := []phaseRow{
		{name: "rollout", seconds: m.Times.Rollout, tokens: m.RolloutTokensPerSec * m.Times.Rollout},
		{name: "log-probs", seconds: m.Times.LogProbs, tokens: seqTokens, flopsPerToken: fwd},
		{name: "reference", seconds: m.Times.Reference, tokens: seqTokens, flopsPerToken: fwd},
		{name: "update", seconds: m.Times.Update, tokens: seqTokens, flopsPerToken: fwd + bwd, target: ">= 50% of matmul peak"},
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

// Section is the Markdown section of bench/RESULTS.md for the step.
func (t TrainStep) Section() string {
	var b strings.Builder
	m := t.Metrics
	fmt.Fprintf(&b, "## Training step (%s, %s)\n\n", t.Shape, t.Device)
	fmt.Fprintf(&b, "%s, on %s\n\nCommand: `umad %s`\n\n", Today(), Machine(), t.Command)
	warm := ""
	if t.Step == 1 {
		warm = " (the first: it includes the warm-up)"
	}
	fmt.Fprintf(&b, "Step %d%s of one grpo agent, %s: %d response and %d prompt tokens. Model FLOPs: 2N per token\n"+
		"forward, 6N forward and backward (4N with LoRA), N = %.1fM matrix weights (attention's own products left out).\n\n",
		t.Step, warm, t.Setup, m.Tokens, m.PromptTokens, float64(t.MatmulParams)/1e6)
	b.WriteString("| phase | seconds | share of step | tokens/s | FLOP/s | share of matmul peak | target |\n|---|---|---|---|---|---|---|\n")
	for _, r := range t.phases() {
		tokS, flops, peak := "-", "-", "-"
		if r.tokens > 0 && r.seconds > 0 {
			tokS = fmt.Sprintf("%.0f", r.tokens/r.seconds)
		}
		if r.flopsPerToken > 0 && r.seconds > 0 {
			f := r.flopsPerToken * r.tokens / r.seconds
			flops, peak = si(f, "FLOP/s"), fmt.Sprintf("%.3g%%", 100*f/t.PeakFLOPS)
		}
		fmt.Fprintf(&b, "| %s | %.4f | %.3g%% | %s | %s | %s | %s |\n", r.name, r.seconds, 100*r.seconds/m.Times.Step, tokS, flops, peak, r.target)
	}
	fmt.Fprintf(&b, "| step | %.4f | 100%% | | | | |\n\n", m.Times.Step)
	bps, share, binds := t.decode()
	fmt.Fprintf(&b, "- matmul peak: %s (libtorch, %d x %d %s, best of 10 before and 10 after the training)\n", si(t.PeakFLOPS, "FLOP/s"), t.MatmulN, t.MatmulN, t.DType)
	fmt.Fprintf(&b, "- memory bandwidth: %s (%s)\n", si(t.Bandwidth, "B/s"), t.BWHow)
	fmt.Fprintf(&b, "- rollout decode: %.0f tok/s, %s of weights (%s per decode step of up to %d sequences), %.3g%% of the %s bound (target >= 60%%; prefill, sampling and grading count in the rollout's time)\n",
		m.RolloutTokensPerSec, si(bps, "B/s"), memplan.Size(t.RolloutBytes), t.ParallelSeqs, 100*share, binds)
	host, agent, phase := t.Plan.Peak(false)
	fmt.Fprintf(&b, "- peak RSS: %s against the plan's %s (agent %d, %s phase): %.2fx\n", memplan.Size(t.PeakRSS), memplan.Size(host), agent, phase, float64(t.PeakRSS)/float64(host))
	if dev, _, _ := t.Plan.Peak(true); dev > 0 {
		fmt.Fprintf(&b, "- GPU memory planned: %s (not measured here; bench/gpu.sh samples nvidia-smi)\n", memplan.Size(dev))
	}
	return b.String()
}

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
