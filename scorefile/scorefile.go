// Package scorefile scores the responses of a JSONL file under a model (umad score): each
// line's prompt and response token ids (or, with a tokenizer, their texts) come back with
// every field the line had plus the log-prob and entropy of each response token.
package scorefile

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/umad-dev/umad/data"
)

// Scorer computes response log-probs: a GGUF through llama.cpp, or an HF model through the
// plugin.
type Scorer interface {
	LogProbs(prompts, responses [][]int32, temperature float64) (logp, ent [][]float32, err error)
}

// Tokenizer turns a line's texts into ids (a GGUF's tokenizer).
type Tokenizer interface {
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
}

// File is a score input, its lines read whole.
type File struct {
	path  string
	lines []line
}

// line keeps every input field and adds the scores.
type line struct {
	fields           map[string]json.RawMessage
	prompt, response []int32
	line             int
}

// Read reads a score input.
func Read(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	defer f.Close()
	file := &File{path: path}
	err = data.ReadLines(f, func(n int, raw []byte) error {
		var l line
		var ids struct {
			Prompt   []int32 `json:"prompt_tokens"`
			Response []int32 `json:"response_tokens"`
		}
		if err := json.Unmarshal(raw, &l.fields); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if err := json.Unmarshal(raw, &ids); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		l.prompt, l.response, l.line = ids.Prompt, ids.Response, n
		file.lines = append(file.lines, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("score: %s: %w", path, err)
	}
	return file, nil
}

// Tokenize fills missing ids from the prompt and response texts with t.
func (f *File) Tokenize(t Tokenizer) error {
	for i := range f.lines {
		l := &f.lines[i]
		if len(l.prompt) > 0 {
			continue
		}
		var text struct {
			Prompt   *string `json:"prompt"`
			Response *string `json:"response"`
		}
		if p, ok := l.fields["prompt"]; ok {
			json.Unmarshal(p, &text.Prompt)
		}
		if r, ok := l.fields["response"]; ok {
			json.Unmarshal(r, &text.Response)
		}
		if text.Prompt == nil || *text.Prompt == "" || text.Response == nil {
			return fmt.Errorf("score: line %d has neither prompt_tokens nor prompt and response texts", l.line)
		}
		var err error
		if l.prompt, err = t.Tokenize(*text.Prompt, false, true); err != nil {
			return err
		}
		if l.response, err = t.Tokenize(*text.Response, false, true); err != nil {
			return err
		}
	}
	return nil
}

// CheckPrompts refuses a line without prompt ids.
func (f *File) CheckPrompts() error {
	for _, l := range f.lines {
		if len(l.prompt) == 0 {
			return fmt.Errorf("score: %s line %d: prompt_tokens is missing or empty", f.path, l.line)
		}
	}
	return nil
}

// Write scores the lines, batch at a time, with logits divided by temperature, and writes
// each with its logprobs and entropies.
func (f *File) Write(w io.Writer, s Scorer, batch int, temperature float64) error {
	enc := json.NewEncoder(w)
	lines := f.lines
	for start := 0; start < len(lines); start += batch {
		part := lines[start:min(start+batch, len(lines))]
		var prompts, responses [][]int32
		for _, l := range part {
			prompts, responses = append(prompts, l.prompt), append(responses, l.response)
		}
		logp, ent, err := s.LogProbs(prompts, responses, temperature)
		if err != nil {
			return fmt.Errorf("score lines %d-%d: %w", start+1, start+len(part), err)
		}
		for i, l := range part {
			if bad := firstNonFinite(logp[i], ent[i]); bad != "" {
				return fmt.Errorf("score: line %d: the model gives a %s log-prob or entropy (are its weights diverged?)", l.line, bad)
			}
			out := l.fields
			// Finite float32 slices always marshal.
			out["logprobs"], _ = json.Marshal(logp[i])
			out["entropies"], _ = json.Marshal(ent[i])
			if err := enc.Encode(out); err != nil {
				return fmt.Errorf("score: write line %d: %w", l.line, err)
			}
		}
	}
	return nil
}

// firstNonFinite names the first NaN or infinite value ("NaN", "+Inf", "-Inf") in the
// slices, or is "".
func firstNonFinite(slices ...[]float32) string {
	for _, xs := range slices {
		for _, x := range xs {
			if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Sprint(f)
			}
		}
	}
	return ""
}
