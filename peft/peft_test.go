package peft

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/jsonfile"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/trainspec"
)

// randomLoRA is an adapter of every target of a tiny model of arch with random A and B.
func randomLoRA(t *testing.T, arch model.Arch, rank int) (*LoRAAdapter, model.Shape) {
	t.Helper()
	s, err := model.DefaultShape(arch)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewLoRAAdapter(LoRAConfig{Rank: rank, Alpha: 16, Targets: slices.Clone(LoRATargets), Dropout: 0.05, BaseModel: "tiny"}, s)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(rank), 7))
	for _, k := range a.Keys() {
		p := a.Pairs[k]
		for i := range p.A {
			p.A[i] = float32(rng.NormFloat64())
		}
		for i := range p.B {
			p.B[i] = float32(rng.NormFloat64())
		}
	}
	return a, s
}

func TestPEFTRoundTrip(t *testing.T) {
	for _, arch := range []model.Arch{model.ArchQwen2, model.ArchQwen3, model.ArchLlama} {
		a, s := randomLoRA(t, arch, 4)
		a.RSLoRA = arch == model.ArchLlama
		dir := filepath.Join(t.TempDir(), "adapter")
		if err := a.WritePEFT(dir); err != nil {
			t.Fatal(err)
		}
		b, err := Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.CheckBase(s); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Targets, b.Targets) || a.Rank != b.Rank || a.Alpha != b.Alpha || a.Dropout != b.Dropout ||
			a.RSLoRA != b.RSLoRA || a.BaseModel != b.BaseModel || len(a.Pairs) != len(b.Pairs) {
			t.Fatalf("%s: config %+v read back as %+v (%d pairs, %d)", arch, a.LoRAConfig, b.LoRAConfig, len(a.Pairs), len(b.Pairs))
		}
		for k, p := range a.Pairs {
			q := b.Pairs[k]
			if p.In != q.In || p.Out != q.Out || !slices.Equal(p.A, q.A) || !slices.Equal(p.B, q.B) {
				t.Fatalf("%s: pair %v differs after the round trip", arch, k)
			}
		}
		// k/v under GQA are KVHeads x HeadDim wide.
		if p := b.Pairs[LoRAKey{1, "k_proj"}]; p.Out != s.KVHeads*s.HeadDim || p.In != s.Hidden {
			t.Fatalf("%s: k_proj is %d -> %d", arch, p.In, p.Out)
		}
	}
}

// TestPEFTConfigFields checks the fields PEFT's LoraConfig needs and the tensor names
// PeftModel.from_pretrained looks up.
func TestPEFTConfigFields(t *testing.T) {
	a, _ := randomLoRA(t, model.ArchQwen2, 2)
	dir := t.TempDir()
	if err := a.WritePEFT(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2.0, "lora_alpha": 16.0, "bias": "none",
		"fan_in_fan_out": false, "use_rslora": false, "base_model_name_or_path": "tiny", "lora_dropout": 0.05,
	} {
		if cfg[key] != want {
			t.Errorf("%s = %v, want %v", key, cfg[key], want)
		}
	}
	st, err := safetensors.Open(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{
		"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
		"base_model.model.model.layers.1.mlp.down_proj.lora_B.weight",
	} {
		if _, ok := st.DType(name); !ok {
			t.Errorf("no tensor %s in %v", name, st.Names()[:4])
		}
	}
	if got := len(st.Names()); got != 2*7*2 {
		t.Errorf("%d tensors, want 28", got)
	}
}

// writePEFTDir writes a PEFT directory by hand: cfg merged over a valid rank-2 q_proj config,
// and the given tensors.
func writePEFTDir(t *testing.T, cfg map[string]any, tensors []safetensors.NamedTensor) string {
	t.Helper()
	dir := t.TempDir()
	full := map[string]any{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4,
		"target_modules": []string{"v_proj", "q_proj"}, "bias": "none"}
	for k, v := range cfg {
		full[k] = v
	}
	if err := jsonfile.Write(filepath.Join(dir, ConfigFile), full); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, WeightsFile), tensors, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func zeros(name string, dtype safetensors.DType, shape ...int64) safetensors.NamedTensor {
	n := dtype.Size()
	for _, d := range shape {
		n *= d
	}
	return safetensors.NamedTensor{Name: name, DType: dtype, Shape: shape, Write: gguf.Bytes(make([]byte, n))}
}

// qv is a valid q_proj/v_proj adapter of a one-layer model with hidden 8 and kv width 4.
func qv() []safetensors.NamedTensor {
	return []safetensors.NamedTensor{
		zeros("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", safetensors.BF16, 2, 8),
		zeros("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", safetensors.BF16, 8, 2),
		zeros("base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight", safetensors.F16, 2, 8),
		zeros("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight", safetensors.F16, 4, 2),
	}
}

func TestReadPEFTRefuses(t *testing.T) {
	// What newer PEFT versions add, and init_lora_weights as a string, still read.
	extra := map[string]any{"init_lora_weights": "gaussian", "exclude_modules": nil, "use_qalora": false, "lora_dropout": 0.1}
	if a, err := Read(writePEFTDir(t, extra, qv())); err != nil || !slices.Equal(a.Targets, []string{"q_proj", "v_proj"}) || a.Pairs[LoRAKey{0, "v_proj"}].Out != 4 {
		t.Fatalf("a valid half-precision adapter: %v", err)
	}
	cases := []struct {
		name    string
		cfg     map[string]any
		tensors []safetensors.NamedTensor
		want    string
	}{
		{"unknown target", map[string]any{"target_modules": []string{"q_proj", "lm_head"}}, qv(), `unknown target module "lm_head"`},
		{"regex target", map[string]any{"target_modules": ".*proj"}, qv(), "must be a list"},
		{"no target", map[string]any{"target_modules": nil}, qv(), "no target modules"},
		{"rank 0", map[string]any{"r": 0}, qv(), "rank 0 must be in 1.."},
		{"absurd rank", map[string]any{"r": 1 << 30}, qv(), "must be in 1..16384"},
		{"zero alpha", map[string]any{"lora_alpha": 0}, qv(), "alpha 0 must be finite and positive"},
		{"alpha beyond float32", map[string]any{"lora_alpha": 1e300}, qv(), "adapter_config.json: lora_alpha 1e+300 is outside float32's range"},
		{"alpha below float32", map[string]any{"lora_alpha": 1e-300}, qv(), "adapter_config.json: lora_alpha 1e-300 is outside float32's range"},
		{"dora", map[string]any{"use_dora": true}, qv(), "DoRA"},
		{"bias", map[string]any{"bias": "all"}, qv(), `bias "all" is not supported`},
		{"rank pattern", map[string]any{"rank_pattern": map[string]int{"q_proj": 4}}, qv(), "rank_pattern"},
		{"layers", map[string]any{"layers_to_transform": []int{0}}, qv(), "layers_to_transform"},
		{"layer replication", map[string]any{"layer_replication": [][]int{{0, 1}, {0, 1}}}, qv(), "layer_replication"},
		{"activated LoRA", map[string]any{"alora_invocation_tokens": []int{151644, 77091}}, qv(), "alora_invocation_tokens"},
		{"not lora", map[string]any{"peft_type": "IA3"}, qv(), `peft_type "IA3" is not LORA`},
		{"other rank", map[string]any{"r": 4}, qv(), "rank 4 needs [4, in] and [out, 4]"},
		{"target without weights", map[string]any{"target_modules": []string{"q_proj", "v_proj", "o_proj"}}, qv(), "target module o_proj has no weights"},
		{"weights without target", map[string]any{"target_modules": []string{"q_proj"}}, qv(), "is not among the target modules"},
		{"missing B", nil, qv()[:3], `"base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight" is missing`},
		{"missing A", nil, slices.Delete(qv(), 0, 1), `"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" is missing`},
		{"foreign tensor", nil, append(qv(), zeros("base_model.model.lm_head.weight", safetensors.F32, 2, 2)), `tensor "base_model.model.lm_head.weight" is not a LoRA weight`},
		{"adapter name kept", nil, append(qv(), zeros("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight", safetensors.F32, 2, 8)), "is not a LoRA weight"},
		{"integer weights", nil, append(qv()[:3], zeros("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight", safetensors.I32, 4, 2)), "cannot convert I32"},
	}
	for _, c := range cases {
		_, err := Read(writePEFTDir(t, c.cfg, c.tensors))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "read peft adapter ") {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	// A non-finite alpha cannot be written as JSON; the config check sees it in memory.
	if err := (LoRAConfig{Rank: 1, Alpha: math.Inf(1), Targets: []string{"q_proj"}}).Validate(); err == nil || !strings.Contains(err.Error(), "alpha +Inf") {
		t.Errorf("infinite alpha: %v", err)
	}
	if _, err := Read(t.TempDir()); err == nil || !strings.Contains(err.Error(), ConfigFile) {
		t.Errorf("empty directory: %v", err)
	}
}

func TestLoRAValidate(t *testing.T) {
	a, s := randomLoRA(t, model.ArchQwen3, 2)
	k := LoRAKey{0, "o_proj"}
	p := a.Pairs[k]
	p.B[3] = float32(math.NaN())
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "model.layers.0.self_attn.o_proj: B holds NaN at 3") {
		t.Errorf("NaN in B: %v", err)
	}
	p.B[3] = 0
	a.Pairs[k] = LoRAPair{In: p.In, Out: p.Out, A: p.A, B: p.B[1:]}
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "A has 256 values and B 127, rank 2 with 128 inputs and 64 outputs needs 256 and 128") {
		t.Errorf("short B: %v", err)
	}
	a.Pairs[k] = p
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := a.WritePEFT(dir); err != nil {
		t.Fatal(err)
	}
	a.Rank = 0
	if err := a.WritePEFT(dir); err == nil {
		t.Fatal("wrote a rank-0 adapter")
	}
	if b, err := Read(dir); err != nil || b.CheckBase(s) != nil {
		t.Fatalf("a failed write damaged the previous adapter: %v", err)
	}
}

func TestLoRACheckBase(t *testing.T) {
	a, s := randomLoRA(t, model.ArchQwen2, 4)
	other := func(f func(s *model.Shape)) model.Shape {
		c := s
		f(&c)
		return c
	}
	cases := []struct {
		name string
		base model.Shape
		want string
	}{
		{"fewer kv heads", other(func(s *model.Shape) { s.KVHeads = 1 }), "model.layers.0.self_attn.k_proj maps 64 to 32 features, the qwen2 base model's maps 64 to 16"},
		{"wider ffn", other(func(s *model.Shape) { s.FFN = 256 }), "mlp.gate_proj maps 64 to 128 features, the qwen2 base model's maps 64 to 256"},
		{"more layers", other(func(s *model.Shape) { s.Layers = 3 }), "model.layers.2.self_attn.q_proj is not adapted, the base model has 3 layers"},
		{"fewer layers", other(func(s *model.Shape) { s.Layers = 1 }), "the adapter has layer 1, the base model has 1 layers"},
	}
	q3, _ := model.DefaultShape(model.ArchQwen3)
	cases = append(cases, struct {
		name string
		base model.Shape
		want string
	}{"qwen3 base", q3, "q_proj maps 64 to 64 features, the qwen3 base model's maps 64 to 128"})
	for _, c := range cases {
		if err := a.CheckBase(c.base); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	if err := a.CheckBase(s); err != nil {
		t.Fatal(err)
	}
}

// TestMergeLoRA checks W' = W + scale * B @ A through its action on a vector:
// W'x = Wx + scale * B(Ax).
func TestMergeLoRA(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const in, out, r = 7, 5, 3
	p := LoRAPair{In: in, Out: out, A: make([]float32, r*in), B: make([]float32, out*r)}
	w := make([]float32, out*in)
	x := make([]float64, in)
	for _, v := range [][]float32{p.A, p.B, w} {
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
	}
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	cfg := LoRAConfig{Rank: r, Alpha: 6}
	if cfg.Scale() != 2 {
		t.Fatalf("scale %v, want alpha/r = 2", cfg.Scale())
	}
	cfg.RSLoRA = true
	if math.Abs(cfg.Scale()-6/math.Sqrt(3)) > 1e-15 {
		t.Fatalf("rsLoRA scale %v, want alpha/sqrt(r)", cfg.Scale())
	}
	matvec := func(m []float32, rows, cols int, v []float64) []float64 {
		y := make([]float64, rows)
		for i := range rows {
			for j := range cols {
				y[i] += float64(m[i*cols+j]) * v[j]
			}
		}
		return y
	}
	merged := slices.Clone(w)
	if err := MergeLoRA(merged, p, cfg.Scale()); err != nil {
		t.Fatal(err)
	}
	base, ab, got := matvec(w, out, in, x), matvec(p.B, out, r, matvec(p.A, r, in, x)), matvec(merged, out, in, x)
	for i := range out {
		if want := base[i] + cfg.Scale()*ab[i]; math.Abs(got[i]-want) > 1e-5 {
			t.Fatalf("row %d: %v, want %v", i, got[i], want)
		}
	}
	if err := MergeLoRA(w[1:], p, 1); err == nil || !strings.Contains(err.Error(), "weight of 34 values, the pair is 5 x 7") {
		t.Errorf("wrong weight size: %v", err)
	}
	// A scale within float32's range can still overflow the merged weight.
	if err := MergeLoRA(slices.Clone(w), p, math.MaxFloat32); err == nil || !strings.Contains(err.Error(), "the merged weight holds") {
		t.Errorf("overflowing merge: %v", err)
	}
	p.B = p.B[1:]
	if err := MergeLoRA(w, p, 1); err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("wrong B size: %v", err)
	}
}

func TestLoRATargetDims(t *testing.T) {
	s := model.Presets["qwen3-4b"]
	for target, want := range map[string][2]int{
		"q_proj": {2560, 4096}, "k_proj": {2560, 1024}, "v_proj": {2560, 1024}, "o_proj": {4096, 2560},
		"gate_proj": {2560, 9728}, "up_proj": {2560, 9728}, "down_proj": {9728, 2560},
	} {
		in, out, err := LoRATargetDims(s, target)
		if err != nil || in != want[0] || out != want[1] {
			t.Errorf("%s: %d -> %d (%v), want %v", target, in, out, err, want)
		}
	}
	if _, _, err := LoRATargetDims(s, "embed_tokens"); err == nil || !strings.Contains(err.Error(), "unknown target module") {
		t.Errorf("embed_tokens: %v", err)
	}
}

func TestLoRATargetsNameEachOther(t *testing.T) {
	for i, m := range LoRATargets {
		if trainspec.LoRAShort(m) != trainspec.LoRATargets[i] || trainspec.LoRAModule(trainspec.LoRATargets[i]) != m {
			t.Errorf("%s and %s do not name each other", m, trainspec.LoRATargets[i])
		}
	}
}
