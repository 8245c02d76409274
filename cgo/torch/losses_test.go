package torch

import (
	"strings"
	"testing"
)

// The plugin finds a policy loss by name; one it does not have is refused in one line that
// names the ones it has.
func TestPolicyLossByName(t *testing.T) {
	f := newLossFixture(t, ModelOptions{})
	b := PolicyBatch{Prompts: f.prompts, Responses: f.responses, OldLogp: f.withRatios(handRatios), Advantages: handAdv, Mask: handMask}
	cfg := LossConfig{Temperature: 1, ClipLow: 0.2, ClipHigh: 0.2, ClipC: 3}
	byDefault, err := f.m.PolicyLoss(b, cfg, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Loss = LossPPO
	if named, err := f.m.PolicyLoss(b, cfg, false, 1); err != nil || named.Loss != byDefault.Loss {
		t.Errorf("ppo by name: %v, %v; by default %v", named.Loss, err, byDefault.Loss)
	}
	cfg.Loss = "nope"
	_, err = f.m.PolicyLoss(b, cfg, false, 1)
	if err == nil || !strings.Contains(err.Error(), `unknown policy loss "nope" (this plugin has ppo`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("unknown loss: %v", err)
	}
}
