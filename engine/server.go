package engine

import (
	"fmt"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/model"
)

// Model is a GGUF model loaded by llama.cpp, seen as the CLI and the trainer need it: its
// tokenizer (llama.cpp's ids, so training sees exactly the ids sampling does), chat
// template and trained context, and engines on it.
type Model struct {
	model *llama.Model
}

// MaxThreads is the most threads a llama.cpp context may use.
const MaxThreads = llama.MaxThreads

// ErrNoMemory is returned when a context's KV cache would not fit the machine's memory.
var ErrNoMemory = llama.ErrNoMemory

// Placement is where a model's layers run: GPULayers offloaded to the GPUs named in Devices
// (all GPUs when empty), the rest on the CPU.
type Placement struct {
	GPULayers int
	Devices   []string
}

// OpenModel loads a GGUF file, checked by LoadModel first, placed as p says.
func OpenModel(path string, p Placement) (*Model, error) {
	return LoadModel(path, ModelParams{GPULayers: p.GPULayers, Devices: p.Devices})
}

// OpenVocab loads only the tokenizer and metadata of a GGUF file (no weights).
func OpenVocab(path string) (*Model, error) {
	return LoadModel(path, ModelParams{VocabOnly: true})
}

// Close frees the model; a nil model is a no-op.
func (m *Model) Close() {
	if m != nil {
		m.model.Close()
	}
}

// Path is the GGUF file the model was loaded from.
func (m *Model) Path() string { return m.model.Path() }

// NVocab is the number of tokens in the vocabulary.
func (m *Model) NVocab() int { return m.model.NVocab() }

// ChatTemplate is the model's tokenizer.chat_template, or "" if it has none.
func (m *Model) ChatTemplate() string { return m.model.ChatTemplate() }

// TrainedContext is the context length the model was trained with (0 if unknown).
func (m *Model) TrainedContext() int { return m.model.NCtxTrain() }

// NewEngine makes a rollout engine on the model.
func (m *Model) NewEngine(opt Options) (*Engine, error) { return New(m, opt) }

// MaxTokenizeBytes is the longest text Tokenize accepts.
const MaxTokenizeBytes = llama.MaxTokenizeBytes

// Tokenize is llama.cpp's tokenizer of the model.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return m.model.Tokenize(text, addSpecial, parseSpecial)
}

// Detokenize turns token ids back into text; bytes cut mid-character become U+FFFD.
func (m *Model) Detokenize(tokens []int32, renderSpecial bool) (string, error) {
	return m.model.Detokenize(tokens, renderSpecial)
}

// Format is the model's chat format: the override (a family name) when given, else the one
// detected from the GGUF's template.
func (m *Model) Format(override string) (chat.Format, error) {
	f, err := chat.Resolve(m.model.ChatTemplate(), override)
	if err != nil && override == "" {
		return chat.Format{}, fmt.Errorf("%s: %w", m.model.Path(), err)
	}
	return f, err
}

// EndOfTurn is the token that ends an assistant turn (and that training must teach): EOT
// when the model has one, else EOS.
func (m *Model) EndOfTurn() int32 {
	sp := m.model.Specials()
	if sp.EOT >= 0 {
		return sp.EOT
	}
	return sp.EOS
}

// Server is one GGUF model loaded for a trainer: the model with a rollout engine on it and
// exact scoring, so that the trainer reaches llama.cpp only through this package.
type Server struct {
	*Model
	Engine *Engine

	adapter     *llama.Adapter // the LoRA adapter applied (SetAdapter), nil for none
	adapterPath string
	shape       *model.Shape     // the model's, read on the first SetAdapter
	weights     *model.WeightMap // made by the first UpdateWeights
}

// OpenServer loads a GGUF file (checked by LoadModel first) and makes an engine for it.
// The weights are read into memory, not mapped from the file, so that UpdateWeights can
// write them.
func OpenServer(path string, p Placement, opt Options) (*Server, error) {
	m, err := LoadModel(path, ModelParams{GPULayers: p.GPULayers, Devices: p.Devices, NoMmap: true})
	if err != nil {
		return nil, err
	}
	e, err := m.NewEngine(opt)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("engine for %s: %w", path, err)
	}
	return &Server{Model: m, Engine: e}, nil
}

// Close frees the engine, if one was made, and the model; a nil server is a no-op.
func (s *Server) Close() {
	if s == nil {
		return
	}
	if s.Engine != nil {
		s.Engine.Close()
	}
	s.Model.Close() // frees the adapter too
}

// ExactLogProbs scores one response after a prompt with its own context under an F32 KV
// cache and flash attention off, the settings under which llama.cpp is exact, so it
// measures the weights and not the rollout settings.
func (s *Server) ExactLogProbs(prompt, response []int32, temperature float64) ([]float32, error) {
	n := len(prompt) + len(response)
	sc := NewScorer(s.Model, ScorerParams{NCtx: n, NBatch: n, Threads: s.Engine.opt.Threads, KVType: KVF32, FlashAttn: FlashOff})
	sc.adapter = s.adapter
	defer sc.Free()
	lp, _, err := sc.LogProbs([][]int32{prompt}, [][]int32{response}, temperature)
	if err != nil {
		return nil, fmt.Errorf("llama.cpp log-probs: %w", err)
	}
	return lp[0], nil
}

// ParseOptions makes engine options from the settings as flags name them: the KV-cache type
// (f16, f32, q8_0) and flash attention (auto, on, off). seqContext 0 leaves the context per
// sequence to the caller; threads 0 means the physical cores.
func ParseOptions(slots, seqContext, threads int, kvType, flashAttn string) (Options, error) {
	kv, err := ParseKVType(kvType)
	if err != nil {
		return Options{}, err
	}
	fa, err := ParseFlashAttn(flashAttn)
	if err != nil {
		return Options{}, err
	}
	return Options{Slots: slots, SeqContext: seqContext, Threads: threads, KVType: kv, FlashAttn: fa}, nil
}

// SharedThreads is each engine's share of the physical cores when engines engines decode at
// once: oversubscribed llama.cpp threads spin and collapse throughput.
func SharedThreads(engines int) int {
	return max(1, llama.PhysicalCores()/max(1, engines))
}

// ModelScorer is a Scorer that owns its model and tokenizes text with it (`umad score
// --gguf`).
type ModelScorer struct {
	*Scorer
	*Model
}

// OpenScorer loads a GGUF file for scoring under opt's threads, KV-cache type and flash
// attention.
func OpenScorer(path string, opt Options) (*ModelScorer, error) {
	m, err := LoadModel(path, ModelParams{})
	if err != nil {
		return nil, err
	}
	return &ModelScorer{NewScorer(m, ScorerParams{Threads: opt.Threads, KVType: opt.KVType, FlashAttn: opt.FlashAttn}), m}, nil
}

// Free releases the context and the model.
func (s *ModelScorer) Free() {
	s.Scorer.Free()
	s.Model.Close()
}
