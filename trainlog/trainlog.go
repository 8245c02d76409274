// Package trainlog is the metrics log of a training run (RUN/metrics.jsonl): one line per
// step, agent and turn, plus validation lines. The trainer writes it; reports read it.
package trainlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/uncertainty"
)

// File is the metrics log's name inside a run directory.
const File = "metrics.jsonl"

// Line kinds.
const (
	KindTrain = "train"
	KindVal   = "val"
)

// StepMetrics is one metrics line: one agent at one turn of one step.
type StepMetrics struct {
	Kind  string `json:"kind"` // KindTrain
	Step  int    `json:"step"`
	Agent int    `json:"agent"`
	Name  string `json:"name"`
	Turn  int    `json:"turn"`
	// Accuracy is the agent's own correctness; Team the team reward it was given.
	Accuracy  float64 `json:"accuracy"`
	Team      float64 `json:"team_reward"`
	Influence float64 `json:"influence"`
	Score     float64 `json:"score"`
	Advantage Stats   `json:"advantage"`
	Weight    Stats   `json:"nll_weight"`
	// KL is the mean per-token k1 KL to the reference; Entropy and NLL come from the
	// recomputed (pre-update) log-probs at the sampling temperature.
	KL            float64 `json:"kl"`
	Entropy       float64 `json:"entropy"`
	NLL           float64 `json:"nll"`
	PGLoss        float64 `json:"pg_loss"`
	ClipFrac      float64 `json:"clip_frac"`
	ClipFracLower float64 `json:"clip_frac_lower"`
	PPOKL         float64 `json:"ppo_kl"`
	GradNorm      float64 `json:"grad_norm"`
	OptimSteps    int     `json:"optim_steps"`
	SkippedSteps  int64   `json:"skipped_steps"` // non-finite gradient norms so far
	LR            float64 `json:"lr"`            // learning rate of this step's updates
	// Groups is the number of GRPO groups (problems) this agent and turn trained on;
	// DroppedGroups were left out by dynamic sampling (all rewards equal) and
	// Overlong responses were truncated and masked out of the loss by overlong filtering.
	Groups        int `json:"groups"`
	DroppedGroups int `json:"dropped_groups"`
	Overlong      int `json:"overlong"`
	// RolledOut is the number of problems the step debated (more than the batch when
	// dynamic sampling refilled it).
	RolledOut int `json:"rolled_out"`
	// ISWeight is the truncated importance-sampling weight min(exp(trainer - rollout
	// log-prob), cap) over tokens, when truncated IS is on.
	ISWeight Stats `json:"is_weight"`
	// LogpGap is mean |rollout log-prob - trainer log-prob|; at turn 0 it is the numeric
	// gap, at later turns it also holds the earlier turns' updates.
	LogpGap float64 `json:"logp_gap"`
	// LogpGapMax is the largest |rollout - trainer log-prob| of a token, and RolloutKL the
	// k3 estimate of KL(rollout || trainer) per token, exp(d) - 1 - d with d = trainer -
	// rollout log-prob: how far the rollout weights' dtype and staleness move the policy.
	LogpGapMax float64 `json:"logp_gap_max"`
	RolloutKL  float64 `json:"rollout_kl"`
	// ProbeGap is llama.cpp vs the plugin on the fixed probe after this step's sync.
	ProbeGap            float64 `json:"probe_gap"`
	Tokens              int     `json:"tokens"`
	PromptTokens        int     `json:"prompt_tokens"` // prompt lengths summed over those responses: log-probs and update run over both
	RolloutTokensPerSec float64 `json:"rollout_tokens_per_s"`
	Times               Times   `json:"seconds"`
	// Verifier counts this agent and turn's rewards that went to the verifier model (a
	// robust+verifier run only; absent otherwise).
	Verifier *VerifierCounts `json:"verifier,omitempty"`
}

// VerifierCounts are the responses of one agent and turn whose answers robust did not
// decide: those the verifier model decided (Equal of them correct), those whose output
// named no verdict, and those its time budget skipped.
type VerifierCounts struct {
	Decided   int `json:"decided"`
	Equal     int `json:"equal"`
	Undecided int `json:"undecided"`
	Skipped   int `json:"skipped"`
}

// Times are where a step's time went, in seconds. Rollout and Step are the step's
// (repeated on each of its lines); Sync is this agent's weight sync (the same on its
// lines of the step); LogProbs, Reference and Update are this agent and turn's.
type Times struct {
	Rollout   float64 `json:"rollout"`
	LogProbs  float64 `json:"logprobs"`
	Reference float64 `json:"reference"`
	Update    float64 `json:"update"`
	Sync      float64 `json:"sync"`
	Step      float64 `json:"step"`
	// Comm is the time this agent and turn's log-probs, reference and update spent in
	// the collectives that move model state (multi-process runs; part of those three): the
	// gradient sums and the sharded stages' gathers; CommBytes is what this rank handed
	// them.
	Comm      float64 `json:"comm,omitempty"`
	CommBytes int64   `json:"comm_bytes,omitempty"`
	// Overlapped: the step's rollout ran beside the previous step's update (--overlap 1), so
	// the phases sum to more than the step.
	Overlapped bool `json:"overlapped,omitempty"`
}

// ValMetrics is one validation line: Accuracy[agent][turn].
type ValMetrics struct {
	Kind     string      `json:"kind"` // KindVal
	Step     int         `json:"step"`
	Problems int         `json:"problems"`
	Accuracy [][]float64 `json:"accuracy"`
	// Summary is the validation debate summarised as `umad debate` does (accuracy,
	// majority vote, TU = EU + AU, token statistics per agent and turn, and System rows).
	Summary *uncertainty.Summary `json:"summary,omitempty"`
	Seconds float64              `json:"seconds"`
}

// Stats summarises a set of values.
type Stats struct {
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// Log appends JSONL lines, syncing each, so a crash loses at most the line being written.
type Log struct{ f *os.File }

// Open opens a run's metrics for appending after step, first dropping lines of later
// steps (written after the checkpoint a crash fell back to) and a torn last line, so the
// log holds each step once.
func Open(path string, step int) (*Log, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(old))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var l struct {
			Step *int `json:"step"`
		}
		// A torn last line (a crash mid-write) fails to parse and is dropped.
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Step == nil || *l.Step > step {
			continue
		}
		kept.Write(sc.Bytes())
		kept.WriteByte('\n')
	}
	if err := atomicfile.WriteBytes(path, kept.Bytes()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &Log{f: f}, nil
}

// Append writes one line.
func (m *Log) Append(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if _, err := m.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return m.f.Sync()
}

// Close closes the log.
func (m *Log) Close() error { return m.f.Close() }

// Read returns a run's training and validation lines in file order. A torn last line (a
// run killed mid-write) is ignored; any other bad line is an error.
func Read(path string) (train []StepMetrics, val []ValMetrics, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	lines := bytes.Split(b, []byte{'\n'})
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var kind struct{ Kind string }
		if err := json.Unmarshal(l, &kind); err != nil {
			if i == len(lines)-1 {
				break // torn last line
			}
			return nil, nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		switch kind.Kind {
		case KindVal:
			var v ValMetrics
			err = json.Unmarshal(l, &v)
			val = append(val, v)
		case KindTrain:
			var s StepMetrics
			err = json.Unmarshal(l, &s)
			train = append(train, s)
		default:
			err = fmt.Errorf("unknown kind %q", kind.Kind)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
	}
	return train, val, nil
}
