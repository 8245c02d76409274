package tokenizer

import "github.com/umad-dev/umad/arch"

// Train learns a tokenizer of the registry's family t from corpus with up to merges BPE
// merges (SentencePiece style for such a family), adds the family's special tokens and pads
// the vocabulary to size with [PADn] tokens (0 keeps the natural size). The same arguments
// give the same tokenizer. Its end of turn is its EOS, so that llama.cpp need not guess it
// from the texts.
func Train(corpus string, merges int, t arch.Tokenizer, size int) (*HF, error) {
	fam := family{t}
	v := trainBPE(corpus, merges)
	specials := fam.specials()
	if fam.SPM {
		v, specials = spmFromBPE(v, specials), nil
	}
	if err := v.addSpecials(specials, size); err != nil {
		return nil, err
	}
	ids, err := fam.ids(v)
	if err != nil {
		return nil, err
	}
	return &HF{voc: v, fam: fam, BOS: ids.bos, EOS: ids.eos, EOT: ids.eos, PAD: ids.pad, AddBOS: fam.AddBOS}, nil
}
