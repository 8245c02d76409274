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

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/jsonfile"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/tokenizer"
)

// TinyOptions configures WriteTiny.
type TinyOptions struct {
	Arch         string // an arch.Names() entry; may be empty when Shape names it
	Shape        *Shape // nil: DefaultShape(Arch)
	Seed         uint64
	ChatTemplate string // Jinja template written to both tokenizers; empty writes none
	VocabSize    int    // pad the vocabulary with [PADn] tokens to this size; 0: natural size
	// Tokenizer, when set, replaces the generated tokenizer with a real one (tokenizer.LoadHF);
	// the vocabulary size and, unless ChatTemplate is given, the chat template come from it.
	Tokenizer *tokenizer.HF
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

// RemoveTiny removes from dir what WriteTiny writes there: model.gguf and the checkpoint in
// hf/ (RemoveHFFiles); other files stay.
func RemoveTiny(dir string) error {
	if err := os.Remove(filepath.Join(dir, "model.gguf")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return RemoveHFFiles(filepath.Join(dir, "hf"))
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
	tok, err := tinyTokenizer(s, opt)
	if err != nil {
		return err
	}
	s.Vocab = tok.Len()
	if err := s.Validate(); err != nil {
		return err
	}
	tensors := tinyTensors(s, opt.Seed)
	hfDir := filepath.Join(dir, "hf")
	if err := os.MkdirAll(hfDir, 0o755); err != nil {
		return err
	}
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
	if err := jsonfile.Write(filepath.Join(hfDir, "config.json"), hfConfigOf(s, tok)); err != nil {
		return err
	}
	if err := jsonfile.Write(filepath.Join(hfDir, "generation_config.json"), map[string]any{
		"bos_token_id": tok.BOS, "eos_token_id": tok.EOS, "pad_token_id": tok.PAD,
	}); err != nil {
		return err
	}
	return tok.WriteHF(hfDir, s.Context)
}

// tinyTokenizer is the tokenizer of a tiny model of shape s: the options' real one, with its
// end of turn pinned to EOS (so that llama.cpp need not guess it from the texts), or one
// learned from the tiny corpus.
func tinyTokenizer(s Shape, opt TinyOptions) (*tokenizer.HF, error) {
	t := opt.Tokenizer
	if t == nil {
		size := opt.VocabSize
		if size == 0 {
			size = s.Vocab
		}
		d, _ := s.Arch.desc()
		tok, err := tokenizer.Train(tinyCorpus(), tinyMerges, d.Tokenizer, size)
		if err != nil {
			return nil, err
		}
		tok.ChatTemplate = opt.ChatTemplate
		return tok, nil
	}
	if opt.VocabSize != 0 && opt.VocabSize != t.Len() {
		return nil, fmt.Errorf("vocabulary size %d given, the tokenizer has %d", opt.VocabSize, t.Len())
	}
	if t.EOS < 0 {
		return nil, errors.New("the tokenizer has no EOS token")
	}
	tok := *t
	// A real tokenizer may lack a BOS (Qwen) or a pad token (Llama 3); their configs then
	// use <|endoftext|> and the EOS, which is what these fallbacks give.
	if tok.PAD < 0 {
		tok.PAD = tok.EOS
	}
	if tok.BOS < 0 {
		tok.BOS = tok.PAD
	}
	tok.EOT = tok.EOS
	if opt.ChatTemplate != "" {
		tok.ChatTemplate = opt.ChatTemplate
	}
	return &tok, nil
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

func writeTinyGGUF(path string, s Shape, tok *tokenizer.HF, tensors []tinyTensor) error {
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
