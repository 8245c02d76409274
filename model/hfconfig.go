package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/arch"
)

// HFConfig is the part of a Hugging Face config.json that Qwen2, Qwen3 and Llama models use.
type HFConfig struct {
	Architectures         []string     `json:"architectures"`
	ModelType             string       `json:"model_type"`
	VocabSize             int          `json:"vocab_size"`
	HiddenSize            int          `json:"hidden_size"`
	IntermediateSize      int          `json:"intermediate_size"`
	NumHiddenLayers       int          `json:"num_hidden_layers"`
	NumAttentionHeads     int          `json:"num_attention_heads"`
	NumKeyValueHeads      int          `json:"num_key_value_heads,omitempty"`
	HeadDim               int          `json:"head_dim,omitempty"`
	HiddenAct             string       `json:"hidden_act,omitempty"`
	HiddenActivation      string       `json:"hidden_activation,omitempty"` // Gemma's name for hidden_act
	MaxPositionEmbeddings int          `json:"max_position_embeddings"`
	RMSNormEps            float64      `json:"rms_norm_eps"`
	RopeTheta             float64      `json:"rope_theta"`
	RopeScaling           *RopeScaling `json:"rope_scaling"`
	TieWordEmbeddings     bool         `json:"tie_word_embeddings"`
	// AttentionBias is Llama's and Qwen3's switch for q/k/v/o biases; Qwen2 always has q/k/v
	// biases and has no such key.
	AttentionBias *bool    `json:"attention_bias,omitempty"`
	BOSTokenID    *int     `json:"bos_token_id"`
	EOSTokenID    TokenIDs `json:"eos_token_id"`
	TorchDType    string   `json:"torch_dtype,omitempty"`
	// Gemma 3: sliding-window layers, their rope base and pattern, and the query scale.
	SlidingWindow        *int     `json:"sliding_window,omitempty"`
	SlidingWindowPattern int      `json:"sliding_window_pattern,omitempty"`
	RopeLocalBaseFreq    float64  `json:"rope_local_base_freq,omitempty"`
	QueryPreAttnScalar   *float64 `json:"query_pre_attn_scalar,omitempty"`
	LayerTypes           []string `json:"layer_types,omitempty"`
	// UseBidirectionalAttention is set by embedding-style configs: not a causal decoder.
	UseBidirectionalAttention bool `json:"use_bidirectional_attention,omitempty"`
	// Soft-capping of logits, which umad does not implement: must be absent or null.
	FinalLogitSoftcapping *float64 `json:"final_logit_softcapping,omitempty"`
	AttnLogitSoftcapping  *float64 `json:"attn_logit_softcapping,omitempty"`
}

// TokenIDs holds a token id field that config files write either as one number or a list
// (Llama 3.2 lists several EOS ids).
type TokenIDs []int

// UnmarshalJSON accepts a number, a list of numbers or null.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	var one *int
	if err := json.Unmarshal(b, &one); err == nil {
		*t = nil
		if one != nil {
			*t = TokenIDs{*one}
		}
		return nil
	}
	var many []int
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("token id: want a number or a list of numbers: %w", err)
	}
	*t = many
	return nil
}

// MarshalJSON writes a single id as a number and several as a list.
func (t TokenIDs) MarshalJSON() ([]byte, error) {
	switch len(t) {
	case 0:
		return []byte("null"), nil
	case 1:
		return json.Marshal(t[0])
	}
	return json.Marshal([]int(t))
}

// LoadHFConfig reads dir/config.json.
func LoadHFConfig(dir string) (*HFConfig, error) {
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load hf config: %w", err)
	}
	var c HFConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("load hf config %s: %w", path, err)
	}
	var tie struct {
		Set *bool `json:"tie_word_embeddings"`
	}
	if json.Unmarshal(raw, &tie) == nil && tie.Set == nil {
		d, _ := arch.OfModelType(c.ModelType)
		c.TieWordEmbeddings = d.TiedByDefault
	}
	return &c, nil
}

// Shape returns the model shape the config describes, checked for consistency.
func (c *HFConfig) Shape() (Shape, error) {
	d, ok := arch.OfModelType(c.ModelType)
	if !ok {
		return Shape{}, fmt.Errorf("hf config: unsupported model_type %q", c.ModelType)
	}
	if c.VocabSize > MaxVocab {
		return Shape{}, fmt.Errorf("hf config: vocab_size %d is more than the %d tokens umad supports", c.VocabSize, MaxVocab)
	}
	s := Shape{
		Arch:           Arch(d.Name),
		Vocab:          c.VocabSize,
		Hidden:         c.HiddenSize,
		Layers:         c.NumHiddenLayers,
		Heads:          c.NumAttentionHeads,
		KVHeads:        c.NumKeyValueHeads,
		HeadDim:        c.HeadDim,
		FFN:            c.IntermediateSize,
		RopeTheta:      c.RopeTheta,
		RMSEps:         c.RMSNormEps,
		Context:        c.MaxPositionEmbeddings,
		TiedEmbeddings: c.TieWordEmbeddings,
		QKVBias:        d.QKVBias || (c.AttentionBias != nil && *c.AttentionBias),
		RopeScaling:    c.RopeScaling,
	}
	if s.KVHeads == 0 { // HF's default: no grouping
		s.KVHeads = s.Heads
	}
	if s.HeadDim == 0 && s.Heads > 0 {
		s.HeadDim = s.Hidden / s.Heads
	}
	if c.SlidingWindow != nil && d.SlidingWindowPattern > 0 { // Qwen2's is off unless use_sliding_window
		s.SlidingWindow = *c.SlidingWindow
	}
	if d.QueryPreAttnDefault > 0 {
		// transformers' default where the key is missing (it read as 0 and scaled by head_dim).
		s.QueryScalar = d.QueryPreAttnDefault
		if c.QueryPreAttnScalar != nil {
			s.QueryScalar = *c.QueryPreAttnScalar
		}
		if s.QueryScalar == float64(s.HeadDim) {
			s.QueryScalar = 0
		}
	}
	if err := s.Validate(); err != nil {
		return Shape{}, fmt.Errorf("hf config: %w", err)
	}
	if err := c.checkArch(d, s); err != nil {
		return Shape{}, fmt.Errorf("hf config: %w", err)
	}
	return s, nil
}

// checkArch refuses settings of the architecture that umad's forwards do not implement
// (llama.cpp fixes Gemma 3's pattern, local rope base and query scale).
func (c *HFConfig) checkArch(d arch.Desc, s Shape) error {
	act := c.HiddenAct
	if c.HiddenActivation != "" {
		act = c.HiddenActivation
	}
	if act != "" && act != d.Activation {
		return fmt.Errorf("activation %q: %s uses %q", act, d.Name, d.Activation)
	}
	if c.FinalLogitSoftcapping != nil || c.AttnLogitSoftcapping != nil {
		return errors.New("logit soft-capping is not supported")
	}
	if c.UseBidirectionalAttention {
		return errors.New("use_bidirectional_attention: an embedding model attends both ways; umad runs causal decoders only")
	}
	if len(c.LayerTypes) > 0 && len(c.LayerTypes) != s.Layers {
		return fmt.Errorf("layer_types lists %d layers, num_hidden_layers is %d", len(c.LayerTypes), s.Layers)
	}
	if d.SlidingWindowPattern == 0 {
		return nil
	}
	if p := c.SlidingWindowPattern; p != 0 && p != d.SlidingWindowPattern {
		return fmt.Errorf("sliding_window_pattern %d: %s needs %d", p, d.Name, d.SlidingWindowPattern)
	}
	for i, t := range c.LayerTypes {
		if want := layerType(d, i); t != want {
			return fmt.Errorf("layer_types[%d] is %q, want %q (one global layer in %d)", i, t, want, d.SlidingWindowPattern)
		}
	}
	if b := c.RopeLocalBaseFreq; b != 0 && b != d.LocalRopeTheta {
		return fmt.Errorf("rope_local_base_freq %v: %s needs %v", b, d.Name, d.LocalRopeTheta)
	}
	return nil
}

// layerType is layer i's attention in transformers' layer_types.
func layerType(d arch.Desc, i int) string {
	if (i+1)%d.SlidingWindowPattern == 0 {
		return "full_attention"
	}
	return "sliding_attention"
}
