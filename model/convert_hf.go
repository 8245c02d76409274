package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/jsonfile"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/tokenizer"
)

// DefaultShardBytes is the size above which GGUFToHF shards the weights, as transformers'
// save_pretrained does by default.
const DefaultShardBytes = 5_000_000_000

// GGUFToHFOptions configures GGUFToHF.
type GGUFToHFOptions struct {
	// DType of the safetensors weights; "" keeps the type of the GGUF's token embedding
	// (vectors that GGUF keeps in F32 are narrowed to it, exactly when they came from it).
	DType safetensors.DType
	// ShardBytes is the largest single model.safetensors; above it the weights are sharded
	// with an index. 0 means DefaultShardBytes.
	ShardBytes int64
	// Progress, if set, is called before each tensor is written.
	Progress func(done, total int, name string)
}

// GGUFToHF converts an F32, F16 or BF16 GGUF file of a supported architecture to a Hugging
// Face directory: config.json, generation_config.json, model.safetensors (or shards and an
// index), tokenizer.json and tokenizer_config.json with the chat template.
func GGUFToHF(path, dir string, opt GGUFToHFOptions) error {
	if err := ggufToHF(path, dir, opt); err != nil {
		return fmt.Errorf("convert %s to hugging face: %w", path, err)
	}
	return nil
}

func ggufToHF(path, dir string, opt GGUFToHFOptions) error {
	g, err := gguf.OpenGGUF(path)
	if err != nil {
		return err
	}
	defer g.Close()
	s, err := ggufShape(g)
	if err != nil {
		return err
	}
	layout := s.Tensors()
	dtype, err := hfDType(g, layout, opt.DType)
	if err != nil {
		return err
	}
	if err := checkGGUFTensors(g, layout, s); err != nil {
		return err
	}
	tok, err := tokenizer.FromGGUF(g)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	named := make([]safetensors.NamedTensor, len(layout))
	var total int64
	for i, t := range layout {
		named[i] = safetensors.NamedTensor{Name: t.Name, DType: dtype, Shape: t.Shape, Write: reporting(opt.Progress, i, len(layout), t.Name, ggufTensorWriter(g, t, dtype))}
		n, err := safetensors.TensorBytes(t.Shape, dtype.Size())
		if err != nil {
			return err
		}
		total += n
	}
	shard := opt.ShardBytes
	if shard <= 0 {
		shard = DefaultShardBytes
	}
	meta := map[string]string{"format": "pt"}
	if total > shard {
		err = safetensors.WriteSharded(dir, named, meta, shard)
	} else {
		err = safetensors.Write(filepath.Join(dir, safetensors.FileName), named, meta)
	}
	if err != nil {
		return err
	}
	return writeHFTokenizerAndConfig(dir, s, tok, dtype)
}

// ReadGGUFShape reads the shape of a GGUF model from its metadata.
func ReadGGUFShape(path string) (Shape, error) {
	g, err := gguf.OpenGGUF(path)
	if err != nil {
		return Shape{}, err
	}
	defer g.Close()
	s, err := ggufShape(g)
	if err != nil {
		return Shape{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ggufShape reads the architecture's hyperparameters under llama.cpp's key names.
func ggufShape(g *gguf.GGUF) (Shape, error) {
	name, err := g.String("general.architecture")
	if err != nil {
		return Shape{}, err
	}
	d, ok := arch.OfGGUF(name)
	if !ok {
		return Shape{}, fmt.Errorf("architecture %q is not supported; supported: %s", name, strings.Join(SupportedArchitectures(), ", "))
	}
	if mt, err := g.String(modelTypeKey); err == nil {
		if d, ok = arch.OfModelType(mt); !ok || d.GGUFArch() != name {
			return Shape{}, fmt.Errorf("%s %q is not an architecture llama.cpp runs as %s", modelTypeKey, mt, name)
		}
	}
	s := Shape{Arch: Arch(d.Name), RopeTheta: 10000} // llama.cpp's default base
	tokens, err := g.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return Shape{}, err
	}
	s.Vocab = len(tokens)
	for _, f := range []struct {
		key      string
		v        *int
		optional bool
	}{
		{"context_length", &s.Context, false},
		{"embedding_length", &s.Hidden, false},
		{"block_count", &s.Layers, false},
		{"feed_forward_length", &s.FFN, false},
		{"attention.head_count", &s.Heads, false},
		{"attention.head_count_kv", &s.KVHeads, true},
		{"attention.key_length", &s.HeadDim, true},
		{"attention.sliding_window", &s.SlidingWindow, true},
	} {
		key := name + "." + f.key
		if _, ok := g.Lookup(key); !ok && f.optional {
			continue
		}
		u, err := g.Uint(key)
		if err != nil {
			return Shape{}, err
		}
		if u > math.MaxInt32 {
			return Shape{}, fmt.Errorf("%s = %d is out of range", key, u)
		}
		*f.v = int(u)
	}
	if s.KVHeads == 0 {
		s.KVHeads = s.Heads
	}
	if s.HeadDim == 0 && s.Heads > 0 {
		s.HeadDim = s.Hidden / s.Heads
	}
	if s.RMSEps, err = g.Float(name + ".attention.layer_norm_rms_epsilon"); err != nil {
		return Shape{}, err
	}
	if _, ok := g.Lookup(name + ".rope.freq_base"); ok {
		if s.RopeTheta, err = g.Float(name + ".rope.freq_base"); err != nil {
			return Shape{}, err
		}
	}
	// GGUF stores these floats as float32; config.json should show the decimal the
	// checkpoint had (1e-06, not 9.999999974752427e-07).
	s.RopeTheta, s.RMSEps = shortestF32(s.RopeTheta), shortestF32(s.RMSEps)
	_, hasOutput := g.Tensor("output.weight")
	s.TiedEmbeddings = !hasOutput
	_, s.QKVBias = g.Tensor("blk.0.attn_q.bias")
	if s.RopeScaling, err = ggufRopeScaling(g, s); err != nil {
		return Shape{}, err
	}
	if _, ok := g.Lookup(queryScalarKey); ok {
		if s.QueryScalar, err = g.Float(queryScalarKey); err != nil {
			return Shape{}, err
		}
	}
	if err := s.Validate(); err != nil {
		return Shape{}, err
	}
	return s, nil
}

// shortestF32 returns the float64 of the shortest decimal that reads back as the same
// float32.
func shortestF32(x float64) float64 {
	var out float64
	fmt.Sscan(fmt.Sprint(float32(x)), &out)
	return out
}

// ggufRopeScaling recovers config.json's rope_scaling: from the block HFToGGUF stores, else
// (a file made by another converter) Llama 3's published parameters, accepted only if they
// reproduce the file's rope_freqs exactly.
func ggufRopeScaling(g *gguf.GGUF, s Shape) (*RopeScaling, error) {
	if _, ok := g.Tensor("rope_freqs.weight"); !ok {
		return nil, nil
	}
	stored, err := g.ReadTensorF32("rope_freqs.weight")
	if err != nil {
		return nil, err
	}
	var rs RopeScaling
	if raw, err := g.String(ropeScalingKey); err == nil {
		if err := json.Unmarshal([]byte(raw), &rs); err != nil {
			return nil, fmt.Errorf("%s: %w", ropeScalingKey, err)
		}
	} else {
		rs = RopeScaling{RopeType: "llama3", Factor: float64(slices.Max(stored)), LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
	}
	s.RopeScaling = &rs
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if !slices.Equal(s.llama3RopeFactors(), stored) {
		return nil, fmt.Errorf("rope_freqs.weight does not match llama3 rope scaling %+v; cannot recover config.json's rope_scaling", rs)
	}
	return &rs, nil
}

// hfDType picks the output dtype and checks that every tensor converts to it.
func hfDType(g *gguf.GGUF, layout []TensorSpec, want safetensors.DType) (safetensors.DType, error) {
	if len(g.Tensors) == 0 {
		return "", errors.New("the file has no tensors (a vocabulary-only GGUF?)")
	}
	for _, t := range g.Tensors {
		if t.Type != gguf.TypeF32 && t.Type != gguf.TypeF16 && t.Type != gguf.TypeBF16 {
			return "", fmt.Errorf("tensor %q is %v: only F32, F16 and BF16 files convert back (quantised weights cannot be restored)", t.Name, t.Type)
		}
	}
	if want != "" {
		if _, err := want.GGMLType(); err != nil {
			return "", err
		}
		return want, nil
	}
	emb, ok := g.Tensor(layout[0].GGUFName)
	if !ok {
		return "", fmt.Errorf("tensor %q is missing", layout[0].GGUFName)
	}
	return map[gguf.GGMLType]safetensors.DType{gguf.TypeF32: safetensors.F32, gguf.TypeF16: safetensors.F16, gguf.TypeBF16: safetensors.BF16}[emb.Type], nil
}

func checkGGUFTensors(g *gguf.GGUF, layout []TensorSpec, s Shape) error {
	want := map[string]bool{"rope_freqs.weight": s.RopeScaling != nil}
	for _, t := range layout {
		want[t.GGUFName] = true
		info, ok := g.Tensor(t.GGUFName)
		if !ok {
			return fmt.Errorf("tensor %q is missing", t.GGUFName)
		}
		if !slices.Equal(info.Dims, ggmlDims(t.Shape)) {
			return fmt.Errorf("tensor %q has dims %v, the metadata implies %v", t.GGUFName, info.Dims, ggmlDims(t.Shape))
		}
	}
	for _, t := range g.Tensors {
		if !want[t.Name] {
			return fmt.Errorf("tensor %q is not part of a %s model", t.Name, s.Arch)
		}
	}
	return nil
}

func ggufTensorWriter(g *gguf.GGUF, t TensorSpec, dtype safetensors.DType) gguf.WriteFunc {
	return func(w io.Writer) error {
		info, _ := g.Tensor(t.GGUFName) // checked by checkGGUFTensors
		dst, err := dtype.GGMLType()
		if err != nil {
			return err
		}
		r := g.TensorData(info)
		if t.offset != 0 || t.scale != 0 {
			return shiftVector(w, r, info.Type, dst, t, false)
		}
		return convertRows(w, r, info.Type, dst, t.Shape, t.PermuteHeads, deinterleaveRows)
	}
}

// writeHFTokenizerAndConfig writes the JSON files of the HF directory.
func writeHFTokenizerAndConfig(dir string, s Shape, tok *tokenizer.HF, dtype safetensors.DType) error {
	cfg := hfConfigOf(s, tok)
	cfg.TorchDType = map[safetensors.DType]string{safetensors.F32: "float32", safetensors.F16: "float16", safetensors.BF16: "bfloat16"}[dtype]
	if tok.BOS < 0 {
		cfg.BOSTokenID = nil
	}
	gen := map[string]any{}
	if tok.BOS >= 0 {
		gen["bos_token_id"] = tok.BOS
	}
	// Generation stops at EOS and at the chat end-of-turn token.
	eos := TokenIDs{}
	for _, id := range []int{tok.EOS, tok.EOT} {
		if id >= 0 && !slices.Contains(eos, id) {
			eos = append(eos, id)
		}
	}
	cfg.EOSTokenID = eos
	gen["eos_token_id"] = eos
	if tok.PAD >= 0 {
		gen["pad_token_id"] = tok.PAD
	}
	for _, f := range []struct {
		name string
		v    any
	}{
		{"config.json", cfg},
		{"generation_config.json", gen},
	} {
		if err := jsonfile.Write(filepath.Join(dir, f.name), f.v); err != nil {
			return err
		}
	}
	return tok.WriteHF(dir, s.Context)
}
