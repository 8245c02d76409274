package cli

import (
	"encoding/json"
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/launch"
)

func init() {
	register(&ucli.Command{
		Name:      "generate",
		Usage:     "sample K continuations of one prompt, with per-token log-probs and entropies",
		UsageText: "umad generate --model M.gguf --prompt TEXT [--system TEXT] [-k 16] [--temperature 0.6] [--top-p 0.95] [--max-tokens N] [--seed S] [--out samples.jsonl]",
		Description: "The prompt is rendered with the model's chat template (detected from the GGUF, or\n" +
			"--chat-format), decoded once, and shared by all K samples. Each output line is one\n" +
			"sample: text, token ids, the log-probability of each token under softmax(logits/T)\n" +
			"over the full vocabulary, the entropy of that distribution, and the finish reason\n" +
			"(stop: an end-of-generation token, kept in the tokens; length: --max-tokens).\n" +
			"The same --seed gives byte-identical output.\n\n" +
			"Example:\n  umad model tiny --out /tmp/tiny\n  umad generate --model /tmp/tiny/model.gguf --prompt 'What is 2+3?' -k 4 --max-tokens 32",
		Flags: append(append([]ucli.Flag{
			&ucli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "GGUF model file", Required: true},
			&ucli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Usage: "user message", Required: true},
			&ucli.StringFlag{Name: "system", Usage: "system message (default: the chat format's own, if any)"},
			&ucli.StringFlag{Name: "chat-format", Usage: "override the detected chat format: qwen2.5, qwen3, llama3 or gemma3"},
			&ucli.BoolFlag{Name: "raw", Usage: "send the prompt as is, without a chat template"},
			&ucli.IntFlag{Name: "k", Aliases: []string{"n"}, Value: 1, Usage: "samples of the prompt"},
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write JSONL here (atomically) instead of stdout"},
		}, samplingFlags()...), llamaFlags()...),
		Action: generate,
	})
}

// sampleLine is one line of generate's output.
type sampleLine struct {
	Index     int       `json:"index"`
	Text      string    `json:"text"`
	Tokens    []int32   `json:"tokens"`
	LogProbs  []float32 `json:"logprobs"`
	Entropies []float32 `json:"entropies"`
	KeptMass  []float32 `json:"kept_mass,omitempty"` // top-k/top-p kept mass per token; absent when nothing was cut
	Finish    string    `json:"finish"`
}

func generate(c *ucli.Context) error {
	k := c.Int("k")
	if k < 1 {
		return fmt.Errorf("-k must be at least 1, got %d", k)
	}
	if c.Int("max-tokens") < 1 {
		return fmt.Errorf("--max-tokens must be at least 1, got %d", c.Int("max-tokens"))
	}
	params, err := samplingParams(c)
	if err != nil {
		return err
	}
	opt, err := engineOptions(c, min(k, 64))
	if err != nil {
		return err
	}
	if c.String("model") == "" {
		return fmt.Errorf("no model given (--model M.gguf)")
	}
	place, err := placement(c)
	if err != nil {
		return err
	}
	m, err := engine.OpenModel(c.String("model"), place)
	if err != nil {
		return err
	}
	defer m.Close()

	prompt, err := generatePrompt(c, m)
	if err != nil {
		return err
	}
	if c.IsSet("ctx") {
		if err := checkContext("--ctx", opt.SeqContext, m.TrainedContext(), m.Path()); err != nil {
			return err
		}
	}
	e, err := newEngine(m, opt, "--ctx")
	if err != nil {
		return err
	}
	defer e.Close()

	ctx, release := interruptContext("")
	defer release()

	req := []engine.Request{{Prompt: prompt, K: k, MaxTokens: c.Int("max-tokens"), Params: params, Seed: c.Uint64("seed")}}
	var res engine.Result
	if err := e.Generate(ctx, req, func(r engine.Result) { res = r }); err != nil {
		if ctx.Err() != nil {
			return launch.ErrInterrupted
		}
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	return writeOutput(c, c.String("out"), func(w io.Writer) error { return writeSamples(w, m, res.Samples) })
}

// generatePrompt is --prompt's tokens: rendered with the model's chat format (and
// --system) unless --raw.
func generatePrompt(c *ucli.Context, m *engine.Model) ([]int32, error) {
	text := c.String("prompt")
	if !c.Bool("raw") {
		f, err := m.Format(c.String("chat-format"))
		if err != nil {
			return nil, err
		}
		var msgs []chat.Message
		if s := c.String("system"); s != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: s})
		}
		if text, err = f.Render(append(msgs, chat.Message{Role: "user", Content: text}), chat.Options{}); err != nil {
			return nil, err
		}
	}
	return m.Tokenize(text, c.Bool("raw"), !c.Bool("raw"))
}

// writeSamples writes one JSON line per sample.
func writeSamples(w io.Writer, m *engine.Model, samples []engine.Sample) error {
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
