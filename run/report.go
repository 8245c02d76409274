package run

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/umad-dev/umad/experiment"
	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainlog"
)

// Report is umad report: each run's report rebuilt from its files, and several runs side by
// side in Out: their comparison, the debate browser, and Table 1 with its figures.
type Report struct {
	Out      string
	Baseline string // the method Table 1 compares every row with ("": each agent set's first)
	Turns    []int  // Table 1's T columns (nil: 1, 2 and the longest debate's last)
}

// Write reports on runs, each a run directory, LABEL=RUN or an experiment file (standing for
// its debate cells that are done), and tells w what it wrote.
func (r Report) Write(w io.Writer, runs []string) error {
	var t report.Lineup
	args, spread, err := expandExperiments(w, runs, &t)
	if err != nil {
		return err
	}
	var debates []report.Run
	for _, arg := range args {
		if err := reportRun(w, arg, &debates, &t); err != nil {
			return err
		}
	}
	if len(debates) > 1 {
		if err := report.WriteComparison(r.Out, debates); err != nil {
			return err
		}
		fmt.Fprintf(w, "comparison: %s\n", filepath.Join(r.Out, report.CompareFile))
	}
	if len(debates) > 1 || len(debates) == 1 && t.Methods() > 1 { // a comparison, or Table 1 whose cells link to it
		if err := t.WriteBrowser(r.Out); err != nil {
			return err
		}
		fmt.Fprintf(w, "browser: %s\n", filepath.Join(r.Out, report.PageFile))
	}
	return t.WriteTable1(w, r.Out, report.TableOptions{Baseline: r.Baseline, Turns: r.Turns, Spread: spread})
}

// reportRun rebuilds one run's report (a training run's or a debate run's) and adds the
// run to the debates compared and to Table 1 under its label.
func reportRun(w io.Writer, arg string, debates *[]report.Run, t *report.Lineup) error {
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
		fmt.Fprintf(w, "report: %s\n", path)
		return t.AddTraining(label, dir)
	}
	dr, err := WriteDebateReport(dir)
	if err != nil {
		return err
	}
	*debates = append(*debates, dr)
	if err := t.AddDebate(label, dr); err != nil {
		return err
	}
	fmt.Fprintf(w, "report: %s\n", filepath.Join(dir, "report", report.ReportFile))
	if dr.Partial != "" {
		fmt.Fprintf(w, "report: %s is PARTIAL (%s); its report says so\n", dir, dr.Partial)
	}
	return nil
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

// expandExperiments replaces an experiment file among the arguments by its debate cells
// that are done, as LABEL=RUN (experiment.ReportDebates), and tells t each label's agent
// set. It returns what the seeds span.
func expandExperiments(w io.Writer, args []string, t *report.Lineup) (_ []string, spread string, err error) {
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
		debates, err := f.ReportDebates()
		if err != nil {
			return nil, "", err
		}
		spread = f.Variability()
		for _, d := range debates {
			if t.Settings == nil {
				t.Settings = map[string]string{}
			}
			t.Settings[d.Label] = d.AgentSet
			done, err := cellDone(w, f, arg, d.Cell)
			if err != nil {
				return nil, "", err
			}
			if done {
				out = append(out, d.Label+"="+d.Dir(f))
			}
		}
	}
	return out, spread, nil
}

// cellDone says whether a debate cell has finished every problem of every seed, of its
// training's newest checkpoint; one that has not is left out, said so.
func cellDone(w io.Writer, f *experiment.File, file string, cell experiment.Cell) (bool, error) {
	dir := cell.Dir(f)
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		fmt.Fprintf(w, "report: cell %s of %s has not run; left out\n", cell.Name, file)
		return false, nil
	}
	var cfg DebateSettings
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return false, fmt.Errorf("report: %s/config.json: %w", dir, err)
	}
	var why string
	if !DebateReported(dir, cfg.Seeds) {
		dr, err := ReadDebate(dir)
		if err != nil {
			return false, fmt.Errorf("report: cell %s: %w", cell.Name, err)
		}
		why = dr.Partial
	}
	if why == "" {
		if why, err = debatedOld(f.Out, cell, cfg); err != nil {
			return false, fmt.Errorf("report: cell %s: %w", cell.Name, err)
		}
	}
	if why != "" {
		fmt.Fprintf(w, "report: cell %s of %s is not done (%s); left out\n", cell.Name, file, why)
	}
	return why == "", nil
}

// debatedOld says how a trained debate's config debated an older checkpoint than its
// training's newest ("" where it did not).
func debatedOld(out string, cell experiment.Cell, cfg DebateSettings) (string, error) {
	for _, a := range cfg.Agents {
		tail := cell.TrainedTail(a.Model)
		parts := strings.Split(tail, "/") // NEED/checkpoints/step-N/agent-I/model.gguf
		if len(parts) < 5 {
			continue
		}
		latest, err := trainer.LatestCheckpoint(filepath.Join(out, filepath.FromSlash(strings.Join(parts[:len(parts)-4], "/"))))
		if err != nil {
			return "", err
		}
		if filepath.Base(latest) != parts[len(parts)-3] {
			return fmt.Sprintf("it debated %s, its training's newest checkpoint is %s", tail, filepath.Base(latest)), nil
		}
	}
	return "", nil
}
