package debate

// Package debate is the debate protocol: N agents, T turns, K trajectories per problem
// (or, under the probe protocol, K samples per agent and turn from one context), with
// problems pipelined so every agent's generator keeps its slots busy while other problems
// wait for their peers (spec/UMAD-reference.md section 1), each sample graded as it
// returns. This file holds its configuration, records and entry point; scheduler.go runs
// it, prompt.go builds its prompts, promptfloor.go checks a prompt limit before a run.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/sampler"
)

// Generator is what the debate needs of a model: *engine.Engine (llama.cpp), or a
// deterministic fake in the protocol's tests. Agents holding the same Generator value
// share it, so its dynamic type must be comparable (a pointer).
type Generator interface {
	// Serve generates the requests pushed to q, calling emit with each result, until q
	// is closed and drained or ctx ends; requests may be pushed while it serves. A
	// generator consumes q through its exported side (Pop, Ready, Drained, and on a
	// stepped queue AwaitStep and EndStep), so it may live in any package.
	Serve(ctx context.Context, q *engine.Queue, emit func(engine.Result)) error
	// Tokenize turns a rendered chat prompt into ids, special tokens parsed, none added.
	Tokenize(text string) ([]int32, error)
	// Detokenize turns generated ids into text without special tokens.
	Detokenize(tokens []int32) (string, error)
	SeqContext() int // most tokens per sequence, prompt plus response
	Slots() int      // sequences generated at once
}

// The debate reaches llama.cpp through Generator.
var _ Generator = (*engine.Engine)(nil)

// Agent is one debater. Agents may share a Generator (the same model).
type Agent struct {
	Name      string
	Generator Generator
	Format    chat.Format
	Params    sampler.Params
	MaxTokens int
	Seed      uint64
}

// Protocol is how a debate's K samples per agent and turn relate to its turns.
type Protocol string

const (
	// Trajectories is the UMAD reference's protocol: K debates per problem, paired by
	// index; at turns after the first, the K samples come from K different contexts.
	Trajectories Protocol = "trajectories"
	// Probe is the paper's Algorithm 1: one debate per problem. At each turn every agent
	// draws K samples (the probes, which give the turn's answer distributions) and one
	// continuation from the same context; the continuations alone build the next turn's
	// messages.
	Probe Protocol = "probe"
)

// Protocols are the debate protocols, the default first.
var Protocols = []Protocol{Trajectories, Probe}

// Config describes a debate evaluation.
type Config struct {
	Agents []Agent
	Turns  int // T: turn 0 plus T-1 debate rounds
	K      int // trajectories per problem; under Probe, samples per agent and turn
	// Protocol is Trajectories when empty.
	Protocol Protocol
	// GreedyContinuation makes Probe's continuations greedy (temperature 0) instead of
	// sampled with the agent's settings.
	GreedyContinuation bool
	Prompt             Prompt
	// PromptLimit is the most prompt tokens an agent gets (the reference's 5120); debate
	// prompts over it are shortened by trimming the peers' reasoning from the left.
	PromptLimit int
	// StopAgree ends a trajectory's debate once all agents gave the same answer for this
	// many consecutive turns (0 = off); its last answers are carried to later turns.
	StopAgree int
	// StopEU ends a problem's debate once the epistemic uncertainty of its answers at a
	// turn, as EU computes it, is below this (0 = off).
	StopEU float64
	// EU computes the epistemic uncertainty of one turn's verdicts, byAgent[a][k]; StopEU
	// needs it. The caller supplies uncertainty.TurnEU: the metrics package sits beside
	// the debate, not below it.
	EU func(byAgent [][]grade.Verdict) (float64, error)
	// InFlight is the most problems debated at once (0 = enough to keep every slot busy).
	InFlight int
	Extract  grade.ExtractOptions
	// Deterministic runs the generators on a step clock (scheduler.runStepped), so the
	// same seed gives the same bytes whatever the timing: llama.cpp's logits move in their
	// last bits with the batch a sequence is decoded in (bench/RESULTS.md, determinism).
	Deterministic bool
}

// AgentTurn is one agent's response in one trajectory at one turn.
type AgentTurn struct {
	Prompt string `json:"prompt"` // the user message
	// PromptTokens are the ids the engine decoded: the message rendered with the agent's
	// chat format (what a trainer scores the response after).
	PromptTokens []int32   `json:"prompt_tokens"`
	Trimmed      bool      `json:"trimmed,omitempty"`
	Text         string    `json:"text"`
	Tokens       []int32   `json:"tokens"`
	LogProbs     []float32 `json:"logprobs"`
	Entropies    []float32 `json:"entropies"`
	// KeptMass is the sample's top-k/top-p kept mass per token (see engine.Sample.KeptMass);
	// absent when sampling cut nothing.
	KeptMass []float32     `json:"kept_mass,omitempty"`
	Finish   engine.Finish `json:"finish"`
	// Answer is the extracted final answer, nil for no answer.
	Answer *string       `json:"answer"`
	Grade  grade.Verdict `json:"grade"`
	// Carried marks a turn not generated: adaptive stopping carried the previous one.
	Carried bool `json:"carried,omitempty"`
}

// Record is everything one problem's debate produced.
type Record struct {
	Index   int          `json:"index"` // position in the problem list
	Problem data.Problem `json:"problem"`
	// Turns[t][a][k] is agent a's response in trajectory k at turn t; under the probe
	// protocol, its k-th probe sample at turn t.
	Turns [][][]AgentTurn `json:"turns"`
	// Continuations[t][a] is, under the probe protocol only, agent a's response at turn t
	// that the next turn's messages show (drawn from the probes' context).
	Continuations [][]AgentTurn `json:"continuations,omitempty"`
}

// Verdicts returns the record's verdicts agent by agent, [agent][turn][k]: the Answers
// of an uncertainty.ProblemRecord, which callers build from it (this package does not
// import uncertainty).
func (r Record) Verdicts() [][][]grade.Verdict {
	if len(r.Turns) == 0 {
		return nil
	}
	out := make([][][]grade.Verdict, len(r.Turns[0]))
	for a := range out {
		out[a] = make([][]grade.Verdict, len(r.Turns))
	}
	for t, turn := range r.Turns {
		for a, v := range verdicts(turn) {
			out[a][t] = v
		}
	}
	return out
}

// verdicts are one turn's verdicts, [agent][k].
func verdicts(turn [][]AgentTurn) [][]grade.Verdict {
	out := make([][]grade.Verdict, len(turn))
	for a, byTraj := range turn {
		for _, at := range byTraj {
			out[a] = append(out[a], at.Grade)
		}
	}
	return out
}

// Stats count a run's work.
type Stats struct {
	Problems        int // debated to the end
	SkippedOverlong int // problems whose turn-0 prompt exceeds the prompt limit
	Generations     int // agent responses generated
	Carried         int // agent responses carried forward by adaptive stopping
	Trimmed         int // debate prompts shortened to fit the prompt limit
	GeneratedTokens int64
}

// ProblemKey is the number that, with the agent, turn and trajectory, names every
// random stream of a problem's debate; it depends on the problem alone.
func ProblemKey(p data.Problem) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p.Dataset + "\x00" + p.ID))
	return h.Sum64()
}

// Run runs the debates of the problems not skipped (skip may be nil) and calls done
// with each finished problem's record, from the calling goroutine; an error from done
// stops the run. Problems finish in any order; the records are identical whatever the
// order, since every sample draws from its own random stream.
func Run(ctx context.Context, cfg Config, problems []data.Problem, skip func(i int) bool, done func(Record) error) (Stats, error) {
	if err := cfg.check(); err != nil {
		return Stats{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newScheduler(&cfg, problems, skip, done)
	s.serve(ctx)
	err := s.run(ctx)
	if err != nil {
		cancel()
	}
	return s.stats, s.stop(ctx, err)
}

func (cfg *Config) check() error {
	if cfg.Protocol == "" {
		cfg.Protocol = Trajectories
	}
	switch {
	case len(cfg.Agents) == 0:
		return errors.New("debate: no agents")
	case cfg.Turns < 1:
		return fmt.Errorf("debate: turns must be at least 1, got %d", cfg.Turns)
	case cfg.K < 1:
		return fmt.Errorf("debate: K must be at least 1, got %d", cfg.K)
	case !slices.Contains(Protocols, cfg.Protocol):
		return fmt.Errorf("debate: unknown protocol %q; the protocols are %v", cfg.Protocol, Protocols)
	case cfg.Protocol == Probe && cfg.K < 2:
		return fmt.Errorf("debate: the probe protocol estimates each turn's answer distributions from K samples; K must be at least 2, got %d", cfg.K)
	case cfg.StopAgree < 0 || cfg.StopEU < 0:
		return errors.New("debate: stopping thresholds must not be negative")
	case cfg.StopEU > 0 && cfg.EU == nil:
		return errors.New("debate: stopping by EU needs an EU function")
	}
	if cfg.PromptLimit == 0 {
		cfg.PromptLimit = 5120
	}
	for i, a := range cfg.Agents {
		if a.Generator == nil {
			return fmt.Errorf("debate: agent %d has no generator", i)
		}
		if a.MaxTokens < 1 {
			return fmt.Errorf("debate: agent %d: max tokens must be at least 1", i)
		}
		if err := a.Params.Validate(); err != nil {
			return fmt.Errorf("debate: agent %d: %w", i, err)
		}
		seqCtx := a.Generator.SeqContext()
		if room := seqCtx - a.MaxTokens; room < 1 {
			return fmt.Errorf("debate: agent %d: max tokens %d leave no room for a prompt in the context of %d", i, a.MaxTokens, seqCtx)
		} else if cfg.PromptLimit > room {
			return fmt.Errorf("debate: agent %d: prompt limit %d plus max tokens %d exceed the context of %d tokens per sequence",
				i, cfg.PromptLimit, a.MaxTokens, seqCtx)
		}
	}
	return nil
}
