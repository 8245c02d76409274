package trainer

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/trainspec"
)

// Every policy loss is described in the help text with its defaults, and its name, clip
// range and aggregation are ones the plugin's table takes.
func TestPolicyLosses(t *testing.T) {
	help := LossHelp()
	for _, r := range PolicyLosses() {
		if !strings.Contains(help, string(r.Loss)) || !strings.Contains(help, r.Describe()) {
			t.Errorf("help lacks %s: %s", r.Loss, help)
		}
	}
	m, err := hfmodel.Load(torchtest.Open(t), filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"), torch.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	prompts, responses := [][]int32{{1, 2}, {3}}, [][]int32{{4, 5, 6}, {7, 8}}
	logp, _, err := m.LogProbs(prompts, responses, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range PolicyLosses() {
		cfg := trainspec.LossConfig{Loss: r.Loss, Temperature: 1, ClipLow: r.ClipLow, ClipHigh: r.ClipHigh, ClipC: r.ClipC, Agg: r.Agg}
		b := torch.PolicyBatch{Prompts: prompts, Responses: responses, OldLogp: logp, Advantages: [][]float32{{1, 1, 1}, {-1, -1}}}
		if _, err := m.PolicyLoss(b, cfg, false, 1); err != nil {
			t.Errorf("%s: %v", r.Loss, err)
		}
	}
	if _, err := LookupLoss("nope"); err == nil || !strings.Contains(err.Error(), strings.Join(LossNames(), ", ")) {
		t.Errorf("unknown loss: %v", err)
	}
}

// A config.json from before the policy loss had a name is a ppo run.
func TestConfigFromBeforeLossReadsAsPPO(t *testing.T) {
	var c Config
	b := []byte(`{"agents": [{"params": {"temperature": 1}, "max_tokens": 8}], "algo": {"name": "grpo", "team": "individual"},
		"turns": 1, "clip_low": 0.2, "clip_high": 0.2, "clip_c": 3}`)
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Loss != trainspec.LossPPO {
		t.Errorf("loss %q, want ppo", c.Loss)
	}
}
