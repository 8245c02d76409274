package model

import (
	"encoding/json"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/tokenizer"
)

// llama_ftype values for general.file_type: what most of the file's matrices are.
var fileTypeOf = map[gguf.GGMLType]uint32{gguf.TypeF32: 0, gguf.TypeF16: 1, gguf.TypeQ8_0: 7, gguf.TypeBF16: 32}

// ropeScalingKey keeps config.json's rope_scaling block in a converted GGUF. llama.cpp
// applies Llama 3 scaling through the rope_freqs tensor, from which the block's parameters
// cannot be recovered exactly; llama.cpp ignores keys outside its namespaces.
const ropeScalingKey = "umad.hf.rope_scaling"

// queryScalarKey keeps Gemma 3's query_pre_attn_scalar where it is not head_dim: llama.cpp
// has no key for it, and the GGUF folds it into the q-norm weights (Shape.queryNormScale),
// from which the reader takes it back out.
const queryScalarKey = "umad.hf.query_pre_attn_scalar"

// modelTypeKey keeps config.json's model_type of an architecture that llama.cpp runs as
// another (arch.Desc.GGUF), so that the GGUF converts back to it.
const modelTypeKey = "umad.hf.model_type"

// ggufMetadata is the metadata llama.cpp reads for a model of shape s with tokenizer tok,
// its matrices of type typ: the one writer of converted (HFToGGUF), vocabulary-only
// (WriteVocabGGUF) and tiny (WriteTiny) models' keys.
func ggufMetadata(s Shape, tok *tokenizer.HF, typ gguf.GGMLType, name string) ([]gguf.KV, error) {
	a := s.Arch.GGUF()
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: a},
		{Key: "general.name", Value: name},
		{Key: "general.file_type", Value: fileTypeOf[typ]},
		{Key: "general.quantization_version", Value: uint32(2)},
		{Key: a + ".vocab_size", Value: uint32(s.Vocab)},
		{Key: a + ".context_length", Value: uint32(s.Context)},
		{Key: a + ".embedding_length", Value: uint32(s.Hidden)},
		{Key: a + ".block_count", Value: uint32(s.Layers)},
		{Key: a + ".feed_forward_length", Value: uint32(s.FFN)},
		{Key: a + ".attention.head_count", Value: uint32(s.Heads)},
		{Key: a + ".attention.head_count_kv", Value: uint32(s.KVHeads)},
		{Key: a + ".rope.freq_base", Value: float32(s.RopeTheta)},
		{Key: a + ".attention.layer_norm_rms_epsilon", Value: float32(s.RMSEps)},
	}
	if s.HeadDim*s.Heads != s.Hidden { // llama.cpp assumes hidden/heads otherwise
		kvs = append(kvs, gguf.KV{Key: a + ".attention.key_length", Value: uint32(s.HeadDim)}, gguf.KV{Key: a + ".attention.value_length", Value: uint32(s.HeadDim)})
	}
	if s.SlidingWindow > 0 {
		kvs = append(kvs, gguf.KV{Key: a + ".attention.sliding_window", Value: uint32(s.SlidingWindow)})
	}
	if d, _ := s.Arch.desc(); d.GGUFRopeDims {
		kvs = append(kvs, gguf.KV{Key: a + ".rope.dimension_count", Value: uint32(s.HeadDim)})
	}
	if s.RopeScaling != nil {
		b, err := json.Marshal(s.RopeScaling)
		if err != nil {
			return nil, err
		}
		kvs = append(kvs, gguf.KV{Key: ropeScalingKey, Value: string(b)})
	}
	if s.QueryScalar != 0 {
		kvs = append(kvs, gguf.KV{Key: queryScalarKey, Value: s.QueryScalar})
	}
	if d, _ := s.Arch.desc(); d.GGUF != "" {
		kvs = append(kvs, gguf.KV{Key: modelTypeKey, Value: d.HFModelType()})
	}
	return append(kvs, tok.GGUFKeys()...), nil
}

// addKVs adds the metadata to w in order.
func addKVs(w *gguf.GGUFWriter, kvs []gguf.KV) error {
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	return nil
}

// addRopeFreqs adds the rope_freqs tensor of a shape with Llama 3 rope scaling: llama.cpp
// applies that scaling through this tensor, not through keys.
func addRopeFreqs(w *gguf.GGUFWriter, s Shape) error {
	if s.RopeScaling == nil {
		return nil
	}
	factors, err := gguf.EncodeTensor(gguf.TypeF32, s.llama3RopeFactors())
	if err != nil {
		return err
	}
	return w.AddTensor("rope_freqs.weight", gguf.TypeF32, []int64{int64(s.HeadDim / 2)}, factors)
}
