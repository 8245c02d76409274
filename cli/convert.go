package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/hfhub"
	"github.com/umad-dev/umad/internal/outpath"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/safetensors"
)

func init() {
	register(&ucli.Command{
		Name:  "convert",
		Usage: "convert checkpoints and LoRA adapters between Hugging Face and GGUF (" + strings.Join(arch.Names(), ", ") + ")",
		Subcommands: []*ucli.Command{{
			Name:      "hf2gguf",
			Usage:     "convert a Hugging Face checkpoint directory to one GGUF file for llama.cpp",
			UsageText: "umad convert hf2gguf DIR OUT.gguf [--type f32|f16|bf16|q8_0]",
			Description: "DIR holds config.json, model.safetensors (or shards with an index), tokenizer.json\n" +
				"and tokenizer_config.json. The GGUF carries the architecture, the tokenizer (vocabulary,\n" +
				"merges, token types, special tokens, pre-tokenizer) and the chat template, so\n" +
				"`umad generate` needs no further flags. Matrices are written as --type; norms and\n" +
				"biases stay F32. Tensors are streamed: memory does not grow with the model.\n\n" +
				"DIR may be a Hugging Face hub id, ORG/NAME[@REVISION], found in huggingface_hub's cache\n" +
				"(HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub) or, with umad --hf-download,\n" +
				"downloaded into it; a path that exists is always the path.\n\n" +
				"Examples:\n  umad convert hf2gguf ~/models/Qwen2.5-3B-Instruct /tmp/qwen.gguf --type bf16\n" +
				"  umad --hf-download convert hf2gguf Qwen/Qwen2.5-3B-Instruct q25.gguf --type bf16",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "type", Value: "f32", Usage: "matrix type: f32, f16, bf16 or q8_0"},
			},
			Action: convertHF2GGUF,
		}, {
			Name:      "gguf2hf",
			Usage:     "convert an F32/F16/BF16 GGUF file to a Hugging Face checkpoint directory",
			UsageText: "umad convert gguf2hf M.gguf DIR [--dtype f32|f16|bf16] [--shard-size BYTES]",
			Description: "Writes DIR/config.json, generation_config.json, model.safetensors (sharded with an\n" +
				"index above --shard-size), tokenizer.json and tokenizer_config.json with the chat\n" +
				"template. Quantised files cannot be converted back. HF -> GGUF -> HF is bit-exact at\n" +
				"F32 and BF16.\n\n" +
				"Example:\n  umad convert gguf2hf /tmp/qwen.gguf /tmp/qwen-hf",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "dtype", Usage: "weights dtype: f32, f16 or bf16 (default: the GGUF's)"},
				&ucli.Int64Flag{Name: "shard-size", Value: model.DefaultShardBytes, Usage: "largest single safetensors file, in bytes"},
				forceFlag,
			},
			Action: convertGGUF2HF,
		}, {
			Name:      "lora2gguf",
			Usage:     "convert a Hugging Face PEFT LoRA adapter to llama.cpp's LoRA GGUF for a base GGUF model",
			UsageText: "umad convert lora2gguf PEFT_DIR OUT.gguf --base BASE.gguf",
			Description: "PEFT_DIR holds adapter_config.json and adapter_model.safetensors as PEFT saves them\n" +
				"(peft_type LORA, one rank r and lora_alpha, target_modules among q_proj, k_proj, v_proj,\n" +
				"o_proj, gate_proj, up_proj, down_proj, every layer adapted; use_rslora is honoured).\n" +
				"The adapter is checked against the base model's shape (architecture, layers, each\n" +
				"target's in/out features, grouped-query k/v widths) and written as F32 pairs\n" +
				"blk.N.<weight>.lora_a/.lora_b with adapter.lora.alpha set so that llama.cpp's\n" +
				"alpha/rank scale is PEFT's. Load it with the base: rollouts then run W + scale*B@A\n" +
				"without merging the weights.\n\n" +
				"Example:\n  umad convert lora2gguf runs/r1/checkpoints/step-000100/agent-0 /tmp/adapter.gguf --base /tmp/qwen.gguf",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "base", Usage: "the base model GGUF the adapter was trained on (required)"},
			},
			Action: convertLoRA2GGUF,
		}, lora2hfCommand},
	})
}

// convertHF2GGUF is `umad convert hf2gguf DIR OUT.gguf`.
func convertHF2GGUF(c *ucli.Context) error {
	dir, out, err := twoArgs(c, "DIR OUT.gguf")
	var snap *hfhub.Snapshot
	if err == nil {
		dir, snap, err = hfDir(c, dir)
	}
	if err != nil {
		return err
	}
	opt := model.HFToGGUFOptions{Progress: progress(c.App.ErrWriter)}
	if snap != nil { // not the snapshot's directory, its commit
		opt.Name = path.Base(snap.Repo)
	}
	if err := checkOutput(c, out, dir); err != nil {
		return err
	}
	var ok bool
	if opt.Type, ok = gguf.EncodableType(c.String("type")); !ok {
		return fmt.Errorf("--type %q: want f32, f16, bf16 or q8_0", c.String("type"))
	}
	start := time.Now()
	if err := model.HFToGGUF(dir, out, opt); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "\n")
	fmt.Fprintf(c.App.Writer, "wrote %s in %.1fs\n", out, time.Since(start).Seconds())
	return nil
}

// convertGGUF2HF is `umad convert gguf2hf M.gguf DIR`.
func convertGGUF2HF(c *ucli.Context) error {
	in, dir, err := twoArgs(c, "M.gguf DIR")
	if err != nil {
		return err
	}
	dtype, ok := safetensors.FloatDType(c.String("dtype"))
	if !ok && c.String("dtype") != "" { // "" keeps the GGUF's type
		return fmt.Errorf("--dtype %q: want f32, f16 or bf16", c.String("dtype"))
	}
	if c.Int64("shard-size") <= 0 {
		return fmt.Errorf("--shard-size must be positive, got %d", c.Int64("shard-size"))
	}
	if err := checkOutput(c, dir, in); err != nil {
		return err
	}
	if err := prepareOutDir(c, dir, model.RemoveHFFiles); err != nil {
		return err
	}
	start := time.Now()
	opt := model.GGUFToHFOptions{DType: dtype, ShardBytes: c.Int64("shard-size"), Progress: progress(c.App.ErrWriter)}
	if err := model.GGUFToHF(in, dir, opt); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "\n")
	fmt.Fprintf(c.App.Writer, "wrote %s in %.1fs\n", dir, time.Since(start).Seconds())
	return nil
}

// convertLoRA2GGUF is `umad convert lora2gguf PEFT_DIR OUT.gguf`.
func convertLoRA2GGUF(c *ucli.Context) error {
	dir, out, err := twoArgs(c, "PEFT_DIR OUT.gguf")
	if err == nil {
		dir, err = hfDirArg(c, dir)
	}
	if err != nil {
		return err
	}
	if c.String("base") == "" {
		return errors.New("lora2gguf: --base BASE.gguf is required (the model the adapter applies to)")
	}
	if err := checkOutput(c, out, dir, c.String("base")); err != nil {
		return err
	}
	start := time.Now()
	if err := peft.ToGGUF(dir, c.String("base"), out); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s in %.1fs\n", out, time.Since(start).Seconds())
	return nil
}

// twoArgs returns the command's two positional arguments. urfave/cli v2 stops parsing
// flags at the first argument, so flags written after them (as in "hf2gguf DIR OUT --type
// bf16") are parsed here and set on the context.
func twoArgs(c *ucli.Context, usage string) (string, string, error) {
	args := c.Args().Slice()
	if len(args) > 2 {
		fs := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		for _, f := range c.Command.Flags {
			if err := f.Apply(fs); err != nil {
				return "", "", err
			}
		}
		if err := fs.Parse(args[2:]); err != nil {
			return "", "", fmt.Errorf("%s: %w", c.Command.Name, err)
		}
		var err error
		fs.Visit(func(f *flag.Flag) { err = errors.Join(err, c.Set(f.Name, f.Value.String())) })
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", c.Command.Name, err)
		}
		args = append(args[:2], fs.Args()...)
	}
	if len(args) != 2 {
		return "", "", fmt.Errorf("%s: want %s, got %d arguments", c.Command.Name, usage, len(args))
	}
	// An empty path named the working directory and failed only after the conversion.
	for i, name := range strings.Fields(usage) {
		if args[i] == "" {
			return "", "", fmt.Errorf("%s: %s is empty; want %s", c.Command.Name, name, usage)
		}
	}
	return args[0], args[1], nil
}

// checkOutput refuses an output path that is, contains or lies inside one of the inputs
// (outpath.Check), naming the command.
func checkOutput(c *ucli.Context, out string, inputs ...string) error {
	if err := outpath.Check(out, inputs...); err != nil {
		return fmt.Errorf("%s: %w", c.Command.Name, err)
	}
	return nil
}

// progress reports the tensor being written on one rewritten stderr line.
func progress(w io.Writer) func(done, total int, name string) {
	return func(done, total int, name string) {
		fmt.Fprintf(w, "\r[%d/%d] %-40s", done+1, total, name)
	}
}

// forceFlag lets a command write into a non-empty output directory.
var forceFlag = &ucli.BoolFlag{Name: "force", Usage: "write into a non-empty output directory, first removing the model files there"}
