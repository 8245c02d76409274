package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/browsertest"
	"github.com/umad-dev/umad/trainlog"
)

// stepLines are a step's metrics lines for two agents, one turn, as the trainer logs
// them: the step's rollout and total on every line, each agent's own phases.
func stepLines(step int, rollout, update float64) []trainlog.StepMetrics {
	var lines []trainlog.StepMetrics
	for a := range 2 {
		lines = append(lines, trainlog.StepMetrics{Kind: trainlog.KindTrain, Step: step, Agent: a, Accuracy: 0.25 * float64(step), Team: 0.5, KL: 0.01 * float64(step), Entropy: 0.7, GradNorm: 1.5, ClipFrac: 0.1,
			Times: trainlog.Times{Rollout: rollout, LogProbs: 0.25, Reference: 0.25, Update: update, Sync: 0.1, Step: rollout + 2*(update+0.6)}})
	}
	return lines
}

// The training page as the trainer leaves it: written mid-run (after step 1 of 2) it
// reloads itself and names step 1's slowest phase, the rollout; written as the run ends it
// does not reload and names step 2's, the update. Both open in headless chromium.
func TestTrainingPageMidRun(t *testing.T) {
	browsertest.Chromium(t)
	run := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := trainlog.Open(filepath.Join(run, trainlog.File), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	appendAll := func(lines ...any) {
		t.Helper()
		for _, l := range lines {
			if err := log.Append(l); err != nil {
				t.Fatal(err)
			}
		}
	}
	page := filepath.Join(run, "report", PageFile)
	appendAll(trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 0, Problems: 4, Accuracy: [][]float64{{0.25}, {0.5}}})
	for _, l := range stepLines(1, 9, 1) {
		appendAll(l)
	}
	if err := WriteTrainingPage(run, true); err != nil {
		t.Fatal(err)
	}
	mid := browsertest.DumpDOM(t, page, "")
	for _, want := range []string{`<meta http-equiv="refresh" content="10">`, "Running: step 1 is the latest logged",
		"Step 1's slowest phase: <b>rollout</b>, 9.000 s (73.8% of the step)", "<svg", "Gradient norm", "<td>37.5</td>"} {
		if !strings.Contains(mid, want) {
			t.Errorf("the page written mid-run lacks %q:\n%.4000s", want, mid)
		}
	}
	browsertest.Screenshot(t, page, "")

	for _, l := range stepLines(2, 1, 5) {
		appendAll(l)
	}
	appendAll(trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 2, Problems: 4, Accuracy: [][]float64{{0.5}, {0.75}}})
	if err := WriteTrainingPage(run, false); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTrainingPage(run, false); err != nil {
		t.Fatal(err)
	} else if again, _ := os.ReadFile(page); !bytes.Equal(raw, again) {
		t.Error("the same log wrote two different pages")
	}
	done := browsertest.DumpDOM(t, page, "")
	for _, want := range []string{"Not running: step 2 is the last logged", "Step 2's slowest phase: <b>update</b>", "<td>62.5</td>"} {
		if !strings.Contains(done, want) {
			t.Errorf("the finished run's page lacks %q", want)
		}
	}
	if strings.Contains(done, "http-equiv") {
		t.Error("the finished run's page still reloads itself")
	}
}
