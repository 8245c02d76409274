// Package arch is the registry of the model architectures umad supports: one descriptor per
// architecture, from which the converter, the engine, the chat formats, the plugin's
// configuration, `umad model tiny` and the memory plan take what differs between them.
// Adding an architecture is a descriptor here plus what is truly new about it (its tensors in
// model/; in kernels/, only a trait the plugin's forward lacks). It imports nothing of umad.
package arch

import (
	"fmt"
	"slices"
	"strings"
)

// Desc describes one architecture.
type Desc struct {
	// Name is llama.cpp's general.architecture, config.json's model_type and --arch.
	Name string
	// ModelType is config.json's model_type (Name where empty).
	ModelType string
	// HFClass is config.json's architectures entry.
	HFClass string
	// Chat is the chat family (chat.Family) of the models umad generates, whose template
	// they carry.
	Chat string
	// Tokenizer is the tokenizer.ggml.pre of generated models' tokenizer: byte-level BPE,
	// or SentencePiece for "default" (Gemma).
	Tokenizer string

	// QKNorm: an RMS norm over each head of q and k (q_norm, k_norm).
	QKNorm bool
	// QKVBias: q/k/v projections always have biases (Qwen2); elsewhere they are refused.
	QKVBias bool
	// HeadsSpanHidden: llama.cpp sizes attn_q as hidden x hidden, so heads x head dim must
	// equal hidden.
	HeadsSpanHidden bool
	// PermuteQK: the GGUF holds each q/k head's rows in llama.cpp's interleaved rotary order.
	PermuteQK bool
	// ConfigHeadDim: config.json states head_dim and attention_bias.
	ConfigHeadDim bool
	// GGUFRopeDims: the GGUF states vocab_size and rope.dimension_count.
	GGUFRopeDims bool
	// RopeScaling is the one rope_scaling type supported ("llama3"), or "" for none.
	RopeScaling string
	// TiedByDefault: config.json without tie_word_embeddings means tied (transformers'
	// default for the class; Gemma 3's configs leave the key out).
	TiedByDefault bool
	// Activation is config.json's hidden_act: "silu" or "gelu_pytorch_tanh" (GeLU, tanh form).
	// The plugin's forward reads it, NormOffset and SandwichNorm from its model configuration
	// too, as it does every trait: it never sees an architecture's name.
	Activation string
	// NormOffset: RMS norms scale by (NormOffset + weight); Gemma's weights are stored as
	// the offset from 1 in HF and with it added in GGUF.
	NormOffset float64
	// SandwichNorm: norms before and after both attention and MLP (Gemma 2/3).
	SandwichNorm bool
	// EmbedScale: the embedding's rows are scaled by sqrt(hidden); the plugin reads it from
	// its model configuration (torch.Config, set by hfmodel).
	EmbedScale bool
	// SlidingWindowPattern > 0: layer i attends over a sliding window unless (i+1) is a
	// multiple of it (then globally); the local layers use LocalRopeTheta. The plugin reads
	// both from its model configuration, as it does EmbedScale.
	SlidingWindowPattern int
	LocalRopeTheta       float64
	// QueryPreAttnDefault is transformers' query_pre_attn_scalar when config.json leaves
	// it out (Gemma 3: 256): attention scores are scaled by its inverse square root, not
	// head_dim's. 0: the architecture scales by head_dim and has no such key.
	QueryPreAttnDefault float64

	// Tiny is the tiny shape `umad model tiny` writes: small enough to test in
	// milliseconds, yet with what the real models of the family need. Vocab is 0: the
	// tokenizer decides it.
	Tiny Dims
	// Presets are real checkpoints' shapes, by name, for benchmarks on random weights.
	Presets map[string]Dims
}

// Dims are the sizes of a shape; the model package makes a model.Shape of them.
type Dims struct {
	Vocab, Hidden, Layers, Heads, KVHeads, HeadDim, FFN, Context int
	RopeTheta, RMSEps                                            float64
	TiedEmbeddings, QKVBias                                      bool
	RopeScaling                                                  *RopeScaling // nil: none
	SlidingWindow                                                int          // tokens a local layer sees; 0: none
}

// RopeScaling is config.json's rope_scaling block (Llama 3 style).
type RopeScaling struct {
	RopeType                      string  `json:"rope_type"`
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
}

// Names of the architectures.
const (
	Qwen2  = "qwen2"
	Qwen3  = "qwen3"
	Llama  = "llama"
	Gemma3 = "gemma3"
)

// tinyBase is what the tiny shapes share.
var tinyBase = Dims{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 128,
	RopeTheta: 1e6, RMSEps: 1e-6, Context: 4096, TiedEmbeddings: true}

// with returns d changed by f.
func (d Dims) with(f func(*Dims)) Dims {
	f(&d)
	return d
}

// All lists the architectures.
var All = []Desc{
	{
		// Qwen2 and Qwen2.5: q/k/v biases and tied embeddings.
		Name: Qwen2, HFClass: "Qwen2ForCausalLM", Chat: "qwen2.5", Tokenizer: "qwen2",
		QKVBias: true, HeadsSpanHidden: true, Activation: "silu",
		Tiny: tinyBase.with(func(d *Dims) { d.QKVBias = true }),
		Presets: map[string]Dims{
			"qwen2.5-0.5b": {Vocab: 151936, Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64,
				FFN: 4864, RopeTheta: 1e6, RMSEps: 1e-6, Context: 32768, TiedEmbeddings: true, QKVBias: true},
			"qwen2.5-3b": {Vocab: 151936, Hidden: 2048, Layers: 36, Heads: 16, KVHeads: 2, HeadDim: 128,
				FFN: 11008, RopeTheta: 1e6, RMSEps: 1e-6, Context: 32768, TiedEmbeddings: true, QKVBias: true},
		},
	},
	{
		// Qwen3: QK-norm, no biases, head dim independent of hidden/heads.
		Name: Qwen3, HFClass: "Qwen3ForCausalLM", Chat: "qwen3", Tokenizer: "qwen2",
		QKNorm: true, ConfigHeadDim: true, Activation: "silu",
		Tiny: tinyBase.with(func(d *Dims) { d.HeadDim = 32 }),
		Presets: map[string]Dims{
			// Qwen3-4B: heads x head dim (4096) wider than hidden.
			"qwen3-4b": {Vocab: 151936, Hidden: 2560, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128,
				FFN: 9728, RopeTheta: 1e6, RMSEps: 1e-6, Context: 40960, TiedEmbeddings: true},
		},
	},
	{
		// Llama 3: untied output, Llama 3 rope scaling, q/k rows permuted in the GGUF.
		Name: Llama, HFClass: "LlamaForCausalLM", Chat: "llama3", Tokenizer: "llama-bpe",
		PermuteQK: true, ConfigHeadDim: true, GGUFRopeDims: true, RopeScaling: "llama3", Activation: "silu",
		Tiny: tinyBase.with(func(d *Dims) {
			d.RopeTheta, d.RMSEps, d.TiedEmbeddings = 500000, 1e-5, false
			d.RopeScaling = &RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4,
				OriginalMaxPositionEmbeddings: 8192}
		}),
	},
	{
		// Gemma 3 (text): sandwich norms with the +1 offset, GeLU-tanh, embeddings scaled
		// by sqrt(hidden), QK-norm, five sliding-window layers to one global, each kind with
		// its rope base, and a SentencePiece tokenizer. The tiny shape has six layers so that
		// both kinds run, and a window shorter than test prompts.
		Name: Gemma3, ModelType: "gemma3_text", HFClass: "Gemma3ForCausalLM", Chat: "gemma3", Tokenizer: "default",
		QKNorm: true, ConfigHeadDim: true, TiedByDefault: true, Activation: "gelu_pytorch_tanh", NormOffset: 1,
		SandwichNorm: true, EmbedScale: true, SlidingWindowPattern: 6, LocalRopeTheta: 10000, QueryPreAttnDefault: 256,
		Tiny: tinyBase.with(func(d *Dims) { d.Layers, d.KVHeads, d.HeadDim, d.SlidingWindow = 6, 1, 32, 8 }),
		Presets: map[string]Dims{
			"gemma-3-1b": {Vocab: 262144, Hidden: 1152, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256,
				FFN: 6912, RopeTheta: 1e6, RMSEps: 1e-6, Context: 32768, TiedEmbeddings: true, SlidingWindow: 512},
		},
	},
}

// HFModelType is config.json's model_type of the architecture.
func (d Desc) HFModelType() string {
	if d.ModelType != "" {
		return d.ModelType
	}
	return d.Name
}

// OfModelType returns the descriptor whose config.json model_type is t.
func OfModelType(t string) (Desc, bool) {
	i := slices.IndexFunc(All, func(d Desc) bool { return d.HFModelType() == t })
	if i < 0 {
		return Desc{}, false
	}
	return All[i], true
}

// Names lists the architectures' names in registry order.
func Names() []string {
	out := make([]string, len(All))
	for i, d := range All {
		out[i] = d.Name
	}
	return out
}

// List is Names as prose: "qwen2, qwen3 or llama".
func List() string {
	n := Names()
	if len(n) < 2 {
		return strings.Join(n, "")
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// Lookup returns the descriptor of the architecture name.
func Lookup(name string) (Desc, error) {
	i := slices.IndexFunc(All, func(d Desc) bool { return d.Name == name })
	if i < 0 {
		return Desc{}, fmt.Errorf("unsupported architecture %q (want %s)", name, List())
	}
	return All[i], nil
}
