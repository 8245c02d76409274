package trainer

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/model"
)

// CheckPromptFloor refuses, before any model loads, a prompt limit below the turn-1 floor
// of the settings (debate.CheckPromptFloor) for the training or validation problems: the
// run failed there after loading its agents, at the step-0 validation. Each agent's
// tokenizer is llama.cpp's, loaded from a GGUF of its metadata alone.
func (c *Config) CheckPromptFloor() error {
	var problems []data.Problem
	if c.Turns > 1 {
		problems = append(problems, c.Problems...)
	}
	if c.ValTurns > 1 || c.ValTurns == 0 && c.Turns > 1 {
		problems = append(problems, c.ValProblems...)
	}
	if c.PromptLimit <= 0 || len(problems) == 0 || len(c.Agents) == 0 {
		return nil
	}
	tmp, err := os.MkdirTemp("", "umad-vocab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	agents := make([]debate.FloorAgent, len(c.Agents))
	for i, a := range c.Agents {
		path := filepath.Join(tmp, fmt.Sprintf("agent-%d.gguf", i))
		if err := model.WriteVocabGGUF(a.Dir, path); err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
		m, err := engine.OpenVocab(path)
		if err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
		defer m.Close()
		if agents[i].Format, err = m.Format(a.ChatFormat); err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
		agents[i].Model = m
	}
	return debate.CheckPromptFloor(agents, problems, c.debatePrompt(0), c.PromptLimit)
}
