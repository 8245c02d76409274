package experiment

import (
	"slices"
	"strings"
	"testing"
)

// umad report lines an experiment's debates up untrained first, labelled by method, and by
// agent set too where the file has several.
func TestReportDebates(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{grid, []string{"zero-shot", "zero-shot", "single", "single"}},
		{strings.Replace(grid, "[train.grpo]", "[agents.other]\nhf = [\"c/hf\", \"d/hf\"]\ngguf = [\"c.gguf\", \"d.gguf\"]\n\n[train.grpo]", 1) +
			"\n[methods.other-zero]\nagents = [\"other\"]\neval = [\"toy\"]\n",
			[]string{"other-zero/other", "other-zero/other", "zero-shot/pair", "zero-shot/pair", "single/pair", "single/pair"}},
	} {
		f, err := Load(write(t, tc.text))
		if err != nil {
			t.Fatal(err)
		}
		debates, err := f.ReportDebates()
		if err != nil {
			t.Fatal(err)
		}
		var labels []string
		for _, d := range debates {
			if d.Kind != "debate" || !strings.HasPrefix(d.Name, "debate/"+d.Method+"/"+d.AgentSet+"/") {
				t.Errorf("%s: cell %s of %s/%s", d.Label, d.Name, d.Method, d.AgentSet)
			}
			labels = append(labels, d.Label)
		}
		if !slices.Equal(labels, tc.want) {
			t.Errorf("labels %q, want %q", labels, tc.want)
		}
	}
}

// A trained debate's agent is named from the training cell it needs on, wherever the
// experiment directory lies; a model outside them has no tail.
func TestTrainedTail(t *testing.T) {
	c := Cell{Needs: []string{"train/single/pair-agent-0/seed-1", "train/single/pair-agent-1/seed-1"}}
	for model, want := range map[string]string{
		"/moved/exp/train/single/pair-agent-1/seed-1/checkpoints/step-3/agent-0/model.gguf": "train/single/pair-agent-1/seed-1/checkpoints/step-3/agent-0/model.gguf",
		"exp/train/single/pair-agent-0/seed-1/checkpoints/step-1/agent-0/model.gguf":        "train/single/pair-agent-0/seed-1/checkpoints/step-1/agent-0/model.gguf",
		"/models/a.gguf": "",
	} {
		if got := c.TrainedTail(model); got != want {
			t.Errorf("TrainedTail(%q) = %q, want %q", model, got, want)
		}
	}
}
