package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/umad-dev/umad/uncertainty"
)

// column is one figure of a row, written as a value and its deviation over seeds.
type column struct {
	name  string
	value func(uncertainty.Row) float64
}

var accuracyColumns = []column{
	{"acc_strict", func(r uncertainty.Row) float64 { return r.AccStrict }},
	{"acc_robust", func(r uncertainty.Row) float64 { return r.AccRobust }},
	{"maj_strict", func(r uncertainty.Row) float64 { return r.MajStrict }},
	{"maj_robust", func(r uncertainty.Row) float64 { return r.MajRobust }},
}

var uncertaintyColumns = []column{
	{"tu", func(r uncertainty.Row) float64 { return r.TU }},
	{"eu", func(r uncertainty.Row) float64 { return r.EU }},
	{"au", func(r uncertainty.Row) float64 { return r.AU }},
	{"token_entropy", func(r uncertainty.Row) float64 { return r.TokenEntropy }},
	{"nll", func(r uncertainty.Row) float64 { return r.NLL }},
	{"tokens", func(r uncertainty.Row) float64 { return r.Tokens }},
	{"truncated", func(r uncertainty.Row) float64 { return r.Truncated }},
	{"boxed", func(r uncertainty.Row) float64 { return r.Boxed }},
}

var flipColumns = []struct {
	name  string
	value func(uncertainty.Flips) float64
}{
	{"c2c", func(f uncertainty.Flips) float64 { return f.C2C }},
	{"c2w", func(f uncertainty.Flips) float64 { return f.C2W }},
	{"w2c", func(f uncertainty.Flips) float64 { return f.W2C }},
	{"w2w", func(f uncertainty.Flips) float64 { return f.W2W }},
	{"ratio", func(f uncertainty.Flips) float64 { return f.Ratio }},
}

// agentName is the CSV name of an agent: its index, or "system".
func agentName(agent int) string {
	if agent == uncertainty.System {
		return "system"
	}
	return strconv.Itoa(agent)
}

// agentLabel is the Markdown and figure label of an agent: "A0", or "Team".
func agentLabel(agent int) string {
	if agent == uncertainty.System {
		return "Team"
	}
	return "A" + strconv.Itoa(agent)
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// writeCSV writes records and reports the first error.
func writeCSV(w io.Writer, records [][]string) error {
	cw := csv.NewWriter(w)
	if err := cw.WriteAll(records); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// rowsHeader is the header of rowRecords' lines.
func rowsHeader(cols []column) []string {
	header := []string{"dataset", "agent", "turn", "problems", "samples"}
	for _, c := range cols {
		header = append(header, c.name, c.name+"_std")
	}
	return header
}

// rowRecords returns one line per row: identity, counts, then each column and its std.
func rowRecords(s uncertainty.Combined, cols []column) [][]string {
	var records [][]string
	for i, r := range s.Mean.Rows {
		rec := []string{r.Dataset, agentName(r.Agent), strconv.Itoa(r.Turn), strconv.Itoa(r.Problems), strconv.Itoa(r.Samples)}
		for _, c := range cols {
			rec = append(rec, num(c.value(r)), num(c.value(s.Std.Rows[i])))
		}
		records = append(records, rec)
	}
	return records
}

func writeAccuracyCSV(w io.Writer, s uncertainty.Combined) error {
	return writeCSV(w, append([][]string{rowsHeader(accuracyColumns)}, rowRecords(s, accuracyColumns)...))
}

func writeUncertaintyCSV(w io.Writer, s uncertainty.Combined) error {
	return writeCSV(w, append([][]string{rowsHeader(uncertaintyColumns)}, rowRecords(s, uncertaintyColumns)...))
}

// transitions lists the transitions a row reports: turn-1 -> turn, and 0 -> turn when
// that is a different one.
func transitions(r uncertainty.Row) []struct {
	from int
	pick func(uncertainty.Row) uncertainty.Transition
} {
	type tr = struct {
		from int
		pick func(uncertainty.Row) uncertainty.Transition
	}
	if r.Turn == 0 {
		return nil
	}
	out := []tr{{r.Turn - 1, func(r uncertainty.Row) uncertainty.Transition { return r.FromPrevious }}}
	if r.Turn > 1 {
		out = append(out, tr{0, func(r uncertainty.Row) uncertainty.Transition { return r.FromStart }})
	}
	return out
}

// writeFlipsCSV writes one line per dataset, agent, transition and grading mode.
func writeFlipsCSV(w io.Writer, s uncertainty.Combined) error {
	header := []string{"dataset", "agent", "from_turn", "to_turn", "mode"}
	for _, c := range flipColumns {
		header = append(header, c.name, c.name+"_std")
	}
	records := [][]string{header}
	for i, r := range s.Mean.Rows {
		for _, tr := range transitions(r) {
			mean, std := tr.pick(r), tr.pick(s.Std.Rows[i])
			for _, mode := range []struct {
				name      string
				mean, std uncertainty.Flips
			}{{"strict", mean.Strict, std.Strict}, {"robust", mean.Robust, std.Robust}} {
				rec := []string{r.Dataset, agentName(r.Agent), strconv.Itoa(tr.from), strconv.Itoa(r.Turn), mode.name}
				for _, c := range flipColumns {
					rec = append(rec, num(c.value(mode.mean)), num(c.value(mode.std)))
				}
				records = append(records, rec)
			}
		}
	}
	return writeCSV(w, records)
}

// writeProblemsCSV writes one line per problem and turn: the team's decomposition and
// each agent's accuracy.
func writeProblemsCSV(w io.Writer, problems []uncertainty.ProblemRecord) error {
	agents := len(problems[0].Answers)
	header := []string{"dataset", "id", "turn", "support", "tu", "eu", "au"}
	for a := range agents {
		header = append(header, fmt.Sprintf("acc_strict_%d", a), fmt.Sprintf("acc_robust_%d", a))
	}
	records := [][]string{header}
	for _, p := range problems {
		turns, err := uncertainty.PerProblem(p)
		if err != nil {
			return err
		}
		if len(p.Answers) != agents {
			return fmt.Errorf("problem %s/%s has %d agents, the first has %d", p.Dataset, p.ID, len(p.Answers), agents)
		}
		for _, t := range turns {
			rec := []string{t.Dataset, t.ID, strconv.Itoa(t.Turn), strconv.Itoa(t.Support), num(t.TU), num(t.EU), num(t.AU)}
			for a := range agents {
				rec = append(rec, num(t.AccStrict[a]), num(t.AccRobust[a]))
			}
			records = append(records, rec)
		}
	}
	return writeCSV(w, records)
}

// cell formats a mean, with "± std" when there are several seeds.
func cell(mean, std float64, seeds int, format func(float64) string) string {
	if seeds > 1 {
		return format(mean) + " ± " + format(std)
	}
	return format(mean)
}

func percent(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) }
func nats(v float64) string    { return strconv.FormatFloat(v, 'f', 3, 64) }
func plain(v float64) string   { return strconv.FormatFloat(v, 'f', 1, 64) }

// turnLabel names a turn as the code counts it and as the paper's tables do (T = turn+1).
func turnLabel(turn int) string { return fmt.Sprintf("%d (T=%d)", turn, turn+1) }

// markdownText escapes a name (a data set's, a run's) for a Markdown line or table cell, as
// the HTML and SVG outputs escape theirs: its HTML stays text, a | does not split a cell and a
// newline does not end a row or heading.
var markdownText = strings.NewReplacer(`\`, `\\`, "&", "&amp;", "<", "&lt;", ">", "&gt;", "|", `\|`,
	"\r\n", " ", "\n", " ", "\r", " ").Replace

// markdownTable writes a GitHub-style table, every cell escaped (markdownText).
func markdownTable(b *strings.Builder, header []string, rows [][]string) {
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + markdownText(c) + " |")
		}
		b.WriteString("\n")
	}
	row(header)
	b.WriteString("|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		row(r)
	}
	b.WriteString("\n")
}

// tableColumn is one column of a per-turn table: the rows of one run, dataset and agent.
type tableColumn struct {
	header  string
	run     uncertainty.Combined
	dataset string
	agent   int
}

// runColumns returns a column per (dataset, agent) of a run, headers prefixed by prefix.
func runColumns(prefix string, s uncertainty.Combined, datasets []string, agents []int) []tableColumn {
	var cols []tableColumn
	for _, d := range datasets {
		for _, a := range agents {
			cols = append(cols, tableColumn{header: prefix + d + " " + agentLabel(a), run: s, dataset: d, agent: a})
		}
	}
	return cols
}

// turnTable is a paper-style table: one row per turn, one cell per column from format
// ("–" where the column's run lacks the row).
func turnTable(b *strings.Builder, turns int, cols []tableColumn, format func(mean, std uncertainty.Row, seeds int) string) {
	header := []string{"Turn"}
	for _, c := range cols {
		header = append(header, c.header)
	}
	var rows [][]string
	for t := range turns {
		row := []string{turnLabel(t)}
		for _, c := range cols {
			mean, ok := c.run.Mean.Find(c.dataset, c.agent, t)
			std, _ := c.run.Std.Find(c.dataset, c.agent, t)
			if !ok {
				row = append(row, "–")
				continue
			}
			row = append(row, format(mean, std, c.run.Seeds))
		}
		rows = append(rows, row)
	}
	markdownTable(b, header, rows)
}

// percentCell formats a figure of a row as percent, with its deviation.
func percentCell(get func(uncertainty.Row) float64) func(mean, std uncertainty.Row, seeds int) string {
	return func(mean, std uncertainty.Row, seeds int) string { return cell(get(mean), get(std), seeds, percent) }
}

func majorityCell(mean, std uncertainty.Row, seeds int) string {
	return cell(mean.MajStrict, std.MajStrict, seeds, percent) + " / " + cell(mean.MajRobust, std.MajRobust, seeds, percent)
}

func uncertaintyCell(mean, std uncertainty.Row, seeds int) string {
	return "TU " + cell(mean.TU, std.TU, seeds, nats) + ", EU " + cell(mean.EU, std.EU, seeds, nats) +
		", AU " + cell(mean.AU, std.AU, seeds, nats)
}

func strictAccuracy(r uncertainty.Row) float64 { return r.AccStrict }
func robustAccuracy(r uncertainty.Row) float64 { return r.AccRobust }

// agentIndices returns 0..n-1, followed by System when withTeam is set.
func agentIndices(n int, withTeam bool) []int {
	out := make([]int, 0, n+1)
	for a := range n {
		out = append(out, a)
	}
	if withTeam {
		out = append(out, uncertainty.System)
	}
	return out
}

// focusDataset is the dataset the figures and the per-turn response table show: the
// average over datasets when there are several, else the only one.
func focusDataset(s uncertainty.Summary) string {
	return s.Datasets[len(s.Datasets)-1]
}

func writeMarkdown(w io.Writer, run Run, figures []string) error {
	s := run.Summary
	n := s.Seeds
	var b strings.Builder
	fmt.Fprintf(&b, "# Debate evaluation: %s\n\n", markdownText(run.Name))
	if run.Partial != "" {
		fmt.Fprintf(&b, "**PARTIAL RUN**: %s; every figure below is over the finished problems only.\n\n", run.Partial)
	}
	if run.Protocol != "" {
		fmt.Fprintf(&b, "Protocol: %s.\n\n", run.Protocol)
	}
	fmt.Fprintf(&b, "%d agents, %d turns, %d seed(s)", s.Mean.Agents, s.Mean.Turns, n)
	if n > 1 {
		b.WriteString(" (cells: mean ± population standard deviation over seeds)")
	}
	b.WriteString(". Turns count from 0; the paper's T is turn+1. Accuracy is pass@1 in percent " +
		"(the share of correct samples, averaged over problems); `average` weighs datasets equally. " +
		"Entropies are in nats.\n\n")

	agents := agentIndices(s.Mean.Agents, false)
	writeTurnTables(&b, "##", s, figures)

	if s.Mean.Turns > 1 {
		writeFlipsMarkdown(&b, s)
		if slices.Contains(figures, "flips") {
			fmt.Fprintf(&b, "![Flips from turn 0, %s](flips.png)\n\n", markdownText(focusDataset(s.Mean)))
		}
	}

	focus := focusDataset(s.Mean)
	fmt.Fprintf(&b, "## Responses (%s)\n\n", markdownText(focus))
	header := []string{"Turn"}
	for _, a := range agents {
		l := agentLabel(a)
		header = append(header, l+" token entropy", l+" NLL/token", l+" tokens", l+" truncated %", l+" boxed %")
	}
	var rows [][]string
	for t := range s.Mean.Turns {
		row := []string{turnLabel(t)}
		for _, a := range agents {
			m, _ := s.Mean.Find(focus, a, t)
			d, _ := s.Std.Find(focus, a, t)
			row = append(row, cell(m.TokenEntropy, d.TokenEntropy, n, nats), cell(m.NLL, d.NLL, n, nats),
				cell(m.Tokens, d.Tokens, n, plain), cell(m.Truncated, d.Truncated, n, percent), cell(m.Boxed, d.Boxed, n, percent))
		}
		rows = append(rows, row)
	}
	markdownTable(&b, header, rows)
	b.WriteString("Files: summary.json, accuracy.csv, uncertainty.csv, flips.csv")
	if len(run.Problems) > 0 {
		b.WriteString(", problems.csv")
	}
	b.WriteString("; figures as .svg and .png.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeVerified says, where a verifier model judged answers, that the robust figures
// count its verdicts, and the share of the team's samples it decided per turn.
func writeVerified(b *strings.Builder, s uncertainty.Summary) {
	focus := focusDataset(s)
	var shares []string
	decided := false
	for t := range s.Turns {
		r, _ := s.Find(focus, uncertainty.System, t)
		shares = append(shares, fmt.Sprintf("turn %s %.1f%%", turnLabel(t), 100*r.Verified))
		decided = decided || r.Verified > 0
	}
	if decided {
		fmt.Fprintf(b, "A verifier model judged the answers robust's rules do not decide, and these figures count its verdicts. "+
			"Share of the samples it decided (%s): %s.\n\n", focus, strings.Join(shares, ", "))
	}
}

// writeTurnTables writes the per-turn accuracy, majority and uncertainty tables of a
// debate run, under headings of the given level, with the figures among figures; the
// training report shows a validation's with them.
func writeTurnTables(b *strings.Builder, level string, s uncertainty.Combined, figures []string) {
	agents := agentIndices(s.Mean.Agents, false)
	turns, datasets := s.Mean.Turns, s.Mean.Datasets
	b.WriteString(level + " Accuracy, strict grading (MATH is_equiv, as the paper)\n\n")
	turnTable(b, turns, runColumns("", s, datasets, agents), percentCell(strictAccuracy))
	b.WriteString(level + " Accuracy, robust grading\n\n")
	writeVerified(b, s.Mean)
	turnTable(b, turns, runColumns("", s, datasets, agents), percentCell(robustAccuracy))
	if slices.Contains(figures, "accuracy") {
		fmt.Fprintf(b, "![Accuracy per turn, %s](accuracy.png)\n\n", markdownText(focusDataset(s.Mean)))
	}
	b.WriteString(level + " Majority vote (percent, strict / robust)\n\n" +
		"The most frequent answer among an agent's samples (Team: among all samples); reported, not used to score agents.\n\n")
	turnTable(b, turns, runColumns("", s, datasets, agentIndices(s.Mean.Agents, true)), majorityCell)

	b.WriteString(level + " Uncertainty of the team (nats)\n\n" +
		"TU = H(p_sys) = EU + AU over the agents' answer distributions; EU is their Jensen-Shannon divergence, " +
		"AU their mean entropy.\n\n")
	turnTable(b, turns, runColumns("", s, datasets, []int{uncertainty.System}), uncertaintyCell)
	if slices.Contains(figures, "uncertainty") {
		fmt.Fprintf(b, "![EU and AU stacked, TU on top, %s](uncertainty.png)\n\n", markdownText(focusDataset(s.Mean)))
	}
}

// flipTargets are the turns whose flips from turn 0 the report shows: 1 and the last.
func flipTargets(turns int) []int {
	if last := turns - 1; last > 1 {
		return []int{1, last}
	}
	return []int{1}
}

// writeFlipsMarkdown writes the strict-grading flips from turn 0 to the flipTargets
// turns, for every dataset and agent.
func writeFlipsMarkdown(b *strings.Builder, s uncertainty.Combined) {
	n := s.Seeds
	b.WriteString("## Flips (percent of trajectories, strict grading)\n\n" +
		"C2W: correct at turn 0, wrong at the later turn; the flip ratio is C2W + W2C. " +
		"Every transition, in both gradings, is in flips.csv.\n\n")
	header := []string{"Dataset", "Agent", "Turns", "C2C", "C2W", "W2C", "W2W", "Flip ratio"}
	targets := flipTargets(s.Mean.Turns)
	var rows [][]string
	for i, r := range s.Mean.Rows {
		if !slices.Contains(targets, r.Turn) {
			continue
		}
		mean, std := r.FromStart.Strict, s.Std.Rows[i].FromStart.Strict
		row := []string{r.Dataset, agentLabel(r.Agent), fmt.Sprintf("0→%d", r.Turn)}
		for _, c := range flipColumns {
			row = append(row, cell(c.value(mean), c.value(std), n, percent))
		}
		rows = append(rows, row)
	}
	markdownTable(b, header, rows)
}
