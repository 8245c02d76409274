package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainer"
)

func init() {
	register(&ucli.Command{
		Name:  "train",
		Usage: "train debating agents with GRPO, IPPO or UMAD updates",
		UsageText: "umad train --agent HF_DIR [--agent HF_DIR] --algo umad [--data FILE | --synthetic N] --out RUN\n" +
			"umad train --agent sft/hf --algo grpo --turns 1 --synthetic 200 --steps 20 --out runs/grpo",
		Description: trainHelp,
		Flags:       trainFlags(),
		Action:      trainCmd,
	})
}

// trainHelp is train's --help text.
var trainHelp = "Each step samples a batch of problems, debates them (T turns, G trajectories) with the\n" +
	"current weights through llama.cpp, grades them, computes rewards and group advantages\n" +
	"(spec/UMAD-reference.md section 3), recomputes old and reference log-probs through the\n" +
	"libtorch plugin, updates each agent turn by turn with the policy loss (--loss: dual-clip PPO\n" +
	"by default) and AdamW, and syncs the weights back to llama.cpp (checked on a fixed probe).\n" +
	"--agent takes an HF directory and the settings `umad debate` accepts (name=, seed=,\n" +
	"temperature=, ...). Algorithms (--algo), with defaults from the reference code:\n" + trainer.AlgoHelp() +
	"An algorithm is defined by whether it has a team reward, an influence reward and an NLL\n" +
	"weight: a flag that changes one (--algo ippo --influence peer-mean) is refused, naming the\n" +
	"algorithm that has the combination (intrinsic-only). The forms and strengths stay free:\n" +
	"--influence sign|peer-mean, --eta, --nll-alpha, --team sum|max|dictator, --kl-in-loss, --kl-coef.\n" +
	"Policy losses (--loss), which any algorithm's advantages drive, with the clip\n" +
	"range and aggregation each defaults to (--clip-low/--clip-high, --clip-c, --loss-agg):\n" +
	trainer.LossHelp() + "\n" + recipeHelp("train") +
	"With LoRA (--lora-rank, or an agent that starts from an adapter) a recipe's --lr is\n" +
	fmt.Sprintf("multiplied by %d (1e-6 becomes 1e-5, the low end of the 1e-5 to 1e-4 LoRA usually wants):\n", recipe.LoRALRScale) +
	recipe.LoRAWhy + ".\n" +
	"The Single-GRPO pair is one --algo grpo run per model (a recipe gives its one turn and 15\n" +
	"epochs), then umad debate of the two checkpoints; the homogeneous pair is any of these\n" +
	"with one model given twice (no recipe setting).\n\n" +
	"RUN gets config.json, metrics.jsonl (one line per step, agent and turn, plus validation\n" +
	"lines), rollouts/step-N.jsonl.zst (a few problems' training debates), checkpoints/step-N/\n" +
	"agent-I/ (HF checkpoint with optimizer state and model.gguf) and checkpoints/latest.\n" +
	"At the end it writes RUN/report/training.md (as `umad report RUN`): curves, validation\n" +
	"before and after, and where the step time went. Ctrl-C checkpoints and stops; the same\n" +
	"command with --resume continues where it stopped.\n\n" +
	"Validation debates held-out problems (--val-data FILE, any format `umad debate --data` reads,\n" +
	"at most --val-limit of them; else --val-synthetic problems of the built-in set) before training,\n" +
	"every --val-every steps and at the end, with --val-k trajectories of --val-turns turns and every\n" +
	"agent at --val-temperature (0.6, the paper's inference temperature, where it trains at 0.8);\n" +
	"the report shows the last validation's per-turn tables as `umad debate`'s report does.\n" +
	"--no-mask, --full-history and --anonymise shape the debate messages of the training rollouts\n" +
	"and the validation as they do umad debate's; config.json records them.\n\n" +
	"Before loading anything it prints the memory plan (per agent: trainer weights, gradients,\n" +
	"AdamW moments, reference model, one micro-batch's activations, llama.cpp weights, KV cache,\n" +
	"and the copies of the sync and the checkpoints) against MemAvailable, and refuses a run that\n" +
	"cannot fit with the changes that help most; --dry-run prints the plan, checks the settings\n" +
	"and --out as the run would, and exits (with status 1 where the run would be refused). A new\n" +
	"run that fails before its first step removes what it wrote to RUN.\n\n" +
	"--lora-rank R trains PEFT-style LoRA adapters (A [R, in], B [out, R], scale alpha/R) on the\n" +
	"projections --lora-targets names, with the base frozen: no gradient and no AdamW state for\n" +
	"it, so a 3B model trains in the memory full fine-tuning needs for its weights alone. The\n" +
	"base with the adapters left out is the KL reference (no second copy is loaded). LoRA\n" +
	"usually wants a higher --lr than full fine-tuning (1e-5 to 1e-4 on real models). An agent's\n" +
	"checkpoint is then a PEFT directory (adapter_config.json naming the base directory,\n" +
	"adapter_model.safetensors, the adapters' optimizer.safetensors) beside config.json and\n" +
	"the tokenizer (itself the adapter export; `umad convert lora2hf` merges it); its model.gguf\n" +
	"holds the merged weights for `umad debate`. The in-place sync then sends only the adapters:\n" +
	"llama.cpp keeps the base and swaps in a LoRA GGUF each step; --sync file reloads the\n" +
	"merged model. A run can start from a PEFT adapter: --agent PEFT_DIR (its config names the\n" +
	"base) or --agent BASE_DIR,adapter=PEFT_DIR; without --lora-rank the adapter's rank, alpha\n" +
	"and targets are the run's (--lora-dropout and --lora-bf16-base still come from the flags);\n" +
	"a base, shape or setting that does not match is refused. The KL reference of a LoRA run,\n" +
	"one started from an adapter too, is the bare base with the adapters off, not the starting\n" +
	"adapter.\n\n" +
	"--overlap 1 rolls out step t+1 from the weights before step t's update while step t trains,\n" +
	"one step off-policy with --tis-cap correcting the stale batch (README \"Training\").\n\n" +
	"--nproc N trains data-parallel over N processes (torchrun's conventions; --nnodes,\n" +
	"--node-rank and --master-addr for several machines): each rank debates and learns a share\n" +
	"of every step's problems and the gradients are summed, so the run means what one process's\n" +
	"does (README \"Several processes\")."

func trainCmd(c *ucli.Context) error {
	r, err := trainFromFlags(c)
	if err == nil {
		_, err = r.Start()
	}
	return err
}

// trainFromFlags is the training run the flags give, unresolved: Start resolves, checks
// and runs it.
func trainFromFlags(c *ucli.Context) (*run.TrainRequest, error) {
	r := run.NewTrainRequest()
	r.Hub, r.Command, r.RankCommand = hubDirs(c), notedCommand(c), commandLine(c)
	r.Stdout, r.Stderr = c.App.Writer, c.App.ErrWriter
	return r, fromFlags(c, r.Keys())
}
