package cli

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
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

// `umad report` over two labelled debate runs of tiny models (the baseline of two
// seeds) and a training run writes Table 1, paired by seed and problem where the debate
// runs share them, and the four figure kinds; the comparison is written as before.
func TestReportTable1(t *testing.T) {
	dir := t.TempDir()
	zero, hot := filepath.Join(dir, "zero"), filepath.Join(dir, "hot")
	runDebate(t, zero, "--seeds", "1,2")
	runDebate(t, hot, "--seeds", "1", "--temperature", "1.5")
	// A training run whose validations hold summaries of the zero-shot debate's seed 1.
	train := filepath.Join(dir, "train-run")
	if err := os.MkdirAll(train, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(zero, "report", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum summaryJSON
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatal(err)
	}
	log, err := trainlog.Open(filepath.Join(train, trainlog.File), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []int{0, 5} {
		if err := log.Append(trainlog.ValMetrics{Kind: trainlog.KindVal, Step: step, Problems: 3, Accuracy: [][]float64{{0.5}, {0.5}}, Summary: &sum.Mean}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	// A training run whose validation has no summary is no method.
	bare := filepath.Join(dir, "bare-train")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	if log, err = trainlog.Open(filepath.Join(bare, trainlog.File), 0); err != nil {
		t.Fatal(err)
	}
	if err := log.Append(trainlog.ValMetrics{Kind: trainlog.KindVal, Problems: 3, Accuracy: [][]float64{{0.5}, {0.5}}}); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "cmp")
	var stdout, stderr bytes.Buffer
	app := App()
	app.Writer, app.ErrWriter = &stdout, &stderr
	if err := app.Run([]string{"umad", "report", "--out", out, "--baseline", "Zero-Shot", "--turns", "1,3",
		"Zero-Shot=" + zero, "hot=" + hot, "UMAD=" + train, bare}); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"table: " + bare + " has no validation with a summary; not a method of Table 1", "comparison: " + filepath.Join(out, "compare.md"), "table: " + filepath.Join(out, "table1.md"),
		"figures: " + strings.Join([]string{filepath.Join(out, "fig1-accuracy-entropy.png"), filepath.Join(out, "fig2-uncertainty.png"),
			filepath.Join(out, "fig3-base-trained.png"), filepath.Join(out, "fig5-flips.png")}, ", "), "browser: " + filepath.Join(out, "index.html")} {
		if !strings.Contains(stdout.String(), want+"\n") {
			t.Errorf("printed\n%s\nwithout %q", stdout.String(), want)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "table1.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| Method | Agent | gsm8k T=1 | gsm8k T=3 |", "| Zero-Shot | A1 |", "| hot | A0 |", "| UMAD | A1 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("table1.md lacks %q:\n%s", want, md)
		}
	}
	f, err := os.Open(filepath.Join(out, "table1.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// hot pairs with Zero-Shot on seed 1 over the 3 problems; the training run, equal to
	// Zero-Shot's seed 1 summary, has a difference but no interval.
	for _, r := range rows[1:] {
		switch method, T := r[0], r[3]; {
		case method == "hot" && r[11] != "3":
			t.Errorf("hot T=%s pairs %q problems, want 3: %v", T, r[11], r)
		case method == "UMAD" && (r[7] == "" || r[8] != ""):
			t.Errorf("UMAD T=%s: diff %q, interval %q: %v", T, r[7], r[8], r)
		case method == "Zero-Shot" && (r[4] != "2" || r[7] != ""):
			t.Errorf("baseline row %v", r)
		}
	}
	for _, path := range []string{filepath.Join(out, "table1.html"), filepath.Join(out, "compare.md"), filepath.Join(out, "fig1-accuracy-entropy.svg"),
		filepath.Join(out, "fig5-flips.svg"), filepath.Join(zero, "report", "index.html"), filepath.Join(hot, "report", "index.html")} {
		if _, err := os.Stat(path); err != nil {
			t.Error(err)
		}
	}
	// The comparison's browser has a run per debate label, Zero-Shot with both its seeds.
	page, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<option>Zero-Shot</option><option>hot</option></select>", `"seed":"1"`, `"seed":"2"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the comparison's browser lacks %q", want)
		}
	}

	for _, tc := range []struct{ args, want string }{
		{"--baseline nope Zero-Shot=" + zero + " hot=" + hot, `no method named "nope"`},
		{"=" + zero + " hot=" + hot, "give LABEL=RUN with both parts"},
		{"UMAD=" + train + " UMAD=" + zero, "label UMAD names a training run and another run"},
	} {
		app = App()
		app.Writer, app.ErrWriter = &stdout, &stderr
		err := app.Run(append([]string{"umad", "report", "--out", t.TempDir()}, strings.Fields(tc.args)...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.args, err, tc.want)
		}
	}
}
