package engine

import (
	"fmt"
	"math"

	"github.com/umad-dev/umad/cgo/llama"
)

// Scorer computes the log-probs and entropies of given responses after given prompts
// with llama.cpp, one sequence at a time: what a trainer computes, for comparing engines
// and for users who want NLLs. It is exact under an F32 KV cache without flash attention.
type Scorer struct {
	m      *llama.Model
	p      llama.ContextParams
	ctx    *llama.Context
	batch  *llama.Batch
	nVocab int
	logits []float64
	// adapter, when set, is the LoRA adapter every context of the scorer applies.
	adapter *llama.Adapter
}

// NewScorer makes a scorer on the model; p.NCtx grows as longer sequences come.
func NewScorer(m *Model, p ScorerParams) *Scorer {
	if p.NBatch == 0 {
		p.NBatch = 512
	}
	return &Scorer{m: m.model, p: p.context(), nVocab: m.model.NVocab()}
}

// Free releases the context.
func (s *Scorer) Free() {
	if s.ctx != nil {
		s.batch.Close()
		s.ctx.Close()
		s.ctx, s.batch = nil, nil
	}
}

func (s *Scorer) ensure(n int) error {
	if s.ctx != nil && s.p.NCtx >= n {
		return nil
	}
	s.Free()
	s.p.NCtx = max(n, 256)
	ctx, err := s.m.NewContext(s.p)
	if err != nil {
		return err
	}
	if s.adapter != nil {
		if err := ctx.SetAdapter(s.adapter, 1); err != nil {
			ctx.Close()
			return err
		}
	}
	b, err := llama.NewBatch(s.p.NBatch, 1)
	if err != nil {
		ctx.Close()
		return err
	}
	s.ctx, s.batch = ctx, b
	return nil
}

// LogProbs returns, for every response token, its log-prob under softmax(logits/T) and
// the entropy of that distribution (natural log).
func (s *Scorer) LogProbs(prompts, responses [][]int32, temperature float64) (logp, ent [][]float32, err error) {
	if len(prompts) != len(responses) {
		return nil, nil, fmt.Errorf("score: %d prompts for %d responses", len(prompts), len(responses))
	}
	if !(temperature > 0) || math.IsInf(temperature, 0) {
		return nil, nil, fmt.Errorf("score: temperature must be positive, got %v", temperature)
	}
	for i := range prompts {
		lp, e, err := s.one(prompts[i], responses[i], temperature)
		if err != nil {
			return nil, nil, fmt.Errorf("sequence %d: %w", i, err)
		}
		logp, ent = append(logp, lp), append(ent, e)
	}
	return logp, ent, nil
}

func (s *Scorer) one(prompt, response []int32, temp float64) ([]float32, []float32, error) {
	if len(prompt) == 0 {
		return nil, nil, fmt.Errorf("empty prompt")
	}
	seq := append(append([]int32{}, prompt...), response...)
	for i, t := range seq {
		if t < 0 || int(t) >= s.nVocab {
			what, at := "prompt", i
			if i >= len(prompt) {
				what, at = "response", i-len(prompt)
			}
			return nil, nil, fmt.Errorf("%s token %d at index %d is outside the vocabulary [0, %d)", what, t, at, s.nVocab)
		}
	}
	if nt := s.m.NCtxTrain(); nt > 0 && len(seq) > nt {
		return nil, nil, fmt.Errorf("%d tokens are more than the model's context of %d", len(seq), nt)
	}
	n := len(seq) - 1 // the last token is scored, never fed
	if err := s.ensure(len(seq)); err != nil {
		return nil, nil, err
	}
	if err := s.ctx.ClearMemory(); err != nil {
		return nil, nil, err
	}
	lp := make([]float32, len(response))
	ent := make([]float32, len(response))
	for start := 0; start < n; start += s.p.NBatch {
		s.batch.Clear()
		end := min(start+s.p.NBatch, n)
		for i := start; i < end; i++ {
			// Position i predicts token i+1; only response tokens are scored.
			if _, err := s.batch.Add(seq[i], i, []int32{0}, i+1 >= len(prompt)); err != nil {
				return nil, nil, err
			}
		}
		if err := s.ctx.Decode(s.batch); err != nil {
			return nil, nil, err
		}
		for i := max(start, len(prompt)-1); i < end; i++ {
			row, err := s.ctx.Logits(i - start)
			if err != nil {
				return nil, nil, err
			}
			r := i + 1 - len(prompt)
			a, b := logProbEntropy(row, temp, seq[i+1], &s.logits)
			lp[r], ent[r] = float32(a), float32(b)
		}
	}
	return lp, ent, nil
}

// logProbEntropy is the float64 log-softmax of row/T at tok and the entropy.
func logProbEntropy(row []float32, temp float64, tok int32, buf *[]float64) (float64, float64) {
	x := (*buf)[:0]
	mx := math.Inf(-1)
	for _, v := range row {
		f := float64(v) / temp
		x = append(x, f)
		mx = math.Max(mx, f)
	}
	*buf = x
	var z, ex float64
	for _, f := range x {
		e := math.Exp(f - mx)
		z += e
		ex += e * (f - mx)
	}
	logZ := math.Log(z)
	return x[tok] - mx - logZ, logZ - ex/z
}
