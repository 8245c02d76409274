package experiment

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const grid = `out = "exp"
seeds = [1, 2]
train_flags = { threads = 1, steps = 2 }
debate_flags = { threads = 1, stop = ["agree=1", "eu=0.1"] }

[agents.pair]
hf = ["a/hf", "b/hf"]
gguf = ["a.gguf", "b.gguf"]

[train.grpo]
algo = "grpo"
recipe = "paper"
alone = true
flags = { steps = 3 }

[eval.toy]
turns = 2
k = 4

[methods.zero-shot]
agents = ["pair"]
eval = ["toy"]

[methods.single]
train = "grpo"
agents = ["pair"]
eval = ["toy"]
`

func write(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "grid.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The grid expands into one training per method and agent set (the first seed's), debated
// under every evaluation and seed, each an ordinary command line; an alone training setup trains each
// agent by itself and debates agent 0 of each run.
func TestCells(t *testing.T) {
	f, err := Load(write(t, grid))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := f.Cells()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cells {
		names = append(names, c.Name)
	}
	want := []string{
		"train/single/pair-agent-0/seed-1", "train/single/pair-agent-1/seed-1", "debate/single/pair/toy/seed-1",
		"debate/single/pair/toy/seed-2",
		"debate/zero-shot/pair/toy/seed-1", "debate/zero-shot/pair/toy/seed-2",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("cells %q, want %q", names, want)
	}
	train := settingsText(cells[0].Settings)
	if want := "algo=grpo recipe=paper agent=a/hf seed=1 out=exp/train/single/pair-agent-0/seed-1 steps=3 threads=1"; train != want {
		t.Errorf("train cell:\n %s\nwant\n %s", train, want)
	}
	debate := settingsText(cells[2].Settings)
	if want := "agent=exp/train/single/pair-agent-0/seed-1,agent=0 agent=exp/train/single/pair-agent-1/seed-1,agent=0 turns=2 k=4 seeds=1 out=exp/debate/single/pair/toy/seed-1 stop=agree=1 stop=eu=0.1 threads=1"; debate != want {
		t.Errorf("debate cell:\n %s\nwant\n %s", debate, want)
	}
	if !slices.Equal(cells[2].Needs, []string{cells[0].Name, cells[1].Name}) || !slices.Contains(cells[2].BaseSettings, Setting{"agent", "a.gguf"}) {
		t.Errorf("debate cell needs %q, base settings %q", cells[2].Needs, cells[2].BaseSettings)
	}
	if seed2 := settingsText(cells[3].Settings); !strings.Contains(seed2, "exp/train/single/pair-agent-0/seed-1,agent=0") || !strings.Contains(seed2, "seeds=2") {
		t.Errorf("seed 2's debate does not debate the one training under seed 2: %s", seed2)
	}
	if !strings.Contains(f.Variability(), "2 evaluation seeds of one training") {
		t.Errorf("variability %q", f.Variability())
	}
}

// Training seeds are an axis of their own: train_seeds trains once per seed and debates
// each training under every evaluation seed; paired_seeds trains once per seed and debates
// it under that seed alone.
func TestSeedAxes(t *testing.T) {
	for _, c := range []struct {
		key  string
		want []string
		vary string
	}{
		{"train_seeds = [7, 8]", []string{
			"train/single/pair-agent-0/seed-7", "train/single/pair-agent-1/seed-7",
			"debate/single/pair/toy/train-seed-7/seed-1", "debate/single/pair/toy/train-seed-7/seed-2",
			"train/single/pair-agent-0/seed-8", "train/single/pair-agent-1/seed-8",
			"debate/single/pair/toy/train-seed-8/seed-1", "debate/single/pair/toy/train-seed-8/seed-2",
			"debate/zero-shot/pair/toy/seed-1", "debate/zero-shot/pair/toy/seed-2"}, "2 training seeds x 2 evaluation seeds"},
		{"paired_seeds = true", []string{
			"train/single/pair-agent-0/seed-1", "train/single/pair-agent-1/seed-1", "debate/single/pair/toy/seed-1",
			"train/single/pair-agent-0/seed-2", "train/single/pair-agent-1/seed-2", "debate/single/pair/toy/seed-2",
			"debate/zero-shot/pair/toy/seed-1", "debate/zero-shot/pair/toy/seed-2"}, "each its own training"},
	} {
		f, err := Load(write(t, strings.Replace(grid, "seeds = [1, 2]", "seeds = [1, 2]\n"+c.key, 1)))
		if err != nil {
			t.Fatal(err)
		}
		cells, err := f.Cells()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cell := range cells {
			names = append(names, cell.Name)
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("%s: cells %q, want %q", c.key, names, c.want)
		}
		if !strings.Contains(f.Variability(), c.vary) {
			t.Errorf("%s: variability %q, want %q", c.key, f.Variability(), c.vary)
		}
	}
}

// An unknown key, a flag the grid sets, a name that is not a directory name, a seed, agent
// set or evaluation given twice, and a path with a comma where the grid makes it an --agent
// value are refused with where they are.
func TestLoadErrors(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{"turns = 2", "turn = 2", "line 17: unknown key eval.toy.turn"},
		{"seeds = [1, 2]", "seeds = [1, 2]\nseed = 3", "line 3: unknown key seed"},
		{"flags = { steps = 3 }", "flags = { out = \"x\" }", "train grpo: flags: --out is the grid's to set"},
		{"[eval.toy]\nturns = 2\nk = 4", "[eval.toy]\nturns = 2\nk = 4\nflags = { k = 2 }", "eval toy: flags: --k is the grid's to set"},
		{"[agents.pair]", "[agents.\"a b\"]", "[agents.a b]: a name is letters"},
		{"train = \"grpo\"", "train = \"ppo\"", `[methods.single]: train "ppo": no [train.ppo]`},
		{"seeds = [1, 2]", "seeds = [1, 1]", "seeds: 1 is given twice"},
		{"seeds = [1, 2]", "seeds = [1, 2]\ntrain_seeds = [3, 3]", "train_seeds: 3 is given twice"},
		{"seeds = [1, 2]", "seeds = [1, 2]\ntrain_seeds = [3]\npaired_seeds = true", "give it or train_seeds, not both"},
		{"flags = { steps = 3 }", "flags = { \"out=x\" = 1 }", `train grpo: flags: "out=x" is not a flag name`},
		{"flags = { steps = 3 }", "flags = { help = true }", "train grpo: flags: --help is the grid's to set"},
		{"threads = 1, stop", "check-determinism = true, stop", "eval toy: flags: --check-determinism is the grid's to set"},
		{"threads = 1, stop", "dry-run = true, stop", "eval toy: flags: --dry-run is the grid's to set"},
		{"agents = [\"pair\"]", "agents = [\"pair\", \"pair\"]", `[methods.zero-shot]: agents: "pair" is given twice`},
		{"eval = [\"toy\"]", "eval = [\"toy\", \"toy\"]", `[methods.zero-shot]: eval: "toy" is given twice`},
		{"out = \"exp\"", "out = \"runs/lr=1e-3,g=8\"", `out: path "runs/lr=1e-3,g=8" holds a comma`},
		{"\"b/hf\"", "\"b/lr=1,g=8\"", `[agents.pair]: path "b/lr=1,g=8" holds a comma`},
		{"\"a.gguf\"", "\"a,b.gguf\"", `[agents.pair]: path "a,b.gguf" holds a comma`},
		{"[agents.pair]", "[[prepare]]\nrun = [\"model\", \"tiny\"]\n[agents.pair]", "[[prepare]] 1: give both run"},
		{"[agents.pair]", "[[prepare]]\nrun = [\"experiment\", \"x.toml\"]\ncreates = [\"x\"]\n[agents.pair]", "[[prepare]] 1: a step cannot run an experiment"},
	} {
		text := strings.Replace(grid, c.from, c.to, 1)
		f, err := Load(write(t, text))
		if err == nil {
			_, err = f.Cells()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q -> %q: error %v, want %q", c.from, c.to, err, c.want)
		}
	}
}

// The repository's examples read and expand. Toy: 4 seeds of Zero-Shot MAD, the Single-GRPO pair
// (two trainings), IPPO, UMAD, NLL-only and Intrinsic-only, each with its debate.
func TestExamples(t *testing.T) {
	f, err := Load("../examples/toy-table1.toml")
	if err != nil {
		t.Fatal(err)
	}
	cells, err := f.Cells()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, c := range cells {
		kinds[c.Kind]++
	}
	if kinds["train"] != 24 || kinds["debate"] != 24 {
		t.Errorf("the example has %v cells, want 24 trainings and 24 debates", kinds)
	}
	// The paper's: one training per method and agent set (Single-GRPO: one per agent), each
	// debated on the 5 data sets under the 5 seeds: zero-shot 2 x 5 x 5 debates, Single-GRPO
	// 2 + 5 x 5, IPPO and UMAD 2 x (1 + 5 x 5) each.
	f, err = Load("../examples/paper-table1.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cells, err = f.Cells(); err != nil || len(cells) != 181 {
		t.Errorf("the paper's example has %d cells (%v), want 181", len(cells), err)
	}
	kinds = map[string]int{}
	for _, c := range cells {
		kinds[c.Kind]++
	}
	if kinds["train"] != 6 {
		t.Errorf("the paper's example has %d trainings, want 6 (Single-GRPO's two, IPPO's and UMAD's one per agent set)", kinds["train"])
	}
	// Table 2's: UMAD, Intrinsic-only and NLL-only trained once, the Single-GRPO pair once
	// per agent, each debated on the 5 data sets under 3 seeds; its UMAD and Single-GRPO cells
	// are Table 1's (one directory, the same settings).
	t2, err := Load("../examples/paper-table2.toml")
	if err != nil {
		t.Fatal(err)
	}
	cells2, err := t2.Cells()
	if err != nil || len(cells2) != 5+4*5*3 {
		t.Fatalf("Table 2's example has %d cells (%v), want 65", len(cells2), err)
	}
	args := map[string]string{}
	for _, c := range cells {
		args[c.Name] = settingsText(c.Settings)
	}
	shared := 0
	for _, c := range cells2 {
		if a, ok := args[c.Name]; ok {
			shared++
			if a != settingsText(c.Settings) {
				t.Errorf("cell %s differs between Tables 1 and 2:\n %s\n %s", c.Name, a, settingsText(c.Settings))
			}
		}
	}
	if shared != 2+1+2*5*3 {
		t.Errorf("Tables 1 and 2 share %d cells, want 33 (the Single-GRPO and UMAD trainings and their debates of seeds 1-3)", shared)
	}
}

// settingsText writes a cell's settings as key=value, space-separated.
func settingsText(settings []Setting) string {
	var parts []string
	for _, s := range settings {
		parts = append(parts, s.Key+"="+s.Value)
	}
	return strings.Join(parts, " ")
}
