package cli

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

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/experiment"
	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainer"
)

func init() {
	register(&ucli.Command{
		Name:      "experiment",
		Usage:     "run a grid of trainings and debates (methods x agent sets x evaluations x seeds) from one file",
		UsageText: "umad experiment [--dry-run] [--only REGEXP] FILE.toml",
		Description: "Every cell of the grid is an ordinary `umad train` or `umad debate` run directory under the\n" +
			"file's out, run in this process by the command itself. The plan comes first: the cells, each\n" +
			"one's state (done, new, resume) and generated tokens at most (training rollouts, validation\n" +
			"not counted), and the memory plan of the largest training cell left. Cells that are done are\n" +
			"skipped (a debate when every problem of every seed is in its rollouts), a cut one resumes (train\n" +
			"--resume; a debate reruns its unfinished problems), and one whose directory holds other settings\n" +
			"is refused, naming the setting. A trained debate follows a moved experiment directory, and one\n" +
			"whose training has a newer checkpoint (more steps) is kept as DIR.step-N and run afresh. Ctrl-C\n" +
			"stops the cell as the command would; the same command resumes it. One process per experiment\n" +
			"directory.\n\n" + experiment.Help,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "dry-run", Usage: "print the plan and stop"},
			&ucli.StringFlag{Name: "only", Usage: "run only the cells whose name (train/METHOD/AGENTS/seed-S, debate/METHOD/AGENTS/EVAL/seed-S) matches this regular expression"},
		},
		Action: experimentCmd,
	})
}

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

func experimentCmd(c *ucli.Context) error {
	if c.NArg() != 1 {
		return errors.New("give one experiment file: umad experiment FILE.toml")
	}
	f, err := experiment.Load(c.Args().First())
	if err != nil {
		return err
	}
	cells, err := f.Cells()
	if err != nil {
		return err
	}
	if !c.Bool("dry-run") {
		lock, err := runlock.Dir(f.Out)
		if err != nil {
			return err
		}
		defer lock.Release()
	}
	if pending := pendingPrepare(f); len(pending) > 0 {
		if c.Bool("dry-run") {
			printPrepare(c.App.Writer, pending)
			fmt.Fprintf(c.App.Writer, "experiment %s: %d cells; their tokens and memory plan follow once these steps have run\n", c.Args().First(), len(cells))
			for _, cell := range cells {
				fmt.Fprintf(c.App.Writer, "  %-6s %s\n", cell.Kind, cell.Name)
			}
			return nil
		}
		if err := runPrepare(c, pending); err != nil {
			return err
		}
	}
	states, err := planCells(c, f, cells)
	if err != nil {
		return err
	}
	todo, err := selectCells(c.String("only"), states)
	if err != nil {
		return err
	}
	w := c.App.Writer
	printPlan(w, c.Args().First(), states, todo)
	if len(todo) == 0 {
		fmt.Fprintln(w, "experiment: every selected cell is done; nothing to run")
		return nil
	}
	if err := largestTrainPlan(c, todo); err != nil {
		return err
	}
	if c.Bool("dry-run") {
		return nil
	}
	return runCells(c, todo, states)
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
func runPrepare(c *ucli.Context, pending []experiment.Prepare) error {
	printPrepare(c.App.Writer, pending)
	for _, p := range pending {
		if err := runCommand(c, p.Run); err != nil {
			return fmt.Errorf("prepare step umad %s: %w", strings.Join(p.Run, " "), err)
		}
		if !p.Done() {
			return fmt.Errorf("prepare step umad %s did not create all of %s", strings.Join(p.Run, " "), strings.Join(p.Creates, ", "))
		}
	}
	return nil
}

// planCells resolves every cell through its command's own flag handling: its tokens, whether
// it is done, and a directory that holds other settings refused before anything runs.
func planCells(c *ucli.Context, f *experiment.File, cells []experiment.Cell) ([]*cellState, error) {
	byName := map[string]*cellState{}
	var states []*cellState
	for _, cell := range cells {
		st := &cellState{Cell: cell, dir: cell.Dir(f), ready: true}
		_, err := os.Stat(filepath.Join(st.dir, "config.json"))
		st.exists = err == nil
		for _, n := range cell.Needs {
			st.ready = st.ready && byName[n].done
		}
		if err := checkCellFlags(cell); err != nil {
			return nil, fmt.Errorf("cell %s: %w", cell.Name, err)
		}
		if err := st.resolve(c); err != nil {
			return nil, fmt.Errorf("cell %s: %w", cell.Name, err)
		}
		byName[cell.Name] = st
		states = append(states, st)
	}
	return states, nil
}

func (st *cellState) resolve(c *ucli.Context) error {
	settings := st.Settings
	if !st.ready {
		if settings = st.BaseSettings; settings == nil {
			return nil // tokens unknown until its training is done
		}
	}
	if st.Kind == "train" {
		return st.resolveTrain(c)
	}
	return st.resolveDebate(settings)
}

func (st *cellState) resolveTrain(c *ucli.Context) error {
	r, err := trainCell(c, st.Settings)
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
	if _, err := run.ClaimTrainDir(st.dir, rc); err != nil {
		return err
	}
	step, err := checkpointStep(st.dir)
	st.done = step >= t.Steps
	return err
}

func (st *cellState) resolveDebate(settings []experiment.Setting) error {
	r, err := debateCell(settings)
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
		if _, err := run.ClaimDir(st.dir, cfg); err != nil {
			return err
		}
	}
	// Done only when every problem of every seed is: a report.md is written for a partial
	// run too, and a cut, truncated or deleted rollouts file leaves problems to run.
	if run.DebateReported(st.dir, cfg.Seeds) {
		st.done = true
		return nil
	}
	dr, err := run.ReadDebate(st.dir)
	st.done = err == nil && dr.Partial == ""
	return err
}

// checkCellFlags refuses a flags table's key that is no flag of the cell's command, or an
// alias of one the grid owns (o for out).
func checkCellFlags(cell experiment.Cell) error {
	for _, key := range cell.Flags {
		name := flagName(cell.Kind, key)
		if name == "" {
			return fmt.Errorf("flags: %s is not a flag of umad %s", key, cell.Kind)
		}
		if experiment.GridFlag(cell.Kind, name) {
			return fmt.Errorf("flags: %s is --%s, the grid's to set", key, name)
		}
	}
	return nil
}

// flagName is the name of command's flag that key names (its name or an alias); "" for
// none.
func flagName(command, key string) string {
	i := slices.IndexFunc(commands, func(cmd *ucli.Command) bool { return cmd.Name == command })
	j := slices.IndexFunc(commands[i].Flags, func(fl ucli.Flag) bool { return slices.Contains(fl.Names(), key) })
	if j < 0 {
		return ""
	}
	return commands[i].Flags[j].Names()[0]
}

// debateCell is the debate a cell's settings give: umad debate's defaults, then each
// setting by its key, as the command's flags set them.
func debateCell(settings []experiment.Setting) (*run.DebateRequest, error) {
	r := run.NewDebateRequest()
	if err := setCell(r.Keys(), "debate", settings); err != nil {
		return nil, err
	}
	r.Command = run.Command(r.Keys()) // as given, before the recipe sets settings
	return r, nil
}

// trainCell is the training run a cell's settings give, as debateCell's debate, on the
// outputs of the experiment's command c.
func trainCell(c *ucli.Context, settings []experiment.Setting) (*run.TrainRequest, error) {
	r := run.NewTrainRequest()
	if err := setCell(r.Keys(), "train", settings); err != nil {
		return nil, err
	}
	r.Command, r.Hub = run.Command(r.Keys()), hubDirs(c)
	r.Stdout, r.Stderr = c.App.Writer, c.App.ErrWriter
	return r, nil
}

// setCell sets a cell's settings, each key by the name of the command's flag it names (an
// alias among them).
func setCell(k run.Keys, command string, settings []experiment.Setting) error {
	for _, s := range settings {
		if err := run.SetSetting(k, flagName(command, s.Key), s.Value); err != nil {
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

// checkpointStep is the step of a training run's newest checkpoint (0: none).
func checkpointStep(run string) (int, error) {
	ckpt, err := trainer.LatestCheckpoint(run)
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
func largestTrainPlan(c *ucli.Context, todo []*cellState) error {
	var big *cellState
	for _, st := range todo {
		if st.Kind == "train" && (big == nil || st.bytes > big.bytes || st.bytes == big.bytes && st.tokens > big.tokens) {
			big = st
		}
	}
	if big == nil {
		return nil
	}
	fmt.Fprintf(c.App.Writer, "memory plan of the largest training cell, %s:\n", big.Name)
	r, err := trainCell(c, big.Settings)
	if err != nil {
		return err
	}
	r.DryRun, r.Resume = true, big.exists
	_, err = r.Start()
	return err
}

// runCommand runs a umad command line in this process, on this app's outputs. The app
// keeps the line (commandLine), which a multi-process cell's ranks run.
func runCommand(c *ucli.Context, args []string) error {
	app := App()
	app.Writer, app.ErrWriter = c.App.Writer, c.App.ErrWriter
	args = appArgs(c, args)
	app.Metadata = map[string]any{commandLineKey: args}
	return app.Run(append([]string{"umad"}, args...))
}

// appArgs is a command line (after "umad") as this app runs it: with --verbose when the
// app has it.
func appArgs(c *ucli.Context, args []string) []string {
	if c.Bool("verbose") {
		return append([]string{"--verbose"}, args...)
	}
	return args
}

// runDebateCell runs a debate cell: the run.Debate its settings give, whose ranks (with
// --nproc) run its command line.
func runDebateCell(c *ucli.Context, st *cellState) error {
	r, err := debateCell(st.Settings)
	if err != nil {
		return err
	}
	r.Stdout, r.Stderr, r.RankCommand = c.App.Writer, c.App.ErrWriter, appArgs(c, st.Args)
	d, err := r.Resolve()
	if err != nil {
		return err
	}
	return d.Run(context.Background())
}

// runTrainCell runs a training cell, resuming its run when its directory holds one; its
// ranks (with --nproc) run its command line.
func runTrainCell(c *ucli.Context, st *cellState) error {
	r, err := trainCell(c, st.Settings)
	if err != nil {
		return err
	}
	args := st.Args
	if _, err := os.Stat(filepath.Join(st.dir, "config.json")); err == nil {
		r.Resume, args = true, append(append([]string(nil), args...), "--resume")
	}
	r.RankCommand = appArgs(c, args)
	_, err = r.Start()
	return err
}

// commandLineKey is the app metadata that holds a command line run in process.
const commandLineKey = "command line"

// commandLine is the command line this app runs, after "umad": runCommand's, or nil for
// the process's own.
func commandLine(c *ucli.Context) []string {
	args, _ := c.App.Metadata[commandLineKey].([]string)
	return args
}

// runCells runs the cells in order, with the cells done and left and an ETA from the
// generated-token estimates (from the count where there are none).
func runCells(c *ucli.Context, todo, states []*cellState) error {
	w := c.App.Writer
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
		if err := st.beforeRun(); err != nil {
			return fmt.Errorf("cell %s: %w", st.Name, err)
		}
		if st.done {
			done++
			fmt.Fprintf(w, "experiment: cell %d of %d, %s, is done\n", i+1, len(todo), st.Name)
			continue
		}
		fmt.Fprintf(w, "experiment: cell %d of %d to run: %s\n", i+1, len(todo), st.Name)
		runCell := func() error { return runTrainCell(c, st) }
		if st.Kind == "debate" {
			runCell = func() error { return runDebateCell(c, st) }
		}
		if err := runCell(); err != nil {
			if errors.Is(err, launch.ErrInterrupted) {
				fmt.Fprintf(c.App.ErrWriter, "umad: experiment: cell %s stopped; the same command resumes it\n", st.Name)
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
