package cli

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
)

// peftFor writes a rank-4 adapter with random weights for the tiny model of arch.
func peftFor(t *testing.T, arch string) string {
	t.Helper()
	s, err := model.ReadGGUFShape(testmodel.GGUF(t, arch))
	if err != nil {
		t.Fatal(err)
	}
	a, err := peft.NewLoRAAdapter(peft.LoRAConfig{Rank: 4, Alpha: 8, Targets: slices.Clone(peft.LoRATargets)}, s)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range a.Keys() {
		p := a.Pairs[k]
		for i := range p.A {
			p.A[i] = float32(rng.NormFloat64())
		}
	}
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := a.WritePEFT(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestConvertLoRA(t *testing.T) {
	base := testmodel.GGUF(t, "llama")
	peftDir := peftFor(t, "llama")
	out := filepath.Join(t.TempDir(), "adapter.gguf")
	stdout, stderr, err := runApp(t, "convert", "lora2gguf", peftDir, out, "--base", base)
	if err != nil || !strings.Contains(stdout, "wrote "+out) {
		t.Fatalf("lora2gguf: %v\n%s%s", err, stdout, stderr)
	}
	s, err := model.ReadGGUFShape(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := peft.CheckLoRAGGUF(out, s); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		why  string
		args []string
		want string
	}{
		{"no base", []string{"convert", "lora2gguf", peftDir, out}, "--base BASE.gguf is required"},
		{"other architecture", []string{"convert", "lora2gguf", peftDir, out, "--base", testmodel.GGUF(t, "qwen3")}, "wrong base model?"},
		{"base is not a gguf", []string{"convert", "lora2gguf", peftDir, out, "--base", filepath.Join(peftDir, peft.ConfigFile)}, "base model"},
		{"not a peft directory", []string{"convert", "lora2gguf", t.TempDir(), out, "--base", base}, peft.ConfigFile},
		{"one argument", []string{"convert", "lora2gguf", peftDir, "--base", base}, "want PEFT_DIR OUT.gguf"},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			var stderr bytes.Buffer
			code := runWithApp(c.args, &stderr)
			msg := strings.TrimSpace(stderr.String())
			if code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
				t.Fatalf("exit %d, stderr %q: want exit 1 and one line containing %q", code, msg, c.want)
			}
		})
	}
}
