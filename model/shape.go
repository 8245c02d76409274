package model

import (
	"errors"
	"fmt"
	"math"
)

// Arch is a supported model architecture, named as llama.cpp's general.architecture.
type Arch string

// Supported architectures.
const (
	ArchQwen2 Arch = "qwen2"
	ArchQwen3 Arch = "qwen3"
	ArchLlama Arch = "llama"
)

// archOfModelType maps config.json's model_type to an architecture.
var archOfModelType = map[string]Arch{"qwen2": ArchQwen2, "qwen3": ArchQwen3, "llama": ArchLlama}

// Shape is a decoder-only transformer's hyperparameters.
type Shape struct {
	Arch           Arch
	Vocab          int
	Hidden         int
	Layers         int
	Heads          int
	KVHeads        int
	HeadDim        int
	FFN            int
	RopeTheta      float64
	RMSEps         float64
	Context        int
	TiedEmbeddings bool
	QKVBias        bool         // q/k/v projection biases (Qwen2)
	RopeScaling    *RopeScaling // nil: none; only Llama 3 ("llama3") scaling is supported
}

// DefaultShape returns the tiny shape of an architecture: small enough to test in
// milliseconds, yet exercising what the real models of the family need (Qwen2: q/k/v biases
// and tied embeddings; Qwen3: QK-norm and head_dim != hidden/heads; Llama: untied output and
// Llama 3 rope scaling). Vocab is left 0: the tokenizer decides it.
func DefaultShape(arch Arch) (Shape, error) {
	s := Shape{
		Arch: arch, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 128,
		RopeTheta: 1e6, RMSEps: 1e-6, Context: 4096, TiedEmbeddings: true,
	}
	switch arch {
	case ArchQwen2:
		s.QKVBias = true
	case ArchQwen3:
		s.HeadDim = 32
	case ArchLlama:
		s.RopeTheta = 500000
		s.RMSEps = 1e-5
		s.TiedEmbeddings = false
		s.RopeScaling = &RopeScaling{
			RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4,
			OriginalMaxPositionEmbeddings: 8192,
		}
	default:
		return Shape{}, fmt.Errorf("unsupported architecture %q (want qwen2, qwen3 or llama)", arch)
	}
	return s, nil
}

// MaxVocab is the largest vocabulary umad accepts: real ones have up to about 260,000
// tokens, and a vocabulary is held in memory as strings (a config's vocab_size of 2e9
// otherwise made the converter pad it until the machine ran out of memory).
const MaxVocab = 1 << 24

// Validate checks that llama.cpp and a Hugging Face implementation can both build the shape.
func (s Shape) Validate() error {
	if _, err := DefaultShape(s.Arch); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab", s.Vocab}, {"hidden", s.Hidden}, {"layers", s.Layers}, {"heads", s.Heads},
		{"kv heads", s.KVHeads}, {"head dim", s.HeadDim}, {"ffn", s.FFN}, {"context", s.Context},
	} {
		if f.v <= 0 || f.v > math.MaxInt32 {
			return fmt.Errorf("shape: %s = %d, must be in 1..%d", f.name, f.v, math.MaxInt32)
		}
	}
	switch {
	case s.Vocab > MaxVocab:
		return fmt.Errorf("shape: vocab = %d, more than the %d tokens umad supports", s.Vocab, MaxVocab)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("shape: %d heads are not a multiple of %d kv heads", s.Heads, s.KVHeads)
	case s.HeadDim%2 != 0:
		return fmt.Errorf("shape: head dim %d must be even for rope", s.HeadDim)
	case !(s.RopeTheta > 0) || !(s.RMSEps > 0):
		return fmt.Errorf("shape: rope theta %v and rms eps %v must be positive", s.RopeTheta, s.RMSEps)
	case s.Arch == ArchQwen2 && s.HeadDim*s.Heads != s.Hidden:
		// llama.cpp's qwen2 loader sizes attn_q as hidden x hidden.
		return fmt.Errorf("shape: qwen2 needs head dim x heads = hidden, got %d x %d != %d", s.HeadDim, s.Heads, s.Hidden)
	case s.QKVBias && s.Arch != ArchQwen2:
		return errors.New("shape: q/k/v biases are only supported for qwen2")
	}
	if s.RopeScaling != nil {
		r := s.RopeScaling
		if s.Arch != ArchLlama || r.RopeType != "llama3" {
			return fmt.Errorf("shape: rope scaling %q is only supported as llama3 on llama", r.RopeType)
		}
		if !(r.Factor > 0) || !(r.HighFreqFactor > r.LowFreqFactor) || r.OriginalMaxPositionEmbeddings <= 0 {
			return fmt.Errorf("shape: invalid llama3 rope scaling %+v", *r)
		}
	}
	return nil
}

// llama3RopeFactors returns the per-frequency divisors llama.cpp reads from rope_freqs.weight
// for Llama 3 rope scaling: 1 for high frequencies, factor for low ones, and a smooth blend
// between (as Meta's reference and the GGUF converter compute them).
func (s Shape) llama3RopeFactors() []float32 {
	r := s.RopeScaling
	oldCtx := float64(r.OriginalMaxPositionEmbeddings)
	lowWavelen := oldCtx / r.LowFreqFactor
	highWavelen := oldCtx / r.HighFreqFactor
	out := make([]float32, s.HeadDim/2)
	for i := range out {
		freq := 1 / math.Pow(s.RopeTheta, float64(2*i)/float64(s.HeadDim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(r.Factor)
		default:
			smooth := (oldCtx/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/r.Factor + smooth))
		}
	}
	return out
}

// Presets are real checkpoints' shapes, for benchmarks on random weights of the real size
// (`umad model tiny --preset NAME`).
var Presets = map[string]Shape{
	"qwen2.5-0.5b": {Arch: ArchQwen2, Vocab: 151936, Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64,
		FFN: 4864, RopeTheta: 1e6, RMSEps: 1e-6, Context: 32768, TiedEmbeddings: true, QKVBias: true},
	"qwen2.5-3b": {Arch: ArchQwen2, Vocab: 151936, Hidden: 2048, Layers: 36, Heads: 16, KVHeads: 2, HeadDim: 128,
		FFN: 11008, RopeTheta: 1e6, RMSEps: 1e-6, Context: 32768, TiedEmbeddings: true, QKVBias: true},
	// Qwen3-4B: QK-norm, no q/k/v biases, heads x head dim (4096) wider than hidden.
	"qwen3-4b": {Arch: ArchQwen3, Vocab: 151936, Hidden: 2560, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128,
		FFN: 9728, RopeTheta: 1e6, RMSEps: 1e-6, Context: 40960, TiedEmbeddings: true},
}
