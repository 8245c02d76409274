package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/jsonfile"
	"github.com/umad-dev/umad/safetensors"
)

// TinyOptions configures WriteTiny.
type TinyOptions struct {
	Arch         string // an arch.Names() entry; may be empty when Shape names it
	Shape        *Shape // nil: DefaultShape(Arch)
	Seed         uint64
	ChatTemplate string // Jinja template written to both tokenizers; empty writes none
	VocabSize    int    // pad the vocabulary with [PADn] tokens to this size; 0: natural size
	// Tokenizer, when set, replaces the generated tokenizer with a real one (LoadHFTokenizer);
	// the vocabulary size and, unless ChatTemplate is given, the chat template come from it.
	Tokenizer *HFTokenizer
}

// tinyMerges is how many BPE merges the tiny tokenizer learns; with 256 byte tokens and the
// specials it gives a vocabulary of a few hundred tokens.
const tinyMerges = 360

// Weight initialisation: projections ~ N(0, 0.02²); norm weights ~ 1 + N(0, 0.05²) so that a
// norm that is skipped or applied twice shows in the outputs.
const (
	weightStd = 0.02
	normStd   = 0.05
)

// WriteTiny writes a random-weight model twice with identical weights: dir/model.gguf for
// llama.cpp and dir/hf/ (config.json, model.safetensors, tokenizer.json,
// tokenizer_config.json, generation_config.json) for Hugging Face-style loaders. The same
// options and seed give byte-identical files. They are built beside dir and renamed into
// it, so an interrupted write leaves dir as it was; dir's other files stay.
func WriteTiny(dir string, opt TinyOptions) error {
	if err := atomicfile.WriteInto(dir, func(tmp string) error { return writeTiny(tmp, opt) }); err != nil {
		return fmt.Errorf("write tiny model to %s: %w", dir, err)
	}
	return nil
}

func writeTiny(dir string, opt TinyOptions) error {
	s, err := tinyShape(opt)
	if err != nil {
		return err
	}
	if opt.VocabSize < 0 || opt.VocabSize > MaxVocab {
		return fmt.Errorf("vocabulary size %d must be 0 (the tokenizer's own) or at most %d", opt.VocabSize, MaxVocab)
	}
	if err := tinyFitsMachine(dir, s, tinyVocabSize(s, opt)); err != nil {
		return err
	}
	var voc *vocab
	fam := familyOf(s.Arch)
	if t := opt.Tokenizer; t != nil {
		if opt.VocabSize != 0 && opt.VocabSize != t.Len() {
			return fmt.Errorf("vocabulary size %d given, the tokenizer has %d", opt.VocabSize, t.Len())
		}
		voc, fam = t.voc, t.fam
		if opt.ChatTemplate == "" {
			opt.ChatTemplate = t.ChatTemplate
		}
	} else {
		voc = trainBPE(tinyCorpus(), tinyMerges)
		specials := fam.specials()
		if fam.SPM {
			voc, specials = spmFromBPE(voc, specials), nil
		}
		size := opt.VocabSize
		if size == 0 {
			size = s.Vocab
		}
		if err := voc.addSpecials(specials, size); err != nil {
			return err
		}
	}
	s.Vocab = len(voc.tokens)
	if err := s.Validate(); err != nil {
		return err
	}
	var ids specialIDs
	if t := opt.Tokenizer; t != nil {
		// A real tokenizer may lack a BOS (Qwen) or a pad token (Llama 3); their configs
		// then use <|endoftext|> and the EOS, which is what these fallbacks give.
		ids = specialIDs{bos: t.BOS, eos: t.EOS, pad: t.PAD}
		if ids.eos < 0 {
			return errors.New("the tokenizer has no EOS token")
		}
		if ids.pad < 0 {
			ids.pad = ids.eos
		}
		if ids.bos < 0 {
			ids.bos = ids.pad
		}
	} else if ids, err = fam.ids(voc); err != nil {
		return err
	}
	tensors := tinyTensors(s, opt.Seed)
	hfDir := filepath.Join(dir, "hf")
	if err := os.MkdirAll(hfDir, 0o755); err != nil {
		return err
	}
	// The end of turn is pinned to EOS so that llama.cpp need not guess it from the texts.
	tok := &HFTokenizer{voc: voc, fam: fam, BOS: ids.bos, EOS: ids.eos, EOT: ids.eos, PAD: ids.pad,
		AddBOS: fam.AddBOS, ChatTemplate: opt.ChatTemplate}
	if err := writeTinyGGUF(filepath.Join(dir, "model.gguf"), s, tok, tensors); err != nil {
		return err
	}
	named := make([]safetensors.NamedTensor, len(tensors))
	for i, t := range tensors {
		named[i] = safetensors.NamedTensor{Name: t.Name, DType: safetensors.F32, Shape: t.Shape, Write: t.writer(false)}
	}
	if err := safetensors.Write(filepath.Join(hfDir, "model.safetensors"), named, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	if err := jsonfile.Write(filepath.Join(hfDir, "config.json"), hfConfigOf(s, ids)); err != nil {
		return err
	}
	if err := jsonfile.Write(filepath.Join(hfDir, "generation_config.json"), map[string]any{
		"bos_token_id": ids.bos, "eos_token_id": ids.eos, "pad_token_id": ids.pad,
	}); err != nil {
		return err
	}
	if err := jsonfile.Write(filepath.Join(hfDir, "tokenizer.json"), hfTokenizerJSON(voc, fam, ids)); err != nil {
		return err
	}
	return jsonfile.Write(filepath.Join(hfDir, "tokenizer_config.json"), hfTokenizerConfig(voc, fam, s, opt.ChatTemplate))
}

func tinyShape(opt TinyOptions) (Shape, error) {
	if opt.Shape == nil {
		return DefaultShape(Arch(opt.Arch))
	}
	s := *opt.Shape
	if s.Arch == "" {
		s.Arch = Arch(opt.Arch)
	} else if opt.Arch != "" && Arch(opt.Arch) != s.Arch {
		return Shape{}, fmt.Errorf("arch %q and shape arch %q disagree", opt.Arch, s.Arch)
	}
	if s.RopeScaling != nil {
		rs := *s.RopeScaling
		s.RopeScaling = &rs // the caller's struct stays theirs
	}
	return s, nil
}

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

// familyOf is the tokenizer family of architecture a (a supported one: the shape was
// validated).
func familyOf(a Arch) family {
	d, _ := a.desc()
	return family{d.Tokenizer}
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

// tinyTensor is one weight of a tiny model. Its values come from an RNG seeded by (seed, HF
// name), so both files get the same numbers without holding the model in memory.
type tinyTensor struct {
	TensorSpec
	seed uint64
}

func tinyTensors(s Shape, seed uint64) []tinyTensor {
	var ts []tinyTensor
	for _, t := range s.Tensors() {
		h := fnv.New64a()
		h.Write([]byte(t.Name))
		ts = append(ts, tinyTensor{t, seed ^ h.Sum64()})
	}
	return ts
}

// writer streams the tensor as little-endian F32, as HF holds it or, with gguf, as the GGUF
// does: each head's rows in llama.cpp's order, norms with their offset.
func (t tinyTensor) writer(gguf bool) gguf.WriteFunc {
	return func(w io.Writer) error {
		rng := rand.New(rand.NewPCG(t.seed, t.seed>>1|1))
		rows := t.Shape[0]
		cols := int64(1)
		for _, d := range t.Shape[1:] {
			cols *= d
		}
		blockRows := max(1, (1<<16)/cols)
		permute := gguf && t.PermuteHeads > 0
		shift := float32(0)
		if gguf {
			shift = t.offset
		}
		if permute {
			blockRows = rows / int64(t.PermuteHeads) // one head at a time
		}
		vals := make([]float32, blockRows*cols)
		buf := make([]byte, 4*len(vals))
		for r := int64(0); r < rows; r += blockRows {
			n := min(blockRows, rows-r) * cols
			for i := range vals[:n] {
				if t.norm { // a scale of about 1 either way
					vals[i] = float32(1+normStd*rng.NormFloat64()) - t.offset + shift
					if gguf && t.scale != 0 {
						vals[i] *= t.scale
					}
				} else {
					vals[i] = float32(weightStd * rng.NormFloat64())
				}
			}
			out := vals[:n]
			if permute {
				out = interleaveHead(vals, blockRows, cols)
			}
			for i, v := range out {
				binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
			}
			if _, err := w.Write(buf[:4*n]); err != nil {
				return err
			}
		}
		return nil
	}
}

// interleaveHead reorders one head's rows from HF's layout, where rotary pairs are (j, j+d/2),
// to llama.cpp's, where they are (2j, 2j+1): new row 2j+i = old row i*d/2+j. This is the
// GGUF converter's reshape(2, d/2) -> swap axes -> reshape.
func interleaveHead(head []float32, d, cols int64) []float32 {
	out := make([]float32, d*cols)
	half := d / 2
	for i := range int64(2) {
		for j := range half {
			copy(out[(2*j+i)*cols:(2*j+i+1)*cols], head[(i*half+j)*cols:(i*half+j+1)*cols])
		}
	}
	return out
}

func writeTinyGGUF(path string, s Shape, tok *HFTokenizer, tensors []tinyTensor) error {
	w, err := gguf.CreateGGUF(path)
	if err != nil {
		return err
	}
	kvs, err := ggufMetadata(s, tok, gguf.TypeF32, "umad-tiny-"+string(s.Arch))
	if err != nil {
		return err
	}
	if err := addKVs(w, kvs); err != nil {
		return err
	}
	for i, t := range tensors {
		if err := w.AddTensorFunc(t.GGUFName, gguf.TypeF32, ggmlDims(t.Shape), t.writer(true)); err != nil {
			return err
		}
		if i == 0 {
			if err := addRopeFreqs(w, s); err != nil {
				return err
			}
		}
	}
	return w.Close()
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

func hfConfigOf(s Shape, ids specialIDs) HFConfig {
	c := HFConfig{
		VocabSize:             s.Vocab,
		HiddenSize:            s.Hidden,
		IntermediateSize:      s.FFN,
		NumHiddenLayers:       s.Layers,
		NumAttentionHeads:     s.Heads,
		NumKeyValueHeads:      s.KVHeads,
		MaxPositionEmbeddings: s.Context,
		RMSNormEps:            s.RMSEps,
		RopeTheta:             s.RopeTheta,
		RopeScaling:           s.RopeScaling,
		TieWordEmbeddings:     s.TiedEmbeddings,
		BOSTokenID:            &ids.bos,
		EOSTokenID:            TokenIDs{ids.eos},
		TorchDType:            "float32",
	}
	d, _ := s.Arch.desc()
	c.ModelType, c.Architectures, c.HiddenAct = d.HFModelType(), []string{d.HFClass}, d.Activation
	if d.SlidingWindowPattern > 0 {
		c.HiddenAct, c.HiddenActivation = "", d.Activation
		c.SlidingWindow, c.SlidingWindowPattern = &s.SlidingWindow, d.SlidingWindowPattern
		q := s.QueryScalar
		if q == 0 {
			q = float64(s.HeadDim)
		}
		c.RopeLocalBaseFreq, c.QueryPreAttnScalar = d.LocalRopeTheta, &q
		for i := range s.Layers {
			c.LayerTypes = append(c.LayerTypes, layerType(d, i))
		}
	}
	if d.ConfigHeadDim {
		noBias := false
		c.HeadDim, c.AttentionBias = s.HeadDim, &noBias
	}
	return c
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

func hfTokenizerConfig(v *vocab, fam family, s Shape, tmpl string) map[string]any {
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
		"model_max_length":             s.Context,
		"split_special_tokens":         false,
		"tokenizer_class":              "PreTrainedTokenizerFast",
	}
	if tmpl != "" {
		c["chat_template"] = tmpl
	}
	return c
}
