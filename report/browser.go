package report

import (
	"fmt"
	"html/template"
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/evalrun"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/uncertainty"
)

// The outcomes the browser filters by, per trajectory, in strict grading (Table 1's).
const (
	RightToWrong   = "right-to-wrong"  // an agent right at turn 0 is wrong at the last turn
	WrongToRight   = "wrong-to-right"  // an agent wrong at turn 0 is right at the last turn
	Disagreement   = "disagreement"    // the agents' last answers differ (no answer counts as one)
	UnanimousWrong = "unanimous-wrong" // several agents end on one wrong answer
)

// browserPage is the data the browser's script renders (JSON in the page).
type browserPage struct {
	Runs     []string         `json:"runs"`
	Problems []browserProblem `json:"problems"`
}

type browserProblem struct {
	Dataset  string          `json:"dataset"`
	ID       string          `json:"id"`
	Question string          `json:"question"`
	Gold     string          `json:"gold"`
	Debates  []browserDebate `json:"debates"`
}

// browserDebate is one seed's debate of a problem in one run (a method of Table 1).
type browserDebate struct {
	Run  int    `json:"run"` // index into Runs
	Seed string `json:"seed"`
	// EU and AU are the team's, per turn.
	EU []float64 `json:"eu"`
	AU []float64 `json:"au"`
	// Tags[k] are trajectory k's outcomes.
	Tags [][]string `json:"tags"`
	// Turns[t][a][k] is agent a's response in trajectory k at turn t (the record's order);
	// Continuations[t][a], under the probe protocol, the one the next turn showed.
	Turns         [][][]browserResponse `json:"turns"`
	Continuations [][]browserResponse   `json:"continuations,omitempty"`
}

type browserResponse struct {
	Text   string  `json:"text"`
	Answer *string `json:"answer"`
	Strict bool    `json:"strict"`
	// Robust is correctness as the report's robust figures count it (a verifier's
	// "equal" included).
	Robust    bool `json:"robust"`
	Truncated bool `json:"truncated,omitempty"`
	Carried   bool `json:"carried,omitempty"`
}

// WriteBrowser writes the debate browser of methods (one for a run's report, several for a
// comparison, with Table 1's labels) into dir/index.html: each method's summary per
// dataset and turn, the figures, and every problem with its question, gold answer, each
// agent's response per turn with its answer and verdict, and the team's EU and AU, read
// from the rollouts files of the methods' replicates. Its script filters the problems by
// method, dataset, outcome and text; the page's URL fragment holds the filter.
func WriteBrowser(dir string, methods []Method) error {
	if len(methods) == 0 {
		return fmt.Errorf("browser %s: no runs", dir)
	}
	data, err := browserData(methods)
	if err != nil {
		return fmt.Errorf("browser %s: %w", dir, err)
	}
	figures, err := browserFigures(methods)
	if err != nil {
		return fmt.Errorf("browser %s: %w", dir, err)
	}
	svgs, err := inlineSVGs(figures)
	if err != nil {
		return fmt.Errorf("browser %s: %w", dir, err)
	}
	view := browserView{Style: template.CSS(pageStyle), Figures: svgs, Data: data, Outcomes: browserOutcomes}
	for _, m := range methods {
		view.Title = append(view.Title, m.Name)
		view.Tables = append(view.Tables, summaryTables(m)...)
	}
	return atomicfile.Write(filepath.Join(dir, PageFile), func(w io.Writer) error { return browserTemplate.Execute(w, view) })
}

// browserLink is the address of the browser beside Table 1, filtered to a method's
// problems of a dataset (of every dataset for the Average): where a cell's problems are.
func browserLink(method, dataset string) string {
	v := url.Values{"run": {method}}
	if dataset != uncertainty.Average {
		v.Set("dataset", dataset)
	}
	return PageFile + "#" + v.Encode()
}

// browserFigures are a run's figures, or for several the comparison's.
func browserFigures(methods []Method) ([]figure, error) {
	if len(methods) == 1 {
		return runFigures(methods[0].Summary)
	}
	runs := make([]Run, len(methods))
	for i, m := range methods {
		runs[i] = Run{Name: m.Name, Summary: m.Summary}
	}
	p, err := comparisonFigure(runs)
	if err != nil {
		return nil, fmt.Errorf("figure %s: %w", CompareFigure, err)
	}
	return []figure{plotFigure(CompareFigure, p)}, nil
}

// browserData reads every replicate's rollouts: problems in the order the first method
// debated them (its first seed's problem order), each with every method's and seed's
// debate of it.
func browserData(methods []Method) (browserPage, error) {
	var page browserPage
	at := map[[2]string]int{} // dataset, id -> position in page.Problems
	for mi, m := range methods {
		page.Runs = append(page.Runs, m.Name)
		for _, rep := range m.Replicates {
			if rep.Rollouts == "" {
				continue
			}
			type read struct {
				index   int
				problem browserProblem
			}
			var got []read
			err := evalrun.ReadDebates(rep.Rollouts, func(r debate.Record) error {
				d, err := debateOf(r, mi, rep.Key)
				if err != nil {
					return fmt.Errorf("%s problem %s/%s: %w", rep.Rollouts, r.Problem.Dataset, r.Problem.ID, err)
				}
				p := r.Problem
				got = append(got, read{r.Index, browserProblem{Dataset: p.Dataset, ID: p.ID, Question: p.Question, Gold: p.Gold, Debates: []browserDebate{d}}})
				return nil
			})
			if err != nil {
				return page, err
			}
			slices.SortStableFunc(got, func(a, b read) int { return a.index - b.index })
			for _, g := range got {
				key := [2]string{g.problem.Dataset, g.problem.ID}
				if i, ok := at[key]; ok {
					page.Problems[i].Debates = append(page.Problems[i].Debates, g.problem.Debates...)
					continue
				}
				at[key] = len(page.Problems)
				page.Problems = append(page.Problems, g.problem)
			}
		}
	}
	return page, nil
}

// debateOf keeps of a debate record what the browser shows.
func debateOf(r debate.Record, run int, seed string) (browserDebate, error) {
	turns, err := uncertainty.PerProblem(evalrun.ProblemRecord(r))
	if err != nil {
		return browserDebate{}, err
	}
	d := browserDebate{Run: run, Seed: seed, Tags: outcomes(r.Verdicts()), Turns: make([][][]browserResponse, len(r.Turns))}
	for _, pt := range turns {
		d.EU, d.AU = append(d.EU, pt.EU), append(d.AU, pt.AU)
	}
	for t, byAgent := range r.Turns {
		d.Turns[t] = make([][]browserResponse, len(byAgent))
		for a, byTraj := range byAgent {
			for _, at := range byTraj {
				d.Turns[t][a] = append(d.Turns[t][a], responseOf(at))
			}
		}
	}
	for _, byAgent := range r.Continuations {
		var cs []browserResponse
		for _, at := range byAgent {
			cs = append(cs, responseOf(at))
		}
		d.Continuations = append(d.Continuations, cs)
	}
	return d, nil
}

func responseOf(at debate.AgentTurn) browserResponse {
	return browserResponse{Text: at.Text, Answer: at.Answer, Strict: at.Grade.Strict, Robust: at.Grade.Correct(grade.Verified),
		Truncated: at.Grade.Truncated, Carried: at.Carried}
}

// outcomes tags each trajectory k of verdicts[agent][turn][k] with the outcomes it shows.
func outcomes(verdicts [][][]grade.Verdict) [][]string {
	agents := len(verdicts)
	if agents == 0 || len(verdicts[0]) == 0 {
		return nil
	}
	last := len(verdicts[0]) - 1
	tags := make([][]string, len(verdicts[0][0]))
	for k := range tags {
		tags[k] = []string{} // an empty list in the page, not null
		var r2w, w2r bool
		same, wrong := true, true
		end0 := verdicts[0][last][k]
		for a := range agents {
			start, end := verdicts[a][0][k], verdicts[a][last][k]
			r2w = r2w || start.Strict && !end.Strict
			w2r = w2r || !start.Strict && end.Strict
			same = same && end.NoAnswer == end0.NoAnswer && (end.NoAnswer || end.Key == end0.Key)
			wrong = wrong && !end.Strict
		}
		for _, o := range []struct {
			tag string
			on  bool
		}{{RightToWrong, r2w}, {WrongToRight, w2r}, {Disagreement, !same}, {UnanimousWrong, agents > 1 && same && !end0.NoAnswer && wrong}} {
			if o.on {
				tags[k] = append(tags[k], o.tag)
			}
		}
	}
	return tags
}

// browserOutcomes are the outcome filter's choices: the tag and its label.
var browserOutcomes = [][2]string{
	{RightToWrong, "right → wrong"}, {WrongToRight, "wrong → right"},
	{Disagreement, "disagreement at the end"}, {UnanimousWrong, "unanimous but wrong"},
}

// summaryTable is one method's team figures on one dataset, a row per turn.
type summaryTable struct {
	Caption string
	Header  []string
	Rows    [][]string
}

func summaryTables(m Method) []summaryTable {
	s := m.Summary
	var out []summaryTable
	for _, d := range s.Mean.Datasets {
		name := d
		if d == uncertainty.Average {
			name = "average over datasets"
		}
		tb := summaryTable{Caption: m.Name + ": " + name + " (team, " + strconv.Itoa(s.Seeds) + " seed(s))",
			Header: []string{"turn", "accuracy % (strict)", "accuracy % (robust)", "majority % (strict)", "TU", "EU", "AU"}}
		for t := range s.Mean.Turns {
			mean, ok := s.Mean.Find(d, uncertainty.System, t)
			if !ok {
				continue
			}
			std, _ := s.Std.Find(d, uncertainty.System, t)
			tb.Rows = append(tb.Rows, []string{turnLabel(t),
				cell(mean.AccStrict, std.AccStrict, s.Seeds, percent), cell(mean.AccRobust, std.AccRobust, s.Seeds, percent),
				cell(mean.MajStrict, std.MajStrict, s.Seeds, percent),
				cell(mean.TU, std.TU, s.Seeds, nats), cell(mean.EU, std.EU, s.Seeds, nats), cell(mean.AU, std.AU, s.Seeds, nats)})
		}
		out = append(out, tb)
	}
	return out
}

type browserView struct {
	Title    []string
	Style    template.CSS
	Tables   []summaryTable
	Figures  []pageFigure
	Outcomes [][2]string
	Data     browserPage
}
