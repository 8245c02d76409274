package hfmodel

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/trainspec"
)

func TestMain(m *testing.M) { os.Exit(testmodel.Main(m)) }

// rawBytes is a tensor as Save would write it.
func rawBytes(t *testing.T, m *torch.Model, ti torch.TensorInfo, kind torch.Kind) []byte {
	t.Helper()
	v, err := readTensor(m, ti, kind)
	if err != nil {
		t.Fatal(err)
	}
	return v.Data
}

// A checkpoint saved after training reloads bit-exactly, optimizer moments and counters
// included, and keeps config.json and the tokenizer files.
func TestCheckpointRoundTripIsBitExact(t *testing.T) {
	rt := torchtest.Open(t)
	for _, arch := range arch.Names() {
		t.Run(arch, func(t *testing.T) {
			src := filepath.Join(testmodel.Tiny(t, arch), "hf")
			m, err := Load(rt, src, torch.ModelOptions{Trainable: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			p := [][]int32{{1, 2, 3}, {4, 5}, {6}}
			r := [][]int32{{7, 8}, {9, 10, 11}, {12}}
			if _, err := m.SFTLoss(p, r, true, 1); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Step(trainspec.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}); err != nil {
				t.Fatal(err)
			}
			ck := filepath.Join(t.TempDir(), "step-1")
			if err := m.Save(ck); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"config.json", "tokenizer.json", "model.safetensors", OptimizerFile} {
				if _, err := os.Stat(filepath.Join(ck, f)); err != nil {
					t.Errorf("checkpoint lacks %s: %v", f, err)
				}
			}
			back, err := Load(rt, ck, torch.ModelOptions{Trainable: true})
			if err != nil {
				t.Fatal(err)
			}
			defer back.Free()
			infos, _ := m.Tensors()
			for _, ti := range infos {
				for _, kind := range []torch.Kind{torch.Weight, torch.ExpAvg, torch.ExpAvgSq} {
					if !bytes.Equal(rawBytes(t, m.Model, ti, kind), rawBytes(t, back.Model, ti, kind)) {
						t.Fatalf("%s kind %d: loaded bits differ from saved", ti.Name, kind)
					}
				}
			}
			step, _, _ := back.OptimizerState()
			if step != 1 {
				t.Errorf("restored step %d, want 1", step)
			}
		})
	}
}

// Bad checkpoints fail with the tensor's name (and both shapes for a shape mismatch).
func TestLoadNamesBadTensors(t *testing.T) {
	rt := torchtest.Open(t)
	src := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	good, err := Load(rt, src, torch.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Free()
	weights, err := Export(good.Model)
	if err != nil {
		t.Fatal(err)
	}
	const victim = "model.layers.0.mlp.up_proj.weight"
	cases := []struct {
		name string
		edit func([]safetensors.NamedTensor) []safetensors.NamedTensor
		want []string
	}{
		{"missing tensor", func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
			var out []safetensors.NamedTensor
			for _, x := range ts {
				if x.Name != victim {
					out = append(out, x)
				}
			}
			return out
		}, []string{victim}},
		{"transposed tensor", func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
			out := append([]safetensors.NamedTensor(nil), ts...)
			for i := range out {
				if out[i].Name == victim {
					out[i].Shape = []int64{out[i].Shape[1], out[i].Shape[0]}
				}
			}
			return out
		}, []string{victim, "has shape", "expected"}},
		{"stray tensor", func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
			extra := ts[len(ts)-1]
			extra.Name = "model.layers.99.mlp.up_proj.weight"
			return append(append([]safetensors.NamedTensor(nil), ts...), extra)
		}, []string{"unexpected tensor model.layers.99.mlp.up_proj.weight"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			raw, _ := os.ReadFile(filepath.Join(src, "config.json"))
			os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644)
			if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), tc.edit(weights), nil); err != nil {
				t.Fatal(err)
			}
			_, err := Load(rt, dir, torch.ModelOptions{})
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("got %v, want an error containing %q", err, w)
				}
			}
		})
	}
}
