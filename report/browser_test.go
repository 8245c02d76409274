package report

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/evalrun"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/internal/browsertest"
	"github.com/umad-dev/umad/rollouts"
	"github.com/umad-dev/umad/uncertainty"
)

// Hostile text the browser must show as text: were it markup, the script or the image's
// handler would mark the body.
const (
	hostileQuestion = "<script>document.body.setAttribute('data-pwned','1')</script> What is 1+1?"
	hostileResponse = "</textarea></script><img src=x onerror=\"document.body.setAttribute('data-pwned','2')\"> so \\boxed{7}"
)

// turn is one agent's response: its answer, correct when it is the gold.
func turn(text, answer, gold string) debate.AgentTurn {
	a := answer
	v := grade.Verdict{Key: answer, Strict: answer == gold, Robust: answer == gold, Tokens: 10}
	return debate.AgentTurn{Text: text, Answer: &a, Grade: v}
}

// debateRecord builds a two-agent, two-turn debate of K = 2 from answers[turn][agent][k].
func debateRecord(index int, p data.Problem, text func(t, a, k int) string, answers [2][2][2]string) debate.Record {
	r := debate.Record{Index: index, Problem: p, Turns: make([][][]debate.AgentTurn, 2)}
	for t := range 2 {
		r.Turns[t] = make([][]debate.AgentTurn, 2)
		for a := range 2 {
			for k := range 2 {
				r.Turns[t][a] = append(r.Turns[t][a], turn(text(t, a, k), answers[t][a][k], p.Gold))
			}
		}
	}
	return r
}

// browserRun writes a run's rollouts of three problems, in reverse problem order as a
// run's appends may leave them: a1 (agent 0's trajectory 0 goes right to wrong, which
// leaves the agents disagreeing), b2 (both agents end on one wrong answer, in hostile
// text with a very long line) and c3 (agent 1 goes wrong to right); and returns it as a
// method.
func browserRun(t *testing.T, dir, name string) Method {
	t.Helper()
	plain := func(t, a, k int) string { return "I think so." }
	long := strings.Repeat("x", 20000)
	recs := []debate.Record{
		debateRecord(2, data.Problem{Dataset: "math", ID: "c3", Question: "Find c.", Gold: "4"},
			func(t, a, k int) string { return "the needle-in-haystack step" }, [2][2][2]string{{{"4", "4"}, {"1", "2"}}, {{"4", "4"}, {"4", "4"}}}),
		debateRecord(1, data.Problem{Dataset: "gsm8k", ID: "b2", Question: "What is 2+3?", Gold: "5"},
			func(t, a, k int) string { return hostileResponse + "\n" + long }, [2][2][2]string{{{"6", "6"}, {"8", "8"}}, {{"7", "7"}, {"7", "7"}}}),
		debateRecord(0, data.Problem{Dataset: "gsm8k", ID: "a1", Question: hostileQuestion, Gold: "2"},
			plain, [2][2][2]string{{{"2", "2"}, {"2", "2"}}, {{"3", "2"}, {"2", "2"}}}),
	}
	path := filepath.Join(dir, name, "seed-1", evalrun.RolloutsFile)
	if err := rollouts.WriteFile(path, recs); err != nil {
		t.Fatal(err)
	}
	var probs []uncertainty.ProblemRecord
	for _, r := range recs {
		probs = append(probs, evalrun.ProblemRecord(r))
	}
	s, err := uncertainty.Summarise(probs)
	if err != nil {
		t.Fatal(err)
	}
	c, err := uncertainty.CombineSeeds([]uncertainty.Summary{s})
	if err != nil {
		t.Fatal(err)
	}
	return Method{Name: name, Summary: c, Replicates: []Replicate{{Key: "1", Problems: probs, Rollouts: path}}}
}

func TestOutcomes(t *testing.T) {
	v := func(key, gold string) grade.Verdict { return grade.Verdict{Key: key, Strict: key == gold} }
	none := grade.Verdict{NoAnswer: true}
	// verdicts[agent][turn][k], two agents and two turns; gold "1".
	for _, c := range []struct {
		name     string
		verdicts [][][]grade.Verdict
		want     [][]string
	}{
		{"right to wrong, then disagreeing", [][][]grade.Verdict{{{v("1", "1")}, {v("2", "1")}}, {{v("1", "1")}, {v("1", "1")}}}, [][]string{{RightToWrong, Disagreement}}},
		{"wrong to right, agreeing", [][][]grade.Verdict{{{v("2", "1")}, {v("1", "1")}}, {{v("1", "1")}, {v("1", "1")}}}, [][]string{{WrongToRight}}},
		{"unanimous but wrong", [][][]grade.Verdict{{{v("2", "1")}, {v("3", "1")}}, {{v("1", "1")}, {v("3", "1")}}}, [][]string{{RightToWrong, UnanimousWrong}}},
		{"no answer from all is not unanimous", [][][]grade.Verdict{{{v("2", "1")}, {none}}, {{v("2", "1")}, {none}}}, [][]string{{}}},
		{"no answer against an answer disagrees", [][][]grade.Verdict{{{v("2", "1")}, {none}}, {{v("2", "1")}, {v("2", "1")}}}, [][]string{{Disagreement}}},
		{"each trajectory its own", [][][]grade.Verdict{{{v("1", "1"), v("1", "1")}, {v("1", "1"), v("2", "1")}}, {{v("1", "1"), v("1", "1")}, {v("1", "1"), v("1", "1")}}},
			[][]string{{}, {RightToWrong, Disagreement}}},
	} {
		if got := outcomes(c.verdicts); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Two runs side by side: each problem once, with both runs' debates, in the first run's
// problem order.
func TestBrowserDataPairsRuns(t *testing.T) {
	dir := t.TempDir()
	page, err := browserData([]Method{browserRun(t, dir, "zero"), browserRun(t, dir, "trained")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range page.Problems {
		got = append(got, p.ID)
		if len(p.Debates) != 2 || p.Debates[0].Run != 0 || p.Debates[1].Run != 1 {
			t.Errorf("problem %s: debates %+v, want one of each run", p.ID, p.Debates)
		}
	}
	if want := []string{"a1", "b2", "c3"}; !reflect.DeepEqual(got, want) || !reflect.DeepEqual(page.Runs, []string{"zero", "trained"}) {
		t.Errorf("problems %v of runs %v, want %v of [zero trained]", got, page.Runs, want)
	}
	a1 := page.Problems[0].Debates[0]
	if !reflect.DeepEqual(a1.Tags, [][]string{{RightToWrong, Disagreement}, {}}) || len(a1.EU) != 2 || a1.EU[0] != 0 || !(a1.EU[1] > 0) {
		t.Errorf("a1: tags %v, EU %v; want trajectory 0 right to wrong and disagreeing, EU 0 then above 0", a1.Tags, a1.EU)
	}
}

// The browser in headless chromium: its script renders every problem, the URL fragment
// filters by outcome and by text, hostile text is shown and never run, and the page is
// the same bytes when written again.
func TestBrowserInChromium(t *testing.T) {
	browsertest.Chromium(t)
	dir := t.TempDir()
	m := browserRun(t, dir, "run-<b>1</b>")
	out := filepath.Join(dir, "report")
	if err := WriteBrowser(out, []Method{m}); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(out, PageFile)
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if again := filepath.Join(dir, "again"); WriteBrowser(again, []Method{m}) != nil {
		t.Fatal("second write failed")
	} else if raw2, _ := os.ReadFile(filepath.Join(again, PageFile)); !bytes.Equal(raw, raw2) {
		t.Error("the same run wrote two different pages")
	}
	for _, bad := range []string{"<script>document", "<img src=x", "<b>1</b>", `src="http`, `href="http`, "url("} {
		if bytes.Contains(raw, []byte(bad)) {
			t.Errorf("the page's source holds %q unescaped (or fetches from the network)", bad)
		}
	}

	all := browsertest.DumpDOM(t, page, "")
	problems := regexp.MustCompile(`<section class="problem" id="p-([^"]*)"`)
	sections := func(dom string) []string {
		var ids []string
		for _, m := range problems.FindAllStringSubmatch(dom, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	if got, want := sections(all), []string{"gsm8k-a1", "gsm8k-b2", "math-c3"}; !reflect.DeepEqual(got, want) || !strings.Contains(all, "3 of 3 problems match") {
		t.Fatalf("unfiltered page shows problems %v, want %v with its status line:\n%.3000s", got, want, all)
	}
	for _, want := range []string{"&lt;script&gt;document.body.setAttribute('data-pwned','1')&lt;/script&gt; What is 1+1?",
		"&lt;/textarea&gt;&lt;/script&gt;&lt;img src=x onerror=", strings.Repeat("x", 20000), "run-&lt;b&gt;1&lt;/b&gt;, seed 1"} {
		if !strings.Contains(all, want) {
			t.Errorf("the page does not show %.80q as text", want)
		}
	}
	if strings.Contains(all, `data-pwned="`) || strings.Contains(all, "<img") {
		t.Error("hostile text ran as markup in the page")
	}
	if !strings.Contains(all, "<svg") {
		t.Error("the page has no inline figure")
	}

	for _, c := range []struct{ fragment, want string }{
		{"#outcome=" + RightToWrong, "gsm8k-a1"},
		{"#outcome=" + UnanimousWrong, "gsm8k-b2"},
		{"#outcome=" + WrongToRight + "&dataset=math", "math-c3"},
		{"#q=NEEDLE-in", "math-c3"},
	} {
		dom := browsertest.DumpDOM(t, page, c.fragment)
		if got := sections(dom); !reflect.DeepEqual(got, []string{c.want}) || !strings.Contains(dom, "1 of 3 problems match") {
			t.Errorf("%s shows problems %v, want [%s] and 1 of 3 matching", c.fragment, got, c.want)
		}
	}
	browsertest.Screenshot(t, page, "#outcome="+RightToWrong)
}

// Table 1's cells link to the browser beside it, filtered to their method and dataset; a
// link opens in chromium on those problems of that method alone.
func TestTable1LinksToBrowser(t *testing.T) {
	browsertest.Chromium(t)
	dir := t.TempDir()
	methods := []Method{browserRun(t, dir, "Zero Shot"), browserRun(t, dir, "trained")}
	out := filepath.Join(dir, "cmp")
	if err := WriteTable1(out, methods, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteBrowser(out, methods); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, Table1HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`<a href="([^"]*)">`).FindAllStringSubmatch(string(raw), -1)
	// Two methods x two agents x three columns (gsm8k, math, Average) x two turns.
	if len(links) != 24 {
		t.Fatalf("table1.html has %d links, want one per cell (24)", len(links))
	}
	want := "index.html#dataset=gsm8k&amp;run=trained"
	if !strings.Contains(string(raw), `<a href="`+want+`">`) || !strings.Contains(string(raw), `<a href="index.html#run=Zero+Shot">`) {
		t.Fatalf("table1.html does not link trained's gsm8k cells to %s and Zero Shot's Average to its problems", want)
	}
	dom := browsertest.DumpDOM(t, filepath.Join(out, PageFile), "#dataset=gsm8k&run=trained")
	if !strings.Contains(dom, "2 of 3 problems match") || !strings.Contains(dom, "<h4>trained, seed 1</h4>") || strings.Contains(dom, "<h4>Zero Shot") {
		t.Errorf("the link shows the wrong problems or runs:\n%.3000s", dom)
	}
}

// A rollouts file with a ragged record (an agent missing a turn) is refused in one line
// naming the file and the problem, and no page is written.
func TestBrowserRefusesRaggedRecord(t *testing.T) {
	dir := t.TempDir()
	m := browserRun(t, dir, "run")
	r := debateRecord(0, data.Problem{Dataset: "gsm8k", ID: "bad", Question: "?", Gold: "1"},
		func(t, a, k int) string { return "" }, [2][2][2]string{{{"1", "1"}, {"1", "1"}}, {{"1", "1"}, {"1", "1"}}})
	r.Turns[1] = r.Turns[1][:1]
	if err := rollouts.WriteFile(m.Replicates[0].Rollouts, []debate.Record{r}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report")
	err := WriteBrowser(out, []Method{m})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), m.Replicates[0].Rollouts+" problem gsm8k/bad") {
		t.Errorf("error %v, want one line naming the file and problem gsm8k/bad", err)
	}
	if _, err := os.Stat(filepath.Join(out, PageFile)); err == nil {
		t.Error("a page was written from the ragged record")
	}
}
