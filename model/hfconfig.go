package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	HiddenAct             string       `json:"hidden_act"`
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
	return &c, nil
}

// Shape returns the model shape the config describes, checked for consistency.
func (c *HFConfig) Shape() (Shape, error) {
	arch := Arch(c.ModelType)
	d, ok := arch.desc()
	if !ok {
		return Shape{}, fmt.Errorf("hf config: unsupported model_type %q", c.ModelType)
	}
	if c.VocabSize > MaxVocab {
		return Shape{}, fmt.Errorf("hf config: vocab_size %d is more than the %d tokens umad supports", c.VocabSize, MaxVocab)
	}
	s := Shape{
		Arch:           arch,
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
	if err := s.Validate(); err != nil {
		return Shape{}, fmt.Errorf("hf config: %w", err)
	}
	return s, nil
}
