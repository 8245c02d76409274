package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/reward"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/trainspec"
	"github.com/umad-dev/umad/verifier"
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

// trainFlags are train's flags: its own, then the groups it shares with other commands.
func trainFlags() []ucli.Flag {
	return slices.Concat(trainProblemFlags(), trainStepFlags(), trainRewardFlags(), trainRunFlags(),
		samplingFlags(), llamaFlags(), debatePromptFlags(), syntheticFlags(), torchFlags(), memoryFlags(), distFlags(), []ucli.Flag{shardFlag(), agentRanksFlag(), offloadFlag()},
		loraFlags(0, "dropout on the adapters' input while training, in [0, 1); 0 by default because PPO's ratio compares a training pass with the dropout-free old log-probs, and dropout would make it differ from 1 with no update"))
}

// trainProblemFlags are train's flags of the agents, the algorithm and the problems to train and validate on.
func trainProblemFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringSliceFlag{Name: "agent", Aliases: []string{"a"}, Usage: "agent: HF directory or PEFT adapter directory, or a Hugging Face hub id ORG/NAME[@REVISION] from its cache (an existing path wins; config.json records the id and commit; umad --help: --hf-download)[,key=value...] (adapter=PEFT_DIR: start from that adapter on the HF directory; RUN,agent=I: agent I of training run RUN's newest checkpoint; repeat per agent)", Required: true},
		&ucli.StringFlag{Name: "algo", Value: "umad", Usage: strings.Join(trainer.AlgoNames(), ", ")},
		recipeFlag(),
		&ucli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "training problems (default: built-in synthetic set)"},
		&ucli.IntFlag{Name: "synthetic", Value: 256, Usage: "training problems of the built-in set, when --data is not given"},
		&ucli.IntFlag{Name: "val-synthetic", Value: 64, Usage: "held-out validation problems (built-in set, another seed), when --val-data is not given; 0 = no validation"},
		&ucli.StringFlag{Name: "val-data", Usage: "validation problems: a `FILE` or folder in any format umad debate's --data reads (default: the built-in set, --val-synthetic)"},
		&ucli.IntFlag{Name: "val-limit", Usage: "with --val-data, validate on at most this many of its problems (0 = all)"},
		&ucli.Float64Flag{Name: "val-temperature", Value: 0.6, Usage: "every agent's sampling temperature in validation (the paper's inference temperature; 0 = greedy); its other sampling settings stay"},
		&ucli.IntFlag{Name: "val-turns", Usage: "turns of a validation debate (0 = --turns)"},
	}
}

// trainStepFlags are train's flags of the schedule, the optimizer and the policy loss.
func trainStepFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "steps", Usage: "optimisation steps (0 = --epochs passes over the data)"},
		&ucli.IntFlag{Name: "epochs", Value: 2, Usage: "passes over the data when --steps is 0"},
		&ucli.IntFlag{Name: "batch", Value: 128, Usage: "problems per step"},
		&ucli.IntFlag{Name: "g", Value: 5, Usage: "trajectories (group size) per problem"},
		&ucli.IntFlag{Name: "turns", Value: 2, Usage: "debate turns per training rollout (T_train)"},
		&ucli.IntFlag{Name: "mini-batch", Value: 16, Usage: "problems per optimizer step"},
		&ucli.Float64Flag{Name: "lr", Value: 1e-6, Usage: "AdamW learning rate (with LoRA, times alpha/rank at most 1)"},
		&ucli.Float64Flag{Name: "weight-decay", Value: 0.01, Usage: "AdamW weight decay"},
		&ucli.Float64Flag{Name: "grad-clip", Value: 1.0, Usage: "global gradient-norm clip (0 = off)"},
		&ucli.StringFlag{Name: "loss", Value: string(trainspec.LossPPO), Usage: "policy loss: " + strings.Join(trainer.LossNames(), ", ")},
		&ucli.Float64Flag{Name: "clip-low", DefaultText: lossDefault(func(r trainer.LossRecipe) any { return r.ClipLow }), Usage: "the loss's ratio clip below 1 (cispo: its weight's; 1 = no lower bound)"},
		&ucli.Float64Flag{Name: "clip-high", DefaultText: lossDefault(func(r trainer.LossRecipe) any { return r.ClipHigh }), Usage: "the loss's ratio clip above 1"},
		&ucli.Float64Flag{Name: "clip-c", DefaultText: lossDefault(func(r trainer.LossRecipe) any { return r.ClipC }), Usage: "PPO's dual clip for negative advantages (0 = off)"},
		&ucli.StringFlag{Name: "loss-agg", DefaultText: lossDefault(func(r trainer.LossRecipe) any { return r.Agg }), Usage: "loss aggregation within a group: token-mean, seq-mean-token-sum, seq-mean-token-mean or seq-mean-token-sum-norm"},
	}
}

// trainRewardFlags are train's flags of the rewards, the advantages and the learning-rate schedule.
func trainRewardFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "team", Usage: "team reward: sum, max, dictator or individual (default: the algorithm's)"},
		&ucli.StringFlag{Name: "influence", Usage: "influence reward: sign (reference), peer-mean (paper) or off (default: the algorithm's)"},
		&ucli.Float64Flag{Name: "eta", Usage: "influence reward strength (default: the algorithm's, 0.2)"},
		&ucli.Float64Flag{Name: "nll-alpha", Usage: "NLL advantage weight exponent (default: the algorithm's)"},
		&ucli.Float64Flag{Name: "kl-coef", Usage: "KL coefficient, in the reward (k1) or in the loss (k3: grpo, --kl-in-loss) (default: 0.001)"},
		&ucli.BoolFlag{Name: "kl-in-loss", Usage: "KL to the reference as k3 in the loss (the paper's variant) instead of k1 in the reward"},
		&ucli.BoolFlag{Name: "dr-grpo", Usage: "Dr.GRPO advantages: centred, not divided by the group std"},
		&ucli.BoolFlag{Name: "dynamic-sampling", Usage: "DAPO dynamic sampling: drop groups whose rewards are all equal, roll out more problems to refill the batch"},
		&ucli.IntFlag{Name: "max-gen-batches", Value: 3, Usage: "with --dynamic-sampling, most rollout batches per step"},
		&ucli.BoolFlag{Name: "overlong-filter", Usage: "mask responses cut off at --max-tokens out of the loss (DAPO)"},
		&ucli.Float64Flag{Name: "tis-cap", DefaultText: "0 (off); 2 when --rollout-dtype differs from --dtype (bf16 rollouts on a GPU) or with --overlap 1", Usage: "truncated importance sampling: weight tokens by min(exp(trainer - rollout log-prob) x the mass top-k/top-p kept, cap); 0 = off, 2 is usual"},
		&ucli.StringFlag{Name: "lr-schedule", Value: trainer.ScheduleConstant, Usage: "learning rate after warm-up: constant or cosine"},
		&ucli.IntFlag{Name: "warmup-steps", Usage: "linear learning-rate warm-up steps"},
		&ucli.Float64Flag{Name: "min-lr-ratio", Usage: "cosine schedule: final learning rate as a fraction of --lr"},
	}
}

// trainRunFlags are train's flags of grading, validation, checkpoints, the weight sync and the run directory.
func trainRunFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "reward", Value: string(reward.Strict), Usage: "answer checker of the 0/1 rewards: strict (the MATH benchmark's is_equiv, as the paper), robust (equivalent forms: fractions, sets, intervals, symbolic) or robust+verifier=MODEL.gguf (robust, and a verifier model, asked with --verifier-prompt, for the pairs robust's rules do not decide)"},
		verifierPromptFlag(),
		&ucli.DurationFlag{Name: "verifier-budget", Usage: "with robust+verifier, most time the verifier model may take per rollout batch (0 = no limit); the pairs left are counted as skipped in the metrics"},
		&ucli.BoolFlag{Name: "robust", Usage: "the same as --reward robust"},
		&ucli.IntFlag{Name: "val-every", Value: 20, Usage: "validate every N steps (also before training and at the end)"},
		&ucli.IntFlag{Name: "val-k", Value: 1, Usage: "trajectories per validation problem"},
		&ucli.IntFlag{Name: "save-every", Value: 40, Usage: "checkpoint every N steps (also at the end)"},
		&ucli.IntFlag{Name: "keep", Value: 2, Usage: "checkpoints to keep"},
		&ucli.IntFlag{Name: "keep-rollouts", Value: 4, Usage: "problems whose training debates each step keeps in RUN/rollouts/ (0 = none)"},
		&ucli.StringFlag{Name: "sync", Value: string(trainer.SyncInPlace), Usage: "how updated weights reach llama.cpp: inplace (written into the loaded model, no file; with LoRA, the adapters swapped onto the loaded base) or file (a GGUF written and reloaded each step; slower, for comparison)"},
		&ucli.IntFlag{Name: "overlap", Usage: "1: roll out step t+1 from the weights before step t's update while step t trains (one step off-policy, corrected by --tis-cap, then 2 by default; unless --threads or --torch-threads is given, each phase gets half the cores); 0: the phases in turn"},
		&ucli.StringFlag{Name: "rollout-dtype", DefaultText: "bf16 with llama.cpp on a GPU (--gpu-layers above 0) or --dtype bf16, else f32", Usage: "type of the rollout weights in llama.cpp: f32, bf16 or f16 (the sync converts on the way in). bf16 reads half the bytes per decoded token, which a GPU turns into speed; on a 2-core AVX512-BF16 CPU it decoded no faster than f32, and prefilled slower, at the Qwen2.5-0.5B shape (bench/RESULTS.md), so the CPU keeps f32's exact log-probs. A dtype other than the trainer's turns --tis-cap on at 2"},
		&ucli.Float64Flag{Name: "probe-tol", Value: probeTolF32, DefaultText: fmt.Sprintf("%g; %g with bf16 or f16 rollouts or --dtype bf16", probeTolF32, probeTolBF16), Usage: "largest mean |delta log-prob| between llama.cpp and the trainer after a sync (0 = no check)"},
		&ucli.IntFlag{Name: "prompt-limit", Value: 5120, Usage: "most prompt tokens; longer debate prompts trim the peers' reasoning. It plus --max-tokens must fit --ctx when that is given, else, when set, the model's context"},
		&ucli.IntFlag{Name: "slots", Value: 16, Usage: "parallel sequences per model"},
		&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "run directory", Required: true},
		&ucli.BoolFlag{Name: "resume", Usage: "continue the run in --out from its newest complete checkpoint (same flags; --steps may grow)"},
		deterministicFlag(),
	}
}

// lossDefault lists each policy loss's default of one setting, for a flag's help.
func lossDefault(of func(trainer.LossRecipe) any) string {
	var parts []string
	for _, r := range trainer.LossRecipes() {
		parts = append(parts, fmt.Sprintf("%s %v", r.Loss, of(r)))
	}
	return strings.Join(parts, ", ")
}

// lossSettings are the policy loss --loss names with its clip range and aggregation: the
// loss's defaults, except where a flag is given.
func lossSettings(c *ucli.Context) (trainer.LossRecipe, error) {
	r, err := trainer.LookupLoss(trainspec.Loss(c.String("loss")))
	if err != nil {
		return r, fmt.Errorf("--loss: %w", err)
	}
	for _, f := range []struct {
		flag string
		v    *float64
	}{{"clip-low", &r.ClipLow}, {"clip-high", &r.ClipHigh}, {"clip-c", &r.ClipC}} {
		if c.IsSet(f.flag) {
			*f.v = c.Float64(f.flag)
		}
	}
	if c.IsSet("loss-agg") {
		r.Agg = trainspec.AggMode(c.String("loss-agg"))
	}
	return r, nil
}

// trainRunConfig is the resolved configuration saved as config.json; a resume must match it.
type trainRunConfig struct {
	Agents      []agentSpec          `json:"agents"`
	Data        string               `json:"data,omitempty"`
	Synthetic   int                  `json:"synthetic,omitempty"`
	SynthConfig data.SyntheticConfig `json:"synthetic_config"`
	SynthSeed   uint64               `json:"synthetic_seed"`
	ValProblems int                  `json:"val_problems"`
	ValData     string               `json:"val_data,omitempty"`
	ValLimit    int                  `json:"val_limit,omitempty"`
	Trainer     trainer.Config       `json:"trainer"`
	KVType      string               `json:"kv_type"`
	FlashAttn   string               `json:"flash_attn"`
	// VerifierPrompt is the verifier's --verifier-prompt template file, absolute.
	VerifierPrompt string     `json:"verifier_prompt,omitempty"`
	Deterministic  bool       `json:"deterministic,omitempty"`
	Recipe         *recipeRun `json:"recipe,omitempty"`
}

// The probe check's default tolerances. llama.cpp computes in f32 with the trainer's f32
// weights: they agree to ~1e-6 (f32) but differ by bf16 rounding at --dtype bf16.
const (
	probeTolF32  = 1e-4
	probeTolBF16 = 5e-2
)

// valSeed keeps the validation problems apart from the training ones.
const valSeed = 1_000_003

func resolveTrain(c *ucli.Context) (trainRunConfig, error) {
	rec, err := applyRecipe(c, "train", c.String("algo"))
	if err != nil {
		return trainRunConfig{}, err
	}
	rc, err := trainData(c, rec)
	if err != nil {
		return rc, err
	}
	algo, err := trainer.LookupAlgo(c.String("algo"))
	if err != nil {
		return rc, err
	}
	o := trainer.Overrides{Team: c.String("team"), Influence: c.String("influence"), KLInLoss: c.Bool("kl-in-loss"), DrGRPO: c.Bool("dr-grpo"),
		Eta: setFloat(c, "eta"), NLLAlpha: setFloat(c, "nll-alpha"), KLCoef: setFloat(c, "kl-coef")}
	if algo, err = algo.Override(o); err != nil {
		return rc, err
	}
	mode, verifierPath, err := trainReward(c, &rc)
	if err != nil {
		return rc, err
	}
	sync, err := trainer.ParseSyncMode(c.String("sync"))
	if err != nil {
		return rc, fmt.Errorf("--sync: %w", err)
	}
	lora, err := loraSettings(c, true)
	if err != nil {
		return rc, err
	}
	dtype, err := trainspec.ParsePrecision(c.String("dtype"))
	if err != nil {
		return rc, fmt.Errorf("--dtype: %w", err)
	}
	rollout, probeTol, tisCap, err := rolloutSettings(c, dtype, c.Int("overlap"))
	if err != nil {
		return rc, err
	}
	loss, err := lossSettings(c)
	if err != nil {
		return rc, err
	}
	valTemp := c.Float64("val-temperature") // always set: nil (the agents' own) is for runs from before the flag
	opt := trainspec.AdamW{LR: c.Float64("lr"), Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: c.Float64("weight-decay"), MaxGradNorm: c.Float64("grad-clip")}
	rc.Trainer = trainer.Config{LoRA: lora, Algo: algo, Steps: c.Int("steps"), BatchSize: c.Int("batch"), Turns: c.Int("turns"), G: c.Int("g"),
		MiniBatch: c.Int("mini-batch"), Opt: opt, Loss: loss.Loss, ClipLow: loss.ClipLow, ClipHigh: loss.ClipHigh, ClipC: loss.ClipC,
		Agg: loss.Agg, Reward: mode, Verifier: verifierPath, VerifierBudget: c.Duration("verifier-budget"),
		PromptLimit: c.Int("prompt-limit"), Seed: c.Uint64("seed"),
		ValEvery: c.Int("val-every"), ValK: c.Int("val-k"), ValTurns: c.Int("val-turns"), ValTemperature: &valTemp,
		NoMask: c.Bool("no-mask"), FullHistory: c.Bool("full-history"), Anonymise: c.Bool("anonymise"), SaveEvery: c.Int("save-every"), KeepLast: c.Int("keep"), ProbeTol: probeTol, DType: dtype, RolloutDType: rollout, Sync: sync,
		KeepRollouts: c.Int("keep-rollouts"), DynamicSampling: c.Bool("dynamic-sampling"), MaxGenBatches: c.Int("max-gen-batches"),
		OverlongFilter: c.Bool("overlong-filter"), TISCap: tisCap, Overlap: c.Int("overlap"),
		Schedule: trainer.Schedule{Kind: c.String("lr-schedule"), WarmupSteps: c.Int("warmup-steps"), MinRatio: c.Float64("min-lr-ratio")}}
	if err := trainAgents(c, &rc, lora); err != nil {
		return rc, err
	}
	rc.Recipe.scaleLoRALR(&rc)
	return rc, nil
}

// trainData starts the run's configuration with its problems: --data, or the built-in
// set, and the validation problems' source.
func trainData(c *ucli.Context, rec *recipeRun) (trainRunConfig, error) {
	rc := trainRunConfig{Recipe: rec, Data: c.String("data"), ValProblems: c.Int("val-synthetic"), KVType: c.String("kv-type"), FlashAttn: c.String("flash-attn"),
		SynthConfig: syntheticSet(c), SynthSeed: c.Uint64("synthetic-seed"), Deterministic: c.Bool("deterministic")}
	if rc.Data == "" {
		if err := checkSynthetic(c); err != nil {
			return rc, err
		}
		rc.Synthetic = c.Int("synthetic")
	} else if abs, err := filepath.Abs(rc.Data); err == nil {
		rc.Data = abs
	}
	if err := resolveValidation(c, &rc); err != nil {
		return rc, err
	}
	return rc, nil
}

// trainReward reads --reward (and --robust): the answer checker and the verifier model
// with its prompt template (into rc), made absolute.
func trainReward(c *ucli.Context, rc *trainRunConfig) (reward.Mode, string, error) {
	mode, verifierPath, err := parseReward(c.String("reward"))
	if err != nil {
		return mode, "", err
	}
	if verifierPath != "" {
		if c.String("verifier-prompt") == "" {
			return mode, "", fmt.Errorf("--reward %s needs --verifier-prompt FILE: the model's prompt template, as its authors publish it (README, \"Verifier model\")", reward.Verified)
		}
		if verifierPath, err = filepath.Abs(verifierPath); err != nil {
			return mode, "", err
		}
		if rc.VerifierPrompt, err = filepath.Abs(c.String("verifier-prompt")); err != nil {
			return mode, "", err
		}
		if _, err := verifier.ReadTemplate(rc.VerifierPrompt); err != nil {
			return mode, "", err
		}
	} else if c.IsSet("verifier-budget") || c.IsSet("verifier-prompt") {
		return mode, "", fmt.Errorf("--verifier-budget and --verifier-prompt need --reward %s=MODEL.gguf", reward.Verified)
	}
	if c.Bool("robust") {
		if c.IsSet("reward") && mode != reward.Robust {
			return mode, "", fmt.Errorf("--robust and --reward %s disagree", mode)
		}
		mode = reward.Robust
	}
	return mode, verifierPath, nil
}

// trainAgents reads the agents into rc, those that start from a PEFT adapter with their
// LoRA settings (lora: the flags'), and checks the LoRA rank against each model.
func trainAgents(c *ucli.Context, rc *trainRunConfig, lora trainspec.LoRA) error {
	var err error
	for i, spec := range c.StringSlice("agent") {
		a, err := parseAgent(spec, i, c, false)
		if err != nil {
			return err
		}
		rc.Agents = append(rc.Agents, a)
	}
	if rc.Trainer.LoRA, err = importAdapters(rc.Agents, lora); err != nil {
		return err
	}
	if rc.Trainer.LoRA.Rank == 0 {
		for _, f := range []string{"lora-dropout", "lora-bf16-base"} {
			if c.IsSet(f) {
				return fmt.Errorf("--%s needs --lora-rank or an agent that starts from a PEFT adapter (LoRA is off at rank 0)", f)
			}
		}
		rc.Trainer.LoRA = trainspec.LoRA{}
	}
	for _, a := range rc.Agents {
		rc.Trainer.Agents = append(rc.Trainer.Agents, trainer.Agent{Name: a.Name, Dir: a.Model, Adapter: a.Adapter, Params: a.Params, MaxTokens: a.MaxTokens,
			SeedOffset: a.SeedOffset, ChatFormat: a.ChatFormat})
		if hc, err := model.LoadHFConfig(a.Model); err == nil { // else the trainer says what is wrong
			if err := checkLoRARank(rc.Trainer.LoRA, hc.HiddenSize, a.Model); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolveValidation takes the validation problems' source: --val-data's file, or the
// built-in set's --val-synthetic problems.
func resolveValidation(c *ucli.Context, rc *trainRunConfig) error {
	if !c.IsSet("val-data") {
		if c.IsSet("val-limit") {
			return errors.New("--val-limit chooses among the problems of --val-data; the built-in set's size is --val-synthetic N")
		}
		return nil
	}
	if c.IsSet("val-synthetic") {
		return errors.New("give --val-data or --val-synthetic, not both")
	}
	if c.String("val-data") == "" {
		return errors.New("--val-data is empty; name a problem file or folder")
	}
	abs, err := filepath.Abs(c.String("val-data"))
	if err != nil {
		return fmt.Errorf("--val-data: %w", err)
	}
	rc.ValData, rc.ValLimit, rc.ValProblems = abs, c.Int("val-limit"), 0
	return nil
}

// valProblems are the held-out validation problems.
func (rc trainRunConfig) valProblems() ([]data.Problem, error) {
	if rc.ValData == "" {
		return data.SyntheticWith(rc.ValProblems, rc.SynthSeed+valSeed, rc.SynthConfig)
	}
	ps, err := data.Load(rc.ValData, data.Options{Limit: rc.ValLimit})
	if err != nil {
		return nil, fmt.Errorf("--val-data: %w", err) // also when no problem is usable
	}
	return ps, nil
}

func trainCmd(c *ucli.Context) error {
	rc, err := resolveTrain(c)
	if err != nil {
		return err
	}
	if !launch.OwnRank() { // the launcher's ranks run the same command
		rc.Recipe.write(recipeWriter(c), c)
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

// claimTrain checks --out against --resume and the settings (claimTrainRun) and returns
// whether it holds a run and what saves the config of a new one.
func claimTrain(c *ucli.Context, out string, rc trainRunConfig) (exists bool, save func() error, err error) {
	_, statErr := os.Stat(filepath.Join(out, "config.json"))
	exists = statErr == nil
	switch {
	case exists && !c.Bool("resume"):
		return exists, nil, fmt.Errorf("%s holds a training run; pass --resume to continue it, or choose another --out", out)
	case !exists && c.Bool("resume"):
		return exists, nil, fmt.Errorf("--resume: %s holds no training run", out)
	}
	save, err = claimTrainRun(out, rc)
	return exists, recordCommand(c, out, save), err
}

// abandonRun empties the directory of a new run that failed before it logged a step (an
// adapter whose weights are not usable, a model llama.cpp refuses), so that the
// corrected command can use it. claimRunDir found the directory empty, so all in it is
// this start's; config.json goes last, so that an interrupted clean-up leaves a run that
// --resume takes. A run with a logged step or a checkpoint stays, to be resumed.
func abandonRun(dir string) {
	if _, err := os.Stat(filepath.Join(dir, trainer.CheckpointsDir)); err == nil {
		return
	}
	if train, _, err := trainlog.Read(filepath.Join(dir, trainlog.File)); len(train) > 0 || err != nil && !errors.Is(err, os.ErrNotExist) {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != runlock.File && e.Name() != "config.json" {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(filepath.Join(dir, "config.json"))
}

// claimTrainRun is claimRunDir, except that --steps may change between runs of one
// directory: a resume then trains on to the new count. A cosine schedule depends on the
// count, so there it must stay. At the same trainer dtype, the rollout dtype is named before
// any other difference, as its default depends on the machine (a GPU's run resumed on the
// CPU needs the flag).
func claimTrainRun(dir string, rc trainRunConfig) (save func() error, err error) {
	path := filepath.Join(dir, "config.json")
	var old trainRunConfig
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &old) != nil {
		return claimRunDir(dir, rc) // it reports unreadable files
	}
	if r := old.Trainer.RolloutDType; r != rc.Trainer.RolloutDType && old.Trainer.DType == rc.Trainer.DType {
		return nil, fmt.Errorf("%s holds a run with %s rollout weights, not %s (the default: bf16 with llama.cpp on a GPU or --dtype bf16, else f32); resume it with --rollout-dtype %s", dir, r, rc.Trainer.RolloutDType, r)
	}
	if old.Trainer.Steps == rc.Trainer.Steps {
		return claimRunDir(dir, rc)
	}
	same := rc
	same.Trainer.Steps = old.Trainer.Steps
	if _, err := claimRunDir(dir, same); err != nil {
		return nil, err
	}
	if rc.Trainer.Schedule.Kind == trainer.ScheduleCosine {
		return nil, fmt.Errorf("%s trains %d steps on a cosine learning-rate schedule, which depends on the count; resume it with --steps %d", dir, old.Trainer.Steps, old.Trainer.Steps)
	}
	want, err := json.MarshalIndent(rc, "", "  ")
	if err != nil {
		return nil, err
	}
	return func() error { return atomicfile.WriteBytes(path, append(want, '\n')) }, nil
}

// defaultTISCap is the truncated importance sampling cap a run gets when its rollout
// weights have another dtype than the trainer's (verl's and prime-rl's usual 2).
const defaultTISCap = 2

// rolloutSettings reads --rollout-dtype and the probe tolerance and TIS cap that follow
// from it and the overlap unless set. Its default is bf16 where llama.cpp decodes on a GPU (half the bytes,
// and tensor cores) or the trainer computes in bf16, else f32: on this project's
// AVX512-BF16 CPU bf16 decoded no faster and prefilled slower (bench/RESULTS.md, rollout
// dtype), and f32 keeps the rollout log-probs exact and the sync a copy.
func rolloutSettings(c *ucli.Context, dtype trainspec.Precision, overlap int) (trainer.RolloutDType, float64, float64, error) {
	layers, err := gpuLayers(c)
	if err != nil {
		return "", 0, 0, err
	}
	rollout := trainer.RolloutF32
	if layers > 0 || dtype == trainspec.PrecisionBF16 {
		rollout = trainer.RolloutBF16
	}
	if c.IsSet("rollout-dtype") {
		if rollout, err = trainer.ParseRolloutDType(c.String("rollout-dtype")); err != nil {
			return "", 0, 0, fmt.Errorf("--rollout-dtype: %w", err)
		}
	}
	probeTol, tisCap := c.Float64("probe-tol"), c.Float64("tis-cap")
	if (dtype == trainspec.PrecisionBF16 || rollout != trainer.RolloutF32) && !c.IsSet("probe-tol") {
		probeTol = probeTolBF16
	}
	differs := string(rollout) != string(dtype)
	if (differs || overlap == 1) && !c.IsSet("tis-cap") { // the rollout's policy is not the trainer's
		tisCap = defaultTISCap
	}
	return rollout, probeTol, tisCap, nil
}
