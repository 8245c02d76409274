package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/run"
)

// paperGrid is Table 1's shape on the tiny models: two agent sets (hetero, homo), the
// zero-shot debate and IPPO, two data sets debated apart with their own lengths (as the
// paper runs AIME), two evaluation seeds over one training per method and agent set.
const paperGrid = `out = "OUT"
seeds = [1, 2]
train_flags = { threads = 1, torch-threads = 1, steps = 1, batch = 2, g = 2, mini-batch = 2, max-tokens = 8, prompt-limit = 512, slots = 4, val-synthetic = 2, synthetic = 4 }
debate_flags = { threads = 1, slots = 8 }

[agents.hetero]
hf = ["Q2/hf", "Q3/hf"]
gguf = ["Q2/model.gguf", "Q3/model.gguf"]

[agents.homo]
hf = ["Q2/hf", "Q2/hf"]
gguf = ["Q2/model.gguf", "Q2/model.gguf"]

[train.ippo]
algo = "ippo"

[eval.gsm8k]
data = "DATA/gsm8k/test.jsonl"
turns = 2
k = 2
max_tokens = 8
prompt_limit = 512
flags = { limit = 3 }

[eval.math500]
data = "DATA/math500/test.jsonl"
turns = 2
k = 2
max_tokens = 12
prompt_limit = 768
flags = { limit = 2 }

[methods.zero-shot]
agents = ["hetero", "homo"]
eval = ["gsm8k", "math500"]

[methods.ippo]
train = "ippo"
agents = ["hetero", "homo"]
eval = ["gsm8k", "math500"]
`

// umad experiment on a paper-shaped grid trains each method once per agent set and debates
// it under both seeds; umad report FILE.toml then gives Table 1 with the Average of the two
// data sets (each seed's, then mean ± std) and each agent set compared with its own
// zero-shot row. The grid then moves, and its trained debates are still done; a training
// continued to more steps sets its old debates aside and debates the new checkpoint.
func TestExperimentPaperGrid(t *testing.T) {
	torchtest.Open(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "exp")
	q2, q3 := testmodel.Tiny(t, "qwen2"), testmodel.Tiny(t, "qwen3")
	text := strings.NewReplacer("OUT", out, "Q2", q2, "Q3", q3, "DATA", sharedData(t, "")).Replace(paperGrid)
	file := filepath.Join(dir, "paper.toml")
	writeGrid := func(text string) {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeGrid(text)
	stdout, stderr, err := runApp(t, "experiment", file)
	if err != nil {
		t.Fatalf("experiment: %v\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "18 cells, 18 to run") || strings.Count(stdout, "train  train/") != 2 {
		t.Errorf("want 2 trainings (one per agent set) and 16 debates:\n%s", stdout)
	}
	rep := filepath.Join(dir, "report")
	if stdout, stderr, err = runApp(t, "report", "--out", rep, file); err != nil {
		t.Fatalf("report: %v\n%s%s", err, stdout, stderr)
	}
	table := readText(t, filepath.Join(rep, "table1.md"))
	for _, want := range []string{
		"| Method | Agent | gsm8k T=1 | gsm8k T=2 | math500 T=1 | math500 T=2 | Average T=1 | Average T=2 |",
		"over 2 evaluation seeds of one training per method",
		"the first method of the row's agent set (zero-shot/hetero, zero-shot/homo)",
		"Problems per dataset (n): gsm8k 3, math500 2.",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("Table 1 lacks %q:\n%s", want, table)
		}
	}
	// Every row fills the Average; the trained rows carry a difference from their baseline.
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| zero-shot/") && !strings.HasPrefix(line, "| ippo/") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if avg := strings.TrimSpace(cells[len(cells)-1]); avg == "–" || !strings.Contains(avg, "±") {
			t.Errorf("a row without an Average: %s", line)
		}
		if strings.HasPrefix(line, "| ippo/") != strings.Contains(cells[len(cells)-1], "(") {
			t.Errorf("only the trained rows differ from a baseline: %s", line)
		}
	}
	// Each setting's grey baseline: 2 zero-shot rows x 2 agents x 6 columns.
	if n := strings.Count(readText(t, filepath.Join(rep, "table1.html")), "background:#f4f5f7"); n != 24 {
		t.Errorf("%d baseline cells in table1.html, want 24", n)
	}

	// Moved: the same runs at a new place, done as they were.
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(out, moved); err != nil {
		t.Fatal(err)
	}
	out, text = moved, strings.ReplaceAll(text, out, moved)
	writeGrid(text)
	if stdout, stderr, err = runApp(t, "experiment", "--dry-run", file); err != nil || !strings.Contains(stdout, "nothing to run") {
		t.Fatalf("the moved experiment: %v\n%s%s", err, stdout, stderr)
	}
	// A moved trained debate with problems left resumes there, its config.json's checkpoint
	// paths updated and the rest of the file (the command that started it) kept.
	cut := filepath.Join(out, "debate/ippo/homo/gsm8k/seed-2")
	rollouts := filepath.Join(cut, "seed-2", "rollouts.jsonl.zst")
	b, err := os.ReadFile(rollouts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rollouts, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, err = runApp(t, "experiment", file); err != nil || !strings.Contains(stdout, "the experiment moved: its checkpoint paths are updated") {
		t.Fatalf("the moved experiment with a cut debate: %v\n%s%s", err, stdout, stderr)
	}
	if cfg := readText(t, filepath.Join(cut, "config.json")); strings.Contains(cfg, `"model": "`+filepath.Join(dir, "exp")+"/") ||
		!strings.Contains(cfg, filepath.Join(out, "train/ippo/homo/seed-1/checkpoints/")) || !strings.Contains(cfg, `"command"`) {
		t.Errorf("the moved debate's config.json:\n%s", cfg)
	}

	// Continued to 2 steps: the trainings resume, the trained debates run again on the new
	// checkpoint, their old runs kept beside them.
	writeGrid(strings.Replace(text, "steps = 1,", "steps = 2,", 1))
	if stdout, stderr, err = runApp(t, "experiment", "--only", "hetero", file); err != nil {
		t.Fatalf("more steps: %v\n%s%s", err, stdout, stderr)
	}
	old := filepath.Join(out, "debate/ippo/hetero/gsm8k/seed-1.step-000001")
	if !strings.Contains(stdout, "cell 2 of 5 to run: debate/ippo/hetero/gsm8k/seed-1") {
		t.Errorf("the trained debates do not run after their training:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(old, "config.json")); err != nil {
		t.Errorf("the stale debate is not kept as %s: %v\n%s", old, err, stdout)
	}
	cfg := readText(t, filepath.Join(out, "debate/ippo/hetero/gsm8k/seed-1/config.json"))
	if !strings.Contains(cfg, filepath.Join(out, "train/ippo/hetero/seed-1/checkpoints/step-000002")) {
		t.Errorf("the rerun debate is not of step 2:\n%s", cfg)
	}
	// The homogeneous training continued alone: its debates are of step 1, so umad report
	// leaves them out until they run again.
	if stdout, stderr, err = runApp(t, "experiment", "--only", "train/ippo/homo", file); err != nil {
		t.Fatalf("more steps: %v\n%s%s", err, stdout, stderr)
	}
	stdout, stderr, err = runApp(t, "report", "--out", rep, file)
	if err != nil || !strings.Contains(stdout, "cell debate/ippo/homo/gsm8k/seed-1 of "+file+" is not done (it debated train/ippo/homo/seed-1/checkpoints/step-000001/") ||
		strings.Contains(stdout, "debate/ippo/hetero/gsm8k/seed-1 of") {
		t.Errorf("report after the homogeneous training continued: %v\n%s%s", err, stdout, stderr)
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// zeroShotGrid is a grid of one debate cell on the tiny GGUF.
const zeroShotGrid = `out = "OUT"
seeds = [1, 2]
debate_flags = { threads = 1, slots = 8, synthetic = 3 FLAGS }

[agents.pair]
gguf = ["G", "G"]

[eval.toy]
turns = 2
k = 2
max_tokens = 8

[methods.zero-shot]
agents = ["pair"]
eval = ["toy"]
`

// writeZeroShotGrid writes zeroShotGrid with more debate flags into dir and returns the
// file and the experiment directory.
func writeZeroShotGrid(t *testing.T, dir, flags string) (file, out string) {
	out = filepath.Join(dir, "exp")
	file = filepath.Join(dir, "grid.toml")
	text := strings.NewReplacer("OUT", out, "G", testmodel.GGUF(t, "qwen2"), " FLAGS", flags).Replace(zeroShotGrid)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, out
}

// A debate cell is done only when every problem of every seed is: a truncated rollouts file
// (and the report.md that umad report writes of the partial run, marked PARTIAL) or a
// deleted one leaves it to run, and umad report FILE.toml leaves it out. A config.json that
// disagrees with the records is refused.
func TestExperimentDoneMeansEveryProblem(t *testing.T) {
	dir := t.TempDir()
	file, out := writeZeroShotGrid(t, dir, "")
	run := filepath.Join(out, "debate/zero-shot/pair/toy/seed-1")
	if _, stderr, err := runApp(t, "experiment", file); err != nil {
		t.Fatalf("experiment: %v\n%s", err, stderr)
	}
	plan := func(want string) {
		t.Helper()
		stdout, stderr, err := runApp(t, "experiment", "--dry-run", file)
		if err != nil || !strings.Contains(stdout, want) {
			t.Errorf("the plan: %v, want %q\n%s%s", err, want, stdout, stderr)
		}
	}
	plan("nothing to run")

	rollouts := filepath.Join(run, "seed-1", "rollouts.jsonl.zst")
	b, err := os.ReadFile(rollouts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rollouts, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runApp(t, "report", run)
	if err != nil || !strings.Contains(stdout, "is PARTIAL (seed 1: ") {
		t.Errorf("report of a cut run: %v\n%s%s", err, stdout, stderr)
	}
	if md := readText(t, filepath.Join(run, "report", "report.md")); !strings.Contains(md, "**PARTIAL RUN**: seed 1: ") || !strings.Contains(md, " of 3 problems finished") {
		t.Errorf("report.md of a cut run:\n%s", md)
	}
	if sum := readText(t, filepath.Join(run, "report", "summary.json")); !strings.Contains(sum, `"partial": "seed 1: `) || strings.Contains(sum, `"complete"`) {
		t.Errorf("summary.json of a cut run is not marked partial:\n%.300s", sum)
	}
	plan("1 to run")
	if stdout, _, err = runApp(t, "report", "--out", filepath.Join(dir, "rep"), file); err != nil || !strings.Contains(stdout, "is not done (seed 1: ") {
		t.Errorf("report over the grid with a cut cell: %v\n%s", err, stdout)
	}
	if _, stderr, err := runApp(t, "experiment", file); err != nil {
		t.Fatalf("experiment: %v\n%s", err, stderr)
	}
	plan("nothing to run")
	if sum := readText(t, filepath.Join(run, "report", "summary.json")); !strings.Contains(sum, `"complete": true`) {
		t.Errorf("summary.json of the finished run is not marked complete:\n%.300s", sum)
	}

	if err := os.Remove(rollouts); err != nil {
		t.Fatal(err)
	}
	plan("1 to run")
	if _, stderr, err := runApp(t, "experiment", file); err != nil {
		t.Fatalf("experiment: %v\n%s", err, stderr)
	}

	cfg := filepath.Join(run, "config.json")
	good := readText(t, cfg)
	for _, c := range []struct{ from, to, want string }{
		{`"turns": 2`, `"turns": 3`, "2 turns, config.json says 3"},
		{`"k": 2`, `"k": 1`, "has 2 samples, config.json says k = 1"},
		{`"protocol": "trajectories"`, `"protocol": "probe"`, "another protocol than config.json's probe"},
	} {
		if err := os.WriteFile(cfg, []byte(strings.Replace(good, c.from, c.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runApp(t, "report", run); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s in config.json: %v, want %q", c.to, err, c.want)
		}
	}
	var agents struct{ Agents []json.RawMessage }
	if err := json.Unmarshal([]byte(good), &agents); err != nil {
		t.Fatal(err)
	}
	one := strings.Replace(good, ",\n    "+string(agents.Agents[1]), "", 1)
	one = strings.Replace(one, string(agents.Agents[1]), "", 1)
	if err := os.WriteFile(cfg, []byte(one), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runApp(t, "report", run); err == nil || !strings.Contains(err.Error(), "has 2 agents, config.json names 1") {
		t.Errorf("one agent in config.json: %v", err)
	}
}

// A flags table's key must be a flag of the cell's command, and not an alias of one the
// grid sets (o is --out).
func TestExperimentFlagNames(t *testing.T) {
	for _, c := range []struct{ flags, want string }{
		{", o = \"x\"", "flags: o is --out, the grid's to set"},
		{", a = \"x.gguf\"", "flags: a is --agent, the grid's to set"},
		{", nope = 1", "flags: nope is not a flag of umad debate"},
	} {
		file, _ := writeZeroShotGrid(t, t.TempDir(), c.flags)
		if _, _, err := runApp(t, "experiment", "--dry-run", file); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.flags, err, c.want)
		}
	}
}

// A cell with --nproc 2 starts two ranks of the cell's own command, not of umad experiment
// (whose ranks found the experiment locked by their launcher): a debate cell, and a training
// cell data-parallel over two ranks.
func TestExperimentNprocCell(t *testing.T) {
	file, out := writeZeroShotGrid(t, t.TempDir(), ", nproc = 2")
	if code, stderr := runUmadProcess(t, 0, "experiment", file); code != 0 {
		t.Fatalf("experiment with nproc = 2: exit %d\n%s", code, stderr)
	}
	for _, seed := range []string{"seed-1", "seed-2"} {
		if recs := readRecords(t, filepath.Join(out, "debate/zero-shot/pair/toy", seed, seed, "rollouts.jsonl.zst")); len(recs) != 3 {
			t.Errorf("%s: %d debates, want 3", seed, len(recs))
		}
	}

	torchtest.Open(t)
	dir := t.TempDir()
	out = filepath.Join(dir, "exp")
	file = filepath.Join(dir, "grid.toml")
	text := strings.NewReplacer("OUT", out, "Q2", testmodel.Tiny(t, "qwen2"), "Q3", testmodel.Tiny(t, "qwen3"), "steps = 2,", "steps = 1, nproc = 2,").Replace(expGrid)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stderr := runUmadProcess(t, 0, "experiment", "--only", "ippo", file); code != 0 {
		t.Fatalf("experiment with a train cell of nproc = 2: exit %d\n%s", code, stderr)
	}
	if step, err := run.CheckpointStep(filepath.Join(out, "train/ippo/pair/seed-1")); err != nil || step != 1 {
		t.Errorf("the two-rank training cell's checkpoint is at step %d (%v), want 1", step, err)
	}
}

// The paper's experiment files plan on stand-ins for the paper's models (as
// TestReadmePaperCommands runs its commands): Table 1 trains once per method and agent set
// (Single-GRPO once per agent), Table 2 adds its two ablations' trainings in one directory.
func TestPaperExperimentPlans(t *testing.T) {
	torchtest.Open(t)
	examples, err := filepath.Abs(filepath.Join("..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	paperWorkdir(t, map[string]string{
		"q25.gguf": filepath.Join(testmodel.Tiny(t, "qwen2"), "model.gguf"),
		"q3.gguf":  filepath.Join(testmodel.Tiny(t, "qwen3"), "model.gguf"),
	})
	for _, c := range []struct {
		file   string
		cells  string
		trains []string
	}{
		{"paper-table1.toml", "181 cells, 181 to run", []string{"train/ippo/hetero/seed-1", "train/ippo/homo/seed-1", "train/single-grpo/hetero-agent-0/seed-1",
			"train/single-grpo/hetero-agent-1/seed-1", "train/umad/hetero/seed-1", "train/umad/homo/seed-1"}},
		{"paper-table2.toml", "65 cells, 65 to run", []string{"train/intrinsic-only/hetero/seed-1", "train/nll-only/hetero/seed-1",
			"train/single-grpo/hetero-agent-0/seed-1", "train/single-grpo/hetero-agent-1/seed-1", "train/umad/hetero/seed-1"}},
	} {
		// The stand-ins' 4,096 tokens of context hold no paper-length prompt: shorter ones.
		text := strings.ReplaceAll(readText(t, filepath.Join(examples, c.file)), "turns = 5", "turns = 5\nmax_tokens = 16\nprompt_limit = 1024")
		text = strings.Replace(text, "\n[agents.", "\ntrain_flags = { max-tokens = 16, prompt-limit = 1024 }\n\n[agents.", 1)
		if err := os.WriteFile(c.file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := runApp(t, "experiment", "--dry-run", c.file)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.file, err, stderr)
		}
		var trains []string
		for _, line := range strings.Split(stdout, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "train" {
				trains = append(trains, f[1])
			}
		}
		if !strings.Contains(stdout, c.cells) || strings.Join(trains, " ") != strings.Join(c.trains, " ") {
			t.Errorf("%s: trainings %q, want %q\n%s", c.file, trains, c.trains, stdout)
		}
	}
}
