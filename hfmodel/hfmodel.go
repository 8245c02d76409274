// Package hfmodel moves Hugging Face checkpoints in and out of the libtorch plugin: Load
// reads config.json and safetensors into a plugin model, Save writes the same layout back
// (plus the AdamW state of a trainable model), so a trained agent loads in other tools.
// A LoRA model saves as a PEFT adapter directory (lora.go). It is pure Go above cgo/torch.
package hfmodel

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/safetensors"
)

// OptimizerFile is the side file of a checkpoint holding AdamW moments and counters.
const OptimizerFile = "optimizer.safetensors"

// Model is a plugin model loaded from a Hugging Face directory, with that directory's
// config.json and tokenizer files as read at load time: Save writes them back even when
// the directory is gone by then (a checkpoint resumed from and since pruned).
type Model struct {
	*torch.Model
	// side holds config.json and the tokenizer files, verbatim: keys the model package does
	// not model survive the round trip.
	side map[string][]byte
	// base is the absolute directory of the base weights: a LoRA checkpoint names it.
	base string
	// context is max_position_embeddings (0: unknown): longer sequences are refused, as
	// llama.cpp refuses them past n_ctx_train.
	context int
}

// LogProbs is the plugin's LogProbs, refusing a sequence longer than the model's context.
func (m *Model) LogProbs(prompts, responses [][]int32, temperature float64) (logp, ent [][]float32, err error) {
	if err := m.checkContext(prompts, responses); err != nil {
		return nil, nil, err
	}
	return m.Model.LogProbs(prompts, responses, temperature)
}

// BaseLogProbs is the plugin's BaseLogProbs, refusing a sequence longer than the context.
func (m *Model) BaseLogProbs(prompts, responses [][]int32, temperature float64) (logp, ent [][]float32, err error) {
	if err := m.checkContext(prompts, responses); err != nil {
		return nil, nil, err
	}
	return m.Model.BaseLogProbs(prompts, responses, temperature)
}

// checkContext refuses a prompt and response longer than max_position_embeddings, with
// llama.cpp's words: both scorers agree on what a model can score.
func (m *Model) checkContext(prompts, responses [][]int32) error {
	if m.context <= 0 {
		return nil
	}
	for i := range min(len(prompts), len(responses)) {
		if n := len(prompts[i]) + len(responses[i]); n > m.context {
			return fmt.Errorf("%d tokens are more than the model's context of %d", n, m.context)
		}
	}
	return nil
}

// pluginConfig converts the model package's architecture description.
func pluginConfig(s model.Shape) (torch.Config, error) {
	d, err := arch.Lookup(string(s.Arch))
	if err != nil {
		return torch.Config{}, fmt.Errorf("the torch plugin: %w", err)
	}
	act, err := torch.ActivationNamed(d.Activation)
	if err != nil {
		return torch.Config{}, fmt.Errorf("%s: %w", d.Name, err)
	}
	c := torch.Config{
		QKNorm: d.QKNorm, EmbedScale: d.EmbedScale, SlidingWindow: s.SlidingWindow, VocabSize: s.Vocab, HiddenSize: s.Hidden, IntermediateSize: s.FFN, NumLayers: s.Layers,
		NumHeads: s.Heads, NumKVHeads: s.KVHeads, HeadDim: s.HeadDim, RopeTheta: s.RopeTheta,
		RMSNormEps: s.RMSEps, TieEmbeddings: s.TiedEmbeddings, AttentionBias: s.QKVBias, QueryScalar: s.QueryScalar,
		Activation: act, NormOffset: d.NormOffset, SandwichNorm: d.SandwichNorm,
	}
	if s.SlidingWindow > 0 {
		c.SlidingWindowPattern, c.RopeLocalTheta = d.SlidingWindowPattern, d.LocalRopeTheta
	}
	if r := s.RopeScaling; r != nil {
		c.RopeScaling = &torch.Llama3RopeScaling{Factor: r.Factor, LowFreqFactor: r.LowFreqFactor,
			HighFreqFactor: r.HighFreqFactor, OriginalMaxPositions: r.OriginalMaxPositionEmbeddings}
	}
	return c, nil
}

var stDTypes = map[safetensors.DType]torch.DType{safetensors.F32: torch.Float32, safetensors.F64: torch.Float64,
	safetensors.BF16: torch.BFloat16, safetensors.F16: torch.Float16}

// ignoredTensor reports tensors HF checkpoints may carry that the model derives itself.
func ignoredTensor(name string, cfg torch.Config) bool {
	return strings.HasSuffix(name, ".rotary_emb.inv_freq") || (cfg.TieEmbeddings && name == "lm_head.weight")
}

// Load loads a Hugging Face model directory (config.json and one or sharded safetensors
// files). A trainable model also restores optimizer.safetensors when the directory has one
// (a checkpoint written by Save).
//
// With opts.LoRA.Rank > 0 the model gets fresh adapters on a frozen base, kept in bf16 when
// opts.LoRA.BaseBF16 says so or when the checkpoint's weights are all bf16 anyway (exact). A
// PEFT adapter directory (adapter_config.json) loads onto the base directory it names, with
// its adapters and optimizer state (see loadAdapter).
func Load(rt *torch.Runtime, dir string, opts torch.ModelOptions) (*Model, error) {
	if _, err := os.Stat(filepath.Join(dir, peft.ConfigFile)); err == nil {
		return loadAdapter(rt, dir, opts)
	}
	return load(rt, dir, opts, nil, dir)
}

// load loads the base in dir, sets the adapter's tensors when there is one, and restores
// the optimizer state found in directory state (dir itself, a LoRA checkpoint, or "": none).
func load(rt *torch.Runtime, dir string, opts torch.ModelOptions, adapter *peft.LoRAAdapter, state string) (*Model, error) {
	hf, err := model.LoadHFConfig(dir)
	if err != nil {
		return nil, err
	}
	shape, err := hf.Shape()
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	cfg, err := pluginConfig(shape)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	st, err := safetensors.Open(dir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if opts.LoRA.Rank > 0 && allBF16(st) {
		opts.LoRA.BaseBF16 = true // lossless, and half the memory of fp32
	}
	if adapter != nil {
		if err := adapter.CheckBase(shape); err != nil {
			return nil, fmt.Errorf("load an adapter onto %s: %w", dir, err)
		}
	}
	tm, err := rt.NewModel(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	m := &Model{Model: tm, context: shape.Context}
	if m.base, err = filepath.Abs(dir); err != nil {
		m.Free()
		return nil, err
	}
	if m.side, err = model.ReadFiles(dir, append([]string{"config.json"}, model.TokenizerFiles...)); err != nil {
		m.Free()
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	if err := loadTensors(m.Model, dir, st, adapter); err != nil {
		m.Free()
		return nil, err
	}
	if opts.Trainable && state != "" {
		if err := loadOptimizer(m.Model, filepath.Join(state, OptimizerFile)); err != nil {
			m.Free()
			return nil, err
		}
	}
	return m, nil
}

// allBF16 reports whether every tensor of a checkpoint is stored in bf16 (from the
// headers alone).
func allBF16(st *safetensors.File) bool {
	for _, name := range st.Names() {
		if dt, _ := st.DType(name); dt != safetensors.BF16 {
			return false
		}
	}
	return len(st.Names()) > 0
}

// BF16Checkpoint reports whether every tensor of the checkpoint in dir is bf16: a LoRA run
// then keeps its frozen base in bf16 (Load decides the same way).
func BF16Checkpoint(dir string) (bool, error) {
	st, err := safetensors.Open(dir)
	if err != nil {
		return false, err
	}
	defer st.Close()
	return allBF16(st), nil
}

// Clone copies the current weights into a new model (see torch.Model.Clone) that saves
// with m's config.json and tokenizer files.
func (m *Model) Clone(opts torch.ModelOptions) (*Model, error) {
	c, err := m.Model.Clone(opts)
	if err != nil {
		return nil, err
	}
	return &Model{Model: c, side: m.side, base: m.base}, nil
}

func loadTensors(m *torch.Model, dir string, st *safetensors.File, adapter *peft.LoRAAdapter) error {
	infos, err := m.Tensors()
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, ti := range infos {
		want[ti.Name] = true
	}
	cfg := m.Config()
	for _, name := range st.Names() {
		if !want[name] && !ignoredTensor(name, cfg) {
			return fmt.Errorf("load %s: unexpected tensor %s for a %d-layer model of this architecture", dir, name, cfg.NumLayers)
		}
	}
	for _, ti := range infos {
		if ti.Adapter {
			if adapter != nil {
				if err := setAdapterTensor(m, ti, adapter); err != nil {
					return fmt.Errorf("load %s: %w", dir, err)
				}
			}
			continue // a fresh adapter keeps its seeded initialisation
		}
		v, err := st.Tensor(ti.Name)
		if err != nil {
			return fmt.Errorf("load %s: missing or unreadable tensor %s: %w", dir, ti.Name, err)
		}
		dt, ok := stDTypes[v.DType]
		if !ok {
			return fmt.Errorf("load %s: tensor %s has dtype %s; want F32, F64, BF16 or F16", dir, ti.Name, v.DType)
		}
		if err := m.SetTensor(ti.Name, dt, v.Shape, v.Data); err != nil {
			return fmt.Errorf("load %s: %w", dir, err)
		}
	}
	if err := m.Finalize(); err != nil {
		return fmt.Errorf("load %s: %w", dir, err)
	}
	return nil
}

func loadOptimizer(m *torch.Model, path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	step, err1 := strconv.ParseInt(st.Metadata["step"], 10, 64)
	skipped, err2 := strconv.ParseInt(st.Metadata["skipped_total"], 10, 64)
	st.Close()
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("load %s: step counters: %w", path, err)
	}
	err = EachMoment(m, path, func(ti torch.TensorInfo, kind torch.Kind, v safetensors.TensorView) error {
		if err := writeRaw(m, ti, kind, v); err != nil {
			return fmt.Errorf("load %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return m.SetOptimizerState(step, skipped)
}

// EachMoment calls f with each AdamW moment m trains from the optimizer state at path, in
// m's tensor order (exp_avg, then exp_avg_sq, of each tensor), checked against m's shapes;
// the view is only valid during the call.
func EachMoment(m *torch.Model, path string, f func(ti torch.TensorInfo, kind torch.Kind, v safetensors.TensorView) error) error {
	st, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer st.Close()
	infos, err := m.Tensors()
	if err != nil {
		return err
	}
	for _, ti := range infos {
		if !m.Trainable(ti) {
			continue
		}
		for _, k := range moments {
			v, err := st.Tensor(k.prefix + ti.Name)
			if err != nil {
				return fmt.Errorf("load %s: %w", path, err)
			}
			if fmt.Sprint(v.Shape) != fmt.Sprint(ti.Shape) {
				return fmt.Errorf("load %s: tensor %s has shape %v, expected %v", path, v.Name, v.Shape, ti.Shape)
			}
			if err := f(ti, k.kind, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// Moments are the kinds of AdamW state a trained tensor has, in EachMoment's order.
func Moments() []torch.Kind { return []torch.Kind{moments[0].kind, moments[1].kind} }

// moments are the AdamW tensors of optimizer.safetensors, each parameter's under its name
// with a prefix.
var moments = []struct {
	prefix string
	kind   torch.Kind
}{{"exp_avg.", torch.ExpAvg}, {"exp_avg_sq.", torch.ExpAvgSq}}

func writeRaw(m *torch.Model, ti torch.TensorInfo, kind torch.Kind, v safetensors.TensorView) error {
	switch v.DType {
	case safetensors.F32:
		return torch.Write(m, ti.Name, kind, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(v.Data))), len(v.Data)/4))
	case safetensors.F64:
		return torch.Write(m, ti.Name, kind, unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(v.Data))), len(v.Data)/8))
	}
	return fmt.Errorf("tensor %s has dtype %s; want F32 or F64", v.Name, v.DType)
}

// readTensor reads one tensor as the little-endian bytes of the model's parameter dtype, so
// a saved checkpoint reloads bit-exactly.
func readTensor(m *torch.Model, ti torch.TensorInfo, kind torch.Kind) (safetensors.TensorView, error) {
	n := 1
	for _, d := range ti.Shape {
		n *= int(d)
	}
	var raw []byte
	dt := safetensors.F32
	if m.Options().DType == torch.Float64 {
		buf := make([]float64, n)
		if err := torch.Read(m, ti.Name, kind, buf); err != nil {
			return safetensors.TensorView{}, err
		}
		raw, dt = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), 8*n), safetensors.F64
	} else {
		buf := make([]float32, n)
		if err := torch.Read(m, ti.Name, kind, buf); err != nil {
			return safetensors.TensorView{}, err
		}
		raw = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), 4*n)
	}
	return safetensors.TensorView{Name: ti.Name, DType: dt, Shape: ti.Shape, Data: raw}, nil
}

// exported is one tensor ready for safetensors.Write, read from the plugin when it is
// written: exporting a large model holds one tensor at a time.
func exported(m *torch.Model, ti torch.TensorInfo, kind torch.Kind) safetensors.NamedTensor {
	dt := safetensors.F32
	if m.Options().DType == torch.Float64 {
		dt = safetensors.F64
	}
	return safetensors.NamedTensor{Name: ti.Name, DType: dt, Shape: ti.Shape, Write: func(w io.Writer) error {
		v, err := readTensor(m, ti, kind)
		if err != nil {
			return err
		}
		_, err = w.Write(v.Data)
		return err
	}}
}

// weightTensors are the tensors of the plain model m's weights make, and the kind to read
// them as: a LoRA model gives its merged weights, W + alpha/r B A (its base weights alone
// when base is set), and no adapters, a model that llama.cpp and other tools load.
func weightTensors(m *torch.Model, base bool) ([]torch.TensorInfo, torch.Kind, error) {
	infos, err := m.Tensors()
	if err != nil {
		return nil, 0, err
	}
	kind := torch.Weight
	if m.Options().LoRA.Rank > 0 && !base {
		kind = torch.Merged
	}
	var out []torch.TensorInfo
	for _, ti := range infos {
		if !ti.Adapter {
			out = append(out, ti)
		}
	}
	return out, kind, nil
}

// Weights copies the current weights (see weightTensors) out of the plugin, in checkpoint
// order, as raw tensors: what an in-place weight sync reads.
func Weights(m *torch.Model) ([]safetensors.TensorView, error) {
	infos, kind, err := weightTensors(m, false)
	if err != nil {
		return nil, err
	}
	out := make([]safetensors.TensorView, 0, len(infos))
	for _, ti := range infos {
		v, err := readTensor(m, ti, kind)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Export describes the current weights (see weightTensors) in checkpoint order, ready for
// safetensors.Write (or a GGUF writer); each tensor is read when written.
func Export(m *torch.Model) ([]safetensors.NamedTensor, error) {
	return export(m, false)
}

// ExportBase is Export of a LoRA model's frozen base, adapters left out, as the plugin holds
// it (bf16-rounded with trainspec.LoRA.BaseBF16): the weights llama.cpp runs under a LoRA
// adapter GGUF, so that both sides compute with the same base. Without LoRA it is Export.
func ExportBase(m *torch.Model) ([]safetensors.NamedTensor, error) {
	return export(m, true)
}

func export(m *torch.Model, base bool) ([]safetensors.NamedTensor, error) {
	infos, kind, err := weightTensors(m, base)
	if err != nil {
		return nil, err
	}
	out := make([]safetensors.NamedTensor, 0, len(infos))
	for _, ti := range infos {
		out = append(out, exported(m, ti, kind))
	}
	return out, nil
}

// Save writes an HF-compatible checkpoint: config.json, model.safetensors, the tokenizer
// files the model was loaded with and, for a trainable model, optimizer.safetensors. A
// LoRA model writes its adapters in PEFT's layout instead of model.safetensors (the base is
// named, not copied), and only their optimizer state. The directory appears complete or not
// at all: everything is written to a sibling temporary directory that then replaces dir.
func (m *Model) Save(dir string) error {
	return m.save(dir, m.Options().LoRA.Rank > 0, m.Options().Trainable)
}

// SaveMerged writes the merged weights (see Export) as a plain HF checkpoint: config.json,
// model.safetensors and the tokenizer, no optimizer state.
func (m *Model) SaveMerged(dir string) error {
	return m.save(dir, false, false)
}

func (m *Model) save(dir string, adapters, optimizer bool) error {
	if m.side["config.json"] == nil {
		return fmt.Errorf("save %s: model was not made by hfmodel.Load, so it has no config.json", dir)
	}
	return atomicfile.WriteDir(dir, func(tmp string) error {
		if err := m.WriteSideFiles(tmp); err != nil {
			return fmt.Errorf("save %s: %w", dir, err)
		}
		if adapters {
			if err := m.writeAdapter(tmp); err != nil {
				return fmt.Errorf("save %s: %w", dir, err)
			}
		} else {
			weights, err := Export(m.Model)
			if err != nil {
				return fmt.Errorf("save %s: %w", dir, err)
			}
			if err := safetensors.Write(filepath.Join(tmp, "model.safetensors"), weights, map[string]string{"format": "pt"}); err != nil {
				return err
			}
		}
		if optimizer {
			if err := saveOptimizer(m.Model, filepath.Join(tmp, OptimizerFile)); err != nil {
				return fmt.Errorf("save %s: %w", dir, err)
			}
		}
		return nil
	})
}

// WriteSideFiles writes config.json and the tokenizer files the model was loaded with into
// dir: with the weights, a directory that converts to GGUF and loads in other tools.
func (m *Model) WriteSideFiles(dir string) error {
	return model.WriteFiles(dir, m.side)
}

func saveOptimizer(m *torch.Model, path string) error {
	infos, err := m.Tensors()
	if err != nil {
		return err
	}
	var ts []safetensors.NamedTensor
	for _, k := range moments {
		for _, ti := range infos {
			if !m.Trainable(ti) {
				continue
			}
			t := exported(m, ti, k.kind)
			t.Name = k.prefix + ti.Name
			ts = append(ts, t)
		}
	}
	step, skipped, err := m.OptimizerState()
	if err != nil {
		return err
	}
	return safetensors.Write(path, ts, map[string]string{
		"step": strconv.FormatInt(step, 10), "skipped_total": strconv.FormatInt(skipped, 10)})
}
