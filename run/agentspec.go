package run

// --agent: a model path with comma-separated settings, or an agent of a training run.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/umad-dev/umad/trainer"
)

// HubDir resolves an HF directory or hub id into a directory and the id with its commit
// ("" for a directory).
type HubDir func(arg string) (dir, id string, err error)

// parseAgent reads one --agent value, with def's sampling and response length unless it
// sets them. With agent=J, its path is a `umad train` run directory, and the agent is
// agent J of the run's newest checkpoint: its model.gguf when hub is nil (debates), else
// its HF directory; a path without agent= is then an HF directory or a hub id (hub).
func parseAgent(spec string, i int, def DebateAgent, hub HubDir) (TrainAgent, error) {
	parts := strings.Split(spec, ",")
	a := TrainAgent{Name: fmt.Sprintf("agent %d", i), Model: parts[0], MaxTokens: def.MaxTokens,
		SeedOffset: uint64(i) * 1000003, Params: def.Params}
	if a.Model == "" {
		return a, fmt.Errorf("--agent %q: no model path", spec)
	}
	seen := map[string]bool{}
	runAgent := 0
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return a, fmt.Errorf("--agent %q: %q is not key=value", spec, kv)
		}
		known, err := a.set(k, v, &runAgent)
		if !known {
			return a, fmt.Errorf("--agent %q: unknown setting %q (name, seed, temperature, top-p, top-k, min-p, max-tokens, chat-format, adapter, agent)", spec, k)
		}
		// An empty adapter= named the working directory, and a repeated key took the last.
		switch {
		case v == "":
			return a, fmt.Errorf("--agent %q: %s is empty", spec, k)
		case seen[k]:
			return a, fmt.Errorf("--agent %q: %s is given twice", spec, k)
		case err != nil:
			return a, fmt.Errorf("--agent %q: %s: %w", spec, k, err)
		}
		seen[k] = true
	}
	if err := a.Params.Validate(); err != nil {
		return a, fmt.Errorf("--agent %q: %w", spec, err)
	}
	if a.MaxTokens < 1 {
		return a, fmt.Errorf("--agent %q: max tokens must be at least 1", spec)
	}
	if seen["agent"] {
		dir, err := trainedAgent(a.Model, runAgent)
		if err != nil {
			return a, fmt.Errorf("--agent %q: %w", spec, err)
		}
		if a.Model = dir; hub == nil {
			a.Model = filepath.Join(dir, "model.gguf")
		}
	} else if hub != nil { // an HF directory, or a hub id
		var err error
		if a.Model, a.Hub, err = hub(a.Model); err != nil {
			return a, fmt.Errorf("--agent %q: %w", spec, err)
		}
	}
	// Absolute, so the saved config still names the file when run from elsewhere.
	if abs, err := filepath.Abs(a.Model); err == nil {
		a.Model = abs
	}
	return a, nil
}

// set takes one key=value of an --agent spec (agent=I into runAgent); known is false for a
// key it does not know.
func (a *TrainAgent) set(k, v string, runAgent *int) (known bool, err error) {
	switch k {
	case "name":
		a.Name = v
	case "chat-format":
		a.ChatFormat = v
	case "seed":
		a.SeedOffset, err = strconv.ParseUint(v, 10, 64)
	case "temperature":
		a.Params.Temperature, err = strconv.ParseFloat(v, 64)
	case "top-p":
		a.Params.TopP, err = strconv.ParseFloat(v, 64)
	case "min-p":
		a.Params.MinP, err = strconv.ParseFloat(v, 64)
	case "top-k":
		a.Params.TopK, err = strconv.Atoi(v)
	case "max-tokens":
		a.MaxTokens, err = strconv.Atoi(v)
	case "adapter":
		a.Adapter, err = filepath.Abs(v)
	case "agent":
		if *runAgent, err = strconv.Atoi(v); err == nil && *runAgent < 0 {
			err = errors.New("must not be negative")
		}
	default:
		return false, nil
	}
	return true, err
}

// trainedAgent is agent i's directory in the newest checkpoint of the training run dir.
func trainedAgent(dir string, i int) (string, error) {
	ckpt, err := trainer.LatestCheckpoint(dir)
	if err != nil {
		return "", err
	}
	if ckpt == "" {
		return "", fmt.Errorf("%s holds no checkpoint of a umad train run", dir)
	}
	agent := trainer.AgentCheckpointDir(ckpt, i)
	if _, err := os.Stat(agent); err != nil {
		return "", fmt.Errorf("checkpoint %s has no agent %d", ckpt, i)
	}
	return agent, nil
}
