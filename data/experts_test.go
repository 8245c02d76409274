package data

import (
	"strings"
	"testing"
)

func TestExpertsTask(t *testing.T) {
	cfg := SyntheticConfig{Terms: 2, MaxOperand: 5, Ops: "+*", Task: TaskExperts}
	ps, err := SyntheticWith(400, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	distinct := map[string]bool{}
	for _, p := range ps {
		expr := strings.TrimSuffix(strings.TrimPrefix(p.Question, "What is "), "?")
		if got := evaluate(t, expr); got != p.Gold {
			t.Fatalf("%s: gold %s, the expression is %s", p.Question, p.Gold, got)
		}
		op := strings.Fields(expr)[1]
		if p.Subject != KindName(op[0]) {
			t.Fatalf("%s: subject %q, want %q", p.Question, p.Subject, KindName(op[0]))
		}
		if p.Solution != expr+" = "+p.Gold {
			t.Fatalf("%s: solution %q", p.Question, p.Solution)
		}
		kinds[p.Subject]++
		distinct[p.Question] = true
		claims, err := ExpertClaims(p, cfg.Ops)
		if err != nil {
			t.Fatal(err)
		}
		for e, c := range claims {
			right := c.Answer == p.Gold
			if cfg.Ops[e] == op[0] && (!right || c.Work != p.Solution) {
				t.Fatalf("%s: the %s expert claims %q", p.Question, KindName(cfg.Ops[e]), c.Work)
			}
			if want := expr + " = " + c.Answer; c.Work != want {
				t.Fatalf("%s: claim %q, want the question's expression: %q", p.Question, c.Work, want)
			}
			if !strings.Contains(maskFree(c.WorkedResponse()), c.Answer) {
				t.Fatalf("%q does not show its result outside the box", c.WorkedResponse())
			}
		}
	}
	// Both kinds, about evenly, and every one of the 2 x 5 x 5 questions.
	if kinds["sum"] < 150 || kinds["product"] < 150 || len(kinds) != 2 {
		t.Errorf("kinds %v, want sums and products about evenly", kinds)
	}
	if len(distinct) != 50 {
		t.Errorf("%d distinct questions, want 50", len(distinct))
	}
	// The same seed gives the same set; problem i does not depend on n.
	again, _ := SyntheticWith(10, 3, cfg)
	for i := range again {
		if again[i] != ps[i] {
			t.Fatalf("problem %d differs between a set of 10 and one of 400", i)
		}
	}
}

// maskFree is a response with its boxed part removed, as a debate message masks it.
func maskFree(s string) string {
	if i := strings.Index(s, `\boxed{`); i >= 0 {
		return s[:i]
	}
	return s
}

func TestExpertsTaskRefusals(t *testing.T) {
	for _, tc := range []struct {
		cfg  SyntheticConfig
		want string
	}{
		{SyntheticConfig{Terms: 2, MaxOperand: 5, Ops: "++*", Task: TaskExperts}, "name a kind twice"},
		{SyntheticConfig{Terms: 2, MaxOperand: 5, Ops: "+*", Task: "quiz"}, `unknown task "quiz"`},
	} {
		if _, err := SyntheticWith(3, 1, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
	mixed := Problem{Question: "What is 2 + 3 * 4?"}
	if _, err := ExpertClaims(mixed, "+*"); err == nil || !strings.Contains(err.Error(), "mixes operators") {
		t.Errorf("a mixed expression: %v", err)
	}
	if _, err := ExpertClaims(Problem{Question: "How many?"}, "+*"); err == nil {
		t.Error("a question that is not synthetic must be refused")
	}
}

func TestArithmeticTaskUnchanged(t *testing.T) {
	// The experts task must not move the default task's draws: seed 1 gives the problems it
	// gave before the task existed.
	a, _ := SyntheticWith(50, 1, DefaultSynthetic)
	for i, want := range []string{"What is 7 * 9?", "What is 3 * 8?", "What is 6 - 7?"} {
		if a[i].Question != want {
			t.Errorf("problem %d: %q, want %q", i, a[i].Question, want)
		}
	}
	b, _ := SyntheticWith(50, 1, SyntheticConfig{Terms: 2, MaxOperand: 9, Ops: "+-*", Task: TaskArithmetic})
	for i := range a {
		if a[i] != b[i] || a[i].Subject != "arithmetic" {
			t.Fatalf("problem %d: %+v vs %+v", i, a[i], b[i])
		}
	}
}
