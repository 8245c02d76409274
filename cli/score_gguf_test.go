package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
)

// With --gguf a text line and the same line as token ids score identically, and every
// response token gets a log-prob and an entropy.
func TestScoreGGUFTextAndIDs(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen3")
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte(`{"prompt":"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n","response":"It is \\boxed{4}.<|im_end|>"}`+"\n"), 0o644)
	var out bytes.Buffer
	app := App()
	app.Writer = &out
	if err := app.Run([]string{"umad", "score", "--gguf", gguf, "--in", in, "--temperature", "0.6"}); err != nil {
		t.Fatal(err)
	}
	var text struct{ Logprobs, Entropies []float64 }
	if err := json.Unmarshal(out.Bytes(), &text); err != nil {
		t.Fatal(err)
	}
	if len(text.Logprobs) < 5 || len(text.Logprobs) != len(text.Entropies) {
		t.Fatalf("got %d log-probs and %d entropies", len(text.Logprobs), len(text.Entropies))
	}
	for i, lp := range text.Logprobs {
		if !(lp < 0) || !(text.Entropies[i] > 0) {
			t.Errorf("token %d: log-prob %v, entropy %v", i, lp, text.Entropies[i])
		}
	}
	// The same sequence as ids: tokenize through the model the way score does.
	m, err := engine.OpenVocab(gguf)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := m.Tokenize("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", false, true)
	r, _ := m.Tokenize(`It is \boxed{4}.<|im_end|>`, false, true)
	m.Close()
	line, _ := json.Marshal(map[string][]int32{"prompt_tokens": p, "response_tokens": r})
	os.WriteFile(in, append(line, '\n'), 0o644)
	out.Reset()
	if err := app.Run([]string{"umad", "score", "--gguf", gguf, "--in", in, "--temperature", "0.6"}); err != nil {
		t.Fatal(err)
	}
	var ids struct{ Logprobs []float64 }
	json.Unmarshal(out.Bytes(), &ids)
	if len(ids.Logprobs) != len(text.Logprobs) {
		t.Fatalf("ids: %d log-probs, text: %d", len(ids.Logprobs), len(text.Logprobs))
	}
	for i := range ids.Logprobs {
		if ids.Logprobs[i] != text.Logprobs[i] {
			t.Errorf("token %d: %v from ids, %v from text", i, ids.Logprobs[i], text.Logprobs[i])
		}
	}
	// Text lines need --gguf: the plugin has no tokenizer.
	err = app.Run([]string{"umad", "score", "--model", dir, "--in", in + ".none"})
	if err == nil || !strings.Contains(err.Error(), "score") {
		t.Errorf("missing input: %v", err)
	}
}

// Token ids outside the vocabulary, in the prompt or the response, negative or too large,
// are a one-line error, not an index-out-of-range panic; so is a sequence longer than the
// model's context.
func TestScoreGGUFRejectsBadIDs(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen3")
	for _, c := range []struct{ line, want string }{
		{`{"prompt_tokens":[1,2],"response_tokens":[99999]}`, "response token 99999 at index 0 is outside the vocabulary"},
		{`{"prompt_tokens":[1,2],"response_tokens":[3,-4]}`, "response token -4 at index 1 is outside the vocabulary"},
		{`{"prompt_tokens":[1,99999],"response_tokens":[3]}`, "prompt token 99999 at index 1 is outside the vocabulary"},
		{`{"prompt_tokens":[-1,2],"response_tokens":[3]}`, "prompt token -1 at index 0 is outside the vocabulary"},
		{`{"prompt":"hi","response":"` + strings.Repeat("x", 100_000) + `"}`, "more than the model's context"},
	} {
		in := filepath.Join(t.TempDir(), "in.jsonl")
		os.WriteFile(in, []byte(c.line+"\n"), 0o644)
		var stderr bytes.Buffer
		code := runWithApp([]string{"score", "--gguf", gguf, "--in", in}, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%.60s: exit %d, stderr %q: want exit 1 and one line containing %q", c.line, code, msg, c.want)
		}
	}
}

// A model whose weights hold NaN (a diverged training run) failed score with two lines of
// "json: unsupported value: NaN"; now one line says the model gives NaN, for --gguf and
// --model.
func TestScoreNaNModel(t *testing.T) {
	hf := t.TempDir()
	src := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "model.safetensors" {
			b = withNaNTensor(t, b, "model.norm.weight")
		}
		os.WriteFile(filepath.Join(hf, e.Name()), b, 0o644)
	}
	gguf := filepath.Join(t.TempDir(), "nan.gguf")
	if _, stderr, err := runApp(t, "convert", "hf2gguf", hf, gguf); err != nil {
		t.Fatalf("hf2gguf: %v\n%s", err, stderr)
	}
	in := writeLines(t, `{"prompt_tokens":[1,2],"response_tokens":[3,4]}`)
	torchtest.Open(t) // skips without the plugin on a developer machine
	for _, model := range [][]string{{"--gguf", gguf}, {"--model", hf}} {
		var stderr bytes.Buffer
		code := runWithApp(append([]string{"score", "--in", in}, model...), &stderr)
		msg := strings.TrimSpace(stderr.String())
		if want := "line 1: the model gives a NaN log-prob or entropy"; code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, want) {
			t.Errorf("%s: exit %d, stderr %q: want exit 1 and one line containing %q", model[0], code, msg, want)
		}
	}
}

// withNaNTensor returns a safetensors file with every value of the named F32 tensor NaN.
func withNaNTensor(t *testing.T, file []byte, name string) []byte {
	t.Helper()
	n := binary.LittleEndian.Uint64(file)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(file[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	var info struct {
		DType   string `json:"dtype"`
		Offsets [2]int `json:"data_offsets"`
	}
	if err := json.Unmarshal(header[name], &info); err != nil || info.DType != "F32" {
		t.Fatalf("tensor %s: %+v %v", name, info, err)
	}
	out := bytes.Clone(file)
	data := out[8+n:]
	for i := info.Offsets[0]; i < info.Offsets[1]; i += 4 {
		binary.LittleEndian.PutUint32(data[i:], math.Float32bits(float32(math.NaN())))
	}
	return out
}
