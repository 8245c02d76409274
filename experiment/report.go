package experiment

import (
	"path/filepath"
	"strings"
)

// LabelledDebate is a debate cell under the label umad report gives it.
type LabelledDebate struct {
	Label string // the method, and "/" its agent set where the file has several
	Cell
}

// ReportDebates are the file's debate cells in the order umad report lines them up: its
// untrained methods first, so each agent set's default baseline is its zero-shot debate.
func (f *File) ReportDebates() ([]LabelledDebate, error) {
	cells, err := f.Cells()
	if err != nil {
		return nil, err
	}
	var out []LabelledDebate
	for _, trained := range []bool{false, true} {
		for _, c := range cells {
			if c.Kind != "debate" || c.Trained != trained {
				continue
			}
			label := c.Method
			if len(f.Agents) > 1 {
				label += "/" + c.AgentSet
			}
			out = append(out, LabelledDebate{label, c})
		}
	}
	return out, nil
}

// TrainedTail is a trained agent's model path from the name of the training cell it
// needs on (train/METHOD/AGENTS/seed-S/checkpoints/step-N/agent-I/model.gguf); "" where
// it lies in none of them.
func (c Cell) TrainedTail(model string) string {
	slash := filepath.ToSlash(model)
	for _, n := range c.Needs {
		if i := strings.LastIndex(slash, "/"+n+"/"); i >= 0 {
			return slash[i+1:]
		}
	}
	return ""
}
