package run

// A training run's request: its typed value before it resolves (TrainRequest), one field
// per setting as `umad train`'s flags give it, and its settings by key (trainKeys), which
// those flags, an experiment's training cells and `umad bench train` all set.

import (
	"io"
	"strings"
	"time"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/trainspec"
)

// TrainRequest is a training run as its flags or an experiment cell give it, typed: umad's
// defaults (NewTrainRequest), then the settings given, key by key (Keys). Start resolves
// and runs it.
type TrainRequest struct {
	// The agents, the algorithm and the problems.
	Agents                          []string
	Algo, Recipe, Data              string
	Synthetic, ValSynthetic         int
	ValData                         string
	ValLimit                        int
	ValTemperature                  float64
	ValTurns                        int
	Synth                           data.SyntheticConfig // the built-in problems' difficulty (Task as given)
	SynthSeed                       uint64
	Steps, Epochs, Batch, G, Turns  int
	MiniBatch                       int
	LR, WeightDecay, GradClip       float64
	Loss, LossAgg                   string
	ClipLow, ClipHigh, ClipC        float64
	Team, Influence                 string
	Eta, NLLAlpha, KLCoef           float64
	KLInLoss, DrGRPO                bool
	DynamicSampling, OverlongFilter bool
	MaxGenBatches                   int
	TISCap                          float64
	LRSchedule                      string
	WarmupSteps                     int
	MinLRRatio                      float64
	// Grading, validation, checkpoints, the weight sync and the run directory.
	Reward, VerifierPrompt           string
	VerifierBudget                   time.Duration
	Robust                           bool
	ValEvery, ValK, SaveEvery, Keep  int
	KeepRollouts                     int
	Sync                             string
	Overlap                          int
	RolloutDType                     string
	ProbeTol                         float64
	PromptLimit, Slots               int
	Out                              string
	Resume, Deterministic            bool
	Agent                            DebateAgent // every agent's sampling and response length unless its --agent sets them
	Seed                             uint64
	NoMask, FullHistory, Anonymise   bool
	Threads, GPULayers, Ctx          int
	Devices, KVType, FlashAttn       string
	TorchThreads                     int
	TorchPlugin, TrainDevice, DType  string
	GradCheckpoint                   bool
	DryRun, NoMemoryCheck            bool
	MemoryBudget                     string
	NProc, NNodes, NodeRank          int
	MasterAddr, DistBackend          string
	MasterPort                       int
	DistTimeout                      time.Duration
	Shard                            int
	AgentRanks, Offload, LoRATargets string
	LoRARank                         int
	LoRAAlpha, LoRADropout           float64
	LoRABF16Base                     bool

	// Hub resolves an agent's HF directory or hub id (nil: paths only).
	Hub HubDir
	// Command is the settings that made the run, recorded in config.json as "command" for
	// --config (nil: none recorded). RankCommand is the command line (after "umad") the
	// ranks of a multi-process run run (nil: this process's own).
	Command     map[string]any
	RankCommand []string
	// Stdout gets the run's results (and a dry run's plan), Stderr its notes.
	Stdout, Stderr io.Writer
	// given names the settings given (or set by the recipe), by key.
	given map[string]bool
}

// NewTrainRequest is a training run with umad's defaults (DefaultTrainSettings) and
// nothing given.
func NewTrainRequest() *TrainRequest {
	d := DefaultTrainSettings()
	t := d.Trainer
	synth := data.DefaultSynthetic
	synth.Task = data.TaskArithmetic
	return &TrainRequest{Algo: DefaultAlgo, Synthetic: d.Synthetic, ValSynthetic: d.ValProblems, ValTemperature: *t.ValTemperature,
		Synth: synth, SynthSeed: d.SynthSeed, Epochs: DefaultEpochs, Batch: t.BatchSize, G: t.G, Turns: t.Turns,
		MiniBatch: t.MiniBatch, LR: t.Opt.LR, WeightDecay: t.Opt.WeightDecay, GradClip: t.Opt.MaxGradNorm, Loss: string(t.Loss),
		MaxGenBatches: t.MaxGenBatches, LRSchedule: t.Schedule.Kind, Reward: string(t.Reward), ValEvery: t.ValEvery, ValK: t.ValK,
		SaveEvery: t.SaveEvery, Keep: t.KeepLast, KeepRollouts: t.KeepRollouts, Sync: string(t.Sync), ProbeTol: t.ProbeTol,
		PromptLimit: t.PromptLimit, Slots: DefaultSlots, Agent: DefaultAgent, Seed: t.Seed, KVType: d.KVType, FlashAttn: d.FlashAttn,
		Ctx: DefaultCtx, TrainDevice: trainspec.DeviceAuto, DType: string(t.DType), NProc: 1, NNodes: 1, MasterAddr: DefaultMasterAddr,
		MasterPort: DefaultMasterPort, DistTimeout: DefaultDistTimeout, DistBackend: DefaultDistBackend,
		LoRATargets: strings.Join(trainspec.LoRATargets, ","), given: map[string]bool{}}
}

// Keys are the request's settings by key, to set it by.
func (r *TrainRequest) Keys() Keys { return typed[tr]{keys: trainKeys, value: r, given: r.given} }

// tr is TrainRequest, short for the table below.
type tr = TrainRequest

// trainKeys are a training run's settings by key: umad train's flags by name.
var trainKeys = keys[tr]{
	"agent":            listKey(func(r *tr) *[]string { return &r.Agents }),
	"algo":             textKey(func(r *tr) *string { return &r.Algo }),
	"recipe":           textKey(func(r *tr) *string { return &r.Recipe }),
	"data":             textKey(func(r *tr) *string { return &r.Data }),
	"synthetic":        intKey(func(r *tr) *int { return &r.Synthetic }),
	"val-synthetic":    intKey(func(r *tr) *int { return &r.ValSynthetic }),
	"val-data":         textKey(func(r *tr) *string { return &r.ValData }),
	"val-limit":        intKey(func(r *tr) *int { return &r.ValLimit }),
	"val-temperature":  floatKey(func(r *tr) *float64 { return &r.ValTemperature }),
	"val-turns":        intKey(func(r *tr) *int { return &r.ValTurns }),
	"steps":            intKey(func(r *tr) *int { return &r.Steps }),
	"epochs":           intKey(func(r *tr) *int { return &r.Epochs }),
	"batch":            intKey(func(r *tr) *int { return &r.Batch }),
	"g":                intKey(func(r *tr) *int { return &r.G }),
	"turns":            intKey(func(r *tr) *int { return &r.Turns }),
	"mini-batch":       intKey(func(r *tr) *int { return &r.MiniBatch }),
	"lr":               floatKey(func(r *tr) *float64 { return &r.LR }),
	"weight-decay":     floatKey(func(r *tr) *float64 { return &r.WeightDecay }),
	"grad-clip":        floatKey(func(r *tr) *float64 { return &r.GradClip }),
	"loss":             textKey(func(r *tr) *string { return &r.Loss }),
	"clip-low":         floatKey(func(r *tr) *float64 { return &r.ClipLow }),
	"clip-high":        floatKey(func(r *tr) *float64 { return &r.ClipHigh }),
	"clip-c":           floatKey(func(r *tr) *float64 { return &r.ClipC }),
	"loss-agg":         textKey(func(r *tr) *string { return &r.LossAgg }),
	"team":             textKey(func(r *tr) *string { return &r.Team }),
	"influence":        textKey(func(r *tr) *string { return &r.Influence }),
	"eta":              floatKey(func(r *tr) *float64 { return &r.Eta }),
	"nll-alpha":        floatKey(func(r *tr) *float64 { return &r.NLLAlpha }),
	"kl-coef":          floatKey(func(r *tr) *float64 { return &r.KLCoef }),
	"kl-in-loss":       boolKey(func(r *tr) *bool { return &r.KLInLoss }),
	"dr-grpo":          boolKey(func(r *tr) *bool { return &r.DrGRPO }),
	"dynamic-sampling": boolKey(func(r *tr) *bool { return &r.DynamicSampling }),
	"max-gen-batches":  intKey(func(r *tr) *int { return &r.MaxGenBatches }),
	"overlong-filter":  boolKey(func(r *tr) *bool { return &r.OverlongFilter }),
	"tis-cap":          floatKey(func(r *tr) *float64 { return &r.TISCap }),
	"lr-schedule":      textKey(func(r *tr) *string { return &r.LRSchedule }),
	"warmup-steps":     intKey(func(r *tr) *int { return &r.WarmupSteps }),
	"min-lr-ratio":     floatKey(func(r *tr) *float64 { return &r.MinLRRatio }),
	"reward":           textKey(func(r *tr) *string { return &r.Reward }),
	"verifier-prompt":  textKey(func(r *tr) *string { return &r.VerifierPrompt }),
	"verifier-budget":  durationKey(func(r *tr) *time.Duration { return &r.VerifierBudget }),
	"robust":           boolKey(func(r *tr) *bool { return &r.Robust }),
	"val-every":        intKey(func(r *tr) *int { return &r.ValEvery }),
	"val-k":            intKey(func(r *tr) *int { return &r.ValK }),
	"save-every":       intKey(func(r *tr) *int { return &r.SaveEvery }),
	"keep":             intKey(func(r *tr) *int { return &r.Keep }),
	"keep-rollouts":    intKey(func(r *tr) *int { return &r.KeepRollouts }),
	"sync":             textKey(func(r *tr) *string { return &r.Sync }),
	"overlap":          intKey(func(r *tr) *int { return &r.Overlap }),
	"rollout-dtype":    textKey(func(r *tr) *string { return &r.RolloutDType }),
	"probe-tol":        floatKey(func(r *tr) *float64 { return &r.ProbeTol }),
	"prompt-limit":     intKey(func(r *tr) *int { return &r.PromptLimit }),
	"slots":            intKey(func(r *tr) *int { return &r.Slots }),
	"out":              textKey(func(r *tr) *string { return &r.Out }),
	"resume":           boolKey(func(r *tr) *bool { return &r.Resume }),
	"deterministic":    boolKey(func(r *tr) *bool { return &r.Deterministic }),
	"temperature":      floatKey(func(r *tr) *float64 { return &r.Agent.Params.Temperature }),
	"top-p":            floatKey(func(r *tr) *float64 { return &r.Agent.Params.TopP }),
	"top-k":            intKey(func(r *tr) *int { return &r.Agent.Params.TopK }),
	"min-p":            floatKey(func(r *tr) *float64 { return &r.Agent.Params.MinP }),
	"max-tokens":       intKey(func(r *tr) *int { return &r.Agent.MaxTokens }),
	"seed":             uintKey(func(r *tr) *uint64 { return &r.Seed }),
	"threads":          intKey(func(r *tr) *int { return &r.Threads }),
	"gpu-layers":       intKey(func(r *tr) *int { return &r.GPULayers }),
	"devices":          textKey(func(r *tr) *string { return &r.Devices }),
	"kv-type":          textKey(func(r *tr) *string { return &r.KVType }),
	"flash-attn":       textKey(func(r *tr) *string { return &r.FlashAttn }),
	"ctx":              intKey(func(r *tr) *int { return &r.Ctx }),
	"no-mask":          boolKey(func(r *tr) *bool { return &r.NoMask }),
	"full-history":     boolKey(func(r *tr) *bool { return &r.FullHistory }),
	"anonymise":        boolKey(func(r *tr) *bool { return &r.Anonymise }),
	"synthetic-terms":  intKey(func(r *tr) *int { return &r.Synth.Terms }),
	"synthetic-max":    intKey(func(r *tr) *int { return &r.Synth.MaxOperand }),
	"synthetic-ops":    textKey(func(r *tr) *string { return &r.Synth.Ops }),
	"synthetic-seed":   uintKey(func(r *tr) *uint64 { return &r.SynthSeed }),
	"synthetic-task":   textKey(func(r *tr) *string { return &r.Synth.Task }),
	"torch-threads":    intKey(func(r *tr) *int { return &r.TorchThreads }),
	"torch-plugin":     textKey(func(r *tr) *string { return &r.TorchPlugin }),
	"train-device":     textKey(func(r *tr) *string { return &r.TrainDevice }),
	"dtype":            textKey(func(r *tr) *string { return &r.DType }),
	"grad-checkpoint":  boolKey(func(r *tr) *bool { return &r.GradCheckpoint }),
	"dry-run":          boolKey(func(r *tr) *bool { return &r.DryRun }),
	"no-memory-check":  boolKey(func(r *tr) *bool { return &r.NoMemoryCheck }),
	"memory-budget":    textKey(func(r *tr) *string { return &r.MemoryBudget }),
	"nproc":            intKey(func(r *tr) *int { return &r.NProc }),
	"nnodes":           intKey(func(r *tr) *int { return &r.NNodes }),
	"node-rank":        intKey(func(r *tr) *int { return &r.NodeRank }),
	"master-addr":      textKey(func(r *tr) *string { return &r.MasterAddr }),
	"master-port":      intKey(func(r *tr) *int { return &r.MasterPort }),
	"dist-timeout":     durationKey(func(r *tr) *time.Duration { return &r.DistTimeout }),
	"dist-backend":     textKey(func(r *tr) *string { return &r.DistBackend }),
	"shard":            intKey(func(r *tr) *int { return &r.Shard }),
	"agent-ranks":      textKey(func(r *tr) *string { return &r.AgentRanks }),
	"offload":          textKey(func(r *tr) *string { return &r.Offload }),
	"lora-rank":        intKey(func(r *tr) *int { return &r.LoRARank }),
	"lora-alpha":       floatKey(func(r *tr) *float64 { return &r.LoRAAlpha }),
	"lora-targets":     textKey(func(r *tr) *string { return &r.LoRATargets }),
	"lora-dropout":     floatKey(func(r *tr) *float64 { return &r.LoRADropout }),
	"lora-bf16-base":   boolKey(func(r *tr) *bool { return &r.LoRABF16Base }),
}
