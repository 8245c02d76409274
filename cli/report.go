package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/experiment"
	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainlog"
)

func init() {
	register(&ucli.Command{
		Name:        "report",
		Usage:       "rebuild debate and training reports; put several runs side by side in the paper's Table 1 and figures",
		UsageText:   "umad report [--out DIR] [--baseline METHOD] [--turns T,...] [LABEL=]RUN|EXPERIMENT.toml ...   (flags before the runs)",
		Description: reportHelp,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Value: ".", Usage: "where the comparison, Table 1 and the figures of several runs go"},
			&ucli.StringFlag{Name: "baseline", Usage: "the method Table 1 compares every row with (default: each agent set's first method, from an experiment file; else the first)"},
			&ucli.StringFlag{Name: "turns", Usage: "Table 1's T columns, comma-separated, T = turn+1 (default: 1, 2 and the longest debate's last)"},
		},
		Action: reportCmd,
	})
}

// reportHelp is umad report's --help description.
const reportHelp = "For each run directory made by `umad debate`, recomputes every metric from the\n" +
	"rollouts on disk (seed-*/rollouts.jsonl.zst) and rewrites RUN/report/; a run whose problems are\n" +
	"not all finished is marked PARTIAL there, and one whose config.json disagrees with its records\n" +
	"(agents, turns, -k, protocol, problems) is refused. With several debate\n" +
	"runs, also writes compare.md and compare.csv into --out (default: the current directory), e.g.\n" +
	"a full debate against one with --stop agree=1 to see the compute saved and the accuracy change.\n\n" +
	"For a run directory made by `umad train` (it has metrics.jsonl), writes RUN/report/training.md:\n" +
	"validation accuracy before and after training (with majority vote and TU/EU/AU where the\n" +
	"validations have them), training curves (accuracy, team reward, KL, entropy, gradient norm,\n" +
	"clip fraction), where each step's time goes and the weight sync's share of it, with CSV\n" +
	"tables and SVG and PNG figures.\n\n" +
	"With two methods or more, also writes the paper's Table 1 into --out (table1.md, table1.csv and a\n" +
	"self-contained table1.html in the paper's colours: blue gain, pink loss, grey baseline) and its\n" +
	"figures (fig1-accuracy-entropy, fig2-uncertainty for Figs. 2 and 6, fig3-base-trained, fig5-flips;\n" +
	".svg and .png). A method is a label given as LABEL=RUN, else the run's directory name; debate runs\n" +
	"with one label are merged as seeds of one configuration (a seed's runs on different datasets into\n" +
	"one seed, so the Average is each seed's, then mean ± std), and a training run counts with its last\n" +
	"validation (Fig. 3 draws its first and last). An experiment file (umad experiment) stands for its\n" +
	"debate cells that are done (every problem of every seed), labelled by method (and agent set, where\n" +
	"it has several), its untrained methods first, each agent set's rows compared with its own first\n" +
	"method by default. Table 1 and compare.md state each dataset's problem count (n) and mark a cell\n" +
	"over other problems ([n=19]) and a partial run. Table 1's rows are methods x agents, its columns\n" +
	"datasets x T (T = turn+1; --turns, default 1, 2 and the longest debate's last) and, with several\n" +
	"datasets, their Average (per seed, then mean ± std over seeds). Each cell is strict pass@1 with\n" +
	"its difference from its baseline and a 95% interval, marked * where it\n" +
	"excludes zero. The interval is a paired bootstrap over problems (4000 resamples, fixed seed,\n" +
	"stratified by dataset): each problem's difference is averaged over the seeds both methods share\n" +
	"(or, sharing none, is the difference of their means over seeds). Problems are resampled, each\n" +
	"carrying all its seeds, because they are the unit both methods share and the question is how a\n" +
	"method does on problems like these; seed noise stays inside each problem's difference. A bootstrap\n" +
	"rather than a t interval because per-problem differences of K samples are discrete and bounded,\n" +
	"far from normal, and the Average's strata need no degrees-of-freedom formula. With few problems\n" +
	"the percentile interval runs narrow: in a simulation (K = 4, a 9.5-point gain) it covered the true\n" +
	"difference 88% of the time with 8 problems, 92% with 20 and 95-97% from 50. A training run's\n" +
	"validation keeps no per-problem records, so its differences have no interval."

// reportCmd rebuilds each run's report, then compares the debate runs and writes Table 1
// and the figures across methods.
func reportCmd(c *ucli.Context) error {
	if c.NArg() == 0 {
		return fmt.Errorf("report: give at least one run directory")
	}
	turns, err := tableTurns(c)
	if err != nil {
		return err
	}
	var t report.Lineup
	args, spread, err := expandExperiments(c, c.Args().Slice(), &t)
	if err != nil {
		return err
	}
	var runs []report.Run
	for _, arg := range args {
		if err := reportRun(c, arg, &runs, &t); err != nil {
			return err
		}
	}
	if len(runs) > 1 {
		if err := report.WriteComparison(c.String("out"), runs); err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "comparison: %s\n", filepath.Join(c.String("out"), report.CompareFile))
	}
	if len(runs) > 1 || len(runs) == 1 && t.Methods() > 1 { // a comparison, or Table 1 whose cells link to it
		if err := t.WriteBrowser(c.String("out")); err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "browser: %s\n", filepath.Join(c.String("out"), report.PageFile))
	}
	return t.WriteTable1(c.App.Writer, c.String("out"), report.TableOptions{Baseline: c.String("baseline"), Turns: turns, Spread: spread})
}

// reportRun rebuilds one run's report (a training run's or a debate run's) and adds the
// run to the comparison and to Table 1 under its label.
func reportRun(c *ucli.Context, arg string, runs *[]report.Run, t *report.Lineup) error {
	label, dir, err := labelledRun(arg)
	if err != nil {
		return err
	}
	// Only `umad train` writes a metrics log; debate runs have none.
	if _, err := os.Stat(filepath.Join(dir, trainlog.File)); err == nil {
		path, err := report.WriteTraining(dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "report: %s\n", path)
		if err := t.AddTraining(label, dir); err != nil {
			return err
		}
		return nil
	}
	dr, err := run.WriteDebateReport(dir)
	if err != nil {
		return err
	}
	*runs = append(*runs, dr)
	if err := t.AddDebate(label, dr); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "report: %s\n", filepath.Join(dir, "report", report.ReportFile))
	if dr.Partial != "" {
		fmt.Fprintf(c.App.Writer, "report: %s is PARTIAL (%s); its report says so\n", dir, dr.Partial)
	}
	return nil
}

// expandExperiments replaces an experiment file among the arguments by its debate cells
// that are done, each labelled by its method (and agent set, where the file has several):
// its untrained methods first, so each agent set's default baseline is its zero-shot debate.
// It tells t each label's agent set, and returns what the seeds span.
func expandExperiments(c *ucli.Context, args []string, t *report.Lineup) (_ []string, spread string, err error) {
	var out []string
	for _, arg := range args {
		if info, err := os.Stat(arg); err != nil || !info.Mode().IsRegular() || filepath.Ext(arg) != ".toml" {
			out = append(out, arg)
			continue
		}
		f, err := experiment.Load(arg)
		if err != nil {
			return nil, "", err
		}
		cells, err := f.Cells()
		if err != nil {
			return nil, "", err
		}
		spread = f.Variability()
		for _, trained := range []bool{false, true} {
			for _, cell := range cells {
				if cell.Kind != "debate" || cell.Trained != trained {
					continue
				}
				label := cell.Method
				if len(f.Agents) > 1 {
					label += "/" + cell.AgentSet
				}
				if t.Settings == nil {
					t.Settings = map[string]string{}
				}
				t.Settings[label] = cell.AgentSet
				done, err := experimentCellDone(c, f, arg, cell)
				if err != nil {
					return nil, "", err
				}
				if done {
					out = append(out, label+"="+cell.Dir(f))
				}
			}
		}
	}
	return out, spread, nil
}

// experimentCellDone says whether a debate cell has finished every problem of every seed,
// of its training's newest checkpoint; one that has not is left out, said so.
func experimentCellDone(c *ucli.Context, f *experiment.File, file string, cell experiment.Cell) (bool, error) {
	dir := cell.Dir(f)
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		fmt.Fprintf(c.App.Writer, "report: cell %s of %s has not run; left out\n", cell.Name, file)
		return false, nil
	}
	var cfg run.DebateSettings
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return false, fmt.Errorf("report: %s/config.json: %w", dir, err)
	}
	var why string
	if !run.DebateReported(dir, cfg.Seeds) {
		dr, err := run.ReadDebate(dir)
		if err != nil {
			return false, fmt.Errorf("report: cell %s: %w", cell.Name, err)
		}
		why = dr.Partial
	}
	if why == "" {
		if why, err = run.DebatedOld(f.Out, cell, cfg); err != nil {
			return false, fmt.Errorf("report: cell %s: %w", cell.Name, err)
		}
	}
	if why != "" {
		fmt.Fprintf(c.App.Writer, "report: cell %s of %s is not done (%s); left out\n", cell.Name, file, why)
	}
	return why == "", nil
}

// labelledRun splits LABEL=RUN; an argument that names an existing path is a run alone.
func labelledRun(arg string) (label, dir string, err error) {
	label, dir, found := strings.Cut(arg, "=")
	if _, statErr := os.Stat(arg); statErr == nil || !found {
		return filepath.Base(filepath.Clean(arg)), arg, nil
	}
	if label == "" || dir == "" {
		return "", "", fmt.Errorf("report: %q: give LABEL=RUN with both parts", arg)
	}
	return label, dir, nil
}

// tableTurns parses --turns.
func tableTurns(c *ucli.Context) ([]int, error) {
	var turns []int
	if !c.IsSet("turns") {
		return nil, nil
	}
	for _, f := range strings.Split(c.String("turns"), ",") {
		T, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("report: --turns %q: %w", c.String("turns"), err)
		}
		turns = append(turns, T)
	}
	return turns, nil
}
