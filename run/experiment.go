package run

// umad experiment as a typed run: a file's grid of cells planned (their states, generated
// tokens and the largest training cell's memory plan) and run in order, each the debate or
// training request its settings give. A trained debate that follows its training cells is
// experiment_follow.go's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/experiment"
	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/trainer"
)

// cellState is a cell as the plan found it.
type cellState struct {
	experiment.Cell
	dir    string
	exists bool // its run directory holds a config.json
	done   bool
	// ready: a debate of trained agents whose training cells are done (else it resolved on
	// the agent set's GGUFs, for the plan).
	ready  bool
	tokens int64
	bytes  int64 // a training cell's model files, to find the largest
	// moved says a trained debate's experiment directory moved; stale names the old
	// checkpoint of a trained debate whose training has a newer one. fix makes the directory
	// the cell's again before it runs (config.json's paths updated, or the stale run set
	// aside).
	moved bool
	stale string
	fix   func() error
}

// Experiment is one `umad experiment` of a file: its grid planned (each cell's state, its
// generated tokens at most, and the memory plan of the largest training cell left), then
// the cells selected run in order, each the debate or training request its settings give.
type Experiment struct {
	File *experiment.File
	Path string // the file's, as the plan names it
	// Only selects the cells whose name matches it, a regular expression ("" all).
	Only   string
	DryRun bool
	// FlagName is the name of command's flag that key names (its name or an alias); ""
	// for none: a cell's flags tables may use a flag's alias.
	FlagName func(command, key string) string
	// Prepare runs a prepare step's umad command line; RankArgs is a cell's command line
	// as its ranks (with --nproc) run it.
	Prepare  func(args []string) error
	RankArgs func(args []string) []string
	// Hub resolves a training cell's HF directories or hub ids.
	Hub            HubDir
	Stdout, Stderr io.Writer
}

// Run plans the experiment and, unless DryRun, runs the cells left. One process per
// experiment directory.
func (e *Experiment) Run() error {
	f := e.File
	cells, err := f.Cells()
	if err != nil {
		return err
	}
	if !e.DryRun {
		lock, err := runlock.Dir(f.Out)
		if err != nil {
			return err
		}
		defer lock.Release()
	}
	if pending := pendingPrepare(f); len(pending) > 0 {
		if e.DryRun {
			printPrepare(e.Stdout, pending)
			fmt.Fprintf(e.Stdout, "experiment %s: %d cells; their tokens and memory plan follow once these steps have run\n", e.Path, len(cells))
			for _, cell := range cells {
				fmt.Fprintf(e.Stdout, "  %-6s %s\n", cell.Kind, cell.Name)
			}
			return nil
		}
		if err := e.runPrepare(pending); err != nil {
			return err
		}
	}
	states, err := e.planCells(cells)
	if err != nil {
		return err
	}
	todo, err := selectCells(e.Only, states)
	if err != nil {
		return err
	}
	printPlan(e.Stdout, e.Path, states, todo)
	if len(todo) == 0 {
		fmt.Fprintln(e.Stdout, "experiment: every selected cell is done; nothing to run")
		return nil
	}
	if err := e.largestTrainPlan(todo); err != nil {
		return err
	}
	if e.DryRun {
		return nil
	}
	return e.runCells(todo, states)
}

// pendingPrepare is the file's prepare steps whose files are not all there.
func pendingPrepare(f *experiment.File) []experiment.Prepare {
	var pending []experiment.Prepare
	for _, p := range f.Prepare {
		if !p.Done() {
			pending = append(pending, p)
		}
	}
	return pending
}

func printPrepare(w io.Writer, pending []experiment.Prepare) {
	fmt.Fprintf(w, "experiment: %d prepare steps to run first:\n", len(pending))
	for _, p := range pending {
		fmt.Fprintf(w, "  umad %s\n", strings.Join(p.Run, " "))
	}
}

// runPrepare runs the steps in order; a step that ends without its files is an error, not a
// grid that fails later on a missing model.
func (e *Experiment) runPrepare(pending []experiment.Prepare) error {
	printPrepare(e.Stdout, pending)
	for _, p := range pending {
		if err := e.Prepare(p.Run); err != nil {
			return fmt.Errorf("prepare step umad %s: %w", strings.Join(p.Run, " "), err)
		}
		if !p.Done() {
			return fmt.Errorf("prepare step umad %s did not create all of %s", strings.Join(p.Run, " "), strings.Join(p.Creates, ", "))
		}
	}
	return nil
}

// planCells resolves every cell's request, as its command would: its tokens, whether it is
// done, and a directory that holds other settings refused before anything runs.
func (e *Experiment) planCells(cells []experiment.Cell) ([]*cellState, error) {
	f := e.File
	byName := map[string]*cellState{}
	var states []*cellState
	for _, cell := range cells {
		st := &cellState{Cell: cell, dir: cell.Dir(f), ready: true}
		_, err := os.Stat(filepath.Join(st.dir, "config.json"))
		st.exists = err == nil
		for _, n := range cell.Needs {
			st.ready = st.ready && byName[n].done
		}
		if err := e.checkCellFlags(cell); err != nil {
			return nil, fmt.Errorf("cell %s: %w", cell.Name, err)
		}
		if err := st.resolve(e); err != nil {
			return nil, fmt.Errorf("cell %s: %w", cell.Name, err)
		}
		byName[cell.Name] = st
		states = append(states, st)
	}
	return states, nil
}

// resolve resolves the cell's request (a trained debate not ready: on its agent set's
// GGUFs, when it has them) for its tokens and its state.
func (st *cellState) resolve(e *Experiment) error {
	settings := st.Settings
	if !st.ready {
		if settings = st.BaseSettings; settings == nil {
			return nil // tokens unknown until its training is done
		}
	}
	if st.Kind == "train" {
		return st.resolveTrain(e)
	}
	return st.resolveDebate(e, settings)
}

// resolveTrain is resolve's for a training cell: its steps (from --epochs when not
// given), tokens and model bytes, and whether its newest checkpoint is its last step.
func (st *cellState) resolveTrain(e *Experiment) error {
	r, err := e.TrainRequest(st.Settings)
	if err != nil {
		return err
	}
	rc, err := r.Resolve()
	if err != nil {
		return err
	}
	if rc.Trainer.Steps == 0 { // --epochs: as the run counts them
		n := rc.Synthetic
		if rc.Data != "" {
			ps, err := data.Load(rc.Data, data.Options{})
			if err != nil {
				return err
			}
			n = len(ps)
		}
		steps, err := tokenProduct(size{"--epochs", r.Epochs}, size{"steps per epoch", n / max(rc.Trainer.BatchSize, 1)})
		if err != nil {
			return fmt.Errorf("steps: %w", err)
		}
		rc.Trainer.Steps = int(steps)
	}
	t := rc.Trainer
	for _, a := range rc.Agents {
		err := st.addTokens(size{"--steps", t.Steps}, size{"--batch", t.BatchSize}, size{"-g", t.G}, size{"--turns", t.Turns}, size{"--max-tokens", a.MaxTokens})
		if err != nil {
			return err
		}
		st.bytes += dirBytes(a.Model)
	}
	if !st.exists {
		return nil
	}
	if _, err := ClaimTrainDir(st.dir, rc); err != nil {
		return err
	}
	step, err := CheckpointStep(st.dir)
	st.done = step >= t.Steps
	return err
}

// resolveDebate is resolve's for a debate cell of settings: its tokens, whether it
// follows a moved or continued training, and whether every problem of every seed is done.
func (st *cellState) resolveDebate(e *Experiment, settings []experiment.Setting) error {
	r, err := e.DebateRequest(settings)
	if err != nil {
		return err
	}
	d, err := r.Resolve()
	if err != nil {
		return err
	}
	cfg := d.Settings
	ps, err := cfg.Problems()
	if err != nil {
		return err
	}
	per := cfg.K // samples per agent and turn
	if cfg.Protocol == "probe" {
		per++ // and the continuation
	}
	for _, a := range cfg.Agents {
		err := st.addTokens(size{"problems", len(ps)}, size{"seeds", len(cfg.Seeds)}, size{"samples per turn", per}, size{"--turns", cfg.Turns}, size{"--max-tokens", a.MaxTokens})
		if err != nil {
			return err
		}
	}
	if !st.exists || !st.ready {
		return nil
	}
	if err := st.followTraining(cfg); err != nil || st.stale != "" {
		return err
	}
	if !st.moved {
		if _, err := ClaimDir(st.dir, cfg); err != nil {
			return err
		}
	}
	// Done only when every problem of every seed is: a report.md is written for a partial
	// run too, and a cut, truncated or deleted rollouts file leaves problems to run.
	if DebateReported(st.dir, cfg.Seeds) {
		st.done = true
		return nil
	}
	dr, err := ReadDebate(st.dir)
	st.done = err == nil && dr.Partial == ""
	return err
}

// checkCellFlags refuses a flags table's key that is no flag of the cell's command, or an
// alias of one the grid owns (o for out).
func (e *Experiment) checkCellFlags(cell experiment.Cell) error {
	for _, key := range cell.Flags {
		name := e.FlagName(cell.Kind, key)
		if name == "" {
			return fmt.Errorf("flags: %s is not a flag of umad %s", key, cell.Kind)
		}
		if experiment.GridFlag(cell.Kind, name) {
			return fmt.Errorf("flags: %s is --%s, the grid's to set", key, name)
		}
	}
	return nil
}

// DebateRequest is the debate a cell's settings give: umad debate's defaults, then each
// setting by its key, as the command's flags set them; on the experiment's outputs.
func (e *Experiment) DebateRequest(settings []experiment.Setting) (*DebateRequest, error) {
	r := NewDebateRequest()
	if err := e.setCell(r.Keys(), "debate", settings); err != nil {
		return nil, err
	}
	r.Command = Command(r.Keys()) // as given, before the recipe sets settings
	r.Stdout, r.Stderr = e.Stdout, e.Stderr
	return r, nil
}

// TrainRequest is the training run a cell's settings give, as DebateRequest's debate.
func (e *Experiment) TrainRequest(settings []experiment.Setting) (*TrainRequest, error) {
	r := NewTrainRequest()
	if err := e.setCell(r.Keys(), "train", settings); err != nil {
		return nil, err
	}
	r.Command, r.Hub = Command(r.Keys()), e.Hub
	r.Stdout, r.Stderr = e.Stdout, e.Stderr
	return r, nil
}

// setCell sets a cell's settings, each key by the name of the command's flag it names (an
// alias among them).
func (e *Experiment) setCell(k Keys, command string, settings []experiment.Setting) error {
	for _, s := range settings {
		if err := SetSetting(k, e.FlagName(command, s.Key), s.Value); err != nil {
			return err
		}
	}
	return nil
}

// maxCellTokens bounds the tokens a cell generates: 10^15 is years of generation on any
// machine, so a size beyond it is a typo (steps = 1e17), and the plan's sums stay far from
// overflowing.
const maxCellTokens = 1_000_000_000_000_000

// size is one factor of a cell's generated tokens, with the flag or count it comes from.
type size struct {
	name string
	n    int
}

// tokenProduct multiplies sizes without overflow; a product over maxCellTokens is an error
// naming them. A size of 0 or less makes 0 (nothing generated; the command refuses it).
func tokenProduct(sizes ...size) (int64, error) {
	p := int64(1)
	for _, s := range sizes {
		if s.n <= 0 {
			return 0, nil
		}
	}
	for _, s := range sizes {
		if p > maxCellTokens/int64(s.n) {
			var parts []string
			for _, s := range sizes {
				parts = append(parts, fmt.Sprintf("%s %d", s.name, s.n))
			}
			return 0, fmt.Errorf("generated tokens at most: %s is over 10^15 (years of generation); a size is too large", strings.Join(parts, " x "))
		}
		p *= int64(s.n)
	}
	return p, nil
}

// addTokens adds an agent's generated tokens (the product of sizes) to the cell's.
func (st *cellState) addTokens(sizes ...size) error {
	n, err := tokenProduct(sizes...)
	if err == nil && st.tokens+n > maxCellTokens {
		err = fmt.Errorf("generated tokens at most: over 10^15 (years of generation) over its agents; a size is too large")
	}
	st.tokens += n
	return err
}

// CheckpointStep is the step of a training run's newest checkpoint (0: none).
func CheckpointStep(dir string) (int, error) {
	ckpt, err := trainer.LatestCheckpoint(dir)
	if err != nil || ckpt == "" {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(ckpt, "state.json"))
	if err != nil {
		return 0, err
	}
	var st trainer.CheckpointState
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(ckpt, "state.json"), err)
	}
	return st.Step, nil
}

// dirBytes is the size of the files in a model directory (not its subdirectories).
func dirBytes(dir string) int64 {
	var n int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

// selectCells returns the cells to run: those --only matches that are not done. A debate of
// trained agents needs its training cells done or selected too.
func selectCells(only string, states []*cellState) ([]*cellState, error) {
	re, err := regexp.Compile(only)
	if err != nil {
		return nil, fmt.Errorf("--only: %w", err)
	}
	var todo []*cellState
	matched := false
	for _, st := range states {
		matched = matched || re.MatchString(st.Name)
		if st.done || !re.MatchString(st.Name) {
			continue
		}
		for _, n := range st.Needs {
			i := slices.IndexFunc(states, func(s *cellState) bool { return s.Name == n })
			if !states[i].done && !re.MatchString(n) {
				return nil, fmt.Errorf("cell %s debates the agents of %s, which is not done; select it too (--only)", st.Name, n)
			}
		}
		todo = append(todo, st)
	}
	if !matched {
		return nil, fmt.Errorf("no cell matches --only %q", only)
	}
	return todo, nil
}

func printPlan(w io.Writer, file string, states, todo []*cellState) {
	var left int64
	for _, st := range todo {
		left += st.tokens
	}
	fmt.Fprintf(w, "experiment %s: %d cells, %d to run, about %s generated tokens at most to run\n", file, len(states), len(todo), countText(left))
	for _, st := range states {
		state := "new"
		switch {
		case st.done:
			state = "done"
		case !slices.Contains(todo, st):
			state = "not selected"
		case st.exists && st.Kind == "train":
			state = "resume"
		case st.stale != "":
			state = "run afresh: " + st.stale
		case st.exists:
			state = "rerun"
		}
		if st.moved {
			state += " (the experiment moved: its checkpoint paths are updated)"
		}
		tokens := countText(st.tokens)
		if st.tokens == 0 && !st.done {
			tokens = "?"
		}
		fmt.Fprintf(w, "  %-6s %-48s %8s tokens  %s\n", st.Kind, st.Name, tokens, state)
	}
}

// countText writes a count as 12, 3.4k or 5.6M.
func countText(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// largestTrainPlan prints the memory plan of the training cell left with the largest models
// (then the most tokens), as its own --dry-run does; one that does not fit fails here.
func (e *Experiment) largestTrainPlan(todo []*cellState) error {
	var big *cellState
	for _, st := range todo {
		if st.Kind == "train" && (big == nil || st.bytes > big.bytes || st.bytes == big.bytes && st.tokens > big.tokens) {
			big = st
		}
	}
	if big == nil {
		return nil
	}
	fmt.Fprintf(e.Stdout, "memory plan of the largest training cell, %s:\n", big.Name)
	r, err := e.TrainRequest(big.Settings)
	if err != nil {
		return err
	}
	r.DryRun, r.Resume = true, big.exists
	_, err = r.Start()
	return err
}

// runDebateCell runs a debate cell: the run.Debate its settings give, whose ranks (with
// --nproc) run its command line.
func (e *Experiment) runDebateCell(st *cellState) error {
	r, err := e.DebateRequest(st.Settings)
	if err != nil {
		return err
	}
	r.RankCommand = e.RankArgs(cellArgs(st))
	d, err := r.Resolve()
	if err != nil {
		return err
	}
	return d.Run(context.Background())
}

// runTrainCell runs a training cell, resuming its run when its directory holds one; its
// ranks (with --nproc) run its command line.
func (e *Experiment) runTrainCell(st *cellState) error {
	r, err := e.TrainRequest(st.Settings)
	if err != nil {
		return err
	}
	args := cellArgs(st)
	if _, err := os.Stat(filepath.Join(st.dir, "config.json")); err == nil {
		r.Resume, args = true, append(append([]string(nil), args...), "--resume")
	}
	r.RankCommand = e.RankArgs(args)
	_, err = r.Start()
	return err
}

// runCells runs the cells in order, with the cells done and left and an ETA from the
// generated-token estimates (from the count where there are none).
func (e *Experiment) runCells(todo, states []*cellState) error {
	w := e.Stdout
	done := 0
	for _, st := range states {
		if st.done {
			done++
		}
	}
	var tokensRun, tokensLeft int64
	for _, st := range todo {
		tokensLeft += st.tokens
	}
	start := time.Now()
	for i, st := range todo {
		if err := st.beforeRun(e); err != nil {
			return fmt.Errorf("cell %s: %w", st.Name, err)
		}
		if st.done {
			done++
			fmt.Fprintf(w, "experiment: cell %d of %d, %s, is done\n", i+1, len(todo), st.Name)
			continue
		}
		fmt.Fprintf(w, "experiment: cell %d of %d to run: %s\n", i+1, len(todo), st.Name)
		runCell := func() error { return e.runTrainCell(st) }
		if st.Kind == "debate" {
			runCell = func() error { return e.runDebateCell(st) }
		}
		if err := runCell(); err != nil {
			if errors.Is(err, launch.ErrInterrupted) {
				fmt.Fprintf(e.Stderr, "umad: experiment: cell %s stopped; the same command resumes it\n", st.Name)
			}
			return fmt.Errorf("cell %s: %w", st.Name, err)
		}
		done++
		tokensRun, tokensLeft = tokensRun+st.tokens, tokensLeft-st.tokens
		elapsed := time.Since(start)
		eta := elapsed / time.Duration(i+1) * time.Duration(len(todo)-i-1)
		if tokensRun > 0 && tokensLeft >= 0 {
			eta = time.Duration(float64(elapsed) * float64(tokensLeft) / float64(tokensRun))
		}
		fmt.Fprintf(w, "experiment: %d of %d cells done, %d left, ETA %s\n", done, len(states), len(todo)-i-1, eta.Round(time.Second))
	}
	fmt.Fprintf(w, "experiment: ran %d of %d cells in %s; %d are done\n", len(todo), len(states), time.Since(start).Round(time.Second), done)
	return nil
}

// cellArgs is the cell's command line (after "umad"), which its ranks run: its command
// and each setting as --key=value.
func cellArgs(st *cellState) []string {
	args := []string{st.Kind}
	for _, s := range st.Settings {
		args = append(args, "--"+s.Key+"="+s.Value)
	}
	return args
}
