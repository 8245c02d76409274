package cli

import (
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/internal/interrupt"
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
			&ucli.StringFlag{Name: "chat-format", Usage: "override the detected chat format: " + chat.List()},
			&ucli.BoolFlag{Name: "raw", Usage: "send the prompt as is, without a chat template"},
			&ucli.IntFlag{Name: "k", Aliases: []string{"n"}, Value: 1, Usage: "samples of the prompt"},
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write JSONL here (atomically) instead of stdout"},
		}, samplingFlags()...), llamaFlags()...),
		Action: generate,
	})
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

	prompt, err := m.ChatPrompt(c.String("prompt"), c.String("system"), c.String("chat-format"), c.Bool("raw"))
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

	ctx, release := interrupt.Context("")
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
	return writeOutput(c, c.String("out"), func(w io.Writer) error { return m.WriteSamples(w, res.Samples) })
}
