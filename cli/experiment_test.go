package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/rollouts"
	"github.com/umad-dev/umad/run"
)

// expGrid is a three-cell grid on the tiny models: a zero-shot debate, an IPPO training of
// two steps and the debate of its agents. Each command is as small as it runs.
const expGrid = `out = "OUT"
seeds = [1]
train_flags = { threads = 1, torch-threads = 1, steps = 2, batch = 2, g = 2, mini-batch = 2, max-tokens = 12, prompt-limit = 512, slots = 4, val-synthetic = 2, synthetic = 4 }
debate_flags = { threads = 1, slots = 8, synthetic = 2 }

[agents.pair]
hf = ["Q2/hf", "Q3/hf"]
gguf = ["Q2/model.gguf", "Q3/model.gguf"]

[train.ippo]
algo = "ippo"

[eval.toy]
turns = 2
k = 2
max_tokens = 12
prompt_limit = 512

[methods.zero-shot]
agents = ["pair"]
eval = ["toy"]

[methods.ippo]
train = "ippo"
agents = ["pair"]
eval = ["toy"]
`

// umad experiment plans a grid, runs a subset, resumes a cut training cell, runs the rest,
// does nothing the second time, refuses a cell whose settings changed (naming the setting)
// and a second process on the experiment.
func TestExperimentGrid(t *testing.T) {
	torchtest.Open(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "exp")
	text := strings.NewReplacer("OUT", out, "Q2", testmodel.Tiny(t, "qwen2"), "Q3", testmodel.Tiny(t, "qwen3")).Replace(expGrid)
	file := filepath.Join(dir, "grid.toml")
	writeGrid := func(text string) {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeGrid(text)

	stdout, stderr, err := runApp(t, "experiment", "--dry-run", file)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, stderr)
	}
	for _, want := range []string{"3 cells, 3 to run", "train/ippo/pair/seed-1", "debate/ippo/pair/toy/seed-1", "debate/zero-shot/pair/toy/seed-1",
		"memory plan of the largest training cell, train/ippo/pair/seed-1", "peak host"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the dry run's plan has no %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("the dry run made %s (%v)", out, err)
	}

	if _, _, err := runApp(t, "experiment", "--only", "debate/ippo", file); err == nil || !strings.Contains(err.Error(), "select it too") {
		t.Fatalf("--only on a debate of an untrained cell: %v", err)
	}
	if stdout, stderr, err = runApp(t, "experiment", "--only", "zero-shot", file); err != nil {
		t.Fatalf("--only zero-shot: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "1 of 3 cells done, 0 left") {
		t.Errorf("--only zero-shot's progress:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(out, "train")); !os.IsNotExist(err) {
		t.Fatalf("--only zero-shot trained (%v)", err)
	}

	// A training cell cut after its first step: the experiment resumes it.
	train := filepath.Join(out, "train/ippo/pair/seed-1")
	cut := []string{"train", "--algo", "ippo", "--agent", testmodel.Tiny(t, "qwen2") + "/hf", "--agent", testmodel.Tiny(t, "qwen3") + "/hf",
		"--seed", "1", "--out", train, "--steps=1", "--threads=1", "--torch-threads=1", "--batch=2", "--g=2", "--mini-batch=2",
		"--max-tokens=12", "--prompt-limit=512", "--slots=4", "--val-synthetic=2", "--synthetic=4"}
	if _, stderr, err := runApp(t, cut...); err != nil {
		t.Fatalf("the cut training: %v\n%s", err, stderr)
	}
	if stdout, stderr, err = runApp(t, "experiment", file); err != nil {
		t.Fatalf("experiment: %v\n%s", err, stderr)
	}
	for _, want := range []string{"train/ippo/pair/seed-1", "resume", "zero-shot/pair/toy/seed-1 ", "done", "3 of 3 cells done, 0 left", "ran 2 of 3 cells"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the run's output has no %q:\n%s", want, stdout)
		}
	}
	if step, err := run.CheckpointStep(train); err != nil || step != 2 {
		t.Errorf("the training cell's checkpoint is at step %d (%v), want 2", step, err)
	}
	var cfg run.DebateSettings
	b, err := os.ReadFile(filepath.Join(out, "debate/ippo/pair/toy/seed-1/config.json"))
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil || !strings.HasPrefix(cfg.Agents[1].Model, filepath.Join(train, "checkpoints", "step-")) {
		t.Errorf("the trained debate's agents are not the training cell's checkpoint: %v %+v", err, cfg.Agents)
	}

	stdout, _, err = runApp(t, "experiment", file)
	if err != nil || !strings.Contains(stdout, "nothing to run") || strings.Contains(stdout, "experiment: cell") {
		t.Errorf("a second run: %v\n%s", err, stdout)
	}

	// umad report over the experiment file: Table 1 of its two debate methods, the untrained first.
	rep := filepath.Join(dir, "report")
	if stdout, _, err = runApp(t, "report", "--out", rep, file); err != nil {
		t.Fatalf("report over the experiment: %v\n%s", err, stdout)
	}
	table, err := os.ReadFile(filepath.Join(rep, "table1.md"))
	if err != nil {
		t.Fatal(err)
	}
	if zs, ippo := strings.Index(string(table), "zero-shot"), strings.Index(string(table), "ippo"); zs < 0 || ippo < zs {
		t.Errorf("Table 1 of the experiment does not list zero-shot, then ippo:\n%s", table)
	}

	writeGrid(strings.Replace(text, "k = 2", "k = 3", 1))
	if _, _, err := runApp(t, "experiment", file); err == nil || !strings.Contains(err.Error(), "(k: 2 there, 3 here)") {
		t.Errorf("a changed evaluation: %v", err)
	}
	writeGrid(text)

	lock, err := runlock.Dir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if _, _, err := runApp(t, "experiment", file); err == nil || !strings.Contains(err.Error(), "in use by another umad process") {
		t.Errorf("a second process on the experiment: %v", err)
	}
}

// Ctrl-C in the middle of a cell stops it as the command would (exit 130), and the same
// experiment command resumes the cell and finishes it.
func TestExperimentInterrupt(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "exp")
	file := filepath.Join(dir, "grid.toml")
	grid := `out = "` + out + `"
seeds = [1]
debate_flags = { threads = 1, slots = 4, synthetic = 16 }
[agents.pair]
gguf = ["` + testmodel.GGUF(t, "qwen2") + `", "` + testmodel.GGUF(t, "llama") + `"]
[eval.toy]
turns = 2
k = 4
max_tokens = 24
[methods.zero-shot]
agents = ["pair"]
eval = ["toy"]
`
	if err := os.WriteFile(file, []byte(grid), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := umadProcess(t, 0, "experiment", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "debate/zero-shot/pair/toy/seed-1/seed-1/rollouts.jsonl.zst")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if records(path) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no problem finished:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); exitCode(err) != 130 || !strings.Contains(stderr.String(), "cell debate/zero-shot/pair/toy/seed-1 stopped; the same command resumes it") {
		t.Fatalf("interrupted experiment: %v, want exit 130 (did it finish first?)\n%s", err, stderr.String())
	}
	stdout, stderrText, err := runApp(t, "experiment", file)
	if err != nil || !strings.Contains(stdout, "rerun") || !strings.Contains(stdout, "1 of 1 cells done") {
		t.Fatalf("resume: %v\n%s\n%s", err, stdout, stderrText)
	}
	if n := records(path); n != 16 {
		t.Errorf("%d problems after resuming, want 16", n)
	}
}

// A fresh checkout's grid makes its inputs first: the prepare steps are listed by a dry run
// and not run, run once before the cells, skipped the second time, and a step that ends
// without its files stops the experiment before any cell.
func TestExperimentPrepare(t *testing.T) {
	dir := t.TempDir()
	out, model := filepath.Join(dir, "exp"), filepath.Join(dir, "tiny")
	file := filepath.Join(dir, "grid.toml")
	grid := `out = "` + out + `"
seeds = [1]
debate_flags = { threads = 1, slots = 4, synthetic = 2 }
[[prepare]]
run = ["model", "tiny", "--arch", "qwen2", "--out", "` + model + `"]
creates = ["` + model + `/model.gguf"]
[agents.self]
gguf = ["` + model + `/model.gguf", "` + model + `/model.gguf"]
[eval.toy]
turns = 1
k = 2
max_tokens = 8
[methods.zero-shot]
agents = ["self"]
eval = ["toy"]
`
	if err := os.WriteFile(file, []byte(grid), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runApp(t, "experiment", "--dry-run", file)
	if err != nil || !strings.Contains(stdout, "1 prepare steps to run first") || !strings.Contains(stdout, "umad model tiny --arch qwen2") ||
		!strings.Contains(stdout, "debate/zero-shot/self/toy/seed-1") {
		t.Fatalf("dry run: %v\n%s", err, stdout)
	}
	if _, err := os.Stat(model); !os.IsNotExist(err) {
		t.Fatalf("the dry run ran the prepare step (%v)", err)
	}
	if stdout, _, err = runApp(t, "experiment", file); err != nil || !strings.Contains(stdout, "wrote "+model) || !strings.Contains(stdout, "1 of 1 cells done") {
		t.Fatalf("experiment: %v\n%s", err, stdout)
	}
	if stdout, _, err = runApp(t, "experiment", file); err != nil || strings.Contains(stdout, "prepare") || !strings.Contains(stdout, "nothing to run") {
		t.Errorf("a second run: %v\n%s", err, stdout)
	}

	missing := strings.Replace(grid, model+"/model.gguf\"]\n[agents", model+"/other.gguf\"]\n[agents", 1)
	missing = strings.Replace(missing, `"--out", "`+model+`"`, `"--out", "`+model+`", "--force"`, 1)
	if err := os.WriteFile(file, []byte(missing), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runApp(t, "experiment", file); err == nil || !strings.Contains(err.Error(), "did not create all of "+model+"/other.gguf") {
		t.Errorf("a step without its file: %v", err)
	}
}

// records counts the records of a rollouts file (0 if unreadable).
func records(path string) int {
	n := 0
	rollouts.Read(path, func([]byte) error { n++; return nil })
	return n
}

// An absurd size (steps = 1e17) is refused in the plan, naming the sizes, where the token
// count overflowed and the plan printed a wrong (or negative) one.
func TestExperimentHugeSize(t *testing.T) {
	dir := t.TempDir()
	text := strings.NewReplacer("OUT", filepath.Join(dir, "exp"), "Q2", testmodel.Tiny(t, "qwen2"), "Q3", testmodel.Tiny(t, "qwen3"),
		"steps = 2", "steps = 100000000000000000").Replace(expGrid)
	file := filepath.Join(dir, "grid.toml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runApp(t, "experiment", "--dry-run", file)
	if err == nil || !strings.Contains(err.Error(), "cell train/ippo/pair/seed-1: generated tokens at most: --steps 100000000000000000 x --batch 2 x -g 2") {
		t.Errorf("steps = 1e17: %v\n%s", err, stdout)
	}
}
