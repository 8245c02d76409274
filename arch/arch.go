// Package arch is the registry of the model architectures umad supports: one descriptor per
// architecture, from which the converter, the engine, the chat formats, the plugin's
// configuration, `umad model tiny` and the memory plan take what differs between them.
// Each architecture is one file of this package: its descriptor, with its chat format and
// tokenizer as data, registered from the file's init. A new architecture is a new file,
// plus what is truly new about it (tensors in model/; in kernels/, only a trait the
// plugin's forward lacks). It imports nothing of umad.
package arch

import (
	"fmt"
	"slices"
	"strings"
)

// Desc describes one architecture.
type Desc struct {
	// Name is --arch, and config.json's model_type and llama.cpp's general.architecture
	// unless ModelType or GGUF is set.
	Name string
	// ModelType is config.json's model_type (Name where empty).
	ModelType string
	// GGUF is llama.cpp's general.architecture where llama.cpp runs the architecture as
	// another (Name where empty). A GGUF of that name reads back as the first architecture
	// registered under it.
	GGUF string
	// HFClass is config.json's architectures entry.
	HFClass string
	// Chat is the chat format of the models umad generates, whose template they carry.
	Chat Chat
	// Tokenizer is the tokenizer of the models umad generates.
	Tokenizer Tokenizer
	// Order is the architecture's place in lists (help texts, and which of those that share
	// a GGUF name a GGUF reads back as): the next number for an architecture added later.
	Order int

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

// All lists the architectures by Order; each file of this package registers its own
// (register).
var All []Desc

// register adds an architecture to All, kept in Order.
func register(d Desc) {
	All = append(All, d)
	slices.SortStableFunc(All, func(a, b Desc) int { return a.Order - b.Order })
}

// tinyBase is what the tiny shapes share.
var tinyBase = Dims{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 128,
	RopeTheta: 1e6, RMSEps: 1e-6, Context: 4096, TiedEmbeddings: true}

// with returns d changed by f.
func (d Dims) with(f func(*Dims)) Dims {
	f(&d)
	return d
}

// HFModelType is config.json's model_type of the architecture.
func (d Desc) HFModelType() string {
	if d.ModelType != "" {
		return d.ModelType
	}
	return d.Name
}

// GGUFArch is llama.cpp's general.architecture of the architecture.
func (d Desc) GGUFArch() string {
	if d.GGUF != "" {
		return d.GGUF
	}
	return d.Name
}

// OfGGUF returns the first descriptor whose GGUF general.architecture is name.
func OfGGUF(name string) (Desc, bool) {
	i := slices.IndexFunc(All, func(d Desc) bool { return d.GGUFArch() == name })
	if i < 0 {
		return Desc{}, false
	}
	return All[i], true
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
