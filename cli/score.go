package cli

import (
	"errors"
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/scorefile"
)

func init() {
	register(&ucli.Command{
		Name:  "score",
		Usage: "per-token log-probs and entropies of given responses under a model",
		UsageText: "umad score --model HF_DIR --in seqs.jsonl [--out FILE] [--temperature T]\n" +
			"umad score --gguf M.gguf --in seqs.jsonl [--kv-type f32] [--flash-attn off]",
		Description: "Reads JSONL lines with prompt_tokens and response_tokens (token ids) and writes each\n" +
			"line back with logprobs and entropies added: for every response token, its log-prob\n" +
			"under softmax(logits/T) and the entropy of that distribution. --model is a Hugging Face\n" +
			"directory scored through the libtorch plugin (see kernels/README.md to build it);\n" +
			"--gguf is a GGUF file scored through llama.cpp, exact by default (F32 KV cache, flash\n" +
			"attention off); with --gguf, lines may hold text (prompt, response) instead of ids,\n" +
			"tokenized by the GGUF's tokenizer (special tokens parsed, no BOS added).\n" +
			"--out is written atomically; without it, stdout.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "model", Usage: "Hugging Face model directory (config.json + safetensors), or a hub id ORG/NAME[@REVISION] from the Hugging Face cache (umad --help: --hf-download)"},
			&ucli.StringFlag{Name: "gguf", Usage: "GGUF model file, scored with llama.cpp"},
			&ucli.StringFlag{Name: "kv-type", Value: "f32", Usage: "with --gguf: KV-cache type f32 (exact), f16 or q8_0"},
			&ucli.StringFlag{Name: "flash-attn", Value: "off", Usage: "with --gguf: flash attention off (exact), auto or on"},
			&ucli.StringFlag{Name: "in", Usage: "input JSONL", Required: true},
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write JSONL here (atomically) instead of stdout"},
			&ucli.Float64Flag{Name: "temperature", Aliases: []string{"t"}, Value: 1, Usage: "logits are divided by T"},
			&ucli.IntFlag{Name: "batch", Value: 16, Usage: "sequences scored together (one packed batch)"},
			&ucli.IntFlag{Name: "threads", Usage: "libtorch threads; 0 = all CPUs"},
			&ucli.StringFlag{Name: "torch-plugin", EnvVars: []string{torch.PluginEnv}, Usage: "path to " + torch.PluginName},
			trainDeviceFlag("scores --model"),
		},
		Action: score,
	})
}

// scorer is one engine that computes response log-probs; each model flag is one branch of
// newScorer.
type scorer interface {
	scorefile.Scorer
	Free()
}

func newScorer(c *ucli.Context) (scorer, error) {
	if c.String("model") != "" && c.String("gguf") != "" {
		return nil, errors.New("score: give --model or --gguf, not both")
	}
	if path := c.String("gguf"); path != "" {
		opt, err := engine.ParseOptions(0, 0, c.Int("threads"), c.String("kv-type"), c.String("flash-attn"))
		if err != nil {
			return nil, err
		}
		if err := run.CheckThreads("threads", c.Int("threads")); err != nil {
			return nil, err
		}
		return engine.OpenScorer(path, opt)
	}
	if err := resolveHFFlag(c, "model"); err != nil {
		return nil, err
	}
	if dir := c.String("model"); dir != "" {
		rt, err := torch.Open(torch.Options{Plugin: c.String("torch-plugin"), Threads: c.Int("threads")})
		if err != nil {
			return nil, err
		}
		dev, err := rt.ResolveDevice(c.String("train-device"))
		if err != nil {
			return nil, fmt.Errorf("--train-device: %w", err)
		}
		var opts torch.ModelOptions
		opts.Device = dev
		return hfmodel.Load(rt, dir, opts)
	}
	return nil, fmt.Errorf("score: --model or --gguf is required")
}

func score(c *ucli.Context) error {
	if c.Int("batch") < 1 {
		return fmt.Errorf("score: --batch must be at least 1")
	}
	f, err := scorefile.Read(c.String("in"))
	if err != nil {
		return err
	}
	if c.String("gguf") == "" { // only llama.cpp can tokenize text lines
		if err := f.CheckPrompts(); err != nil {
			return err
		}
	}
	s, err := newScorer(c)
	if err != nil {
		return err
	}
	defer s.Free()
	if g, ok := s.(*engine.ModelScorer); ok {
		if err := f.Tokenize(g); err != nil {
			return err
		}
	}
	if err := f.CheckPrompts(); err != nil {
		return err
	}
	return writeOutput(c, c.String("out"), func(w io.Writer) error {
		return f.Write(w, s, c.Int("batch"), c.Float64("temperature"))
	})
}
