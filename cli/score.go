package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
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
	LogProbs(prompts, responses [][]int32, temperature float64) (logp, ent [][]float32, err error)
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
		if err := checkThreads("threads", c.Int("threads")); err != nil {
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

// tokenize fills missing ids from the prompt and response texts with the GGUF's tokenizer.
func tokenizeLines(g *engine.ModelScorer, lines []scoreLine) error {
	for i := range lines {
		l := &lines[i]
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
		if l.prompt, err = g.Tokenize(*text.Prompt, false, true); err != nil {
			return err
		}
		if l.response, err = g.Tokenize(*text.Response, false, true); err != nil {
			return err
		}
	}
	return nil
}

// scoreLine keeps every input field and adds the scores.
type scoreLine struct {
	fields           map[string]json.RawMessage
	prompt, response []int32
	line             int
}

func readScoreLines(path string) ([]scoreLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	defer f.Close()
	var lines []scoreLine
	err = data.ReadLines(f, func(n int, line []byte) error {
		var l scoreLine
		var ids struct {
			Prompt   []int32 `json:"prompt_tokens"`
			Response []int32 `json:"response_tokens"`
		}
		if err := json.Unmarshal(line, &l.fields); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if err := json.Unmarshal(line, &ids); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		l.prompt, l.response, l.line = ids.Prompt, ids.Response, n
		lines = append(lines, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("score: %s: %w", path, err)
	}
	return lines, nil
}

func score(c *ucli.Context) error {
	if c.Int("batch") < 1 {
		return fmt.Errorf("score: --batch must be at least 1")
	}
	lines, err := readScoreLines(c.String("in"))
	if err != nil {
		return err
	}
	if c.String("gguf") == "" { // only llama.cpp can tokenize text lines
		if err := checkPrompts(c.String("in"), lines); err != nil {
			return err
		}
	}
	s, err := newScorer(c)
	if err != nil {
		return err
	}
	defer s.Free()
	if g, ok := s.(*engine.ModelScorer); ok {
		if err := tokenizeLines(g, lines); err != nil {
			return err
		}
	}
	if err := checkPrompts(c.String("in"), lines); err != nil {
		return err
	}
	write := func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for start := 0; start < len(lines); start += c.Int("batch") {
			batch := lines[start:min(start+c.Int("batch"), len(lines))]
			var prompts, responses [][]int32
			for _, l := range batch {
				prompts, responses = append(prompts, l.prompt), append(responses, l.response)
			}
			logp, ent, err := s.LogProbs(prompts, responses, c.Float64("temperature"))
			if err != nil {
				return fmt.Errorf("score lines %d-%d: %w", start+1, start+len(batch), err)
			}
			for i, l := range batch {
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
	return writeOutput(c, c.String("out"), write)
}

func checkPrompts(path string, lines []scoreLine) error {
	for _, l := range lines {
		if len(l.prompt) == 0 {
			return fmt.Errorf("score: %s line %d: prompt_tokens is missing or empty", path, l.line)
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
