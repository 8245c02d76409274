// Package peft holds LoRA adapters: in Hugging Face PEFT's directory layout (read, written
// and merged into a checkpoint, merge.go) and as llama.cpp's LoRA GGUF (lora_gguf.go), for a
// base model of a given shape (package model).
package peft

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/jsonfile"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/trainspec"
)

// A LoRA adapter in Hugging Face PEFT's layout: a directory holding adapter_config.json and
// adapter_model.safetensors, which peft.PeftModel.from_pretrained(base, dir) loads.
const (
	ConfigFile  = "adapter_config.json"
	WeightsFile = "adapter_model.safetensors"
)

// LoRATargets are the linear layers an adapter may adapt, by Hugging Face's module names,
// in the order a layer applies them: trainspec.LoRATargets' short names with "_proj".
var LoRATargets = loraModules(trainspec.LoRATargets)

func loraModules(short []string) []string {
	out := make([]string, len(short))
	for i, t := range short {
		out[i] = trainspec.LoRAModule(t)
	}
	return out
}

// loraGroup is the submodule of a decoder layer holding each target.
var loraGroup = map[string]string{
	"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
	"gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp",
}

// MaxLoRARank bounds an adapter's rank before anything is allocated; real adapters use 8..256.
const MaxLoRARank = 1 << 14

// peftPrefix is what PEFT's LoraModel puts before the base model's module names.
const peftPrefix = "base_model.model."

// LoRAConfig is what adapter_config.json says about an adapter.
type LoRAConfig struct {
	Rank    int      // r
	Alpha   float64  // lora_alpha
	Targets []string // target_modules, a subset of LoRATargets
	Dropout float64  // lora_dropout: training only
	// RSLoRA scales by alpha/sqrt(rank) instead of alpha/rank (use_rslora).
	RSLoRA bool
	// BaseModel is base_model_name_or_path: informational, PEFT loads onto the model given.
	BaseModel string
}

// LoRAKey names one adapted linear layer.
type LoRAKey struct {
	Layer  int
	Target string // one of LoRATargets
}

// LoRAPair is the low-rank update of one linear layer W [Out, In]: W' = W + scale * B @ A.
type LoRAPair struct {
	In, Out int
	A       []float32 // [rank, In], row-major, as PEFT's lora_A.weight
	B       []float32 // [Out, rank], as PEFT's lora_B.weight
}

// LoRAAdapter is a LoRA adapter: its configuration and a pair per adapted layer.
type LoRAAdapter struct {
	LoRAConfig
	Pairs map[LoRAKey]LoRAPair
}

// Scale is the factor PEFT multiplies B @ A by: alpha/rank, or alpha/sqrt(rank) with rsLoRA.
func (c LoRAConfig) Scale() float64 {
	if c.RSLoRA {
		return c.Alpha / math.Sqrt(float64(c.Rank))
	}
	return c.Alpha / float64(c.Rank)
}

// Validate checks the configuration on its own.
func (c LoRAConfig) Validate() error {
	switch {
	case c.Rank <= 0 || c.Rank > MaxLoRARank:
		return fmt.Errorf("lora: rank %d must be in 1..%d", c.Rank, MaxLoRARank)
	case math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0) || c.Alpha <= 0:
		// llama.cpp reads an alpha of 0 as "no alpha" (scale 1), so 0 cannot convert.
		return fmt.Errorf("lora: alpha %v must be finite and positive", c.Alpha)
	case math.IsNaN(c.Dropout) || c.Dropout < 0 || c.Dropout >= 1:
		return fmt.Errorf("lora: dropout %v must be in [0, 1)", c.Dropout)
	case len(c.Targets) == 0:
		return errors.New("lora: no target modules")
	}
	seen := map[string]bool{}
	for _, t := range c.Targets {
		if loraGroup[t] == "" {
			return fmt.Errorf("lora: unknown target module %q (supported: %s)", t, strings.Join(LoRATargets, ", "))
		}
		if seen[t] {
			return fmt.Errorf("lora: target module %q listed twice", t)
		}
		seen[t] = true
	}
	return nil
}

// LoRATargetDims returns the input and output features of a target's linear layer in a model
// of shape s (k_proj and v_proj are KVHeads x HeadDim wide under grouped-query attention).
func LoRATargetDims(s model.Shape, target string) (in, out int, err error) {
	if loraGroup[target] == "" {
		return 0, 0, fmt.Errorf("lora: unknown target module %q (supported: %s)", target, strings.Join(LoRATargets, ", "))
	}
	name := loraModuleName(0, target) + ".weight"
	for _, t := range s.Tensors() {
		if t.Name == name {
			return int(t.Shape[1]), int(t.Shape[0]), nil
		}
	}
	return 0, 0, fmt.Errorf("lora: a %s model has no %s", s.Arch, name)
}

// NewLoRAAdapter returns an adapter of every target of every layer of a model of shape s,
// with zero A and B.
func NewLoRAAdapter(cfg LoRAConfig, s model.Shape) (*LoRAAdapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &LoRAAdapter{LoRAConfig: cfg, Pairs: map[LoRAKey]LoRAPair{}}
	a.Targets = slices.Clone(cfg.Targets)
	sortTargets(a.Targets)
	for _, t := range cfg.Targets {
		in, out, err := LoRATargetDims(s, t)
		if err != nil {
			return nil, err
		}
		for l := range s.Layers {
			a.Pairs[LoRAKey{l, t}] = LoRAPair{In: in, Out: out,
				A: make([]float32, cfg.Rank*in), B: make([]float32, out*cfg.Rank)}
		}
	}
	return a, nil
}

// sortTargets puts targets in LoRATargets' order.
func sortTargets(targets []string) {
	slices.SortFunc(targets, func(x, y string) int { return slices.Index(LoRATargets, x) - slices.Index(LoRATargets, y) })
}

// loraModuleName is the Hugging Face module a target of a layer is.
func loraModuleName(layer int, target string) string {
	return "model.layers." + strconv.Itoa(layer) + "." + loraGroup[target] + "." + target
}

// TensorName is the name PEFT saves a pair's A (ab "A") or B (ab "B") under.
func TensorName(k LoRAKey, ab string) string {
	return peftPrefix + loraModuleName(k.Layer, k.Target) + ".lora_" + ab + ".weight"
}

// ParseLoRAName parses a pair's weight name without PEFT's prefix,
// model.layers.L.GROUP.TARGET.lora_X.weight (the torch plugin's name), into its key and "A"
// or "B".
func ParseLoRAName(name string) (k LoRAKey, ab string, ok bool) {
	return parseTensorName(peftPrefix + name)
}

// parseTensorName is TensorName's inverse.
func parseTensorName(name string) (k LoRAKey, ab string, ok bool) {
	rest, found := strings.CutPrefix(name, peftPrefix+"model.layers.")
	if !found {
		return k, "", false
	}
	parts := strings.Split(rest, ".") // N, group, target, lora_X, weight
	if len(parts) != 5 || parts[4] != "weight" || (parts[3] != "lora_A" && parts[3] != "lora_B") {
		return k, "", false
	}
	layer, err := strconv.Atoi(parts[0])
	if err != nil || layer < 0 || strconv.Itoa(layer) != parts[0] || loraGroup[parts[2]] != parts[1] {
		return k, "", false
	}
	return LoRAKey{layer, parts[2]}, parts[3][len("lora_"):], true
}

// Validate checks that every pair belongs to a configured target and has A [rank, In] and
// B [Out, rank] of finite values, and that every target has pairs.
func (a *LoRAAdapter) Validate() error {
	if err := a.LoRAConfig.Validate(); err != nil {
		return err
	}
	if len(a.Pairs) == 0 {
		return errors.New("lora: the adapter has no weights")
	}
	has := map[string]bool{}
	for _, k := range a.Keys() {
		p := a.Pairs[k]
		name := loraModuleName(k.Layer, k.Target)
		if !slices.Contains(a.Targets, k.Target) {
			return fmt.Errorf("lora: %s is not among the target modules %v", name, a.Targets)
		}
		if k.Layer < 0 {
			return fmt.Errorf("lora: negative layer %d", k.Layer)
		}
		if p.In <= 0 || p.Out <= 0 || len(p.A) != a.Rank*p.In || len(p.B) != p.Out*a.Rank {
			return fmt.Errorf("lora: %s: A has %d values and B %d, rank %d with %d inputs and %d outputs needs %d and %d",
				name, len(p.A), len(p.B), a.Rank, p.In, p.Out, a.Rank*p.In, p.Out*a.Rank)
		}
		for _, m := range []struct {
			ab string
			v  []float32
		}{{"A", p.A}, {"B", p.B}} {
			if i := slices.IndexFunc(m.v, nonFinite); i >= 0 {
				return fmt.Errorf("lora: %s: %s holds %v at %d", name, m.ab, m.v[i], i)
			}
		}
		has[k.Target] = true
	}
	for _, t := range a.Targets {
		if !has[t] {
			return fmt.Errorf("lora: target module %s has no weights", t)
		}
	}
	return nil
}

// Keys returns the pairs' keys by layer, then in LoRATargets' order.
func (a *LoRAAdapter) Keys() []LoRAKey {
	return slices.SortedFunc(maps.Keys(a.Pairs), compareLoRAKeys)
}

func compareLoRAKeys(x, y LoRAKey) int {
	if x.Layer != y.Layer {
		return x.Layer - y.Layer
	}
	return slices.Index(LoRATargets, x.Target) - slices.Index(LoRATargets, y.Target)
}

// CheckBase checks that the adapter fits a base model of shape s: every target of every layer
// is adapted, with that layer's input and output features, and no other layer is.
func (a *LoRAAdapter) CheckBase(s model.Shape) error {
	if err := a.Validate(); err != nil {
		return err
	}
	for _, t := range a.Targets {
		in, out, err := LoRATargetDims(s, t)
		if err != nil {
			return err
		}
		for l := range s.Layers {
			p, ok := a.Pairs[LoRAKey{l, t}]
			if !ok {
				return fmt.Errorf("lora: %s is not adapted, the base model has %d layers", loraModuleName(l, t), s.Layers)
			}
			if p.In != in || p.Out != out {
				return fmt.Errorf("lora: %s maps %d to %d features, the %s base model's maps %d to %d (wrong base model?)",
					loraModuleName(l, t), p.In, p.Out, s.Arch, in, out)
			}
		}
	}
	for _, k := range a.Keys() {
		if k.Layer >= s.Layers {
			return fmt.Errorf("lora: the adapter has layer %d, the base model has %d layers (wrong base model?)", k.Layer, s.Layers)
		}
	}
	return nil
}

// MergeLoRA adds the pair's update to w, the base weight [p.Out, p.In] in row-major order:
// w += scale * B @ A. scale is the adapter's Scale().
func MergeLoRA(w []float32, p LoRAPair, scale float64) error {
	if len(w) != p.Out*p.In {
		return fmt.Errorf("lora: merge into a weight of %d values, the pair is %d x %d", len(w), p.Out, p.In)
	}
	if p.In <= 0 || len(p.A)%p.In != 0 || len(p.B) != p.Out*(len(p.A)/p.In) {
		return fmt.Errorf("lora: A (%d values) and B (%d values) do not fit %d x %d", len(p.A), len(p.B), p.Out, p.In)
	}
	r := len(p.A) / p.In
	// Rows are independent: spread them over the cores (a 4B model's merge is ~1e11 multiply-adds).
	workers := min(runtime.GOMAXPROCS(0), p.Out)
	var wg sync.WaitGroup
	for wk := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float64, p.In)
			for o := p.Out * wk / workers; o < p.Out*(wk+1)/workers; o++ {
				clear(row)
				for k, b := range p.B[o*r : (o+1)*r] {
					for i, x := range p.A[k*p.In : (k+1)*p.In] {
						row[i] += float64(b) * float64(x)
					}
				}
				for i, v := range row {
					w[o*p.In+i] += float32(scale * v)
				}
			}
		}()
	}
	wg.Wait()
	if i := slices.IndexFunc(w, nonFinite); i >= 0 {
		return fmt.Errorf("lora: the merged weight holds %v at %d (the adapter's scale is %g)", w[i], i, scale)
	}
	return nil
}

func nonFinite(x float32) bool { return math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) }

// fitsFloat32 reports whether v keeps its meaning as a float32 (the GGUF's alpha, the
// plugin's scale): finite, and not rounded to infinity or to zero.
func fitsFloat32(v float64) bool {
	f := float32(v)
	return !nonFinite(f) && (f != 0 || v == 0)
}

// peftConfigJSON is adapter_config.json as PEFT's LoraConfig writes it. Fields that change
// what the weights mean are decoded so that a value umad cannot honour is refused.
type peftConfigJSON struct {
	PeftType          string          `json:"peft_type"`
	TaskType          *string         `json:"task_type"`
	BaseModel         *string         `json:"base_model_name_or_path"`
	R                 int             `json:"r"`
	LoraAlpha         float64         `json:"lora_alpha"`
	LoraDropout       float64         `json:"lora_dropout"`
	TargetModules     json.RawMessage `json:"target_modules"`
	Bias              string          `json:"bias"`
	FanInFanOut       bool            `json:"fan_in_fan_out"`
	UseRSLoRA         bool            `json:"use_rslora"`
	UseDoRA           bool            `json:"use_dora"`
	LoraBias          bool            `json:"lora_bias"`
	ModulesToSave     []string        `json:"modules_to_save"`
	LayersToTransform json.RawMessage `json:"layers_to_transform"`
	LayersPattern     json.RawMessage `json:"layers_pattern"`
	LayerReplication  json.RawMessage `json:"layer_replication"`
	// ALoRAInvocation makes an activated LoRA: the adapter applies only after these tokens.
	ALoRAInvocation json.RawMessage `json:"alora_invocation_tokens"`
	RankPattern     map[string]any  `json:"rank_pattern"`
	AlphaPattern    map[string]any  `json:"alpha_pattern"`
}

// maxPEFTConfigBytes bounds adapter_config.json; real ones are about 1 KB.
const maxPEFTConfigBytes = 1 << 20

func readPEFTConfig(path string) (LoRAConfig, error) {
	raw, err := jsonfile.Read(path, maxPEFTConfigBytes)
	if err != nil {
		return LoRAConfig{}, err
	}
	var j peftConfigJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return LoRAConfig{}, fmt.Errorf("parse %s: %w", filepath.Base(path), err)
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"lora_alpha", j.LoraAlpha}, {"lora_dropout", j.LoraDropout}} {
		if !fitsFloat32(f.v) {
			return LoRAConfig{}, fmt.Errorf("%s: %s %g is outside float32's range", filepath.Base(path), f.key, f.v)
		}
	}
	isNull := func(m json.RawMessage) bool { return len(m) == 0 || string(m) == "null" }
	var targets []string
	if isNull(j.TargetModules) {
		j.TargetModules = []byte("[]") // refused below as no targets
	}
	switch {
	case j.PeftType != "LORA":
		return LoRAConfig{}, fmt.Errorf("peft_type %q is not LORA", j.PeftType)
	case j.TaskType != nil && *j.TaskType != "CAUSAL_LM":
		return LoRAConfig{}, fmt.Errorf("task_type %q is not CAUSAL_LM", *j.TaskType)
	case j.Bias != "none" && j.Bias != "":
		return LoRAConfig{}, fmt.Errorf("bias %q is not supported (want none)", j.Bias)
	case j.FanInFanOut:
		return LoRAConfig{}, errors.New("fan_in_fan_out is for GPT-2 style Conv1D layers, not these models")
	case j.UseDoRA:
		return LoRAConfig{}, errors.New("DoRA adapters (use_dora) are not supported")
	case j.LoraBias:
		return LoRAConfig{}, errors.New("lora_bias is not supported")
	case len(j.ModulesToSave) > 0:
		return LoRAConfig{}, fmt.Errorf("modules_to_save %v is not supported: the adapter may hold only LoRA pairs", j.ModulesToSave)
	case !isNull(j.LayersToTransform) || !isNull(j.LayersPattern):
		return LoRAConfig{}, errors.New("layers_to_transform is not supported: adapt every layer")
	case !isNull(j.LayerReplication):
		return LoRAConfig{}, errors.New("layer_replication is not supported: it changes the base model's layers")
	case !isNull(j.ALoRAInvocation):
		return LoRAConfig{}, errors.New("activated LoRA (alora_invocation_tokens) is not supported: the adapter would apply to every token")
	case len(j.RankPattern) > 0 || len(j.AlphaPattern) > 0:
		return LoRAConfig{}, errors.New("rank_pattern and alpha_pattern are not supported: one rank and alpha for all layers")
	case json.Unmarshal(j.TargetModules, &targets) != nil:
		return LoRAConfig{}, fmt.Errorf("target_modules %s must be a list of module names (regular expressions and all-linear are not supported)", j.TargetModules)
	}
	c := LoRAConfig{Rank: j.R, Alpha: j.LoraAlpha, Targets: targets, Dropout: j.LoraDropout, RSLoRA: j.UseRSLoRA}
	if j.BaseModel != nil {
		c.BaseModel = *j.BaseModel
	}
	sortTargets(c.Targets) // PEFT saves target_modules from a set, in any order
	return c, c.Validate()
}

// Read reads a PEFT LoRA adapter directory.
func Read(dir string) (*LoRAAdapter, error) {
	a, err := readPEFT(dir)
	if err != nil {
		return nil, fmt.Errorf("read peft adapter %s: %w", dir, err)
	}
	return a, nil
}

func readPEFT(dir string) (*LoRAAdapter, error) {
	cfg, err := readPEFTConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	st, err := safetensors.Open(filepath.Join(dir, WeightsFile))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	a := &LoRAAdapter{LoRAConfig: cfg, Pairs: map[LoRAKey]LoRAPair{}}
	// Shapes are checked from the header before any tensor is read.
	type halves struct{ a, b []int64 }
	found := map[LoRAKey]*halves{}
	for _, name := range st.Names() {
		k, ab, ok := parseTensorName(name)
		if !ok {
			return nil, fmt.Errorf("tensor %q is not a LoRA weight of a decoder layer (want %s)", name, TensorName(LoRAKey{0, "q_proj"}, "A"))
		}
		shape, _ := st.Shape(name)
		if len(shape) != 2 {
			return nil, fmt.Errorf("tensor %q has shape %v, want a matrix", name, shape)
		}
		h := found[k]
		if h == nil {
			h = &halves{}
			found[k] = h
		}
		if ab == "A" {
			h.a = shape
		} else {
			h.b = shape
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(found), compareLoRAKeys) {
		h := found[k]
		if h.a == nil || h.b == nil {
			missing := map[bool]string{true: "A", false: "B"}[h.a == nil]
			return nil, fmt.Errorf("tensor %q is missing", TensorName(k, missing))
		}
		if h.a[0] != int64(cfg.Rank) || h.b[1] != int64(cfg.Rank) {
			return nil, fmt.Errorf("%s: lora_A is %v and lora_B %v, rank %d needs [%d, in] and [out, %d]",
				loraModuleName(k.Layer, k.Target), h.a, h.b, cfg.Rank, cfg.Rank, cfg.Rank)
		}
		p := LoRAPair{In: int(h.a[1]), Out: int(h.b[0])}
		if p.A, err = peftTensor(st, TensorName(k, "A")); err != nil {
			return nil, err
		}
		if p.B, err = peftTensor(st, TensorName(k, "B")); err != nil {
			return nil, err
		}
		a.Pairs[k] = p
	}
	return a, a.Validate()
}

func peftTensor(st *safetensors.File, name string) ([]float32, error) {
	t, err := st.Tensor(name)
	if err != nil {
		return nil, err
	}
	return t.F32()
}

// WritePEFT writes the adapter as a PEFT directory (F32 weights), replacing dir atomically.
func (a *LoRAAdapter) WritePEFT(dir string) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("write peft adapter %s: %w", dir, err)
	}
	return atomicfile.WriteDir(dir, func(tmp string) error {
		if err := jsonfile.Write(filepath.Join(tmp, ConfigFile), a.peftConfig()); err != nil {
			return err
		}
		var ts []safetensors.NamedTensor
		for _, k := range a.Keys() {
			p := a.Pairs[k]
			ts = append(ts,
				safetensors.NamedTensor{Name: TensorName(k, "A"), DType: safetensors.F32, Shape: []int64{int64(a.Rank), int64(p.In)}, Write: f32Writer(p.A)},
				safetensors.NamedTensor{Name: TensorName(k, "B"), DType: safetensors.F32, Shape: []int64{int64(p.Out), int64(a.Rank)}, Write: f32Writer(p.B)})
		}
		return safetensors.Write(filepath.Join(tmp, WeightsFile), ts, map[string]string{"format": "pt"})
	})
}

// peftConfig is adapter_config.json with every field PEFT's LoraConfig reads, set to what
// the weights mean.
func (a *LoRAAdapter) peftConfig() map[string]any {
	var base any
	if a.BaseModel != "" {
		base = a.BaseModel
	}
	return map[string]any{
		"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base, "revision": nil,
		"r": a.Rank, "lora_alpha": a.Alpha, "lora_dropout": a.Dropout, "target_modules": a.Targets,
		"bias": "none", "fan_in_fan_out": false, "use_rslora": a.RSLoRA, "use_dora": false,
		"modules_to_save": nil, "layers_to_transform": nil, "layers_pattern": nil,
		"rank_pattern": map[string]any{}, "alpha_pattern": map[string]any{},
		"init_lora_weights": true, "inference_mode": true,
	}
}

// f32Writer writes values as little-endian F32.
func f32Writer(v []float32) gguf.WriteFunc {
	return func(w io.Writer) error {
		b, err := gguf.EncodeTensor(gguf.TypeF32, v)
		if err == nil {
			_, err = w.Write(b)
		}
		return err
	}
}
