package report

import (
	"fmt"
	"slices"
	"strings"
)

// turnGainTable writes, for each run with problem records and more than one turn, each
// agent's strict accuracy gain from turn 0 to the last turn, and the agents' mean gain, in
// points with a 95% paired bootstrap interval over the dataset's problems: what the
// debate itself adds, with its noise.
func turnGainTable(b *strings.Builder, runs []Run, dataset string) {
	var rows [][]string
	for _, r := range runs {
		last := r.Summary.Mean.Turns - 1
		if last < 1 || len(r.Replicates) == 0 {
			continue
		}
		agents := r.Summary.Mean.Agents
		ps := scores(Method{Replicates: r.Replicates})[dataset]
		for _, a := range append(agentIndices(agents, false), -1) {
			diffs, ok := turnDiffs(ps, a, agents, last)
			if !ok {
				break
			}
			gain, lo, hi := bootstrap([][]float64{diffs})
			label := "mean of agents"
			if a >= 0 {
				label = agentLabel(a)
			}
			rows = append(rows, []string{r.Name, label, fmt.Sprint(len(diffs)), points(gain), "[" + points(lo) + ", " + points(hi) + "]"})
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("Last turn against turn 0 (strict grading, points; 95% paired bootstrap interval over problems):\n\n")
	markdownTable(b, []string{"Run", "Agent", "Problems", "Gain", "95% interval"}, rows)
}

// points formats a difference of fractions in signed points: "+18.4".
func points(x float64) string { return withSign(fmt.Sprintf("%.1f", 100*x)) }

// turnDiffs is, per problem in id order, agent a's accuracy at turn last minus at turn 0
// averaged over seeds (a = -1: over agents too). False when a problem lacks those turns.
func turnDiffs(ps map[string]map[string][][]float64, a, agents, last int) ([]float64, bool) {
	ids := make([]string, 0, len(ps))
	for id := range ps {
		ids = append(ids, id)
	}
	slices.Sort(ids) // a fixed order, so that the bootstrap's draws repeat
	diffs := make([]float64, 0, len(ids))
	for _, id := range ids {
		var sum float64
		n := 0
		for _, acc := range ps[id] {
			for j := range agents {
				if a >= 0 && j != a {
					continue
				}
				if j >= len(acc) || last >= len(acc[j]) {
					return nil, false
				}
				sum += acc[j][last] - acc[j][0]
				n++
			}
		}
		if n == 0 {
			return nil, false
		}
		diffs = append(diffs, sum/float64(n))
	}
	return diffs, len(diffs) > 0
}
