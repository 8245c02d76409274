package trainer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/model"
)

// Run-directory layout.
const (
	MetricsFile    = "metrics.jsonl"
	CheckpointsDir = "checkpoints"
	// LatestFile names the newest complete checkpoint; it is written last, atomically, so
	// it never points at a partial one.
	LatestFile = "latest"
	stepPrefix = "step-"
)

// CheckpointState is state.json of a checkpoint.
type CheckpointState struct {
	Step   int `json:"step"`
	Agents int `json:"agents"`
}

type checkpointInfo struct {
	Dir  string
	Step int
}

func (c *checkpointInfo) agentDir(i int) string { return AgentCheckpointDir(c.Dir, i) }

// AgentCheckpointDir is agent i's HF directory inside a checkpoint; it also holds the
// agent's model.gguf, ready for `umad debate`.
func AgentCheckpointDir(ckpt string, i int) string {
	return filepath.Join(ckpt, fmt.Sprintf("agent-%d", i))
}

// LatestCheckpoint returns the newest complete checkpoint of a run directory, "" if none.
func LatestCheckpoint(run string) (string, error) {
	c, err := latestCheckpoint(run)
	if err != nil || c == nil {
		return "", err
	}
	return c.Dir, nil
}

func latestCheckpoint(run string) (*checkpointInfo, error) {
	root := filepath.Join(run, CheckpointsDir)
	b, err := os.ReadFile(filepath.Join(root, LatestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	name := strings.TrimSpace(string(b))
	dir := filepath.Join(root, name)
	sb, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("resume: the latest checkpoint %s is unreadable: %w", dir, err)
	}
	var st CheckpointState
	if err := json.Unmarshal(sb, &st); err != nil {
		return nil, fmt.Errorf("resume: %s: %w", filepath.Join(dir, "state.json"), err)
	}
	return &checkpointInfo{Dir: dir, Step: st.Step}, nil
}

// checkpoint saves every agent (weights, optimizer state, config, tokenizer and a GGUF)
// under checkpoints/step-N, built in a temporary directory and renamed into place, then
// points latest at it and removes all but the newest KeepLast.
func (t *Trainer) checkpoint() (err error) {
	root := filepath.Join(t.cfg.Out, CheckpointsDir)
	name := fmt.Sprintf("%s%06d", stepPrefix, t.step)
	final := filepath.Join(root, name)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	tmp, err := os.MkdirTemp(root, "."+name+".tmp")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
			err = fmt.Errorf("checkpoint step %d: %w", t.step, err)
		}
	}()
	for i, a := range t.agents {
		dir := AgentCheckpointDir(tmp, i)
		if err := a.actor.SaveHF(dir); err != nil {
			return err
		}
		if err := model.HFToGGUF(dir, filepath.Join(dir, "model.gguf"), model.HFToGGUFOptions{}); err != nil {
			return err
		}
	}
	st, err := json.MarshalIndent(CheckpointState{Step: t.step, Agents: len(t.agents)}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(tmp, "state.json"), append(st, '\n')); err != nil {
		return err
	}
	if err := os.RemoveAll(final); err != nil { // a stale one from a run that crashed after it
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(root, LatestFile), []byte(name+"\n")); err != nil {
		return err
	}
	return pruneCheckpoints(root, name, t.cfg.KeepLast)
}

// pruneCheckpoints removes temporary leftovers and all but the newest keep checkpoints;
// the latest one always stays.
func pruneCheckpoints(root, latest string, keep int) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	steps := map[int]string{}
	for _, e := range entries {
		n := e.Name()
		switch {
		case strings.HasPrefix(n, "."+stepPrefix) && strings.Contains(n, ".tmp"):
			if err := os.RemoveAll(filepath.Join(root, n)); err != nil {
				return err
			}
		case strings.HasPrefix(n, stepPrefix):
			if s, err := strconv.Atoi(strings.TrimPrefix(n, stepPrefix)); err == nil {
				steps[s] = n
			}
		}
	}
	if keep < 1 {
		return nil
	}
	order := sortedKeys(steps)
	for _, s := range order[:max(0, len(order)-keep)] {
		if steps[s] == latest {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, steps[s])); err != nil {
			return err
		}
	}
	return nil
}

// StepMetrics is one metrics line: one agent at one turn of one step.
type StepMetrics struct {
	Kind  string `json:"kind"` // "train"
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
	// LogpGap is mean |rollout log-prob - trainer log-prob|; at turn 0 it is the numeric
	// gap, at later turns it also holds the earlier turns' updates.
	LogpGap float64 `json:"logp_gap"`
	// ProbeGap is llama.cpp vs the plugin on the fixed probe after this step's sync.
	ProbeGap            float64 `json:"probe_gap"`
	Tokens              int     `json:"tokens"`
	RolloutTokensPerSec float64 `json:"rollout_tokens_per_s"`
	Times               Times   `json:"seconds"`
}

// Times are where a step's time went, in seconds. Rollout, Sync and Step are the step's;
// LogProbs, Reference and Update are this agent and turn's.
type Times struct {
	Rollout   float64 `json:"rollout"`
	LogProbs  float64 `json:"logprobs"`
	Reference float64 `json:"reference"`
	Update    float64 `json:"update"`
	Sync      float64 `json:"sync"`
	Step      float64 `json:"step"`
}

// ValMetrics is one validation line: Accuracy[agent][turn].
type ValMetrics struct {
	Kind     string      `json:"kind"` // "val"
	Step     int         `json:"step"`
	Problems int         `json:"problems"`
	Accuracy [][]float64 `json:"accuracy"`
	Seconds  float64     `json:"seconds"`
}

// metricsLog appends JSONL lines, syncing each.
type metricsLog struct{ f *os.File }

// openMetrics opens the run's metrics, first dropping lines of steps after the resumed
// one (written after the checkpoint a crash fell back to), so the log has each step once.
func openMetrics(path string, step int) (*metricsLog, error) {
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
	return &metricsLog{f: f}, nil
}

func (m *metricsLog) Append(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if _, err := m.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return m.f.Sync()
}

func (m *metricsLog) Close() error { return m.f.Close() }
