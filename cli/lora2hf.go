package cli

import (
	"fmt"
	"os"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/model"
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
		"base_model_name_or_path names. OUT_DIR gets the base's config and tokenizer files and\n" +
		"model.safetensors with W + alpha/r * B@A in each adapted weight (each tensor in its base\n" +
		"dtype, one tensor in memory at a time): PEFT's merge_and_unload, a model every tool loads.\n\n" +
		"Examples:\n  umad convert lora2hf runs/r1/checkpoints/step-000100/agent-0 /tmp/merged\n" +
		"  umad convert lora2hf ~/adapters/math /tmp/merged --base ~/models/Qwen2.5-0.5B-Instruct",
	Flags: []ucli.Flag{
		&ucli.StringFlag{Name: "base", Usage: "the base HF checkpoint directory (default: the one the adapter config names)"},
		forceFlag,
	},
	Action: func(c *ucli.Context) error {
		dir, out, err := twoArgs(c, "PEFT_DIR OUT_DIR")
		if err != nil {
			return err
		}
		a, err := model.ReadPEFT(dir)
		if err != nil {
			return err
		}
		base := c.String("base")
		if base == "" {
			if base = a.BaseModel; base == "" {
				return fmt.Errorf("lora2hf: %s names no base model (base_model_name_or_path); pass --base HF_DIR", dir)
			}
			if st, err := os.Stat(base); err != nil || !st.IsDir() {
				return fmt.Errorf("lora2hf: the base %q that %s names is not a local directory; pass --base HF_DIR", base, dir)
			}
		}
		if err := prepareOutDir(c, out, model.RemoveHFFiles); err != nil {
			return err
		}
		start := time.Now()
		if err := model.MergePEFT(base, a, out); err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "wrote %s (%s merged into %s) in %.1fs\n", out, dir, base, time.Since(start).Seconds())
		return nil
	},
}
