package verifier

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/internal/testmodel"
)

func TestMain(m *testing.M) { os.Exit(testmodel.Main(m)) }

// open loads the tiny qwen2 model as a verifier: its verdicts are noise, but the path,
// the caching and the counts are real.
func open(t *testing.T) *Verifier {
	t.Helper()
	opt, err := engine.ParseOptions(0, 0, 1, "f16", "auto")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := ReadTemplate(testmodel.VerifierPrompt(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Open(testmodel.GGUF(t, "qwen2"), tmpl, engine.Placement{}, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

func TestParseVerdict(t *testing.T) {
	for out, want := range map[string]grade.Check{
		"A": grade.CheckEqual, " A\n": grade.CheckEqual, "CORRECT": grade.CheckEqual, "A: CORRECT": grade.CheckEqual,
		`\boxed{A}`: grade.CheckEqual, "A.": grade.CheckEqual,
		"B": grade.CheckNotEqual, "INCORRECT": grade.CheckNotEqual, "C": grade.CheckNotEqual, "INVALID": grade.CheckNotEqual,
		// Output that names no verdict, or names one inside prose, is undecided, never equal.
		"": grade.CheckUndecided, "a": grade.CheckUndecided, "Answer A": grade.CheckUndecided,
		"A B": grade.CheckUndecided, "The answer is CORRECT because": grade.CheckUndecided, "AAAA": grade.CheckUndecided,
		"\ufffd\ufffd": grade.CheckUndecided, "A\nB": grade.CheckUndecided,
	} {
		if got := ParseVerdict(out); got != want {
			t.Errorf("ParseVerdict(%q) = %q, want %q", out, got, want)
		}
	}
}

// A template's fields are put in once each, in their places, with {{ and }} as braces; a
// brace that is neither, an unknown field or a missing one is refused.
func TestTemplate(t *testing.T) {
	tmpl, err := ParseTemplate("Q: {question}\nGold: {gold_answer}; {{boxed}}\nAnswer: {llm_response}\n")
	if err != nil {
		t.Fatal(err)
	}
	got := tmpl.Prompt(Pair{Question: "What is {gold_answer}?", Gold: `\frac{1}{2}`, Answer: "one half"})
	if want := "Q: What is {gold_answer}?\nGold: \\frac{1}{2}; {boxed}\nAnswer: one half\n"; got != want {
		t.Errorf("prompt %q, want %q", got, want)
	}
	for _, bad := range []string{
		"{question} {gold_answer}",                    // a field missing
		"{question} {gold_answer} {llm_response} {x}", // an unknown field
		"{question} {gold_answer} {llm_response} {",   // unclosed
		"{question} {gold_answer} {llm_response} }",   // a lone brace
	} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Errorf("ParseTemplate(%q) accepted", bad)
		}
	}
	if _, err := ReadTemplate(filepath.Join(t.TempDir(), "missing.txt")); err == nil || !strings.HasPrefix(err.Error(), "verifier prompt") {
		t.Errorf("a missing template file: %v", err)
	}
}

// A pair is asked once per run: repeated in one call, or asked again in a later one.
func TestCheckCaches(t *testing.T) {
	v := open(t)
	pairs := []Pair{{"Q1", "3", "three"}, {"Q1", "3", "three"}, {"Q2", "11:21", "681"}, {"Q3", "3", "  three"}}
	got, c, err := v.Check(context.Background(), pairs, 0)
	if err != nil {
		t.Fatal(err)
	}
	// "three" and "  three" have the same key: asked once.
	if c.Asked != 2 || c.Pairs != 4 || c.Skipped != 0 || c.Decided()+c.Undecided != 4 {
		t.Fatalf("counts %+v: want 2 asked of 4 pairs, none skipped", c)
	}
	if got[0] != got[1] || got[0] != got[3] {
		t.Errorf("one pair got verdicts %q, %q and %q", got[0], got[1], got[3])
	}
	for _, g := range got {
		if g != grade.CheckEqual && g != grade.CheckNotEqual && g != grade.CheckUndecided {
			t.Errorf("verdict %q", g)
		}
	}
	again, c2, err := v.Check(context.Background(), pairs[:3], 0)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Asked != 0 || again[0] != got[0] || again[2] != got[2] {
		t.Errorf("second call asked %d pairs, verdicts %q, want the cached %q", c2.Asked, again, got[:3])
	}
}

// A spent budget skips the pairs it did not reach; they are not cached, so a later call
// asks them.
func TestCheckBudget(t *testing.T) {
	v := open(t)
	pairs := []Pair{{"Q", "3", "three"}, {"Q", "4", "four"}}
	got, c, err := v.Check(context.Background(), pairs, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.Skipped != 2 || got[0] != grade.CheckSkipped || got[1] != grade.CheckSkipped || c.Asked != 0 {
		t.Fatalf("a spent budget gave %q, counts %+v: want both skipped", got, c)
	}
	if _, c, err = v.Check(context.Background(), pairs, 0); err != nil || c.Asked != 2 || c.Skipped != 0 {
		t.Errorf("after the budget: counts %+v, %v: want both asked", c, err)
	}
	// An interruption is an error, not a skip.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := v.Check(ctx, []Pair{{"Q", "5", "five"}}, time.Minute); err == nil {
		t.Error("a cancelled context was not an error")
	}
}

// Only answers robust did not decide go to the verifier; the others keep no verdict.
func TestRecords(t *testing.T) {
	v := open(t)
	answer := func(s string) debate.AgentTurn {
		return debate.AgentTurn{Answer: &s, Grade: grade.GradeAnswer(s, "3")}
	}
	recs := []debate.Record{{
		Problem: data.Problem{Question: "How many?", Gold: "3"},
		Turns: [][][]debate.AgentTurn{
			{{answer("3"), answer("three"), {}}, {answer("7"), answer("x = 3"), answer("(B)")}},
			{{answer("three"), answer("3.0"), answer("11:21")}, {{}, {}, {}}},
		},
	}}
	c, err := v.Records(context.Background(), recs, 0)
	if err != nil {
		t.Fatal(err)
	}
	// three (twice), (B) and 11:21: four pairs, three distinct.
	if c.Pairs != 4 || c.Asked != 3 {
		t.Fatalf("counts %+v: want 4 pairs, 3 asked", c)
	}
	sent := map[[3]int]bool{{0, 0, 1}: true, {0, 1, 2}: true, {1, 0, 0}: true, {1, 0, 2}: true} // turn, agent, traj
	for tt, turn := range recs[0].Turns {
		for a, byTraj := range turn {
			for k, at := range byTraj {
				if (at.Grade.Verifier != "") != sent[[3]int{tt, a, k}] {
					t.Errorf("turn %d agent %d traj %d: verifier %q", tt, a, k, at.Grade.Verifier)
				}
			}
		}
	}
	tally := Tally(recs, 2, 2)
	if n := tally[0][0].Pairs + tally[0][1].Pairs + tally[1][0].Pairs + tally[1][1].Pairs; n != 4 || tally[1][1].Pairs != 0 {
		t.Errorf("tally %+v: want 4 pairs, none for agent 1 at turn 1", tally)
	}
}

// Records takes robust's verdict from the answer's Grade instead of judging the pair
// again: an answer its grade calls equal is not sent, whatever its text.
func TestRecordsUsesGrade(t *testing.T) {
	v := open(t)
	three := "three"
	recs := []debate.Record{{
		Problem: data.Problem{Question: "How many?", Gold: "3"},
		Turns:   [][][]debate.AgentTurn{{{{Answer: &three, Grade: grade.Verdict{Robust: true}}}}},
	}}
	c, err := v.Records(context.Background(), recs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pairs != 0 || recs[0].Turns[0][0][0].Grade.Verifier != "" {
		t.Errorf("counts %+v, verdict %q: an answer graded equal was sent", c, recs[0].Turns[0][0][0].Grade.Verifier)
	}
}

// A verifier file that does not load is one clear error.
func TestOpenError(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(bad, []byte("not a gguf"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(t.TempDir(), "missing.gguf")} {
		_, err := Open(path, Template{}, engine.Placement{}, engine.Options{Threads: 1})
		if err == nil || !strings.HasPrefix(err.Error(), "verifier") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%s) = %v: want a one-line verifier error", path, err)
		}
	}
}
