package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/bench"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/sampler"
)

func init() {
	register(&ucli.Command{
		Name:  "bench",
		Usage: "measure throughput against bare baselines",
		Subcommands: []*ucli.Command{{
			Name:      "rollout",
			Usage:     "engine tokens/s against a bare llama.cpp decode loop, sampler share, prefix-sharing savings",
			UsageText: "umad bench rollout [--model M.gguf] [-k 16] [--max-tokens 128] [--big-vocab 151936] [--results bench/RESULTS.md]",
			Description: "Runs the rollout engine (sampling at T=0.6, top-p 0.95, with log-probs and entropies)\n" +
				"and a bare loop (greedy argmax, nothing else) on the same model, batch and threads, in\n" +
				"one process, and prints engine/bare. Every sample decodes exactly --max-tokens tokens.\n" +
				"Without --model it generates a tiny qwen2 model, plus one with a --big-vocab vocabulary\n" +
				"for the sampler's share at a real vocabulary size (batch --big-batch).",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "model", Usage: "GGUF model (default: a generated tiny qwen2 model)"},
				&ucli.IntFlag{Name: "k", Value: 16, Usage: "samples of one prompt, decoded together"},
				&ucli.IntFlag{Name: "max-tokens", Value: 128, Usage: "tokens per sample"},
				&ucli.IntFlag{Name: "prompt-tokens", Value: 64, Usage: "prompt length"},
				&ucli.IntFlag{Name: "big-vocab", Value: 151936, Usage: "vocabulary of the second generated model (0 = skip)"},
				&ucli.IntFlag{Name: "big-batch", Value: 64, Usage: "samples decoded together on the big-vocabulary model"},
				&ucli.StringFlag{Name: "preset", Usage: "also measure random weights of a real shape at --big-batch: " + presetNames()},
				&ucli.IntFlag{Name: "preset-tokens", Value: 8, Usage: "tokens per sample on the preset model"},
				&ucli.IntFlag{Name: "repeats", Value: 3, Usage: "best of this many runs"},
				&ucli.IntFlag{Name: "threads", Usage: "llama.cpp threads; 0 = physical cores"},
				&ucli.IntFlag{Name: "gpu-layers", DefaultText: "all with a GPU, else 0", Usage: "layers to offload to the GPU"},
				&ucli.StringFlag{Name: "results", Usage: "update this Markdown file's section (e.g. bench/RESULTS.md)"},
				&ucli.StringFlag{Name: "section", Value: "rollout", Usage: "name of the section --results rewrites (bench/gpu.sh keeps one per GPU setting)"},
			},
			Action: benchRollout,
		}},
	})
}

func benchRollout(c *ucli.Context) error {
	type run struct {
		label  string
		path   string
		k      int
		tokens int
	}
	var runs []run
	if p := c.String("model"); p != "" {
		runs = append(runs, run{filepath.Base(p), p, c.Int("k"), c.Int("max-tokens")})
	} else {
		dir, err := os.MkdirTemp("", "umad-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		tmpl, _ := chat.Template(chat.Qwen25)
		tiny := filepath.Join(dir, "tiny")
		if err := model.WriteTiny(tiny, model.TinyOptions{Arch: "qwen2", Seed: 1, ChatTemplate: tmpl}); err != nil {
			return err
		}
		runs = append(runs, run{"tiny qwen2", filepath.Join(tiny, "model.gguf"), c.Int("k"), c.Int("max-tokens")})
		if v := c.Int("big-vocab"); v > 0 {
			big := filepath.Join(dir, "big")
			if err := model.WriteTiny(big, model.TinyOptions{Arch: "qwen2", Seed: 1, ChatTemplate: tmpl, VocabSize: v}); err != nil {
				return err
			}
			runs = append(runs, run{fmt.Sprintf("tiny qwen2, vocab %d", v), filepath.Join(big, "model.gguf"), c.Int("big-batch"), c.Int("max-tokens")})
		}
		if p := c.String("preset"); p != "" {
			shape, ok := model.Presets[p]
			if !ok {
				return fmt.Errorf("unknown preset %q (want %s)", p, presetNames())
			}
			dst := filepath.Join(dir, "preset")
			if err := model.WriteTiny(dst, model.TinyOptions{Shape: &shape, Seed: 1, ChatTemplate: tmpl}); err != nil {
				return err
			}
			runs = append(runs, run{"random " + p, filepath.Join(dst, "model.gguf"), c.Int("big-batch"), c.Int("preset-tokens")})
		}
	}
	layers, err := gpuLayers(c)
	if err != nil {
		return err
	}
	device := "CPU"
	if layers > 0 {
		for _, d := range engine.Devices() {
			if d.Kind == "gpu" {
				device = fmt.Sprintf("GPU %s, %d layers offloaded", d.Description, layers)
				break
			}
		}
	}
	var rows []string
	for _, r := range runs {
		f, err := bench.Rollout(r.path, bench.RolloutConfig{
			K: r.k, PromptTokens: c.Int("prompt-tokens"), MaxTokens: r.tokens, Threads: c.Int("threads"),
			GPULayers: layers, Params: sampler.Params{Temperature: 0.6, TopP: 0.95}, Repeats: c.Int("repeats"),
		})
		if err != nil {
			return fmt.Errorf("%s: %w", r.label, err)
		}
		rows = append(rows, "| "+r.label+" "+f.String())
	}
	body := bench.RolloutSection(device, c.Int("threads"), c.Int("repeats"), strings.Join(os.Args[1:], " "), rows)
	fmt.Print(body)
	if p := c.String("results"); p != "" {
		return bench.UpdateSection(p, c.String("section"), body)
	}
	return nil
}
