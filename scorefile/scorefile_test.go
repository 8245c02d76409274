package scorefile

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// byteTokens tokenizes a text as its bytes.
type byteTokens struct{}

func (byteTokens) Tokenize(text string, _, _ bool) ([]int32, error) {
	ids := make([]int32, len(text))
	for i := range text {
		ids[i] = int32(text[i])
	}
	return ids, nil
}

// lengths scores each response token with -(its prompt's length) and entropy T; nan gives
// the first token of each response NaN.
type lengths struct{ nan bool }

func (s lengths) LogProbs(prompts, responses [][]int32, temperature float64) (logp, ent [][]float32, err error) {
	for i := range prompts {
		lp, en := make([]float32, len(responses[i])), make([]float32, len(responses[i]))
		for j := range lp {
			lp[j], en[j] = -float32(len(prompts[i])), float32(temperature)
		}
		if s.nan && len(lp) > 0 {
			lp[0] = float32(math.NaN())
		}
		logp, ent = append(logp, lp), append(ent, en)
	}
	return logp, ent, nil
}

func readLines(t *testing.T, lines ...string) *File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// scored is what a test reads back of an output line.
type scored struct {
	ID        int       `json:"id"`
	LogProbs  []float32 `json:"logprobs"`
	Entropies []float32 `json:"entropies"`
}

// Lines of ids and lines of text come back with every field and a score per response
// token, in batches of any size; a line without a prompt is refused until it is tokenized.
func TestWrite(t *testing.T) {
	f := readLines(t,
		`{"id": 1, "prompt_tokens": [1, 2, 3], "response_tokens": [4, 5]}`,
		`{"id": 2, "prompt": "ab", "response": "xyz"}`)
	if err := f.CheckPrompts(); err == nil || !strings.Contains(err.Error(), "line 2: prompt_tokens is missing") {
		t.Fatalf("untokenized text line: %v", err)
	}
	if err := f.Tokenize(byteTokens{}); err != nil {
		t.Fatal(err)
	}
	if err := f.CheckPrompts(); err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{1, 2, 3} {
		var out bytes.Buffer
		if err := f.Write(&out, lengths{}, batch, 0.5); err != nil {
			t.Fatal(err)
		}
		var got []scored
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var g scored
			if err := json.Unmarshal([]byte(l), &g); err != nil {
				t.Fatal(err)
			}
			got = append(got, g)
		}
		if len(got) != 2 || got[0].ID != 1 || len(got[0].LogProbs) != 2 || got[0].LogProbs[0] != -3 ||
			got[1].ID != 2 || len(got[1].LogProbs) != 3 || got[1].LogProbs[0] != -2 || got[1].Entropies[2] != 0.5 {
			t.Errorf("batch %d: %+v", batch, got)
		}
	}
}

// A line with neither ids nor texts cannot be tokenized, and a NaN score is refused with
// its line.
func TestRefusals(t *testing.T) {
	f := readLines(t, `{"prompt": "ab"}`)
	if err := f.Tokenize(byteTokens{}); err == nil || !strings.Contains(err.Error(), "line 1 has neither") {
		t.Errorf("no response text: %v", err)
	}
	f = readLines(t, `{"prompt_tokens": [1], "response_tokens": [2]}`)
	if err := f.Write(&bytes.Buffer{}, lengths{nan: true}, 1, 1); err == nil || !strings.Contains(err.Error(), "line 1: the model gives a NaN") {
		t.Errorf("NaN score: %v", err)
	}
}
