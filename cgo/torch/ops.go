package torch

/*
#include <stdlib.h>
#include "plugin.h"
*/
import "C"

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/umad-dev/umad/trainspec"
)

// packed is a micro-batch flattened for the ABI: prompt and response tokens of every
// sequence back to back, and the per-sequence lengths.
type packed struct {
	tokens, promptLens, respLens []int32
	nResp                        int
}

func pack(prompts, responses [][]int32) (packed, error) {
	if len(prompts) != len(responses) {
		return packed{}, fmt.Errorf("%d prompts but %d responses", len(prompts), len(responses))
	}
	if len(prompts) == 0 {
		return packed{}, fmt.Errorf("empty batch")
	}
	var p packed
	for i := range prompts {
		if len(prompts[i]) == 0 {
			return packed{}, fmt.Errorf("sequence %d has an empty prompt", i)
		}
		if len(prompts[i])+len(responses[i]) > math.MaxInt32 {
			return packed{}, fmt.Errorf("sequence %d is too long", i)
		}
		p.tokens = append(p.tokens, prompts[i]...)
		p.tokens = append(p.tokens, responses[i]...)
		p.promptLens = append(p.promptLens, int32(len(prompts[i])))
		p.respLens = append(p.respLens, int32(len(responses[i])))
		p.nResp += len(responses[i])
	}
	return p, nil
}

// flat concatenates per-sequence, per-response-token values, checking each length.
func (p packed) flat(what string, v [][]float32, required bool) ([]float32, error) {
	if v == nil {
		if required {
			return nil, fmt.Errorf("%s is required", what)
		}
		return nil, nil
	}
	if len(v) != len(p.respLens) {
		return nil, fmt.Errorf("%s has %d sequences, batch has %d", what, len(v), len(p.respLens))
	}
	out := make([]float32, 0, p.nResp)
	for i, s := range v {
		if len(s) != int(p.respLens[i]) {
			return nil, fmt.Errorf("%s of sequence %d has %d values for %d response tokens", what, i, len(s), p.respLens[i])
		}
		out = append(out, s...)
	}
	return out, nil
}

// split cuts a flat per-response-token slice back into sequences.
func (p packed) split(flat []float32) [][]float32 {
	out := make([][]float32, len(p.respLens))
	off := 0
	for i, n := range p.respLens {
		out[i] = flat[off : off+int(n) : off+int(n)]
		off += int(n)
	}
	return out
}

func ptr[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// pinned is ptr(s), pinned: the ABI's structs are Go memory holding pointers to Go memory,
// which cgo allows only while those are pinned.
func pinned[T any](pin *runtime.Pinner, s []T) *T {
	p := ptr(s)
	if p != nil {
		pin.Pin(p)
	}
	return p
}

// seqs is p as the ABI's umad_seqs; unpin pin after the call.
func (p packed) seqs(pin *runtime.Pinner) C.umad_seqs {
	return C.umad_seqs{
		n_seqs:      C.int32_t(len(p.respLens)),
		tokens:      (*C.int32_t)(pinned(pin, p.tokens)),
		prompt_lens: (*C.int32_t)(pinned(pin, p.promptLens)),
		resp_lens:   (*C.int32_t)(pinned(pin, p.respLens)),
	}
}

func fptr(s []float32) *C.float { return (*C.float)(ptr(s)) }

// pinnedF is fptr(s), pinned for a field of an ABI struct.
func pinnedF(pin *runtime.Pinner, s []float32) *C.float { return (*C.float)(pinned(pin, s)) }

// LogProbs returns, for each response token, its log-prob under softmax(logits/temperature)
// given the prompt and the preceding response tokens, and the entropy of that distribution.
// All sequences run as one packed batch with per-sequence causal attention.
func (m *Model) LogProbs(prompts, responses [][]int32, temperature float64) (logp, ent [][]float32, err error) {
	return m.logProbs(prompts, responses, temperature, false)
}

// BaseLogProbs is LogProbs of the base model, LoRA adapters left out: a LoRA run's KL
// reference, with no second copy of the weights. Without adapters it equals LogProbs.
func (m *Model) BaseLogProbs(prompts, responses [][]int32, temperature float64) (logp, ent [][]float32, err error) {
	return m.logProbs(prompts, responses, temperature, true)
}

func (m *Model) logProbs(prompts, responses [][]int32, temperature float64, baseOnly bool) (logp, ent [][]float32, err error) {
	if err := m.live("log-probs"); err != nil {
		return nil, nil, err
	}
	p, err := pack(prompts, responses)
	if err != nil {
		return nil, nil, fmt.Errorf("log-probs: %w", err)
	}
	lp := make([]float32, p.nResp)
	en := make([]float32, p.nResp)
	m.rt.do(func() {
		var pin runtime.Pinner
		defer pin.Unpin()
		seqs := p.seqs(&pin)
		rc := C.plugin_logprobs(m.ptr, &seqs, C.double(temperature), C.int64_t(m.opts.LogitChunk), b2i(baseOnly),
			fptr(lp), fptr(en), m.rt.errBuf, errBufLen)
		err = m.rt.check(rc, "log-probs")
	})
	if err != nil {
		return nil, nil, err
	}
	return p.split(lp), p.split(en), nil
}

// aggCode is a in the plugin's terms (UMAD_AGG_*).
func aggCode(a trainspec.AggMode) (C.int32_t, error) {
	switch a {
	case trainspec.TokenMean, "":
		return C.UMAD_AGG_TOKEN_MEAN, nil
	case trainspec.SeqMeanTokenSum:
		return C.UMAD_AGG_SEQ_MEAN_TOKEN_SUM, nil
	case trainspec.SeqMeanTokenMean:
		return C.UMAD_AGG_SEQ_MEAN_TOKEN_MEAN, nil
	case trainspec.SeqMeanTokenSumNorm:
		return C.UMAD_AGG_SEQ_MEAN_TOKEN_SUM_NORM, nil
	}
	if err := a.Check(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("loss aggregation %q has no plugin code", string(a))
}

// klCode is k in the plugin's terms (UMAD_KL_*).
func klCode(k trainspec.KLEstimator) (C.int32_t, error) {
	switch k {
	case trainspec.KLK1, "kl", "":
		return C.UMAD_KL_K1, nil
	case trainspec.KLK2, "mse":
		return C.UMAD_KL_K2, nil
	case trainspec.KLK3, "low_var_kl":
		return C.UMAD_KL_K3, nil
	}
	return 0, fmt.Errorf("unknown KL estimator %q (want k1, k2 or k3)", string(k))
}

// PolicyBatch is one micro-batch of the policy loss. Per-token fields hold one value per
// response token of each sequence.
type PolicyBatch struct {
	Prompts, Responses [][]int32
	OldLogp            [][]float32 // behaviour log-probs at Temperature; required
	Advantages         [][]float32 // required
	RefLogp            [][]float32 // reference log-probs; needed when KLCoef != 0
	ISWeights          [][]float32 // truncated importance-sampling weights; optional
	Mask               [][]float32 // 0/1 loss mask; nil means all tokens
}

// LossStats are the statistics of one micro-batch.
type LossStats struct {
	Loss, PGLoss, KL, Entropy      float64
	ClipFrac, ClipFracLower, PPOKL float64
	Tokens                         int64
	Logp                           [][]float32 // current log-probs of the response tokens
}

// PolicyLoss evaluates the policy loss cfg.Loss of one micro-batch. With backward it adds
// scale * d loss / d params to the gradients (micro-batch accumulation: pass
// 1/number-of-micro-batches, or whatever weighting the objective needs).
func (m *Model) PolicyLoss(b PolicyBatch, cfg trainspec.LossConfig, backward bool, scale float64) (LossStats, error) {
	if err := m.live("policy loss"); err != nil {
		return LossStats{}, err
	}
	p, err := pack(b.Prompts, b.Responses)
	if err != nil {
		return LossStats{}, fmt.Errorf("policy loss: %w", err)
	}
	agg, err := aggCode(cfg.Agg)
	if err != nil {
		return LossStats{}, fmt.Errorf("policy loss: %w", err)
	}
	kl, err := klCode(cfg.KL)
	if err != nil {
		return LossStats{}, fmt.Errorf("policy loss: %w", err)
	}
	var old, adv, ref, isw, mask []float32
	for _, f := range []struct {
		name     string
		in       [][]float32
		out      *[]float32
		required bool
	}{
		{"old log-probs", b.OldLogp, &old, true},
		{"advantages", b.Advantages, &adv, true},
		{"reference log-probs", b.RefLogp, &ref, cfg.KLCoef != 0},
		{"importance weights", b.ISWeights, &isw, false},
		{"mask", b.Mask, &mask, false},
	} {
		if *f.out, err = p.flat(f.name, f.in, f.required); err != nil {
			return LossStats{}, fmt.Errorf("policy loss: %w", err)
		}
	}
	if p.nResp == 0 {
		return LossStats{}, fmt.Errorf("policy loss: batch has no response tokens")
	}
	name := cmp.Or(cfg.Loss, trainspec.LossPPO)
	cname := C.CString(string(name))
	defer C.free(unsafe.Pointer(cname))
	cc := C.umad_loss_config{
		policy: C.umad_policy_params{name: cname, clip_low: C.double(cfg.ClipLow), clip_high: C.double(cfg.ClipHigh),
			clip_c: C.double(cfg.ClipC)},
		temperature:  C.double(cfg.Temperature),
		agg_mode:     agg,
		norm_length:  C.double(cfg.NormLength),
		kl_estimator: kl,
		kl_coef:      C.double(cfg.KLCoef),
		entropy_coef: C.double(cfg.EntropyCoef),
		logit_chunk:  C.int64_t(m.opts.LogitChunk),
	}
	lp := make([]float32, p.nResp)
	var st C.umad_loss_stats
	m.rt.do(func() {
		var pin runtime.Pinner
		defer pin.Unpin()
		seqs := p.seqs(&pin)
		in := C.umad_token_inputs{old_logp: pinnedF(&pin, old), advantage: pinnedF(&pin, adv),
			ref_logp: pinnedF(&pin, ref), is_weight: pinnedF(&pin, isw), mask: pinnedF(&pin, mask)}
		rc := C.plugin_policy_loss(m.ptr, &seqs, &in, &cc, b2i(backward), C.double(scale), &st, fptr(lp),
			m.rt.errBuf, errBufLen)
		err = m.rt.check(rc, "policy loss")
	})
	if err != nil {
		return LossStats{}, err
	}
	return LossStats{
		Loss: float64(st.loss), PGLoss: float64(st.pg_loss), KL: float64(st.kl), Entropy: float64(st.entropy),
		ClipFrac: float64(st.clipfrac), ClipFracLower: float64(st.clipfrac_lower), PPOKL: float64(st.ppo_kl),
		Tokens: int64(st.tokens), Logp: p.split(lp),
	}, nil
}

// SFTLoss is the token-mean cross-entropy of the response tokens (temperature 1); with
// backward it adds scale * gradient to the gradients.
func (m *Model) SFTLoss(prompts, responses [][]int32, backward bool, scale float64) (float64, error) {
	if err := m.live("sft loss"); err != nil {
		return 0, err
	}
	p, err := pack(prompts, responses)
	if err != nil {
		return 0, fmt.Errorf("sft loss: %w", err)
	}
	var loss C.double
	m.rt.do(func() {
		var pin runtime.Pinner
		defer pin.Unpin()
		seqs := p.seqs(&pin)
		rc := C.plugin_sft_loss(m.ptr, &seqs, C.int64_t(m.opts.LogitChunk), b2i(backward), C.double(scale),
			&loss, m.rt.errBuf, errBufLen)
		err = m.rt.check(rc, "sft loss")
	})
	return float64(loss), err
}

// KL returns the per-token estimate of KL(policy || reference) from policy and reference
// log-probs of the same tokens (for a KL penalty inside the reward).
func (r *Runtime) KL(logp, ref []float32, est trainspec.KLEstimator) ([]float32, error) {
	if len(logp) != len(ref) {
		return nil, fmt.Errorf("kl: %d log-probs but %d reference log-probs", len(logp), len(ref))
	}
	code, err := klCode(est)
	if err != nil {
		return nil, fmt.Errorf("kl: %w", err)
	}
	out := make([]float32, len(logp))
	if len(out) == 0 {
		return out, nil
	}
	r.do(func() {
		err = r.check(C.plugin_kl(fptr(logp), fptr(ref), C.int64_t(len(logp)), code, fptr(out), r.errBuf, errBufLen), "kl")
	})
	return out, err
}

// StepStats describe one optimizer step.
type StepStats struct {
	GradNorm     float64 // global norm before clipping
	Skipped      bool    // norm was not finite: no update, gradients dropped
	Step         int64   // AdamW steps taken so far
	SkippedTotal int64
}

// Step clips the accumulated gradients to MaxGradNorm, applies AdamW and zeroes the
// gradients. A step whose gradient norm is not finite is skipped and counted.
func (m *Model) Step(opt trainspec.AdamW) (StepStats, error) {
	if err := m.live("optimizer step"); err != nil {
		return StepStats{}, err
	}
	co := C.umad_adamw{lr: C.double(opt.LR), beta1: C.double(opt.Beta1), beta2: C.double(opt.Beta2),
		eps: C.double(opt.Eps), weight_decay: C.double(opt.WeightDecay), max_grad_norm: C.double(opt.MaxGradNorm)}
	var st C.umad_step_stats
	var err error
	m.rt.do(func() {
		err = m.rt.check(C.plugin_optim_step(m.ptr, &co, &st, m.rt.errBuf, errBufLen), "optimizer step")
	})
	return StepStats{GradNorm: float64(st.grad_norm), Skipped: st.skipped != 0, Step: int64(st.step),
		SkippedTotal: int64(st.skipped_total)}, err
}

// ZeroGrad drops the accumulated gradients.
func (m *Model) ZeroGrad() error {
	if err := m.live("zero grad"); err != nil {
		return err
	}
	m.rt.do(func() { C.plugin_zero_grad(m.ptr) })
	return nil
}
