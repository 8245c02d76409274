package gradefile

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/verifier"
)

// Stats counts the verdicts of one run.
type Stats struct {
	graded, skipped, strict, robust, strictOnly, robustOnly, noAnswer int
	verified                                                          int // correct in robust+verifier mode
	// check is the verifier, nil without one.
	check *verifier.Session
	// disagree holds the lines where the modes differ, for the comparison.
	disagree []disagreement
}

// disagreement is a line that strict and robust grade differently.
type disagreement struct {
	line           int
	answer, gold   string
	strict, robust bool
	rule           string // robust's rule; "no answer" where robust extracted none, "unread" where it could not parse a side
}

func (s *Stats) count(v grade.Verdict) {
	strict, robust := v.Correct(grade.Strict), v.Correct(grade.Robust)
	s.graded++
	if v.NoAnswer {
		s.noAnswer++
	}
	if strict {
		s.strict++
	}
	if robust {
		s.robust++
	}
	if v.Correct(grade.Verified) {
		s.verified++
	}
	if strict && !robust {
		s.strictOnly++
	}
	if robust && !strict {
		s.robustOnly++
	}
}

// Print writes the counts, and the verifier's where one was given.
func (s *Stats) Print(w io.Writer) {
	percent := func(n int) string {
		if s.graded == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f%%", 100*float64(n)/float64(s.graded))
	}
	fmt.Fprintf(w, "graded %d lines, skipped %d malformed\n", s.graded, s.skipped)
	fmt.Fprintf(w, "strict accuracy  %s (%d/%d)\n", percent(s.strict), s.strict, s.graded)
	fmt.Fprintf(w, "robust accuracy  %s (%d/%d)\n", percent(s.robust), s.robust, s.graded)
	fmt.Fprintf(w, "modes disagree   %d (robust only %d, strict only %d)\n", s.strictOnly+s.robustOnly, s.robustOnly, s.strictOnly)
	fmt.Fprintf(w, "no answer        %d\n", s.noAnswer)
	if s.check != nil {
		fmt.Fprintf(w, "robust+verifier  %s (%d/%d)\n", percent(s.verified), s.verified, s.graded)
		fmt.Fprintf(w, "verifier         %s\n", s.check.Done)
	}
}

// WriteComparison writes the Markdown report of the disagreements (umad grade --compare):
// per rule, how often each mode alone called a line correct, then every such line.
func (s *Stats) WriteComparison(w io.Writer) error {
	var rules []string
	byRule := map[string][]disagreement{}
	for _, d := range s.disagree {
		if byRule[d.rule] == nil {
			rules = append(rules, d.rule)
		}
		byRule[d.rule] = append(byRule[d.rule], d)
	}
	slices.Sort(rules)
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# Strict and robust disagreements\n\n%d lines graded; the modes disagree on %d (robust only %d, strict only %d).\n",
		s.graded, len(s.disagree), s.robustOnly, s.strictOnly)
	fmt.Fprintf(b, "The rule is robust's: the comparison that found a line correct, none where it\nfound it wrong, unread where it found it wrong by the spelling of a side it could\nnot parse, no answer where robust's extraction found none.\n\n")
	fmt.Fprintf(b, "| rule | robust only | strict only |\n|---|---|---|\n")
	for _, r := range rules {
		robustOnly := 0
		for _, d := range byRule[r] {
			if d.robust {
				robustOnly++
			}
		}
		fmt.Fprintf(b, "| %s | %d | %d |\n", r, robustOnly, len(byRule[r])-robustOnly)
	}
	for _, r := range rules {
		fmt.Fprintf(b, "\n## %s\n\n| line | answer | gold | strict | robust |\n|---|---|---|---|---|\n", r)
		for _, d := range byRule[r] {
			fmt.Fprintf(b, "| %d | %s | %s | %v | %v |\n", d.line, markdownCell(d.answer), markdownCell(d.gold), d.strict, d.robust)
		}
	}
	return b.Flush()
}

// maxCell bounds an answer shown in the report; a whole solution as gold would
// drown the table.
const maxCell = 200

// markdownCell shows an answer in a table cell: one line, pipes escaped, bounded.
func markdownCell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxCell {
		s = string(r[:maxCell]) + "..."
	}
	return "`` " + strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "`", "'") + " ``"
}
