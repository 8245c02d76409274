package engine

import (
	"encoding/json"
	"io"

	"github.com/umad-dev/umad/chat"
)

// ChatPrompt is a user message as umad generate sends it: rendered with the model's chat
// format (format, a family name, overrides the detected one) after system when that is set,
// or with raw the text as it is, without a template.
func (m *Model) ChatPrompt(text, system, format string, raw bool) ([]int32, error) {
	if !raw {
		f, err := m.Format(format)
		if err != nil {
			return nil, err
		}
		var msgs []chat.Message
		if system != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: system})
		}
		if text, err = f.Render(append(msgs, chat.Message{Role: "user", Content: text}), chat.Options{}); err != nil {
			return nil, err
		}
	}
	return m.Tokenize(text, raw, !raw)
}

// sampleLine is one line of WriteSamples.
type sampleLine struct {
	Index     int       `json:"index"`
	Text      string    `json:"text"`
	Tokens    []int32   `json:"tokens"`
	LogProbs  []float32 `json:"logprobs"`
	Entropies []float32 `json:"entropies"`
	KeptMass  []float32 `json:"kept_mass,omitempty"` // top-k/top-p kept mass per token; absent when nothing was cut
	Finish    string    `json:"finish"`
}

// WriteSamples writes one JSON line per sample: its text, tokens, log-probs, entropies,
// kept mass and finish reason (umad generate's output).
func (m *Model) WriteSamples(w io.Writer, samples []Sample) error {
	enc := json.NewEncoder(w)
	for _, s := range samples {
		text, err := m.Detokenize(s.Tokens, false)
		if err != nil {
			return err
		}
		line := sampleLine{Index: s.Index, Text: text, Tokens: s.Tokens, LogProbs: s.LogProbs, Entropies: s.Entropies, KeptMass: s.KeptMass, Finish: string(s.Finish)}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}
