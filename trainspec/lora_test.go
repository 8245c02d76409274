package trainspec

import (
	"strings"
	"testing"
)

func TestParseLoRATargets(t *testing.T) {
	if _, err := ParseLoRATargets("q,k_proj,mlp"); err == nil || !strings.Contains(err.Error(), `"mlp"`) {
		t.Errorf("ParseLoRATargets: %v", err)
	}
	if ts, err := ParseLoRATargets("down_proj, q,q"); err != nil || strings.Join(ts, ",") != "down,q" {
		t.Errorf("ParseLoRATargets: %v %v", ts, err)
	}
}
