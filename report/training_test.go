package report

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/uncertainty"
)

// writeMetrics writes a run's metrics log with the trainer's own writer.
func writeMetrics(t *testing.T, dir string, lines ...any) {
	t.Helper()
	log, err := trainlog.Open(filepath.Join(dir, trainlog.File), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if err := log.Append(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
}

// trainSteps are steps 1..3 of 2 agents and 2 turns. Step s takes 3.7 s plus the
// syncs plus its rollout of 4+2s seconds: per agent and turn 0.25 log-probs, 0.125
// reference and 0.5 update, and 0.2 s for the rest. Agent 0 syncs in sync0 seconds,
// agent 1 in sync1. The rollout generates 100·s tokens/s; each agent and turn trains on
// 70 response tokens (280 a step over 4 × 0.875 s: 80 tokens/s).
func trainSteps(sync0, sync1 float64) []any {
	var lines []any
	for s := 1; s <= 3; s++ {
		rollout := float64(4 + 2*s)
		for turn := range 2 {
			for a := range 2 {
				sync := sync0
				if a == 1 {
					sync = sync1
				}
				lines = append(lines, trainlog.StepMetrics{
					Kind: trainlog.KindTrain, Step: s, Agent: a, Name: "agent " + strconv.Itoa(a), Turn: turn,
					Accuracy: 0.1 * float64(s+a), Team: 0.2 * float64(s), KL: 0.01 * float64(s), Entropy: 1.5 - 0.1*float64(s),
					GradNorm: 1 + float64(a), ClipFrac: 0.05 * float64(turn+1), RolloutTokensPerSec: 100 * float64(s), Tokens: 70,
					Times: trainlog.Times{Rollout: rollout, LogProbs: 0.25, Reference: 0.125, Update: 0.5, Sync: sync,
						Step: rollout + 1 + 0.5 + 2 + sync0 + sync1 + 0.2},
				})
			}
		}
	}
	return lines
}

// summary summarises the report test's debate records of 2 turns: agent 0 half right at
// turn 0, agent 1 wrong; both right at turn 1, except with flip agent 0 half right.
func summary(t *testing.T, flip bool) *uncertainty.Summary {
	t.Helper()
	s, err := uncertainty.Summarise(records(2, flip))
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

// checkNumber checks a numeric field of a CSV line, checked against want.
func checkNumber(t *testing.T, records [][]string, column string, want float64, key ...string) {
	t.Helper()
	got, err := strconv.ParseFloat(field(t, records, column, key...), 64)
	if err != nil || math.Abs(got-want) > 1e-9 {
		t.Errorf("%s of %v = %v (%v), want %v", column, key, got, err, want)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteTraining(t *testing.T) {
	dir := t.TempDir()
	var lines []any
	lines = append(lines, trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 0, Problems: 2,
		Accuracy: [][]float64{{0.25, 0.5}, {0.15, 0.35}}, Summary: summary(t, true)})
	lines = append(lines, trainSteps(0.1, 0.2)[:8]...)
	// A validation without a summary, as runs before summaries were logged.
	lines = append(lines, trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 2, Problems: 2,
		Accuracy: [][]float64{{0.4, 0.6}, {0.2, 0.5}}})
	lines = append(lines, trainSteps(0.1, 0.2)[8:]...)
	lines = append(lines, trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 3, Problems: 2,
		Accuracy: [][]float64{{0.5, 0.75}, {0.3, 0.65}}, Summary: summary(t, false)})
	writeMetrics(t, dir, lines...)

	md, err := WriteTraining(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report")
	if md != filepath.Join(out, TrainingFile) {
		t.Errorf("WriteTraining returned %s, want %s", md, filepath.Join(out, TrainingFile))
	}
	report := readFile(t, md)

	t.Run("before and after", func(t *testing.T) {
		// Team accuracy is the mean over agents: 20 % -> 40 % at turn 0. The summaries
		// are on their average dataset: at turn 1 agent 0's answers tie between a right
		// and a wrong key before (majority 50 %) and agree after; the team's answers go
		// from {1: 3/4, 4: 1/4} (TU = 0.562, AU = ln 2 / 2 = 0.347, EU = 0.216) to one key.
		for _, want := range []string{
			"2 agents, 2 turns, 3 training steps (1–3); validation at steps 0, 2 and 3 on 2 problems.",
			"Agents: A0 = agent 0, A1 = agent 1.",
			"Each cell: validation at step 0 → step 3 (change). Majority:",
			"Dataset: average.",
			"| Agent | Turn | Accuracy % | Majority % (strict) | Majority % (robust) | TU | EU | AU |",
			"| Team | 0 (T=1) | 20.0 → 40.0 (+20.0) | 0.0 → 0.0 (+0.0) | 0.0 → 0.0 (+0.0) | 1.040 → 1.040 (+0.000) | 0.693 → 0.693 (+0.000) | 0.347 → 0.347 (+0.000) |",
			"| A0 | 1 (T=2) | 50.0 → 75.0 (+25.0) | 50.0 → 100.0 (+50.0) | 50.0 → 100.0 (+50.0) | 0.693 → 0.000 (-0.693) | 0.000 → 0.000 (+0.000) | 0.693 → 0.000 (-0.693) |",
			"| Team | 1 (T=2) | 42.5 → 70.0 (+27.5) | 100.0 → 100.0 (+0.0) | 100.0 → 100.0 (+0.0) | 0.562 → 0.000 (-0.562) | 0.216 → 0.000 (-0.216) | 0.347 → 0.000 (-0.347) |",
		} {
			if !strings.Contains(report, want) {
				t.Errorf("training.md lacks %q", want)
			}
		}
		ba := readCSV(t, filepath.Join(out, BeforeAfterFile))
		checkNumber(t, ba, "change", 0.275, "system", "1", "accuracy")
		checkNumber(t, ba, "change", 0.5, "0", "1", "maj_strict")
		checkNumber(t, ba, "change", -(0.25*math.Log(4) + 0.75*math.Log(4.0/3)), "system", "1", "tu")
	})

	t.Run("validation.csv", func(t *testing.T) {
		val := readCSV(t, filepath.Join(out, ValidationFile))
		// 3 validations x 2 turns x (2 agents + team).
		if len(val) != 1+3*2*3 {
			t.Errorf("%d lines, want %d", len(val), 1+3*2*3)
		}
		checkNumber(t, val, "accuracy", 0.55, "2", "2", "system", "1")
		// Step 2 has no summary: its summary columns are empty.
		if got := field(t, val, "maj_strict", "2", "2", "0", "0"); got != "" {
			t.Errorf("majority at step 2 = %q, want empty", got)
		}
		if got := field(t, val, "maj_strict", "0", "2", "0", "1"); got != "0.5" {
			t.Errorf("agent 0 majority at step 0 turn 1 = %s, want 0.5", got)
		}
	})

	t.Run("training.csv has every line", func(t *testing.T) {
		curves := readCSV(t, filepath.Join(out, CurvesFile))
		if len(curves) != 1+3*2*2 {
			t.Fatalf("%d lines, want %d", len(curves), 1+3*2*2)
		}
		checkNumber(t, curves, "accuracy", 0.4, "3", "1", "0")
	})

	t.Run("time breakdown", func(t *testing.T) {
		// Steps take 10, 12 and 14 s (36 in all): rollout 24 s, log-probs 3, reference
		// 1.5, update 6, sync 0.9 (2.5 %) and the rest 0.6. Throughput: (6·100 + 8·200 +
		// 10·300) tokens over 24 s.
		for _, want := range []string{
			"| rollout | 8.000 | 66.7 |",
			"| logprobs | 1.000 | 8.3 |",
			"| reference | 0.500 | 4.2 |",
			"| update | 2.000 | 16.7 |",
			"| sync | 0.300 | 2.5 |",
			"| other | 0.200 | 1.7 |",
			"| step | 12.000 | 100.0 |",
			"Rollout throughput: 216.7 generated tokens/s. Trainer throughput: 80.0 response tokens/s through log-probs, " +
				"reference and update together. Weight sync: 2.5% of step time (target ≤ 5%: met).",
		} {
			if !strings.Contains(report, want) {
				t.Errorf("training.md lacks %q", want)
			}
		}
		times := readCSV(t, filepath.Join(out, TimesFile))
		if len(times) != 1+3 {
			t.Fatalf("%d lines, want 4", len(times))
		}
		for column, want := range map[string]float64{"sync_s": 0.3, "step_s": 14, "rollout_s": 10, "logprobs_s": 1, "other_s": 0.2} {
			checkNumber(t, times, column, want, "3")
		}
	})

	t.Run("figures are valid SVG and PNG", func(t *testing.T) {
		for name, minWidth := range map[string]int{"validation": 900, "training": 1400, "times": 900} {
			if !strings.Contains(report, "]("+name+".png)") {
				t.Errorf("training.md does not show %s.png", name)
			}
			checkFigure(t, out, name, minWidth, 550)
		}
	})

	t.Run("no temporary files are left", func(t *testing.T) { noTempFiles(t, out) })
}

// A run logged before validations had summaries, with a slow sync and a torn last line:
// accuracy only, the target missed, the torn line ignored.
func TestWriteTrainingWithoutSummaries(t *testing.T) {
	dir := t.TempDir()
	lines := []any{trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 0, Problems: 4, Accuracy: [][]float64{{0.25, 0.5}, {0, 0.25}}}}
	lines = append(lines, trainSteps(1, 1)...)
	lines = append(lines, trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 3, Problems: 4, Accuracy: [][]float64{{0.5, 0.5}, {0.25, 0.25}}})
	writeMetrics(t, dir, lines...)
	f, err := os.OpenFile(filepath.Join(dir, trainlog.File), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"kind":"train","step":4,"agent":0,"accur`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	md, err := WriteTraining(dir)
	if err != nil {
		t.Fatal(err)
	}
	report := readFile(t, md)
	// Steps take 11.7, 13.7 and 15.7 s, 2 s of each the sync: 6/41.1 = 14.6 %.
	for _, want := range []string{
		"2 agents, 2 turns, 3 training steps (1–3); validation at steps 0 and 3 on 4 problems.",
		"Each cell: validation at step 0 → step 3 (change).\n",
		"| Agent | Turn | Accuracy % |\n",
		"| A1 | 1 (T=2) | 25.0 → 25.0 (+0.0) |",
		"| Team | 0 (T=1) | 12.5 → 37.5 (+25.0) |",
		"| sync | 2.000 | 14.6 |",
		"Weight sync: 14.6% of step time (target ≤ 5%: missed).",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("training.md lacks %q", want)
		}
	}
	if strings.Contains(report, "Majority") {
		t.Error("training.md shows majority votes without summaries")
	}
}

// An overlapped run's rollouts ran beside the previous update: the report says why its
// shares sum past 100, and says nothing of it for a run in turn.
func TestWriteTrainingOverlapped(t *testing.T) {
	for _, overlapped := range []bool{false, true} {
		dir := t.TempDir()
		lines := trainSteps(0.01, 0.01)
		for i, l := range lines {
			m := l.(trainlog.StepMetrics)
			m.Times.Overlapped = overlapped && m.Step > 1
			lines[i] = m
		}
		writeMetrics(t, dir, lines...)
		md, err := WriteTraining(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(readFile(t, md), "ran beside the previous step's update (--overlap 1)"); got != overlapped {
			t.Errorf("overlapped %v: the report's overlap note shown: %v", overlapped, got)
		}
	}
}

func TestWriteTrainingErrors(t *testing.T) {
	missing := t.TempDir()
	if _, err := WriteTraining(missing); err == nil || !strings.Contains(err.Error(), "has no metrics.jsonl") {
		t.Errorf("no metrics file: %v", err)
	}
	for name, content := range map[string]string{
		"empty":            "",
		"only a torn line": `{"kind":"val","st`,
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, trainlog.File), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteTraining(dir); err == nil || !strings.Contains(err.Error(), "no complete lines") {
			t.Errorf("%s metrics file: %v", name, err)
		}
	}
	dir := t.TempDir()
	bad := "{\"kind\":\"val\",\"step\":0}\n{oops\n{\"kind\":\"val\",\"step\":1}\n"
	if err := os.WriteFile(filepath.Join(dir, trainlog.File), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteTraining(dir); err == nil || !strings.Contains(err.Error(), "metrics.jsonl:2") {
		t.Errorf("bad line in the middle: %v", err)
	}
}

// A run stopped before its first step has one validation: a report without curves.
func TestWriteTrainingValidationOnly(t *testing.T) {
	dir := t.TempDir()
	writeMetrics(t, dir, trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 0, Problems: 2, Accuracy: [][]float64{{0.5}, {0.25}}})
	md, err := WriteTraining(dir)
	if err != nil {
		t.Fatal(err)
	}
	report := readFile(t, md)
	for _, want := range []string{"0 training steps; validation at step 0", "Needs two validations; this run has 1.", "](validation.png)"} {
		if !strings.Contains(report, want) {
			t.Errorf("training.md lacks %q", want)
		}
	}
	for _, name := range []string{"training.png", TimesFile, BeforeAfterFile} {
		if _, err := os.Stat(filepath.Join(dir, "report", name)); !os.IsNotExist(err) {
			t.Errorf("%s: want it absent, stat says %v", name, err)
		}
	}
}
