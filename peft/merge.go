package peft

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
)

// Merge writes into outDir the Hugging Face checkpoint hfDir with the adapter merged into
// its weights (W + scale * B @ A, as PEFT's merge_and_unload), each merged weight in its
// original dtype, with hfDir's config and tokenizer files. One tensor is in memory at a time;
// the files are built beside outDir and renamed into it, where other files stay.
func Merge(hfDir string, a *LoRAAdapter, outDir string) error {
	if err := mergePEFT(hfDir, a, outDir); err != nil {
		return fmt.Errorf("merge lora adapter into %s: %w", hfDir, err)
	}
	return nil
}

func mergePEFT(hfDir string, a *LoRAAdapter, outDir string) error {
	cfg, err := model.LoadHFConfig(hfDir)
	if err != nil {
		return err
	}
	s, err := cfg.Shape()
	if err != nil {
		return err
	}
	if err := a.CheckBase(s); err != nil {
		return err
	}
	side, err := model.ReadFiles(hfDir, append([]string{"config.json"}, model.TokenizerFiles...))
	if err != nil {
		return err
	}
	st, err := safetensors.Open(hfDir)
	if err != nil {
		return err
	}
	defer st.Close()
	wm, err := model.NewWeightMap(s, gguf.TypeF32) // any type: only the layout is checked
	if err != nil {
		return err
	}
	if err := model.CheckHFTensors(st, wm, s); err != nil {
		return err
	}
	merged := map[string]LoRAPair{}
	for k, p := range a.Pairs {
		merged[loraModuleName(k.Layer, k.Target)+".weight"] = p
	}
	var ts []safetensors.NamedTensor
	for _, name := range st.Names() {
		dtype, _ := st.DType(name)
		shape, _ := st.Shape(name)
		p, adapted := merged[name]
		ts = append(ts, safetensors.NamedTensor{Name: name, DType: dtype, Shape: shape, Write: func(w io.Writer) error {
			t, err := st.Tensor(name)
			if err != nil {
				return err
			}
			if !adapted {
				_, err = w.Write(t.Data)
				return err
			}
			v, err := t.F32()
			if err != nil {
				return err
			}
			if err := MergeLoRA(v, p, a.Scale()); err != nil {
				return err
			}
			typ, err := dtype.GGMLType()
			if err != nil {
				return err
			}
			b, err := gguf.EncodeTensor(typ, v)
			if err == nil {
				_, err = w.Write(b)
			}
			return err
		}})
	}
	return atomicfile.WriteInto(outDir, func(tmp string) error {
		if err := model.WriteFiles(tmp, side); err != nil {
			return err
		}
		return safetensors.Write(filepath.Join(tmp, safetensors.FileName), ts, map[string]string{"format": "pt"})
	})
}
