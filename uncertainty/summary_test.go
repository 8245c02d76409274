package uncertainty

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/umad-dev/umad/grade"
)

// Sample constructors: right is correct in both modes, wrong in neither, robustOnly is
// an answer only the robust grader accepts ("5.0" for 5), none has no answer.
func right(key string) grade.Verdict      { return grade.Verdict{Key: key, Strict: true, Robust: true} }
func wrong(key string) grade.Verdict      { return grade.Verdict{Key: key} }
func robustOnly(key string) grade.Verdict { return grade.Verdict{Key: key, Robust: true} }
func none() grade.Verdict                 { return grade.Verdict{NoAnswer: true} }

// debateRecord is one problem of dataset "gsm8k" (gold 5), two agents, two turns, K = 4.
func debateRecord() ProblemRecord {
	return ProblemRecord{Dataset: "gsm8k", ID: "p1", Answers: [][][]grade.Verdict{
		{ // agent 0
			{right("5"), right("5"), wrong("6"), none()},
			{right("5"), right("5"), right("5"), right("5")},
		},
		{ // agent 1
			{wrong("7"), wrong("7"), wrong("7"), wrong("7")},
			{right("5"), right("5"), wrong("7"), robustOnly("5")},
		},
	}}
}

func TestSummariseByHand(t *testing.T) {
	ln2 := math.Log(2)
	h := func(p ...float64) float64 { // entropy written out for the expectations
		s := 0.0
		for _, v := range p {
			s -= v * math.Log(v)
		}
		return s
	}
	s, err := Summarise([]ProblemRecord{debateRecord()})
	if err != nil {
		t.Fatal(err)
	}
	if s.Agents != 2 || s.Turns != 2 || len(s.Datasets) != 1 || s.Datasets[0] != "gsm8k" || len(s.Rows) != 6 {
		t.Fatalf("shape: %d agents, %d turns, datasets %v, %d rows", s.Agents, s.Turns, s.Datasets, len(s.Rows))
	}
	tests := []struct {
		name        string
		agent, turn int
		want        Row
	}{
		{"agent 0 turn 0: half right, majority 5 is right, answers (5,5,6,none)", 0, 0, Row{
			AccStrict: 0.5, AccRobust: 0.5, MajStrict: 1, MajRobust: 1,
			Decomposition: Decomposition{TU: 1.5 * ln2, AU: 1.5 * ln2}}},
		{"agent 1 turn 0: certain and wrong", 1, 0, Row{}},
		{"team turn 0: support {5,6,none,7}, pooled majority 7 is wrong", System, 0, Row{
			AccStrict: 0.25, AccRobust: 0.25, MajStrict: 0, MajRobust: 0,
			Decomposition: Decomposition{TU: 1.75 * ln2, EU: ln2, AU: 0.75 * ln2}}},
		{"agent 0 turn 1: all right, two wrong-to-correct flips", 0, 1, Row{
			AccStrict: 1, AccRobust: 1, MajStrict: 1, MajRobust: 1,
			FromPrevious: Transition{Strict: Flips{C2C: 0.5, W2C: 0.5, Ratio: 0.5}, Robust: Flips{C2C: 0.5, W2C: 0.5, Ratio: 0.5}},
			FromStart:    Transition{Strict: Flips{C2C: 0.5, W2C: 0.5, Ratio: 0.5}, Robust: Flips{C2C: 0.5, W2C: 0.5, Ratio: 0.5}}}},
		{"agent 1 turn 1: strict rejects 5.0, its majority key 5 is 2/3 strict-right", 1, 1, Row{
			AccStrict: 0.5, AccRobust: 0.75, MajStrict: 2.0 / 3, MajRobust: 1,
			Decomposition: Decomposition{TU: h(0.75, 0.25), AU: h(0.75, 0.25)},
			FromPrevious:  Transition{Strict: Flips{W2C: 0.5, W2W: 0.5, Ratio: 0.5}, Robust: Flips{W2C: 0.75, W2W: 0.25, Ratio: 0.75}},
			FromStart:     Transition{Strict: Flips{W2C: 0.5, W2W: 0.5, Ratio: 0.5}, Robust: Flips{W2C: 0.75, W2W: 0.25, Ratio: 0.75}}}},
		{"team turn 1: p_sys = (7/8, 1/8), flips are the agents' mean", System, 1, Row{
			AccStrict: 0.75, AccRobust: 0.875, MajStrict: 6.0 / 7, MajRobust: 1,
			Decomposition: Decomposition{TU: h(0.875, 0.125), EU: h(0.875, 0.125) - h(0.75, 0.25)/2, AU: h(0.75, 0.25) / 2},
			FromPrevious: Transition{
				Strict: Flips{C2C: 0.25, W2C: 0.5, W2W: 0.25, Ratio: 0.5},
				Robust: Flips{C2C: 0.25, W2C: 0.625, W2W: 0.125, Ratio: 0.625}},
			FromStart: Transition{
				Strict: Flips{C2C: 0.25, W2C: 0.5, W2W: 0.25, Ratio: 0.5},
				Robust: Flips{C2C: 0.25, W2C: 0.625, W2W: 0.125, Ratio: 0.625}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := s.Find("gsm8k", tc.agent, tc.turn)
			if !ok {
				t.Fatal("row missing")
			}
			want := tc.want
			want.Dataset, want.Agent, want.Turn, want.Problems = "gsm8k", tc.agent, tc.turn, 1
			want.Samples = 4
			if tc.agent == System {
				want.Samples = 8
			}
			assertRow(t, got, want)
		})
	}
}

// assertRow compares every field, figures to 1e-12.
func assertRow(t *testing.T, got, want Row) {
	t.Helper()
	if got.Dataset != want.Dataset || got.Agent != want.Agent || got.Turn != want.Turn ||
		got.Problems != want.Problems || got.Samples != want.Samples {
		t.Errorf("identity: got %s/%d/%d with %d problems, %d samples; want %s/%d/%d with %d, %d",
			got.Dataset, got.Agent, got.Turn, got.Problems, got.Samples,
			want.Dataset, want.Agent, want.Turn, want.Problems, want.Samples)
	}
	g, w := got.metrics(), want.metrics()
	for i := range g {
		if !near(*g[i], *w[i]) {
			t.Errorf("figure %d (%s): got %g, want %g", i, metricName(i), *g[i], *w[i])
		}
	}
}

// metricName names the i-th entry of Row.metrics, for messages.
func metricName(i int) string {
	names := []string{"AccStrict", "AccRobust", "MajStrict", "MajRobust", "TU", "EU", "AU",
		"TokenEntropy", "NLL", "Tokens", "Truncated", "Boxed"}
	if i < len(names) {
		return names[i]
	}
	i -= len(names)
	transitions := []string{"FromPrevious.Strict", "FromPrevious.Robust", "FromStart.Strict", "FromStart.Robust"}
	fields := []string{"C2C", "C2W", "W2C", "W2W", "Ratio"}
	return transitions[i/5] + "." + fields[i%5]
}

// TestRowMetricsCoverEveryFigure guards metrics(): every float64 field of Row, nested
// ones included, must be listed exactly once, or seeds and datasets would not average it.
func TestRowMetricsCoverEveryFigure(t *testing.T) {
	var r Row
	var fields []*float64
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			switch f := v.Field(i); f.Kind() {
			case reflect.Float64:
				fields = append(fields, f.Addr().Interface().(*float64))
			case reflect.Struct:
				walk(f)
			}
		}
	}
	walk(reflect.ValueOf(&r).Elem())
	listed := map[*float64]int{}
	for _, m := range r.metrics() {
		listed[m]++
	}
	for i, f := range fields {
		if listed[f] != 1 {
			t.Errorf("float field %d is listed %d times in metrics()", i, listed[f])
		}
	}
	if len(listed) != len(fields) {
		t.Errorf("metrics() lists %d figures, Row has %d float fields", len(listed), len(fields))
	}
}

func TestSummariseTokenStatistics(t *testing.T) {
	p := ProblemRecord{Dataset: "d", ID: "x", Answers: [][][]grade.Verdict{{{
		{Key: "1", Tokens: 10, MeanEntropy: 0.5, MeanNLL: 1, Boxed: true},
		{Key: "1", Tokens: 30, MeanEntropy: 1.5, MeanNLL: 3, Truncated: true},
	}}}}
	s, err := Summarise([]ProblemRecord{p})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := s.Find("d", 0, 0)
	if r.Tokens != 20 || r.TokenEntropy != 1 || r.NLL != 2 || r.Truncated != 0.5 || r.Boxed != 0.5 {
		t.Errorf("means: tokens %g entropy %g nll %g truncated %g boxed %g; want 20 1 2 0.5 0.5",
			r.Tokens, r.TokenEntropy, r.NLL, r.Truncated, r.Boxed)
	}
}

// A verifier model's verdict on a pair robust did not decide counts in the robust figures
// (pass@1, majority, flips), never in the strict ones, and Verified is the share it decided.
func TestSummariseCountsVerifierVerdicts(t *testing.T) {
	p := ProblemRecord{Dataset: "d", ID: "x", Answers: [][][]grade.Verdict{{
		{{Key: "three"}, {Key: "three"}, {Key: "4"}, {Key: "5"}},
		{{Key: "three", Verifier: grade.CheckEqual}, {Key: "three", Verifier: grade.CheckEqual},
			{Key: "4", Verifier: grade.CheckUndecided}, {Key: "5", Verifier: grade.CheckNotEqual}},
	}}}
	s, err := Summarise([]ProblemRecord{p})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := s.Find("d", 0, 0)
	r, _ := s.Find("d", 0, 1)
	if before.AccRobust != 0 || before.Verified != 0 {
		t.Errorf("turn 0 without a verifier: robust %g, verified %g", before.AccRobust, before.Verified)
	}
	if r.AccRobust != 0.5 || r.MajRobust != 1 || r.AccStrict != 0 || r.MajStrict != 0 || r.Verified != 0.75 {
		t.Errorf("robust %g majority %g, strict %g majority %g, verified %g; want 0.5 1, 0 0, 0.75",
			r.AccRobust, r.MajRobust, r.AccStrict, r.MajStrict, r.Verified)
	}
	if f := r.FromPrevious.Robust; f.W2C != 0.5 || f.W2W != 0.5 {
		t.Errorf("robust flips %+v: want half wrong to correct", f)
	}
}

func TestSummariseAveragesProblemsAndDatasets(t *testing.T) {
	one := func(dataset, id string, correct ...bool) ProblemRecord {
		var samples []grade.Verdict
		for _, c := range correct {
			if c {
				samples = append(samples, right("1"))
			} else {
				samples = append(samples, wrong("2"))
			}
		}
		return ProblemRecord{Dataset: dataset, ID: id, Answers: [][][]grade.Verdict{{samples}}}
	}
	s, err := Summarise([]ProblemRecord{
		one("math", "a", true, true),   // accuracy 1, majority 1
		one("math", "b", false, true),  // 1/2, a tie: 1/2
		one("math", "c", false, false), // 0, 0
		one("aime", "a", true, true),   // 1, 1
		one("tie", "a", true, false),   // 1/2, 1/2
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"aime", "math", "tie", Average}; !reflect.DeepEqual(s.Datasets, want) {
		t.Fatalf("datasets %v, want %v", s.Datasets, want)
	}
	tests := []struct {
		name              string
		dataset           string
		acc, maj          float64
		problems, samples int
	}{
		{"problems weigh the same within a dataset", "math", 0.5, 0.5, 3, 6},
		{"a tie between a right and a wrong key counts one half", "tie", 0.5, 0.5, 1, 2},
		// Weighing problems instead would give accuracy 3/5.
		{"datasets weigh the same in the average", Average, 2.0 / 3, 2.0 / 3, 5, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := s.Find(tc.dataset, 0, 0)
			if !ok {
				t.Fatal("row missing")
			}
			if !near(r.AccStrict, tc.acc) || !near(r.MajStrict, tc.maj) || r.Problems != tc.problems || r.Samples != tc.samples {
				t.Errorf("acc %g maj %g problems %d samples %d; want %g %g %d %d",
					r.AccStrict, r.MajStrict, r.Problems, r.Samples, tc.acc, tc.maj, tc.problems, tc.samples)
			}
		})
	}
}

func TestFlipFractionsSumToOne(t *testing.T) {
	p := debateRecord()
	// Add a third turn so that FromStart and FromPrevious differ.
	p.Answers[0] = append(p.Answers[0], []grade.Verdict{wrong("6"), right("5"), none(), right("5")})
	p.Answers[1] = append(p.Answers[1], []grade.Verdict{right("5"), right("5"), right("5"), right("5")})
	s, err := Summarise([]ProblemRecord{p})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Rows {
		if r.Turn == 0 {
			continue
		}
		for _, f := range []Flips{r.FromPrevious.Strict, r.FromPrevious.Robust, r.FromStart.Strict, r.FromStart.Robust} {
			if sum := f.C2C + f.C2W + f.W2C + f.W2W; !near(sum, 1) {
				t.Errorf("agent %d turn %d: flips %+v sum to %g", r.Agent, r.Turn, f, sum)
			}
			if !near(f.Ratio, f.C2W+f.W2C) {
				t.Errorf("agent %d turn %d: ratio %g != C2W + W2C", r.Agent, r.Turn, f.Ratio)
			}
		}
	}
	// Agent 0 from turn 0 (R,R,W,W) to turn 2 (W,R,W,R): one of each transition.
	r, _ := s.Find("gsm8k", 0, 2)
	want := Flips{C2C: 0.25, C2W: 0.25, W2C: 0.25, W2W: 0.25, Ratio: 0.5}
	if r.FromStart.Strict != want {
		t.Errorf("agent 0 turn 0 -> 2: %+v, want %+v", r.FromStart.Strict, want)
	}
	// From turn 1 (R,R,R,R) to turn 2 (W,R,W,R).
	want = Flips{C2C: 0.5, C2W: 0.5, Ratio: 0.5}
	if r.FromPrevious.Strict != want {
		t.Errorf("agent 0 turn 1 -> 2: %+v, want %+v", r.FromPrevious.Strict, want)
	}
}

func TestSummariseRejectsBadRecords(t *testing.T) {
	ok := debateRecord()
	threeTurns := debateRecord()
	for a := range threeTurns.Answers {
		threeTurns.Answers[a] = append(threeTurns.Answers[a], threeTurns.Answers[a][1])
	}
	tests := []struct {
		name     string
		problems []ProblemRecord
	}{
		{"no problems", nil},
		{"no dataset name", []ProblemRecord{{ID: "x", Answers: ok.Answers}}},
		{"no agents", []ProblemRecord{{Dataset: "d"}}},
		{"no turns", []ProblemRecord{{Dataset: "d", Answers: [][][]grade.Verdict{{}}}}},
		{"no samples", []ProblemRecord{{Dataset: "d", Answers: [][][]grade.Verdict{{{}}}}}},
		{"agents with different turns", []ProblemRecord{{Dataset: "d", Answers: [][][]grade.Verdict{
			{{right("1")}, {right("1")}}, {{right("1")}}}}}},
		{"turns with different K", []ProblemRecord{{Dataset: "d", Answers: [][][]grade.Verdict{
			{{right("1")}, {right("1"), right("1")}}}}}},
		{"problems with different turns", []ProblemRecord{ok, threeTurns}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Summarise(tc.problems); err == nil {
				t.Error("want an error")
			}
		})
	}
}

func TestAnswerCountsMergeByKey(t *testing.T) {
	counts := answerCounts([][]grade.Verdict{
		{right("5"), wrong("6"), none(), right("5")},
		{wrong("6"), none(), {Key: ""}, right("5")},
	})
	// Support in order of appearance: 5, 6, none, "" (an empty key is an answer, not none).
	want := [][]int{{2, 1, 1, 0}, {1, 1, 1, 1}}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}

func TestPerProblem(t *testing.T) {
	turns, err := PerProblem(debateRecord())
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 {
		t.Fatalf("%d turns, want 2", len(turns))
	}
	first := turns[0]
	if first.Support != 4 || !near(first.EU, math.Log(2)) ||
		!reflect.DeepEqual(first.AccStrict, []float64{0.5, 0}) || first.ID != "p1" || first.Dataset != "gsm8k" {
		t.Errorf("turn 0: %+v", first)
	}
	if second := turns[1]; second.Support != 2 || !reflect.DeepEqual(second.AccRobust, []float64{1, 0.75}) {
		t.Errorf("turn 1: %+v", second)
	}
	if _, err := PerProblem(ProblemRecord{Dataset: "d"}); err == nil {
		t.Error("a record without agents: want an error")
	}
}

// TurnEU is the EU of PerProblem's turn, without a whole record.
func TestTurnEU(t *testing.T) {
	p := debateRecord()
	turns, err := PerProblem(p)
	if err != nil {
		t.Fatal(err)
	}
	for tt, want := range turns {
		eu, err := TurnEU(atTurn(p, tt))
		if err != nil || eu != want.EU {
			t.Errorf("turn %d: TurnEU = %v, %v; PerProblem's EU %v", tt, eu, err, want.EU)
		}
	}
	if _, err := TurnEU(nil); err == nil {
		t.Error("no agents: want an error")
	}
}

func TestCombineSeeds(t *testing.T) {
	run := func(acc0, acc1 bool) Summary {
		p := ProblemRecord{Dataset: "d", ID: "x", Answers: [][][]grade.Verdict{{{wrong("0")}}}}
		p.Answers[0][0][0].Strict, p.Answers[0][0][0].Robust = acc0, acc1
		s, err := Summarise([]ProblemRecord{p})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c, err := CombineSeeds([]Summary{run(true, true), run(false, true), run(true, true), run(false, true)})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.Mean.Find("d", 0, 0)
	sd, _ := c.Std.Find("d", 0, 0)
	if c.Seeds != 4 || r.AccStrict != 0.5 || sd.AccStrict != 0.5 || r.AccRobust != 1 || sd.AccRobust != 0 {
		t.Errorf("seeds %d: strict %g ± %g, robust %g ± %g; want 0.5 ± 0.5 (population std), 1 ± 0",
			c.Seeds, r.AccStrict, sd.AccStrict, r.AccRobust, sd.AccRobust)
	}
	if sd.Problems != 1 || sd.Dataset != "d" {
		t.Errorf("std row identity %s with %d problems, want d with 1", sd.Dataset, sd.Problems)
	}

	single, err := CombineSeeds([]Summary{run(true, false)})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := single.Mean.Find("d", 0, 0); m.AccStrict != 1 || m.AccRobust != 0 {
		t.Errorf("one seed: mean %+v", m)
	}
	if sd, _ := single.Std.Find("d", 0, 0); sd.AccStrict != 0 {
		t.Errorf("one seed: std %g, want 0", sd.AccStrict)
	}

	other, err := Summarise([]ProblemRecord{debateRecord()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CombineSeeds([]Summary{run(true, true), other}); err == nil {
		t.Error("runs of different shapes: want an error")
	}
	if _, err := CombineSeeds(nil); err == nil {
		t.Error("no runs: want an error")
	}
}

// BenchmarkSummarise measures an evaluation of the paper's size: 1,000 problems, two
// agents, five turns, K = 16.
func BenchmarkSummarise(b *testing.B) {
	const problems, agents, turns, k = 1000, 2, 5, 16
	records := make([]ProblemRecord, problems)
	for i := range records {
		p := ProblemRecord{Dataset: []string{"gsm8k", "math500", "aime24"}[i%3], ID: fmt.Sprint(i)}
		p.Answers = make([][][]grade.Verdict, agents)
		for a := range agents {
			for t := range turns {
				samples := make([]grade.Verdict, k)
				for j := range samples {
					key := fmt.Sprint((i + a + t*j) % 5)
					samples[j] = grade.Verdict{Key: key, Strict: key == "0", Robust: key == "0", NoAnswer: j == 7, Tokens: 400}
				}
				p.Answers[a] = append(p.Answers[a], samples)
			}
		}
		records[i] = p
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Summarise(records); err != nil {
			b.Fatal(err)
		}
	}
}
