package model

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/sharedtest"
	"github.com/umad-dev/umad/safetensors"
)

const testTemplate = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"

func writeTestTiny(t *testing.T, arch string, opt TinyOptions) string {
	t.Helper()
	dir := t.TempDir()
	opt.Arch = arch
	if err := WriteTiny(dir, opt); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openTinyPair(t *testing.T, dir string) (*gguf.GGUF, *safetensors.File) {
	t.Helper()
	g, err := gguf.OpenGGUF(filepath.Join(dir, "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	s, err := safetensors.Open(filepath.Join(dir, "hf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return g, s
}

// hfToGGUFName is the tensor naming of llama.cpp's converter, written out independently of
// the generator's table.
func hfToGGUFName(hf string) string {
	return hfToGGUFNameOf("", hf)
}

// hfToGGUFNameOf is hfToGGUFName for an architecture: Gemma 3's sandwich norms take other
// names (llama.cpp's ffn_norm is its pre-feedforward norm).
func hfToGGUFNameOf(arch, hf string) string {
	if arch == "gemma3" {
		hf = strings.NewReplacer("post_attention_layernorm", "post_attention_norm",
			"pre_feedforward_layernorm", "ffn_norm", "post_feedforward_layernorm", "post_ffw_norm").Replace(hf)
	}
	r := strings.NewReplacer(
		"model.embed_tokens.", "token_embd.", "model.norm.", "output_norm.", "lm_head.", "output.",
		"model.layers.", "blk.", "input_layernorm", "attn_norm", "post_attention_layernorm", "ffn_norm",
		"self_attn.q_proj", "attn_q", "self_attn.k_proj", "attn_k", "self_attn.v_proj", "attn_v",
		"self_attn.o_proj", "attn_output", "self_attn.q_norm", "attn_q_norm", "self_attn.k_norm", "attn_k_norm",
		"mlp.gate_proj", "ffn_gate", "mlp.up_proj", "ffn_up", "mlp.down_proj", "ffn_down",
	)
	return r.Replace(hf)
}

// unpermuteRows undoes the Llama q/k row order: within each head of d rows, GGUF row 2j holds
// HF row j and GGUF row 2j+1 holds HF row j+d/2.
func unpermuteRows(gguf []float32, heads, d, cols int) []float32 {
	out := make([]float32, len(gguf))
	for h := range heads {
		for r := range d {
			src := 2 * r
			if r >= d/2 {
				src = 2*(r-d/2) + 1
			}
			copy(out[(h*d+r)*cols:(h*d+r+1)*cols], gguf[(h*d+src)*cols:(h*d+src+1)*cols])
		}
	}
	return out
}

func TestTinyWeightsIdentical(t *testing.T) {
	for _, arch := range arch.Names() {
		t.Run(arch, func(t *testing.T) {
			dir := writeTestTiny(t, arch, TinyOptions{Seed: 7, ChatTemplate: testTemplate})
			g, s := openTinyPair(t, dir)
			shape, _ := DefaultShape(Arch(arch))
			d, _ := Arch(arch).desc()
			var ggufNames []string
			for _, ti := range g.Tensors {
				ggufNames = append(ggufNames, ti.Name)
				if ti.Type != gguf.TypeF32 {
					t.Errorf("%s is %v, want F32", ti.Name, ti.Type)
				}
			}
			var mapped []string
			for _, name := range s.Names() {
				tv, err := s.Tensor(name)
				if err != nil {
					t.Fatal(err)
				}
				hfVals, err := tv.F32()
				if err != nil {
					t.Fatal(err)
				}
				gname := hfToGGUFNameOf(arch, name)
				mapped = append(mapped, gname)
				info, ok := g.Tensor(gname)
				if !ok {
					t.Errorf("%s has no GGUF tensor %s", name, gname)
					continue
				}
				rev := slices.Clone(tv.Shape)
				slices.Reverse(rev)
				if !reflect.DeepEqual(info.Dims, rev) {
					t.Errorf("%s: GGUF dims %v, want the reverse of %v", gname, info.Dims, tv.Shape)
				}
				gVals, err := g.ReadTensorF32(gname)
				if err != nil {
					t.Fatal(err)
				}
				isQ := strings.Contains(name, "q_proj.weight")
				isK := strings.Contains(name, "k_proj.weight")
				if d.PermuteQK && (isQ || isK) {
					heads := shape.Heads
					if isK {
						heads = shape.KVHeads
					}
					if reflect.DeepEqual(gVals, hfVals) {
						t.Errorf("%s: llama q/k rows are not permuted for GGUF", name)
					}
					gVals = unpermuteRows(gVals, heads, shape.HeadDim, shape.Hidden)
				}
				isNorm := strings.HasSuffix(name, "norm.weight") || strings.HasSuffix(name, "layernorm.weight")
				if d.NormOffset != 0 && isNorm { // HF holds the scale - 1, GGUF the scale
					for i := range hfVals {
						hfVals[i] += float32(d.NormOffset)
					}
				}
				if !reflect.DeepEqual(gVals, hfVals) {
					t.Errorf("%s: GGUF and safetensors values differ", name)
				}
				if isNorm {
					if m := mean(hfVals); math.Abs(m-1) > 0.1 {
						t.Errorf("%s: norm weights average %g, want about 1", name, m)
					}
				} else if sd := stddev(hfVals); len(hfVals) >= 1000 && (sd < 0.018 || sd > 0.022) {
					t.Errorf("%s: std %g, want about 0.02", name, sd)
				}
			}
			// GGUF holds exactly the HF tensors, plus Llama 3's rope frequency factors.
			if shape.RopeScaling != nil {
				mapped = append(mapped, "rope_freqs.weight")
			}
			slices.Sort(mapped)
			slices.Sort(ggufNames)
			if !reflect.DeepEqual(mapped, ggufNames) {
				t.Errorf("GGUF tensors %v\nwant %v", ggufNames, mapped)
			}
		})
	}
}

func mean(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(len(v))
}

func stddev(v []float32) float64 {
	m := mean(v)
	var s float64
	for _, x := range v {
		s += (float64(x) - m) * (float64(x) - m)
	}
	return math.Sqrt(s / float64(len(v)))
}

func TestTinyConfigMatchesGGUF(t *testing.T) {
	for _, arch := range arch.Names() {
		t.Run(arch, func(t *testing.T) {
			dir := writeTestTiny(t, arch, TinyOptions{Seed: 1})
			g, _ := openTinyPair(t, dir)
			cfg, err := LoadHFConfig(filepath.Join(dir, "hf"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := cfg.Shape()
			if err != nil {
				t.Fatal(err)
			}
			ga := Arch(arch).GGUF()
			if got, _ := g.String("general.architecture"); got != ga || string(s.Arch) != arch {
				t.Fatalf("architecture %q / %q, want %q / %q", got, s.Arch, ga, arch)
			}
			u := func(key string) int {
				v, err := g.Uint(ga + "." + key)
				if err != nil {
					t.Fatal(err)
				}
				return int(v)
			}
			f := func(key string) float64 {
				v, err := g.Float(ga + "." + key)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			headDim := s.Hidden / s.Heads // llama.cpp's default when the key is absent
			if _, ok := g.Lookup(ga + ".attention.key_length"); ok {
				headDim = u("attention.key_length")
			}
			toks, _ := g.Strings("tokenizer.ggml.tokens")
			embd, _ := g.Tensor("token_embd.weight")
			_, hasOutput := g.Tensor("output.weight")
			checks := []struct {
				name      string
				gguf, cfg any
			}{
				{"context", u("context_length"), s.Context},
				{"hidden", u("embedding_length"), s.Hidden},
				{"layers", u("block_count"), s.Layers},
				{"ffn", u("feed_forward_length"), s.FFN},
				{"heads", u("attention.head_count"), s.Heads},
				{"kv heads", u("attention.head_count_kv"), s.KVHeads},
				{"head dim", headDim, s.HeadDim},
				{"rope theta", f("rope.freq_base"), float64(float32(s.RopeTheta))},
				{"rms eps", f("attention.layer_norm_rms_epsilon"), float64(float32(s.RMSEps))},
				{"vocab (tokens)", len(toks), s.Vocab},
				{"vocab (embedding rows)", int(embd.Dims[1]), s.Vocab},
				{"untied output", hasOutput, !s.TiedEmbeddings},
			}
			if _, ok := g.Lookup(ga + ".vocab_size"); ok {
				checks = append(checks, struct {
					name      string
					gguf, cfg any
				}{"vocab_size key", u("vocab_size"), s.Vocab})
			}
			for _, c := range checks {
				if c.gguf != c.cfg {
					t.Errorf("%s: GGUF %v, config.json %v", c.name, c.gguf, c.cfg)
				}
			}
			def, _ := DefaultShape(Arch(arch))
			def.Vocab = s.Vocab
			if !reflect.DeepEqual(s, def) {
				t.Errorf("config.json shape %+v\nwant the default %+v", s, def)
			}
		})
	}
}

// The rope_freqs.weight factors are llama.cpp's divisors of each rotary frequency; checked
// here against Hugging Face's formulation of Llama 3 scaling, which scales the inverse
// frequencies directly.
func TestTinyLlamaRopeFreqs(t *testing.T) {
	dir := writeTestTiny(t, "llama", TinyOptions{})
	g, _ := openTinyPair(t, dir)
	got, err := g.ReadTensorF32("rope_freqs.weight")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := DefaultShape(ArchLlama)
	r := s.RopeScaling
	lowWavelen := float64(r.OriginalMaxPositionEmbeddings) / r.LowFreqFactor
	highWavelen := float64(r.OriginalMaxPositionEmbeddings) / r.HighFreqFactor
	sawBlend := false
	for i, factor := range got {
		invFreq := math.Pow(s.RopeTheta, -float64(2*i)/float64(s.HeadDim))
		wavelen := 2 * math.Pi / invFreq
		scaled := invFreq
		if wavelen > lowWavelen {
			scaled = invFreq / r.Factor
		}
		if wavelen >= highWavelen && wavelen <= lowWavelen {
			sawBlend = true
			smooth := (float64(r.OriginalMaxPositionEmbeddings)/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			scaled = (1-smooth)*invFreq/r.Factor + smooth*invFreq
		}
		if want := invFreq / scaled; math.Abs(float64(factor)-want) > 1e-5*want {
			t.Errorf("factor %d = %g, want %g", i, factor, want)
		}
	}
	if len(got) != s.HeadDim/2 || !sawBlend || got[0] != 1 || got[len(got)-1] != float32(r.Factor) {
		t.Errorf("factors %v do not cover unscaled, blended and fully scaled frequencies", got)
	}
}

type tinyTokenizerJSON struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	PreTokenizer struct {
		Pretokenizers []struct {
			Pattern struct {
				Regex string `json:"Regex"`
			} `json:"pattern"`
		} `json:"pretokenizers"`
	} `json:"pre_tokenizer"`
	Model struct {
		Type         string         `json:"type"`
		IgnoreMerges bool           `json:"ignore_merges"`
		Vocab        map[string]int `json:"vocab"`
		Merges       []string       `json:"merges"`
	} `json:"model"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestTinyTokenizersAgree(t *testing.T) {
	for _, tc := range []struct {
		arch, pre          string
		addBOS, ignore     bool
		bos, eos, pad, num string
	}{
		{"qwen2", "qwen2", false, false, "<|endoftext|>", "<|im_end|>", "<|endoftext|>", `\p{N}|`},
		{"qwen3", "qwen2", false, false, "<|endoftext|>", "<|im_end|>", "<|endoftext|>", `\p{N}|`},
		{"llama", "llama-bpe", true, true, "<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>", `\p{N}{1,3}|`},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			dir := writeTestTiny(t, tc.arch, TinyOptions{ChatTemplate: testTemplate})
			g, _ := openTinyPair(t, dir)
			var tj tinyTokenizerJSON
			readJSON(t, filepath.Join(dir, "hf", "tokenizer.json"), &tj)
			var tc2 map[string]any
			readJSON(t, filepath.Join(dir, "hf", "tokenizer_config.json"), &tc2)

			toks, _ := g.Strings("tokenizer.ggml.tokens")
			types, _ := g.Lookup("tokenizer.ggml.token_type")
			merges, _ := g.Strings("tokenizer.ggml.merges")
			// Rebuild the id -> token table from the HF file and compare with GGUF's.
			hfToks := make([]string, len(tj.Model.Vocab)+len(tj.AddedTokens))
			hfTypes := make([]int32, len(hfToks))
			for text, id := range tj.Model.Vocab {
				hfToks[id], hfTypes[id] = text, 1
			}
			for _, a := range tj.AddedTokens {
				hfToks[a.ID], hfTypes[a.ID] = a.Content, 4
				if a.Special {
					hfTypes[a.ID] = 3
				}
			}
			if !reflect.DeepEqual(toks, hfToks) || !reflect.DeepEqual(types.Value, hfTypes) {
				t.Error("GGUF tokens or token types differ from tokenizer.json")
			}
			if !reflect.DeepEqual(merges, tj.Model.Merges) || len(merges) != tinyMerges {
				t.Errorf("merges differ (%d in GGUF, %d in tokenizer.json)", len(merges), len(tj.Model.Merges))
			}
			if pre, _ := g.String("tokenizer.ggml.pre"); pre != tc.pre {
				t.Errorf("pre = %q, want %q", pre, tc.pre)
			}
			if tj.Model.Type != "BPE" || tj.Model.IgnoreMerges != tc.ignore {
				t.Errorf("model %s ignore_merges %v", tj.Model.Type, tj.Model.IgnoreMerges)
			}
			if re := tj.PreTokenizer.Pretokenizers[0].Pattern.Regex; !strings.Contains(re, tc.num) {
				t.Errorf("split regex %q lacks the family's digit rule %q", re, tc.num)
			}
			id := func(key string) string {
				v, err := g.Uint("tokenizer.ggml." + key)
				if err != nil {
					t.Fatal(err)
				}
				return toks[v]
			}
			if id("bos_token_id") != tc.bos || id("eos_token_id") != tc.eos || id("padding_token_id") != tc.pad {
				t.Errorf("GGUF bos/eos/pad = %s %s %s", id("bos_token_id"), id("eos_token_id"), id("padding_token_id"))
			}
			if tc2["eos_token"] != tc.eos || tc2["pad_token"] != tc.pad || tc2["add_bos_token"] != tc.addBOS {
				t.Errorf("tokenizer_config eos %v pad %v add_bos %v", tc2["eos_token"], tc2["pad_token"], tc2["add_bos_token"])
			}
			if addBOS, _ := g.Bool("tokenizer.ggml.add_bos_token"); addBOS != tc.addBOS {
				t.Errorf("GGUF add_bos = %v", addBOS)
			}
			if tmpl, _ := g.String("tokenizer.chat_template"); tmpl != testTemplate || tc2["chat_template"] != testTemplate {
				t.Error("the chat template is not in both tokenizers")
			}
			var cfg HFConfig
			readJSON(t, filepath.Join(dir, "hf", "config.json"), &cfg)
			if toks[cfg.EOSTokenID[0]] != tc.eos || toks[*cfg.BOSTokenID] != tc.bos {
				t.Errorf("config.json bos %d eos %v", *cfg.BOSTokenID, cfg.EOSTokenID)
			}
			for _, want := range []string{"<|im_start|>", "<|im_end|>", "<|start_header_id|>", "<|end_header_id|>", "<think>"} {
				if !slices.Contains(toks, want) {
					t.Errorf("vocabulary lacks %s", want)
				}
			}
		})
	}
}

func TestTinyDeterministic(t *testing.T) {
	files := []string{"model.gguf", "hf/model.safetensors", "hf/config.json", "hf/tokenizer.json", "hf/tokenizer_config.json", "hf/generation_config.json"}
	a := writeTestTiny(t, "llama", TinyOptions{Seed: 42, ChatTemplate: testTemplate})
	b := writeTestTiny(t, "llama", TinyOptions{Seed: 42, ChatTemplate: testTemplate})
	c := writeTestTiny(t, "llama", TinyOptions{Seed: 43, ChatTemplate: testTemplate})
	for _, f := range files {
		fa, _ := os.ReadFile(filepath.Join(a, f))
		fb, _ := os.ReadFile(filepath.Join(b, f))
		fc, _ := os.ReadFile(filepath.Join(c, f))
		if len(fa) == 0 || !bytes.Equal(fa, fb) {
			t.Errorf("%s differs between two runs with the same seed", f)
		}
		weights := f == "model.gguf" || f == "hf/model.safetensors"
		if weights == bytes.Equal(fa, fc) {
			t.Errorf("%s: another seed changed it: %v, want %v", f, !bytes.Equal(fa, fc), weights)
		}
	}
	// Nothing but the outputs: temporary files are renamed away.
	for _, d := range []string{a, filepath.Join(a, "hf")} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("leftover temporary file %s", e.Name())
			}
		}
	}
}

// A real-size vocabulary pads with normal tokens after the specials, in both files.
func TestTinyVocabPadding(t *testing.T) {
	const size = 151936
	dir := writeTestTiny(t, "qwen2", TinyOptions{VocabSize: size})
	g, s := openTinyPair(t, dir)
	toks, _ := g.Strings("tokenizer.ggml.tokens")
	embd, _ := s.Tensor("model.embed_tokens.weight")
	cfg, err := LoadHFConfig(filepath.Join(dir, "hf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != size || embd.Shape[0] != size || cfg.VocabSize != size {
		t.Errorf("tokens %d, embedding rows %d, config vocab %d; want %d", len(toks), embd.Shape[0], cfg.VocabSize, size)
	}
	if last := toks[size-1]; last != "[PAD151935]" {
		t.Errorf("last token %q", last)
	}
	var tj tinyTokenizerJSON
	readJSON(t, filepath.Join(dir, "hf", "tokenizer.json"), &tj)
	if id, ok := tj.Model.Vocab["[PAD151935]"]; !ok || id != size-1 {
		t.Errorf("tokenizer.json lacks the padding tokens")
	}
}

func TestWriteTinyRejects(t *testing.T) {
	badQwen2, _ := DefaultShape(ArchQwen2)
	badQwen2.HeadDim = 32 // llama.cpp's qwen2 needs heads x head dim = hidden
	llama, _ := DefaultShape(ArchLlama)
	tests := []struct {
		name    string
		opt     TinyOptions
		wantErr string
	}{
		{"unknown arch", TinyOptions{Arch: "gpt2"}, "unsupported architecture"},
		{"vocab smaller than the tokenizer", TinyOptions{Arch: "qwen2", VocabSize: 100}, "smaller"},
		{"arch and shape disagree", TinyOptions{Arch: "qwen2", Shape: &llama}, "disagree"},
		{"shape llama.cpp cannot load", TinyOptions{Shape: &badQwen2}, "head dim x heads"},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		if err := WriteTiny(dir, tc.opt); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.wantErr)
		}
		if _, err := os.Stat(filepath.Join(dir, "model.gguf")); err == nil {
			t.Errorf("%s: wrote a model anyway", tc.name)
		}
	}
}

// Real configs read into the shapes their provenance notes give.
func TestLoadRealHFConfigs(t *testing.T) {
	tests := []struct {
		dir  string
		want Shape
		eos  TokenIDs
	}{
		{"tokenizers/Qwen2.5-3B-Instruct", Shape{Arch: ArchQwen2, Vocab: 151936, Hidden: 2048, Layers: 36, Heads: 16, KVHeads: 2,
			HeadDim: 128, FFN: 11008, RopeTheta: 1e6, RMSEps: 1e-6, Context: 32768, TiedEmbeddings: true, QKVBias: true}, TokenIDs{151645}},
		{"tokenizers/Qwen3-4B", Shape{Arch: ArchQwen3, Vocab: 151936, Hidden: 2560, Layers: 36, Heads: 32, KVHeads: 8,
			HeadDim: 128, FFN: 9728, RopeTheta: 1e6, RMSEps: 1e-6, Context: 40960, TiedEmbeddings: true}, TokenIDs{151645}},
		{"tokenizers/Llama-3.2-3B-Instruct", Shape{Arch: ArchLlama, Vocab: 128256, Hidden: 3072, Layers: 28, Heads: 24, KVHeads: 8,
			HeadDim: 128, FFN: 8192, RopeTheta: 500000, RMSEps: 1e-5, Context: 131072, TiedEmbeddings: true,
			RopeScaling: &RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}},
			TokenIDs{128001, 128008, 128009}},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.dir), func(t *testing.T) {
			cfg, err := LoadHFConfig(sharedtest.Path(t, tc.dir))
			if err != nil {
				t.Fatal(err)
			}
			s, err := cfg.Shape()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s, tc.want) || !reflect.DeepEqual(cfg.EOSTokenID, tc.eos) {
				t.Errorf("shape %+v eos %v\nwant  %+v eos %v", s, cfg.EOSTokenID, tc.want, tc.eos)
			}
		})
	}
}

// BenchmarkWriteTiny measures writing both layouts: the default tiny shape, and the same with
// Qwen's real vocabulary size (the embedding then dominates).
func BenchmarkWriteTiny(b *testing.B) {
	for _, bc := range []struct {
		name  string
		vocab int
	}{{"qwen2", 0}, {"qwen2-vocab151936", 151936}, {"llama", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			arch := strings.Split(bc.name, "-")[0]
			for b.Loop() {
				if err := WriteTiny(dir, TinyOptions{Arch: arch, VocabSize: bc.vocab}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A model that does not fit is refused before anything is allocated: a write of --vocab
// 10000000 was killed for memory half-way. The disk estimate bounds what a write takes.
func TestTinyFits(t *testing.T) {
	const size = 100000
	dir := writeTestTiny(t, "qwen2", TinyOptions{VocabSize: size})
	var written int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		written += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := DefaultShape(ArchQwen2)
	if err := tinyFits(s, size, math.MaxInt64, written); err == nil {
		t.Errorf("%d bytes written, but the estimate fits that much free disk", written)
	}
	if err := tinyFits(s, size, math.MaxInt64, 2*written); err != nil {
		t.Errorf("%d bytes written, but twice that is refused: %v", written, err)
	}
	if err := tinyFits(s, 10_000_000, 1<<30, math.MaxInt64); err == nil || !strings.Contains(err.Error(), "GiB of memory") {
		t.Errorf("10M tokens with 1 GiB of memory: %v", err)
	}
}
