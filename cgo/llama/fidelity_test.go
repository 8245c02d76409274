package llama_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/sharedtest"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
)

func sharedDir(t *testing.T, sub string) string { return sharedtest.Path(t, sub) }

// vectors reads llama.cpp's tokenizer test vectors: texts separated (and terminated) by
// "\n__ggml_vocab_test__\n", and one line of space-prefixed ids per text.
func vectors(t *testing.T, base string) ([]string, [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	texts = texts[:len(texts)-1]
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d texts but %d id lines", base, len(texts), len(lines))
	}
	ids := make([][]int32, len(lines))
	for i, line := range lines {
		for _, f := range strings.Fields(line) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", base, i+1, err)
			}
			ids[i] = append(ids[i], int32(n))
		}
	}
	return texts, ids
}

// fidelityCase is one real tokenizer, converted with tiny weights of its real vocabulary size.
type fidelityCase struct {
	dir, arch, vectors string
	vocab              int
	family             chat.Family
	specials           map[string]int32 // special token text -> id in the real tokenizer
	addsBOS            int32            // -1: encoding adds nothing
}

var fidelityCases = []fidelityCase{
	{"Qwen2.5-3B-Instruct", "qwen2", "ggml-vocab-qwen2", 151936, chat.Qwen25,
		map[string]int32{"<|im_start|>": 151644, "<|im_end|>": 151645, "<|endoftext|>": 151643}, -1},
	{"Qwen3-4B-Instruct-2507", "qwen3", "ggml-vocab-qwen2", 151936, chat.Qwen3,
		map[string]int32{"<|im_start|>": 151644, "<|im_end|>": 151645, "<think>": 151667}, -1},
	{"Llama-3.2-3B-Instruct", "llama", "ggml-vocab-llama-bpe", 128256, chat.Llama3,
		map[string]int32{"<|begin_of_text|>": 128000, "<|start_header_id|>": 128006, "<|eot_id|>": 128009}, 128000},
}

// tinyHF writes an HF checkpoint with the real tokenizer files of c and random weights of
// hidden size 8 and one layer.
func tinyHF(t *testing.T, c fidelityCase) string {
	t.Helper()
	src := sharedDir(t, filepath.Join("tokenizers", c.dir))
	dir := t.TempDir()
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const hidden, heads, kvHeads, headDim, ffn = 8, 2, 1, 4, 16
	cfg := model.HFConfig{
		ModelType: c.arch, VocabSize: c.vocab, HiddenSize: hidden, IntermediateSize: ffn,
		NumHiddenLayers: 1, NumAttentionHeads: heads, NumKeyValueHeads: kvHeads, HeadDim: headDim,
		HiddenAct: "silu", MaxPositionEmbeddings: 4096, RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true, // as all three releases (the tiny generator's llama covers an untied head)
	}
	if c.arch == "llama" { // as Llama 3.2
		cfg.RopeScaling = &model.RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var tensors []safetensors.NamedTensor
	add := func(name string, shape ...int64) {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(0.02*rng.NormFloat64())))
		}
		tensors = append(tensors, safetensors.NamedTensor{Name: name, DType: safetensors.F32, Shape: shape, Write: gguf.Bytes(b)})
	}
	add("model.embed_tokens.weight", int64(c.vocab), hidden)
	p := "model.layers.0."
	add(p+"input_layernorm.weight", hidden)
	add(p+"self_attn.q_proj.weight", heads*headDim, hidden)
	add(p+"self_attn.k_proj.weight", kvHeads*headDim, hidden)
	add(p+"self_attn.v_proj.weight", kvHeads*headDim, hidden)
	add(p+"self_attn.o_proj.weight", hidden, heads*headDim)
	switch c.arch {
	case "qwen2":
		add(p+"self_attn.q_proj.bias", heads*headDim)
		add(p+"self_attn.k_proj.bias", kvHeads*headDim)
		add(p+"self_attn.v_proj.bias", kvHeads*headDim)
	case "qwen3":
		add(p+"self_attn.q_norm.weight", headDim)
		add(p+"self_attn.k_norm.weight", headDim)
	}
	add(p+"post_attention_layernorm.weight", hidden)
	add(p+"mlp.gate_proj.weight", ffn, hidden)
	add(p+"mlp.up_proj.weight", ffn, hidden)
	add(p+"mlp.down_proj.weight", hidden, ffn)
	add("model.norm.weight", hidden)
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), tensors, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cleanedBySpaces reports whether llama.cpp's detokenizer space clean-up (llama-bpe's
// clean_spaces, like HF's clean_up_tokenization_spaces) changes the text, so that the text
// cannot come back byte for byte.
func cleanedBySpaces(text string) bool {
	for _, s := range []string{" ?", " !", " .", " ,", " '"} {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

func TestFidelityTokenizers(t *testing.T) {
	for _, c := range fidelityCases {
		t.Run(c.dir, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "m.gguf")
			if err := model.HFToGGUF(tinyHF(t, c), out, model.HFToGGUFOptions{}); err != nil {
				t.Fatal(err)
			}
			m, err := llama.LoadModel(out, llama.ModelParams{VocabOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.NVocab() != c.vocab {
				t.Errorf("vocabulary %d, want %d", m.NVocab(), c.vocab)
			}

			texts, want := vectors(t, filepath.Join(sharedDir(t, "tokenizers/llama.cpp"), c.vectors+".gguf"))
			roundTrips := 0
			for i, text := range texts {
				got, err := m.Tokenize(text, false, false)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want[i]) {
					t.Errorf("vector %d %q:\n got %v\nwant %v", i, text, got, want[i])
					continue
				}
				back, err := m.Detokenize(got, false)
				if err != nil {
					t.Fatal(err)
				}
				if c.arch == "llama" && cleanedBySpaces(text) {
					continue
				}
				roundTrips++
				if back != text {
					t.Errorf("vector %d: detokenized %q, want %q", i, back, text)
				}
			}
			if roundTrips < len(texts)/2 {
				t.Errorf("only %d of %d texts checked for round trips", roundTrips, len(texts))
			}

			for text, id := range c.specials {
				got, err := m.Tokenize(text, false, true)
				if err != nil || !slices.Equal(got, []int32{id}) {
					t.Errorf("special %q: %v %v, want the single id %d", text, got, err, id)
				}
			}
			got, _ := m.Tokenize("Hi", true, false)
			if c.addsBOS >= 0 && (len(got) < 2 || got[0] != c.addsBOS) {
				t.Errorf("add special on: %v, want BOS %d first", got, c.addsBOS)
			}
			if c.addsBOS < 0 && len(got) != 1 {
				t.Errorf("add special on: %v, want no BOS added", got)
			}
			eot := c.specials["<|im_end|>"]
			if c.arch == "llama" {
				eot = c.specials["<|eot_id|>"]
			}
			if !m.IsEOG(eot) {
				t.Errorf("end-of-turn token %d does not end generation", eot)
			}
			f, err := chat.Detect(m.ChatTemplate())
			if err != nil || f.Family != c.family {
				t.Errorf("chat template detected as %+v (%v), want %s", f, err, c.family)
			}
		})
	}
}

// The converted weights load and run: llama.cpp accepts every tensor name and shape, and a
// decode step gives finite logits.
func TestFidelityWeightsLoad(t *testing.T) {
	for _, c := range fidelityCases {
		t.Run(c.dir, func(t *testing.T) {
			for _, typ := range []gguf.GGMLType{gguf.TypeF32, gguf.TypeBF16} {
				out := filepath.Join(t.TempDir(), fmt.Sprintf("m-%v.gguf", typ))
				if err := model.HFToGGUF(tinyHF(t, c), out, model.HFToGGUFOptions{Type: typ}); err != nil {
					t.Fatal(err)
				}
				m, err := llama.LoadModel(out, llama.ModelParams{})
				if err != nil {
					t.Fatalf("%v: %v", typ, err)
				}
				ctx, err := m.NewContext(llama.ContextParams{NCtx: 64, Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := llama.NewBatch(64, 1)
				toks, _ := m.Tokenize("<|im_start|>user\n2+2?", true, true)
				for i, tok := range toks {
					if _, err := b.Add(tok, i, []int32{0}, i == len(toks)-1); err != nil {
						t.Fatal(err)
					}
				}
				if err := ctx.Decode(b); err != nil {
					t.Fatal(err)
				}
				logits, err := ctx.Logits(-1)
				if err != nil {
					t.Fatal(err)
				}
				if len(logits) != c.vocab || slices.ContainsFunc(logits, func(x float32) bool { return math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) }) {
					t.Errorf("%v: %d logits, some not finite", typ, len(logits))
				}
				b.Close()
				ctx.Close()
				m.Close()
			}
		})
	}
}
