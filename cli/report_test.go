package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainlog"
)

// `umad report RUN` on a training run (a metrics log, no debate config) writes its
// training report; a directory that is neither is refused as before.
func TestReportTrainingRun(t *testing.T) {
	run := filepath.Join(t.TempDir(), "train-run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := trainlog.Open(filepath.Join(run, trainlog.File), 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := []any{trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 0, Problems: 2, Accuracy: [][]float64{{0.25}, {0.5}}}}
	for a := range 2 {
		lines = append(lines, trainlog.StepMetrics{Kind: trainlog.KindTrain, Step: 1, Agent: a, Accuracy: 0.5, RolloutTokensPerSec: 50,
			Times: trainlog.Times{Rollout: 3, LogProbs: 0.5, Reference: 0.25, Update: 1, Sync: 0.05, Step: 10}})
	}
	lines = append(lines, trainlog.ValMetrics{Kind: trainlog.KindVal, Step: 1, Problems: 2, Accuracy: [][]float64{{0.5}, {0.75}}})
	for _, l := range lines {
		if err := log.Append(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	app := App()
	app.Writer, app.ErrWriter = &stdout, &stderr
	if err := app.Run([]string{"umad", "report", run}); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr.String())
	}
	md := filepath.Join(run, "report", "training.md")
	if got, want := stdout.String(), "report: "+md+"\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	raw, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	// Team accuracy 37.5 % -> 62.5 %; sync 0.1 s of 10 s.
	for _, want := range []string{"# Training run: train-run", "| Team | 0 (T=1) | 37.5 → 62.5 (+25.0) |", "Weight sync: 1.0% of step time"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("training.md lacks %q", want)
		}
	}

	app = App()
	app.Writer, app.ErrWriter = &stdout, &stderr
	if err := app.Run([]string{"umad", "report", t.TempDir()}); err == nil || !strings.Contains(err.Error(), "is not a debate run") {
		t.Errorf("report of an empty directory: %v", err)
	}
}
