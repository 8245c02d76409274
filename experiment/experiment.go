// Package experiment reads an experiment file (TOML: agent sets, training and evaluation
// setups, methods and seeds) and expands it into its grid of cells, each one ordinary
// `umad train` or `umad debate` run with its own run directory: its settings by key, the
// keys being the command's flags' names.
package experiment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Help describes the file, for `umad experiment --help`; the README's subsection says the same.
const Help = `The file (TOML) holds:
  out = "runs/x"                     the experiment directory; every cell is a run directory in it
  seeds = [1, 2, 3, 4]               the evaluation seeds: one debate cell per seed (its --seeds)
  train_seeds = [1, 2]               the training seeds (default: the first of seeds): one training per
                                     method, agent set and training seed, debated under every seed
  paired_seeds = true                instead, one training per seed, debated under that seed alone
  train_flags = { threads = 1 }      flags of every train cell (name = value; a list repeats the flag)
  debate_flags = { threads = 1 }     flags of every debate cell
  [[prepare]]                        a step that makes the grid's inputs (a model, its warm start):
                                     run = ["model", "tiny", ...] (a umad command line), creates = [paths];
                                     run once, in order, before the cells, unless every path in creates exists
  [agents.NAME]                      an agent set: hf = [HF dirs] (trained), gguf = [GGUFs] (debated untrained)
  [train.NAME]                       a training setup: algo, recipe (paper|reference), alone = true
                                     (each agent trained by itself, as the Single-GRPO pair), flags = {...}
  [eval.NAME]                        an evaluation setup: data (a --data path; none = the built-in set),
                                     turns, k, max_tokens, prompt_limit, recipe, flags = {...}
  [methods.NAME]                     a row: train = a [train] NAME (none: the GGUFs as they are),
                                     agents = [agent sets], eval = [evaluation setups]
Relative paths are relative to the working directory, as on the command line. Cells:
  train/METHOD/AGENTS/seed-T                     (alone: train/METHOD/AGENTS-agent-I/seed-T)
  debate/METHOD/AGENTS/EVAL/seed-S               a trained method's debate uses --agent RUN,agent=I
  debate/METHOD/AGENTS/EVAL/train-seed-T/seed-S  with several train_seeds
Flags tables take the commands' flag names; those the grid sets (agent, out, seed, seeds,
resume, algo, recipe, dry-run, help, check-determinism, and an evaluation's own keys) are refused.
Errors name a setting by its flag, which is its key: --lr is lr (a value that does not read: lr (--lr)).`

// File is an experiment file.
type File struct {
	Out         string              `toml:"out"`
	Seeds       []uint64            `toml:"seeds"`
	TrainSeeds  []uint64            `toml:"train_seeds"`
	PairedSeeds bool                `toml:"paired_seeds"`
	TrainFlags  map[string]any      `toml:"train_flags"`
	DebateFlags map[string]any      `toml:"debate_flags"`
	Prepare     []Prepare           `toml:"prepare"`
	Agents      map[string]AgentSet `toml:"agents"`
	Train       map[string]Train    `toml:"train"`
	Eval        map[string]Eval     `toml:"eval"`
	Methods     map[string]Method   `toml:"methods"`
}

// AgentSet is a team: its HF directories (what training starts from) and GGUFs (what an
// untrained debate runs), agent by agent.
type AgentSet struct {
	HF   []string `toml:"hf"`
	GGUF []string `toml:"gguf"`
}

// Prepare is a step that makes an input of the grid: a umad command line, run unless the
// files it creates exist, so a fresh clone runs the grid with one command.
type Prepare struct {
	Run     []string `toml:"run"`
	Creates []string `toml:"creates"`
}

// Done says whether every file the step creates exists.
func (p Prepare) Done() bool {
	for _, path := range p.Creates {
		if _, err := os.Stat(path); err != nil {
			return false
		}
	}
	return true
}

// Train is a training setup ([train.NAME]); Recipe is its --recipe.
type Train struct {
	Algo   string         `toml:"algo"`
	Recipe string         `toml:"recipe"`
	Alone  bool           `toml:"alone"`
	Flags  map[string]any `toml:"flags"`
}

// Eval is an evaluation setup ([eval.NAME]): a debate; Recipe is its --recipe.
type Eval struct {
	Recipe      string         `toml:"recipe"`
	Data        string         `toml:"data"`
	Turns       int            `toml:"turns"`
	K           int            `toml:"k"`
	MaxTokens   int            `toml:"max_tokens"`
	PromptLimit int            `toml:"prompt_limit"`
	Flags       map[string]any `toml:"flags"`
}

// Method is a row of the grid: agent sets, trained by a training setup or not, evaluated by
// evaluation setups.
type Method struct {
	Train  string   `toml:"train"`
	Agents []string `toml:"agents"`
	Eval   []string `toml:"eval"`
}

// Cell is one run of the grid.
type Cell struct {
	// Name is the run directory relative to the experiment's out; --only matches it.
	Name string
	// Method and AgentSet are the grid's row: the method's name and its agent set's.
	Method, AgentSet string
	// Trained says whether the method trains its agents.
	Trained bool
	Kind    string // "train" or "debate"
	// Seed is a debate's evaluation seed, or a training's seed; TrainSeed is the seed of the
	// training a debate debates (0: untrained).
	Seed, TrainSeed uint64
	// Flags are the keys of the flags tables the cell takes.
	Flags []string
	// Settings are the cell's settings by key, --out's included, in order: a list's values
	// one each.
	Settings []Setting
	// Needs names the train cells whose checkpoints a debate cell debates; BaseSettings are
	// its settings on the agent set's GGUFs instead, which resolve before training.
	Needs        []string
	BaseSettings []Setting
	// Agents are a train cell's hf directories.
	Agents []string
}

// Setting is one setting of a cell: a key (a flag's name, or an alias a flags table
// gives) and its value as text; a list's values are settings of one key each.
type Setting struct{ Key, Value string }

// line is a cell's settings by key, in order.
type line struct {
	settings []Setting
}

// add gives key the value v.
func (l *line) add(key string, v any) {
	l.settings = append(l.settings, Setting{key, fmt.Sprint(v)})
}

// Dir is the cell's run directory.
func (c Cell) Dir(f *File) string { return filepath.Join(f.Out, c.Name) }

// Load reads and checks an experiment file; an unknown key is an error naming its line.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := toml.NewDecoder(bytes.NewReader(b)).DisallowUnknownFields().Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, TOMLError(err))
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// TOMLError gives the line of go-toml's errors ("line 12: unknown key eval.x.turn"); umad
// train's --config files use it too.
func TOMLError(err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		e := strict.Errors[0]
		row, _ := e.Position()
		return fmt.Errorf("line %d: unknown key %s", row, strings.Join(e.Key(), "."))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		return fmt.Errorf("line %d: %v", row, de)
	}
	return err
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (f *File) check() error {
	if f.Out == "" {
		return errors.New("out is missing: name the experiment directory")
	}
	if err := agentPath("out", f.Out); err != nil {
		return err
	}
	if len(f.Seeds) == 0 {
		return errors.New("seeds is missing or empty")
	}
	if s, ok := repeated(f.Seeds); ok {
		return fmt.Errorf("seeds: %d is given twice", s)
	}
	if s, ok := repeated(f.TrainSeeds); ok {
		return fmt.Errorf("train_seeds: %d is given twice", s)
	}
	if f.PairedSeeds && len(f.TrainSeeds) > 0 {
		return errors.New("paired_seeds trains once per seed; give it or train_seeds, not both")
	}
	if len(f.Methods) == 0 {
		return errors.New("no [methods.NAME]: the grid is empty")
	}
	for i, p := range f.Prepare {
		if len(p.Run) == 0 || len(p.Creates) == 0 {
			return fmt.Errorf("[[prepare]] %d: give both run (a umad command line) and creates (the paths it makes)", i+1)
		}
		if p.Run[0] == "experiment" {
			return fmt.Errorf("[[prepare]] %d: a step cannot run an experiment", i+1)
		}
	}
	for _, group := range []struct {
		what  string
		names []string
	}{{"agents", keys(f.Agents)}, {"train", keys(f.Train)}, {"eval", keys(f.Eval)}, {"methods", keys(f.Methods)}} {
		for _, n := range group.names {
			if !nameRE.MatchString(n) {
				return fmt.Errorf("[%s.%s]: a name is letters, digits, '.', '-' and '_' (it names directories)", group.what, n)
			}
		}
	}
	for _, name := range keys(f.Agents) {
		for _, p := range append(slices.Clip(f.Agents[name].HF), f.Agents[name].GGUF...) {
			if err := agentPath(fmt.Sprintf("[agents.%s]", name), p); err != nil {
				return err
			}
		}
	}
	for _, name := range keys(f.Methods) {
		if err := f.checkMethod(name, f.Methods[name]); err != nil {
			return fmt.Errorf("[methods.%s]: %w", name, err)
		}
	}
	for _, name := range keys(f.Train) {
		if f.Train[name].Algo == "" {
			return fmt.Errorf("[train.%s]: algo is missing", name)
		}
	}
	return nil
}

func (f *File) checkMethod(name string, m Method) error {
	if m.Train != "" {
		if _, ok := f.Train[m.Train]; !ok {
			return fmt.Errorf("train %q: no [train.%s]", m.Train, m.Train)
		}
	}
	if len(m.Agents) == 0 || len(m.Eval) == 0 {
		return errors.New("agents and eval must each name at least one set")
	}
	if n, ok := repeated(m.Agents); ok {
		return fmt.Errorf("agents: %q is given twice (its cells would run twice)", n)
	}
	if n, ok := repeated(m.Eval); ok {
		return fmt.Errorf("eval: %q is given twice (its cells would run twice)", n)
	}
	for _, e := range m.Eval {
		if _, ok := f.Eval[e]; !ok {
			return fmt.Errorf("eval %q: no [eval.%s]", e, e)
		}
	}
	for _, a := range m.Agents {
		set, ok := f.Agents[a]
		switch {
		case !ok:
			return fmt.Errorf("agents %q: no [agents.%s]", a, a)
		case m.Train != "" && len(set.HF) == 0:
			return fmt.Errorf("agents %q: a trained method needs the set's hf directories", a)
		case m.Train == "" && len(set.GGUF) == 0:
			return fmt.Errorf("agents %q: a method without train debates the set's gguf files; there are none", a)
		}
	}
	return nil
}

// agentPath refuses a path the grid puts in an --agent value (the experiment directory, an
// agent set's hf and gguf files), which splits at commas into the path and its settings: a
// comma there passes the plan and fails every cell that uses it ("unknown setting").
func agentPath(where, path string) error {
	if strings.Contains(path, ",") {
		return fmt.Errorf("%s: path %q holds a comma, which an --agent value splits its settings at; rename it", where, path)
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// trainSeeds are the seeds a method is trained with: each seed (paired_seeds), train_seeds,
// or by default the first seed alone, as the paper's ± is the evaluation variability of one
// trained model.
func (f *File) trainSeeds() []uint64 {
	switch {
	case f.PairedSeeds:
		return f.Seeds
	case len(f.TrainSeeds) > 0:
		return f.TrainSeeds
	}
	return f.Seeds[:1]
}

// Variability says what Table 1's ± spans, for its caption.
func (f *File) Variability() string {
	switch {
	case f.PairedSeeds:
		return fmt.Sprintf("%d seeds, each its own training and debate (training and evaluation variability together)", len(f.Seeds))
	case len(f.TrainSeeds) > 1:
		return fmt.Sprintf("%d training seeds x %d evaluation seeds (training and evaluation variability together)", len(f.TrainSeeds), len(f.Seeds))
	}
	return fmt.Sprintf("%d evaluation seeds of one training per method (evaluation variability only)", len(f.Seeds))
}

// Cells expands the grid, in the order it runs: method by method (by name), agent set,
// training seed (a training before its debates), evaluation seed.
func (f *File) Cells() ([]Cell, error) {
	var cells []Cell
	for _, mname := range keys(f.Methods) {
		m := f.Methods[mname]
		for _, aname := range m.Agents {
			cs, err := f.methodCells(mname, m, aname)
			if err != nil {
				return nil, fmt.Errorf("[methods.%s]: %w", mname, err)
			}
			cells = append(cells, cs...)
		}
	}
	return cells, nil
}

func (f *File) methodCells(mname string, m Method, aname string) ([]Cell, error) {
	if m.Train == "" {
		return f.debateCells(mname, m, aname, 0, nil, nil)
	}
	var cells []Cell
	for _, tseed := range f.trainSeeds() {
		train, err := f.trainCells(mname, m, aname, tseed)
		if err != nil {
			return nil, err
		}
		var needs, trained []string // the debates' --agent values of the trained agents
		for _, c := range train {
			needs = append(needs, c.Name)
			for j := range c.Agents {
				trained = append(trained, fmt.Sprintf("%s,agent=%d", filepath.Join(f.Out, c.Name), j))
			}
		}
		if set := f.Agents[aname]; len(set.GGUF) > 0 && len(set.GGUF) != len(trained) {
			return nil, fmt.Errorf("agents %q: %d gguf files for %d hf directories", aname, len(set.GGUF), len(trained))
		}
		debates, err := f.debateCells(mname, m, aname, tseed, needs, trained)
		if err != nil {
			return nil, err
		}
		cells = append(append(cells, train...), debates...)
	}
	return cells, nil
}

// trainCells are the trainings of one method, agent set and seed: one, or one per agent
// (alone).
func (f *File) trainCells(mname string, m Method, aname string, seed uint64) ([]Cell, error) {
	set, tr := f.Agents[aname], f.Train[m.Train]
	seedDir := fmt.Sprintf("seed-%d", seed)
	teams := [][]string{set.HF}
	if tr.Alone {
		teams = nil
		for _, hf := range set.HF {
			teams = append(teams, []string{hf})
		}
	}
	var cells []Cell
	for i, team := range teams {
		name := strings.Join([]string{"train", mname, aname, seedDir}, "/")
		if tr.Alone {
			name = strings.Join([]string{"train", mname, fmt.Sprintf("%s-agent-%d", aname, i), seedDir}, "/")
		}
		l := &line{}
		l.add("algo", tr.Algo)
		if tr.Recipe != "" {
			l.add("recipe", tr.Recipe)
		}
		for _, hf := range team {
			l.add("agent", hf)
		}
		l.add("seed", seed)
		l.add("out", filepath.Join(f.Out, name))
		keys, err := l.flags("train", f.TrainFlags, tr.Flags)
		if err != nil {
			return nil, fmt.Errorf("train %s: %w", m.Train, err)
		}
		cells = append(cells, Cell{Name: name, Kind: "train", Method: mname, AgentSet: aname, Trained: true,
			Seed: seed, TrainSeed: seed, Settings: l.settings, Flags: keys, Agents: team})
	}
	return cells, nil
}

// debateCells are the debates of one method and agent set under its evaluation setups
// and seeds: of the GGUFs, or of the training with seed tseed (trained, its --agent values).
func (f *File) debateCells(mname string, m Method, aname string, tseed uint64, needs, trained []string) ([]Cell, error) {
	set := f.Agents[aname]
	var cells []Cell
	for _, seed := range f.Seeds {
		if f.PairedSeeds && trained != nil && seed != tseed {
			continue
		}
		for _, ename := range m.Eval {
			ev := f.Eval[ename]
			parts := []string{"debate", mname, aname, ename}
			if trained != nil && len(f.TrainSeeds) > 1 {
				parts = append(parts, fmt.Sprintf("train-seed-%d", tseed))
			}
			name := strings.Join(append(parts, fmt.Sprintf("seed-%d", seed)), "/")
			agents := set.GGUF
			if trained != nil {
				agents = trained
			}
			l, keys, err := f.debateLine(ev, agents, seed, filepath.Join(f.Out, name))
			if err != nil {
				return nil, fmt.Errorf("eval %s: %w", ename, err)
			}
			cell := Cell{Name: name, Kind: "debate", Method: mname, AgentSet: aname, Trained: trained != nil,
				Seed: seed, TrainSeed: tseed, Settings: l.settings, Flags: keys, Needs: needs}
			if trained != nil && len(set.GGUF) > 0 {
				base, _, _ := f.debateLine(ev, set.GGUF, seed, filepath.Join(f.Out, name))
				cell.BaseSettings = base.settings
			}
			cells = append(cells, cell)
		}
	}
	return cells, nil
}

// debateLine is a debate cell's line: the evaluation setup's on agents with one seed.
func (f *File) debateLine(ev Eval, agents []string, seed uint64, out string) (l *line, keys []string, err error) {
	l = &line{}
	if ev.Recipe != "" {
		l.add("recipe", ev.Recipe)
	}
	for _, a := range agents {
		l.add("agent", a)
	}
	if ev.Data != "" {
		l.add("data", ev.Data)
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"turns", ev.Turns}, {"k", ev.K}, {"max-tokens", ev.MaxTokens}, {"prompt-limit", ev.PromptLimit}} {
		if n.v != 0 {
			l.add(n.key, n.v)
		}
	}
	l.add("seeds", seed)
	l.add("out", out)
	keys, err = l.flags("debate", f.DebateFlags, ev.Flags)
	return l, keys, err
}

// gridFlags are set by the grid itself, or make no run of the cell (help, a dry run, a
// determinism check in other directories); evalFlags are a debate cell's, set by an
// evaluation setup's own keys. A flags table may not give them.
var (
	gridFlags = []string{"agent", "out", "seed", "seeds", "resume", "algo", "recipe", "dry-run", "help", "check-determinism"}
	evalFlags = []string{"data", "turns", "k", "max-tokens", "prompt-limit"}
)

// GridFlag says whether the grid owns a command's flag (by its name, not an alias), which
// a flags table may not give.
func GridFlag(kind, name string) bool {
	return slices.Contains(gridFlags, name) || kind == "debate" && slices.Contains(evalFlags, name)
}

var flagNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// flags adds the flags tables' settings to the line (a list's values one each), by name; a setup's table overrides the common one. names are the keys given.
func (l *line) flags(kind string, common, own map[string]any) (names []string, err error) {
	all := map[string]any{}
	for k, v := range common {
		all[k] = v
	}
	for k, v := range own {
		all[k] = v
	}
	for _, k := range keys(all) {
		if !flagNameRE.MatchString(k) {
			return nil, fmt.Errorf("flags: %q is not a flag name (lower-case letters, digits and '-')", k)
		}
		if GridFlag(kind, k) {
			return nil, fmt.Errorf("flags: --%s is the grid's to set (its own key, or the cell's) or makes no run", k)
		}
		vs, ok := all[k].([]any)
		if !ok {
			vs = []any{all[k]}
		}
		for _, v := range vs {
			l.settings = append(l.settings, Setting{k, fmt.Sprint(v)})
		}
	}
	return keys(all), nil
}

// repeated is the first value of list that an earlier one repeats.
func repeated[T comparable](list []T) (T, bool) {
	for i, v := range list {
		if slices.Contains(list[:i], v) {
			return v, true
		}
	}
	var zero T
	return zero, false
}
