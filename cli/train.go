package cli

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/report"
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
	rc, err := resolveTrain(c)
	if err != nil {
		return err
	}
	if !launch.OwnRank() { // the launcher's ranks run the same command
		writeRecipe(recipeWriter(c), rc.Recipe, c)
	}
	job, _, err := resolveDist(c, true) // the job's shape, which a dry run plans for
	if err != nil {
		return err
	}
	place, err := readPlacement(c, job.World, len(rc.Agents))
	if err != nil {
		return err
	}
	d := launch.Spec{World: 1, LocalWorld: 1}
	if !c.Bool("dry-run") { // a dry run starts no ranks
		var launched bool
		if d, launched, err = launchRanks(c, rc.Trainer.CheckWorld); launched || err != nil {
			return err
		}
	}
	cfg := rc.Trainer
	place.apply(&cfg)
	if err := trainProblems(c, &rc, &cfg); err != nil {
		return err
	}
	if cfg.Out, err = outDir(c); err != nil {
		return err
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	if err := trainEngines(c, rc, d, &cfg); err != nil {
		return err
	}
	rt, topts, err := openTorch(c)
	if err != nil {
		return err
	}
	cfg.Torch = topts
	// The plan and the directory's checks come before the directory is touched: a dry run or
	// a refusal leaves nothing behind.
	if err := checkMemory(c, cfg, rt, job); err != nil {
		return err
	}
	for _, a := range rc.Agents {
		// What the first sync's GGUF conversion would refuse (an empty vocabulary, a
		// pre-tokenizer llama.cpp lacks).
		if _, err := model.LoadHFTokenizer(a.Model); err != nil {
			return err
		}
	}
	if c.Bool("dry-run") {
		_, _, err := claimTrain(c, cfg.Out, rc) // what the run would say of --out and --resume
		return err
	}
	return trainRun(c, rc, d, rt, cfg)
}

// trainProblems loads the training and validation problems into cfg and, without
// --steps, sets the steps from --epochs (in rc's configuration too).
func trainProblems(c *ucli.Context, rc *trainRunConfig, cfg *trainer.Config) error {
	var err error
	if rc.Data != "" {
		if cfg.Problems, err = data.Load(rc.Data, data.Options{}); err != nil {
			return err // also when no problem is usable
		}
	} else if cfg.Problems, err = data.SyntheticWith(rc.Synthetic, rc.SynthSeed, rc.SynthConfig); err != nil {
		return err
	}
	if cfg.ValProblems, err = rc.valProblems(); err != nil {
		return err
	}
	if cfg.Steps == 0 {
		if cfg.BatchSize < 1 || len(cfg.Problems) < cfg.BatchSize {
			return fmt.Errorf("%d problems are fewer than one batch of %d", len(cfg.Problems), cfg.BatchSize)
		}
		cfg.Steps = c.Int("epochs") * (len(cfg.Problems) / cfg.BatchSize)
		rc.Trainer.Steps = cfg.Steps
	}
	return nil
}

// trainEngines sets the rollout engines' options, threads and placement in cfg, after
// checking the lengths against each agent's model.
func trainEngines(c *ucli.Context, rc trainRunConfig, d launch.Spec, cfg *trainer.Config) error {
	if err := shareCores(c, d, len(rc.Agents), true); err != nil {
		return err
	}
	if cfg.Overlap == 1 {
		if err := splitCores(c, len(rc.Agents)); err != nil {
			return err
		}
	}
	var err error
	if cfg.Engine, err = engineOptions(c, c.Int("slots")); err != nil {
		return err
	}
	cfg.Deterministic = rc.Deterministic
	for _, a := range rc.Agents {
		hc, err := model.LoadHFConfig(a.Model)
		if err != nil {
			continue // the trainer says what is wrong with the directory
		}
		if err := checkLengths(c, a.MaxTokens, hc.MaxPositionEmbeddings, a.Model); err != nil {
			return err
		}
		if err := checkContext("--ctx", cfg.Engine.SeqContext, hc.MaxPositionEmbeddings, a.Model); c.IsSet("ctx") && err != nil {
			return err
		}
	}
	if !c.IsSet("ctx") {
		cfg.Engine.SeqContext = 0 // room for the prompt limit plus the response
	}
	if cfg.Engine.Threads == 0 {
		// Every agent has its own engine and they decode concurrently: share the cores.
		cfg.Engine.Threads = engine.SharedThreads(len(cfg.Agents))
	}
	if cfg.Placement, err = placement(c); err != nil {
		return err
	}
	cfg.Progress = c.App.Writer
	return cfg.CheckPromptFloor() // with the tokenizers alone, before any model loads
}

// splitCores gives an overlapped run's rollout engines and libtorch half the cores each,
// unless --threads or --torch-threads is given: the two phases run at the same time.
func splitCores(c *ucli.Context, agents int) error {
	if c.IsSet("threads") || c.IsSet("torch-threads") {
		return nil
	}
	if err := c.Set("torch-threads", strconv.Itoa(max(1, runtime.NumCPU()/2))); err != nil {
		return err
	}
	return c.Set("threads", strconv.Itoa(engine.SharedThreads(2*agents)))
}

// trainRun claims the run directory (rank 0), joins the ranks' group, trains and, on
// rank 0, reports. A new run that fails before finishing removes what it wrote.
func trainRun(c *ucli.Context, rc trainRunConfig, d launch.Spec, rt *torch.Runtime, cfg trainer.Config) error {
	var err error
	if cfg.Verifier != "" { // loaded before the run directory is touched; the agents' threads
		if cfg.Checker, err = openVerifier(c, cfg.Verifier, cfg.Engine.Threads); err != nil {
			return err
		}
		defer cfg.Checker.Close()
	}
	save, exists := func() error { return nil }, true
	if d.Rank == 0 { // the run directory is rank 0's; other ranks write only RUN/ranks/R/
		lock, err := runlock.Dir(cfg.Out)
		if err != nil {
			return err
		}
		defer lock.Release()
		if exists, save, err = claimTrain(c, cfg.Out, rc); err != nil {
			return err
		}
	}
	if d.Multi() {
		if cfg.Group, err = launch.Join(rt, d, rc); err != nil {
			return err
		}
		defer cfg.Group.Close()
	}
	if err := save(); err != nil {
		return err
	}
	ctx, release := interruptContext("finishing the step and checkpointing (continue with --resume)")
	defer release()
	cfg.Page = report.WriteTrainingPage // RUN/report/index.html, rewritten as each step lands
	if err := trainer.Run(ctx, rt, cfg); err != nil {
		if errors.Is(err, trainer.ErrInterrupted) {
			return errors.Join(launch.ErrInterrupted, err)
		}
		if !exists {
			abandonRun(cfg.Out)
		}
		return err
	}
	if d.Rank != 0 {
		return nil
	}
	return trainReport(c, cfg)
}

// trainReport names the last checkpoint and writes the training report.
func trainReport(c *ucli.Context, cfg trainer.Config) error {
	latest, err := trainer.LatestCheckpoint(cfg.Out)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "trained %d steps; checkpoint: %s (agent-I/model.gguf for umad debate)\n", cfg.Steps, latest)
	rep, err := report.WriteTraining(cfg.Out)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "report: %s\n", rep)
	if peak, err := sysmem.PeakRSS(); err == nil { // against the plan's "peak host" line
		fmt.Fprintf(c.App.ErrWriter, "peak host memory: %s (this process's resident high-water mark)\n", memplan.Size(peak))
	}
	return nil
}
