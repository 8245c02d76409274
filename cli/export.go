package cli

// `umad export`: a checkpoint for other tools. Checkpoints already are Hugging Face or
// PEFT directories; --merge folds a LoRA adapter into its base.

import (
	"errors"

	ucli "github.com/urfave/cli/v2"
)

func init() {
	register(&ucli.Command{
		Name:      "export",
		Usage:     "a checkpoint for other tools: --merge folds a LoRA (PEFT) adapter into its base",
		UsageText: "umad export --merge [--base HF_DIR] [--force] PEFT_DIR OUT_DIR",
		Description: "A full fine-tuning checkpoint (runs/R/checkpoints/step-N/agent-I) is a Hugging Face\n" +
			"checkpoint and a LoRA run's is a PEFT adapter directory naming its base: both load in\n" +
			"transformers and PEFT as they are. --merge writes the adapter merged into its base, a\n" +
			"plain Hugging Face checkpoint (the same as `umad convert lora2hf`).\n\n" +
			"Example:\n  umad export --merge runs/r1/checkpoints/step-000100/agent-0 /tmp/merged",
		Flags: append([]ucli.Flag{&ucli.BoolFlag{Name: "merge", Usage: "merge the adapter into its base (required: without it the checkpoint itself is the export)"}},
			lora2hfCommand.Flags...),
		Action: func(c *ucli.Context) error {
			if !c.Bool("merge") {
				return errors.New("export: give --merge: a checkpoint's agent directory already is the export (a Hugging Face checkpoint, or a PEFT adapter for a LoRA run)")
			}
			return lora2hfCommand.Action(c)
		},
	})
}
