package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/model"
)

// `umad score --model` writes each input line back with the log-probs and entropies the
// plugin computes for it, whatever the batching.
func TestScoreAddsLogProbsAndEntropies(t *testing.T) {
	rt := torchtest.Open(t)
	dir := t.TempDir()
	if err := model.WriteTiny(dir, model.TinyOptions{Arch: "qwen2", Seed: 1, ChatTemplate: "x"}); err != nil {
		t.Fatal(err)
	}
	hf := filepath.Join(dir, "hf")
	prompts := [][]int32{{1, 2, 3}, {7}, {4, 4, 9, 10}}
	responses := [][]int32{{5, 6}, {8, 9, 10, 11}, {}}
	in := writeLines(t,
		`{"id":"a","prompt_tokens":[1,2,3],"response_tokens":[5,6]}`,
		`{"id":"b","prompt_tokens":[7],"response_tokens":[8,9,10,11]}`,
		`{"id":"c","prompt_tokens":[4,4,9,10],"response_tokens":[]}`)
	m, err := hfmodel.Load(rt, hf, torch.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	wantLP, wantEnt, err := m.LogProbs(prompts, responses, 0.6)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []string{"1", "2", "16"} {
		t.Run("batch "+batch, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.jsonl")
			app := App()
			var stderr bytes.Buffer
			app.ErrWriter = &stderr
			if err := app.Run([]string{"umad", "score", "--model", hf, "--in", in, "--out", out, "--temperature", "0.6", "--batch", batch, "--threads", "1"}); err != nil {
				t.Fatal(err, stderr.String())
			}
			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d output lines, want 3", len(lines))
			}
			for i, line := range lines {
				var got struct {
					ID        string    `json:"id"`
					LogProbs  []float32 `json:"logprobs"`
					Entropies []float32 `json:"entropies"`
				}
				if err := json.Unmarshal([]byte(line), &got); err != nil {
					t.Fatal(err)
				}
				if got.ID != string(rune('a'+i)) || len(got.LogProbs) != len(responses[i]) || len(got.Entropies) != len(responses[i]) {
					t.Fatalf("line %d: %s", i, line)
				}
				for j := range got.LogProbs {
					if math.Abs(float64(got.LogProbs[j]-wantLP[i][j])) > 1e-5 || math.Abs(float64(got.Entropies[j]-wantEnt[i][j])) > 1e-5 {
						t.Errorf("line %d token %d: %g/%g, want %g/%g", i, j, got.LogProbs[j], got.Entropies[j], wantLP[i][j], wantEnt[i][j])
					}
				}
			}
		})
	}
}

func TestScoreRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"no prompt to condition on", `{"prompt_tokens":[],"response_tokens":[1]}`, "prompt_tokens is missing"},
		{"not JSON", `{"prompt_tokens":[1`, "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := writeLines(t, tc.line)
			err := App().Run([]string{"umad", "score", "--model", t.TempDir(), "--in", in})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Issue 44: with max_position_embeddings 1 the plugin scored 50 tokens while llama.cpp
// refused them; both scorers now refuse a sequence longer than the model's context, with
// the same words.
func TestScorersAgreeOnContext(t *testing.T) {
	hf := tinyHFDir(t, "qwen2")
	cfg, err := os.ReadFile(filepath.Join(hf, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	short := regexp.MustCompile(`"max_position_embeddings": *\d+`).ReplaceAll(cfg, []byte(`"max_position_embeddings": 8`))
	if bytes.Equal(short, cfg) {
		t.Fatal("config.json has no max_position_embeddings to change")
	}
	if err := os.WriteFile(filepath.Join(hf, "config.json"), short, 0o644); err != nil {
		t.Fatal(err)
	}
	gguf := filepath.Join(t.TempDir(), "m.gguf")
	if _, _, err := runApp(t, "convert", "hf2gguf", hf, gguf); err != nil {
		t.Fatal(err)
	}
	fits := writeLines(t, `{"prompt_tokens":[1,2,3,4],"response_tokens":[5,6,7,8]}`)
	long := writeLines(t, `{"prompt_tokens":[1,2,3,4,5],"response_tokens":[6,7,8,9]}`)
	for _, flag := range []string{"--model", "--gguf"} {
		path := map[string]string{"--model": hf, "--gguf": gguf}[flag]
		if _, _, err := runApp(t, "score", flag, path, "--in", fits, "--out", filepath.Join(t.TempDir(), "o.jsonl")); err != nil {
			t.Errorf("score %s, 8 tokens in a context of 8: %v", flag, err)
		}
		_, _, err := runApp(t, "score", flag, path, "--in", long, "--out", filepath.Join(t.TempDir(), "o.jsonl"))
		if want := "9 tokens are more than the model's context of 8"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("score %s, 9 tokens: %v, want %q", flag, err, want)
		}
	}
}
