package model

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/umad-dev/umad/arch"
)

// Arch is a supported model architecture, by its registry name (--arch); its descriptor in
// arch/ says what sets it apart, and its GGUF name.
type Arch string

// The architectures tests and callers name; arch.All is the list.
const (
	ArchQwen2 Arch = arch.Qwen2
	ArchQwen3 Arch = arch.Qwen3
	ArchLlama Arch = arch.Llama
)

// GGUF is the architecture's name in a GGUF (general.architecture and its keys' prefix).
func (a Arch) GGUF() string {
	d, _ := a.desc()
	return d.GGUFArch()
}

// desc is the architecture's descriptor; ok is false for an unsupported one.
func (a Arch) desc() (arch.Desc, bool) {
	d, err := arch.Lookup(string(a))
	return d, err == nil
}

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
	SlidingWindow  int          // tokens a sliding-window layer sees (Gemma 3); 0: none
	// QueryScalar is Gemma 3's query_pre_attn_scalar where it is not head_dim: attention
	// scores are scaled by 1/sqrt(QueryScalar). 0: by 1/sqrt(head_dim).
	QueryScalar float64
}

// llamaQueryScalar is the query scalar llama.cpp's Gemma 3 graph uses, which no GGUF key
// sets: hidden/heads for its 27B (62 layers), head_dim otherwise.
func (s Shape) llamaQueryScalar() float64 {
	if s.Layers == 62 {
		return float64(s.Hidden / s.Heads)
	}
	return float64(s.HeadDim)
}

// queryNormScale is the factor a GGUF's q-norm weights carry so that llama.cpp, which
// scales by its own llamaQueryScalar, scales attention scores by 1/sqrt(QueryScalar):
// sqrt(llama's / ours), as q is linear in its norm's weight. 1 where they agree.
func (s Shape) queryNormScale() float32 {
	want := s.QueryScalar
	if want == 0 {
		want = float64(s.HeadDim)
	}
	if d, ok := s.Arch.desc(); !ok || d.QueryPreAttnDefault == 0 || want == s.llamaQueryScalar() {
		return 1
	}
	return float32(math.Sqrt(s.llamaQueryScalar() / want))
}

// RopeScaling is config.json's rope_scaling block (Llama 3 style).
type RopeScaling = arch.RopeScaling

// shapeOf makes the shape of architecture a with dimensions d.
func shapeOf(a Arch, d arch.Dims) Shape {
	s := Shape{Arch: a, Vocab: d.Vocab, Hidden: d.Hidden, Layers: d.Layers, Heads: d.Heads,
		KVHeads: d.KVHeads, HeadDim: d.HeadDim, FFN: d.FFN, RopeTheta: d.RopeTheta, RMSEps: d.RMSEps,
		Context: d.Context, TiedEmbeddings: d.TiedEmbeddings, QKVBias: d.QKVBias, SlidingWindow: d.SlidingWindow}
	if d.RopeScaling != nil {
		rs := *d.RopeScaling
		s.RopeScaling = &rs // the registry's stays as it is
	}
	return s
}

// DefaultShape returns the tiny shape of an architecture (its descriptor's): small enough to
// test in milliseconds, yet exercising what the real models of the family need. Vocab is
// left 0: the tokenizer decides it.
func DefaultShape(a Arch) (Shape, error) {
	d, err := arch.Lookup(string(a))
	if err != nil {
		return Shape{}, err
	}
	return shapeOf(a, d.Tiny), nil
}

// MaxVocab is the largest vocabulary umad accepts: real ones have up to about 260,000
// tokens, and a vocabulary is held in memory as strings (a config's vocab_size of 2e9
// otherwise made the converter pad it until the machine ran out of memory).
const MaxVocab = 1 << 24

// Validate checks that llama.cpp and a Hugging Face implementation can both build the shape.
func (s Shape) Validate() error {
	d, err := arch.Lookup(string(s.Arch))
	if err != nil {
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
	case d.HeadsSpanHidden && s.HeadDim*s.Heads != s.Hidden:
		// llama.cpp's loader sizes attn_q as hidden x hidden.
		return fmt.Errorf("shape: %s needs head dim x heads = hidden, got %d x %d != %d", s.Arch, s.HeadDim, s.Heads, s.Hidden)
	case (d.SlidingWindowPattern > 0) != (s.SlidingWindow > 0):
		return fmt.Errorf("shape: sliding window %d: %s needs one exactly when its layers alternate (%s)", s.SlidingWindow, s.Arch,
			withFlag(func(d arch.Desc) bool { return d.SlidingWindowPattern > 0 }))
	case d.SlidingWindowPattern > 0 && s.Layers < d.SlidingWindowPattern:
		// llama.cpp aborts on a model without a global-attention layer.
		return fmt.Errorf("shape: %s needs at least %d layers (one attends globally), got %d", s.Arch, d.SlidingWindowPattern, s.Layers)
	case s.SlidingWindow < 0 || s.SlidingWindow > math.MaxInt32:
		return fmt.Errorf("shape: sliding window %d out of range", s.SlidingWindow)
	case s.QueryScalar != 0 && (d.QueryPreAttnDefault == 0 || !(s.QueryScalar > 0) || s.QueryScalar > math.MaxInt32):
		return fmt.Errorf("shape: query_pre_attn_scalar %v: want a positive value, and only for %s", s.QueryScalar,
			withFlag(func(d arch.Desc) bool { return d.QueryPreAttnDefault > 0 }))
	case s.QKVBias && !d.QKVBias:
		return fmt.Errorf("shape: q/k/v biases are only supported for %s", withFlag(func(d arch.Desc) bool { return d.QKVBias }))
	}
	if s.RopeScaling != nil {
		r := s.RopeScaling
		if d.RopeScaling == "" || r.RopeType != d.RopeScaling {
			return fmt.Errorf("shape: rope scaling %q is only supported as %s", r.RopeType, ropeScalings())
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

// withFlag names the architectures whose descriptor has the flag.
func withFlag(flag func(arch.Desc) bool) string {
	var out []string
	for _, d := range arch.All {
		if flag(d) {
			out = append(out, d.Name)
		}
	}
	return strings.Join(out, ", ")
}

// ropeScalings names the rope scalings supported, as "llama3 on llama".
func ropeScalings() string {
	var out []string
	for _, d := range arch.All {
		if d.RopeScaling != "" {
			out = append(out, d.RopeScaling+" on "+d.Name)
		}
	}
	return strings.Join(out, ", ")
}

// Presets are real checkpoints' shapes, for benchmarks on random weights of the real size
// (`umad model tiny --preset NAME`): the descriptors' presets.
var Presets = presets()

// PresetNames lists the presets' names, sorted and comma-separated.
func PresetNames() string {
	return strings.Join(slices.Sorted(maps.Keys(Presets)), ", ")
}

func presets() map[string]Shape {
	out := map[string]Shape{}
	for _, d := range arch.All {
		for name, p := range d.Presets {
			out[name] = shapeOf(Arch(d.Name), p)
		}
	}
	return out
}
