package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/trainspec"
	"github.com/umad-dev/umad/verifier"
)

// Agent is one trained debater.
type Agent struct {
	Name string `json:"name"`
	// Dir is the Hugging Face directory the agent starts from; it is also its frozen
	// reference model.
	Dir string `json:"dir"`
	// Adapter, when set, is a PEFT adapter directory loaded onto Dir as the starting LoRA
	// adapters (a LoRA run only); Dir is then the frozen base.
	Adapter    string         `json:"adapter,omitempty"`
	Params     sampler.Params `json:"params"`
	MaxTokens  int            `json:"max_tokens"`
	SeedOffset uint64         `json:"seed_offset"`
	// ChatFormat overrides the chat format detected from the model's template (a family
	// name; "" detects).
	ChatFormat string `json:"-"`
}

// Config is a training run in four parts: its settings (what config.json records), its
// problems, where its rollouts and its training state run, and its output directory. The
// handles it works with come apart, in Live. Everything random derives from Seed and the
// step number, so a resumed run continues exactly as an uninterrupted one would.
type Config struct {
	Settings
	Data
	Rollout   Rollout
	Placement trainspec.Placement // of the training state: not recorded, a run resumes under any
	Out       string              // the run directory
	hooks     *testHooks          // nil outside tests
}

// Data are a run's problems: the training set and the held-out validation set.
type Data struct {
	Problems    []data.Problem
	ValProblems []data.Problem
}

// Rollout is how the agents' rollout engines run: llama.cpp's options (SeqContext 0 gives
// each sequence room for the prompt limit plus the agent's response), where the rollout
// models live, and whether the agents step on one clock (debate.Config).
type Rollout struct {
	Engine        engine.Options
	Placement     engine.Placement
	Deterministic bool
}

// Live are the handles a run works with and reports to, none of them a setting.
type Live struct {
	Torch *torch.Runtime
	// Group, when set, makes this process one rank of a data-parallel run (dist.go).
	Group *torch.Group
	// Checker is the verifier model of a robust+verifier run (Settings.Verifier), loaded.
	Checker *verifier.Verifier
	// Progress receives one human-readable line per step; nil is silent.
	Progress io.Writer
	// Page, when set, is called with the run directory on rank 0 after each step's and each
	// validation's metrics lines are logged (live) and once as the run ends (not live): the
	// CLI keeps the training page (report.WriteTrainingPage) current with it.
	Page func(out string, live bool) error
}

// Settings are what a run does, as config.json records them (its "trainer"); a resume
// must match them.
type Settings struct {
	Agents    []Agent `json:"agents"`
	Algo      Algo    `json:"algo"`
	Steps     int     `json:"steps"`      // optimisation steps in all
	BatchSize int     `json:"batch_size"` // problems per step
	Turns     int     `json:"turns"`      // T_train
	G         int     `json:"g"`          // trajectories per problem
	// MiniBatch is the number of groups (problems) per optimizer step; the loss is the
	// mean over groups of each group's token-mean (reference section 4.3).
	MiniBatch int               `json:"mini_batch"`
	Opt       trainspec.AdamW   `json:"optimizer"`
	Loss      trainspec.Loss    `json:"loss"` // the policy loss (loss.go); the four below are its settings
	ClipLow   float64           `json:"clip_low"`
	ClipHigh  float64           `json:"clip_high"`
	ClipC     float64           `json:"clip_c"`
	Agg       trainspec.AggMode `json:"loss_agg"`
	// Reward is the grading mode of the 0/1 correctness rewards (strict is_equiv, as the
	// paper, robust, or robust+verifier: robust with a verifier model, Verifier).
	Reward      grade.Mode `json:"reward"`
	PromptLimit int        `json:"prompt_limit"`
	Seed        uint64     `json:"seed"`
	ValEvery    int        `json:"val_every"`  // 0: before training and at the end only
	ValK        int        `json:"val_k"`      // trajectories per validation problem
	SaveEvery   int        `json:"save_every"` // 0: at the end only
	KeepLast    int        `json:"keep_last"`
	ProbeTol    float64    `json:"probe_tol"` // largest mean |delta| llama.cpp vs plugin; 0: no check
	// ValTurns is the turns of a validation debate (0: Turns), and ValTemperature, when
	// set, every agent's sampling temperature in it (0: greedy; the paper evaluates at 0.6
	// what it trains at 0.8); nil keeps the agents' own.
	ValTurns       int      `json:"val_turns,omitempty"`
	ValTemperature *float64 `json:"val_temperature,omitempty"`
	// NoMask, FullHistory and Anonymise shape the debate messages of turns t >= 1 in the
	// training rollouts and the validation, as umad debate's flags of those names do.
	NoMask      bool `json:"no_mask"`
	FullHistory bool `json:"full_history"`
	Anonymise   bool `json:"anonymise"`
	// Verifier is the GGUF verifier model of a robust+verifier run, and VerifierBudget the
	// most time it may take per rollout batch (0: no limit).
	Verifier       string        `json:"verifier,omitempty"`
	VerifierBudget time.Duration `json:"verifier_budget,omitempty"`
	// DType is the trainer's precision: f32, or bf16 compute over f32 master weights. A
	// config.json written before it existed reads as f32.
	DType trainspec.Precision `json:"dtype"`
	// Sync is how updated weights reach llama.cpp: in place (the default) or by file.
	Sync SyncMode `json:"sync"`
	// RolloutDType is the type of the rollout weights in llama.cpp; a config.json written
	// before it existed reads as f32.
	RolloutDType RolloutDType `json:"rollout_dtype"`
	// KeepRollouts is how many problems' training debates each step keeps in
	// RUN/rollouts/step-N.jsonl.zst, for inspection (0: none).
	KeepRollouts int `json:"keep_rollouts"`
	// Schedule is the learning rate's warm-up and decay over the steps.
	Schedule Schedule `json:"lr_schedule"`
	// DynamicSampling (DAPO) drops groups whose rewards are all equal (no learning signal)
	// and rolls out up to MaxGenBatches batches per step to fill BatchSize problems that
	// have at least one such group left.
	DynamicSampling bool `json:"dynamic_sampling"`
	MaxGenBatches   int  `json:"max_gen_batches"`
	// OverlongFilter masks responses cut off at the token limit out of the loss (DAPO),
	// instead of training them as wrong answers.
	OverlongFilter bool `json:"overlong_filter"`
	// TISCap > 0 weights each token's loss by min(exp(trainer - rollout log-prob), TISCap):
	// truncated importance sampling for the gap between llama.cpp and the trainer.
	TISCap float64 `json:"tis_cap"`
	// LoRA trains low-rank adapters on a frozen base instead of every weight (Rank 0: full
	// fine-tuning). The base with the adapters left out is the KL reference, also for a run
	// started from an adapter. The in-place sync sends llama.cpp the adapters (a LoRA GGUF
	// on the loaded base); --sync file and checkpoints write the merged weights. Each
	// agent's adapter seed derives from Seed and its index.
	LoRA trainspec.LoRA `json:"lora"`
	// Overlap 1 rolls out step t+1 from the weights before step t's update while step t
	// trains (one step off-policy; overlap.go); 0 runs the phases in turn. A config.json
	// written before it existed reads as 0.
	Overlap int `json:"overlap"`
}

// testHooks let a test see what a step computed.
type testHooks struct {
	rows  func(step, turn, agent int, rows []sampleRow) // the metrics rows of all ranks
	grads func(step, agent int, m *torch.Model) error   // gradients before an optimizer step
	batch func(step, turn, agent int, b *turnBatch)     // an update's inputs, importance weights included
}

// UnmarshalJSON also reads a config.json written before the grading mode had a name, whose
// "robust": true|false becomes Reward, before the sync mode had one (then in place, the
// default), before the dtype had one (then f32), before the policy loss had one (then
// ppo), or before validation had its own temperature (then the agents' one, when they
// share it), so runs from then still resume.
func (c *Settings) UnmarshalJSON(b []byte) error {
	type plain Settings
	old := struct {
		*plain
		Robust *bool `json:"robust"`
	}{plain: (*plain)(c)}
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	if c.ValTemperature == nil && len(c.Agents) > 0 && c.sharedTemperature() {
		temp := c.Agents[0].Params.Temperature
		c.ValTemperature = &temp
	}
	if c.Reward == "" && old.Robust != nil {
		c.Reward = grade.Strict
		if *old.Robust {
			c.Reward = grade.Robust
		}
	}
	if c.Sync == "" {
		c.Sync = SyncInPlace
	}
	if c.DType == "" {
		c.DType = trainspec.PrecisionF32
	}
	if c.RolloutDType == "" {
		c.RolloutDType = RolloutF32
	}
	if c.Loss == "" {
		c.Loss = trainspec.LossPPO
	}
	return nil
}

// sharedTemperature reports whether every agent samples at the same temperature.
func (c *Settings) sharedTemperature() bool {
	for _, a := range c.Agents {
		if a.Params.Temperature != c.Agents[0].Params.Temperature {
			return false
		}
	}
	return true
}

// Check validates a configuration. Run calls it, and run.Train.Check before the run claims
// its directory, so that a mistake leaves nothing behind.
func (c *Config) Check() error {
	switch {
	case len(c.Agents) == 0:
		return errors.New("train: no agents")
	case len(c.Problems) == 0:
		return errors.New("train: no training problems")
	case c.BatchSize < 1 || c.G < 1 || c.Turns < 1 || c.MiniBatch < 1:
		return fmt.Errorf("train: batch size %d, G %d, turns %d and mini-batch %d must be at least 1", c.BatchSize, c.G, c.Turns, c.MiniBatch)
	case len(c.Problems) < c.BatchSize:
		return fmt.Errorf("train: %d problems are fewer than one batch of %d", len(c.Problems), c.BatchSize)
	case c.Steps < 1:
		return fmt.Errorf("train: steps must be at least 1, got %d", c.Steps)
	case c.Out == "":
		return errors.New("train: an output directory is required")
	case c.ValTurns < 0:
		return fmt.Errorf("train: validation turns must not be negative, got %d", c.ValTurns)
	case c.ValTemperature != nil && !(*c.ValTemperature >= 0 && *c.ValTemperature <= math.MaxFloat32):
		return fmt.Errorf("train: the validation temperature must be a non-negative number, got %g", *c.ValTemperature)
	case c.ValEvery < 0 || c.SaveEvery < 0 || c.KeepLast < 0 || c.ProbeTol < 0 || c.TISCap < 0 || c.KeepRollouts < 0:
		return errors.New("train: intervals, tolerances and caps must not be negative")
	case c.DynamicSampling && c.MaxGenBatches < 1:
		return fmt.Errorf("train: dynamic sampling needs at least 1 generation batch per step, got %d", c.MaxGenBatches)
	case c.Overlap != 0 && c.Overlap != 1:
		return fmt.Errorf("train: --overlap must be 0 or 1, got %d", c.Overlap)
	}
	if c.Reward == "" {
		c.Reward = grade.Strict // the paper's
	}
	if c.Sync == "" {
		c.Sync = SyncInPlace
	}
	mode, err := ParseSyncMode(string(c.Sync))
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	c.Sync = mode
	if c.DType, err = trainspec.ParsePrecision(string(c.DType)); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if c.RolloutDType == "" {
		c.RolloutDType = RolloutF32
	}
	if c.RolloutDType, err = ParseRolloutDType(string(c.RolloutDType)); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if _, err := grade.ParseMode(string(c.Reward)); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if (c.Reward == grade.Verified) != (c.Verifier != "") {
		return fmt.Errorf("train: a verifier model goes with the %s reward, and only with it", grade.Verified)
	}
	if c.VerifierBudget < 0 {
		return fmt.Errorf("train: the verifier budget must not be negative, got %v", c.VerifierBudget)
	}
	if err := c.Schedule.check(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if err := c.LoRA.Check(0); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if err := c.checkNumbers(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	for i, a := range c.Agents {
		if a.Adapter != "" && c.LoRA.Rank == 0 {
			return fmt.Errorf("train: agent %d starts from the LoRA adapter %s, which needs a LoRA run (a LoRA rank)", i, a.Adapter)
		}
		if !(a.Params.Temperature > 0) {
			return fmt.Errorf("train: agent %d: training needs a positive sampling temperature (log-probs are taken at it)", i)
		}
		if a.MaxTokens < 1 {
			return fmt.Errorf("train: agent %d: max tokens must be at least 1", i)
		}
	}
	return c.Algo.Check(len(c.Agents), c.Turns)
}

// checkNumbers refuses what the plugin would refuse or overflow on only at the first
// optimizer step, after the models loaded and a rollout ran: every number must fit the
// float32 the trainer computes in, the optimizer's and the PPO loss's settings must be in
// their ranges, and a LoRA run's learning rate times alpha/rank (how far a step moves the
// adapted weights) must be at most 1. Beyond that a LoRA gradient, which grows with
// alpha/rank, overflows and every optimizer step is skipped (--lora-alpha 1e30); a large
// learning rate alone makes weights diverge, which the run stops on.
func (c *Config) checkNumbers() error {
	for _, n := range []struct {
		flag string
		v    float64
	}{{"--lr", c.Opt.LR}, {"--weight-decay", c.Opt.WeightDecay}, {"--grad-clip", c.Opt.MaxGradNorm},
		{"--clip-low", c.ClipLow}, {"--clip-high", c.ClipHigh}, {"--clip-c", c.ClipC}, {"--tis-cap", c.TISCap},
		{"--probe-tol", c.ProbeTol}, {"--eta", c.Algo.Eta}, {"--nll-alpha", c.Algo.NLLAlpha},
		{"--kl-coef", c.Algo.KLRewardCoef}, {"--kl-coef", c.Algo.KLLossCoef}, {"--min-lr-ratio", c.Schedule.MinRatio},
		{"--lora-alpha", c.LoRA.Alpha}} {
		if math.IsNaN(n.v) || math.Abs(n.v) > math.MaxFloat32 {
			return fmt.Errorf("%s %g does not fit the float32 the trainer computes in (at most %.3g)", n.flag, n.v, math.MaxFloat32)
		}
	}
	loss, err := LookupLoss(c.Loss)
	if err != nil {
		return fmt.Errorf("--loss: %w", err)
	}
	lr := c.Opt.LR
	switch {
	case lr < 0:
		return fmt.Errorf("--lr must not be negative, got %g", lr)
	case c.LoRA.Rank > 0 && lr*c.LoRA.Alpha/float64(c.LoRA.Rank) > 1:
		return fmt.Errorf("--lr %g x LoRA alpha/rank %g/%d is %.3g: a step would move the adapted weights by about that much; it must be at most 1 (lower --lr or --lora-alpha)",
			lr, c.LoRA.Alpha, c.LoRA.Rank, lr*c.LoRA.Alpha/float64(c.LoRA.Rank))
	case loss.weightClip && !(c.ClipLow >= 0 && c.ClipLow <= 1):
		return fmt.Errorf("--clip-low must be in [0, 1] (1: no lower bound), got %g", c.ClipLow)
	case !loss.weightClip && !(c.ClipLow >= 0 && c.ClipLow < 1):
		return fmt.Errorf("--clip-low must be in [0, 1), got %g", c.ClipLow)
	case c.ClipHigh < 0:
		return fmt.Errorf("--clip-high must not be negative, got %g", c.ClipHigh)
	case c.ClipC != 0 && loss.ClipC == 0:
		return fmt.Errorf("--clip-c is PPO's dual clip; --loss %s has none", loss.Loss)
	case c.ClipC != 0 && c.ClipC <= 1:
		return fmt.Errorf("--clip-c must be more than 1 (0 = off), got %g", c.ClipC)
	}
	if err := c.Agg.Check(); err != nil {
		return fmt.Errorf("--loss-agg: %w", err)
	}
	return nil
}
