package cli

import (
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
)

// lora2hfCommand merges a PEFT adapter (a LoRA run's checkpoint is one) into its base.
var lora2hfCommand = &ucli.Command{
	Name:      "lora2hf",
	Usage:     "merge a PEFT LoRA adapter into its base: a plain Hugging Face checkpoint",
	UsageText: "umad convert lora2hf PEFT_DIR OUT_DIR [--base HF_DIR] [--force]",
	Description: "PEFT_DIR holds adapter_config.json and adapter_model.safetensors. A LoRA run's checkpoint\n" +
		"(runs/R/checkpoints/step-N/agent-I) is such a directory, naming the base it was trained on,\n" +
		"so it is already the adapter export: load it with PEFT, convert it with lora2gguf, or\n" +
		"merge it here. The base is --base, else the directory the adapter config's\n" +
		"base_model_name_or_path names (a relative one is taken from PEFT_DIR). OUT_DIR gets the\n" +
		"base's config and tokenizer files and model.safetensors with W + alpha/r * B@A in each\n" +
		"adapted weight (each tensor in its base dtype, one tensor in memory at a time): PEFT's\n" +
		"merge_and_unload, a model every tool loads. OUT_DIR may not be, hold or lie inside an\n" +
		"input; with --force, only its model files are replaced.\n\n" +
		"Examples:\n  umad convert lora2hf runs/r1/checkpoints/step-000100/agent-0 /tmp/merged\n" +
		"  umad convert lora2hf ~/adapters/math /tmp/merged --base ~/models/Qwen2.5-0.5B-Instruct",
	Flags: []ucli.Flag{
		&ucli.StringFlag{Name: "base", Usage: "the base HF checkpoint directory, or a hub id ORG/NAME[@REVISION] from the Hugging Face cache (default: the directory the adapter config names)"},
		forceFlag,
	},
	Action: func(c *ucli.Context) error {
		dir, out, err := twoArgs(c, "PEFT_DIR OUT_DIR")
		if err == nil {
			dir, err = hfDirArg(c, dir)
		}
		if err == nil {
			err = resolveHFFlag(c, "base")
		}
		if err != nil {
			return err
		}
		a, err := peft.Read(dir)
		if err != nil {
			return err
		}
		base := c.String("base")
		if base == "" {
			if base, err = hfmodel.AdapterBase(dir, a); err != nil {
				return fmt.Errorf("%s: %w; pass --base HF_DIR", c.Command.Name, err)
			}
		}
		if err := checkOutput(c, out, dir, base); err != nil {
			return err
		}
		if err := prepareOutDir(c, out, model.RemoveHFFiles); err != nil {
			return err
		}
		start := time.Now()
		if err := peft.Merge(base, a, out); err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "wrote %s (%s merged into %s) in %.1fs\n", out, dir, base, time.Since(start).Seconds())
		return nil
	},
}
