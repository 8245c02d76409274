package report

import (
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/trainlog"
)

// Refresh is how often, in seconds, a browser reloads a live training page.
const Refresh = 10

// pageSteps is how many of the latest steps the training page's times table lists.
const pageSteps = 20

// WriteTrainingPage writes the training page of the run in dir, dir/report/index.html,
// from dir/metrics.jsonl as it stands: the curves so far, the validation rows and each
// recent step's time per phase with its slowest phase. A live page (the trainer rewrites
// it as each step lands) tells the browser to reload it every Refresh seconds; a page of
// a run that is not running does not. A log without complete lines writes nothing.
func WriteTrainingPage(dir string, live bool) error {
	train, val, err := trainlog.Read(filepath.Join(dir, trainlog.File))
	if errors.Is(err, os.ErrNotExist) || err == nil && len(train) == 0 && len(val) == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("training page: %w", err)
	}
	return writeTrainingPage(filepath.Join(dir, "report"), newTraining(filepath.Base(filepath.Clean(dir)), train, val), live)
}

// writeTrainingPage writes the training page of r into the report directory out.
func writeTrainingPage(out string, r *training, live bool) error {
	figures, err := trainingFigures(r)
	if err != nil {
		return fmt.Errorf("training page: %w", err)
	}
	svgs, err := inlineSVGs(figures)
	if err != nil {
		return fmt.Errorf("training page: %w", err)
	}
	view := trainingView{Name: r.name, Style: template.CSS(pageStyle), Figures: svgs, Val: validationTable(r)}
	if live {
		view.Refresh = Refresh
	}
	if n := len(r.train); n > 0 {
		view.Step = r.train[n-1].Step
	} else {
		view.Step = r.val[len(r.val)-1].Step
	}
	view.Times, view.Slowest = timesTable(r.times)
	return atomicfile.Write(filepath.Join(out, PageFile), func(w io.Writer) error { return trainingTemplate.Execute(w, view) })
}

// validationTable has a row per validation, agent (and team) and turn.
func validationTable(r *training) summaryTable {
	tb := summaryTable{Header: []string{"step", "problems", "agent", "turn"}}
	for _, m := range valMetrics {
		tb.Header = append(tb.Header, m.label)
	}
	for _, v := range r.val {
		for _, at := range r.valRows() {
			row := []string{strconv.Itoa(v.Step), strconv.Itoa(v.Problems), agentLabel(at[0]), turnLabel(at[1])}
			for _, m := range valMetrics {
				x, ok := m.value(v, at[0], at[1])
				cell := "–"
				if ok {
					cell = m.format(x)
				}
				row = append(row, cell)
			}
			tb.Rows = append(tb.Rows, row)
		}
	}
	return tb
}

// slowest is a step's phase that took longest.
type slowest struct {
	Step             int
	Phase            string
	Seconds, Percent string
}

// timesTable lists the latest steps' seconds per phase, and the last step's slowest phase.
func timesTable(times []stepTimes) (summaryTable, *slowest) {
	tb := summaryTable{Header: []string{"step"}}
	for _, ph := range phases {
		tb.Header = append(tb.Header, ph.name)
	}
	tb.Header = append(tb.Header, "step total", "slowest phase")
	if len(times) == 0 {
		return tb, nil
	}
	var last *slowest
	for _, st := range times[max(0, len(times)-pageSteps):] {
		row := []string{strconv.Itoa(st.step)}
		top := 0
		for i, ph := range phases {
			row = append(row, seconds(ph.value(st)))
			if ph.value(st) > phases[top].value(st) {
				top = i
			}
		}
		row = append(row, seconds(st.total), phases[top].name)
		tb.Rows = append(tb.Rows, row)
		share := "–"
		if st.total > 0 {
			share = plain(100 * phases[top].value(st) / st.total)
		}
		last = &slowest{Step: st.step, Phase: phases[top].name, Seconds: seconds(phases[top].value(st)), Percent: share}
	}
	return tb, last
}

type trainingView struct {
	Name    string
	Style   template.CSS
	Refresh int // 0: no reload
	Step    int // the last step logged
	Figures []pageFigure
	Val     summaryTable
	Times   summaryTable
	Slowest *slowest
}

// trainingTemplate is the training page; every name is escaped by html/template, and the
// figures are gonum's escaped SVG (inlineSVG). It has no script.
var trainingTemplate = template.Must(template.New("training").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">
{{end}}<title>Training: {{.Name}} (step {{.Step}})</title>
<style>{{.Style}}</style>
</head>
<body>
<h1>Training run: {{.Name}}</h1>
<p id="state">{{if .Refresh}}Running: step {{.Step}} is the latest logged; this page reloads every {{.Refresh}} s.{{else}}Not running: step {{.Step}} is the last logged.{{end}}</p>
{{with .Slowest}}<p id="slowest">Step {{.Step}}'s slowest phase: <b>{{.Phase}}</b>, {{.Seconds}} s ({{.Percent}}% of the step).</p>
{{end}}{{range .Figures}}<figure style="width:{{.Width}}">{{.SVG}}</figure>
{{end}}
<h2>Validation</h2>
{{if .Val.Rows}}<table id="validation"><tr>{{range .Val.Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Val.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
<p class="muted">Accuracy in percent, uncertainty in nats on the focus dataset; – where a validation has no summary.</p>
{{else}}<p>No validation yet.</p>
{{end}}
<h2>Seconds per step</h2>
{{if .Times.Rows}}<table id="times"><tr>{{range .Times.Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Times.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
<p class="muted">The latest steps, at most ` + strconv.Itoa(pageSteps) + `; "other" is the rest of the step (rewards, advantages, bookkeeping).</p>
{{else}}<p>No training step yet.</p>
{{end}}
</body>
</html>
`))
