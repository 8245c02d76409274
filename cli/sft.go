package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/interrupt"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainspec"
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
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "Hugging Face model directory, or a hub id ORG/NAME[@REVISION] from the Hugging Face cache (an existing path wins; umad --help: --hf-download)", Required: true},
			&ucli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "pairs JSONL"},
			&ucli.IntFlag{Name: "synthetic", Usage: "build this many pairs from the built-in arithmetic problems"},
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output directory (must not exist)", Required: true},
			&ucli.IntFlag{Name: "epochs", Value: 3, Usage: "passes over the pairs"},
			&ucli.IntFlag{Name: "batch", Value: 8, Usage: "pairs per optimizer step"},
			&ucli.Float64Flag{Name: "lr", Value: 1e-5, Usage: "AdamW learning rate"},
			&ucli.Float64Flag{Name: "weight-decay", Value: 0.01, Usage: "AdamW weight decay"},
			&ucli.Uint64Flag{Name: "seed", Value: 1, Usage: "shuffling seed"},
			&ucli.StringFlag{Name: "chat-format", Usage: "override the chat format detected from the model's template"},
			&ucli.IntFlag{Name: "expert", Value: -1, Usage: "with --synthetic-task experts: the kind this model learns, an index into --synthetic-ops"},
			&ucli.BoolFlag{Name: "no-mask", Usage: "with --expert: show the answers in the turn-1 debate messages (as umad debate --no-mask)"},
		}, append(append(syntheticFlags(), torchFlags()...),
			loraFlags(0.05, "dropout on the adapters' input while training, in [0, 1) (PEFT's usual 0.05 for supervised tuning)")...)...),
		Action: sftCmd,
	})
}

func sftCmd(c *ucli.Context) (err error) {
	if err := resolveHFFlag(c, "model"); err != nil {
		return err
	}
	src := c.String("model")
	out, err := outDir(c)
	if err != nil {
		return err
	}
	lock, err := sftLock(out)
	if err != nil {
		return err
	}
	defer lock.Release()
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists; choose another --out", out)
	}
	if err := checkSynthetic(c); err != nil {
		return err
	}
	lora, err := loraSettings(c, false)
	if err != nil {
		return err
	}
	if hc, err := model.LoadHFConfig(src); err == nil {
		if err := run.CheckLoRARank(lora, hc.HiddenSize, src); err != nil {
			return err
		}
	}
	lora.Seed = c.Uint64("seed")
	// The plugin, --train-device and --dtype before any work: a GPU it cannot use is refused
	// at once.
	rt, opts, err := openTorch(c, c.Int("torch-threads"))
	if err != nil {
		return err
	}
	pairs, err := sftPairs(c)
	if err != nil {
		return err
	}
	tmp, err := sftTemp(out)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	ctx, release := interrupt.Context("stopping after this step; nothing is written")
	defer release()
	ids, err := sftTokenize(c, src, filepath.Join(tmp, "model.gguf"), pairs)
	if err != nil {
		return err
	}
	opts.Trainable, opts.LoRA = true, lora
	return sftTrain(ctx, c, rt, opts, ids, tmp, out)
}

// sftTemp makes the directory beside out that everything is built in, renamed into place
// at the end. Under the lock, a leftover of a killed run may go.
func sftTemp(out string) (string, error) {
	clean := filepath.Clean(out)
	tmp := filepath.Join(filepath.Dir(clean), "."+filepath.Base(clean)+".tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	return tmp, os.Mkdir(tmp, 0o755)
}

// sftPairs reads --data's pairs or builds --synthetic's.
func sftPairs(c *ucli.Context) ([]trainer.TextPair, error) {
	switch {
	case c.String("data") != "" && c.Int("synthetic") > 0:
		return nil, errors.New("give --data or --synthetic, not both")
	case c.String("data") != "":
		return trainer.ReadPairs(c.String("data"))
	case c.Int("synthetic") > 0:
		set := syntheticSet(c)
		ps, err := data.SyntheticWith(c.Int("synthetic"), c.Uint64("synthetic-seed"), set)
		if err != nil {
			return nil, err
		}
		if set.Task != data.TaskExperts {
			if c.IsSet("expert") || c.Bool("no-mask") {
				return nil, errors.New("--expert and --no-mask need --synthetic-task experts")
			}
			return trainer.SyntheticPairs(ps), nil
		}
		if !c.IsSet("expert") {
			return nil, fmt.Errorf("--synthetic-task experts: give --expert, 0 to %d (the kind of --synthetic-ops %q this model learns)", len(set.Ops)-1, set.Ops)
		}
		return trainer.ExpertPairs(ps, set.Ops, c.Int("expert"), debate.Prompt{KeepAnswers: c.Bool("no-mask")}, c.Uint64("seed"))
	default:
		return nil, errors.New("give --data pairs.jsonl or --synthetic N")
	}
}

// sftTokenize tokenizes the pairs with llama.cpp's tokenizer, so training sees the ids
// sampling will: src converted to tokGGUF, its vocabulary alone loaded.
func sftTokenize(c *ucli.Context, src, tokGGUF string, pairs []trainer.TextPair) ([]trainer.Pair, error) {
	if err := model.HFToGGUF(src, tokGGUF, model.HFToGGUFOptions{}); err != nil {
		return nil, err
	}
	tok, err := engine.OpenVocab(tokGGUF)
	if err != nil {
		return nil, err
	}
	defer tok.Close()
	format, err := tok.Format(c.String("chat-format"))
	if err != nil {
		return nil, err
	}
	return trainer.TokenizePairs(tok, format, tok.EndOfTurn(), pairs)
}

// sftTrain trains the model of opts on ids and writes it into tmp, then renames tmp to out.
func sftTrain(ctx context.Context, c *ucli.Context, rt *torch.Runtime, opts torch.ModelOptions, ids []trainer.Pair, tmp, out string) error {
	m, err := hfmodel.Load(rt, c.String("model"), opts)
	if err != nil {
		return err
	}
	defer m.Free()
	opt := trainspec.DefaultAdamW
	opt.LR, opt.WeightDecay = c.Float64("lr"), c.Float64("weight-decay")
	st, err := trainer.SFT(m.Model, ids, trainer.SFTConfig{Epochs: c.Int("epochs"), BatchSize: c.Int("batch"), Opt: opt, Seed: c.Uint64("seed"), Ctx: ctx,
		Progress: func(step, total int, loss float64) {
			fmt.Fprintf(c.App.ErrWriter, "\rsft step %d/%d loss %.4f   ", step, total, loss)
		}})
	fmt.Fprintln(c.App.ErrWriter)
	if errors.Is(err, trainer.ErrInterrupted) {
		return errors.Join(launch.ErrInterrupted, err)
	}
	if err != nil {
		return err
	}
	// The warm start is a starting point, not a paused run: save weights (LoRA: merged)
	// without the optimizer state, so training starts with fresh AdamW moments.
	if err := m.SaveMerged(filepath.Join(tmp, "hf")); err != nil {
		return err
	}
	if opts.LoRA.Rank > 0 {
		if err := m.SaveAdapter(filepath.Join(tmp, "adapter")); err != nil {
			return err
		}
	}
	if err := model.HFToGGUF(filepath.Join(tmp, "hf"), filepath.Join(tmp, "model.gguf"), model.HFToGGUFOptions{}); err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "sft: %d pairs, %d steps, loss %.4f -> %.4f (first/last epoch mean); wrote %s and %s\n",
		len(ids), st.Steps, st.FirstLoss, st.LastLoss, filepath.Join(out, "hf"), filepath.Join(out, "model.gguf"))
	return nil
}
