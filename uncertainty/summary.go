package uncertainty

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/umad-dev/umad/grade"
)

// System is the agent index of the rows that describe the whole team.
const System = -1

// Average is the dataset name of the rows that average the datasets' rows (each dataset
// weighs the same, as the paper's "Average" column); present when there are several.
const Average = "average"

// Flips are the fractions of trajectories by correctness before and after a transition
// (Correct or Wrong to Correct or Wrong); they sum to 1. Ratio = C2W + W2C.
type Flips struct {
	C2C   float64 `json:"c2c"`
	C2W   float64 `json:"c2w"`
	W2C   float64 `json:"w2c"`
	W2W   float64 `json:"w2w"`
	Ratio float64 `json:"ratio"`
}

// Transition holds the flips of one transition in both grading modes.
type Transition struct {
	Strict Flips `json:"strict"`
	Robust Flips `json:"robust"`
}

// Row holds the figures of one dataset, agent (or System) and turn, averaged over the
// dataset's problems with equal weight per problem.
type Row struct {
	Dataset string `json:"dataset"`
	Agent   int    `json:"agent"`
	Turn    int    `json:"turn"`
	// Problems and Samples count what the row averages (Samples over all its agents).
	Problems int `json:"problems"`
	Samples  int `json:"samples"`
	// AccStrict and AccRobust are pass@1: the fraction of correct samples. System rows
	// hold the mean over agents. The robust figures take a verifier model's verdict where
	// one judged a pair (Verified).
	AccStrict float64 `json:"acc_strict"`
	AccRobust float64 `json:"acc_robust"`
	// MajStrict and MajRobust are the accuracy of the most frequent answer key among the
	// samples that have an answer (System rows: among all agents' samples). A key counts
	// as correct in the share of its samples graded correct; a tie between keys counts
	// the mean over the tied keys (the expectation of a random tie-break); a problem
	// without any answer counts as wrong.
	MajStrict float64 `json:"maj_strict"`
	MajRobust float64 `json:"maj_robust"`
	// Decomposition: System rows hold TU, EU and AU of the team; an agent row holds its
	// own answer entropy H(p_i) as TU and AU, with EU = 0 (a team of one).
	Decomposition
	// Token statistics: means over samples of the per-token entropy, the per-token NLL,
	// the response length in tokens, and the rates of truncated and boxed responses.
	TokenEntropy float64 `json:"token_entropy"`
	NLL          float64 `json:"nll"`
	Tokens       float64 `json:"tokens"`
	Truncated    float64 `json:"truncated"`
	Boxed        float64 `json:"boxed"`
	// Verified is the share of samples whose pair a verifier model decided (equal or not),
	// robust's rules having not: in the robust figures they count as it judged them.
	Verified float64 `json:"verified,omitempty"`
	// FromPrevious compares each trajectory with itself at turn-1, FromStart at turn 0
	// (both zero at turn 0). System rows hold the mean over agents.
	FromPrevious Transition `json:"from_previous"`
	FromStart    Transition `json:"from_start"`
}

// metrics lists the row's averaged figures, for sums, means and deviations.
func (r *Row) metrics() []*float64 {
	m := []*float64{&r.AccStrict, &r.AccRobust, &r.MajStrict, &r.MajRobust, &r.TU, &r.EU, &r.AU,
		&r.TokenEntropy, &r.NLL, &r.Tokens, &r.Truncated, &r.Boxed, &r.Verified}
	for _, f := range []*Flips{&r.FromPrevious.Strict, &r.FromPrevious.Robust, &r.FromStart.Strict, &r.FromStart.Robust} {
		m = append(m, &f.C2C, &f.C2W, &f.W2C, &f.W2W, &f.Ratio)
	}
	return m
}

// add adds src's figures to r's.
func (r *Row) add(src Row) {
	dst, s := r.metrics(), src.metrics()
	for i := range dst {
		*dst[i] += *s[i]
	}
}

// scale multiplies r's figures by f.
func (r *Row) scale(f float64) {
	for _, m := range r.metrics() {
		*m *= f
	}
}

// Summary holds the rows of every dataset, turn and agent.
type Summary struct {
	Agents int `json:"agents"`
	Turns  int `json:"turns"`
	// Datasets are sorted by name, followed by Average when there are several.
	Datasets []string `json:"datasets"`
	// Rows are ordered by dataset (as in Datasets), then turn, then agent 0..N-1 and
	// finally the System row.
	Rows []Row `json:"rows"`
}

// Find returns the row of a dataset, agent (or System) and turn.
func (s Summary) Find(dataset string, agent, turn int) (Row, bool) {
	for _, r := range s.Rows {
		if r.Dataset == dataset && r.Agent == agent && r.Turn == turn {
			return r, true
		}
	}
	return Row{}, false
}

// Summarise aggregates problem records per dataset, agent and turn, plus System rows
// and, with several datasets, Average rows. All records must have the same number of
// agents and turns.
func Summarise(problems []ProblemRecord) (Summary, error) {
	if len(problems) == 0 {
		return Summary{}, errors.New("summarise: no problems")
	}
	var agents, turns int
	perDataset := map[string][]Row{} // accumulated rows, in Summary order within a dataset
	counts := map[string]int{}
	for i, p := range problems {
		a, t, err := p.shape()
		if i == 0 {
			agents, turns = a, t
		} else if err == nil && (a != agents || t != turns) {
			err = fmt.Errorf("%d agents and %d turns, the first problem has %d and %d", a, t, agents, turns)
		}
		if err != nil {
			return Summary{}, fmt.Errorf("summarise: problem %s/%s: %w", p.Dataset, p.ID, err)
		}
		rows, err := problemRows(p)
		if err != nil {
			return Summary{}, fmt.Errorf("summarise: problem %s/%s: %w", p.Dataset, p.ID, err)
		}
		acc, ok := perDataset[p.Dataset]
		if !ok {
			perDataset[p.Dataset] = rows
		} else {
			for i := range acc {
				acc[i].add(rows[i])
				acc[i].Samples += rows[i].Samples
			}
		}
		counts[p.Dataset]++
	}
	s := Summary{Agents: agents, Turns: turns}
	for name := range perDataset {
		s.Datasets = append(s.Datasets, name)
	}
	slices.Sort(s.Datasets)
	for _, name := range s.Datasets {
		rows := perDataset[name]
		for i := range rows {
			rows[i].Dataset = name
			rows[i].Problems = counts[name]
			rows[i].scale(1 / float64(counts[name]))
		}
		s.Rows = append(s.Rows, rows...)
	}
	if len(s.Datasets) > 1 {
		s.Rows = append(s.Rows, averageRows(s.Rows, len(s.Datasets))...)
		s.Datasets = append(s.Datasets, Average)
	}
	return s, nil
}

// averageRows averages the rows of n datasets, laid out one dataset after another.
func averageRows(rows []Row, n int) []Row {
	per := len(rows) / n
	avg := make([]Row, per)
	for i := range avg {
		avg[i] = Row{Dataset: Average, Agent: rows[i].Agent, Turn: rows[i].Turn}
		for d := range n {
			r := rows[d*per+i]
			avg[i].add(r)
			avg[i].Problems += r.Problems
			avg[i].Samples += r.Samples
		}
		avg[i].scale(1 / float64(n))
	}
	return avg
}

// problemRows returns one problem's rows in Summary order (turn, then agents and System),
// with Samples set and Problems and Dataset left for the caller.
func problemRows(p ProblemRecord) ([]Row, error) {
	agents, turns := len(p.Answers), len(p.Answers[0])
	rows := make([]Row, 0, turns*(agents+1))
	for t := range turns {
		byAgent := atTurn(p, t)
		counts := answerCounts(byAgent)
		team := Row{Agent: System, Turn: t}
		var err error
		if team.Decomposition, err = Decompose(counts); err != nil {
			return nil, fmt.Errorf("turn %d: %w", t, err)
		}
		var pooled []grade.Verdict
		for a, samples := range byAgent {
			r := Row{Agent: a, Turn: t, Samples: len(samples)}
			if r.Decomposition, err = Decompose(counts[a : a+1]); err != nil {
				return nil, fmt.Errorf("turn %d agent %d: %w", t, a, err)
			}
			r.AccStrict, r.AccRobust = fraction(samples, correctIn(grade.Strict)), fraction(samples, correctIn(robustMode))
			r.MajStrict, r.MajRobust = majority(samples)
			r.TokenEntropy = mean(samples, func(s grade.Verdict) float64 { return s.MeanEntropy })
			r.NLL = mean(samples, func(s grade.Verdict) float64 { return s.MeanNLL })
			r.Tokens = mean(samples, func(s grade.Verdict) float64 { return float64(s.Tokens) })
			r.Truncated = fraction(samples, func(s grade.Verdict) bool { return s.Truncated })
			r.Boxed = fraction(samples, func(s grade.Verdict) bool { return s.Boxed })
			r.Verified = fraction(samples, func(s grade.Verdict) bool {
				return s.Verifier == grade.CheckEqual || s.Verifier == grade.CheckNotEqual
			})
			if t > 0 {
				r.FromPrevious = transition(p.Answers[a][t-1], samples)
				r.FromStart = transition(p.Answers[a][0], samples)
			}
			rows = append(rows, r)
			pooled = append(pooled, samples...)
		}
		// The team's other figures are the mean over agents (all have the same K).
		agentRows := rows[len(rows)-agents:]
		decomposition := team.Decomposition
		for _, r := range agentRows {
			team.add(r)
		}
		team.scale(1 / float64(agents))
		team.Decomposition = decomposition
		team.MajStrict, team.MajRobust = majority(pooled)
		team.Samples = len(pooled)
		rows = append(rows, team)
	}
	return rows, nil
}

func mean(samples []grade.Verdict, value func(grade.Verdict) float64) float64 {
	sum := 0.0
	for _, s := range samples {
		sum += value(s)
	}
	return sum / float64(len(samples))
}

// majority is the strict and robust accuracy of the majority vote over samples; see
// Row.MajStrict.
func majority(samples []grade.Verdict) (strict, robust float64) {
	type tally struct{ n, strict, robust int }
	tallies := map[string]*tally{}
	var order []string // first appearance, so that sums do not depend on map order
	best := 0
	for _, s := range samples {
		if s.NoAnswer {
			continue
		}
		t := tallies[s.Key]
		if t == nil {
			t = &tally{}
			tallies[s.Key] = t
			order = append(order, s.Key)
		}
		t.n++
		t.strict += boolInt(s.Strict)
		t.robust += boolInt(s.Correct(robustMode))
		best = max(best, t.n)
	}
	if best == 0 {
		return 0, 0
	}
	tied := 0
	for _, key := range order {
		if t := tallies[key]; t.n == best {
			tied++
			strict += float64(t.strict) / float64(t.n)
			robust += float64(t.robust) / float64(t.n)
		}
	}
	return strict / float64(tied), robust / float64(tied)
}

// transition counts flips from before[k] to after[k] in both modes.
func transition(before, after []grade.Verdict) Transition {
	return Transition{Strict: flips(before, after, correctIn(grade.Strict)), Robust: flips(before, after, correctIn(robustMode))}
}

func flips(before, after []grade.Verdict, correct func(grade.Verdict) bool) Flips {
	var f Flips
	for k := range before {
		switch b, a := correct(before[k]), correct(after[k]); {
		case b && a:
			f.C2C++
		case b:
			f.C2W++
		case a:
			f.W2C++
		default:
			f.W2W++
		}
	}
	n := float64(len(before))
	f.C2C, f.C2W, f.W2C, f.W2W = f.C2C/n, f.C2W/n, f.W2C/n, f.W2W/n
	f.Ratio = f.C2W + f.W2C
	return f
}

// Combined is the mean and the standard deviation over seeds of runs with the same
// configuration. Std is the population deviation (numpy's default), zero for one seed;
// its identity and count fields repeat Mean's.
type Combined struct {
	Seeds int     `json:"seeds"`
	Mean  Summary `json:"mean"`
	Std   Summary `json:"std"`
}

// CombineSeeds combines the summaries of runs that differ only in their seed.
func CombineSeeds(runs []Summary) (Combined, error) {
	if len(runs) == 0 {
		return Combined{}, errors.New("combine seeds: no runs")
	}
	first := runs[0]
	for i, r := range runs[1:] {
		if err := sameLayout(first, r); err != nil {
			return Combined{}, fmt.Errorf("combine seeds: run %d differs from run 0: %w", i+1, err)
		}
	}
	c := Combined{Seeds: len(runs), Mean: cloneLayout(first), Std: cloneLayout(first)}
	n := float64(len(runs))
	for i := range c.Mean.Rows {
		for _, r := range runs {
			c.Mean.Rows[i].add(r.Rows[i])
		}
		c.Mean.Rows[i].scale(1 / n)
		means, devs := c.Mean.Rows[i].metrics(), c.Std.Rows[i].metrics()
		for _, r := range runs {
			for j, v := range r.Rows[i].metrics() {
				d := *v - *means[j]
				*devs[j] += d * d
			}
		}
		for _, d := range devs {
			*d = math.Sqrt(*d / n)
		}
	}
	return c, nil
}

// sameLayout reports how two summaries differ in shape or in what their rows count.
func sameLayout(a, b Summary) error {
	if a.Agents != b.Agents || a.Turns != b.Turns {
		return fmt.Errorf("%d agents and %d turns vs %d and %d", a.Agents, a.Turns, b.Agents, b.Turns)
	}
	if !slices.Equal(a.Datasets, b.Datasets) {
		return fmt.Errorf("datasets %v vs %v", a.Datasets, b.Datasets)
	}
	if len(a.Rows) != len(b.Rows) {
		return fmt.Errorf("%d rows vs %d", len(a.Rows), len(b.Rows))
	}
	for i, r := range a.Rows {
		o := b.Rows[i]
		if r.Dataset != o.Dataset || r.Agent != o.Agent || r.Turn != o.Turn || r.Problems != o.Problems || r.Samples != o.Samples {
			return fmt.Errorf("row %d is %s agent %d turn %d with %d problems and %d samples vs %s agent %d turn %d with %d and %d",
				i, r.Dataset, r.Agent, r.Turn, r.Problems, r.Samples, o.Dataset, o.Agent, o.Turn, o.Problems, o.Samples)
		}
	}
	return nil
}

// cloneLayout copies a summary's shape and row identities with every figure zero.
func cloneLayout(s Summary) Summary {
	c := Summary{Agents: s.Agents, Turns: s.Turns, Datasets: slices.Clone(s.Datasets), Rows: make([]Row, len(s.Rows))}
	for i, r := range s.Rows {
		c.Rows[i] = Row{Dataset: r.Dataset, Agent: r.Agent, Turn: r.Turn, Problems: r.Problems, Samples: r.Samples}
	}
	return c
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
