package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/trainlog"
)

// verifierLines are grade input: a pair robust decides, a pair it does not (twice, so the
// verifier is asked once), an unparsed one, and no answer.
var verifierLines = []string{
	`{"pred": "1,000", "gold": "1000"}`,
	`{"question": "How many?", "pred": "three", "gold": "3"}`,
	`{"question": "How many?", "pred": "three", "gold": "3"}`,
	`{"pred": "11:21", "gold": "681"}`,
	`{"pred": null, "gold": "3"}`,
}

func gradedLines(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// grade --verifier sends only the pairs robust does not decide to the model, asks a
// repeated pair once, marks the lines it decided with rule "verifier", and counts.
func TestGradeVerifier(t *testing.T) {
	in := writeLines(t, verifierLines...)
	stdout, stderr, err := runGradeCmd(t, "--in", in, "--verifier", testmodel.GGUF(t, "qwen2"), "--verifier-prompt", testmodel.VerifierPrompt(t), "--threads", "1")
	if err != nil {
		t.Fatal(err)
	}
	lines := gradedLines(t, stdout)
	if len(lines) != 5 {
		t.Fatalf("%d lines", len(lines))
	}
	if lines[0]["verifier"] != nil || lines[0]["rule"] != "numeric" || lines[4]["verifier"] != nil {
		t.Errorf("robust decided the first line and the last has no answer, yet: %v, %v", lines[0], lines[4])
	}
	for _, l := range lines[1:4] {
		v, _ := l["verifier"].(string)
		switch v {
		case "equal", "not equal":
			if l["rule"] != "verifier" {
				t.Errorf("the verifier decided %v but the rule is %v", l, l["rule"])
			}
		case "undecided":
			if l["rule"] != "none" {
				t.Errorf("undecided line %v has rule %v", l, l["rule"])
			}
		default:
			t.Errorf("line %v: verifier %q", l, v)
		}
	}
	if lines[1]["verifier"] != lines[2]["verifier"] {
		t.Errorf("one pair, two verdicts: %v, %v", lines[1]["verifier"], lines[2]["verifier"])
	}
	if !strings.Contains(stderr, "verifier         3 pairs robust did not decide") || !strings.Contains(stderr, "0 skipped (budget); 2 asked") {
		t.Errorf("stats: %s", stderr)
	}
	// Without --verifier the output has no verifier field.
	plain, _, err := runGradeCmd(t, "--in", in)
	if err != nil || strings.Contains(plain, `"verifier"`) {
		t.Errorf("without --verifier: %v\n%s", err, plain)
	}
}

// A spent budget skips the pairs, counted, and leaves robust's verdict.
func TestGradeVerifierBudget(t *testing.T) {
	in := writeLines(t, verifierLines...)
	stdout, stderr, err := runGradeCmd(t, "--in", in, "--verifier", testmodel.GGUF(t, "qwen2"), "--verifier-prompt", testmodel.VerifierPrompt(t), "--threads", "1", "--verifier-budget", "1ns")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range gradedLines(t, stdout)[1:4] {
		if l["verifier"] != "skipped" || l["rule"] != "none" || l["robust"] != false {
			t.Errorf("line %v: want skipped", l)
		}
	}
	if !strings.Contains(stderr, "3 skipped (budget); 0 asked") {
		t.Errorf("stats: %s", stderr)
	}
	if _, _, err := runGradeCmd(t, "--in", in, "--verifier-budget", "1s"); err == nil {
		t.Error("--verifier-budget without --verifier was accepted")
	}
	if _, _, err := runGradeCmd(t, "--in", in, "--verifier", testmodel.GGUF(t, "qwen2"), "--verifier-prompt", testmodel.VerifierPrompt(t), "--verifier-budget", "-1s"); err == nil {
		t.Error("a negative --verifier-budget was accepted")
	}
	if _, _, err := runGradeCmd(t, "--in", in, "--verifier-prompt", testmodel.VerifierPrompt(t)); err == nil {
		t.Error("--verifier-prompt without --verifier was accepted")
	}
	if _, _, err := runGradeCmd(t, "--in", in, "--verifier", testmodel.GGUF(t, "qwen2")); err == nil || !strings.Contains(err.Error(), "--verifier-prompt") {
		t.Errorf("--verifier without its prompt: %v", err)
	}
}

// A verifier that cannot load is one line of error before anything is graded or written.
func TestGradeVerifierLoadError(t *testing.T) {
	bad := brokenGGUF(t)
	dir := filepath.Dir(bad)
	out := filepath.Join(dir, "out.jsonl")
	for _, path := range []string{bad, filepath.Join(dir, "missing.gguf")} {
		stdout, _, err := runGradeCmd(t, "--in", writeLines(t, verifierLines...), "--out", out, "--verifier", path, "--verifier-prompt", testmodel.VerifierPrompt(t))
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "verifier: load model") || !strings.Contains(err.Error(), path) {
			t.Errorf("--verifier %s: %v; want one line naming the file", path, err)
		}
		if _, serr := os.Stat(out); serr == nil || stdout != "" {
			t.Errorf("--verifier %s: output written before the model loaded", path)
		}
	}
}

// train --reward robust+verifier=MODEL.gguf trains with the verifier, records it with the
// run, and every metrics line counts the rewards the verifier decided.
func TestTrainVerifier(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	gguf := testmodel.GGUF(t, "qwen2")
	prompt := testmodel.VerifierPrompt(t)
	if _, stderr, err := runApp(t, trainArgs(t, out, "1", "--val-synthetic", "0", "--reward", "robust+verifier="+gguf, "--verifier-prompt", prompt, "--verifier-budget", "1m", "--deterministic")...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	b, _ := os.ReadFile(filepath.Join(out, "config.json"))
	if !strings.Contains(string(b), `"reward": "robust+verifier"`) || !strings.Contains(string(b), `"verifier": "`+gguf+`"`) ||
		!strings.Contains(string(b), `"verifier_prompt": "`+prompt+`"`) || !strings.Contains(string(b), `"deterministic": true`) {
		t.Errorf("config.json does not record the verifier, its prompt and --deterministic:\n%s", b)
	}
	train, _, err := trainlog.Read(filepath.Join(out, trainlog.File))
	if err != nil || len(train) == 0 {
		t.Fatalf("metrics: %v, %d lines", err, len(train))
	}
	for _, l := range train {
		if v := l.Verifier; v == nil || v.Decided+v.Undecided+v.Skipped > 4*4 || v.Equal > v.Decided {
			t.Errorf("step %d agent %d: verifier counts %+v", l.Step, l.Agent, l.Verifier)
		}
	}
	// Without the verifier the lines have no such field.
	plain := filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runApp(t, trainArgs(t, plain, "1", "--val-synthetic", "0", "--reward", "robust")...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(plain, trainlog.File)); strings.Contains(string(b), `"verifier"`) {
		t.Errorf("a run without a verifier logs verifier counts:\n%s", b)
	}
}

// A verifier that cannot load, or a --reward that names none, is refused in one line
// before the run directory exists.
func TestTrainVerifierErrors(t *testing.T) {
	bad := brokenGGUF(t)
	dir := filepath.Dir(bad)
	prompt := testmodel.VerifierPrompt(t)
	for _, args := range [][]string{
		{"--reward", "robust+verifier=" + bad, "--verifier-prompt", prompt},
		{"--reward", "robust+verifier=" + filepath.Join(dir, "missing.gguf"), "--verifier-prompt", prompt},
		{"--reward", "robust+verifier=" + bad}, // no prompt
		{"--reward", "robust", "--verifier-prompt", prompt},
		{"--reward", "robust+verifier"},
		{"--reward", "robust=" + bad},
		{"--reward", "robust", "--verifier-budget", "1m"},
		{"--reward", "robust+verifier=" + bad, "--verifier-budget", "-1s"},
	} {
		out := filepath.Join(dir, "run")
		_, _, err := runApp(t, trainArgs(t, out, "1", args...)...)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "verifier") {
			t.Errorf("%v: %v; want one line about the verifier", args, err)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("%v: the refused run left %s", args, out)
		}
	}
}

// debate --verifier loads the model before the run starts, records it with the run, and
// counts what it decided; its flags are refused as grade refuses them, before the run
// directory exists.
func TestDebateVerifier(t *testing.T) {
	gguf, prompt := testmodel.GGUF(t, "qwen2"), testmodel.VerifierPrompt(t)
	debate := func(out string, extra ...string) (string, error) {
		args := append([]string{"debate", "--agent", gguf, "--synthetic", "2", "-k", "2", "--turns", "2", "--max-tokens", "8",
			"--prompt-limit", "256", "--threads", "1", "--out", out}, extra...)
		_, stderr, err := runApp(t, args...)
		return stderr, err
	}
	out := filepath.Join(t.TempDir(), "run")
	stderr, err := debate(out, "--verifier", gguf, "--verifier-prompt", prompt, "--verifier-budget", "1m")
	if err != nil {
		t.Fatalf("debate: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "verifier: ") || !strings.Contains(stderr, "pairs robust did not decide") {
		t.Errorf("stderr does not count the verifier's verdicts:\n%s", stderr)
	}
	b, _ := os.ReadFile(filepath.Join(out, "config.json"))
	for _, want := range []string{`"verifier": "` + gguf + `"`, `"verifier_prompt": "` + prompt + `"`, `"verifier_budget": 60000000000`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config.json lacks %s:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "report", "report.md")); err != nil {
		t.Errorf("no report: %v", err)
	}
	bad := brokenGGUF(t)
	for _, args := range [][]string{
		{"--verifier", bad, "--verifier-prompt", prompt},
		{"--verifier", gguf},
		{"--verifier-prompt", prompt},
		{"--verifier-budget", "1m"},
		{"--verifier", gguf, "--verifier-prompt", prompt, "--verifier-budget", "-1s"},
	} {
		refused := filepath.Join(t.TempDir(), "run")
		_, err := debate(refused, args...)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "verifier") {
			t.Errorf("%v: %v; want one line about the verifier", args, err)
		}
		if _, serr := os.Stat(refused); !os.IsNotExist(serr) {
			t.Errorf("%v: the refused debate left %s", args, refused)
		}
	}
}
