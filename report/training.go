package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/uncertainty"
)

// File names of a training run's report, inside RUN/report.
const (
	TrainingFile    = "training.md"
	ValidationFile  = "validation.csv"
	CurvesFile      = "training.csv"
	TimesFile       = "times.csv"
	BeforeAfterFile = "before_after.csv"
)

// SyncTarget is the largest share of step time the weight sync should take
// (docs/ARCHITECTURE.md section 5).
const SyncTarget = 0.05

// training is a run's metrics log, arranged for the report.
type training struct {
	name          string
	agents, turns int
	names         []string // agent names from the training lines, "" where unknown
	train         []trainlog.StepMetrics
	val           []trainlog.ValMetrics
	times         []stepTimes
}

// WriteTraining writes the report of the training run in dir from dir/metrics.jsonl
// into dir/report: training.md (whose path it returns), validation.csv, training.csv,
// times.csv, before_after.csv (with two validations or more), the figures validation,
// training and times as .svg and .png, and the training page (index.html, not live).
func WriteTraining(dir string) (string, error) {
	path := filepath.Join(dir, trainlog.File)
	train, val, err := trainlog.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("training report: %s has no %s (not a training run?)", dir, trainlog.File)
	}
	if err != nil {
		return "", fmt.Errorf("training report: %w", err)
	}
	if len(train) == 0 && len(val) == 0 {
		return "", fmt.Errorf("training report: %s has no complete lines yet", path)
	}
	r := newTraining(filepath.Base(filepath.Clean(dir)), train, val)
	out := filepath.Join(dir, "report")
	tables := []struct {
		name  string
		write func(io.Writer, *training) error
		when  bool
	}{
		{ValidationFile, writeValidationCSV, len(val) > 0},
		{CurvesFile, writeCurvesCSV, len(train) > 0},
		{TimesFile, writeTimesCSV, len(train) > 0},
		{BeforeAfterFile, writeBeforeAfterCSV, len(val) > 1},
	}
	for _, tb := range tables {
		if !tb.when {
			continue
		}
		if err := atomicfile.Write(filepath.Join(out, tb.name), func(w io.Writer) error { return tb.write(w, r) }); err != nil {
			return "", err
		}
	}
	figures, err := writeTrainingFigures(out, r)
	if err != nil {
		return "", err
	}
	if err := writeTrainingPage(out, r, false); err != nil {
		return "", err
	}
	md := filepath.Join(out, TrainingFile)
	return md, atomicfile.Write(md, func(w io.Writer) error { return writeTrainingMarkdown(w, r, figures) })
}

func newTraining(name string, train []trainlog.StepMetrics, val []trainlog.ValMetrics) *training {
	r := &training{name: name, train: train, val: val}
	for _, v := range val {
		r.agents = max(r.agents, len(v.Accuracy))
		for _, acc := range v.Accuracy {
			r.turns = max(r.turns, len(acc))
		}
	}
	for _, m := range train {
		r.agents, r.turns = max(r.agents, m.Agent+1), max(r.turns, m.Turn+1)
	}
	r.names = make([]string, r.agents)
	for _, m := range train {
		r.names[m.Agent] = m.Name
	}
	r.times = timesPerStep(train)
	return r
}

// stepTimes is where one step's time went, in seconds; other is the rest of the step
// (rewards, advantages, bookkeeping).
type stepTimes struct {
	step                                                     int
	rollout, logprobs, reference, update, sync, other, total float64
	tokensPerSec                                             float64
	overlapped                                               bool    // the rollout ran beside the previous update
	trainTokens                                              float64 // response tokens scored and trained
}

// timesPerStep sums each step's lines, in step order. Log-probs, reference and update
// are per agent and turn; the trainer syncs each agent once per step and writes that
// agent's sync time on its lines, so sync adds one value per agent.
func timesPerStep(train []trainlog.StepMetrics) []stepTimes {
	byStep := map[int]*stepTimes{}
	syncs := map[int]map[int]float64{}
	var steps []int
	for _, m := range train {
		st, ok := byStep[m.Step]
		if !ok {
			st = &stepTimes{step: m.Step, rollout: m.Times.Rollout, total: m.Times.Step, tokensPerSec: m.RolloutTokensPerSec, overlapped: m.Times.Overlapped}
			byStep[m.Step], syncs[m.Step] = st, map[int]float64{}
			steps = append(steps, m.Step)
		}
		st.logprobs += m.Times.LogProbs
		st.reference += m.Times.Reference
		st.update += m.Times.Update
		st.trainTokens += float64(m.Tokens)
		syncs[m.Step][m.Agent] = m.Times.Sync
	}
	slices.Sort(steps)
	out := make([]stepTimes, len(steps))
	for i, s := range steps {
		st := byStep[s]
		for _, v := range syncs[s] {
			st.sync += v
		}
		st.other = max(0, st.total-st.rollout-st.logprobs-st.reference-st.update-st.sync)
		out[i] = *st
	}
	return out
}

// phases are the parts of a step, bottom to top in the times figure.
var phases = []struct {
	name  string
	value func(stepTimes) float64
}{
	{"rollout", func(s stepTimes) float64 { return s.rollout }},
	{"logprobs", func(s stepTimes) float64 { return s.logprobs }},
	{"reference", func(s stepTimes) float64 { return s.reference }},
	{"update", func(s stepTimes) float64 { return s.update }},
	{"sync", func(s stepTimes) float64 { return s.sync }},
	{"other", func(s stepTimes) float64 { return s.other }},
}

// totalSeconds sums a figure over steps.
func totalSeconds(times []stepTimes, value func(stepTimes) float64) float64 {
	var sum float64
	for _, s := range times {
		sum += value(s)
	}
	return sum
}

// rolloutThroughput is generated tokens over rollout seconds, all steps together.
func rolloutThroughput(times []stepTimes) float64 {
	tokens := totalSeconds(times, func(s stepTimes) float64 { return s.tokensPerSec * s.rollout })
	return tokens / totalSeconds(times, func(s stepTimes) float64 { return s.rollout })
}

func writeTimesCSV(w io.Writer, r *training) error {
	header := []string{"step"}
	for _, p := range phases {
		header = append(header, p.name+"_s")
	}
	records := [][]string{append(header, "step_s", "rollout_tokens_per_s")}
	for _, s := range r.times {
		rec := []string{strconv.Itoa(s.step)}
		for _, p := range phases {
			rec = append(rec, num(p.value(s)))
		}
		records = append(records, append(rec, num(s.total), num(s.tokensPerSec)))
	}
	return writeCSV(w, records)
}

// curveColumns are the columns of training.csv.
var curveColumns = []struct {
	name  string
	value func(trainlog.StepMetrics) float64
}{
	{"accuracy", func(m trainlog.StepMetrics) float64 { return m.Accuracy }},
	{"team_reward", func(m trainlog.StepMetrics) float64 { return m.Team }},
	{"influence", func(m trainlog.StepMetrics) float64 { return m.Influence }},
	{"score", func(m trainlog.StepMetrics) float64 { return m.Score }},
	{"kl", func(m trainlog.StepMetrics) float64 { return m.KL }},
	{"entropy", func(m trainlog.StepMetrics) float64 { return m.Entropy }},
	{"nll", func(m trainlog.StepMetrics) float64 { return m.NLL }},
	{"pg_loss", func(m trainlog.StepMetrics) float64 { return m.PGLoss }},
	{"clip_frac", func(m trainlog.StepMetrics) float64 { return m.ClipFrac }},
	{"ppo_kl", func(m trainlog.StepMetrics) float64 { return m.PPOKL }},
	{"grad_norm", func(m trainlog.StepMetrics) float64 { return m.GradNorm }},
	{"lr", func(m trainlog.StepMetrics) float64 { return m.LR }},
	{"groups", func(m trainlog.StepMetrics) float64 { return float64(m.Groups) }},
	{"dropped_groups", func(m trainlog.StepMetrics) float64 { return float64(m.DroppedGroups) }},
	{"overlong", func(m trainlog.StepMetrics) float64 { return float64(m.Overlong) }},
	{"logp_gap", func(m trainlog.StepMetrics) float64 { return m.LogpGap }},
	{"logp_gap_max", func(m trainlog.StepMetrics) float64 { return m.LogpGapMax }},
	{"rollout_kl", func(m trainlog.StepMetrics) float64 { return m.RolloutKL }},
	{"tokens", func(m trainlog.StepMetrics) float64 { return float64(m.Tokens) }},
}

func writeCurvesCSV(w io.Writer, r *training) error {
	header := []string{"step", "agent", "turn"}
	for _, c := range curveColumns {
		header = append(header, c.name)
	}
	records := [][]string{header}
	for _, m := range r.train {
		rec := []string{strconv.Itoa(m.Step), strconv.Itoa(m.Agent), strconv.Itoa(m.Turn)}
		for _, c := range curveColumns {
			rec = append(rec, num(c.value(m)))
		}
		records = append(records, rec)
	}
	return writeCSV(w, records)
}

// valMetric is a figure of a validation for an agent (or the team) at a turn; ok is
// false where the validation lacks it.
type valMetric struct {
	name   string
	label  string
	format func(float64) string
	value  func(v trainlog.ValMetrics, agent, turn int) (float64, bool)
}

// summaryMetric reads a figure from the validation's summary, on its focus dataset.
func summaryMetric(get func(uncertainty.Row) float64) func(trainlog.ValMetrics, int, int) (float64, bool) {
	return func(v trainlog.ValMetrics, agent, turn int) (float64, bool) {
		if v.Summary == nil || len(v.Summary.Datasets) == 0 {
			return 0, false
		}
		row, ok := v.Summary.Find(focusDataset(*v.Summary), agent, turn)
		return get(row), ok
	}
}

// valAccuracy is the trainer's accuracy of an agent, and the mean over agents for the
// team (as the summary's System rows).
func valAccuracy(v trainlog.ValMetrics, agent, turn int) (float64, bool) {
	if agent == uncertainty.System {
		var sum float64
		for a := range v.Accuracy {
			acc, ok := valAccuracy(v, a, turn)
			if !ok {
				return 0, false
			}
			sum += acc
		}
		return sum / float64(len(v.Accuracy)), len(v.Accuracy) > 0
	}
	if agent >= len(v.Accuracy) || turn >= len(v.Accuracy[agent]) {
		return 0, false
	}
	return v.Accuracy[agent][turn], true
}

var valMetrics = []valMetric{
	{"accuracy", "Accuracy %", percent, valAccuracy},
	{"maj_strict", "Majority % (strict)", percent, summaryMetric(func(r uncertainty.Row) float64 { return r.MajStrict })},
	{"maj_robust", "Majority % (robust)", percent, summaryMetric(func(r uncertainty.Row) float64 { return r.MajRobust })},
	{"tu", "TU", nats, summaryMetric(func(r uncertainty.Row) float64 { return r.TU })},
	{"eu", "EU", nats, summaryMetric(func(r uncertainty.Row) float64 { return r.EU })},
	{"au", "AU", nats, summaryMetric(func(r uncertainty.Row) float64 { return r.AU })},
}

// valRows lists the (agent, turn) rows of the validation tables: per turn, the agents,
// then the team.
func (r *training) valRows() [][2]int {
	var rows [][2]int
	for t := range r.turns {
		for _, a := range agentIndices(r.agents, true) {
			rows = append(rows, [2]int{a, t})
		}
	}
	return rows
}

func optional(v float64, ok bool) string {
	if !ok {
		return ""
	}
	return num(v)
}

// writeValidationCSV writes one line per validation, agent (and team) and turn; the
// summary's columns are empty where a validation has no summary.
func writeValidationCSV(w io.Writer, r *training) error {
	header := []string{"step", "problems", "agent", "turn"}
	for _, m := range valMetrics {
		header = append(header, m.name)
	}
	records := [][]string{header}
	for _, v := range r.val {
		for _, at := range r.valRows() {
			rec := []string{strconv.Itoa(v.Step), strconv.Itoa(v.Problems), agentName(at[0]), strconv.Itoa(at[1])}
			for _, m := range valMetrics {
				rec = append(rec, optional(m.value(v, at[0], at[1])))
			}
			records = append(records, rec)
		}
	}
	return writeCSV(w, records)
}

// writeBeforeAfterCSV compares the first and the last validation: one line per agent
// (and team), turn and metric that either has.
func writeBeforeAfterCSV(w io.Writer, r *training) error {
	first, last := r.val[0], r.val[len(r.val)-1]
	records := [][]string{{"agent", "turn", "metric", "before_step", "before", "after_step", "after", "change"}}
	for _, at := range r.valRows() {
		for _, m := range valMetrics {
			b, bok := m.value(first, at[0], at[1])
			a, aok := m.value(last, at[0], at[1])
			if !bok && !aok {
				continue
			}
			change := ""
			if bok && aok {
				change = num(a - b)
			}
			records = append(records, []string{agentName(at[0]), strconv.Itoa(at[1]), m.name,
				strconv.Itoa(first.Step), optional(b, bok), strconv.Itoa(last.Step), optional(a, aok), change})
		}
	}
	return writeCSV(w, records)
}

// beforeAfterCell is "before → after (change)", with "–" for a missing side.
func beforeAfterCell(m valMetric, first, last trainlog.ValMetrics, agent, turn int) string {
	b, bok := m.value(first, agent, turn)
	a, aok := m.value(last, agent, turn)
	side := func(v float64, ok bool) string {
		if !ok {
			return "–"
		}
		return m.format(v)
	}
	cell := side(b, bok) + " → " + side(a, aok)
	if bok && aok {
		// The change in the cell's own unit and precision, signed.
		cell += " (" + withSign(m.format(a-b)) + ")"
	}
	return cell
}

func writeTrainingMarkdown(w io.Writer, r *training, figures []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Training run: %s\n\n", markdownText(r.name))
	fmt.Fprintf(&b, "%d agents, %d turns, %d training steps", r.agents, r.turns, len(r.times))
	if len(r.times) > 0 {
		fmt.Fprintf(&b, " (%d–%d)", r.times[0].step, r.times[len(r.times)-1].step)
	}
	if len(r.val) > 0 {
		var steps []string
		for _, v := range r.val {
			steps = append(steps, strconv.Itoa(v.Step))
		}
		list := "step " + steps[0]
		if n := len(steps); n > 1 {
			list = "steps " + strings.Join(steps[:n-1], ", ") + " and " + steps[n-1]
		}
		fmt.Fprintf(&b, "; validation at %s on %d problems", list, r.val[len(r.val)-1].Problems)
	}
	b.WriteString(". Turns count from 0; the paper's T is turn+1. Accuracy is the share of correct samples in " +
		"percent, as the run grades them; Team accuracy is the mean over agents. Entropies are in nats.\n\n")
	var named []string
	for a, n := range r.names {
		if n != "" {
			named = append(named, agentLabel(a)+" = "+n)
		}
	}
	if len(named) > 0 {
		b.WriteString("Agents: " + strings.Join(named, ", ") + ".\n\n")
	}

	writeBeforeAfterMarkdown(&b, r)
	writeLastValidation(&b, r)
	if slices.Contains(figures, "validation") {
		b.WriteString("## Validation accuracy\n\n![Validation accuracy per step, agent and turn](validation.png)\n\n")
	}
	if slices.Contains(figures, "training") {
		b.WriteString("## Training curves\n\nPer training step, on the step's rollouts")
		if w := r.curveWindow(); w > 1 {
			fmt.Fprintf(&b, ", each point the mean over the last %d steps", w)
		}
		b.WriteString(" (training.csv holds every value).\n\n" +
			"![Training curves: accuracy, team reward, KL, entropy, gradient norm, clip fraction](training.png)\n\n")
	}
	if len(r.times) > 0 {
		writeTimesMarkdown(&b, r)
		if slices.Contains(figures, "times") {
			b.WriteString("![Seconds per step by phase](times.png)\n\n")
		}
	}
	var files []string
	for _, f := range []struct {
		name string
		when bool
	}{{BeforeAfterFile, len(r.val) > 1}, {ValidationFile, len(r.val) > 0}, {CurvesFile, len(r.train) > 0}, {TimesFile, len(r.train) > 0}} {
		if f.when {
			files = append(files, f.name)
		}
	}
	b.WriteString("Files: " + strings.Join(files, ", ") + "; figures as .svg and .png.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLastValidation shows the last validation in the per-turn tables of umad debate's
// report.
func writeLastValidation(b *strings.Builder, r *training) {
	if len(r.val) == 0 || r.val[len(r.val)-1].Summary == nil {
		return
	}
	last := r.val[len(r.val)-1]
	fmt.Fprintf(b, "## Last validation: step %d, %d problems\n\nIts debates in the tables of `umad debate`'s report.\n\n", last.Step, last.Problems)
	writeTurnTables(b, "###", uncertainty.Combined{Seeds: 1, Mean: *last.Summary}, nil)
}

// writeBeforeAfterMarkdown compares the first and the last validation, with a column
// per metric that either of them has.
func writeBeforeAfterMarkdown(b *strings.Builder, r *training) {
	if len(r.val) < 2 {
		fmt.Fprintf(b, "## Before and after training\n\nNeeds two validations; this run has %d.\n\n", len(r.val))
		return
	}
	first, last := r.val[0], r.val[len(r.val)-1]
	var cols []valMetric
	for _, m := range valMetrics {
		for _, at := range r.valRows() {
			_, bok := m.value(first, at[0], at[1])
			_, aok := m.value(last, at[0], at[1])
			if bok || aok {
				cols = append(cols, m)
				break
			}
		}
	}
	fmt.Fprintf(b, "## Before and after training\n\nEach cell: validation at step %d → step %d (change).", first.Step, last.Step)
	if len(cols) > 1 {
		b.WriteString(" Majority: the accuracy of the most frequent answer. TU = EU + AU of the answers " +
			"(nats): the team's EU is the agents' Jensen-Shannon divergence; an agent's TU = AU is its own answer entropy (EU 0).")
		if focus := summaryDataset(first, last); focus != "" {
			fmt.Fprintf(b, " Dataset: %s.", markdownText(focus))
		}
	}
	b.WriteString("\n\n")
	header := []string{"Agent", "Turn"}
	for _, m := range cols {
		header = append(header, m.label)
	}
	var rows [][]string
	for _, at := range r.valRows() {
		row := []string{agentLabel(at[0]), turnLabel(at[1])}
		for _, m := range cols {
			row = append(row, beforeAfterCell(m, first, last, at[0], at[1]))
		}
		rows = append(rows, row)
	}
	markdownTable(b, header, rows)
}

// summaryDataset is the dataset the summaries' columns show.
func summaryDataset(vals ...trainlog.ValMetrics) string {
	for _, v := range vals {
		if v.Summary != nil && len(v.Summary.Datasets) > 0 {
			return focusDataset(*v.Summary)
		}
	}
	return ""
}

func writeTimesMarkdown(b *strings.Builder, r *training) {
	n := float64(len(r.times))
	step := totalSeconds(r.times, func(s stepTimes) float64 { return s.total })
	b.WriteString("## Where the time goes\n\n" +
		"Seconds per training step (validation not included): log-probs, reference and update summed over agents " +
		"and turns, sync over agents; other is rewards, advantages and bookkeeping.\n\n")
	var rows [][]string
	for _, p := range phases {
		sum := totalSeconds(r.times, p.value)
		rows = append(rows, []string{p.name, seconds(sum / n), percent(sum / step)})
	}
	rows = append(rows, []string{"step", seconds(step / n), "100.0"})
	markdownTable(b, []string{"Phase", "Mean s/step", "Share of step time %"}, rows)
	if slices.ContainsFunc(r.times, func(s stepTimes) bool { return s.overlapped }) {
		b.WriteString("The rollouts ran beside the previous step's update (--overlap 1): the shares sum past 100.\n\n")
	}
	share := totalSeconds(r.times, func(s stepTimes) float64 { return s.sync }) / step
	verdict := "met"
	if share > SyncTarget {
		verdict = "missed"
	}
	trainer := totalSeconds(r.times, func(s stepTimes) float64 { return s.logprobs + s.reference + s.update })
	fmt.Fprintf(b, "Rollout throughput: %.1f generated tokens/s. Trainer throughput: %.1f response tokens/s through "+
		"log-probs, reference and update together. Weight sync: %s%% of step time (target ≤ %s%%: %s).\n\n",
		rolloutThroughput(r.times), totalSeconds(r.times, func(s stepTimes) float64 { return s.trainTokens })/trainer,
		percent(share), strconv.FormatFloat(100*SyncTarget, 'f', -1, 64), verdict)
}

func seconds(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
