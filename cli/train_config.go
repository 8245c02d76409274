package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainspec"
	"github.com/umad-dev/umad/verifier"
)

func resolveTrain(c *ucli.Context) (run.TrainSettings, error) {
	rec, err := applyRecipe(c, "train", c.String("algo"))
	if err != nil {
		return run.TrainSettings{}, err
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
	valTemp := c.Float64("val-temperature")       // always set: nil (the agents' own) is for runs from before the flag
	opt := run.DefaultTrainSettings().Trainer.Opt // AdamW's betas and epsilon
	opt.LR, opt.WeightDecay, opt.MaxGradNorm = c.Float64("lr"), c.Float64("weight-decay"), c.Float64("grad-clip")
	rc.Trainer = trainer.Settings{LoRA: lora, Algo: algo, Steps: c.Int("steps"), BatchSize: c.Int("batch"), Turns: c.Int("turns"), G: c.Int("g"),
		MiniBatch: c.Int("mini-batch"), Opt: opt, Loss: loss.Loss, ClipLow: loss.ClipLow, ClipHigh: loss.ClipHigh, ClipC: loss.ClipC,
		Agg: loss.Agg, Reward: mode, Verifier: verifierPath, VerifierBudget: c.Duration("verifier-budget"),
		PromptLimit: c.Int("prompt-limit"), Seed: c.Uint64("seed"),
		ValEvery: c.Int("val-every"), ValK: c.Int("val-k"), ValTurns: c.Int("val-turns"), ValTemperature: &valTemp,
		NoMask: c.Bool("no-mask"), FullHistory: c.Bool("full-history"), Anonymise: c.Bool("anonymise"), SaveEvery: c.Int("save-every"), KeepLast: c.Int("keep"), ProbeTol: probeTol, DType: dtype, RolloutDType: rollout, Sync: sync,
		KeepRollouts: c.Int("keep-rollouts"), DynamicSampling: c.Bool("dynamic-sampling"), MaxGenBatches: c.Int("max-gen-batches"),
		OverlongFilter: c.Bool("overlong-filter"), TISCap: tisCap, Overlap: c.Int("overlap"),
		Schedule: trainer.Schedule{Kind: c.String("lr-schedule"), WarmupSteps: c.Int("warmup-steps"), MinRatio: c.Float64("min-lr-ratio")}}
	err = trainAgents(c, &rc)
	return rc, err
}

// trainData starts the run's configuration with its problems: --data, or the built-in
// set, and the validation problems' source.
func trainData(c *ucli.Context, rec *recipe.Applied) (run.TrainSettings, error) {
	rc := run.TrainSettings{Recipe: rec, Data: c.String("data"), ValProblems: c.Int("val-synthetic"), KVType: c.String("kv-type"), FlashAttn: c.String("flash-attn"),
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
func trainReward(c *ucli.Context, rc *run.TrainSettings) (grade.Mode, string, error) {
	mode, verifierPath, err := parseReward(c.String("reward"))
	if err != nil {
		return mode, "", err
	}
	if verifierPath != "" {
		if c.String("verifier-prompt") == "" {
			return mode, "", fmt.Errorf("--reward %s needs --verifier-prompt FILE: the model's prompt template, as its authors publish it (README, \"Verifier model\")", grade.Verified)
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
		return mode, "", fmt.Errorf("--verifier-budget and --verifier-prompt need --reward %s=MODEL.gguf", grade.Verified)
	}
	if c.Bool("robust") {
		if c.IsSet("reward") && mode != grade.Robust {
			return mode, "", fmt.Errorf("--robust and --reward %s disagree", mode)
		}
		mode = grade.Robust
	}
	return mode, verifierPath, nil
}

// trainAgents reads the agents into rc and resolves the settings (those that start from a
// PEFT adapter take their LoRA settings from it), then checks the LoRA rank against each
// model.
func trainAgents(c *ucli.Context, rc *run.TrainSettings) error {
	for i, spec := range c.StringSlice("agent") {
		def := run.DebateAgent{MaxTokens: c.Int("max-tokens"),
			Params: sampler.Params{Temperature: c.Float64("temperature"), TopP: c.Float64("top-p"), TopK: c.Int("top-k"), MinP: c.Float64("min-p")}}
		a, err := parseAgent(spec, i, def, hubDirs(c))
		if err != nil {
			return err
		}
		rc.Agents = append(rc.Agents, run.TrainAgent(a)) // the same fields: what --agent says of a trained agent
	}
	if err := rc.Resolve(); err != nil {
		return err
	}
	if rc.Trainer.LoRA.Rank == 0 {
		for _, f := range []string{"lora-dropout", "lora-bf16-base"} {
			if c.IsSet(f) {
				return fmt.Errorf("--%s needs --lora-rank or an agent that starts from a PEFT adapter (LoRA is off at rank 0)", f)
			}
		}
	}
	for _, a := range rc.Agents {
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
func resolveValidation(c *ucli.Context, rc *run.TrainSettings) error {
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

// rolloutSettings reads --rollout-dtype and the probe tolerance and TIS cap, each the
// default that follows from the others unless given (run.DefaultRolloutDType,
// run.DefaultProbeTol, run.DefaultTISCap).
func rolloutSettings(c *ucli.Context, dtype trainspec.Precision, overlap int) (trainer.RolloutDType, float64, float64, error) {
	layers, err := gpuLayers(c)
	if err != nil {
		return "", 0, 0, err
	}
	rollout := run.DefaultRolloutDType(layers, dtype)
	if c.IsSet("rollout-dtype") {
		if rollout, err = trainer.ParseRolloutDType(c.String("rollout-dtype")); err != nil {
			return "", 0, 0, fmt.Errorf("--rollout-dtype: %w", err)
		}
	}
	probeTol, tisCap := c.Float64("probe-tol"), c.Float64("tis-cap")
	if !c.IsSet("probe-tol") {
		probeTol = run.DefaultProbeTol(dtype, rollout)
	}
	if !c.IsSet("tis-cap") {
		tisCap = run.DefaultTISCap(dtype, rollout, overlap)
	}
	return rollout, probeTol, tisCap, nil
}
