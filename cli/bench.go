package cli

import (
	"fmt"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/bench"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/run"
)

func init() {
	register(&ucli.Command{
		Name:        "bench",
		Usage:       "measure throughput against bare baselines and the machine's limits",
		Subcommands: []*ucli.Command{benchRolloutCommand(), benchDebateCommand(), benchTrainCommand()},
	})
}

// checkCounts refuses a count flag below 1 (a benchmark of none printed zeros or "best of
// 0 runs").
func checkCounts(c *ucli.Context, flags ...string) error {
	for _, f := range flags {
		if n := c.Int(f); n < 1 {
			return fmt.Errorf("--%s must be at least 1, got %d", f, n)
		}
	}
	return nil
}

// notWith refuses any of flags set beside flag other, which makes them meaningless.
func notWith(c *ucli.Context, other string, flags ...string) error {
	for _, f := range flags {
		if c.IsSet(f) && c.IsSet(other) {
			return fmt.Errorf("--%s is for the generated models; it does nothing with --%s", f, other)
		}
	}
	return nil
}

func checkBenchDebate(c *ucli.Context) error {
	if err := checkCounts(c, "synthetic", "k", "turns", "max-tokens", "prompt-limit", "slots", "repeats"); err != nil {
		return err
	}
	if err := notWith(c, "agent", "two-models"); err != nil {
		return err
	}
	return run.CheckThreads("threads", c.Int("threads"))
}

func checkBenchRollout(c *ucli.Context) error {
	if err := checkCounts(c, "k", "max-tokens", "prompt-tokens", "big-batch", "preset-tokens", "repeats"); err != nil {
		return err
	}
	if err := notWith(c, "model", "big-vocab", "big-batch", "preset", "preset-tokens"); err != nil {
		return err
	}
	if v := c.Int("big-vocab"); v < 0 {
		return fmt.Errorf("--big-vocab must be 0 (skip) or a vocabulary size, got %d", v)
	}
	if _, err := presetShape(c.String("preset"), 0); err != nil {
		return err
	}
	return run.CheckThreads("threads", c.Int("threads"))
}

func benchDebate(c *ucli.Context) error {
	if err := checkBenchDebate(c); err != nil {
		return err
	}
	layers, err := gpuLayers(c)
	if err != nil {
		return err
	}
	return bench.DebateRun{
		DebateConfig: bench.DebateConfig{Agents: c.StringSlice("agent"), Problems: c.Int("synthetic"), K: c.Int("k"),
			Turns: c.Int("turns"), MaxTokens: c.Int("max-tokens"), PromptLimit: c.Int("prompt-limit"), Slots: c.Int("slots"),
			Threads: c.Int("threads"), GPULayers: layers, Repeats: c.Int("repeats"), Deterministic: c.Bool("deterministic")},
		TwoModels: c.Bool("two-models"),
		Report:    benchReport(c),
	}.Run(c.App.Writer)
}

// benchReport is where a benchmark's section goes: --results' --section.
func benchReport(c *ucli.Context) bench.Report {
	return bench.Report{Command: strings.Join(os.Args[1:], " "), Results: c.String("results"), Section: c.String("section")}
}

// benchRolloutCommand is `umad bench rollout`.
func benchRolloutCommand() *ucli.Command {
	return &ucli.Command{
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
			&ucli.StringFlag{Name: "preset", Usage: "also measure random weights of a real shape at --big-batch: " + model.PresetNames()},
			&ucli.IntFlag{Name: "preset-tokens", Value: 8, Usage: "tokens per sample on the preset model"},
			&ucli.IntFlag{Name: "repeats", Value: 3, Usage: "best of this many runs"},
			&ucli.IntFlag{Name: "threads", Usage: "llama.cpp threads; 0 = physical cores"},
			&ucli.IntFlag{Name: "gpu-layers", DefaultText: "all with a GPU, else 0", Usage: "layers to offload to the GPU"},
			&ucli.StringFlag{Name: "results", Usage: "update this Markdown file's section (e.g. bench/RESULTS.md)"},
			&ucli.StringFlag{Name: "section", Value: "rollout", Usage: "name of the section --results rewrites (bench/gpu.sh keeps one per GPU setting)"},
		},
		Action: benchRollout,
	}
}

// benchDebateCommand is `umad bench debate`.
func benchDebateCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "debate",
		Usage:     "a whole debate's wall time against a bare llama.cpp loop's time for the same tokens, and prompt sharing",
		UsageText: "umad bench debate [--agent M.gguf --agent M.gguf] [--synthetic 24] [-k 4] [--turns 3] [--results bench/RESULTS.md]",
		Description: "Debates the built-in synthetic problems (twice by default), then times a bare llama.cpp\n" +
			"loop on each model with the same threads and slots, at two depths: prefill of --slots\n" +
			"prompts of the debate's mean prompt length from position 0 and decode steps after them,\n" +
			"then as many prompt tokens again and decode steps after those. A token costs more the\n" +
			"deeper it sits (it attends over every cell before it), so each token is priced at its\n" +
			"position by a line through those times. Efficiency is the bare loop's time for the\n" +
			"prompt tokens the engines decoded and the tokens they generated, over the best debate\n" +
			"wall time; \"naive prompts\" prices every sample's whole prompt from position 0 instead\n" +
			"(what prompt sharing saves). Also prints the cost of one KV stream copy.\n" +
			"Without --agent both agents run on one generated tiny qwen2 model (--two-models: a\n" +
			"second one for the second agent).",
		Flags: []ucli.Flag{
			&ucli.StringSliceFlag{Name: "agent", Usage: "GGUF model of an agent, once per agent (the same path twice: one engine)"},
			&ucli.BoolFlag{Name: "two-models", Usage: "without --agent: the second agent gets its own generated model"},
			&ucli.IntFlag{Name: "synthetic", Value: 24, Usage: "synthetic problems"},
			&ucli.IntFlag{Name: "k", Aliases: []string{"K"}, Value: 4, Usage: "trajectories per problem"},
			&ucli.IntFlag{Name: "turns", Value: 3, Usage: "turns, turn 0 included"},
			&ucli.IntFlag{Name: "max-tokens", Value: 64, Usage: "most tokens per response"},
			&ucli.IntFlag{Name: "prompt-limit", Value: 512, Usage: "most prompt tokens"},
			&ucli.IntFlag{Name: "slots", Value: 16, Usage: "parallel sequences per engine"},
			&ucli.IntFlag{Name: "repeats", Value: 2, Usage: "debate runs; bare rates are the best of as many"},
			&ucli.IntFlag{Name: "threads", Usage: "llama.cpp threads per engine; 0 = physical cores shared among the engines"},
			&ucli.IntFlag{Name: "gpu-layers", DefaultText: "all with a GPU, else 0", Usage: "layers to offload to the GPU"},
			&ucli.StringFlag{Name: "results", Usage: "update this Markdown file's section (e.g. bench/RESULTS.md)"},
			&ucli.StringFlag{Name: "section", Value: "debate", Usage: "name of the section --results rewrites"},
			deterministicFlag(),
		},
		Action: benchDebate,
	}
}

func benchRollout(c *ucli.Context) error {
	if err := checkBenchRollout(c); err != nil {
		return err
	}
	layers, err := gpuLayers(c)
	if err != nil {
		return err
	}
	return bench.RolloutRun{
		Model: c.String("model"), K: c.Int("k"), MaxTokens: c.Int("max-tokens"), PromptTokens: c.Int("prompt-tokens"),
		BigVocab: c.Int("big-vocab"), BigBatch: c.Int("big-batch"), Preset: c.String("preset"), PresetTokens: c.Int("preset-tokens"),
		Threads: c.Int("threads"), GPULayers: layers, Repeats: c.Int("repeats"), Report: benchReport(c),
	}.Run(c.App.Writer)
}
