package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SentencePiece-style BPE (Gemma): pieces are UTF-8 text with spaces spelled "▁", bytes
// that no piece covers fall back to the <0xXX> tokens, and merges go by piece score, as
// llama.cpp's SPM tokenizer ("llama" in tokenizer.ggml.model) and Hugging Face's BPE with
// byte_fallback both run it.

// llama_token_type's UNKNOWN and BYTE (the <0xXX> fallback tokens).
const (
	tokenUnknown int32 = 2
	tokenByte    int32 = 6
)

// spmSpace stands for a space inside pieces.
const spmSpace = "▁"

// spmByteToken is the fallback token of byte b.
func spmByteToken(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

// spmFromBPE turns a byte-level BPE vocabulary (trainBPE's) into a SentencePiece one: the
// specials, the 256 byte tokens, the printable ASCII characters and "▁", then every merged
// token that is whole UTF-8 text, in merge order. Its merges are derived from the scores
// (spmMerges), as transformers' converter derives a SentencePiece model's.
func spmFromBPE(bpe *vocab, specials []specialToken) *vocab {
	v := &vocab{}
	for _, s := range specials {
		v.tokens, v.types = append(v.tokens, s.text), append(v.types, s.typ)
	}
	for b := range 256 {
		v.tokens, v.types = append(v.tokens, spmByteToken(byte(b))), append(v.types, tokenByte)
	}
	seen := map[string]bool{}
	add := func(piece string) {
		if !seen[piece] {
			seen[piece] = true
			v.tokens, v.types = append(v.tokens, piece), append(v.types, tokenNormal)
		}
	}
	add(spmSpace)
	for c := byte('!'); c <= '~'; c++ {
		add(string(c))
	}
	unRune := map[rune]byte{}
	for b, r := range byteRunes {
		unRune[r] = byte(b)
	}
	for _, m := range bpe.merges {
		var raw []byte
		for _, r := range strings.Replace(m, " ", "", 1) {
			raw = append(raw, unRune[r])
		}
		if utf8.Valid(raw) {
			add(strings.ReplaceAll(string(raw), " ", spmSpace))
		}
	}
	v.merges = spmMerges(v, spmScores(v))
	return v
}

// spmScores scores the pieces of a SentencePiece vocabulary: 0 for single characters, bytes
// and specials, and for longer pieces -1, -2, ... in vocabulary order, so that earlier
// pieces merge first.
func spmScores(v *vocab) []float32 {
	scores := make([]float32, len(v.tokens))
	n := float32(0)
	for id, t := range v.tokens {
		if v.types[id] == tokenNormal && utf8.RuneCountInString(t) > 1 {
			n--
			scores[id] = n
		}
	}
	return scores
}

// spmMerges are the merges of a SentencePiece vocabulary: every split of a normal piece into
// two normal pieces, the pieces by descending score and each piece's splits by the ids of its
// halves, as transformers' SentencePieceExtractor orders them.
func spmMerges(v *vocab, scores []float32) []string {
	index := map[string]int{}
	for id, t := range v.tokens {
		if v.types[id] == tokenNormal {
			index[t] = id
		}
	}
	type merge struct {
		score float32
		a, b  int
	}
	var ms []merge
	for id, t := range v.tokens {
		if v.types[id] != tokenNormal {
			continue
		}
		for i := range t {
			if i == 0 {
				continue
			}
			a, okA := index[t[:i]]
			b, okB := index[t[i:]]
			if okA && okB {
				ms = append(ms, merge{scores[id], a, b})
			}
		}
	}
	slices.SortStableFunc(ms, func(x, y merge) int {
		switch {
		case x.score != y.score:
			if x.score > y.score {
				return -1
			}
			return 1
		case x.a != y.a:
			return x.a - y.a
		}
		return x.b - y.b
	})
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = v.tokens[m.a] + " " + v.tokens[m.b]
	}
	return out
}

// spmTokenizerJSON is tokenizer.json of a SentencePiece-style BPE (Gemma's layout): spaces
// become "▁" in the normalizer, no pre-tokenizer, byte fallback, and a BOS prepended.
func spmTokenizerJSON(v *vocab, ids specialIDs, unk string) map[string]any {
	vocabMap := map[string]int{}
	for id, typ := range v.types {
		if typ == tokenNormal || typ == tokenByte {
			vocabMap[v.tokens[id]] = id
		}
	}
	bos := v.tokens[ids.bos]
	return map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   addedTokens(v),
		"normalizer":     map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": spmSpace},
		"pre_tokenizer":  nil,
		"post_processor": bosTemplate(bos, ids.bos),
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": spmSpace}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
		}},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": unk, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true,
			"ignore_merges": false, "vocab": vocabMap, "merges": v.merges,
		},
	}
}

// spmFamily is the family of a tokenizer.json whose BPE falls back to bytes: SentencePiece
// style, which needs no pre-tokenizer (spaces are "▁" in the pieces). Of the SentencePiece
// families it is the first whose end of turn is an added token, else the first.
func spmFamily(tj *hfTokenizerFile) (family, error) {
	if len(tj.PreTokenizer) > 0 && string(tj.PreTokenizer) != "null" {
		return family{}, errors.New("tokenizer.json: a byte-fallback BPE with a pre-tokenizer is not supported")
	}
	// Mistral's and Llama 2's prepend a space to the text (llama.cpp's add_space_prefix),
	// which the GGUFs and tokenizer.json files umad writes do not state.
	if bytes.Contains(tj.Normalizer, []byte(`"Prepend"`)) {
		return family{}, errors.New("tokenizer.json: a SentencePiece tokenizer that prepends a space is not supported")
	}
	var spm []family
	for _, f := range families() {
		if f.SPM {
			spm = append(spm, f)
		}
	}
	if len(spm) == 0 {
		return family{}, errors.New("no SentencePiece family")
	}
	added := map[string]bool{}
	for _, a := range tj.AddedTokens {
		added[a.Content] = true
	}
	f := spm[0]
	for _, g := range spm {
		if added[g.EOS] {
			f = g
			break
		}
	}
	if tj.Model.UnkToken != nil {
		f.Unk = *tj.Model.UnkToken
	}
	return f, nil
}

// markByteTokens gives the <0xXX> pieces llama.cpp's BYTE type, by which it falls back to them.
func markByteTokens(v *vocab) {
	for id, t := range v.tokens {
		if v.types[id] == tokenNormal && len(t) == 6 && strings.HasPrefix(t, "<0x") && t[5] == '>' {
			if _, err := strconv.ParseUint(t[3:5], 16, 8); err == nil {
				v.types[id] = tokenByte
			}
		}
	}
}
