package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/internal/interrupt"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/run"
)

func init() {
	register(&ucli.Command{
		Name:      "sft",
		Usage:     "supervised warm start: teach a model prompt/response pairs (e.g. the boxed answer format)",
		UsageText: "umad sft --model HF_DIR (--data pairs.jsonl | --synthetic N) --out DIR [--epochs 3] [--lr 1e-5]",
		Description: "Trains a Hugging Face checkpoint with token-mean cross-entropy on the responses through\n" +
			"the libtorch plugin. --data is JSONL of {\"prompt\": user message, \"response\": text}; --synthetic N\n" +
			"builds N pairs from the built-in arithmetic problems: the turn-0 debate message answered with\n" +
			"\"The answer is \\boxed{X}.\" (--synthetic-task experts: see below). Prompts are rendered\n" +
			"with the model's chat format and every response ends with the end-of-turn token. DIR gets\n" +
			"hf/ (an HF checkpoint) and model.gguf, together, atomically.\n\n" +
			"--lora-rank R trains LoRA adapters on the frozen model instead (see umad train --help;\n" +
			"use a higher --lr, ~1e-4). hf/ then holds the merged weights, a plain checkpoint every\n" +
			"command takes, and DIR/adapter/ the adapters alone as a PEFT directory naming --model.\n\n" +
			"--synthetic-task experts --expert I warm-starts the expert of the I-th operator of\n" +
			"--synthetic-ops (e.g. --synthetic-ops '+*': 0 for sums, 1 for products) on N problems of the\n" +
			"mixed set: the turn-0 message of each problem of its own kind answered with its worked result\n" +
			"(\"3 + 4 = 7, so the answer is \\boxed{7}.\", readable in a debate message even with the box\n" +
			"masked), and for every problem the turn-1 debate message showing each expert's claim (its own\n" +
			"operator applied to the operands) answered by taking one claim chosen by a seeded coin, blind to\n" +
			"which is right: it teaches reading a peer's response, and leaves when to trust one to RL.\n" +
			"Debate the experts in --expert order, with the same --no-mask.",
		Flags:  sftFlags(),
		Action: sftCmd,
	})
}

// sftFlags are sft's flags, showing umad's defaults (run.DefaultSFTSettings).
func sftFlags() []ucli.Flag {
	d := run.DefaultSFTSettings()
	return append([]ucli.Flag{
		&ucli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "Hugging Face model directory, or a hub id ORG/NAME[@REVISION] from the Hugging Face cache (an existing path wins; umad --help: --hf-download)", Required: true},
		&ucli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "pairs JSONL"},
		&ucli.IntFlag{Name: "synthetic", Usage: "build this many pairs from the built-in arithmetic problems"},
		&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output directory (must not exist)", Required: true},
		&ucli.IntFlag{Name: "epochs", Value: d.Epochs, Usage: "passes over the pairs"},
		&ucli.IntFlag{Name: "batch", Value: d.Batch, Usage: "pairs per optimizer step"},
		&ucli.Float64Flag{Name: "lr", Value: d.Opt.LR, Usage: "AdamW learning rate"},
		&ucli.Float64Flag{Name: "weight-decay", Value: d.Opt.WeightDecay, Usage: "AdamW weight decay"},
		&ucli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "shuffling seed"},
		&ucli.StringFlag{Name: "chat-format", Usage: "override the chat format detected from the model's template"},
		&ucli.IntFlag{Name: "expert", Value: d.Expert, Usage: "with --synthetic-task experts: the kind this model learns, an index into --synthetic-ops"},
		&ucli.BoolFlag{Name: "no-mask", Usage: "with --expert: show the answers in the turn-1 debate messages (as umad debate --no-mask)"},
	}, append(append(syntheticFlags(), torchFlags()...),
		loraFlags(0.05, "dropout on the adapters' input while training, in [0, 1) (PEFT's usual 0.05 for supervised tuning)")...)...)
}

func sftCmd(c *ucli.Context) error {
	if err := resolveHFFlag(c, "model"); err != nil {
		return err
	}
	out, err := outDir(c)
	if err != nil {
		return err
	}
	s := &run.SFT{Out: out, Stdout: c.App.Writer, Stderr: c.App.ErrWriter}
	lock, err := s.Claim()
	if err != nil {
		return err
	}
	defer lock.Release()
	if s.Settings, err = sftSettings(c); err != nil {
		return err
	}
	// The plugin, --train-device and --dtype before any work: a GPU it cannot use is refused
	// at once.
	rt, opts, err := openTorch(c, c.Int("torch-threads"))
	if err != nil {
		return err
	}
	ctx, release := interrupt.Context("stopping after this step; nothing is written")
	defer release()
	return s.Run(ctx, rt, opts)
}

// sftSettings reads sft's flags; a LoRA rank above the model's hidden size is refused.
func sftSettings(c *ucli.Context) (run.SFTSettings, error) {
	if err := checkSynthetic(c); err != nil {
		return run.SFTSettings{}, err
	}
	lora, err := loraSettings(c, false)
	if err != nil {
		return run.SFTSettings{}, err
	}
	src := c.String("model")
	if hc, err := model.LoadHFConfig(src); err == nil {
		if err := run.CheckLoRARank(lora, hc.HiddenSize, src); err != nil {
			return run.SFTSettings{}, err
		}
	}
	opt := run.DefaultSFTSettings().Opt
	opt.LR, opt.WeightDecay = c.Float64("lr"), c.Float64("weight-decay")
	return run.SFTSettings{Model: src, Data: c.String("data"), Synthetic: c.Int("synthetic"), SynthConfig: syntheticSet(c), SynthSeed: c.Uint64("synthetic-seed"),
		Expert: c.Int("expert"), NoMask: c.Bool("no-mask"), Epochs: c.Int("epochs"), Batch: c.Int("batch"), Opt: opt, Seed: c.Uint64("seed"),
		ChatFormat: c.String("chat-format"), LoRA: lora}, nil
}
