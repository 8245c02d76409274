package tokenizer

// A tokenizer as GGUF stores it: llama.cpp's tokenizer.* keys, written and read back.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/umad-dev/umad/gguf"
)

// GGUFKeys are the tokenizer's GGUF keys: its vocabulary, special token ids, BOS policy and
// chat template.
func (t *HF) GGUFKeys() []gguf.KV {
	kvs := vocabKVs(t.voc, t.fam)
	for _, id := range []struct {
		key string
		id  int
	}{
		{"tokenizer.ggml.bos_token_id", t.BOS},
		{"tokenizer.ggml.eos_token_id", t.EOS},
		{"tokenizer.ggml.eot_token_id", t.EOT},
		{"tokenizer.ggml.padding_token_id", t.PAD},
	} {
		if id.id >= 0 {
			kvs = append(kvs, gguf.KV{Key: id.key, Value: uint32(id.id)})
		}
	}
	kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: t.AddBOS}, gguf.KV{Key: "tokenizer.ggml.add_eos_token", Value: false})
	if t.ChatTemplate != "" {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template", Value: t.ChatTemplate})
	}
	return kvs
}

// vocabKVs are the GGUF keys of a vocabulary: byte-level BPE with its merges, or
// SentencePiece with its scores and unknown token.
func vocabKVs(v *vocab, fam family) []gguf.KV {
	kvs := []gguf.KV{{Key: "tokenizer.ggml.pre", Value: fam.Pre}, {Key: "tokenizer.ggml.tokens", Value: v.tokens}, {Key: "tokenizer.ggml.token_type", Value: v.types}}
	if !fam.SPM {
		return append([]gguf.KV{{Key: "tokenizer.ggml.model", Value: "gpt2"}}, append(kvs, gguf.KV{Key: "tokenizer.ggml.merges", Value: v.merges})...)
	}
	kvs = append([]gguf.KV{{Key: "tokenizer.ggml.model", Value: "llama"}}, append(kvs, gguf.KV{Key: "tokenizer.ggml.scores", Value: spmScores(v)})...)
	if id := v.id(fam.Unk); id >= 0 {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.unknown_token_id", Value: uint32(id)})
	}
	return append(kvs, gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: false})
}

// FromGGUF reads a GGUF file's tokenizer keys back into a tokenizer.
func FromGGUF(g *gguf.GGUF) (*HF, error) {
	tm, err := g.String("tokenizer.ggml.model")
	if err != nil || (tm != "gpt2" && tm != "llama") {
		return nil, fmt.Errorf("tokenizer.ggml.model is %q (%v): only byte-level BPE (gpt2) and SentencePiece (llama) tokenizers convert", tm, err)
	}
	pre, err := g.String("tokenizer.ggml.pre")
	if err != nil {
		return nil, err
	}
	var fam family
	var names []string
	for _, f := range families() {
		if f.Pre == pre && f.SPM == (tm == "llama") {
			fam = f
		}
		if !slices.Contains(names, f.Pre) {
			names = append(names, f.Pre)
		}
	}
	if fam.Pre == "" {
		return nil, fmt.Errorf("pre-tokenizer %q is not supported; supported: %s", pre, strings.Join(names, ", "))
	}
	v := &vocab{}
	if v.tokens, err = g.Strings("tokenizer.ggml.tokens"); err != nil {
		return nil, err
	}
	if !fam.SPM {
		if v.merges, err = g.Strings("tokenizer.ggml.merges"); err != nil {
			return nil, err
		}
	}
	kv, ok := g.Lookup("tokenizer.ggml.token_type")
	if !ok {
		return nil, errors.New("no tokenizer.ggml.token_type")
	}
	if v.types, ok = kv.Value.([]int32); !ok || len(v.types) != len(v.tokens) {
		return nil, fmt.Errorf("tokenizer.ggml.token_type is %T of %d, want int32 per token (%d)", kv.Value, len(v.types), len(v.tokens))
	}
	if fam.SPM {
		if err := ggufSPM(g, v, &fam); err != nil {
			return nil, err
		}
	}
	t := &HF{voc: v, fam: fam}
	for _, f := range []struct {
		key  string
		id   *int
		text *string
	}{
		{"tokenizer.ggml.bos_token_id", &t.BOS, &t.fam.BOS},
		{"tokenizer.ggml.eos_token_id", &t.EOS, &t.fam.EOS},
		{"tokenizer.ggml.eot_token_id", &t.EOT, nil},
		{"tokenizer.ggml.padding_token_id", &t.PAD, &t.fam.PAD},
	} {
		*f.id = -1
		if f.text != nil {
			*f.text = ""
		}
		if _, ok := g.Lookup(f.key); !ok {
			continue
		}
		u, err := g.Uint(f.key)
		if err != nil {
			return nil, err
		}
		if u >= uint64(len(v.tokens)) {
			return nil, fmt.Errorf("%s = %d is outside the vocabulary of %d", f.key, u, len(v.tokens))
		}
		*f.id = int(u)
		if f.text != nil {
			*f.text = v.tokens[u]
		}
	}
	if _, ok := g.Lookup("tokenizer.ggml.add_bos_token"); ok {
		if t.AddBOS, err = g.Bool("tokenizer.ggml.add_bos_token"); err != nil {
			return nil, err
		}
	}
	if t.AddBOS && t.BOS < 0 {
		return nil, errors.New("tokenizer.ggml.add_bos_token is set but there is no bos_token_id")
	}
	t.fam.AddBOS = t.AddBOS
	if _, ok := g.Lookup("tokenizer.chat_template"); ok {
		if t.ChatTemplate, err = g.String("tokenizer.chat_template"); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// ggufSPM reads what a SentencePiece vocabulary adds: its merges, derived from the scores
// as transformers derives them, and the unknown token.
func ggufSPM(g *gguf.GGUF, v *vocab, fam *family) error {
	kv, ok := g.Lookup("tokenizer.ggml.scores")
	if !ok {
		return errors.New("a SentencePiece tokenizer without tokenizer.ggml.scores")
	}
	scores, ok := kv.Value.([]float32)
	if !ok || len(scores) != len(v.tokens) {
		return fmt.Errorf("tokenizer.ggml.scores is %T, want a float32 per token (%d)", kv.Value, len(v.tokens))
	}
	v.merges = spmMerges(v, scores)
	fam.Unk = ""
	if _, ok := g.Lookup("tokenizer.ggml.unknown_token_id"); ok {
		u, err := g.Uint("tokenizer.ggml.unknown_token_id")
		if err != nil {
			return err
		}
		if u >= uint64(len(v.tokens)) {
			return fmt.Errorf("tokenizer.ggml.unknown_token_id = %d is outside the vocabulary of %d", u, len(v.tokens))
		}
		fam.Unk = v.tokens[u]
	}
	return nil
}
