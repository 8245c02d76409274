// Package uncertainty turns graded debate samples into the paper's evaluation figures:
// accuracy (pass@1) and majority-vote accuracy per dataset, agent and turn; the
// decomposition of the agents' answer distributions into total, epistemic and aleatoric
// uncertainty (TU = EU + AU); answer flips between turns; token-level statistics; and
// their mean and standard deviation over several seeds.
//
// # Decomposition
//
// At one turn of one problem, agent i has K_i sampled answers. The support is the union
// of all agents' answers at that turn, merged by their canonical key (grade.Key, the
// robust grader's notion of "the same answer"); responses without an extractable answer
// form one more category. p_i(y) = count_i(y) / K_i, p_sys = (1/N) sum_i p_i, and
//
//	TU = H(p_sys)            total uncertainty
//	AU = (1/N) sum_i H(p_i)  aleatoric: the agents' own spread
//	EU = TU - AU             epistemic: the generalised Jensen-Shannon divergence
//
// with H the Shannon entropy in nats (natural log). EU >= 0 by Jensen's inequality; a
// negative difference smaller than 1e-12 is floating-point noise and is reported as 0.
// N identical agents give EU = 0; N agents each certain of a different answer give
// EU = log N and AU = 0.
package uncertainty

import (
	"errors"
	"fmt"
	"math"
)

// Decomposition is TU = EU + AU of one set of answer distributions, in nats.
type Decomposition struct {
	TU float64 `json:"tu"`
	EU float64 `json:"eu"`
	AU float64 `json:"au"`
}

// noiseFloor is the largest negative EU that is taken for rounding error.
const noiseFloor = 1e-12

// Decompose computes the decomposition of the agents' answer counts: counts[i][y] is how
// many of agent i's samples gave answer y, over a support shared by all agents (zeros for
// answers an agent never gave).
func Decompose(counts [][]int) (Decomposition, error) {
	if len(counts) == 0 {
		return Decomposition{}, errors.New("decompose: no agents")
	}
	support := len(counts[0])
	dists := make([][]float64, len(counts))
	for i, c := range counts {
		if len(c) != support {
			return Decomposition{}, fmt.Errorf("decompose: agent %d has %d answer categories, agent 0 has %d", i, len(c), support)
		}
		total := 0
		for y, n := range c {
			if n < 0 {
				return Decomposition{}, fmt.Errorf("decompose: agent %d has count %d for answer %d", i, n, y)
			}
			total += n
		}
		if total == 0 {
			return Decomposition{}, fmt.Errorf("decompose: agent %d has no samples", i)
		}
		dists[i] = make([]float64, support)
		for y, n := range c {
			dists[i][y] = float64(n) / float64(total)
		}
	}
	mixture := make([]float64, support)
	var d Decomposition
	for _, p := range dists {
		d.AU += entropy(p)
		for y, v := range p {
			mixture[y] += v
		}
	}
	n := float64(len(dists))
	d.AU /= n
	for y := range mixture {
		mixture[y] /= n
	}
	d.TU = entropy(mixture)
	d.EU = d.TU - d.AU
	if d.EU < 0 && d.EU > -noiseFloor {
		d.EU = 0
	}
	return d, nil
}

// entropy is H(p) in nats, with 0 log 0 = 0.
func entropy(p []float64) float64 {
	h := 0.0
	for _, v := range p {
		if v > 0 {
			h -= v * math.Log(v)
		}
	}
	return h
}
