package cli

// `umad bench train`: its flags, mapped to run.TrainBench, which times one whole training
// step of `umad train` by phase against the machine's limits measured in the same run.

import (
	"os"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/run"
)

// benchTrainPassed are the train flags bench train takes as train defines them and hands
// on to the run when set.
var benchTrainPassed = []string{"threads", "gpu-layers", "slots", "kv-type", "mini-batch", "rollout-dtype", "lora-rank", "no-memory-check",
	"torch-threads", "torch-plugin", "train-device", "dtype", "grad-checkpoint"}

// benchTrainCommand is `umad bench train`.
func benchTrainCommand() *ucli.Command {
	var passed []ucli.Flag
	for _, f := range trainFlags() {
		if slices.Contains(benchTrainPassed, f.Names()[0]) {
			passed = append(passed, f)
		}
	}
	return &ucli.Command{
		Name:      "train",
		Usage:     "one whole training step by phase (rollout, log-probs, reference, update, sync) against the matmul peak, the memory bandwidth and the memory plan",
		UsageText: "umad bench train [--preset qwen2.5-0.5b [--layers 4]] [--steps 2] [--batch 2] [-g 4] [--max-tokens 32] [--results bench/RESULTS.md]",
		Description: "Runs `umad train --algo grpo --turns 1` (one agent, the built-in synthetic problems, no\n" +
			"validation) for --steps steps on random weights: a generated tiny qwen2 model, or --preset's\n" +
			"real shape with --layers of its layers. It prints the last step's phases from the run's\n" +
			"metrics: seconds, share of the step, tokens/s, and for the libtorch phases the model FLOP/s\n" +
			"(2N per token forward, 6N forward and backward, 4N with LoRA; N the matrix weights, the\n" +
			"lm_head's for response tokens only) against the peak of libtorch's matrix products after\n" +
			"each run on the trainer's device, dtype and threads at the step's own shapes (each weight\n" +
			"matrix's forward and two gradient products for the rows a group multiplies it by, each the\n" +
			"best of repeats until it stops improving). Rollout decoding is compared with the binding\n" +
			"one of two bounds: the weights read once per decode step of up to min(--slots, --batch x -g)\n" +
			"sequences at the memory bandwidth (on the CPU a STREAM-style triad on every logical CPU; on a\n" +
			"GPU libtorch's copy on cuda:0, so the plugin must see the GPU), or 2N FLOPs per token at the\n" +
			"matmul peak. Every figure is min / median / max over --runs runs, and a phase above the peak\n" +
			"fails the benchmark (the peak or the FLOP count is then wrong). Peak memory is the process's\n" +
			"peak RSS during the runs against the run's memory plan. The first step includes the warm-up:\n" +
			"use --steps 2 or more. The flags after --section are umad train's own, handed on to the run\n" +
			"when set.",
		Flags: slices.Concat([]ucli.Flag{
			&ucli.StringFlag{Name: "preset", Usage: "random weights of a real shape instead of the tiny model: " + model.PresetNames()},
			&ucli.IntFlag{Name: "layers", Usage: "keep only this many of the preset's layers (0 = all)"},
			&ucli.IntFlag{Name: "steps", Value: 2, Usage: "training steps; the last one is reported"},
			&ucli.IntFlag{Name: "batch", Value: 2, Usage: "problems per step"},
			&ucli.IntFlag{Name: "g", Value: 4, Usage: "trajectories per problem"},
			&ucli.IntFlag{Name: "max-tokens", Value: 32, Usage: "most tokens per response"},
			&ucli.IntFlag{Name: "prompt-limit", Value: 512, Usage: "most prompt tokens (the plan sizes activations by it)"},
			&ucli.IntFlag{Name: "runs", Value: 3, Usage: "whole runs of the steps, each with its own peak and bandwidth: figures are min / median / max over them"},
			&ucli.StringFlag{Name: "results", Usage: "update this Markdown file's section (e.g. bench/RESULTS.md)"},
			&ucli.StringFlag{Name: "section", Value: "train", Usage: "name of the section --results rewrites"},
			&ucli.StringFlag{Name: "profile", Usage: "write libtorch's profile of every trainer call into this new or empty directory (one Chrome trace each) and print where the last step's log-probs and update spent their time, op by op; the profiler slows the step, so not with --results"},
		}, passed),
		Action: benchTrain,
	}
}

// benchTrain maps the flags to run.TrainBench's fields and runs it; of the train flags,
// only those set are handed on.
func benchTrain(c *ucli.Context) error {
	b := run.TrainBench{Preset: c.String("preset"), Steps: c.Int("steps"), Batch: c.Int("batch"), G: c.Int("g"),
		MaxTokens: c.Int("max-tokens"), PromptLimit: c.Int("prompt-limit"), Runs: c.Int("runs"),
		Results: c.String("results"), Section: c.String("section"), Profile: c.String("profile"),
		Command: strings.Join(os.Args[1:], " "), Stdout: c.App.Writer, Stderr: c.App.ErrWriter}
	for _, f := range benchTrainPassed {
		if c.IsSet(f) {
			b.Train = append(b.Train, [2]string{f, c.String(f)})
		}
	}
	if err := b.Check(); err != nil { // the counts refused before the preset is read
		return err
	}
	var err error
	if b.Shape, err = presetShape(b.Preset, c.Int("layers")); err != nil {
		return err
	}
	return b.Run()
}
