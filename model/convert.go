package model

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/tokenizer"
)

// convertChunkBytes is how much of a tensor is converted at a time: large enough for disk
// speed, small enough that memory does not grow with the model.
const convertChunkBytes = 4 << 20

// HFToGGUFOptions configures HFToGGUF.
type HFToGGUFOptions struct {
	// Type is the type of the weight matrices: TypeF32 (the zero value), TypeF16, TypeBF16 or
	// TypeQ8_0. Vectors (norms, biases) stay F32, as llama.cpp expects.
	Type gguf.GGMLType
	// Progress, if set, is called before each tensor is written.
	Progress func(done, total int, name string)
	// Name is general.name; "" takes the directory's base name (a hub snapshot's is its
	// commit, so the caller passes the repository's name).
	Name string
}

// SupportedArchitectures lists the config.json model_type values that convert.
func SupportedArchitectures() []string {
	var out []string
	for _, d := range arch.All {
		out = append(out, d.HFModelType())
	}
	return slices.Sorted(slices.Values(out))
}

// HFToGGUF converts a Hugging Face checkpoint directory (config.json, safetensors, tokenizer
// files) to one GGUF file that llama.cpp loads with no further settings. Tensors are
// streamed a few megabytes at a time.
func HFToGGUF(dir, out string, opt HFToGGUFOptions) error {
	if err := hfToGGUF(dir, out, opt); err != nil {
		return fmt.Errorf("convert %s to gguf: %w", dir, err)
	}
	return nil
}

func hfToGGUF(dir, out string, opt HFToGGUFOptions) error {
	if _, ok := fileTypeOf[opt.Type]; !ok {
		return fmt.Errorf("output type %v is not supported (want F32, F16, BF16 or Q8_0)", opt.Type)
	}
	cfg, err := LoadHFConfig(dir)
	if err != nil {
		return err
	}
	if _, ok := arch.OfModelType(cfg.ModelType); !ok {
		return fmt.Errorf("architecture %q (config.json model_type) is not supported; supported: %s",
			cfg.ModelType, strings.Join(SupportedArchitectures(), ", "))
	}
	s, tok, err := shapeAndTokenizer(dir, cfg)
	if err != nil {
		return err
	}
	st, err := safetensors.Open(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	wm, err := NewWeightMap(s, opt.Type)
	if err != nil {
		return err
	}
	if err := CheckHFTensors(st, wm, s); err != nil {
		return err
	}
	w, err := gguf.CreateGGUF(out)
	if err != nil {
		return err
	}
	name := opt.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	kvs, err := ggufMetadata(s, tok, opt.Type, name)
	if err != nil {
		return err
	}
	if err := addKVs(w, kvs); err != nil {
		return err
	}
	for i, name := range wm.HFNames() {
		shape, _ := st.Shape(name)
		to, err := wm.Target(name, shape)
		if err != nil {
			return err
		}
		write := reporting(opt.Progress, i, len(wm.layout), to.Name, hfTensorWriter(st, wm, name))
		if err := w.AddTensorFunc(to.Name, to.Type, to.Dims, write); err != nil {
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

// shapeAndTokenizer is the shape of the checkpoint in dir (whose config.json is cfg) and
// its tokenizer, fitted to the config: what every GGUF written from it needs.
func shapeAndTokenizer(dir string, cfg *HFConfig) (Shape, *tokenizer.HF, error) {
	s, err := cfg.Shape()
	if err != nil {
		return Shape{}, nil, err
	}
	tok, err := tokenizer.LoadHF(dir)
	if err != nil {
		return Shape{}, nil, err
	}
	return s, tok, fitConfig(tok, cfg, s.Vocab)
}

// fitConfig checks tokenizer t against config.json, pads it with unused tokens to the
// embedding's row count, and takes BOS/EOS from config.json where the tokenizer config
// names none (Qwen's bos_token is null, yet llama.cpp's Qwen files carry its id).
func fitConfig(t *tokenizer.HF, cfg *HFConfig, vocabSize int) error {
	if t.Len() > vocabSize {
		return fmt.Errorf("the tokenizer has %d tokens but config.json vocab_size is %d", t.Len(), vocabSize)
	}
	t.Pad(vocabSize)
	if t.BOS < 0 && cfg.BOSTokenID != nil {
		t.BOS = *cfg.BOSTokenID
	}
	if t.EOS < 0 && len(cfg.EOSTokenID) > 0 {
		t.EOS = cfg.EOSTokenID[0]
	}
	for _, id := range []int{t.BOS, t.EOS} {
		if id >= vocabSize {
			return fmt.Errorf("special token id %d is outside the vocabulary of %d", id, vocabSize)
		}
	}
	return nil
}

// CheckHFTensors requires every tensor the architecture needs, with its shape and a float
// dtype, and refuses tensors the conversion would silently drop.
func CheckHFTensors(st *safetensors.File, wm *WeightMap, s Shape) error {
	for _, t := range wm.layout {
		shape, ok := st.Shape(t.Name)
		if !ok {
			return fmt.Errorf("safetensors: tensor %q is missing", t.Name)
		}
		if !slices.Equal(shape, t.Shape) {
			return fmt.Errorf("safetensors: tensor %q has shape %v, config.json implies %v", t.Name, shape, t.Shape)
		}
		dtype, _ := st.DType(t.Name)
		if _, err := dtype.GGMLType(); err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
		}
	}
	for _, name := range st.Names() {
		if _, ok := wm.byHF[name]; !ok && !wm.Ignored(name) {
			return fmt.Errorf("safetensors: tensor %q is not part of a %s model", name, s.Arch)
		}
	}
	return nil
}

// matrixType is the GGUF type of a tensor: vectors stay F32; a Q8_0 matrix whose rows are
// not whole 32-value blocks falls back to F16.
func matrixType(want gguf.GGMLType, shape []int64) gguf.GGMLType {
	if len(shape) < 2 {
		return gguf.TypeF32
	}
	if want == gguf.TypeQ8_0 && shape[len(shape)-1]%gguf.Q8BlockSize != 0 {
		return gguf.TypeF16
	}
	return want
}

// hfTensorWriter streams one safetensors tensor into the GGUF through the weight map.
func hfTensorWriter(st *safetensors.File, wm *WeightMap, name string) gguf.WriteFunc {
	return func(w io.Writer) error {
		dtype, _ := st.DType(name)
		src, err := dtype.GGMLType()
		if err != nil {
			return err
		}
		r, err := st.Reader(name)
		if err != nil {
			return err
		}
		return wm.Convert(w, name, src, r)
	}
}

// reporting calls progress, if set, before write.
func reporting(progress func(done, total int, name string), i, n int, name string, write gguf.WriteFunc) gguf.WriteFunc {
	if progress == nil {
		return write
	}
	return func(w io.Writer) error {
		progress(i, n, name)
		return write(w)
	}
}

// convertRows copies a row-major tensor of the given PyTorch shape from r (type src) to w
// (type dst), a block of rows at a time. With heads > 0 every block is one head's rows,
// reordered by permute.
func convertRows(w io.Writer, r io.Reader, src, dst gguf.GGMLType, shape []int64, heads int, permute func(dst, src []byte, rows, rowBytes int64)) error {
	rows, cols := int64(1), int64(1)
	if len(shape) > 0 {
		rows = shape[0]
		for _, d := range shape[1:] {
			cols *= d
		}
	}
	srcElem, _ := gguf.TensorBytes(src, []int64{1}) // F32, F16 or BF16: one element per block
	rowBytes := cols * srcElem
	block := max(1, convertChunkBytes/rowBytes)
	if heads > 0 {
		if rows%int64(heads) != 0 || (rows/int64(heads))%2 != 0 {
			return fmt.Errorf("%d rows do not split into %d heads of even size", rows, heads)
		}
		block = rows / int64(heads)
	}
	buf := make([]byte, min(block, rows)*rowBytes)
	var perm []byte
	if heads > 0 {
		perm = make([]byte, len(buf))
	}
	for done := int64(0); done < rows; done += block {
		chunk := buf[:min(block, rows-done)*rowBytes]
		if _, err := io.ReadFull(r, chunk); err != nil {
			return fmt.Errorf("read rows %d..: %w", done, err)
		}
		if heads > 0 {
			permute(perm, chunk, block, rowBytes)
			chunk = perm
		}
		if src != dst {
			var err error
			if chunk, err = convertParallel(src, dst, chunk, rowBytes); err != nil {
				return err
			}
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

// convertParallel converts whole rows of raw from src to dst on every core: type
// conversion, not the disk, is what limits F16 and Q8_0 output.
func convertParallel(src, dst gguf.GGMLType, raw []byte, rowBytes int64) ([]byte, error) {
	rows := int64(len(raw)) / rowBytes
	workers := min(int64(runtime.GOMAXPROCS(0)), rows)
	parts := make([][]byte, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := rows*w/workers*rowBytes, rows*(w+1)/workers*rowBytes
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals, err := gguf.Dequantize(src, raw[lo:hi])
			if err == nil {
				parts[w], err = gguf.EncodeTensor(dst, vals)
			}
			errs[w] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Concat(parts...), nil
}

// InterleaveHeads copies an F32 matrix of the given PyTorch shape from r to w with the rows of
// each of its heads in llama.cpp's rotary order, as the converter writes Llama's q/k weights
// (and a LoRA B, whose rows are its weight's).
func InterleaveHeads(w io.Writer, r io.Reader, shape []int64, heads int) error {
	return convertRows(w, r, gguf.TypeF32, gguf.TypeF32, shape, heads, interleaveRows)
}

// interleaveRows reorders one head's rows from Hugging Face's rotate-half layout, where
// rotary pairs are rows (j, j+d/2), to llama.cpp's, where they are (2j, 2j+1):
// dst row 2j+i = src row i*d/2+j.
func interleaveRows(dst, src []byte, d, rowBytes int64) {
	half := d / 2
	for i := range int64(2) {
		for j := range half {
			copy(dst[(2*j+i)*rowBytes:(2*j+i+1)*rowBytes], src[(i*half+j)*rowBytes:(i*half+j+1)*rowBytes])
		}
	}
}

// deinterleaveRows is interleaveRows' inverse: dst row i*d/2+j = src row 2j+i.
func deinterleaveRows(dst, src []byte, d, rowBytes int64) {
	half := d / 2
	for i := range int64(2) {
		for j := range half {
			copy(dst[(i*half+j)*rowBytes:(i*half+j+1)*rowBytes], src[(2*j+i)*rowBytes:(2*j+i+1)*rowBytes])
		}
	}
}
