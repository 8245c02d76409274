package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/evalrun"
	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/uncertainty"
)

func init() {
	register(&ucli.Command{
		Name:      "report",
		Usage:     "rebuild debate and training reports, and put several debate runs side by side",
		UsageText: "umad report [--out DIR] RUN [RUN...]   (flags before the run directories)",
		Description: "For each run directory made by `umad debate`, recomputes every metric from the\n" +
			"rollouts on disk (seed-*/rollouts.jsonl.zst) and rewrites RUN/report/. With several debate\n" +
			"runs, also writes compare.md and compare.csv into --out (default: the current directory), e.g.\n" +
			"a full debate against one with --stop agree=1 to see the compute saved and the accuracy change.\n\n" +
			"For a run directory made by `umad train` (it has metrics.jsonl), writes RUN/report/training.md:\n" +
			"validation accuracy before and after training (with majority vote and TU/EU/AU where the\n" +
			"validations have them), training curves (accuracy, team reward, KL, entropy, gradient norm,\n" +
			"clip fraction), where each step's time goes and the weight sync's share of it, with CSV\n" +
			"tables and SVG and PNG figures.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Value: ".", Usage: "where the comparison of several runs goes"},
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("report: give at least one run directory")
			}
			var runs []report.Run
			for _, dir := range c.Args().Slice() {
				// Only `umad train` writes a metrics log; debate runs have none.
				if _, err := os.Stat(filepath.Join(dir, trainlog.File)); err == nil {
					path, err := report.WriteTraining(dir)
					if err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "report: %s\n", path)
					continue
				}
				run, err := rebuildReport(dir)
				if err != nil {
					return err
				}
				runs = append(runs, run)
				fmt.Fprintf(c.App.Writer, "report: %s\n", filepath.Join(dir, "report", report.ReportFile))
			}
			if len(runs) > 1 {
				if err := report.WriteComparison(c.String("out"), runs); err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "comparison: %s\n", filepath.Join(c.String("out"), report.CompareFile))
			}
			return nil
		},
	})
}

// rebuildReport recomputes a debate run's report from its rollouts.
func rebuildReport(dir string) (report.Run, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return report.Run{}, fmt.Errorf("report: %s is not a debate run: %w", dir, err)
	}
	var cfg debateConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return report.Run{}, fmt.Errorf("report: %s/config.json: %w", dir, err)
	}
	var summaries []uncertainty.Summary
	var all []uncertainty.ProblemRecord
	for _, seed := range cfg.Seeds {
		done, err := evalrun.ReadRecords(filepath.Join(dir, fmt.Sprintf("seed-%d", seed), "rollouts.jsonl.zst"))
		if err != nil {
			return report.Run{}, err
		}
		if len(done) == 0 {
			return report.Run{}, fmt.Errorf("report: %s seed %d has no finished problems yet", dir, seed)
		}
		recs := evalrun.InProblemOrder(done)
		s, err := uncertainty.Summarise(recs)
		if err != nil {
			return report.Run{}, err
		}
		summaries = append(summaries, s)
		all = append(all, recs...)
	}
	combined, err := uncertainty.CombineSeeds(summaries)
	if err != nil {
		return report.Run{}, err
	}
	run := report.Run{Name: filepath.Base(filepath.Clean(dir)), Protocol: cfg.protocolText(), Summary: combined, Problems: all}
	return run, report.Write(filepath.Join(dir, "report"), run)
}
