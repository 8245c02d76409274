package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainer"
)

// valDataArgs is trainArgs validating on --val-data instead of the built-in set.
func valDataArgs(t *testing.T, out, steps string, extra ...string) []string {
	args := trainArgs(t, out, steps, extra...)
	i := slices.Index(args, "--val-synthetic")
	return slices.Delete(args, i, i+2)
}

// `umad train --val-data` validates on the problems of a real file (at most --val-limit),
// with its own turns, and the report shows them in umad debate's per-turn tables; the
// debate-prompt flags shape the training rollouts' messages, and config.json records all
// of it, so a resume with other settings is refused.
func TestTrainValidatesOnDataFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	gsm := sharedData(t, "gsm8k/test.jsonl")
	args := func(steps string, extra ...string) []string {
		return valDataArgs(t, out, steps, append([]string{"--algo", "ippo", "--turns", "2", "--val-data", gsm, "--val-limit", "2",
			"--val-turns", "1", "--full-history", "--no-mask", "--anonymise", "--keep-rollouts", "1"}, extra...)...)
	}
	if _, stderr, err := runApp(t, args("1")...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	_, val := readRun(t, out)
	if len(val) != 2 {
		t.Fatalf("%d validations, want 2 (before and after)", len(val))
	}
	for _, v := range val {
		if v.Problems != 2 || len(v.Accuracy) != 1 || len(v.Accuracy[0]) != 1 {
			t.Errorf("validation at step %d: %d problems, accuracy %v; want 2 problems, one agent, one turn", v.Step, v.Problems, v.Accuracy)
		}
		if v.Summary == nil || !slices.Contains(v.Summary.Datasets, "gsm8k") {
			t.Errorf("validation at step %d does not summarise the gsm8k file: %+v", v.Step, v.Summary)
		}
	}

	md, err := os.ReadFile(filepath.Join(out, "report", report.TrainingFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Last validation: step 1, 2 problems", "### Accuracy, strict grading", "| Turn | gsm8k A0 |",
		"### Uncertainty of the team (nats)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("training.md lacks %q:\n%s", want, md)
		}
	}

	// The training rollouts' turn-1 messages show every earlier round (--full-history).
	recs := readRecords(t, filepath.Join(out, trainer.RolloutsDir, "step-000001.jsonl.zst"))
	if len(recs) == 0 || len(recs[0].Turns) != 2 {
		t.Fatalf("kept rollouts: %d records, want one of two turns", len(recs))
	}
	if p := recs[0].Turns[1][0][0].Prompt; !strings.Contains(p, "Round 1:") {
		t.Errorf("the turn-1 message does not show the rounds of --full-history:\n%s", p)
	}

	var cfg run.TrainSettings
	b, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("config.json: %v\n%s", err, b)
	}
	tr := cfg.Trainer
	if cfg.ValData != gsm || cfg.ValLimit != 2 || tr.ValTurns != 1 || tr.ValTemperature == nil || *tr.ValTemperature != 0.6 ||
		!tr.NoMask || !tr.FullHistory || !tr.Anonymise {
		t.Errorf("config.json records val data %q, limit %d, turns %d, temperature %v, no-mask %v, full history %v, anonymise %v",
			cfg.ValData, cfg.ValLimit, tr.ValTurns, tr.ValTemperature, tr.NoMask, tr.FullHistory, tr.Anonymise)
	}

	for _, other := range [][]string{{"--val-temperature", "0.8"}, {"--val-limit", "3"}} {
		a := args("2", append(other, "--resume")...)
		if _, _, err := runApp(t, a...); err == nil || !strings.Contains(err.Error(), "holds a run with other settings") {
			t.Errorf("resume with %v: %v", other, err)
		}
	}
	noMask := slices.DeleteFunc(args("2", "--resume"), func(s string) bool { return s == "--no-mask" })
	if _, _, err := runApp(t, noMask...); err == nil || !strings.Contains(err.Error(), "holds a run with other settings") {
		t.Errorf("resume without --no-mask: %v", err)
	}
}

// Validation settings that cannot work fail at once in one line, before any model loads,
// and leave no run directory.
func TestTrainValDataErrors(t *testing.T) {
	noAnswers := writeLines(t, `{"question": "What is 2+2?", "answer": ""}`)
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	for _, tc := range []struct {
		why  string
		args []string
		want []string
	}{
		{"no usable problem", []string{"--val-data", noAnswers}, []string{"--val-data", noAnswers, "no usable problems"}},
		{"no such file", []string{"--val-data", missing}, []string{"--val-data", missing, "no such file"}},
		{"empty path", []string{"--val-data", ""}, []string{"--val-data is empty"}},
		{"a negative limit", []string{"--val-data", noAnswers, "--val-limit", "-1"}, []string{"--val-data", "limit -1 is negative"}},
		{"a limit without a file", []string{"--val-limit", "3"}, []string{"--val-limit chooses among the problems of --val-data"}},
		{"two sources", []string{"--val-data", noAnswers, "--val-synthetic", "4"}, []string{"--val-data or --val-synthetic, not both"}},
		{"a negative temperature", []string{"--val-temperature", "-1"}, []string{"validation temperature must be a non-negative number, got -1"}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			_, _, err := runApp(t, valDataArgs(t, out, "1", tc.args...)...)
			checkRefused(t, err, out, tc.want)
		})
	}
}

// A run from before --val-temperature validated at its agents' temperature: it resumes
// with that validation temperature, and is refused with another.
func TestResumeRunFromBeforeValTemperature(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	args := func(steps string, extra ...string) []string {
		return trainArgs(t, out, steps, append([]string{"--val-synthetic", "0", "--temperature", "0.8"}, extra...)...)
	}
	if _, stderr, err := runApp(t, args("1", "--val-temperature", "0.8")...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	path := filepath.Join(out, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(b), `"val_temperature": 0.8,`, "", 1)
	if old == string(b) {
		t.Fatalf("config.json has no validation temperature to remove:\n%s", b)
	}
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runApp(t, args("2", "--resume")...); err == nil || !strings.Contains(err.Error(), "holds a run with other settings") {
		t.Errorf("resume at the default validation temperature: %v", err)
	}
	if _, stderr, err := runApp(t, args("2", "--resume", "--val-temperature", "0.8")...); err != nil {
		t.Errorf("resume at the agents' temperature: %v\n%s", err, stderr)
	}
}
