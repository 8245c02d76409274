package model

import "encoding/json"

// llama_ftype values for general.file_type: what most of the file's matrices are.
var fileTypeOf = map[GGMLType]uint32{TypeF32: 0, TypeF16: 1, TypeQ8_0: 7, TypeBF16: 32}

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
func ggufMetadata(s Shape, tok *HFTokenizer, typ GGMLType, name string) ([]KV, error) {
	a := s.Arch.GGUF()
	kvs := []KV{
		{"general.architecture", a},
		{"general.name", name},
		{"general.file_type", fileTypeOf[typ]},
		{"general.quantization_version", uint32(2)},
		{a + ".vocab_size", uint32(s.Vocab)},
		{a + ".context_length", uint32(s.Context)},
		{a + ".embedding_length", uint32(s.Hidden)},
		{a + ".block_count", uint32(s.Layers)},
		{a + ".feed_forward_length", uint32(s.FFN)},
		{a + ".attention.head_count", uint32(s.Heads)},
		{a + ".attention.head_count_kv", uint32(s.KVHeads)},
		{a + ".rope.freq_base", float32(s.RopeTheta)},
		{a + ".attention.layer_norm_rms_epsilon", float32(s.RMSEps)},
	}
	if s.HeadDim*s.Heads != s.Hidden { // llama.cpp assumes hidden/heads otherwise
		kvs = append(kvs, KV{a + ".attention.key_length", uint32(s.HeadDim)}, KV{a + ".attention.value_length", uint32(s.HeadDim)})
	}
	if s.SlidingWindow > 0 {
		kvs = append(kvs, KV{a + ".attention.sliding_window", uint32(s.SlidingWindow)})
	}
	if d, _ := s.Arch.desc(); d.GGUFRopeDims {
		kvs = append(kvs, KV{a + ".rope.dimension_count", uint32(s.HeadDim)})
	}
	if s.RopeScaling != nil {
		b, err := json.Marshal(s.RopeScaling)
		if err != nil {
			return nil, err
		}
		kvs = append(kvs, KV{ropeScalingKey, string(b)})
	}
	if s.QueryScalar != 0 {
		kvs = append(kvs, KV{queryScalarKey, s.QueryScalar})
	}
	if d, _ := s.Arch.desc(); d.GGUF != "" {
		kvs = append(kvs, KV{modelTypeKey, d.HFModelType()})
	}
	kvs = append(kvs, vocabKVs(tok.voc, tok.fam)...)
	for _, id := range []struct {
		key string
		id  int
	}{
		{"tokenizer.ggml.bos_token_id", tok.BOS},
		{"tokenizer.ggml.eos_token_id", tok.EOS},
		{"tokenizer.ggml.eot_token_id", tok.EOT},
		{"tokenizer.ggml.padding_token_id", tok.PAD},
	} {
		if id.id >= 0 {
			kvs = append(kvs, KV{id.key, uint32(id.id)})
		}
	}
	kvs = append(kvs, KV{"tokenizer.ggml.add_bos_token", tok.AddBOS}, KV{"tokenizer.ggml.add_eos_token", false})
	if tok.ChatTemplate != "" {
		kvs = append(kvs, KV{"tokenizer.chat_template", tok.ChatTemplate})
	}
	return kvs, nil
}

// vocabKVs are the GGUF keys of a vocabulary: byte-level BPE with its merges, or
// SentencePiece with its scores and unknown token.
func vocabKVs(v *vocab, fam family) []KV {
	kvs := []KV{{"tokenizer.ggml.pre", fam.Pre}, {"tokenizer.ggml.tokens", v.tokens}, {"tokenizer.ggml.token_type", v.types}}
	if !fam.SPM {
		return append([]KV{{"tokenizer.ggml.model", "gpt2"}}, append(kvs, KV{"tokenizer.ggml.merges", v.merges})...)
	}
	kvs = append([]KV{{"tokenizer.ggml.model", "llama"}}, append(kvs, KV{"tokenizer.ggml.scores", spmScores(v)})...)
	if id := v.id(fam.Unk); id >= 0 {
		kvs = append(kvs, KV{"tokenizer.ggml.unknown_token_id", uint32(id)})
	}
	return append(kvs, KV{"tokenizer.ggml.add_space_prefix", false})
}

// addKVs adds the metadata to w in order.
func addKVs(w *GGUFWriter, kvs []KV) error {
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	return nil
}
