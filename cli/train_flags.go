package cli

import (
	"fmt"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainer"
)

// trainFlags are train's flags: its own, then the groups it shares with other commands.
func trainFlags() []ucli.Flag {
	return slices.Concat(trainProblemFlags(), trainStepFlags(), trainRewardFlags(), trainRunFlags(),
		samplingFlags(), llamaFlags(), debatePromptFlags(), syntheticFlags(), torchFlags(), memoryFlags(), distFlags(), []ucli.Flag{shardFlag(), agentRanksFlag(), offloadFlag()},
		loraFlags(0, "dropout on the adapters' input while training, in [0, 1); 0 by default because PPO's ratio compares a training pass with the dropout-free old log-probs, and dropout would make it differ from 1 with no update"))
}

// trainProblemFlags are train's flags of the agents, the algorithm and the problems to train and validate on.
func trainProblemFlags() []ucli.Flag {
	d := run.DefaultTrainSettings()
	return []ucli.Flag{
		&ucli.StringSliceFlag{Name: "agent", Aliases: []string{"a"}, Usage: "agent: HF directory or PEFT adapter directory, or a Hugging Face hub id ORG/NAME[@REVISION] from its cache (an existing path wins; config.json records the id and commit; umad --help: --hf-download)[,key=value...] (adapter=PEFT_DIR: start from that adapter on the HF directory; RUN,agent=I: agent I of training run RUN's newest checkpoint; repeat per agent)", Required: true},
		&ucli.StringFlag{Name: "algo", Value: run.DefaultAlgo, Usage: strings.Join(trainer.AlgoNames(), ", ")},
		recipeFlag(),
		&ucli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "training problems (default: built-in synthetic set)"},
		&ucli.IntFlag{Name: "synthetic", Value: d.Synthetic, Usage: "training problems of the built-in set, when --data is not given"},
		&ucli.IntFlag{Name: "val-synthetic", Value: d.ValProblems, Usage: "held-out validation problems (built-in set, another seed), when --val-data is not given; 0 = no validation"},
		&ucli.StringFlag{Name: "val-data", Usage: "validation problems: a `FILE` or folder in any format umad debate's --data reads (default: the built-in set, --val-synthetic)"},
		&ucli.IntFlag{Name: "val-limit", Usage: "with --val-data, validate on at most this many of its problems (0 = all)"},
		&ucli.Float64Flag{Name: "val-temperature", Value: *d.Trainer.ValTemperature, Usage: "every agent's sampling temperature in validation (the paper's inference temperature; 0 = greedy); its other sampling settings stay"},
		&ucli.IntFlag{Name: "val-turns", Usage: "turns of a validation debate (0 = --turns)"},
	}
}

// trainStepFlags are train's flags of the schedule, the optimizer and the policy loss.
func trainStepFlags() []ucli.Flag {
	t := run.DefaultTrainSettings().Trainer
	return []ucli.Flag{
		&ucli.IntFlag{Name: "steps", Usage: "optimisation steps (0 = --epochs passes over the data)"},
		&ucli.IntFlag{Name: "epochs", Value: run.DefaultEpochs, Usage: "passes over the data when --steps is 0"},
		&ucli.IntFlag{Name: "batch", Value: t.BatchSize, Usage: "problems per step"},
		&ucli.IntFlag{Name: "g", Value: t.G, Usage: "trajectories (group size) per problem"},
		&ucli.IntFlag{Name: "turns", Value: t.Turns, Usage: "debate turns per training rollout (T_train)"},
		&ucli.IntFlag{Name: "mini-batch", Value: t.MiniBatch, Usage: "problems per optimizer step"},
		&ucli.Float64Flag{Name: "lr", Value: t.Opt.LR, Usage: "AdamW learning rate (with LoRA, times alpha/rank at most 1)"},
		&ucli.Float64Flag{Name: "weight-decay", Value: t.Opt.WeightDecay, Usage: "AdamW weight decay"},
		&ucli.Float64Flag{Name: "grad-clip", Value: t.Opt.MaxGradNorm, Usage: "global gradient-norm clip (0 = off)"},
		&ucli.StringFlag{Name: "loss", Value: string(t.Loss), Usage: "policy loss: " + strings.Join(trainer.LossNames(), ", ")},
		&ucli.Float64Flag{Name: "clip-low", DefaultText: lossDefault(func(r trainer.PolicyLoss) any { return r.ClipLow }), Usage: "the loss's ratio clip below 1 (cispo: its weight's; 1 = no lower bound)"},
		&ucli.Float64Flag{Name: "clip-high", DefaultText: lossDefault(func(r trainer.PolicyLoss) any { return r.ClipHigh }), Usage: "the loss's ratio clip above 1"},
		&ucli.Float64Flag{Name: "clip-c", DefaultText: lossDefault(func(r trainer.PolicyLoss) any { return r.ClipC }), Usage: "PPO's dual clip for negative advantages (0 = off)"},
		&ucli.StringFlag{Name: "loss-agg", DefaultText: lossDefault(func(r trainer.PolicyLoss) any { return r.Agg }), Usage: "loss aggregation within a group: token-mean, seq-mean-token-sum, seq-mean-token-mean or seq-mean-token-sum-norm"},
	}
}

// trainRewardFlags are train's flags of the rewards, the advantages and the learning-rate schedule.
func trainRewardFlags() []ucli.Flag {
	t := run.DefaultTrainSettings().Trainer
	return []ucli.Flag{
		&ucli.StringFlag{Name: "team", Usage: "team reward: sum, max, dictator or individual (default: the algorithm's)"},
		&ucli.StringFlag{Name: "influence", Usage: "influence reward: sign (reference), peer-mean (paper) or off (default: the algorithm's)"},
		&ucli.Float64Flag{Name: "eta", Usage: "influence reward strength (default: the algorithm's, 0.2)"},
		&ucli.Float64Flag{Name: "nll-alpha", Usage: "NLL advantage weight exponent (default: the algorithm's)"},
		&ucli.Float64Flag{Name: "kl-coef", Usage: "KL coefficient, in the reward (k1) or in the loss (k3: grpo, --kl-in-loss) (default: 0.001)"},
		&ucli.BoolFlag{Name: "kl-in-loss", Usage: "KL to the reference as k3 in the loss (the paper's variant) instead of k1 in the reward"},
		&ucli.BoolFlag{Name: "dr-grpo", Usage: "Dr.GRPO advantages: centred, not divided by the group std"},
		&ucli.BoolFlag{Name: "dynamic-sampling", Usage: "DAPO dynamic sampling: drop groups whose rewards are all equal, roll out more problems to refill the batch"},
		&ucli.IntFlag{Name: "max-gen-batches", Value: t.MaxGenBatches, Usage: "with --dynamic-sampling, most rollout batches per step"},
		&ucli.BoolFlag{Name: "overlong-filter", Usage: "mask responses cut off at --max-tokens out of the loss (DAPO)"},
		&ucli.Float64Flag{Name: "tis-cap", DefaultText: "0 (off); 2 when --rollout-dtype differs from --dtype (bf16 rollouts on a GPU) or with --overlap 1", Usage: "truncated importance sampling: weight tokens by min(exp(trainer - rollout log-prob) x the mass top-k/top-p kept, cap); 0 = off, 2 is usual"},
		&ucli.StringFlag{Name: "lr-schedule", Value: t.Schedule.Kind, Usage: "learning rate after warm-up: constant or cosine"},
		&ucli.IntFlag{Name: "warmup-steps", Usage: "linear learning-rate warm-up steps"},
		&ucli.Float64Flag{Name: "min-lr-ratio", Usage: "cosine schedule: final learning rate as a fraction of --lr"},
	}
}

// trainRunFlags are train's flags of grading, validation, checkpoints, the weight sync and the run directory.
func trainRunFlags() []ucli.Flag {
	t := run.DefaultTrainSettings().Trainer
	return []ucli.Flag{
		&ucli.StringFlag{Name: "reward", Value: string(t.Reward), Usage: "answer checker of the 0/1 rewards: strict (the MATH benchmark's is_equiv, as the paper), robust (equivalent forms: fractions, sets, intervals, symbolic) or robust+verifier=MODEL.gguf (robust, and a verifier model, asked with --verifier-prompt, for the pairs robust's rules do not decide)"},
		verifierPromptFlag(),
		&ucli.DurationFlag{Name: "verifier-budget", Usage: "with robust+verifier, most time the verifier model may take per rollout batch (0 = no limit); the pairs left are counted as skipped in the metrics"},
		&ucli.BoolFlag{Name: "robust", Usage: "the same as --reward robust"},
		&ucli.IntFlag{Name: "val-every", Value: t.ValEvery, Usage: "validate every N steps (also before training and at the end)"},
		&ucli.IntFlag{Name: "val-k", Value: t.ValK, Usage: "trajectories per validation problem"},
		&ucli.IntFlag{Name: "save-every", Value: t.SaveEvery, Usage: "checkpoint every N steps (also at the end)"},
		&ucli.IntFlag{Name: "keep", Value: t.KeepLast, Usage: "checkpoints to keep"},
		&ucli.IntFlag{Name: "keep-rollouts", Value: t.KeepRollouts, Usage: "problems whose training debates each step keeps in RUN/rollouts/ (0 = none)"},
		&ucli.StringFlag{Name: "sync", Value: string(t.Sync), Usage: "how updated weights reach llama.cpp: inplace (written into the loaded model, no file; with LoRA, the adapters swapped onto the loaded base) or file (a GGUF written and reloaded each step; slower, for comparison)"},
		&ucli.IntFlag{Name: "overlap", Usage: "1: roll out step t+1 from the weights before step t's update while step t trains (one step off-policy, corrected by --tis-cap, then 2 by default; unless --threads or --torch-threads is given, each phase gets half the cores); 0: the phases in turn"},
		&ucli.StringFlag{Name: "rollout-dtype", DefaultText: "bf16 with llama.cpp on a GPU (--gpu-layers above 0) or --dtype bf16, else f32", Usage: "type of the rollout weights in llama.cpp: f32, bf16 or f16 (the sync converts on the way in). bf16 reads half the bytes per decoded token, which a GPU turns into speed; on a 2-core AVX512-BF16 CPU it decoded no faster than f32, and prefilled slower, at the Qwen2.5-0.5B shape (bench/RESULTS.md), so the CPU keeps f32's exact log-probs. A dtype other than the trainer's turns --tis-cap on at 2"},
		&ucli.Float64Flag{Name: "probe-tol", Value: t.ProbeTol, DefaultText: fmt.Sprintf("%g; %g with bf16 or f16 rollouts or --dtype bf16", run.ProbeTolF32, run.ProbeTolBF16), Usage: "largest mean |delta log-prob| between llama.cpp and the trainer after a sync (0 = no check)"},
		&ucli.IntFlag{Name: "prompt-limit", Value: t.PromptLimit, Usage: "most prompt tokens; longer debate prompts trim the peers' reasoning. It plus --max-tokens must fit --ctx when that is given, else, when set, the model's context"},
		&ucli.IntFlag{Name: "slots", Value: run.DefaultSlots, Usage: "parallel sequences per model"},
		&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "run directory", Required: true},
		&ucli.BoolFlag{Name: "resume", Usage: "continue the run in --out from its newest complete checkpoint (same flags; --steps may grow)"},
		deterministicFlag(),
	}
}

// lossDefault lists each policy loss's default of one setting, for a flag's help.
func lossDefault(of func(trainer.PolicyLoss) any) string {
	var parts []string
	for _, r := range trainer.PolicyLosses() {
		parts = append(parts, fmt.Sprintf("%s %v", r.Loss, of(r)))
	}
	return strings.Join(parts, ", ")
}

// memoryFlags are the memory plan's flags (run.Train.Plan prints the plan and refuses a
// run that cannot fit).
func memoryFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.BoolFlag{Name: "dry-run", Usage: "print the memory plan (per agent: trainer, reference, activations, llama.cpp weights and KV cache) against the memory available and check the settings and --out, then exit without loading or writing anything; it fails where the run would fail before loading (a plan that does not fit, unless --no-memory-check)"},
		&ucli.BoolFlag{Name: "no-memory-check", Usage: "start even when the memory plan does not fit"},
		&ucli.StringFlag{Name: "memory-budget", DefaultText: "MemAvailable", Usage: "host memory the run may use (e.g. 48GiB), instead of /proc/meminfo's MemAvailable (which ignores container limits)"},
	}
}
