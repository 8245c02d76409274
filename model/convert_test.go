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
	"github.com/umad-dev/umad/internal/jsonfile"
	"github.com/umad-dev/umad/internal/sharedtest"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/tokenizer"
)

func writeTinyForTest(t *testing.T, arch string) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteTiny(dir, TinyOptions{Arch: arch, Seed: 3, ChatTemplate: "{{ messages }}<|im_start|>"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sameTensors requires a and b to hold the same tensors with identical bytes.
func sameSafetensors(t *testing.T, a, b string) {
	t.Helper()
	sa, err := safetensors.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := safetensors.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if !slices.Equal(sa.Names(), sb.Names()) {
		t.Fatalf("tensor names differ:\n%v\n%v", sa.Names(), sb.Names())
	}
	for _, name := range sa.Names() {
		ta, _ := sa.Tensor(name)
		tb, _ := sb.Tensor(name)
		if ta.DType != tb.DType || !slices.Equal(ta.Shape, tb.Shape) || !bytes.Equal(ta.Data, tb.Data) {
			t.Errorf("%s: %s %v vs %s %v, bytes equal %v", name, ta.DType, ta.Shape, tb.DType, tb.Shape, bytes.Equal(ta.Data, tb.Data))
		}
	}
}

// The tiny generator writes the GGUF itself, permutation included; HFToGGUF of its HF copy
// must give the same tensors and metadata, and GGUFToHF must give the HF weights back.
func TestRoundTripF32(t *testing.T) {
	for _, arch := range arch.Names() {
		t.Run(arch, func(t *testing.T) {
			dir := writeTinyForTest(t, arch)
			out := filepath.Join(t.TempDir(), "conv.gguf")
			if err := HFToGGUF(filepath.Join(dir, "hf"), out, HFToGGUFOptions{}); err != nil {
				t.Fatal(err)
			}
			ref, err := gguf.OpenGGUF(filepath.Join(dir, "model.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			got, err := gguf.OpenGGUF(out)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if len(got.Tensors) != len(ref.Tensors) {
				t.Fatalf("%d tensors, the generator wrote %d", len(got.Tensors), len(ref.Tensors))
			}
			for _, ti := range ref.Tensors {
				_, want, _ := ref.ReadTensor(ti.Name)
				gi, have, err := got.ReadTensor(ti.Name)
				if err != nil || gi.Type != ti.Type || !slices.Equal(gi.Dims, ti.Dims) || !bytes.Equal(have, want) {
					t.Errorf("tensor %s: %v %v %v vs generator %v %v (bytes equal %v)", ti.Name, err, gi.Type, gi.Dims, ti.Type, ti.Dims, bytes.Equal(have, want))
				}
			}
			if len(got.KV) != len(ref.KV) { // one metadata writer: the same keys
				t.Errorf("%d metadata keys, the generator wrote %d", len(got.KV), len(ref.KV))
			}
			for _, kv := range ref.KV {
				if kv.Key == "general.name" {
					continue
				}
				g, ok := got.Lookup(kv.Key)
				if !ok || !reflect.DeepEqual(g.Value, kv.Value) {
					t.Errorf("metadata %s: got %v (present %v), generator wrote %v", kv.Key, short(g.Value), ok, short(kv.Value))
				}
			}

			back := t.TempDir()
			if err := GGUFToHF(out, back, GGUFToHFOptions{}); err != nil {
				t.Fatal(err)
			}
			sameSafetensors(t, filepath.Join(dir, "hf"), back)
			wantCfg, _ := LoadHFConfig(filepath.Join(dir, "hf"))
			gotCfg, err := LoadHFConfig(back)
			if err != nil {
				t.Fatal(err)
			}
			ws, _ := wantCfg.Shape()
			gs, err := gotCfg.Shape()
			if err != nil || !reflect.DeepEqual(gs, ws) {
				t.Errorf("config shape %+v (%v), want %+v", gs, err, ws)
			}
			// The tokenizer written back reads as the same tokenizer.
			wt, _ := tokenizer.LoadHF(filepath.Join(dir, "hf"))
			gt, err := tokenizer.LoadHF(back)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gt, wt) {
				t.Errorf("tokenizer differs after the round trip: bos %d/%d eos %d/%d pad %d/%d pre %s/%s len %d/%d",
					gt.BOS, wt.BOS, gt.EOS, wt.EOS, gt.PAD, wt.PAD, gt.Pre(), wt.Pre(), gt.Len(), wt.Len())
			}
		})
	}
}

func short(v any) string {
	s := strings.TrimSpace(strings.ReplaceAll(fmtAny(v), "\n", " "))
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}

func fmtAny(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// toBF16Dir rewrites an HF directory's weights as BF16, as real checkpoints ship.
func toBF16Dir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var named []safetensors.NamedTensor
	for _, name := range st.Names() {
		tv, _ := st.Tensor(name)
		vals, err := tv.F32()
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := gguf.EncodeTensor(gguf.TypeBF16, vals)
		named = append(named, safetensors.NamedTensor{Name: name, DType: safetensors.BF16, Shape: tv.Shape, Write: gguf.Bytes(raw)})
	}
	if err := safetensors.Write(filepath.Join(dst, "model.safetensors"), named, nil); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestRoundTripBF16(t *testing.T) {
	for _, arch := range arch.Names() {
		t.Run(arch, func(t *testing.T) {
			hf := toBF16Dir(t, filepath.Join(writeTinyForTest(t, arch), "hf"))
			out := filepath.Join(t.TempDir(), "m.gguf")
			if err := HFToGGUF(hf, out, HFToGGUFOptions{Type: gguf.TypeBF16}); err != nil {
				t.Fatal(err)
			}
			g, err := gguf.OpenGGUF(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range g.Tensors {
				want := gguf.TypeBF16
				if len(ti.Dims) == 1 {
					want = gguf.TypeF32 // llama.cpp keeps norms and biases in F32
				}
				if ti.Type != want {
					t.Errorf("%s is %v, want %v", ti.Name, ti.Type, want)
				}
			}
			if ft, _ := g.Uint("general.file_type"); ft != 32 {
				t.Errorf("general.file_type %d, want 32 (MOSTLY_BF16)", ft)
			}
			g.Close()
			back := t.TempDir()
			if err := GGUFToHF(out, back, GGUFToHFOptions{}); err != nil {
				t.Fatal(err)
			}
			sameSafetensors(t, hf, back)
			cfg, _ := LoadHFConfig(back)
			if cfg.TorchDType != "bfloat16" {
				t.Errorf("torch_dtype %q, want bfloat16", cfg.TorchDType)
			}
		})
	}
}

// Sharding splits the weights across files with an index; reading the index gives the same
// tensors as one file.
func TestGGUFToHFSharded(t *testing.T) {
	dir := writeTinyForTest(t, "llama")
	back := t.TempDir()
	var reported []string
	progress := func(done, total int, name string) {
		if done != len(reported) {
			t.Errorf("progress %d/%d for %s after %d reports", done, total, name, len(reported))
		}
		reported = append(reported, name)
	}
	if err := GGUFToHF(filepath.Join(dir, "model.gguf"), back, GGUFToHFOptions{ShardBytes: 100_000, Progress: progress}); err != nil {
		t.Fatal(err)
	}
	if s, _ := DefaultShape(ArchLlama); len(reported) != len(s.Tensors()) {
		t.Errorf("progress reported %d tensors, the model has %d", len(reported), len(s.Tensors()))
	}
	shards, _ := filepath.Glob(filepath.Join(back, "model-*-of-*.safetensors"))
	if len(shards) < 2 {
		t.Fatalf("%d shards, want several for a 100 kB limit", len(shards))
	}
	if _, err := os.Stat(filepath.Join(back, safetensors.FileName)); err == nil {
		t.Error("model.safetensors written beside the shards")
	}
	sameSafetensors(t, filepath.Join(dir, "hf"), back)
}

// Q8_0 keeps vectors in F32 and matrices within one quantisation step of the source.
func TestHFToGGUFQ8(t *testing.T) {
	dir := writeTinyForTest(t, "qwen3")
	out := filepath.Join(t.TempDir(), "q8.gguf")
	if err := HFToGGUF(filepath.Join(dir, "hf"), out, HFToGGUFOptions{Type: gguf.TypeQ8_0}); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.OpenGGUF(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ref, _ := gguf.OpenGGUF(filepath.Join(dir, "model.gguf"))
	defer ref.Close()
	q, _ := g.Tensor("blk.0.ffn_up.weight")
	if q.Type != gguf.TypeQ8_0 {
		t.Fatalf("ffn_up is %v, want Q8_0", q.Type)
	}
	got, _ := g.ReadTensorF32("blk.0.ffn_up.weight")
	want, _ := ref.ReadTensorF32("blk.0.ffn_up.weight")
	for b := 0; b < len(want); b += gguf.Q8BlockSize {
		amax := 0.0
		for _, v := range want[b : b+gguf.Q8BlockSize] {
			amax = max(amax, math.Abs(float64(v)))
		}
		// Half a step of rounding, plus the F16 rounding of the scale times the largest code.
		step := amax / 127
		tol := step/2 + 127*math.Abs(step-float64(gguf.F16ToF32(gguf.F32ToF16(float32(step))))) + 1e-9
		for i := b; i < b+gguf.Q8BlockSize; i++ {
			if d := math.Abs(float64(got[i] - want[i])); d > tol {
				t.Fatalf("value %d: %g vs %g, more than %g apart (step %g)", i, got[i], want[i], tol, step)
			}
		}
	}
	back := t.TempDir()
	if err := GGUFToHF(out, back, GGUFToHFOptions{}); err == nil || !strings.Contains(err.Error(), "Q8_0") {
		t.Errorf("gguf2hf of a Q8_0 file: %v, want an error naming Q8_0", err)
	}
}

func editJSON(t *testing.T, path string, edit func(m map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	raw, _ = json.Marshal(m)
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHFToGGUFBadInput(t *testing.T) {
	cases := []struct {
		why     string
		corrupt func(t *testing.T, hf string)
		opt     HFToGGUFOptions
		want    []string
	}{
		{"unsupported architecture names it and the supported list", func(t *testing.T, hf string) {
			editJSON(t, filepath.Join(hf, "config.json"), func(m map[string]any) { m["model_type"] = "gemma2" })
		}, HFToGGUFOptions{}, []string{`"gemma2"`, strings.Join(SupportedArchitectures(), ", ")}},
		{"missing tokenizer.json", func(t *testing.T, hf string) {
			os.Remove(filepath.Join(hf, "tokenizer.json"))
		}, HFToGGUFOptions{}, []string{"tokenizer.json"}},
		{"missing tokenizer_config.json", func(t *testing.T, hf string) {
			os.Remove(filepath.Join(hf, "tokenizer_config.json"))
		}, HFToGGUFOptions{}, []string{"tokenizer_config.json"}},
		{"config vocab smaller than the tokenizer", func(t *testing.T, hf string) {
			editJSON(t, filepath.Join(hf, "config.json"), func(m map[string]any) { m["vocab_size"] = 100 })
		}, HFToGGUFOptions{}, []string{"vocab_size is 100"}},
		{"embedding rows disagree with vocab_size", func(t *testing.T, hf string) {
			editJSON(t, filepath.Join(hf, "config.json"), func(m map[string]any) { m["vocab_size"] = m["vocab_size"].(float64) + 64 })
		}, HFToGGUFOptions{}, []string{"model.embed_tokens.weight", "shape"}},
		{"integer weights", func(t *testing.T, hf string) {
			rewriteTensor(t, hf, "model.norm.weight", safetensors.I32)
		}, HFToGGUFOptions{}, []string{"model.norm.weight", "I32"}},
		{"unknown extra tensor", func(t *testing.T, hf string) {
			addTensor(t, hf, "model.layers.0.mlp.experts.weight")
		}, HFToGGUFOptions{}, []string{"model.layers.0.mlp.experts.weight", "not part of"}},
		{"output type that is not supported", func(t *testing.T, hf string) {}, HFToGGUFOptions{Type: gguf.TypeQ4_K}, []string{"Q4_K"}},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			hf := filepath.Join(writeTinyForTest(t, "qwen2"), "hf")
			c.corrupt(t, hf)
			out := filepath.Join(t.TempDir(), "x.gguf")
			err := HFToGGUF(hf, out, c.opt)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, statErr := os.Stat(out); statErr == nil {
				t.Error("a failed conversion left an output file")
			}
		})
	}
}

// rewriteTensor stores one tensor of hf/model.safetensors with another dtype of the same
// element size.
func rewriteTensor(t *testing.T, hf, name string, dtype safetensors.DType) {
	t.Helper()
	mutateSafetensors(t, hf, func(ts []safetensors.NamedTensor, views map[string]safetensors.TensorView) []safetensors.NamedTensor {
		for i := range ts {
			if ts[i].Name == name {
				ts[i].DType = dtype
			}
		}
		return ts
	})
}

func addTensor(t *testing.T, hf, name string) {
	t.Helper()
	mutateSafetensors(t, hf, func(ts []safetensors.NamedTensor, _ map[string]safetensors.TensorView) []safetensors.NamedTensor {
		return append(ts, safetensors.NamedTensor{Name: name, DType: safetensors.F32, Shape: []int64{2}, Write: gguf.Bytes(make([]byte, 8))})
	})
}

func mutateSafetensors(t *testing.T, hf string, edit func([]safetensors.NamedTensor, map[string]safetensors.TensorView) []safetensors.NamedTensor) {
	t.Helper()
	st, err := safetensors.Open(hf)
	if err != nil {
		t.Fatal(err)
	}
	views := map[string]safetensors.TensorView{}
	var ts []safetensors.NamedTensor
	for _, name := range st.Names() {
		v, _ := st.Tensor(name)
		views[name] = v
		ts = append(ts, safetensors.NamedTensor{Name: name, DType: v.DType, Shape: v.Shape, Write: gguf.Bytes(v.Data)})
	}
	st.Close()
	if err := safetensors.Write(filepath.Join(hf, safetensors.FileName), edit(ts, views), nil); err != nil {
		t.Fatal(err)
	}
}

func TestGGUFToHFBadInput(t *testing.T) {
	dir := writeTinyForTest(t, "qwen2")
	rewrite := func(t *testing.T, edit func(k *gguf.KV) bool) string {
		ref, err := gguf.OpenGGUF(filepath.Join(dir, "model.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		p := filepath.Join(t.TempDir(), "bad.gguf")
		w, _ := gguf.CreateGGUF(p)
		for _, kv := range ref.KV {
			if kv.Key == "general.alignment" || !edit(&kv) {
				continue
			}
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
		for _, ti := range ref.Tensors {
			_, raw, _ := ref.ReadTensor(ti.Name)
			w.AddTensor(ti.Name, ti.Type, ti.Dims, raw)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		why  string
		edit func(k *gguf.KV) bool
		want []string
	}{
		{"unsupported architecture", func(k *gguf.KV) bool {
			if k.Key == "general.architecture" {
				k.Value = "mamba"
			}
			return true
		}, []string{`"mamba"`, strings.Join(SupportedArchitectures(), ", ")}},
		{"unknown pre-tokenizer", func(k *gguf.KV) bool {
			if k.Key == "tokenizer.ggml.pre" {
				k.Value = "gpt-4o"
			}
			return true
		}, []string{`"gpt-4o"`, "qwen2, llama-bpe"}},
		{"missing head count", func(k *gguf.KV) bool { return k.Key != "qwen2.attention.head_count" }, []string{"qwen2.attention.head_count"}},
		{"eos id outside the vocabulary", func(k *gguf.KV) bool {
			if k.Key == "tokenizer.ggml.eos_token_id" {
				k.Value = uint32(1 << 30)
			}
			return true
		}, []string{"eos_token_id", "outside"}},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			err := GGUFToHF(rewrite(t, c.edit), t.TempDir(), GGUFToHFOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A rope_freqs tensor from another converter, with no stored rope_scaling, is accepted when
// Llama 3's published parameters reproduce it, and refused when they do not.
func TestRopeScalingRecovery(t *testing.T) {
	s, _ := DefaultShape(ArchLlama)
	s.Vocab = 512
	factors := s.llama3RopeFactors()
	cases := []struct {
		why     string
		factors []float32
		wantErr bool
	}{
		{"llama 3 defaults reproduce the tensor", factors, false},
		{"a tensor no llama3 parameters explain", append([]float32{3}, factors[1:]...), true},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "r.gguf")
			w, _ := gguf.CreateGGUF(p)
			raw, _ := gguf.EncodeTensor(gguf.TypeF32, c.factors)
			w.AddTensor("rope_freqs.weight", gguf.TypeF32, []int64{int64(len(c.factors))}, raw)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			g, err := gguf.OpenGGUF(p)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			rs, err := ggufRopeScaling(g, s)
			if c.wantErr {
				if err == nil {
					t.Fatalf("recovered %+v from a tensor it does not explain", rs)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(*rs, *s.RopeScaling) {
				t.Fatalf("got %+v, %v; want %+v", rs, err, *s.RopeScaling)
			}
		})
	}
}

// interleaveRows and deinterleaveRows are inverses, and move rows as llama.cpp's permute does.
func TestInterleaveRows(t *testing.T) {
	src := []byte("a_b_c_d_") // four 2-byte rows of one head: rotary pairs are (a, c) and (b, d)
	dst := make([]byte, len(src))
	interleaveRows(dst, src, 4, 2)
	if string(dst) != "a_c_b_d_" {
		t.Fatalf("interleaved %q, want rotary pairs adjacent: a c b d", dst)
	}
	back := make([]byte, len(src))
	deinterleaveRows(back, dst, 4, 2)
	if !bytes.Equal(back, src) {
		t.Fatalf("deinterleave gave %q, want %q", back, src)
	}
}

// sharedTokenizers is the directory of a real tokenizer in ../shared.
func sharedTokenizers(t testing.TB, name string) string {
	return sharedtest.Path(t, filepath.Join("tokenizers", name))
}

// realTokenizerHF writes an HF directory with a real tokenizer from ../shared and zero
// weights of a tiny shape with that tokenizer's real vocabulary size.
func realTokenizerHF(t *testing.T, name string, arch Arch, vocabSize int) string {
	t.Helper()
	src := sharedTokenizers(t, name)
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
	s, _ := DefaultShape(arch)
	s.Vocab, s.Hidden, s.Layers, s.FFN = vocabSize, 32, 1, 32
	s.Heads, s.KVHeads, s.HeadDim = 2, 1, 16
	if err := jsonfile.Write(filepath.Join(dir, "config.json"), hfConfigOf(s, &tokenizer.HF{})); err != nil {
		t.Fatal(err)
	}
	var named []safetensors.NamedTensor
	for _, tt := range s.Tensors() {
		n, _ := safetensors.TensorBytes(tt.Shape, 4)
		named = append(named, safetensors.NamedTensor{Name: tt.Name, DType: safetensors.F32, Shape: tt.Shape, Write: gguf.Bytes(make([]byte, n))})
	}
	if err := safetensors.Write(filepath.Join(dir, safetensors.FileName), named, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A real tokenizer survives HF -> GGUF -> HF: the directory written back reads as the same
// tokenizer (vocabulary, types, merges, specials, BOS policy, chat template).
func TestRealTokenizerRoundTrip(t *testing.T) {
	cases := []struct {
		name  string
		arch  Arch
		vocab int
	}{
		{"Qwen2.5-3B-Instruct", ArchQwen2, 151936},
		{"Qwen3-4B-Instruct-2507", ArchQwen3, 151936},
		{"Llama-3.2-3B-Instruct", ArchLlama, 128256},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hf := realTokenizerHF(t, c.name, c.arch, c.vocab)
			out := filepath.Join(t.TempDir(), "m.gguf")
			if err := HFToGGUF(hf, out, HFToGGUFOptions{}); err != nil {
				t.Fatal(err)
			}
			back := t.TempDir()
			if err := GGUFToHF(out, back, GGUFToHFOptions{}); err != nil {
				t.Fatal(err)
			}
			want, err := tokenizer.LoadHF(hf)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tokenizer.LoadHF(back)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("tokenizer changed: len %d/%d bos %d/%d eos %d/%d eot %d/%d pad %d/%d addBOS %v/%v pre %s/%s",
					got.Len(), want.Len(), got.BOS, want.BOS, got.EOS, want.EOS, got.EOT, want.EOT, got.PAD, want.PAD,
					got.AddBOS, want.AddBOS, got.Pre(), want.Pre())
			}
		})
	}
}

// A vocabulary-only GGUF made by llama.cpp's own converter has no weights to convert.
func TestGGUFToHFVocabOnly(t *testing.T) {
	p := filepath.Join(sharedTokenizers(t, "llama.cpp"), "ggml-vocab-deepseek-llm.gguf")
	err := GGUFToHF(p, t.TempDir(), GGUFToHFOptions{})
	if err == nil || !strings.Contains(err.Error(), "no tensors") {
		t.Fatalf("error %v, want one saying the file has no tensors", err)
	}
}
