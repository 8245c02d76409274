package engine

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/sampler"
)

// openExact opens a server whose scoring is exact (F32 KV cache, flash attention off).
func openExact(t *testing.T, path string) *Server {
	t.Helper()
	s, err := OpenServer(path, Placement{}, Options{Slots: 4, SeqContext: 256, Threads: 2, KVType: KVF32, FlashAttn: FlashOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// hfWeights reads a tiny model's Hugging Face weights, as the trainer would hand them over.
func hfWeights(t testing.TB, dir string) []safetensors.TensorView {
	t.Helper()
	st, err := safetensors.Open(filepath.Join(dir, "hf"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out []safetensors.TensorView
	for _, name := range st.Names() {
		v, err := st.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// convert writes a tiny model's GGUF with the file converter.
func convert(t *testing.T, dir string, typ gguf.GGMLType) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "model.gguf")
	if err := model.HFToGGUF(filepath.Join(dir, "hf"), out, model.HFToGGUFOptions{Type: typ}); err != nil {
		t.Fatal(err)
	}
	return out
}

// probeLogProbs scores a fixed prompt and response, exactly.
func probeLogProbs(t *testing.T, s *Server) []float32 {
	t.Helper()
	p, err := s.Tokenize("What is 2 + 2? Think, then answer.", false, false)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := s.ExactLogProbs(p, []int32{300, 12, 601, 44, 44, 9, 120, 77}, 0.7)
	if err != nil {
		t.Fatal(err)
	}
	return lp
}

func bitEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// After an in-place update, llama.cpp holds the very bytes the file converter writes for
// the new weights (every matrix type), and its log-probs equal, to the bit, those of a
// freshly loaded converted file.
func TestUpdateWeightsMatchesConvertedFile(t *testing.T) {
	for _, arch := range arch.Names() {
		for _, typ := range []gguf.GGMLType{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0} {
			t.Run(arch+"/"+typ.String(), func(t *testing.T) {
				next := testmodel.TinySeed(t, arch, 8)
				s := openExact(t, convert(t, testmodel.Tiny(t, arch), typ))
				before := probeLogProbs(t, s)
				if err := s.UpdateWeights(hfWeights(t, next)); err != nil {
					t.Fatal(err)
				}
				path := convert(t, next, typ)
				fresh := openExact(t, path)
				got, want := probeLogProbs(t, s), probeLogProbs(t, fresh)
				if !bitEqual(got, want) {
					t.Errorf("log-probs after the update %v, of the converted file %v", got, want)
				}
				if bitEqual(got, before) {
					t.Error("the update did not change the log-probs")
				}
				g, err := gguf.OpenGGUF(path)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				for _, ti := range g.Tensors {
					_, file, err := g.ReadTensor(ti.Name)
					if err != nil {
						t.Fatal(err)
					}
					held, err := s.model.ReadWeight(ti.Name)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(held, file) {
						t.Errorf("%s (%v): llama.cpp holds other bytes than the converted file", ti.Name, ti.Type)
					}
				}
			})
		}
	}
}

// Bad weights are refused with an error that names the problem, and the model keeps its
// weights: the bad tensor comes last, after good ones that must not have been written.
func TestUpdateWeightsRefusesBadInput(t *testing.T) {
	s := openExact(t, testmodel.GGUF(t, "qwen2"))
	before := probeLogProbs(t, s)
	embd, err := s.model.ReadWeight("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	good := hfWeights(t, testmodel.TinySeed(t, "qwen2", 8))
	last := func(edit func(v *safetensors.TensorView)) []safetensors.TensorView {
		ws := slices.Clone(good)
		i := slices.IndexFunc(ws, func(v safetensors.TensorView) bool { return v.Name == "model.layers.1.mlp.down_proj.weight" })
		v := ws[i]
		v.Shape = slices.Clone(v.Shape)
		edit(&v)
		ws = append(slices.Delete(ws, i, i+1), v)
		return ws
	}
	for _, c := range []struct {
		name    string
		weights []safetensors.TensorView
		want    string
	}{
		{"unknown name", last(func(v *safetensors.TensorView) { v.Name = "model.layers.1.mlp.down.weight" }), `"model.layers.1.mlp.down.weight" is not part of this model`},
		{"wrong shape", last(func(v *safetensors.TensorView) { v.Shape[0], v.Shape[1] = v.Shape[1], v.Shape[0] }), "has shape [128 64], the model's is [64 128]"},
		{"wrong size", last(func(v *safetensors.TensorView) { v.Data = v.Data[:len(v.Data)-4] }), "has 32764 bytes, want 32768"},
		{"wrong dtype", last(func(v *safetensors.TensorView) { v.DType = safetensors.F64 }), "dtype F64"},
		{"missing", good[:len(good)-1], "is missing"},
		{"twice", append(slices.Clone(good), good[0]), "is given twice"},
	} {
		err := s.UpdateWeights(c.weights)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if got := probeLogProbs(t, s); !bitEqual(got, before) {
			t.Errorf("%s: the refused update changed the log-probs", c.name)
		}
		if got, _ := s.model.ReadWeight("token_embd.weight"); !bytes.Equal(got, embd) {
			t.Errorf("%s: the refused update changed the embedding", c.name)
		}
	}
}

// After an update no KV computed with the old weights survives, in the engine's context
// or in any other context of the model: a generation equals a fresh server's.
func TestUpdateWeightsClearsKV(t *testing.T) {
	next := testmodel.TinySeed(t, "qwen2", 8)
	s := openExact(t, testmodel.GGUF(t, "qwen2"))
	req := func(s *Server) []Request {
		p, err := s.Tokenize("Name a prime number.", false, false)
		if err != nil {
			t.Fatal(err)
		}
		return []Request{{ID: 1, Prompt: p, K: 4, MaxTokens: 24, Params: sampler.Params{Temperature: 1, TopP: 1}, Seed: 3}}
	}
	gen := func(s *Server) []Sample {
		var out []Sample
		if err := s.Engine.Generate(context.Background(), req(s), func(r Result) { out = r.Samples }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	old := gen(s)
	// Generate empties the engine's context when it ends, so the prompt is decoded into it
	// directly, as into another context of the model.
	c, err := s.model.NewContext(llama.ContextParams{NCtx: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := llama.NewBatch(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, tok := range req(s)[0].Prompt {
		if _, err := b.Add(tok, i, []int32{0}, false); err != nil {
			t.Fatal(err)
		}
	}
	ctxs := map[string]*llama.Context{"the engine's context": s.Engine.ctx, "another context": c}
	for name, ctx := range ctxs {
		if err := ctx.Decode(b); err != nil {
			t.Fatal(err)
		}
		if pos, err := ctx.SeqPosMax(0); err != nil || pos < 0 {
			t.Fatalf("%s holds no KV before the update (%d, %v)", name, pos, err)
		}
	}
	if err := s.UpdateWeights(hfWeights(t, next)); err != nil {
		t.Fatal(err)
	}
	for name, ctx := range ctxs {
		if pos, err := ctx.SeqPosMax(0); err != nil || pos != -1 {
			t.Errorf("%s still holds positions up to %d (%v) after the update", name, pos, err)
		}
	}
	got, want := gen(s), gen(openExact(t, convert(t, next, gguf.TypeF32)))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("generation after the update differs from a fresh server's:\n got %+v\nwant %+v", got, want)
	}
	if reflect.DeepEqual(got, old) {
		t.Error("the update did not change the generation")
	}
}
