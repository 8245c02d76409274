package torch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/umad-dev/umad/model"
)

// OptimizerFile is the side file of a checkpoint holding AdamW moments and counters.
const OptimizerFile = "optimizer.safetensors"

// ConfigFromShape converts the model package's architecture description.
func ConfigFromShape(s model.Shape) (Config, error) {
	c := Config{
		VocabSize: s.Vocab, HiddenSize: s.Hidden, IntermediateSize: s.FFN, NumLayers: s.Layers,
		NumHeads: s.Heads, NumKVHeads: s.KVHeads, HeadDim: s.HeadDim, RopeTheta: s.RopeTheta,
		RMSNormEps: s.RMSEps, TieEmbeddings: s.TiedEmbeddings, AttentionBias: s.QKVBias,
	}
	switch s.Arch {
	case model.ArchQwen2:
		c.Arch = ArchQwen2
	case model.ArchQwen3:
		c.Arch, c.QKNorm = ArchQwen3, true
	case model.ArchLlama:
		c.Arch = ArchLlama
	default:
		return Config{}, fmt.Errorf("architecture %q is not supported by the torch plugin", s.Arch)
	}
	if r := s.RopeScaling; r != nil {
		c.RopeScaling = &Llama3RopeScaling{Factor: r.Factor, LowFreqFactor: r.LowFreqFactor,
			HighFreqFactor: r.HighFreqFactor, OriginalMaxPositions: r.OriginalMaxPositionEmbeddings}
	}
	return c, nil
}

var stDTypes = map[model.DType]DType{model.F32: Float32, model.F64: Float64, model.BF16: BFloat16, model.F16: Float16}

// ignoredTensor reports tensors HF checkpoints may carry that the model derives itself.
func ignoredTensor(name string, cfg Config) bool {
	return strings.HasSuffix(name, ".rotary_emb.inv_freq") || (cfg.TieEmbeddings && name == "lm_head.weight")
}

// LoadHF loads a Hugging Face model directory (config.json and one or sharded safetensors
// files). A trainable model also restores optimizer.safetensors when the directory has one
// (a checkpoint written by SaveHF).
func (r *Runtime) LoadHF(dir string, opts ModelOptions) (*Model, error) {
	hf, err := model.LoadHFConfig(dir)
	if err != nil {
		return nil, err
	}
	shape, err := hf.Shape()
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	cfg, err := ConfigFromShape(shape)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	st, err := model.OpenSafetensors(dir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	m, err := r.NewModel(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	if m.hfConfig, err = os.ReadFile(filepath.Join(dir, "config.json")); err != nil {
		m.Free()
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	m.srcDir = dir
	if err := m.loadTensors(dir, st); err != nil {
		m.Free()
		return nil, err
	}
	if opts.Trainable {
		if err := m.loadOptimizer(filepath.Join(dir, OptimizerFile)); err != nil {
			m.Free()
			return nil, err
		}
	}
	return m, nil
}

func (m *Model) loadTensors(dir string, st *model.Safetensors) error {
	infos, err := m.Tensors()
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, ti := range infos {
		want[ti.Name] = true
	}
	for _, name := range st.Names() {
		if !want[name] && !ignoredTensor(name, m.cfg) {
			return fmt.Errorf("load %s: unexpected tensor %s for a %d-layer model of this architecture", dir, name, m.cfg.NumLayers)
		}
	}
	for _, ti := range infos {
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

func (m *Model) loadOptimizer(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := model.OpenSafetensors(path)
	if err != nil {
		return err
	}
	defer st.Close()
	step, err1 := strconv.ParseInt(st.Metadata["step"], 10, 64)
	skipped, err2 := strconv.ParseInt(st.Metadata["skipped_total"], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("load %s: step counters: %w", path, err)
	}
	infos, err := m.Tensors()
	if err != nil {
		return err
	}
	for _, ti := range infos {
		for _, k := range []struct {
			prefix string
			kind   Kind
		}{{"exp_avg.", ExpAvg}, {"exp_avg_sq.", ExpAvgSq}} {
			v, err := st.Tensor(k.prefix + ti.Name)
			if err != nil {
				return fmt.Errorf("load %s: %w", path, err)
			}
			if err := m.writeRaw(ti, k.kind, v); err != nil {
				return fmt.Errorf("load %s: %w", path, err)
			}
		}
	}
	return m.SetOptimizerState(step, skipped)
}

func (m *Model) writeRaw(ti TensorInfo, kind Kind, v model.TensorView) error {
	if fmt.Sprint(v.Shape) != fmt.Sprint(ti.Shape) {
		return fmt.Errorf("tensor %s has shape %v, expected %v", v.Name, v.Shape, ti.Shape)
	}
	switch v.DType {
	case model.F32:
		return Write(m, ti.Name, kind, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(v.Data))), len(v.Data)/4))
	case model.F64:
		return Write(m, ti.Name, kind, unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(v.Data))), len(v.Data)/8))
	}
	return fmt.Errorf("tensor %s has dtype %s; want F32 or F64", v.Name, v.DType)
}

// exported reads one tensor as the little-endian bytes of the model's parameter dtype, so a
// saved checkpoint reloads bit-exactly.
func (m *Model) exported(ti TensorInfo, kind Kind) (model.NamedTensor, error) {
	n := 1
	for _, d := range ti.Shape {
		n *= int(d)
	}
	var raw []byte
	dt := model.F32
	if m.opts.DType == Float64 {
		buf := make([]float64, n)
		if err := Read(m, ti.Name, kind, buf); err != nil {
			return model.NamedTensor{}, err
		}
		raw, dt = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), 8*n), model.F64
	} else {
		buf := make([]float32, n)
		if err := Read(m, ti.Name, kind, buf); err != nil {
			return model.NamedTensor{}, err
		}
		raw = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), 4*n)
	}
	return model.NamedTensor{Name: ti.Name, DType: dt, Shape: ti.Shape, Write: model.Bytes(raw)}, nil
}

// Export copies the current weights out of the plugin, in checkpoint order, ready for
// model.WriteSafetensors (or a GGUF writer).
func (m *Model) Export() ([]model.NamedTensor, error) {
	infos, err := m.Tensors()
	if err != nil {
		return nil, err
	}
	out := make([]model.NamedTensor, 0, len(infos))
	for _, ti := range infos {
		t, err := m.exported(ti, Weight)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// SaveHF writes an HF-compatible checkpoint: config.json, model.safetensors, the source
// directory's tokenizer files and, for a trainable model, optimizer.safetensors. The
// directory appears complete or not at all: everything is written to a sibling temporary
// directory that then replaces dir.
func (m *Model) SaveHF(dir string) (err error) {
	if m.hfConfig == nil {
		return fmt.Errorf("save %s: model was not loaded from a Hugging Face directory, so it has no config.json", dir)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("save %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp*")
	if err != nil {
		return fmt.Errorf("save %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	// config.json verbatim: keys the model package does not model survive the round trip.
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), m.hfConfig, 0o644); err != nil {
		return fmt.Errorf("save %s: %w", dir, err)
	}
	if err := model.CopyFiles(m.srcDir, tmp, model.TokenizerFiles); err != nil {
		return fmt.Errorf("save %s: %w", dir, err)
	}
	weights, err := m.Export()
	if err != nil {
		return fmt.Errorf("save %s: %w", dir, err)
	}
	if err := model.WriteSafetensors(filepath.Join(tmp, "model.safetensors"), weights, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	if m.opts.Trainable {
		if err := m.saveOptimizer(filepath.Join(tmp, OptimizerFile)); err != nil {
			return fmt.Errorf("save %s: %w", dir, err)
		}
	}
	return replaceDir(tmp, dir)
}

func (m *Model) saveOptimizer(path string) error {
	infos, err := m.Tensors()
	if err != nil {
		return err
	}
	var ts []model.NamedTensor
	for _, k := range []struct {
		prefix string
		kind   Kind
	}{{"exp_avg.", ExpAvg}, {"exp_avg_sq.", ExpAvgSq}} {
		for _, ti := range infos {
			t, err := m.exported(ti, k.kind)
			if err != nil {
				return err
			}
			t.Name = k.prefix + ti.Name
			ts = append(ts, t)
		}
	}
	step, skipped, err := m.OptimizerState()
	if err != nil {
		return err
	}
	return model.WriteSafetensors(path, ts, map[string]string{
		"step": strconv.FormatInt(step, 10), "skipped_total": strconv.FormatInt(skipped, 10)})
}

// replaceDir moves tmp to dir, moving an existing dir aside first and removing it after.
func replaceDir(tmp, dir string) error {
	old := ""
	if _, err := os.Stat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("save %s: %w", dir, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("save %s: %w", dir, err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("save %s: remove previous checkpoint: %w", dir, err)
		}
	}
	return nil
}
