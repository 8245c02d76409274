package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/run"
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
	r := run.Report{Out: c.String("out"), Baseline: c.String("baseline"), Turns: turns}
	return r.Write(c.App.Writer, c.Args().Slice())
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
