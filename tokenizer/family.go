package tokenizer

// Tokenizer families: which special tokens a tokenizer of the registry has, and their ids in
// a vocabulary.

import (
	"fmt"

	"github.com/umad-dev/umad/arch"
)

// family is a tokenizer of the registry (arch.Tokenizer) in hand: a loaded checkpoint's
// takes its special tokens' texts, BOS rule and unknown token from its own files.
type family struct{ arch.Tokenizer }

// families are the registry's tokenizers, in registry order.
func families() []family {
	var out []family
	for _, t := range arch.Tokenizers() {
		out = append(out, family{t})
	}
	return out
}

// specials are the family's special tokens: a SentencePiece one's own, and for byte-level
// BPE those of every BPE family, so that one vocabulary serves each family's chat template.
func (f family) specials() []specialToken {
	var out []specialToken
	for _, t := range families() {
		if t.SPM == f.SPM && (!f.SPM || t.Name == f.Name) {
			for _, sp := range t.Specials {
				out = append(out, specialToken{sp.Text, int32(sp.Type)})
			}
		}
	}
	return out
}

type specialIDs struct{ bos, eos, pad int }

func (f family) ids(v *vocab) (specialIDs, error) {
	var ids specialIDs
	for _, x := range []struct {
		text string
		id   *int
	}{{f.BOS, &ids.bos}, {f.EOS, &ids.eos}, {f.PAD, &ids.pad}} {
		if *x.id = v.id(x.text); *x.id < 0 {
			return ids, fmt.Errorf("special token %q is not in the vocabulary", x.text)
		}
	}
	return ids, nil
}
