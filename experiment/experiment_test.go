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

// The grid expands into one cell per method, agent set, evaluation and seed, each an
// ordinary command line; an alone recipe trains each agent by itself and debates agent 0 of
// each run.
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
		"train/single/pair-agent-0/seed-2", "train/single/pair-agent-1/seed-2", "debate/single/pair/toy/seed-2",
		"debate/zero-shot/pair/toy/seed-1", "debate/zero-shot/pair/toy/seed-2",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("cells %q, want %q", names, want)
	}
	train := strings.Join(cells[0].Args, " ")
	if want := "train --algo grpo --recipe paper --agent a/hf --seed 1 --out exp/train/single/pair-agent-0/seed-1 --steps=3 --threads=1"; train != want {
		t.Errorf("train cell:\n %s\nwant\n %s", train, want)
	}
	debate := strings.Join(cells[2].Args, " ")
	if want := "debate --agent exp/train/single/pair-agent-0/seed-1,agent=0 --agent exp/train/single/pair-agent-1/seed-1,agent=0 --turns 2 -k 4 --seeds 1 --out exp/debate/single/pair/toy/seed-1 --stop=agree=1 --stop=eu=0.1 --threads=1"; debate != want {
		t.Errorf("debate cell:\n %s\nwant\n %s", debate, want)
	}
	if !slices.Equal(cells[2].Needs, []string{cells[0].Name, cells[1].Name}) || !slices.Contains(cells[2].BaseArgs, "a.gguf") {
		t.Errorf("debate cell needs %q, base args %q", cells[2].Needs, cells[2].BaseArgs)
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
	// The paper's: zero-shot 2 x 5 x 5 debates, Single-GRPO 5 x (2 + 5), IPPO and UMAD
	// 2 x 5 x (1 + 5) each.
	f, err = Load("../examples/paper-table1.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cells, err = f.Cells(); err != nil || len(cells) != 205 {
		t.Errorf("the paper's example has %d cells (%v), want 205", len(cells), err)
	}
}
