// Package memplan computes, before anything loads, how much memory a training run takes:
// per agent the trainer's weights, gradients, AdamW state, reference model and activations,
// llama.cpp's weights, KV cache and compute buffers, and the transient copies of the weight
// sync and the checkpoints. A run that cannot fit is refused with the table and the change
// that helps most, instead of dying out of memory after minutes of loading.
//
// The formulas follow what the code allocates today (kernels/, trainer,
// cgo/llama); the KV cache uses the formula cgo/llama checks against (internal/sysmem).
// It is pure Go.
package memplan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/trainspec"
)

// DType is the trainer's precision, as --dtype names it; "" means F32.
type DType = trainspec.Precision

// The trainer's precisions.
const (
	F32  = trainspec.PrecisionF32
	BF16 = trainspec.PrecisionBF16
)

// computeBytes is the width of a value d computes in.
func computeBytes(d DType) int64 {
	if d == BF16 {
		return 2
	}
	return 4
}

// LoRA is low-rank fine-tuning: rank-Rank adapters (fp32, with fp32 AdamW state) on the
// Targets projections of every layer; the base stays frozen, held in BaseDType, and is
// also the reference model, which then costs nothing extra. Rank 0 is full fine-tuning.
type LoRA struct {
	Rank      int
	Targets   []string // of trainspec.LoRATargets; empty means all of them
	BaseDType DType    // "" means the trainer's DType; bf16 whenever the trainer's is
}

// Agent is what one agent's run needs from memory.
type Agent struct {
	Name  string
	Shape model.Shape
	// The trainer.
	DType DType
	LoRA  LoRA
	// ModelPlacement is the trainer's device (a GPU, --train-device cuda:N: device memory),
	// per-layer activation checkpointing, and the AdamW moments in host memory.
	trainspec.ModelPlacement
	// FusedAttention is libtorch 2.x's scaled_dot_product_attention, which keeps no L x L
	// scores; libtorch 1.x materialises them.
	FusedAttention bool
	// A micro-batch is one GRPO group: MicroBatchSeqs sequences of at most PromptTokens +
	// ResponseTokens, packed into one forward and backward.
	MicroBatchSeqs int
	PromptTokens   int
	ResponseTokens int
	// The rollout engine.
	RolloutType gguf.GGMLType // GGUF matrices llama.cpp runs (the sync writes F32 today)
	// FileSync is --sync file: each sync loads a new GGUF before the old model is closed.
	// The default in-place sync writes into the loaded model and needs no second copy.
	FileSync bool
	Slots    int
	// SeqContext is the tokens per sequence (KV cells per slot before padding); 0 is
	// PromptTokens + ResponseTokens, as the trainer sets it when --ctx is not given.
	SeqContext int
	KVType     string // f16, f32 or q8_0
	GPULayers  int    // > 0: llama.cpp's weights and KV cache in device memory
	// A rank of a multi-process run (parallel.go): the ranks that share this agent's
	// training state, the ZeRO stage that shards it over them, and a rank that only serves
	// the agent's rollouts (its training state lives on another group of ranks). The zero
	// values are one process holding everything.
	ShardRanks  int
	Shard       int
	RolloutOnly bool
}

// Budget is the memory a run may use: Host is MemAvailable, Device the GPU memory; 0 is
// unknown, which is not checked.
type Budget struct {
	Host, Device int64
}

// Line is one item of an agent's plan.
type Line struct {
	Name  string
	Bytes int64
	// Phases are the transient phases the memory is held in; none means all run long. An
	// agent's phases come one at a time, and one agent at a time.
	Phases []string
	Device bool
}

// Phases of an agent's step whose memory comes and goes.
const (
	PhaseStart      = "start"
	PhaseTrain      = "training"
	PhaseStep       = "optimizer step"
	PhaseSync       = "weight sync"
	PhaseCheckpoint = "checkpoint"
)

// AgentPlan is one agent's lines.
type AgentPlan struct {
	Agent Agent
	Lines []Line
}

// Plan is a run's memory: each agent's lines plus the process itself.
type Plan struct {
	Agents []AgentPlan
	// Baseline is the process before any model: Go, libtorch and llama.cpp code and data.
	Baseline int64
}

// Baseline is umad's peak RSS on a model of a few hundred kilobytes (umad train --steps 1,
// 1-2 threads): the Go runtime, libtorch with its BLAS and OpenMP, and llama.cpp, measured
// at 228-234 MiB; rounded up. A CUDA libtorch adds its context on top.
const Baseline = 256 << 20

// New plans the agents of one run; they share the machine.
func New(agents []Agent) (*Plan, error) {
	if len(agents) == 0 {
		return nil, errors.New("memory plan: no agents")
	}
	p := &Plan{Baseline: Baseline}
	for i, a := range agents {
		if err := a.check(); err != nil {
			return nil, fmt.Errorf("memory plan: agent %d: %w", i, err)
		}
		lines, err := a.lines()
		if err != nil {
			return nil, fmt.Errorf("memory plan: agent %d: %w", i, err)
		}
		p.Agents = append(p.Agents, AgentPlan{Agent: a, Lines: lines})
	}
	return p, nil
}

// seqContext is the tokens per sequence.
func (a Agent) seqContext() int {
	if a.SeqContext == 0 {
		return a.PromptTokens + a.ResponseTokens
	}
	return a.SeqContext
}

func (a Agent) check() error {
	if err := a.Shape.Validate(); err != nil {
		return err
	}
	switch {
	case a.MicroBatchSeqs < 1 || a.PromptTokens < 1 || a.ResponseTokens < 1:
		return fmt.Errorf("micro-batch of %d sequences of %d + %d tokens: each must be at least 1", a.MicroBatchSeqs, a.PromptTokens, a.ResponseTokens)
	case a.Slots < 1 || a.SeqContext < 0:
		return fmt.Errorf("%d slots of %d tokens: each must be at least 1", a.Slots, a.seqContext())
	case a.LoRA.Rank < 0:
		return fmt.Errorf("LoRA rank %d is negative", a.LoRA.Rank)
	case a.Shard < 0 || a.Shard > 3:
		return fmt.Errorf("ZeRO stage %d (want 0 to 3)", a.Shard)
	case a.ShardRanks < 0:
		return fmt.Errorf("%d ranks share the training state", a.ShardRanks)
	}
	for _, d := range []DType{a.DType, a.LoRA.BaseDType} {
		if d != "" && d != F32 && d != BF16 {
			return fmt.Errorf("trainer dtype %q (want f32 or bf16)", d)
		}
	}
	for _, t := range a.LoRA.Targets {
		if !slices.Contains(trainspec.LoRATargets, t) {
			return fmt.Errorf("LoRA target %q (want some of %v)", t, trainspec.LoRATargets)
		}
	}
	if _, err := a.Shape.GGUFBytes(a.RolloutType); err != nil {
		return fmt.Errorf("rollout weights: %w", err)
	}
	if sysmem.ElemBytes(a.KVType) == 0 {
		return fmt.Errorf("KV-cache type %q (want f16, f32 or q8_0)", a.KVType)
	}
	return nil
}

func (a Agent) lines() ([]Line, error) {
	t := a.trainerLines()
	r, err := a.rolloutLines()
	if err != nil {
		return nil, err
	}
	return append(t, r...), nil
}

// steady is the memory an agent holds all run long, on the host or the device.
func (ap AgentPlan) steady(device bool) int64 {
	var n int64
	for _, l := range ap.Lines {
		if len(l.Phases) == 0 && l.Device == device {
			n += l.Bytes
		}
	}
	return n
}

// phase is the memory of one transient phase, on the host or the device.
func (ap AgentPlan) phase(name string, device bool) int64 {
	var n int64
	for _, l := range ap.Lines {
		if slices.Contains(l.Phases, name) && l.Device == device {
			n += l.Bytes
		}
	}
	return n
}

var phases = []string{PhaseStart, PhaseTrain, PhaseStep, PhaseSync, PhaseCheckpoint}

// Peak is the most memory the run holds at once, on the host or the device, and the
// agent and phase where that happens: every agent's steady memory plus the largest
// phase of any agent (agents learn and sync one after another).
func (p *Plan) Peak(device bool) (bytes int64, agent int, phase string) {
	var worst int64
	agent = -1
	for i, ap := range p.Agents {
		bytes += ap.steady(device)
		for _, ph := range phases {
			if n := ap.phase(ph, device); n > worst {
				worst, agent, phase = n, i, ph
			}
		}
	}
	if !device {
		bytes += p.Baseline
	}
	return bytes + worst, agent, phase
}

// Fits reports whether the plan's peaks are within the budget (unknown budgets pass).
func (p *Plan) Fits(b Budget) bool {
	host, _, _ := p.Peak(false)
	dev, _, _ := p.Peak(true)
	return (b.Host <= 0 || host <= b.Host) && (b.Device <= 0 || dev <= b.Device)
}
