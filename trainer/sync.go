package trainer

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/model"
)

// WriteGGUF writes the model's current weights as a GGUF file for llama.cpp: the weights
// go to an HF directory (staging, reused between calls) holding src's config and tokenizer
// files, which is then converted. The GGUF is replaced atomically.
func WriteGGUF(m *torch.Model, src, staging, out string) error {
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	// config.json too: the converter reads the architecture from it.
	if err := model.CopyFiles(src, staging, append([]string{"config.json"}, model.TokenizerFiles...)); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	weights, err := hfmodel.Export(m)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := model.WriteSafetensors(filepath.Join(staging, "model.safetensors"), weights, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return model.HFToGGUF(staging, out, model.HFToGGUFOptions{})
}

// Server is one agent's llama.cpp side: the model file loaded and an engine on it.
type Server struct {
	Model  *llama.Model
	Engine *engine.Engine
}

// OpenServer loads a GGUF file and makes an engine for it.
func OpenServer(path string, mp llama.ModelParams, opt engine.Options) (*Server, error) {
	m, err := engine.LoadModel(path, mp)
	if err != nil {
		return nil, err
	}
	e, err := engine.New(m, opt)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("engine for %s: %w", path, err)
	}
	return &Server{Model: m, Engine: e}, nil
}

// Close frees the engine and the model.
func (s *Server) Close() {
	if s == nil {
		return
	}
	s.Engine.Close()
	s.Model.Close()
}

// LlamaLogProbs scores a response after a prompt with llama.cpp: the log-prob of each
// response token under softmax(logits/temperature). It uses its own context with an F32 KV
// cache and flash attention off, the settings under which llama.cpp is exact, so it
// measures the weights and not the rollout settings.
func LlamaLogProbs(m *llama.Model, prompt, response []int32, temperature float64, threads int) ([]float32, error) {
	n := len(prompt) + len(response)
	if len(prompt) == 0 || len(response) == 0 || temperature <= 0 {
		return nil, fmt.Errorf("llama log-probs: need a prompt, a response and a positive temperature")
	}
	ctx, err := m.NewContext(llama.ContextParams{NCtx: n, NBatch: n, Threads: threads, KVType: llama.KVF32, FlashAttn: llama.FlashOff})
	if err != nil {
		return nil, fmt.Errorf("llama log-probs: %w", err)
	}
	defer ctx.Close()
	b, err := llama.NewBatch(n, 1)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	seq := []int32{0}
	all := append(append([]int32{}, prompt...), response...)
	for i, tok := range all {
		// Position i predicts token i+1; the rows that predict response tokens are needed.
		if _, err := b.Add(tok, i, seq, i >= len(prompt)-1 && i < n-1); err != nil {
			return nil, err
		}
	}
	if err := ctx.Decode(b); err != nil {
		return nil, fmt.Errorf("llama log-probs: %w", err)
	}
	out := make([]float32, len(response))
	for j := range response {
		row, err := ctx.Logits(len(prompt) - 1 + j)
		if err != nil {
			return nil, fmt.Errorf("llama log-probs: %w", err)
		}
		if int(response[j]) >= len(row) || response[j] < 0 {
			return nil, fmt.Errorf("llama log-probs: token %d outside the vocabulary of %d", response[j], len(row))
		}
		out[j] = float32(logSoftmaxAt(row, int(response[j]), temperature))
	}
	return out, nil
}

// logSoftmaxAt is log softmax(row/t)[i] in float64.
func logSoftmaxAt(row []float32, i int, t float64) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v)/t)
	}
	var z float64
	for _, v := range row {
		z += math.Exp(float64(v)/t - mx)
	}
	return float64(row[i])/t - mx - math.Log(z)
}

// MeanAbsDiff is the mean |a-b| over paired values (the log-prob gap).
func MeanAbsDiff(a, b []float32) float64 {
	if len(a) == 0 {
		return 0
	}
	var s float64
	for i := range a {
		s += math.Abs(float64(a[i]) - float64(b[i]))
	}
	return s / float64(len(a))
}
