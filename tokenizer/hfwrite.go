package tokenizer

// The Hugging Face files of a tokenizer (tokenizer.json and tokenizer_config.json), which
// the tiny models and GGUF -> HF conversion write.

import (
	"path/filepath"
	"strconv"

	"github.com/umad-dev/umad/internal/jsonfile"
)

// WriteHF writes dir/tokenizer.json and dir/tokenizer_config.json, whose model_max_length is
// maxLength. The [PADn] tokens that only fill the embedding are left out, as in the
// checkpoints they came from.
func (t *HF) WriteHF(dir string, maxLength int) error {
	v := *t.voc
	n := len(v.tokens)
	for n > 0 && v.types[n-1] == tokenUnused {
		n--
	}
	v.tokens, v.types = v.tokens[:n], v.types[:n]
	tc := hfTokenizerConfig(&v, t.fam, maxLength, t.ChatTemplate)
	for key, id := range map[string]int{"eos_token": t.EOS, "pad_token": t.PAD} {
		if id < 0 {
			tc[key] = nil
		}
	}
	if err := jsonfile.Write(filepath.Join(dir, "tokenizer.json"), hfTokenizerJSON(&v, t.fam, t.specialIDs())); err != nil {
		return err
	}
	return jsonfile.Write(filepath.Join(dir, "tokenizer_config.json"), tc)
}

// hfAddedToken is an entry of tokenizer.json's added_tokens.
type hfAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

func addedTokens(v *vocab) []hfAddedToken {
	var out []hfAddedToken
	for id, typ := range v.types {
		if typ != tokenNormal && typ != tokenByte {
			out = append(out, hfAddedToken{ID: id, Content: v.tokens[id], Special: typ == tokenControl || typ == tokenUnknown})
		}
	}
	return out
}

func byteLevelStep(addPrefixSpace, trimOffsets, useRegex bool) map[string]any {
	return map[string]any{"type": "ByteLevel", "add_prefix_space": addPrefixSpace, "trim_offsets": trimOffsets, "use_regex": useRegex}
}

// bosTemplate is the post-processor step that prepends BOS.
func bosTemplate(bos string, id int) map[string]any {
	return map[string]any{
		"type": "TemplateProcessing",
		"single": []any{
			map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 0}},
			map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
		},
		"pair": []any{
			map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 0}},
			map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
			map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 1}},
			map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}},
		},
		"special_tokens": map[string]any{bos: map[string]any{"id": bos, "ids": []int{id}, "tokens": []string{bos}}},
	}
}

// hfTokenizerJSON describes the same tokenizer as the GGUF keys in Hugging Face tokenizers'
// format: a byte-level BPE model, the family's split regex, and the added tokens.
func hfTokenizerJSON(v *vocab, fam family, ids specialIDs) map[string]any {
	vocabMap := map[string]int{}
	for id, typ := range v.types {
		if typ == tokenNormal {
			vocabMap[v.tokens[id]] = id
		}
	}
	var post any = byteLevelStep(false, false, false)
	if fam.SPM {
		return spmTokenizerJSON(v, ids, fam.Unk)
	}
	if fam.AddBOS {
		post = map[string]any{"type": "Sequence", "processors": []any{
			byteLevelStep(true, false, true),
			bosTemplate(v.tokens[ids.bos], ids.bos),
		}}
	}
	return map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": addedTokens(v),
		"normalizer":   nil, // none, so that any text round-trips byte for byte
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": fam.Split}, "behavior": "Isolated", "invert": false},
			byteLevelStep(false, false, false),
		}},
		"post_processor": post,
		"decoder":        byteLevelStep(false, false, false),
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
			"ignore_merges": fam.IgnoreMerges, "vocab": vocabMap, "merges": v.merges,
		},
	}
}

func hfTokenizerConfig(v *vocab, fam family, maxLength int, tmpl string) map[string]any {
	decoder := map[string]any{}
	var extra []string
	for _, t := range addedTokens(v) {
		decoder[strconv.Itoa(t.ID)] = map[string]any{
			"content": t.Content, "lstrip": false, "normalized": false, "rstrip": false,
			"single_word": false, "special": t.Special,
		}
		if t.Special && t.Content != fam.BOS && t.Content != fam.EOS && t.Content != fam.PAD {
			extra = append(extra, t.Content)
		}
	}
	var bos, unk any // Qwen has no BOS token to add; only SentencePiece has an unknown token
	if fam.AddBOS {
		bos = fam.BOS
	}
	if fam.Unk != "" {
		unk = fam.Unk
	}
	c := map[string]any{
		"add_bos_token":                fam.AddBOS,
		"add_eos_token":                false,
		"added_tokens_decoder":         decoder,
		"additional_special_tokens":    extra,
		"bos_token":                    bos,
		"eos_token":                    fam.EOS,
		"pad_token":                    fam.PAD,
		"unk_token":                    unk,
		"clean_up_tokenization_spaces": fam.CleanSpaces,
		"errors":                       "replace",
		"model_max_length":             maxLength,
		"split_special_tokens":         false,
		"tokenizer_class":              "PreTrainedTokenizerFast",
	}
	if tmpl != "" {
		c["chat_template"] = tmpl
	}
	return c
}
