package trainer

import (
	"math"
	"testing"

	"github.com/umad-dev/umad/trainlog"
)

// Truncated importance weights: exp(trainer - rollout log-prob) times the mass top-k/top-p
// kept (the rollout drew from the renormalised distribution), capped.
func TestImportanceWeights(t *testing.T) {
	tr := &Trainer{cfg: Config{Settings: Settings{TISCap: 2}}}
	b := turnBatch{
		refs:        []sampleRef{{0, 0}, {0, 1}},
		responses:   [][]int32{{1, 2}, {3}},
		old:         [][]float32{{-1, -0.5}, {-2}},
		rolloutLogp: [][]float32{{-1.5, -3}, {-2}},
		keptMass:    [][]float32{{0.5, 0.9}, nil},
	}
	var m trainlog.StepMetrics
	tr.lossInputs(&b, &m)
	want := [][]float64{{math.Exp(0.5) * 0.5, 2}, {1}}
	for i := range want {
		for j, w := range want[i] {
			if math.Abs(float64(b.isw[i][j])-w) > 1e-6 {
				t.Errorf("weight %d,%d = %v, want %v", i, j, b.isw[i][j], w)
			}
		}
	}
	if m.ISWeight.Max != 2 {
		t.Errorf("largest weight %v, want the cap 2", m.ISWeight.Max)
	}
}
