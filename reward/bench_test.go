package reward

import (
	"fmt"
	"path/filepath"
	"testing"
)

// math500Pairs returns (pred, gold) for MATH500: pred is the answer
// extracted from the reference solution, gold the row's answer.
func math500Pairs(b *testing.B) [][2]string {
	rows := readJSONL(b, filepath.Join(sharedDir(b), "math500", "test.jsonl"))
	pairs := make([][2]string, 0, len(rows))
	for i, row := range rows {
		where := fmt.Sprintf("math500 row %d", i+1)
		pred, ok := Extract(field(b, row, "solution", where), ExtractOptions{})
		if !ok {
			b.Fatalf("%s: no answer in the solution", where)
		}
		pairs = append(pairs, [2]string{pred, field(b, row, "answer", where)})
	}
	return pairs
}

func benchmarkGrading(b *testing.B, mode Mode) {
	pairs := math500Pairs(b)
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

func BenchmarkStrictMATH500(b *testing.B) { benchmarkGrading(b, Strict) }
func BenchmarkRobustMATH500(b *testing.B) { benchmarkGrading(b, Robust) }

func BenchmarkKeyMATH500(b *testing.B) {
	pairs := math500Pairs(b)
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
