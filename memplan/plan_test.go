package memplan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/trainspec"
)

// tinyAgent is the tiny qwen2 shape with a 512-token vocabulary: 107,072 parameters
// (embedding 512x64 = 32,768; per layer 37,120: q 4,096 + k 2,048 + v 2,048 + o 4,096, their
// biases 128, MLP 3 x 8,192, two norms 128; final norm 64).
func tinyAgent(t *testing.T) Agent {
	t.Helper()
	s, err := model.DefaultShape(model.ArchQwen2)
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = 512
	return Agent{Shape: s, MicroBatchSeqs: 4, PromptTokens: 24, ResponseTokens: 8, Slots: 4, SeqContext: 32, KVType: "f32"}
}

func lineOf(t *testing.T, p *Plan, agent int, prefix string) Line {
	t.Helper()
	for _, l := range p.Agents[agent].Lines {
		if strings.HasPrefix(l.Name, prefix) {
			return l
		}
	}
	t.Fatalf("no line %q in %+v", prefix, p.Agents[agent].Lines)
	return Line{}
}

func checkLines(t *testing.T, p *Plan, want map[string]int64) {
	t.Helper()
	for name, bytes := range want {
		if got := lineOf(t, p, 0, name).Bytes; got != bytes {
			t.Errorf("%s: %d bytes, want %d", name, got, bytes)
		}
	}
}

func TestTinyShapeByHand(t *testing.T) {
	a := tinyAgent(t)
	if n := a.Shape.Params(); n != 107_072 {
		t.Fatalf("tiny shape has %d parameters, want 107,072", n)
	}
	p, err := New([]Agent{a})
	if err != nil {
		t.Fatal(err)
	}
	const P = 107_072
	// Activations: T = 4 x 32 = 128 tokens, 32 response rows, L = 32.
	perToken := int64(6*64 + 6*64 + 2*32 + 4*128) // 1,344 values per token and layer
	layer := 128*perToken*4 + 4*32*32*(4*4+1)     // plus each sequence's f32 softmax and mask
	head := int64(3*128*64*4 + 2*32*64*4 +        // final norm; response rows and their gradient
		6*32*512*4 + // six logit buffers of the 32 rows (fewer than the 32,768 of a 16M chunk)
		32*512*4 + // their log-softmax, kept for the backward
		2*512*64*4) // the lm_head's f32 gradient and the embedding's dense one
	work := int64(2*4*4*32*32 + 4*128*128*4) // scores being built; the MLP-wide backward buffers
	checkLines(t, p, map[string]int64{
		"trainer weights (f32)":   4 * P,
		"AdamW moments":           8 * P,
		"reference model (f32)":   4 * P,
		"gradients":               4 * P,
		"activations":             2*layer + 2*128*16*4 + head + work,
		"optimizer step":          4 * 512 * 64, // AdamW's denominator of the embedding
		"sync export":             4 * P,
		"checkpoint":              12 * P,
		"llama.cpp weights (F32)": 4 * P,
		// 4 streams of 32 cells padded to 256, 2 layers, 2 KV heads of 16 + 16, f32.
		"KV cache": 4 * 256 * 2 * 2 * 32 * 4,
	})
	a.GradCheckpoint = true
	if p, err = New([]Agent{a}); err != nil {
		t.Fatal(err)
	}
	// Layer inputs of both layers, then one layer recomputed.
	checkLines(t, p, map[string]int64{"activations": 2*128*64*4 + layer + 2*128*16*4 + head + work})

	// --dtype bf16 halves what the layers keep (the attention softmax and the logits stay
	// f32) and adds the bf16 copies of one layer's and the lm_head's masters.
	a.DType = BF16
	if p, err = New([]Agent{a}); err != nil {
		t.Fatal(err)
	}
	layer16 := 128*perToken*2 + 4*32*32*(4*4+1)
	head16 := int64(3*128*64*2 + 2*32*64*2 + 6*32*512*4 + 32*512*4 + 2*512*64*4)
	work16 := int64(2*4*4*32*32 + 4*128*128*2)
	copies := int64(2 * (512*64 + (P-512*64)/2))
	checkLines(t, p, map[string]int64{"trainer weights (f32 masters, bf16 compute)": 4 * P, "gradients": 4 * P,
		"reference model (bf16)": 2 * P, "activations": 2*128*64*2 + layer16 + 2*128*16*2 + head16 + work16 + copies})
}

// TestSyncModes: the in-place sync writes into the loaded model, so only --sync file holds a
// second llama.cpp model (weights, KV cache and compute) while it loads.
func TestSyncModes(t *testing.T) {
	a := tinyAgent(t)
	p, err := New([]Agent{a})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range p.Agents[0].Lines {
		if strings.HasPrefix(l.Name, "sync: next") {
			t.Errorf("in-place sync plans %q", l.Name)
		}
	}
	a.FileSync = true
	if p, err = New([]Agent{a}); err != nil {
		t.Fatal(err)
	}
	llama := lineOf(t, p, 0, "llama.cpp weights").Bytes + lineOf(t, p, 0, "KV cache").Bytes + lineOf(t, p, 0, "llama.cpp compute").Bytes
	if got := lineOf(t, p, 0, "sync: next llama.cpp model"); got.Bytes != llama || len(got.Phases) != 1 || got.Phases[0] != PhaseSync {
		t.Errorf("file sync line %+v, want %d bytes in the sync phase", got, llama)
	}

	// A LoRA run syncs adapters in place; by file it reloads the merged model, no adapters.
	a.LoRA = LoRA{Rank: 4}
	for _, file := range []bool{false, true} {
		a.FileSync = file
		if p, err = New([]Agent{a}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range p.Agents[0].Lines {
			if strings.HasPrefix(l.Name, "sync: next") {
				names = append(names, l.Name)
			}
		}
		want := "sync: next adapters"
		if file {
			want = "sync: next llama.cpp model"
		}
		if len(names) != 1 || names[0] != want {
			t.Errorf("LoRA, file sync %v: sync lines %q, want %q", file, names, want)
		}
	}
}

func TestQwen25_3BByHand(t *testing.T) {
	const P = 3_085_938_688 // the published count (model/preset_test.go)
	a := Agent{Shape: model.Presets["qwen2.5-3b"], MicroBatchSeqs: 5, PromptTokens: 5120, ResponseTokens: 1024,
		Slots: 16, SeqContext: 6144, KVType: "f16", RolloutType: gguf.TypeF32}
	p, err := New([]Agent{a})
	if err != nil {
		t.Fatal(err)
	}
	checkLines(t, p, map[string]int64{
		"trainer weights (f32)": 4 * P, // 11.5 GiB
		"AdamW moments":         8 * P,
		"reference model":       4 * P,
		"gradients":             4 * P,
		"optimizer step":        4 * 151_936 * 2048, // AdamW temporary of the tied embedding
		"llama.cpp weights":     4 * P,
		// 16 streams of 6,144 cells (a multiple of 256), 36 layers, 2 KV heads of 128 + 128, f16.
		"KV cache": 16 * 6144 * 36 * 2 * 256 * 2, // 3.38 GiB
	})

	// LoRA rank 16 on all seven projections with a bf16 base: per layer 16 x (in + out) of
	// q 2048+2048, k and v 2048+256, o 2048+2048, gate and up 2048+11008, down 11008+2048.
	lora := a
	lora.LoRA = LoRA{Rank: 16, BaseDType: BF16}
	const adapters = 36 * 16 * (4096 + 2*2304 + 4096 + 3*13056) // 29,933,568
	if p, err = New([]Agent{lora}); err != nil {
		t.Fatal(err)
	}
	checkLines(t, p, map[string]int64{
		"base weights (bf16, frozen)": 2 * P,
		"LoRA adapters":               4 * adapters,
		"AdamW moments":               8 * adapters,
		"gradients":                   4 * adapters,
		"optimizer step":              4 * 16 * 11008, // the widest adapter matrix
		"checkpoint":                  12 * adapters,
		"llama.cpp weights":           4*P + 4*adapters,
	})
	for _, l := range p.Agents[0].Lines {
		if strings.HasPrefix(l.Name, "reference") {
			t.Errorf("LoRA's reference is the base; the plan has %s", Size(l.Bytes))
		}
	}

	// --dtype bf16: f32 masters, gradients and moments; the frozen reference in bf16.
	bf := a
	bf.DType = BF16
	if p, err = New([]Agent{bf}); err != nil {
		t.Fatal(err)
	}
	checkLines(t, p, map[string]int64{"trainer weights (f32 masters, bf16 compute)": 4 * P,
		"AdamW moments": 8 * P, "gradients": 4 * P, "reference model (bf16)": 2 * P})
}

// The peak is every agent's steady memory plus the largest phase of any one agent.
func TestPeakSharesTheMachine(t *testing.T) {
	a := tinyAgent(t)
	one, err := New([]Agent{a})
	if err != nil {
		t.Fatal(err)
	}
	two, err := New([]Agent{a, a})
	if err != nil {
		t.Fatal(err)
	}
	p1, _, phase := one.Peak(false)
	p2, _, _ := two.Peak(false)
	steady := one.Agents[0].steady(false)
	if p2 != p1+steady {
		t.Errorf("two agents peak at %d, want one agent's %d plus its steady %d", p2, p1, steady)
	}
	if phase != PhaseTrain {
		t.Errorf("the tiny plan peaks in %q, want training", phase)
	}
}

func TestTableAndAdvice(t *testing.T) {
	a := Agent{Shape: model.Presets["qwen2.5-3b"], MicroBatchSeqs: 5, PromptTokens: 512, ResponseTokens: 512,
		Slots: 1024, SeqContext: 1024, KVType: "f16", ModelPlacement: trainspec.ModelPlacement{GradCheckpoint: true}, LoRA: LoRA{Rank: 16, BaseDType: BF16}}
	p, err := New([]Agent{a, a})
	if err != nil {
		t.Fatal(err)
	}
	b := Budget{Host: 64 << 30}
	var out bytes.Buffer
	p.Write(&out, b)
	for _, want := range []string{"agent 0", "agent 1", "KV cache (1024 x 1024, f16)", "GiB", "does not fit", "MemAvailable"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if p.Fits(b) {
		t.Fatal("two 3B agents with 1,024 slots each fit in 64 GiB")
	}
	adv, err := Advice([]Agent{a, a}, b)
	if err != nil {
		t.Fatal(err)
	}
	// 2 x 1024 x 1024 cells of f16 KV are 72 GiB: halving the slots saves the most.
	if !strings.HasPrefix(adv, "the run needs") || !strings.Contains(adv, "largest saving first: --slots 512") || strings.Contains(adv, "\n") {
		t.Errorf("advice %q: want one line that puts --slots first", adv)
	}
	if strings.Contains(adv, "--grad-checkpoint") || strings.Contains(adv, "--lora") || strings.Contains(adv, "bf16") {
		t.Errorf("advice %q suggests what the run already does", adv)
	}
	// Full fine-tuning in f32 without checkpointing: every change, each named by its flags.
	full := a
	full.LoRA, full.GradCheckpoint, full.Slots = LoRA{}, false, 16
	adv, err = Advice([]Agent{full, full}, Budget{Host: 16 << 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--lora-rank 16 --lora-bf16-base (-", "--dtype bf16 (-", "-g 2 (-", "--slots 8 (-", "--grad-checkpoint (-"} {
		if !strings.Contains(adv, want) {
			t.Errorf("advice %q lacks %q", adv, want)
		}
	}
	if adv, err := Advice([]Agent{tinyAgent(t)}, b); adv != "" || err != nil {
		t.Errorf("a tiny run gets advice %q (%v)", adv, err)
	}
}

// A prompt limit that makes most of the plan is named in the advice; without --ctx (SeqContext
// 0) it sizes the KV cache too (issue 28: the advice for --prompt-limit 1e9 never named it).
func TestAdviceNamesThePromptLimit(t *testing.T) {
	a := Agent{Shape: model.Presets["qwen2.5-3b"], MicroBatchSeqs: 5, PromptTokens: 100000, ResponseTokens: 1024,
		Slots: 16, KVType: "f16", ModelPlacement: trainspec.ModelPlacement{GradCheckpoint: true}, LoRA: LoRA{Rank: 16, BaseDType: BF16}}
	p, err := New([]Agent{a})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p.Write(&out, Budget{Host: 16 << 30})
	if !strings.Contains(out.String(), "KV cache (16 x 101024, f16)") {
		t.Errorf("the KV cache is not sized for the prompt limit plus the response:\n%s", out.String())
	}
	adv, err := Advice([]Agent{a}, Budget{Host: 16 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(adv, "--prompt-limit 50000 (-") {
		t.Errorf("advice %q does not name --prompt-limit", adv)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"300MiB": 300 << 20, "48GiB": 48 << 30, "1.5 G": 3 << 29, "4096": 4096, "2t": 2 << 40, "64kb": 64 << 10} {
		if got, err := ParseSize(in); got != want || err != nil {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "0", "lots", "1e30", "NaN"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) took it", in)
		}
	}
}

func TestBadInput(t *testing.T) {
	for name, edit := range map[string]func(*Agent){
		"no micro-batch": func(a *Agent) { a.MicroBatchSeqs = 0 },
		"no slots":       func(a *Agent) { a.Slots = 0 },
		"kv type":        func(a *Agent) { a.KVType = "q4" },
		"dtype":          func(a *Agent) { a.DType = "fp8" },
		"lora target":    func(a *Agent) { a.LoRA = LoRA{Rank: 8, Targets: []string{"lm_head"}} },
		"shape":          func(a *Agent) { a.Shape.Layers = 0 },
	} {
		a := tinyAgent(t)
		edit(&a)
		if _, err := New([]Agent{a}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("no agents: no error")
	}
}
