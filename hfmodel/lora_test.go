package hfmodel

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/trainspec"
)

var loraOpts = torch.ModelOptions{Trainable: true, LoRA: trainspec.LoRA{Rank: 4, Alpha: 8, Targets: trainspec.LoRATargets, Dropout: 0.1, Seed: 3}}

// trainedLoRA loads a tiny model with adapters and takes two optimizer steps.
func trainedLoRA(t *testing.T, rt *torch.Runtime, src string) *Model {
	t.Helper()
	m, err := Load(rt, src, loraOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Free)
	for i := 0; i < 2; i++ {
		if _, err := m.SFTLoss([][]int32{{1, 2, 3}, {4, 5}}, [][]int32{{7, 8}, {9, 10, 11}}, true, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Step(trainspec.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// A LoRA checkpoint is a PEFT directory naming its base (no copy of the base weights) with
// the adapters' optimizer state; it reloads bit-exactly onto that base.
func TestLoRACheckpointRoundTripIsBitExact(t *testing.T) {
	rt := torchtest.Open(t)
	src := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	m := trainedLoRA(t, rt, src)
	ck := filepath.Join(t.TempDir(), "step-2")
	if err := m.Save(ck); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "tokenizer.json", peft.ConfigFile, peft.WeightsFile, OptimizerFile} {
		if _, err := os.Stat(filepath.Join(ck, f)); err != nil {
			t.Errorf("checkpoint lacks %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ck, "model.safetensors")); err == nil {
		t.Error("a LoRA checkpoint copied the frozen base")
	}
	adapter, err := peft.Read(ck)
	if err != nil {
		t.Fatal(err)
	}
	if abs, _ := filepath.Abs(src); adapter.BaseModel != abs || adapter.Rank != 4 || adapter.Alpha != 8 || len(adapter.Targets) != 7 {
		t.Errorf("adapter config %+v, want rank 4, alpha 8, 7 targets on base %s", adapter.LoRAConfig, abs)
	}
	back, err := Load(rt, ck, loraOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Free()
	infos, _ := m.Tensors()
	for _, ti := range infos {
		kinds := []torch.Kind{torch.Weight}
		if ti.Adapter {
			kinds = append(kinds, torch.ExpAvg, torch.ExpAvgSq)
		}
		for _, kind := range kinds {
			if !bytes.Equal(rawBytes(t, m.Model, ti, kind), rawBytes(t, back.Model, ti, kind)) {
				t.Fatalf("%s kind %d: loaded bits differ from saved", ti.Name, kind)
			}
		}
	}
	if step, _, _ := back.OptimizerState(); step != 2 {
		t.Errorf("restored step %d, want 2", step)
	}
	// A fresh start from the checkpoint's adapter (train --agent CHECKPOINT/agent-I) takes
	// its adapters, not the old run's AdamW moments and step count.
	fresh, err := LoadAdapter(rt, ck, "", loraOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Free()
	if step, _, _ := fresh.OptimizerState(); step != 0 {
		t.Errorf("a fresh start from an adapter restored step %d, want 0", step)
	}
	for _, ti := range infos {
		if !ti.Adapter {
			continue
		}
		if !bytes.Equal(rawBytes(t, m.Model, ti, torch.Weight), rawBytes(t, fresh.Model, ti, torch.Weight)) {
			t.Fatalf("%s: the fresh start's adapter differs from the saved one", ti.Name)
		}
		if b := rawBytes(t, fresh.Model, ti, torch.ExpAvg); !bytes.Equal(b, make([]byte, len(b))) {
			t.Fatalf("%s: a fresh start carried the old run's AdamW moments", ti.Name)
		}
	}

	// The next step (dropout masks included) is the same in both.
	a, b := trainedStep(t, m), trainedStep(t, back)
	if !bytes.Equal(a, b) {
		t.Error("the step after resuming differs from the uninterrupted one")
	}

	other := loraOpts
	other.LoRA.Rank = 8
	if _, err := Load(rt, ck, other); err == nil || !strings.Contains(err.Error(), "rank 4") {
		t.Errorf("loading a rank-4 checkpoint into a rank-8 run: %v", err)
	}
}

// trainedStep takes one more step and returns the adapters' bytes.
func trainedStep(t *testing.T, m *Model) []byte {
	t.Helper()
	if _, err := m.SFTLoss([][]int32{{3, 2}}, [][]int32{{5, 6, 7}}, true, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(trainspec.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}); err != nil {
		t.Fatal(err)
	}
	var all []byte
	infos, _ := m.Tensors()
	for _, ti := range infos {
		if ti.Adapter {
			all = append(all, rawBytes(t, m.Model, ti, torch.Weight)...)
		}
	}
	return all
}

// An adapter's own lora_dropout is not the run's: dropout (like the seed and the base's
// type) comes from the run's settings, rank, alpha and targets from the adapter.
func TestAdapterSettingsTakeDropoutFromTheRun(t *testing.T) {
	a := &peft.LoRAAdapter{LoRAConfig: peft.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q_proj", "v_proj"}, Dropout: 0.05}}
	l, err := AdapterSettings("adapter", a, trainspec.LoRA{Seed: 7, BaseBF16: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Rank != 4 || l.Alpha != 8 || strings.Join(l.Targets, ",") != "q,v" || l.Dropout != 0 || l.Seed != 7 || !l.BaseBF16 {
		t.Errorf("settings %+v: want rank 4, alpha 8, targets q,v from the adapter; dropout 0, seed 7, bf16 base from the run", l)
	}
}

// The merged export is a plain model with the adapted model's log-probs.
func TestLoRAMergedExportMatches(t *testing.T) {
	rt := torchtest.Open(t)
	src := filepath.Join(testmodel.Tiny(t, "llama"), "hf")
	m := trainedLoRA(t, rt, src)
	dir := filepath.Join(t.TempDir(), "merged")
	if err := m.SaveMerged(dir); err != nil {
		t.Fatal(err)
	}
	plain, err := Load(rt, dir, torch.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Free()
	p, r := [][]int32{{1, 2, 3}, {4}}, [][]int32{{5, 6}, {7, 8, 9}}
	want, _, _ := m.LogProbs(p, r, 1)
	got, _, _ := plain.LogProbs(p, r, 1)
	base, _, _ := m.BaseLogProbs(p, r, 1)
	moved := 0.0
	for i := range want {
		for j := range want[i] {
			if d := math.Abs(float64(got[i][j] - want[i][j])); d > 1e-5 {
				t.Errorf("token %d/%d: merged %g, adapted %g", i, j, got[i][j], want[i][j])
			}
			moved = math.Max(moved, math.Abs(float64(base[i][j]-want[i][j])))
		}
	}
	if moved < 1e-4 {
		t.Errorf("two steps moved the log-probs by only %g: the comparison proves nothing", moved)
	}
}

// ExportBase gives the base the plugin computes with: the checkpoint's fp32 values rounded
// to bf16 under BaseBF16 (what a LoRA run's rollout server must load to agree with the
// plugin), the adapters left out even after training; Export gives the merged weights.
func TestExportBaseIsThePluginsBase(t *testing.T) {
	rt := torchtest.Open(t)
	src := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	orig, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	for _, bf16 := range []bool{false, true} {
		opts := loraOpts
		opts.LoRA.BaseBF16 = bf16
		m, err := Load(rt, src, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.SFTLoss([][]int32{{1, 2, 3}}, [][]int32{{7, 8}}, true, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Step(trainspec.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MaxGradNorm: 1}); err != nil {
			t.Fatal(err)
		}
		base, err := ExportBase(m.Model)
		if err != nil {
			t.Fatal(err)
		}
		merged, err := Export(m.Model)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for name, ts := range map[string][]safetensors.NamedTensor{"base": base, "merged": merged} {
			if err := safetensors.Write(filepath.Join(dir, name+".safetensors"), ts, nil); err != nil {
				t.Fatal(err)
			}
		}
		got, err := safetensors.Open(filepath.Join(dir, "base.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		mg, err := safetensors.Open(filepath.Join(dir, "merged.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		rounded, mergedDiffers := 0, 0
		for _, name := range orig.Names() {
			want, g, mv := f32Tensor(t, orig, name), f32Tensor(t, got, name), f32Tensor(t, mg, name)
			for i, w := range want {
				if bf16 {
					w = gguf.BF16ToF32(gguf.F32ToBF16(w))
				}
				if g[i] != w {
					t.Fatalf("bf16 base %v: %s[%d] is %g, want %g", bf16, name, i, g[i], w)
				}
				if w != want[i] {
					rounded++
				}
				if mv[i] != g[i] {
					mergedDiffers++
				}
			}
		}
		got.Close()
		mg.Close()
		m.Free()
		if bf16 != (rounded > 0) || mergedDiffers == 0 {
			t.Errorf("bf16 base %v: %d values rounded, %d merged values differ from the base", bf16, rounded, mergedDiffers)
		}
	}
}

func f32Tensor(t *testing.T, st *safetensors.File, name string) []float32 {
	t.Helper()
	v, err := st.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := v.F32()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A relative base_model_name_or_path is found from the adapter directory, whatever the
// working directory, and comes back absolute (a run's config.json stores it).
func TestAdapterBaseResolvesRelativePaths(t *testing.T) {
	root := t.TempDir()
	base, adapter := filepath.Join(root, "base"), filepath.Join(root, "runs", "adapter")
	for _, d := range []string{base, adapter} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, named := range []string{"../../base", base} {
		got, err := AdapterBase(adapter, &peft.LoRAAdapter{LoRAConfig: peft.LoRAConfig{BaseModel: named}})
		if err != nil || got != base {
			t.Errorf("base %q: %q, %v; want %s", named, got, err, base)
		}
	}
	// One rule, export's and train's: a base found only from the working directory is not
	// the one the adapter names.
	t.Chdir(root)
	if _, err := AdapterBase(adapter, &peft.LoRAAdapter{LoRAConfig: peft.LoRAConfig{BaseModel: "base"}}); err == nil {
		t.Error("a relative base was found from the working directory")
	}
	file := filepath.Join(adapter, peft.ConfigFile)
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for named, want := range map[string]string{"../nowhere": "no such file", peft.ConfigFile: file + " is a file"} {
		_, err := AdapterBase(adapter, &peft.LoRAAdapter{LoRAConfig: peft.LoRAConfig{BaseModel: named}})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "<nil>") {
			t.Errorf("base %q: %v; want an error saying %q", named, err, want)
		}
	}
}

// PEFT names a hub model by its id (base_model_name_or_path "Qwen/..."): a base that is no
// directory is looked up in the Hugging Face cache, as huggingface_hub lays it out.
func TestAdapterBaseFromHubCache(t *testing.T) {
	cache, adapter := t.TempDir(), t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	a := &peft.LoRAAdapter{LoRAConfig: peft.LoRAConfig{BaseModel: "org/base"}}
	if _, err := AdapterBase(adapter, a); err == nil || !strings.Contains(err.Error(), "nor in the Hugging Face cache") {
		t.Errorf("an id in no cache: %v", err)
	}
	commit := "89abcdef0123456789abcdef0123456789abcdef"
	repo := filepath.Join(cache, "models--org--base")
	snap := filepath.Join(repo, "snapshots", commit)
	for _, d := range []string{filepath.Join(repo, "blobs"), filepath.Join(repo, "refs"), snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range []string{"config.json", "model.safetensors"} {
		blob := fmt.Sprintf("%040d", i)
		if err := os.WriteFile(filepath.Join(repo, "blobs", blob), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", blob), filepath.Join(snap, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := AdapterBase(adapter, a); err != nil || got != snap {
		t.Errorf("AdapterBase = %q, %v; want %s", got, err, snap)
	}
}
