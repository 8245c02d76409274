package report

// Table 1's files: table1.md, table1.csv and table1.html.

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/umad-dev/umad/uncertainty"
)

// text formats a cell as "62.4 ± 0.5 (+1.4 [+0.3, +2.6] *)", with " [n=19]" where it
// averages other than its column's usual number of problems (colN).
func (c tableCell) text(colN int) string {
	if !c.has {
		return "–"
	}
	s := cell(c.mean, c.std, c.seeds, percent)
	if c.n != colN {
		s += fmt.Sprintf(" [n=%d]", c.n)
	}
	switch {
	case c.ci:
		s += fmt.Sprintf(" (%s [%s, %s]", withSign(percent(c.delta)), withSign(percent(c.lo)), withSign(percent(c.hi)))
		if c.significant() {
			s += " *"
		}
		s += ")"
	case c.diff:
		s += " (" + withSign(percent(c.delta)) + ")"
	}
	return s
}

// columnN is each column's most common number of problems among the methods (the
// smallest of a tie), which its cells need not repeat.
func (t *table1) columnN() []int {
	out := make([]int, len(t.datasets)*len(t.turns))
	for i := range out {
		count := map[int]int{}
		for _, r := range t.rows {
			if c := r.cells[i]; c.has {
				count[c.n]++
			}
		}
		for n, k := range count {
			if k > count[out[i]] || k == count[out[i]] && n < out[i] {
				out[i] = n
			}
		}
	}
	return out
}

// legend is Table 1's caption: what the cells hold, the problems each column averages,
// and the partial methods.
func (t *table1) legend(colN []int) string {
	s := fmt.Sprintf("pass@1 in percent, strict grading (mean ± population standard deviation over %s); T is the "+
		"paper's turn (turn+1); the Average weighs datasets equally (each seed's, then mean ± std). In parentheses: the "+
		"difference from %s in points, with its 95%% interval from a paired bootstrap over problems (stratified by "+
		"dataset, each problem's difference averaged over the seeds both runs share); * marks an interval that excludes "+
		"zero. A difference without an interval lacks per-problem records on one side (a training run's validation). "+
		"– marks what a method lacks.", t.spread, t.baseline)
	var ns []string
	for i := 0; i < len(colN); i += len(t.turns) {
		if d := t.datasets[i/len(t.turns)]; d != uncertainty.Average {
			ns = append(ns, fmt.Sprintf("%s %d", d, colN[i]))
		}
	}
	s += " Problems per dataset (n): " + strings.Join(ns, ", ") + "."
	for _, r := range t.rows {
		for i, c := range r.cells {
			if c.has && c.n != colN[i] {
				s += " [n=…] marks a cell over other problems than its column's: it is not comparable, and its difference " +
					"pairs only the problems both have (table1.csv: problems, paired_problems)."
				return s + t.partialText()
			}
		}
	}
	return s + t.partialText()
}

func (t *table1) partialText() string {
	if len(t.partial) == 0 {
		return ""
	}
	return " PARTIAL, problems left unfinished: " + strings.Join(t.partial, "; ") + "."
}

// rowLabel is a row's method, marked where its runs are partial.
func (t *table1) rowLabel(r tableRow) string {
	for _, p := range t.partial {
		if strings.HasPrefix(p, r.method+" (") {
			return r.method + " (partial)"
		}
	}
	return r.method
}

func writeTable1Markdown(w io.Writer, t *table1) error {
	var b strings.Builder
	colN := t.columnN()
	b.WriteString("# Table 1: accuracy per method and agent\n\n")
	b.WriteString(markdownText(t.legend(colN)) + "\n\n")
	header := []string{"Method", "Agent"}
	for i := range len(t.datasets) * len(t.turns) {
		header = append(header, t.columnLabel(i))
	}
	var rows [][]string
	for _, r := range t.rows {
		row := []string{t.rowLabel(r), agentLabel(r.agent)}
		for i, c := range r.cells {
			row = append(row, c.text(colN[i]))
		}
		rows = append(rows, row)
	}
	markdownTable(&b, header, rows)
	b.WriteString("Files: table1.csv (every cell with its interval), table1.html (the paper's colours).\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeTable1CSV(w io.Writer, t *table1) error {
	records := [][]string{{"method", "agent", "dataset", "T", "seeds", "acc", "acc_std", "diff", "ci_low", "ci_high", "excludes_zero", "paired_problems", "problems"}}
	for _, r := range t.rows {
		for i, c := range r.cells {
			if !c.has {
				continue
			}
			rec := []string{r.method, agentName(r.agent), t.datasets[i/len(t.turns)], strconv.Itoa(t.turns[i%len(t.turns)] + 1),
				strconv.Itoa(c.seeds), num(c.mean), num(c.std), "", "", "", "", "", strconv.Itoa(c.n)}
			if c.diff {
				rec[7] = num(c.delta)
			}
			if c.ci {
				rec[8], rec[9], rec[10], rec[11] = num(c.lo), num(c.hi), strconv.FormatBool(c.significant()), strconv.Itoa(c.problems)
			}
			records = append(records, rec)
		}
	}
	return writeCSV(w, records)
}

// The paper's colours (MBlue, MPink, MGray in its preamble).
const (
	gainColour = "A4C2E6"
	lossColour = "E8C2C0"
	baseColour = "F4F5F7"
)

// tint mixes a colour with white as LaTeX's colour!pct does.
func tint(hex string, pct int) string {
	v, _ := strconv.ParseUint(hex, 16, 32)
	out := "#"
	for shift := 16; shift >= 0; shift -= 8 {
		c := int(v>>shift) & 0xff
		out += fmt.Sprintf("%02x", 255-(255-c)*pct/100)
	}
	return out
}

// background is a cell's colour: the baseline's grey, or blue for a gain and pink for a
// loss, deeper with the difference (5% of the colour per point, from 10% to 75%).
func (c tableCell) background(isBase bool) string {
	switch {
	case !c.has:
		return ""
	case isBase:
		return tint(baseColour, 100)
	case !c.diff || c.delta == 0:
		return ""
	}
	pct := min(75, max(10, int(5*100*math.Abs(c.delta))))
	if c.delta > 0 {
		return tint(gainColour, pct)
	}
	return tint(lossColour, pct)
}

func writeTable1HTML(w io.Writer, t *table1) error {
	var b strings.Builder
	colN := t.columnN()
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Table 1</title>\n<style>\n" +
		"body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}" +
		"th,td{border:1px solid #ccc;padding:4px 6px;text-align:center;white-space:nowrap}" +
		".sig{font-weight:bold}caption{caption-side:bottom;text-align:left;max-width:60em;padding-top:1em}\n" +
		"</style>\n</head>\n<body>\n<table>\n")
	fmt.Fprintf(&b, "<caption>%s Light blue <span style=\"background:%s\">+ gain</span>, light pink "+
		"<span style=\"background:%s\">− loss</span>, grey the baseline.</caption>\n",
		html.EscapeString(t.legend(colN)), tint(gainColour, 25), tint(lossColour, 25))
	b.WriteString("<tr><th rowspan=\"2\">Method</th><th rowspan=\"2\">Agent</th>")
	for _, d := range t.datasets {
		if d == uncertainty.Average {
			d = "Average"
		}
		fmt.Fprintf(&b, "<th colspan=\"%d\">%s</th>", len(t.turns), html.EscapeString(d))
	}
	b.WriteString("</tr>\n<tr>")
	for range t.datasets {
		for _, turn := range t.turns {
			fmt.Fprintf(&b, "<th>T=%d</th>", turn+1)
		}
	}
	b.WriteString("</tr>\n")
	for _, r := range t.rows {
		fmt.Fprintf(&b, "<tr><th>%s</th><th>%s</th>", html.EscapeString(t.rowLabel(r)), agentLabel(r.agent))
		for i, c := range r.cells {
			style := ""
			if bg := c.background(r.isBase); bg != "" {
				style = fmt.Sprintf(" style=\"background:%s\"", bg)
			}
			class := ""
			if c.significant() {
				class = " class=\"sig\""
			}
			text := html.EscapeString(c.text(colN[i]))
			if r.browse && c.has {
				text = fmt.Sprintf("<a href=\"%s\">%s</a>", html.EscapeString(browserLink(r.method, t.datasets[i/len(t.turns)])), text)
			}
			fmt.Fprintf(&b, "<td%s%s>%s</td>", style, class, text)
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
