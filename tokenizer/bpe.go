package tokenizer

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
)

// Token types as llama.cpp's llama_token_type numbers them.
const (
	tokenNormal      int32 = 1
	tokenControl     int32 = 3
	tokenUserDefined int32 = 4
)

// byteRunes is GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
// other 68 bytes take the code points from U+0100 on, so every byte has a visible rune.
var byteRunes = func() [256]rune {
	var m [256]rune
	next := rune(256)
	for b := range 256 {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			m[b] = rune(b)
		} else {
			m[b] = next
			next++
		}
	}
	return m
}()

// byteLevel maps raw bytes to their byte-level token string.
func byteLevel(s string) string {
	var sb strings.Builder
	for i := range len(s) {
		sb.WriteRune(byteRunes[s[i]])
	}
	return sb.String()
}

// specialToken is an added token: control tokens are only matched when the caller asks for
// special tokens; user-defined ones (Qwen3's <think>) are always matched.
type specialToken struct {
	text string
	typ  int32
}

// vocab is a byte-level BPE vocabulary: ids 0-255 are the bytes, then learned merges, then
// the special tokens, then padding.
type vocab struct {
	tokens []string // byte-level strings, by id
	types  []int32
	merges []string // "left right", by rank
}

func (v *vocab) id(text string) int {
	return slices.Index(v.tokens, text)
}

// trainBPE learns up to nMerges merges from corpus. Pair ties go to the lexically smallest
// pair, so the result depends only on the corpus.
func trainBPE(corpus string, nMerges int) *vocab {
	v := &vocab{}
	for b := range 256 {
		v.tokens = append(v.tokens, string(byteRunes[b]))
		v.types = append(v.types, tokenNormal)
	}
	counts := map[string]int{}
	for _, w := range splitWords(corpus) {
		counts[w]++
	}
	type word struct {
		ids   []int
		count int
	}
	words := make([]word, 0, len(counts))
	for _, w := range slices.Sorted(maps.Keys(counts)) {
		ids := make([]int, len(w))
		for i := range len(w) {
			ids[i] = int(w[i])
		}
		words = append(words, word{ids, counts[w]})
	}
	index := map[string]int{}
	for id, t := range v.tokens {
		index[t] = id
	}
	type pair struct{ a, b int }
	for len(v.merges) < nMerges {
		pairCounts := map[pair]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.ids); i++ {
				pairCounts[pair{w.ids[i], w.ids[i+1]}] += w.count
			}
		}
		var best pair
		bestCount := 1 // a merge must occur at least twice to be worth a token
		for p, c := range pairCounts {
			if c > bestCount || (c == bestCount && bestCount > 1 && pairLess(v, p.a, p.b, best.a, best.b)) {
				best, bestCount = p, c
			}
		}
		if bestCount < 2 {
			break
		}
		text := v.tokens[best.a] + v.tokens[best.b]
		merged, ok := index[text]
		if !ok { // two merge paths can spell the same token; keep one id per string
			merged = len(v.tokens)
			v.tokens = append(v.tokens, text)
			v.types = append(v.types, tokenNormal)
			index[text] = merged
		}
		v.merges = append(v.merges, v.tokens[best.a]+" "+v.tokens[best.b])
		for wi := range words {
			words[wi].ids = applyMerge(words[wi].ids, best.a, best.b, merged)
		}
	}
	return v
}

func pairLess(v *vocab, a1, b1, a2, b2 int) bool {
	if v.tokens[a1] != v.tokens[a2] {
		return v.tokens[a1] < v.tokens[a2]
	}
	return v.tokens[b1] < v.tokens[b2]
}

func applyMerge(ids []int, a, b, merged int) []int {
	out := ids[:0]
	for i := 0; i < len(ids); i++ {
		if i+1 < len(ids) && ids[i] == a && ids[i+1] == b {
			out = append(out, merged)
			i++
			continue
		}
		out = append(out, ids[i])
	}
	return out
}

// addSpecials appends the special tokens and pads the vocabulary to size with normal
// tokens named [PADn] (0 keeps the natural size).
func (v *vocab) addSpecials(specials []specialToken, size int) error {
	for _, s := range specials {
		v.tokens = append(v.tokens, s.text)
		v.types = append(v.types, s.typ)
	}
	if size != 0 && size < len(v.tokens) {
		return fmt.Errorf("vocab size %d is smaller than the tokenizer's %d tokens", size, len(v.tokens))
	}
	for id := len(v.tokens); id < size; id++ {
		v.tokens = append(v.tokens, fmt.Sprintf("[PAD%d]", id))
		v.types = append(v.types, tokenNormal)
	}
	return nil
}

// splitWords cuts text into pre-tokens roughly as the Qwen2 split regex does (letters with
// one leading non-letter, single digits, punctuation runs with an optional leading space,
// whitespace runs). Merges never cross these
// boundaries, so no merge joins digits, which keeps the vocabulary valid for both the Qwen2
// (one digit) and the Llama 3 (up to three digits) pre-tokenizer.
func splitWords(text string) []string {
	rs := []rune(text)
	var out []string
	isLetter := unicode.IsLetter
	isDigit := unicode.IsNumber
	isNewline := func(r rune) bool { return r == '\n' || r == '\r' }
	for i := 0; i < len(rs); {
		j := i + 1
		r := rs[i]
		switch {
		case isLetter(r) || (!isDigit(r) && !isNewline(r) && i+1 < len(rs) && isLetter(rs[i+1])):
			for j < len(rs) && isLetter(rs[j]) {
				j++
			}
		case isDigit(r):
		case unicode.IsSpace(r):
			for j < len(rs) && unicode.IsSpace(rs[j]) && !(rs[j] == ' ' && j+1 < len(rs) && !unicode.IsSpace(rs[j+1])) {
				j++
			}
		default:
			for j < len(rs) && !unicode.IsSpace(rs[j]) && !isLetter(rs[j]) && !isDigit(rs[j]) {
				j++
			}
		}
		if r == ' ' && j == i+1 && j < len(rs) && !isLetter(rs[j]) && !isDigit(rs[j]) && !unicode.IsSpace(rs[j]) {
			// " ?[^\s\p{L}\p{N}]+": a space joins the punctuation run after it
			for j < len(rs) && !unicode.IsSpace(rs[j]) && !isLetter(rs[j]) && !isDigit(rs[j]) {
				j++
			}
		}
		out = append(out, string(rs[i:j]))
		i = j
	}
	return out
}
