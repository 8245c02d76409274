package grade

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// math500Pairs returns (pred, gold) for MATH500: pred is the answer
// extracted from the reference solution, gold the row's answer.
func math500Pairs(b testing.TB, mode Mode) [][2]string {
	rows := readJSONL(b, filepath.Join(sharedDir(b), "math500", "test.jsonl"))
	pairs := make([][2]string, 0, len(rows))
	for i, row := range rows {
		where := fmt.Sprintf("math500 row %d", i+1)
		solution := field(b, row, "solution", where)
		// Each mode's own extraction: strict takes the last box alone, as the reference;
		// robust joins adjacent boxes into one answer.
		pred, ok := Extract(solution, ExtractOptions{})
		if mode == Strict {
			var boxed string
			if boxed, ok = LastBoxedOnlyString(solution); ok {
				pred, ok = RemoveBoxed(boxed)
			}
		}
		if !ok {
			b.Fatalf("%s: no answer in the solution", where)
		}
		pairs = append(pairs, [2]string{pred, field(b, row, "answer", where)})
	}
	return pairs
}

// math500SolutionPairs returns (gold, solution) for MATH500: the whole
// solution stands for a gold answer written as a solution, so neither the
// exact-string shortcut nor a shared spelling helps.
func math500SolutionPairs(b testing.TB) [][2]string {
	rows := readJSONL(b, filepath.Join(sharedDir(b), "math500", "test.jsonl"))
	pairs := make([][2]string, 0, len(rows))
	for i, row := range rows {
		where := fmt.Sprintf("math500 row %d", i+1)
		pairs = append(pairs, [2]string{field(b, row, "answer", where), field(b, row, "solution", where)})
	}
	return pairs
}

func benchmarkGrading(b *testing.B, mode Mode, pairs [][2]string) {
	graded, correct := 0, 0
	b.ResetTimer()
	for b.Loop() {
		for _, p := range pairs {
			if Equiv(mode, p[0], p[1]) {
				correct++
			}
		}
		graded += len(pairs)
	}
	b.ReportMetric(float64(graded)/b.Elapsed().Seconds(), "answers/s")
	if correct != graded {
		b.Fatalf("%s: %d of %d reference answers graded wrong", mode, graded-correct, graded)
	}
}

func BenchmarkStrictMATH500(b *testing.B) { benchmarkGrading(b, Strict, math500Pairs(b, Strict)) }
func BenchmarkRobustMATH500(b *testing.B) { benchmarkGrading(b, Robust, math500Pairs(b, Robust)) }

// BenchmarkRobustMATH500Solutions parses both sides of every pair.
func BenchmarkRobustMATH500Solutions(b *testing.B) {
	benchmarkGrading(b, Robust, math500SolutionPairs(b))
}

func BenchmarkKeyMATH500(b *testing.B) {
	pairs := math500Pairs(b, Robust)
	keyed := 0
	b.ResetTimer()
	for b.Loop() {
		for _, p := range pairs {
			Key(p[1])
		}
		keyed += len(pairs)
	}
	b.ReportMetric(float64(keyed)/b.Elapsed().Seconds(), "answers/s")
}

// gsm8kPairs returns (pred, gold) for GSM8K's test split: pred is the last
// number of the solution's working, before its "#### N" line, gold is N.
func gsm8kPairs(t testing.TB) [][2]string {
	rows := readJSONL(t, filepath.Join(sharedDir(t), "gsm8k", "test.jsonl"))
	pairs := make([][2]string, 0, len(rows))
	for i, row := range rows {
		sol := field(t, row, "answer", fmt.Sprintf("gsm8k row %d", i+1))
		j := strings.LastIndex(sol, "####")
		pred, _ := Extract(sol[:j], ExtractOptions{LastNumberFallback: true})
		pairs = append(pairs, [2]string{pred, strings.TrimSpace(sol[j+4:])})
	}
	return pairs
}

// TestRuleRates logs how often each rule decides on MATH500 (solution
// against gold) and GSM8K (last number of the working against the "####"
// answer); run with -v for the figures.
func TestRuleRates(t *testing.T) {
	for _, set := range []struct {
		name  string
		pairs [][2]string
	}{{"MATH500", math500Pairs(t, Robust)}, {"MATH500 gold against the whole solution", math500SolutionPairs(t)}, {"GSM8K", gsm8kPairs(t)}} {
		counts := map[Rule]int{}
		for _, p := range set.pairs {
			_, rule := RobustEquivRule(p[0], p[1])
			counts[rule]++
		}
		var b strings.Builder
		for _, r := range []Rule{RuleExact, RuleText, RuleNumeric, RuleApprox, RuleSymbolic, RuleTuple, RuleSet, RuleInterval, RuleRelation, RuleNone} {
			fmt.Fprintf(&b, " %s %d (%.1f%%)", r, counts[r], 100*float64(counts[r])/float64(len(set.pairs)))
		}
		t.Logf("%s, %d pairs:%s", set.name, len(set.pairs), b.String())
		if strings.HasPrefix(set.name, "MATH500") && counts[RuleNone] != 0 {
			t.Errorf("MATH500: %d solutions judged different from their gold", counts[RuleNone])
		}
	}
}
