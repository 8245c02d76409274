package hfmodel

// LoRA checkpoints: a LoRA model saves as a PEFT adapter directory (peft/peft.go's layout:
// adapter_config.json naming the base directory, adapter_model.safetensors) beside
// config.json, the tokenizer files and the adapters' optimizer state. The base is named,
// not copied: it never changes during training.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/hfhub"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/trainspec"
)

// loadAdapter loads a PEFT adapter directory onto the base directory its config names,
// with the optimizer state saved beside it: a resumed LoRA checkpoint. The adapter's rank,
// alpha and targets must agree with opts.LoRA when that is set (see AdapterSettings).
func loadAdapter(rt *torch.Runtime, dir string, opts torch.ModelOptions) (*Model, error) {
	return openAdapter(rt, dir, "", opts, dir)
}

// LoadAdapter is Load of the PEFT adapter directory dir onto the HF checkpoint base ("": the
// directory the adapter's config names), a LoRA model whose checkpoints then name base. It
// starts a run: an optimizer.safetensors beside the adapter (another run's AdamW moments and
// step count) is not restored.
func LoadAdapter(rt *torch.Runtime, dir, base string, opts torch.ModelOptions) (*Model, error) {
	return openAdapter(rt, dir, base, opts, "")
}

// openAdapter loads the adapter in dir onto base, restoring the optimizer state in
// directory state ("": none).
func openAdapter(rt *torch.Runtime, dir, base string, opts torch.ModelOptions, state string) (*Model, error) {
	a, err := peft.Read(dir)
	if err != nil {
		return nil, err
	}
	if base == "" {
		if base, err = AdapterBase(dir, a); err != nil {
			return nil, err
		}
	}
	l, err := AdapterSettings(dir, a, opts.LoRA)
	if err != nil {
		return nil, err
	}
	opts.LoRA = l
	return load(rt, base, opts, a, state)
}

// AdapterBase is the base directory the adapter a (read from dir) names, which must exist,
// as an absolute path (a run's config.json stores it, and may be resumed from elsewhere). A
// relative base_model_name_or_path is taken from the adapter's directory, whatever the
// working directory: train, export and convert all read it so. umad writes absolute paths.
func AdapterBase(dir string, a *peft.LoRAAdapter) (string, error) {
	if a.BaseModel == "" {
		return "", fmt.Errorf("%s: %s names no base_model_name_or_path", dir, peft.ConfigFile)
	}
	base := a.BaseModel
	if !filepath.IsAbs(base) {
		base = filepath.Join(dir, base)
	}
	st, err := os.Stat(base)
	if err == nil && !st.IsDir() {
		err = fmt.Errorf("%s is a file", base)
	}
	if err != nil {
		if snap, ok := cachedBase(a.BaseModel); ok { // PEFT names a hub model by its id
			return snap, nil
		}
		return "", fmt.Errorf("%s names the base model %q, which is not a local directory nor in the Hugging Face cache (umad --hf-download convert hf2gguf %s BASE.gguf puts it there): %w",
			dir, a.BaseModel, a.BaseModel, err)
	}
	return filepath.Abs(base)
}

// cachedBase is the snapshot directory of a hub id in the Hugging Face cache.
func cachedBase(id string) (string, bool) {
	ref, ok := hfhub.ParseID(id)
	if !ok {
		return "", false
	}
	cache, err := hfhub.CacheDir()
	if err != nil {
		return "", false
	}
	s, err := hfhub.Cached(cache, ref)
	return s.Dir, err == nil
}

// AdapterSettings are the LoRA settings the plugin trains the adapter a (read from dir)
// with: rank, alpha and targets are the adapter's, and must be want's when want.Rank > 0 (a
// resumed run, or flags given); dropout, seed and BaseBF16 are always want's. The dropout the
// adapter was trained with (PEFT's lora_dropout) is not carried over: it is a choice of the
// run, and PPO's ratio wants none (see train's --lora-dropout).
func AdapterSettings(dir string, a *peft.LoRAAdapter, want trainspec.LoRA) (trainspec.LoRA, error) {
	if a.RSLoRA {
		return trainspec.LoRA{}, fmt.Errorf("load %s: rsLoRA adapters (alpha/sqrt(r)) are not supported by the trainer", dir)
	}
	l := trainspec.LoRA{Rank: a.Rank, Alpha: a.Alpha, Dropout: want.Dropout, Seed: want.Seed, BaseBF16: want.BaseBF16}
	for _, t := range a.Targets {
		l.Targets = append(l.Targets, trainspec.LoRAShort(t))
	}
	if want.Rank > 0 && (want.Rank != l.Rank || want.Alpha != l.Alpha || !sameTargets(want.Targets, l.Targets)) {
		return trainspec.LoRA{}, fmt.Errorf("load %s: the adapter has rank %d, alpha %g, targets %s; this run asks for rank %d, alpha %g, targets %s",
			dir, l.Rank, l.Alpha, strings.Join(l.Targets, ","), want.Rank, want.Alpha, strings.Join(want.Targets, ","))
	}
	return l, nil
}

func sameTargets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// adapterKey parses a plugin adapter name into PEFT's key and "A" or "B".
func adapterKey(name string) (peft.LoRAKey, string, error) {
	k, ab, ok := peft.ParseLoRAName(name)
	if !ok {
		return peft.LoRAKey{}, "", fmt.Errorf("tensor %s is not a LoRA adapter name", name)
	}
	return k, ab, nil
}

func setAdapterTensor(m *torch.Model, ti torch.TensorInfo, a *peft.LoRAAdapter) error {
	k, ab, err := adapterKey(ti.Name)
	if err != nil {
		return err
	}
	p, ok := a.Pairs[k]
	if !ok {
		return fmt.Errorf("the adapter has no %s", ti.Name)
	}
	v := p.A
	if ab == "B" {
		v = p.B
	}
	if len(v) == 0 {
		return fmt.Errorf("the adapter's %s is empty", ti.Name)
	}
	return m.SetTensor(ti.Name, torch.Float32, ti.Shape, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)))
}

// Adapter copies a LoRA model's adapters out of the plugin, in PEFT's terms, naming the
// base directory the model was loaded from.
func (m *Model) Adapter() (*peft.LoRAAdapter, error) {
	l := m.Options().LoRA
	if l.Rank == 0 {
		return nil, errors.New("the model has no LoRA adapters")
	}
	a := &peft.LoRAAdapter{LoRAConfig: peft.LoRAConfig{Rank: l.Rank, Alpha: l.Alpha, Dropout: l.Dropout, BaseModel: m.base},
		Pairs: map[peft.LoRAKey]peft.LoRAPair{}}
	for _, t := range l.Targets {
		a.Targets = append(a.Targets, trainspec.LoRAModule(t))
	}
	infos, err := m.Tensors()
	if err != nil {
		return nil, err
	}
	for _, ti := range infos {
		if !ti.Adapter {
			continue
		}
		k, ab, err := adapterKey(ti.Name)
		if err != nil {
			return nil, err
		}
		v := make([]float32, ti.Shape[0]*ti.Shape[1])
		if err := torch.Read(m.Model, ti.Name, torch.Weight, v); err != nil {
			return nil, err
		}
		p := a.Pairs[k]
		if ab == "A" {
			p.A, p.In = v, int(ti.Shape[1])
		} else {
			p.B, p.Out = v, int(ti.Shape[0])
		}
		a.Pairs[k] = p
	}
	return a, nil
}

// writeAdapter writes the PEFT files into dir, beside the checkpoint's other files.
func (m *Model) writeAdapter(dir string) error {
	a, err := m.Adapter()
	if err != nil {
		return err
	}
	// WritePEFT makes a whole directory; its two files then join the checkpoint's.
	sub := filepath.Join(dir, ".peft")
	if err := a.WritePEFT(sub); err != nil {
		return err
	}
	for _, f := range []string{peft.ConfigFile, peft.WeightsFile} {
		if err := os.Rename(filepath.Join(sub, f), filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return os.Remove(sub)
}

// SaveAdapter writes the adapters alone as a PEFT directory (for PEFT and llama.cpp's
// LoRA conversion), replacing dir atomically.
func (m *Model) SaveAdapter(dir string) error {
	a, err := m.Adapter()
	if err != nil {
		return fmt.Errorf("save adapter %s: %w", dir, err)
	}
	return a.WritePEFT(dir)
}
