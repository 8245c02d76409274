package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
)

// An --agent setting with an empty value or given twice is refused, naming it:
// `BASE,adapter=` meant the working directory and `adapter=A,adapter=B` silently took B.
func TestAgentSpecRefusesEmptyAndRepeatedKeys(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	for spec, want := range map[string]string{
		gguf + ",adapter=":                      "adapter is empty",
		gguf + ",name=":                         "name is empty",
		gguf + ",seed=":                         "seed is empty",
		gguf + ",adapter=a,adapter=b":           "adapter is given twice",
		gguf + ",temperature=0.5,temperature=1": "temperature is given twice",
	} {
		_, _, err := runApp(t, "debate", "--agent", spec, "--synthetic", "1", "-k", "1", "--turns", "1", "--out", filepath.Join(t.TempDir(), "run"))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--agent %q: %v; want one line containing %q", spec, err, want)
		}
	}
}

// --agent RUN,agent=I names agent I of a training run's newest checkpoint, and says so in
// one line when the run has no checkpoint or no such agent.
func TestAgentFromTrainingRun(t *testing.T) {
	run := t.TempDir()
	ckpt := filepath.Join(run, "checkpoints", "step-000003")
	agent := filepath.Join(ckpt, "agent-1")
	if err := os.MkdirAll(agent, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, text := range map[string]string{
		filepath.Join(ckpt, "state.json"):           `{"step": 3, "agents": 2}`,
		filepath.Join(run, "checkpoints", "latest"): "step-000003\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The debate loads the checkpoint's GGUF: here the tiny model's, copied in.
	gguf, err := os.ReadFile(testmodel.GGUF(t, "qwen2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agent, "model.gguf"), gguf, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runApp(t, "debate", "--agent", run+",agent=1", "--synthetic", "1", "-k", "1", "--turns", "1",
		"--max-tokens", "4", "--threads", "1", "--out", out); err != nil {
		t.Fatalf("debate of a run's agent: %v\n%s", err, stderr)
	}
	cfg, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil || !strings.Contains(string(cfg), filepath.Join(agent, "model.gguf")) {
		t.Errorf("config.json does not name the checkpoint's model (%v):\n%s", err, cfg)
	}
	for spec, want := range map[string]string{
		run + ",agent=0":         "has no agent 0",
		run + ",agent=-1":        "must not be negative",
		t.TempDir() + ",agent=0": "holds no checkpoint",
	} {
		_, _, err := runApp(t, "debate", "--agent", spec, "--synthetic", "1", "-k", "1", "--turns", "1", "--out", filepath.Join(t.TempDir(), "run"))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--agent %q: %v; want one line containing %q", spec, err, want)
		}
	}
}
