package run

// A training run's defaults: its settings unless given (DefaultTrainSettings), which the
// flags show, and those that follow from other settings (the rollout dtype, the probe
// tolerance, the TIS cap).

import (
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainspec"
)

// The defaults of a training run outside its settings.
const (
	DefaultAlgo   = "umad"
	DefaultEpochs = 2 // passes over the problems, without a number of steps
	// A job of several machines meets at node 0's rendezvous store, and its collectives
	// run on gloo unless given.
	DefaultMasterAddr  = "127.0.0.1"
	DefaultMasterPort  = 29500
	DefaultDistBackend = "gloo"
)

// DefaultTrainSettings are a training run's settings unless given, agents aside: the
// algorithm and the policy loss with their own defaults, and validation at the paper's
// inference temperature. The rollout dtype, the probe tolerance and the TIS cap follow
// from other settings unless given (DefaultRolloutDType, DefaultProbeTol, DefaultTISCap).
func DefaultTrainSettings() TrainSettings {
	algo, _ := trainer.LookupAlgo(DefaultAlgo)
	loss, _ := trainer.LookupLoss(trainspec.LossPPO)
	valTemp := 0.6
	return TrainSettings{Synthetic: 256, SynthConfig: data.DefaultSynthetic, SynthSeed: 1, ValProblems: 64,
		KVType: DefaultKVType, FlashAttn: DefaultFlashAttn,
		Trainer: trainer.Settings{Algo: algo, BatchSize: 128, Turns: 2, G: 5, MiniBatch: 16,
			Opt:  trainspec.AdamW{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1},
			Loss: loss.Loss, ClipLow: loss.ClipLow, ClipHigh: loss.ClipHigh, ClipC: loss.ClipC, Agg: loss.Agg,
			Reward: grade.Strict, PromptLimit: DefaultPromptLimit, Seed: 1, ValEvery: 20, ValK: 1, SaveEvery: 40, KeepLast: 2,
			ProbeTol: ProbeTolF32, ValTemperature: &valTemp, DType: trainspec.PrecisionF32, Sync: trainer.SyncInPlace,
			RolloutDType: trainer.RolloutF32, KeepRollouts: 4, MaxGenBatches: 3, Schedule: trainer.Schedule{Kind: trainer.ScheduleConstant}}}
}

// The probe check's default tolerances. llama.cpp computes in f32 with the trainer's f32
// weights: they agree to ~1e-6 (f32) but differ by bf16 rounding at --dtype bf16.
const (
	ProbeTolF32  = 1e-4
	ProbeTolBF16 = 5e-2
)

// TISCap is the truncated importance sampling cap a run gets when its rollouts' policy is
// not the trainer's (verl's and prime-rl's usual 2).
const TISCap = 2

// DefaultRolloutDType is the rollout weights' type unless given: bf16 where llama.cpp
// decodes on a GPU (half the bytes, and tensor cores) or the trainer computes in bf16,
// else f32: on this project's AVX512-BF16 CPU bf16 decoded no faster and prefilled slower
// (bench/RESULTS.md, rollout dtype), and f32 keeps the rollout log-probs exact and the
// sync a copy.
func DefaultRolloutDType(gpuLayers int, dtype trainspec.Precision) trainer.RolloutDType {
	if gpuLayers > 0 || dtype == trainspec.PrecisionBF16 {
		return trainer.RolloutBF16
	}
	return trainer.RolloutF32
}

// DefaultProbeTol is the probe tolerance unless given: bf16's where either side rounds.
func DefaultProbeTol(dtype trainspec.Precision, rollout trainer.RolloutDType) float64 {
	if dtype == trainspec.PrecisionBF16 || rollout != trainer.RolloutF32 {
		return ProbeTolBF16
	}
	return ProbeTolF32
}

// DefaultTISCap is the TIS cap unless given: TISCap where the rollouts' policy is not the
// trainer's (another dtype, or one step behind with overlap 1), else 0 (off).
func DefaultTISCap(dtype trainspec.Precision, rollout trainer.RolloutDType, overlap int) float64 {
	if string(rollout) != string(dtype) || overlap == 1 {
		return TISCap
	}
	return 0
}
