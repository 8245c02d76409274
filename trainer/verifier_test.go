package trainer

import (
	"context"
	"testing"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/verifier"
)

// A robust+verifier run sends the answers robust did not decide to the verifier, rewards
// those it calls equal, and each metrics line counts its agent's verdicts.
func TestVerifierMetrics(t *testing.T) {
	opt, err := engine.ParseOptions(0, 0, 1, "f16", "auto")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := verifier.ReadTemplate(testmodel.VerifierPrompt(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.Open(testmodel.GGUF(t, "qwen2"), tmpl, engine.Placement{}, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	tr := &Trainer{cfg: Config{Settings: Settings{Turns: 1, Agents: make([]Agent, 2), Reward: grade.Verified}}, live: Live{Checker: v}}
	answer := func(s string) debate.AgentTurn {
		return debate.AgentTurn{Answer: &s, Grade: grade.GradeAnswer(s, "3")}
	}
	recs := []debate.Record{{Problem: data.Problem{Question: "1+2?", Gold: "3"},
		Turns: [][][]debate.AgentTurn{{{answer("three"), answer("3"), answer("11:21")}, {answer("7"), {Grade: grade.Verdict{NoAnswer: true}}, answer("(B)")}}}}}
	if err := tr.verify(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	lines := []trainlog.StepMetrics{{Turn: 0, Agent: 0}, {Turn: 0, Agent: 1}}
	if err := tr.verifierMetrics(recs, lines); err != nil {
		t.Fatal(err)
	}
	c := correctness(recs[0], grade.Verified)
	for a, want := range []int{2, 1} { // three and 11:21; (B)
		m := lines[a].Verifier
		if m == nil || m.Decided+m.Undecided != want || m.Skipped != 0 {
			t.Errorf("agent %d: counts %+v, want %d pairs", a, m, want)
			continue
		}
		robust := 0
		for _, at := range recs[0].Turns[0][a] {
			if at.Grade.Robust {
				robust++
			}
		}
		if got := int(c[0][a][0] + c[0][a][1] + c[0][a][2]); got != robust+m.Equal {
			t.Errorf("agent %d: %d rewards, want robust's %d plus the verifier's %d", a, got, robust, m.Equal)
		}
	}
}
