package run

// A training request resolved into its settings: the recipe's overlay, the algorithm with
// its overrides, the rewards and verifier, the loss, the LoRA and rollout settings, the
// problems and validation, and the agents.

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainspec"
	"github.com/umad-dev/umad/verifier"
)

// Resolve is the settings the request describes: --recipe's values for the settings not
// given, then every setting, resolved and checked.
func (r *TrainRequest) Resolve() (TrainSettings, error) {
	rec, err := applyRecipe(r.Keys(), "train", r.Algo)
	if err != nil {
		return TrainSettings{}, err
	}
	rc, err := r.trainData(rec)
	if err != nil {
		return rc, err
	}
	algo, err := trainer.LookupAlgo(r.Algo)
	if err != nil {
		return rc, err
	}
	o := trainer.Overrides{Team: r.Team, Influence: r.Influence, KLInLoss: r.KLInLoss, DrGRPO: r.DrGRPO,
		Eta: r.setFloat("eta", r.Eta), NLLAlpha: r.setFloat("nll-alpha", r.NLLAlpha), KLCoef: r.setFloat("kl-coef", r.KLCoef)}
	if algo, err = algo.Override(o); err != nil {
		return rc, err
	}
	mode, verifierPath, err := r.trainReward(&rc)
	if err != nil {
		return rc, err
	}
	sync, err := trainer.ParseSyncMode(r.Sync)
	if err != nil {
		return rc, fmt.Errorf("--sync: %w", err)
	}
	lora, err := r.lora().Settings(true)
	if err != nil {
		return rc, err
	}
	dtype, err := trainspec.ParsePrecision(r.DType)
	if err != nil {
		return rc, fmt.Errorf("--dtype: %w", err)
	}
	rollout, probeTol, tisCap, err := r.rolloutSettings(dtype, r.Overlap)
	if err != nil {
		return rc, err
	}
	loss, err := r.lossSettings()
	if err != nil {
		return rc, err
	}
	valTemp := r.ValTemperature               // always set: nil (the agents' own) is for runs from before the flag
	opt := DefaultTrainSettings().Trainer.Opt // AdamW's betas and epsilon
	opt.LR, opt.WeightDecay, opt.MaxGradNorm = r.LR, r.WeightDecay, r.GradClip
	rc.Trainer = trainer.Settings{LoRA: lora, Algo: algo, Steps: r.Steps, BatchSize: r.Batch, Turns: r.Turns, G: r.G,
		MiniBatch: r.MiniBatch, Opt: opt, Loss: loss.Loss, ClipLow: loss.ClipLow, ClipHigh: loss.ClipHigh, ClipC: loss.ClipC,
		Agg: loss.Agg, Reward: mode, Verifier: verifierPath, VerifierBudget: r.VerifierBudget,
		PromptLimit: r.PromptLimit, Seed: r.Seed,
		ValEvery: r.ValEvery, ValK: r.ValK, ValTurns: r.ValTurns, ValTemperature: &valTemp,
		NoMask: r.NoMask, FullHistory: r.FullHistory, Anonymise: r.Anonymise, SaveEvery: r.SaveEvery, KeepLast: r.Keep, ProbeTol: probeTol, DType: dtype, RolloutDType: rollout, Sync: sync,
		KeepRollouts: r.KeepRollouts, DynamicSampling: r.DynamicSampling, MaxGenBatches: r.MaxGenBatches,
		OverlongFilter: r.OverlongFilter, TISCap: tisCap, Overlap: r.Overlap,
		Schedule: trainer.Schedule{Kind: r.LRSchedule, WarmupSteps: r.WarmupSteps, MinRatio: r.MinLRRatio}}
	err = r.trainAgents(&rc)
	return rc, err
}

// trainData starts the run's configuration with its problems: --data, or the built-in
// set, and the validation problems' source.
func (r *TrainRequest) trainData(rec *recipe.Applied) (TrainSettings, error) {
	rc := TrainSettings{Recipe: rec, Data: r.Data, ValProblems: r.ValSynthetic, KVType: r.KVType, FlashAttn: r.FlashAttn,
		SynthConfig: SyntheticSet(r.Synth), SynthSeed: r.SynthSeed, Deterministic: r.Deterministic}
	if rc.Data == "" {
		if err := CheckSynthetic(r.Synthetic, r.given["synthetic"]); err != nil {
			return rc, err
		}
		rc.Synthetic = r.Synthetic
	} else if abs, err := filepath.Abs(rc.Data); err == nil {
		rc.Data = abs
	}
	if err := r.resolveValidation(&rc); err != nil {
		return rc, err
	}
	return rc, nil
}

// trainReward reads --reward (and --robust): the answer checker and the verifier model
// with its prompt template (into rc), made absolute.
func (r *TrainRequest) trainReward(rc *TrainSettings) (grade.Mode, string, error) {
	mode, verifierPath, err := parseReward(r.Reward)
	if err != nil {
		return mode, "", err
	}
	if verifierPath != "" {
		if r.VerifierPrompt == "" {
			return mode, "", fmt.Errorf("--reward %s needs --verifier-prompt FILE: the model's prompt template, as its authors publish it (README, \"Verifier model\")", grade.Verified)
		}
		if verifierPath, err = filepath.Abs(verifierPath); err != nil {
			return mode, "", err
		}
		if rc.VerifierPrompt, err = filepath.Abs(r.VerifierPrompt); err != nil {
			return mode, "", err
		}
		if _, err := verifier.ReadTemplate(rc.VerifierPrompt); err != nil {
			return mode, "", err
		}
	} else if r.given["verifier-budget"] || r.given["verifier-prompt"] {
		return mode, "", fmt.Errorf("--verifier-budget and --verifier-prompt need --reward %s=MODEL.gguf", grade.Verified)
	}
	if r.Robust {
		if r.given["reward"] && mode != grade.Robust {
			return mode, "", fmt.Errorf("--robust and --reward %s disagree", mode)
		}
		mode = grade.Robust
	}
	return mode, verifierPath, nil
}

// trainAgents reads the agents into rc and resolves the settings (those that start from a
// PEFT adapter take their LoRA settings from it), then checks the LoRA rank against each
// model.
func (r *TrainRequest) trainAgents(rc *TrainSettings) error {
	for i, spec := range r.Agents {
		def := DebateAgent{MaxTokens: r.Agent.MaxTokens,
			Params: sampler.Params{Temperature: r.Agent.Params.Temperature, TopP: r.Agent.Params.TopP, TopK: r.Agent.Params.TopK, MinP: r.Agent.Params.MinP}}
		a, err := parseAgent(spec, i, def, r.hub())
		if err != nil {
			return err
		}
		rc.Agents = append(rc.Agents, TrainAgent(a)) // the same fields: what --agent says of a trained agent
	}
	if err := rc.Resolve(); err != nil {
		return err
	}
	if rc.Trainer.LoRA.Rank == 0 {
		for _, f := range []string{"lora-dropout", "lora-bf16-base"} {
			if r.given[f] {
				return fmt.Errorf("--%s needs --lora-rank or an agent that starts from a PEFT adapter (LoRA is off at rank 0)", f)
			}
		}
	}
	for _, a := range rc.Agents {
		if hc, err := model.LoadHFConfig(a.Model); err == nil { // else the trainer says what is wrong
			if err := CheckLoRARank(rc.Trainer.LoRA, hc.HiddenSize, a.Model); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolveValidation takes the validation problems' source: --val-data's file, or the
// built-in set's --val-synthetic problems.
func (r *TrainRequest) resolveValidation(rc *TrainSettings) error {
	if !r.given["val-data"] {
		if r.given["val-limit"] {
			return errors.New("--val-limit chooses among the problems of --val-data; the built-in set's size is --val-synthetic N")
		}
		return nil
	}
	if r.given["val-synthetic"] {
		return errors.New("give --val-data or --val-synthetic, not both")
	}
	if r.ValData == "" {
		return errors.New("--val-data is empty; name a problem file or folder")
	}
	abs, err := filepath.Abs(r.ValData)
	if err != nil {
		return fmt.Errorf("--val-data: %w", err)
	}
	rc.ValData, rc.ValLimit, rc.ValProblems = abs, r.ValLimit, 0
	return nil
}

// rolloutSettings reads --rollout-dtype and the probe tolerance and TIS cap, each the
// default that follows from the others unless given (DefaultRolloutDType,
// DefaultProbeTol, DefaultTISCap).
func (r *TrainRequest) rolloutSettings(dtype trainspec.Precision, overlap int) (trainer.RolloutDType, float64, float64, error) {
	layers, err := GPULayers(r.GPULayers, r.given["gpu-layers"])
	if err != nil {
		return "", 0, 0, err
	}
	rollout := DefaultRolloutDType(layers, dtype)
	if r.given["rollout-dtype"] {
		if rollout, err = trainer.ParseRolloutDType(r.RolloutDType); err != nil {
			return "", 0, 0, fmt.Errorf("--rollout-dtype: %w", err)
		}
	}
	probeTol, tisCap := r.ProbeTol, r.TISCap
	if !r.given["probe-tol"] {
		probeTol = DefaultProbeTol(dtype, rollout)
	}
	if !r.given["tis-cap"] {
		tisCap = DefaultTISCap(dtype, rollout, overlap)
	}
	return rollout, probeTol, tisCap, nil
}

// lossSettings are the policy loss --loss names with its clip range and aggregation: the
// loss's defaults, except where a flag is given.
func (r *TrainRequest) lossSettings() (trainer.PolicyLoss, error) {
	l, err := trainer.LookupLoss(trainspec.Loss(r.Loss))
	if err != nil {
		return l, fmt.Errorf("--loss: %w", err)
	}
	for _, f := range []struct {
		key   string
		given float64
		v     *float64
	}{{"clip-low", r.ClipLow, &l.ClipLow}, {"clip-high", r.ClipHigh, &l.ClipHigh}, {"clip-c", r.ClipC, &l.ClipC}} {
		if r.given[f.key] {
			*f.v = f.given
		}
	}
	if r.given["loss-agg"] {
		l.Agg = trainspec.AggMode(r.LossAgg)
	}
	return l, nil
}

// setFloat is v when the setting name was given, else nil.
func (r *TrainRequest) setFloat(name string, v float64) *float64 {
	if !r.given[name] {
		return nil
	}
	return &v
}

// SyntheticSet is the built-in problems' difficulty as a run records it: the default
// task stays unrecorded, so earlier runs' configs still match.
func SyntheticSet(c data.SyntheticConfig) data.SyntheticConfig {
	if c.Task == data.TaskArithmetic {
		c.Task = ""
	}
	return c
}

// CheckSynthetic refuses a count of built-in problems (--synthetic) below 1, which
// otherwise failed later with a message about something else.
func CheckSynthetic(n int, given bool) error {
	if given && n < 1 || n < 0 {
		return fmt.Errorf("--synthetic must be at least 1, got %d", n)
	}
	return nil
}

// hub is Hub, or one that takes every agent as a path when none is set.
func (r *TrainRequest) hub() HubDir {
	if r.Hub != nil {
		return r.Hub
	}
	return func(arg string) (string, string, error) { return arg, "", nil }
}
