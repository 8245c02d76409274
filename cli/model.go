package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/tokenizer"
)

func init() {
	register(&ucli.Command{
		Name:  "model",
		Usage: "make and inspect model files",
		Subcommands: []*ucli.Command{{
			Name:      "tiny",
			Usage:     "write a tiny random-weight model as GGUF and as a Hugging Face directory",
			UsageText: "umad model tiny [--arch " + strings.Join(arch.Names(), "|") + "] [--seed S] [--vocab N] --out DIR",
			Description: "Writes DIR/model.gguf and DIR/hf/ (config.json, model.safetensors, tokenizer.json,\n" +
				"tokenizer_config.json) with identical F32 weights, a byte-level BPE tokenizer with the\n" +
				"ChatML and Llama 3 special tokens (gemma3: a SentencePiece-style one with Gemma's; any\n" +
				"text round-trips), and the architecture's chat template\n" +
				"(" + archChats() + ").\n" +
				"Tests and the demo use these models; --vocab pads the vocabulary to a real size\n" +
				"(e.g. 151936) for benchmarks.",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "arch", Value: arch.Qwen2, Usage: arch.List()},
				&ucli.Uint64Flag{Name: "seed", Value: 1, Usage: "weights seed; the same seed writes the same bytes"},
				&ucli.IntFlag{Name: "vocab", Usage: "pad the vocabulary to this size (0 = the tokenizer's own)"},
				&ucli.StringFlag{Name: "tokenizer", Usage: "use the real tokenizer (and chat template) of this Hugging Face directory"},
				&ucli.StringFlag{Name: "preset", Usage: "a real model's shape instead of the tiny one: " + model.PresetNames()},
				&ucli.IntFlag{Name: "layers", Usage: "keep only this many of the preset's layers (0 = all): its real per-layer shape at a size that fits, for benchmarks"},
				&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output directory", Required: true},
				forceFlag,
			},
			Action: modelTiny,
		}},
	})
}

// modelTiny is `umad model tiny`.
func modelTiny(c *ucli.Context) error {
	name := c.String("arch")
	shape, err := presetShape(c.String("preset"), c.Int("layers"))
	if err != nil {
		return err
	}
	if shape != nil {
		if c.IsSet("arch") && name != string(shape.Arch) {
			return fmt.Errorf("--arch %s and --preset %s (a %s model) disagree: give one of them", name, c.String("preset"), shape.Arch)
		}
		name = string(shape.Arch)
	}
	fam, err := chat.ForArch(name)
	if err != nil {
		return err
	}
	tmpl, err := chat.Template(fam)
	if err != nil {
		return err
	}
	var tok *tokenizer.HF
	if dir := c.String("tokenizer"); dir != "" {
		if tok, err = tokenizer.LoadHF(dir); err != nil {
			return err
		}
		tmpl = "" // the checkpoint's own
	}
	if v := c.Int("vocab"); v < 0 || v > model.MaxVocab {
		return fmt.Errorf("--vocab %d: want 0 (the tokenizer's own) or at most %d", v, model.MaxVocab)
	}
	out, err := outDir(c)
	if err != nil {
		return err
	}
	if dir := c.String("tokenizer"); dir != "" {
		if err := checkOutput(c, out, dir); err != nil {
			return err
		}
	}
	if err := prepareOutDir(c, out, model.RemoveTiny); err != nil {
		return err
	}
	if err := model.WriteTiny(out, model.TinyOptions{Arch: name, Shape: shape, Seed: c.Uint64("seed"), ChatTemplate: tmpl, VocabSize: c.Int("vocab"), Tokenizer: tok}); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s and %s\n", filepath.Join(out, "model.gguf"), filepath.Join(out, "hf"))
	return nil
}

// presetShape is --preset's shape with --layers of its layers (0: all); nil without a
// preset.
func presetShape(preset string, layers int) (*model.Shape, error) {
	var shape *model.Shape
	if preset != "" {
		s, ok := model.Presets[preset]
		if !ok {
			return nil, fmt.Errorf("unknown preset %q (want %s)", preset, model.PresetNames())
		}
		shape = &s
	}
	if layers != 0 {
		if shape == nil || layers < 1 || layers > shape.Layers {
			return nil, fmt.Errorf("--layers %d: want 1 to a --preset's layer count", layers)
		}
		shape.Layers = layers
	}
	return shape, nil
}

// archChats names each architecture's chat format: "qwen2: qwen2.5, ...".
func archChats() string {
	out := make([]string, len(arch.All))
	for i, d := range arch.All {
		out[i] = d.Name + ": " + d.Chat.Family
	}
	return strings.Join(out, ", ")
}
