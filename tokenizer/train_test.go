package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/umad-dev/umad/arch"
)

// Any text, in any script, encodes with a trained vocabulary and decodes back byte for byte,
// and common words of the corpus are single tokens.
func TestTrainRoundTrip(t *testing.T) {
	d, _ := arch.Lookup("qwen2")
	corpus := strings.Repeat("What is 12 + 7? We add the numbers: the answer is \\boxed{19}. Check the other answer.\n", 20)
	tok, err := Train(corpus, 360, d.Tokenizer, 0)
	if err != nil {
		t.Fatal(err)
	}
	toks, merges := tok.voc.tokens, tok.voc.merges
	rank := map[string]int{}
	for i, m := range merges {
		rank[m] = i
	}
	index := map[string]int{}
	for i, text := range toks {
		index[text] = i
	}
	unbyte := map[rune]byte{}
	for b, r := range byteRunes {
		unbyte[r] = byte(b)
	}
	encode := func(text string) []int {
		var ids []int
		for _, word := range splitWords(text) {
			var parts []string
			for _, r := range byteLevel(word) {
				parts = append(parts, string(r))
			}
			for { // apply the lowest-ranked merge until none applies
				best, at := len(merges), -1
				for i := 0; i+1 < len(parts); i++ {
					if r, ok := rank[parts[i]+" "+parts[i+1]]; ok && r < best {
						best, at = r, i
					}
				}
				if at < 0 {
					break
				}
				parts = slices.Replace(parts, at, at+2, parts[at]+parts[at+1])
			}
			for _, p := range parts {
				id, ok := index[p]
				if !ok {
					t.Fatalf("merge result %q is not a token", p)
				}
				ids = append(ids, id)
			}
		}
		return ids
	}
	decode := func(ids []int) string {
		var out []byte
		for _, id := range ids {
			for _, r := range toks[id] {
				out = append(out, unbyte[r])
			}
		}
		return string(out)
	}
	for _, text := range []string{
		"What is 12 + 7? The answer is \\boxed{19}.",
		"Ünïcödé, 中文, emoji 🤖🧮, tabs\tand\r\nnewlines  ",
		"\x00\x01\x7f control bytes",
		strings.Repeat("the answer ", 20),
	} {
		ids := encode(text)
		if got := decode(ids); got != text {
			t.Errorf("round trip of %q gave %q", text, got)
		}
		if utf8.ValidString(text) && len(ids) > len(text) {
			t.Errorf("%q took %d tokens for %d bytes", text, len(ids), len(text))
		}
	}
	if ids := encode(" answer"); len(ids) != 1 {
		t.Errorf(`" answer" is %d tokens, want 1`, len(ids))
	}
}
