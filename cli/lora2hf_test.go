package cli

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
)

// trainedPEFT writes a tiny qwen2 base and a rank-4 adapter naming it, with random A and B
// large enough to move the log-probs, and returns both directories.
func trainedPEFT(t *testing.T) (base, adapter string) {
	t.Helper()
	dir := t.TempDir()
	if err := model.WriteTiny(dir, model.TinyOptions{Arch: "qwen2", Seed: 1, ChatTemplate: "x"}); err != nil {
		t.Fatal(err)
	}
	base = filepath.Join(dir, "hf")
	cfg, err := model.LoadHFConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.Shape()
	if err != nil {
		t.Fatal(err)
	}
	a, err := peft.NewLoRAAdapter(peft.LoRAConfig{Rank: 4, Alpha: 8, Targets: slices.Clone(peft.LoRATargets), BaseModel: base}, s)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k := range a.Keys() {
		for _, v := range [][]float32{a.Pairs[k].A, a.Pairs[k].B} {
			for i := range v {
				v[i] = float32(0.1 * rng.NormFloat64())
			}
		}
	}
	adapter = filepath.Join(dir, "adapter")
	if err := a.WritePEFT(adapter); err != nil {
		t.Fatal(err)
	}
	return base, adapter
}

// lora2hf's merged checkpoint scores as its base with the adapter applied (the plugin
// loading the PEFT directory), to F32 rounding; without the adapter the scores differ.
func TestLoRA2HFMergesIntoTheBase(t *testing.T) {
	rt := torchtest.Open(t)
	base, adapter := trainedPEFT(t)
	out := filepath.Join(t.TempDir(), "merged")
	stdout, stderr, err := runApp(t, "convert", "lora2hf", adapter, out)
	if err != nil || !strings.Contains(stdout, "wrote "+out) {
		t.Fatalf("lora2hf: %v\n%s%s", err, stdout, stderr)
	}
	prompts, responses := [][]int32{{1, 2, 3}, {7, 4}}, [][]int32{{5, 6, 9}, {8, 9, 10, 11}}
	logProbs := func(dir string) [][]float32 {
		m, err := hfmodel.Load(rt, dir, torch.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		lp, _, err := m.LogProbs(prompts, responses, 1)
		if err != nil {
			t.Fatal(err)
		}
		return lp
	}
	want, got, plain := logProbs(adapter), logProbs(out), logProbs(base)
	moved := 0.0
	for i := range want {
		for j := range want[i] {
			if d := math.Abs(float64(got[i][j] - want[i][j])); !(d <= 1e-5) {
				t.Errorf("sequence %d token %d: merged %g, base + adapter %g", i, j, got[i][j], want[i][j])
			}
			moved = math.Max(moved, math.Abs(float64(plain[i][j]-want[i][j])))
		}
	}
	if moved < 1e-3 {
		t.Fatalf("the adapter moves no log-prob by more than %g: the comparison proves nothing", moved)
	}
}

func TestLoRA2HFRefusesBadInput(t *testing.T) {
	_, adapter := trainedPEFT(t)
	a, err := peft.Read(adapter)
	if err != nil {
		t.Fatal(err)
	}
	a.BaseModel = "Qwen/Qwen2.5-0.5B"
	foreign := filepath.Join(t.TempDir(), "foreign")
	if err := a.WritePEFT(foreign); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := model.WriteTiny(other, model.TinyOptions{Arch: "qwen3", Seed: 1, ChatTemplate: "x"}); err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	if _, _, err := runApp(t, "convert", "lora2hf", adapter, full); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		why, want string
		args      []string
	}{
		{"base is a hub name", "pass --base HF_DIR", []string{foreign, out}},
		{"base of another shape", "features", []string{adapter, out, "--base", filepath.Join(other, "hf")}},
		{"not a peft directory", peft.ConfigFile, []string{t.TempDir(), out}},
		{"output not empty", "--force", []string{adapter, full}},
	} {
		t.Run(c.why, func(t *testing.T) {
			var stderr bytes.Buffer
			code := runWithApp(append([]string{"convert", "lora2hf"}, c.args...), &stderr)
			msg := strings.TrimSpace(stderr.String())
			if code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
				t.Fatalf("exit %d, stderr %q: want exit 1 and one line containing %q", code, msg, c.want)
			}
		})
	}
}

// `umad export --merge` writes what `umad convert lora2hf` writes, byte for byte, and
// without --merge says what to give.
func TestExportMerge(t *testing.T) {
	_, adapter := trainedPEFT(t)
	viaConvert, viaExport := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	if _, stderr, err := runApp(t, "convert", "lora2hf", adapter, viaConvert); err != nil {
		t.Fatalf("convert lora2hf: %v\n%s", err, stderr)
	}
	if _, stderr, err := runApp(t, "export", "--merge", adapter, viaExport); err != nil {
		t.Fatalf("export --merge: %v\n%s", err, stderr)
	}
	a, errA := os.ReadFile(filepath.Join(viaConvert, "model.safetensors"))
	b, errB := os.ReadFile(filepath.Join(viaExport, "model.safetensors"))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("export --merge differs from convert lora2hf (%v, %v)", errA, errB)
	}
	if _, _, err := runApp(t, "export", adapter, filepath.Join(t.TempDir(), "c")); err == nil || !strings.Contains(err.Error(), "--merge") {
		t.Errorf("export without --merge: %v, want an error naming --merge", err)
	}
}

// A relative base_model_name_or_path is taken from the adapter's directory, as train takes
// it, whatever the working directory: export looked in the working directory.
func TestExportRelativeBase(t *testing.T) {
	_, adapter := trainedPEFT(t) // DIR/adapter on DIR/hf
	a, err := peft.Read(adapter)
	if err != nil {
		t.Fatal(err)
	}
	a.BaseModel = "../hf"
	if err := a.WritePEFT(adapter); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if _, stderr, err := runApp(t, "export", "--merge", adapter, filepath.Join(t.TempDir(), "merged")); err != nil {
		t.Fatalf("export --merge: %v\n%s", err, stderr)
	}
}
