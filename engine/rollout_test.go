package engine_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/sampler"
)

func TestMain(m *testing.M) { os.Exit(testmodel.Main(m)) }

var archs = arch.Names()

// slack widens a tolerance on llama.cpp's own consistency for GeLU models (Gemma 3): its CPU
// GeLU rounds each input to fp16 for a table lookup (GGML_GELU_FP16), so a last-bit change
// upstream (batch shape, adapter vs merged weights) can move a value by an fp16 step.
func slack(name string, tol float64) float64 {
	if d, _ := arch.Lookup(name); d.Activation != "silu" {
		return 50 * tol
	}
	return tol
}

func load(t *testing.T, arch string) *engine.Model {
	t.Helper()
	m, err := engine.LoadModel(testmodel.GGUF(t, arch), engine.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// exact are the settings under which llama.cpp's log-probs are exact (docs/ARCHITECTURE.md section 4).
func exact(slots int) engine.Options {
	return engine.Options{Slots: slots, SeqContext: 256, KVType: engine.KVF32, FlashAttn: engine.FlashOff}
}

func prompt(t *testing.T, m *engine.Model, text string) []int32 {
	t.Helper()
	toks, err := m.Tokenize(text, false, false)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

func run(t *testing.T, m *engine.Model, opt engine.Options, reqs []engine.Request) (map[uint64]engine.Result, *engine.Engine) {
	t.Helper()
	e, err := engine.New(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	out := map[uint64]engine.Result{}
	if err := e.Generate(context.Background(), reqs, func(r engine.Result) { out[r.Request.ID] = r }); err != nil {
		t.Fatal(err)
	}
	return out, e
}

// logSoftmax64 is an independent float64 log-softmax of logits/T.
func logSoftmax64(logits []float32, temp float64) []float64 {
	out := make([]float64, len(logits))
	mx := math.Inf(-1)
	for i, v := range logits {
		out[i] = float64(v) / temp
		mx = math.Max(mx, out[i])
	}
	var z float64
	for _, v := range out {
		z += math.Exp(v - mx)
	}
	lz := mx + math.Log(z)
	for i := range out {
		out[i] -= lz
	}
	return out
}

// For every generated token, the engine's log-prob and entropy equal a float64
// log-softmax of the logits llama.cpp gives for that position when the sequence is
// decoded again from scratch, one token at a time, in a separate context.
func TestLogProbsAreExact(t *testing.T) {
	for _, arch := range archs {
		for _, temp := range []float64{1.0, 0.7} {
			m := load(t, arch)
			p := prompt(t, m, "What is 3 + 4?")
			res, _ := run(t, m, exact(4), []engine.Request{{ID: 1, Prompt: p, K: 3, MaxTokens: 12,
				Params: sampler.Params{Temperature: temp, TopP: 0.95}, Seed: 3}})
			r := res[1]
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			// The reference decodes through the binding itself, on its own load of the file.
			ref, err := llama.LoadModel(testmodel.GGUF(t, arch), llama.ModelParams{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := ref.NewContext(llama.ContextParams{NCtx: 256, KVType: llama.KVF32, FlashAttn: llama.FlashOff})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := llama.NewBatch(256, 1)
			var maxDiff float64
			for _, s := range r.Samples {
				c.ClearMemory()
				seq := append(slices.Clone(p), s.Tokens...)
				for i := 0; i < len(p)+len(s.Tokens)-1; i++ {
					b.Clear()
					b.Add(seq[i], i, []int32{0}, true)
					if err := c.Decode(b); err != nil {
						t.Fatal(err)
					}
					if i < len(p)-1 {
						continue
					}
					logits, _ := c.Logits(0)
					lp := logSoftmax64(logits, temp)
					g := i - (len(p) - 1) // index of the generated token
					var sum, ent float64
					for _, v := range lp {
						sum += math.Exp(v)
						ent -= math.Exp(v) * v
					}
					if math.Abs(sum-1) > 1e-9 {
						t.Fatalf("reference probabilities sum to %v", sum)
					}
					maxDiff = max(maxDiff, math.Abs(lp[s.Tokens[g]]-float64(s.LogProbs[g])), math.Abs(ent-float64(s.Entropies[g])))
				}
			}
			b.Close()
			c.Close()
			ref.Close()
			if maxDiff > slack(arch, 1e-5) {
				t.Errorf("%s T=%v: log-prob or entropy differs from the float64 reference by %g", arch, temp, maxDiff)
			}
		}
	}
}

func requests(t *testing.T, m *engine.Model) []engine.Request {
	var reqs []engine.Request
	for i, q := range []string{"What is 2 + 2?", "Name a prime.", "Count to five:", "Hello"} {
		reqs = append(reqs, engine.Request{ID: uint64(i + 1), Prompt: prompt(t, m, q), K: 4, MaxTokens: 10,
			Params: sampler.Params{Temperature: 0.9, TopP: 0.95}, Seed: 11})
	}
	return reqs
}

// Same seed and configuration: byte-identical samples.
func TestSameSeedSameBytes(t *testing.T) {
	m := load(t, "qwen2")
	a, _ := run(t, m, exact(8), requests(t, m))
	b, _ := run(t, m, exact(8), requests(t, m))
	ja, _ := json.Marshal(collect(a))
	jb, _ := json.Marshal(collect(b))
	if string(ja) != string(jb) {
		t.Fatal("two runs with the same seed differ")
	}
}

func collect(res map[uint64]engine.Result) [][]engine.Sample {
	var out [][]engine.Sample
	for id := uint64(1); id <= uint64(len(res)); id++ {
		out = append(out, res[id].Samples)
	}
	return out
}

// Batch size (slots) and request order do not change the draws: tokens are identical,
// log-probs agree to 1e-5 (llama.cpp's arithmetic may differ in the last bits).
func TestBatchShapeAndOrderInvariance(t *testing.T) {
	for _, arch := range archs {
		if slack(arch, 1) != 1 {
			// llama.cpp's fp16 GeLU table turns last-bit differences of batch shape into
			// fp16 steps that flip draws near a boundary: not invariant there.
			continue
		}
		m := load(t, arch)
		ref, _ := run(t, m, exact(1), requests(t, m))
		for _, slots := range []int{4, 16} {
			for _, reverse := range []bool{false, true} {
				reqs := requests(t, m)
				if reverse {
					slices.Reverse(reqs)
				}
				got, _ := run(t, m, exact(slots), reqs)
				for id, r := range ref {
					for k, s := range r.Samples {
						g := got[id].Samples[k]
						if !slices.Equal(s.Tokens, g.Tokens) || s.Finish != g.Finish {
							t.Fatalf("%s slots=%d reverse=%v: request %d sample %d differs:\n%v\n%v", arch, slots, reverse, id, k, s.Tokens, g.Tokens)
						}
						for i := range s.LogProbs {
							if d := math.Abs(float64(s.LogProbs[i] - g.LogProbs[i])); d > 1e-5 {
								t.Fatalf("%s slots=%d: log-prob differs by %g", arch, slots, d)
							}
						}
					}
				}
			}
		}
	}
}

// The K samples of one prompt differ from each other (own RNG streams).
func TestSamplesOfOnePromptDiffer(t *testing.T) {
	m := load(t, "qwen3")
	res, _ := run(t, m, exact(8), []engine.Request{{ID: 1, Prompt: prompt(t, m, "Tell me"), K: 8, MaxTokens: 16,
		Params: sampler.Params{Temperature: 1, TopP: 1}, Seed: 5}})
	distinct := map[string]bool{}
	for _, s := range res[1].Samples {
		j, _ := json.Marshal(s.Tokens)
		distinct[string(j)] = true
	}
	if len(distinct) < 6 {
		t.Errorf("only %d distinct samples of 8", len(distinct))
	}
}

// For K=16 the prompt's tokens are sent to llama.cpp once, not 16 times, both when all
// samples fit at once and when they start as slots free up (continuous batching).
func TestPrefixSharing(t *testing.T) {
	m := load(t, "qwen2")
	p := prompt(t, m, "A fairly long prompt, so that decoding it sixteen times would show: one two three four five six.")
	for _, slots := range []int{16, 5} {
		res, e := run(t, m, exact(slots), []engine.Request{{ID: 1, Prompt: p, K: 16, MaxTokens: 6,
			Params: sampler.Params{Temperature: 1, TopP: 1}, Seed: 2, IgnoreEOG: true}})
		if res[1].Err != nil || len(res[1].Samples) != 16 {
			t.Fatalf("slots=%d: %v, %d samples", slots, res[1].Err, len(res[1].Samples))
		}
		st := e.Stats()
		if st.PromptTokens != int64(len(p)) {
			t.Errorf("slots=%d: %d prompt tokens decoded, want %d (once)", slots, st.PromptTokens, len(p))
		}
		// Every other token sent is one generated token per step, plus the last prompt
		// token once for each sample started from a copy of a sibling's cells.
		want := int64(len(p)) + 16*5
		if slots < 16 {
			want += 16 - int64(slots)
		}
		if got := e.TokensDecoded(); got != want {
			t.Errorf("slots=%d: %d tokens sent to llama.cpp, want %d", slots, got, want)
		}
		for _, s := range res[1].Samples {
			if len(s.Tokens) != 6 || s.Finish != engine.FinishLength {
				t.Errorf("slots=%d: sample %d has %d tokens, finish %s", slots, s.Index, len(s.Tokens), s.Finish)
			}
		}
	}
}

// Samples that start late from a copy draw exactly what they draw when they start with
// the prefill.
func TestCopiedPrefixGivesSameSamples(t *testing.T) {
	m := load(t, "llama")
	req := func() []engine.Request {
		return []engine.Request{{ID: 1, Prompt: prompt(t, m, "Copy me"), K: 6, MaxTokens: 8,
			Params: sampler.Params{Temperature: 0.8, TopP: 1}, Seed: 9}}
	}
	a, _ := run(t, m, exact(6), req())
	b, _ := run(t, m, exact(2), req())
	for k := range a[1].Samples {
		if !slices.Equal(a[1].Samples[k].Tokens, b[1].Samples[k].Tokens) {
			t.Errorf("sample %d differs between 6 and 2 slots", k)
		}
	}
}

// A slot freed by one request starts another request's next sample from a copy of a
// running sibling's KV stream: the prompt is still decoded once, only the last prompt
// token again, and the samples equal those drawn in a single slot.
func TestSiblingCopyGivesSameSamples(t *testing.T) {
	m := load(t, "qwen3")
	pa, pb := prompt(t, m, "Short one"), prompt(t, m, "The other prompt, a little longer")
	p := sampler.Params{Temperature: 1, TopP: 1}
	req := func() []engine.Request {
		return []engine.Request{
			{ID: 1, Prompt: pa, K: 1, MaxTokens: 2, Params: p, Seed: 4, IgnoreEOG: true},
			{ID: 2, Prompt: pb, K: 4, MaxTokens: 6, Params: p, Seed: 4, IgnoreEOG: true},
		}
	}
	ref, _ := run(t, m, exact(1), req())
	// With 3 slots, request 1 ends after step 2 and its slot takes request 2's sample 2
	// from a sibling that is mid-generation; sample 3 takes over a finished sibling's slot.
	got, e := run(t, m, exact(3), req())
	sameSamples(t, ref, got)
	if st := e.Stats(); st.PromptTokens != int64(len(pa)+len(pb)) {
		t.Errorf("%d prompt tokens decoded, want %d (each prompt once)", st.PromptTokens, len(pa)+len(pb))
	}
	// Generated tokens but each sample's last, plus the last prompt token of samples 2 and 3.
	if got, want := e.TokensDecoded(), int64(len(pa)+len(pb)+1+4*5+2); got != want {
		t.Errorf("%d tokens sent to llama.cpp, want %d", got, want)
	}
}

// When a slot below busy ones falls idle, the work of the highest busy slot moves down
// into it (a KV stream copy, here of a stream whose own copy is still pending), and its
// samples stay what a single slot draws.
func TestMovedSlotGivesSameSamples(t *testing.T) {
	m := load(t, "llama")
	p := sampler.Params{Temperature: 1, TopP: 1}
	req := func() []engine.Request {
		return []engine.Request{
			{ID: 1, Prompt: prompt(t, m, "First"), K: 1, MaxTokens: 6, Params: p, Seed: 8, IgnoreEOG: true},
			{ID: 2, Prompt: prompt(t, m, "Second"), K: 1, MaxTokens: 1, Params: p, Seed: 8, IgnoreEOG: true},
			{ID: 3, Prompt: prompt(t, m, "The third"), K: 2, MaxTokens: 6, Params: p, Seed: 8, IgnoreEOG: true},
		}
	}
	ref, _ := run(t, m, exact(1), req())
	// Slots 0-2 decode the three prompts, slot 3 copies slot 2's; request 2 ends at
	// once, and slot 3 moves down into slot 1.
	got, e := run(t, m, exact(4), req())
	if n := e.Stats().Moves; n != 1 {
		t.Errorf("%d moves, want 1", n)
	}
	sameSamples(t, ref, got)
}

func TestStopsAndLimits(t *testing.T) {
	m := load(t, "qwen2")
	p := prompt(t, m, "Stop")
	long := make([]int32, 300)
	for i := range long {
		long[i] = p[0]
	}
	res, _ := run(t, m, exact(4), []engine.Request{
		{ID: 1, Prompt: p, K: 4, MaxTokens: 3, Params: sampler.Params{Temperature: 1, TopP: 1}, Seed: 1},
		{ID: 2, Prompt: long, K: 2, MaxTokens: 3, Params: sampler.Params{Temperature: 1, TopP: 1}},
		{ID: 3, Prompt: p, K: 0, MaxTokens: 3},
		{ID: 4, Prompt: p, K: 1, MaxTokens: 3, Params: sampler.Params{Temperature: -1, TopP: 1}},
		{ID: 5, Prompt: p, K: 2, MaxTokens: 200, Params: sampler.Params{Temperature: 0, TopP: 1}, Stop: allTokens(m)},
	})
	for _, s := range res[1].Samples {
		if len(s.Tokens) > 3 || (len(s.Tokens) < 3 && s.Finish != engine.FinishStop) {
			t.Errorf("max tokens 3: sample has %d tokens, finish %s", len(s.Tokens), s.Finish)
		}
	}
	for id, why := range map[uint64]string{2: "prompt longer than the context", 3: "K=0", 4: "negative temperature"} {
		if res[id].Err == nil {
			t.Errorf("request %d (%s): want an error", id, why)
		}
	}
	for _, s := range res[5].Samples {
		if len(s.Tokens) != 1 || s.Finish != engine.FinishStop {
			t.Errorf("every token is a stop token: got %d tokens, finish %s", len(s.Tokens), s.Finish)
		}
	}
}

func allTokens(m *engine.Model) []int32 {
	out := make([]int32, m.NVocab())
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

func TestCancel(t *testing.T) {
	m := load(t, "qwen2")
	e, err := engine.New(m, exact(4))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err = e.Generate(ctx, requests(t, m), func(engine.Result) { n++; cancel() })
	if err != context.Canceled || n != 1 {
		t.Errorf("cancel after the first result: err=%v, results=%d", err, n)
	}
	// The engine is usable again afterwards.
	res := 0
	if err := e.Generate(context.Background(), requests(t, m), func(engine.Result) { res++ }); err != nil || res != 4 {
		t.Errorf("after cancel: err=%v, results=%d", err, res)
	}
	e.Close()
	if err := e.Generate(context.Background(), requests(t, m), func(engine.Result) {}); err == nil {
		t.Error("Generate after Close should fail")
	}
}

// sameSamples fails unless got holds ref's tokens, with log-probs equal to 1e-5.
func sameSamples(t *testing.T, ref, got map[uint64]engine.Result) {
	t.Helper()
	for id, r := range ref {
		for k, s := range r.Samples {
			g := got[id].Samples[k]
			if !slices.Equal(s.Tokens, g.Tokens) {
				t.Fatalf("request %d sample %d differs:\n%v\n%v", id, k, s.Tokens, g.Tokens)
			}
			for i := range s.LogProbs {
				if d := math.Abs(float64(s.LogProbs[i] - g.LogProbs[i])); d > 1e-5 {
					t.Fatalf("request %d sample %d: log-prob differs by %g", id, k, d)
				}
			}
		}
	}
}

// Each sample reports, per token, the probability mass top-p kept; without truncation
// there is nothing to report.
func TestKeptMass(t *testing.T) {
	m := load(t, "qwen2")
	p := prompt(t, m, "Keep some mass")
	for _, tc := range []struct {
		params sampler.Params
		cut    bool
	}{{sampler.Params{Temperature: 1, TopP: 0.3}, true}, {sampler.Params{Temperature: 1, TopP: 1}, false}} {
		res, _ := run(t, m, exact(4), []engine.Request{{ID: 1, Prompt: p, K: 4, MaxTokens: 8, Params: tc.params, Seed: 1, IgnoreEOG: true}})
		for _, s := range res[1].Samples {
			if !tc.cut {
				if s.KeptMass != nil {
					t.Errorf("top-p 1: sample %d reports kept mass %v", s.Index, s.KeptMass)
				}
				continue
			}
			if len(s.KeptMass) != len(s.Tokens) {
				t.Fatalf("top-p %g: sample %d has %d kept masses for %d tokens", tc.params.TopP, s.Index, len(s.KeptMass), len(s.Tokens))
			}
			for j, v := range s.KeptMass {
				// Top-p keeps at least 0.3 of the mass; a random tiny model spreads it, so
				// it keeps less than all of it.
				if !(v >= 0.3 && v < 1) || float64(s.LogProbs[j]) > math.Log(float64(v))+1e-6 {
					t.Errorf("top-p %g: token %d kept mass %v, log-prob %v", tc.params.TopP, j, v, s.LogProbs[j])
				}
			}
		}
	}
}

// Requests with identical prompts (debate agents on one model, given one message) share a
// prefill: a request whose prompt is being decoded waits for that decode and copies it, and
// one that starts later copies a running slot of the other request; either way the prompt
// is decoded once, and every sample is what a single slot draws.
func TestIdenticalPromptsShareOnePrefill(t *testing.T) {
	m := load(t, "qwen2")
	p, q := prompt(t, m, "The same message to both agents, long enough to notice"), prompt(t, m, "Another one")
	sp := sampler.Params{Temperature: 1, TopP: 1}
	waits := func() []engine.Request {
		return []engine.Request{
			{ID: 1, Prompt: p, K: 2, MaxTokens: 6, Params: sp, Seed: 3, IgnoreEOG: true},
			{ID: 2, Prompt: slices.Clone(p), K: 2, MaxTokens: 6, Params: sp, Seed: 5, IgnoreEOG: true},
		}
	}
	ref, _ := run(t, m, exact(1), waits())
	got, e := run(t, m, exact(4), waits())
	sameSamples(t, ref, got)
	st := e.Stats()
	if st.PromptTokens != int64(len(p)) || st.NaivePromptTokens != 4*int64(len(p)) {
		t.Errorf("waiting: %d prompt tokens decoded of %d naive, want %d of %d", st.PromptTokens, st.NaivePromptTokens, len(p), 4*len(p))
	}
	if got, want := e.TokensDecoded(), int64(len(p)+4*5); got != want {
		t.Errorf("waiting: %d tokens sent to llama.cpp, want %d", got, want)
	}

	// Request 3 starts when request 2 ends, while request 1 (same prompt) is generating.
	copies := func() []engine.Request {
		return []engine.Request{
			{ID: 1, Prompt: p, K: 1, MaxTokens: 8, Params: sp, Seed: 3, IgnoreEOG: true},
			{ID: 2, Prompt: q, K: 1, MaxTokens: 2, Params: sp, Seed: 3, IgnoreEOG: true},
			{ID: 3, Prompt: slices.Clone(p), K: 1, MaxTokens: 4, Params: sp, Seed: 7, IgnoreEOG: true},
		}
	}
	ref, _ = run(t, m, exact(1), copies())
	got, e = run(t, m, exact(2), copies())
	sameSamples(t, ref, got)
	if st := e.Stats(); st.PromptTokens != int64(len(p)+len(q)) {
		t.Errorf("copying: %d prompt tokens decoded, want %d (each prompt once)", st.PromptTokens, len(p)+len(q))
	}
	// Generated tokens but each sample's last, plus request 3's last prompt token again.
	if got, want := e.TokensDecoded(), int64(len(p)+len(q)+1+7+1+3); got != want {
		t.Errorf("copying: %d tokens sent to llama.cpp, want %d", got, want)
	}
}

// A decode step allocates nothing once the engine's buffers have grown: 64 more tokens
// per sample cost only the growth of the samples' own token slices (the slices of a
// step's rows, parameters and draws used to be made anew every step).
func TestStepsDoNotAllocate(t *testing.T) {
	m := load(t, "qwen2")
	e, err := engine.New(m, exact(4))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := prompt(t, m, "Count the apples.")
	allocs := func(tokens int) float64 {
		reqs := []engine.Request{{ID: 1, Prompt: p, K: 4, MaxTokens: tokens, Params: sampler.Params{Temperature: 0.7, TopP: 0.9},
			Seed: 1, IgnoreEOG: true}}
		return testing.AllocsPerRun(3, func() {
			if err := e.Generate(context.Background(), reqs, func(engine.Result) {}); err != nil {
				t.Fatal(err)
			}
		})
	}
	short, long := allocs(32), allocs(96)
	t.Logf("%.0f allocations for 32 tokens, %.0f for 96", short, long)
	if extra := long - short; extra > 64 {
		t.Errorf("64 more decode steps made %.0f more allocations (%.0f vs %.0f), want at most one a step", extra, long, short)
	}
}
