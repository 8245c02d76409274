package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/model"
)

// Run-directory layout.
const (
	CheckpointsDir = "checkpoints"
	RolloutsDir    = "rollouts" // a few problems' training debates per step
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
// When checkpoints/latest is missing but checkpoints exist, it names the newest one and
// writes latest again.
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
		return newestCheckpoint(root)
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

// newestCheckpoint recovers from a missing latest pointer (deleted by hand, or a crash
// between a checkpoint's rename and the pointer's write): the newest step-N directory, which
// is complete because checkpoints appear by rename. None means a fresh run.
func newestCheckpoint(root string) (*checkpointInfo, error) {
	steps, err := checkpointSteps(root)
	if err != nil || len(steps) == 0 {
		return nil, err
	}
	order := sortedKeys(steps)
	name := steps[order[len(order)-1]]
	slog.Warn("checkpoints/latest is missing; resuming from the newest checkpoint", "checkpoint", filepath.Join(root, name))
	if err := atomicfile.WriteBytes(filepath.Join(root, LatestFile), []byte(name+"\n")); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	return latestCheckpoint(filepath.Dir(root))
}

// checkpoint saves every agent (weights or LoRA adapters, optimizer state, config,
// tokenizer and a GGUF) under checkpoints/step-N, built in a temporary directory and
// renamed into place, then points latest at it and removes all but the newest KeepLast.
// Rank 0 makes the directory; each agent's first rank writes the agent (rank 0 itself
// unless agent groups place the agent elsewhere), after gathering what is sharded.
func (t *Trainer) checkpoint() (err error) {
	root := filepath.Join(t.cfg.Out, CheckpointsDir)
	name := fmt.Sprintf("%s%06d", stepPrefix, t.step)
	final := filepath.Join(root, name)
	var tmp string
	if t.lead() {
		if err = os.MkdirAll(root, 0o755); err == nil {
			tmp, err = os.MkdirTemp(root, "."+name+".tmp")
		}
		if err != nil && !t.grouped() {
			return fmt.Errorf("checkpoint: %w", err)
		}
		defer func() {
			if err != nil && tmp != "" {
				os.RemoveAll(tmp)
			}
		}()
	}
	if t.grouped() { // the agents' first ranks write into rank 0's directory
		if err = t.firstError(err); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		parts, err := t.live.Group.AllGather([]byte(tmp))
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		tmp = string(parts[0])
	}
	for i := range t.agents {
		if !t.trains(i) {
			continue
		}
		if err = t.saveAgent(i, tmp); err != nil {
			break
		}
	}
	if t.grouped() {
		err = t.firstError(err)
	}
	if err != nil {
		// Name the checkpoint that was not made: the paths inside err are temporary and gone.
		return fmt.Errorf("checkpoint %s: %w", final, err)
	}
	if !t.lead() {
		return nil
	}
	if err = t.commitCheckpoint(tmp, name); err != nil {
		return fmt.Errorf("checkpoint %s: %w", final, err)
	}
	return nil
}

// saveAgent writes agent i into the checkpoint being built in tmp on its first rank; its
// other ranks take part in gathering its sharded weights and moments.
func (t *Trainer) saveAgent(i int, tmp string) error {
	a := t.agents[i]
	release, err := t.holdWeights(i)
	if err != nil {
		return err
	}
	if err := t.gatherOptimizer(i); err != nil {
		return errors.Join(err, release())
	}
	if !t.leads(i) {
		return release()
	}
	dir := AgentCheckpointDir(tmp, i)
	if err := errors.Join(a.actor.Save(dir), t.releaseOptimizer(i), release()); err != nil {
		return err
	}
	out := filepath.Join(dir, "model.gguf")
	if t.cfg.LoRA.Rank == 0 {
		return model.HFToGGUF(dir, out, model.HFToGGUFOptions{})
	}
	// A LoRA checkpoint names its base and holds the adapters; llama.cpp gets the merged
	// weights, converted from a staging directory.
	staging := filepath.Join(tmp, fmt.Sprintf(".merged-%d", i))
	if err := writeGGUF(a.actor, staging, out, false, gguf.TypeF32); err != nil {
		return err
	}
	return os.RemoveAll(staging)
}

// commitCheckpoint completes the checkpoint built in tmp (rank 0): its state, the rename
// to name, the latest pointer and the pruning of old ones.
func (t *Trainer) commitCheckpoint(tmp, name string) error {
	root := filepath.Dir(tmp)
	final := filepath.Join(root, name)
	if err := t.writeNext(tmp); err != nil {
		return err
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
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "."+stepPrefix) && strings.Contains(n, ".tmp") {
			if err := os.RemoveAll(filepath.Join(root, n)); err != nil {
				return err
			}
		}
	}
	steps, err := checkpointSteps(root)
	if err != nil {
		return err
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

// checkpointSteps maps the step of every checkpoint directory in root to its name.
func checkpointSteps(root string) (map[int]string, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	steps := map[int]string{}
	for _, e := range entries {
		if n := e.Name(); e.IsDir() && strings.HasPrefix(n, stepPrefix) {
			if s, err := strconv.Atoi(strings.TrimPrefix(n, stepPrefix)); err == nil {
				steps[s] = n
			}
		}
	}
	return steps, nil
}

// sortedKeys orders checkpoint steps, for pruning and recovery.
func sortedKeys(m map[int]string) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
