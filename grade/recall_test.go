package grade

import (
	"fmt"
	"strings"
	"testing"
)

// recallCase is a pair from one of the recall categories: gold, the
// answer as a model writes it, what each grader family says (fam, one
// letter per recallFamilies' column: y equal, n not) and what robust says.
// Robust says "not equal" where a family says "equal" only with a reason.
type recallCase struct {
	category     string
	gold, answer string
	fam          string
	want         bool
	why          string
}

// recallFamilies are the graders the cases were read against, each with
// its column in recallCase.fam. The verdicts come from reading their code
// (not from running it), each as its own pipeline calls Math-Verify:
//   - Math-Verify: parse("$gold$") against parse(answer), LaTeX and plain
//     expressions; plain text gives its last number (`x = 2/7 \approx 0.29`
//     is 0.29), and floats compare rounded to 6 places (1.3333 is not 4/3);
//   - lighteval: its MATH-500 metric calls Math-Verify with the same
//     targets and precision on a boxed gold, so its column is Math-Verify's;
//   - NeMo-Skills: math_equal on the last box's content (the answer where it
//     has none), a literal check, then LaTeX only, math mode added;
//   - open-r1: accuracy_reward reads only a box or a LaTeX answer after
//     "answer"; a sentence without one is not equal;
//   - AReaL: MathVerifyWorker on the gold as written: outside math mode a
//     gold is its last number (`x \ne 3` is 3).
var recallFamilies = []struct {
	name   string
	column int
}{{"Math-Verify", 0}, {"lighteval", 0}, {"NeMo-Skills", 1}, {"open-r1", 2}, {"AReaL", 3}}

var recallCases = []recallCase{
	{"relations", `x < 3`, `We find that $x \lt 3$.`, "yynn", true, ""},
	{"relations", `x \ge 5`, `Therefore $x \geq 5$ is the solution.`, "yynn", true, ""},
	{"relations", `x \le 2`, `Thus $x <= 2$ is our answer.`, "yynn", true, ""},
	{"relations", `x > 5`, `Therefore $x \gt 5$ is the solution.`, "yynn", true, ""},
	{"relations", `x \ne 3`, `x != 3`, "nyny", true, ""},
	{"relations", `x \neq 3`, `We find that $x \ne 3$.`, "yynn", true, ""},
	{"relations", `x \neq 3`, `3 \neq x`, "nyny", true, ""},
	{"relations", `x ≠ 3`, `\(x \neq 3\)`, "yynn", true, ""},
	{"relations", `x \le 5`, `So \[ 5 \geq x \]`, "yynn", true, ""},
	{"relations", `x \ne 3`, `x \ne 4`, "nnnn", false, ""},
	{"relations", `x \neq 3`, `x = 3`, "nnny", false, "AReaL reads the last number of a gold outside math mode"},
	{"relations", `x \neq 3`, `x < 3`, "nnny", false, "AReaL reads the last number of a gold outside math mode"},
	{"relations", `x > 5`, `Therefore $x < 5$ is the solution.`, "nnnn", false, ""},
	{"relations", `x \ge 5`, `The solution is $x \le 5$`, "nnnn", false, ""},
	{"relations", `120`, `5!=120`, "ynny", false, "a factorial, not a relation"},

	{"free text", `17`, `So the result is \(17\).`, "yyny", true, ""},
	{"free text", `y \le 4`, `Hence $y \le 4$ holds.`, "yynn", true, ""},
	{"free text", `y \le 4`, `Hence $y \le 4$ holds for every $x$.`, "nnnn", true, ""},
	{"free text", `4`, `Thus, $x = 4$.`, "yyny", true, ""},
	{"free text", `5`, `The sum is $2+3$, which is $5$.`, "yyny", true, ""},
	{"free text", `\frac{14}{3}`, `Adding, we get $2+\frac53+1=\frac{14}{3}$.`, "yyny", true, ""},
	{"free text", `(3, \frac{\pi}{2})`, `The polar coordinates are \(\left( 3, \frac{\pi}{2} \right)\).`, "yynn", true, ""},
	{"free text", `17`, `So the result is \(71\).`, "nnnn", false, ""},
	{"free text", `y \le 4`, `Hence $y < 4$ holds.`, "nnnn", false, ""},
	{"free text", `4`, `Thus, $x = 5$.`, "nnnn", false, ""},
	{"free text", `2`, `Hence $x = 2$ or $x = -2$.`, "nnnn", false, "the last expression is the answer"},
	{"free text", `5`, `The sum is $5$, not $6$.`, "nnnn", false, ""},
	{"free text", `2`, `The roots are $1$ and $2$.`, "nnnn", false, "spans joined by and are a list"},
	{"free text", `1, 2`, `The roots are $1$ and $2$.`, "yynn", true, ""},

	{"approximation", `\frac{2}{7}`, `x = 2/7 \approx 0.29`, "nynn", true, ""},
	{"approximation", `\frac{2}{7}`, `x = \frac{2}{7} ≈ 0.2857`, "nynn", true, ""},
	{"approximation", `\frac{1}{3}`, `x = 5+5+1 = 1/3 \approx 11`, "nynn", true, ""},
	{"approximation", `11`, `x \approx 11`, "yyny", true, ""},
	{"approximation", `\frac{2}{7}`, `x \approx 0.29`, "nnnn", false, "an approximation is not the exact answer"},
	{"approximation", `\frac{2}{7}`, `\frac{3}{7} \approx 0.43`, "nnnn", false, ""},
	{"approximation", `0.29`, `x = \frac{2}{7} \approx 0.29`, "ynny", true, "the gold is approximate and the answer states it"},
	{"approximation", `0.29`, `x = \frac{3}{7} \approx 0.29`, "ynny", false, "3/7 is not 0.29: plain text gives Math-Verify its last number"},
	{"approximation", `0.29`, `\frac{2}{7} \approx 0.3`, "nnnn", false, ""},
	{"approximation", `\sqrt{2}`, `\sqrt{2} \approx 1.41`, "nynn", true, ""},
	{"approximation", `1.41`, `\sqrt{2}`, "nnnn", false, ""},
	{"approximation", `\frac{1}{3}`, `a = \frac13 \approx 0.33, b = \frac23 \approx 0.67`, "nnnn", false, "a list of approximations is not its first element"},
	{"approximation", `a = \frac13, b = \frac23`, `a = \frac13 \approx 0.33, b = \frac23 \approx 0.67`, "nynn", true, ""},

	{"decimal comma", `3.75`, `3,75 €`, "ynny", true, ""},
	{"decimal comma", `3.75`, `€3,75`, "ynny", true, ""},
	{"decimal comma", `3.75`, `3,75 \text{ m}`, "ynny", true, ""},
	{"decimal comma", `0.05`, `0,05`, "ynny", true, ""},
	{"decimal comma", `3.05`, `3,05`, "ynny", true, ""},
	{"decimal comma", `12`, `The rope is $12$ meters long.`, "yyny", true, ""},
	{"decimal comma", `1250`, `The total is \(1,250\) dollars.`, "yyny", true, ""},
	{"decimal comma", `3.5`, `It weighs $3{,}5$ kg.`, "nnnn", true, ""},
	{"decimal comma", `1.22`, `1,22`, "ynny", false, "1,22 may be the list 1 and 22"},
	{"decimal comma", `2.3`, `2,3`, "ynny", false, "2,3 may be the list 2 and 3"},
	{"decimal comma", `375`, `3,75 €`, "nnnn", false, ""},
	{"decimal comma", `3.5`, `3,5 m`, "ynny", true, ""},
	{"decimal comma", `35`, `3,5 m`, "nnnn", false, ""},
	{"decimal comma", `2.3`, `2, 3`, "nnnn", false, ""},
	{"decimal comma", `0.5`, `0,05`, "nnnn", false, ""},
	{"decimal comma", `1`, `1,000 €`, "nnnn", false, ""},
	{"decimal comma", `\frac{3}{10}`, `0,3a`, "ynny", false, "a product after the comma is a list element, not a unit"},

	{"rearranged equation", `2x - y - 1 = 0`, `y = 2x - 1`, "nynn", true, ""},
	{"rearranged equation", `2x+4y-3=0`, `y=-\frac{1}{2}x+\frac{3}{4}`, "nynn", true, ""},
	{"rearranged equation", `x + y = 1`, `y = 1 - x`, "nyny", true, ""},
	{"rearranged equation", `y = x^2 + 1`, `x^2 - y + 1 = 0`, "nynn", true, ""},
	{"rearranged equation", `x = 2y + 3`, `y = \frac{x-3}{2}`, "nynn", true, ""},
	{"rearranged equation", `x^2/4 + y^2/3 = 1`, `x^2/16 + y^2/12 = 1/4`, "nynn", true, ""},
	{"rearranged equation", `2x - y - 1 = 0`, `2x - 1`, "nnnn", false, "a rearranged equation is not an expression"},
	{"rearranged equation", `7 = 11a+c`, `11a+c`, "nnny", false, "AReaL reads the last number of a gold outside math mode"},
	{"rearranged equation", `2x + z = 1`, `1`, "nnny", false, "AReaL reads the last number of a gold outside math mode"},
	{"rearranged equation", `y = 2x - 1`, `2x + y - 1 = 0`, "nnnn", false, ""},
	{"rearranged equation", `y = 2x - 1`, `2x - y - 1`, "nnny", false, "AReaL reads the last number of a gold outside math mode"},
	{"rearranged equation", `y = 2x - 1`, `y = 2x + 1`, "nnny", false, "AReaL reads the last number of a gold outside math mode"},
	{"rearranged equation", `x = 2y + 3`, `y = \frac{x+3}{2}`, "nnnn", false, ""},

	{"interval decimals", `[\frac14, \frac43)`, `[0.25, 1.3333)`, "nnnn", true, ""},
	{"interval decimals", `\left(\frac{3}{5},\frac{8}{3}\right]`, `(0.6, 2.6667]`, "nnnn", true, ""},
	{"interval decimals", `(-\infty, \sqrt{2}]`, `(-\infty, 1.4142]`, "nnnn", true, ""},
	{"interval decimals", `\frac{1}{3} \le x \le \frac{2}{3}`, `[0.3333, 0.6667]`, "nnnn", true, ""},
	{"interval decimals", `[\frac14, \frac43)`, `[0.2500, 1.33333)`, "nnnn", true, ""},
	{"interval decimals", `[\frac14, \frac43)`, `[0.25, 1.33)`, "nnnn", false, ""},
	{"interval decimals", `[\frac14, \frac43)`, `(0.25, 1.3333)`, "nnnn", false, ""},
	{"interval decimals", `[\frac14, \frac43)`, `[0.25, 1.3333]`, "nnnn", false, ""},
	{"interval decimals", `(-\infty, \sqrt{2}]`, `(-\infty, 1.41]`, "nnnn", false, ""},
	{"interval decimals", `[\frac14, \frac43)`, `[0.25, 1.3334)`, "nnnn", false, "1.3334 is not 4/3 rounded or cut to four places"},

	{"boxes", `3, 5`, `\boxed{3} apples and \boxed{5} pears`, "ynyn", true, ""},
	{"boxes", `\{3, 5\}`, `\boxed{3} and \boxed{5}`, "ynyn", true, ""},
	{"boxes", `-2, 1`, `The integers are \boxed{-2} and \boxed{1}.`, "ynyn", true, ""},
	{"boxes", `\{1, 2, 3\}`, `$\boxed{1}$, $\boxed{2}$, $\boxed{3}$`, "ynyn", true, ""},
	{"boxes", `3, 5`, `\boxed{3} apples and \boxed{6} pears`, "nnnn", false, ""},
	{"boxes", `5`, `\boxed{3} apples and \boxed{5} pears`, "nynn", false, "NeMo-Skills reads the last box only"},
	{"boxes", `3`, `First \boxed{2}, then we get \boxed{3}`, "nynn", true, ""},
	{"boxes", `(3, 5)`, `\boxed{3}, \boxed{5}`, "ynyn", false, "a list is not a point: the order of boxes is not a tuple's"},

	{"matrices", `\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}`, `\left[\begin{array}{cc}1 & 2 \\ 3 & 4\end{array}\right]`, "nyny", true, ""},
	{"matrices", `\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}`, `Special matrix: $ \left[\begin{array}{cc}1 & 2 \\3 & 4\end{array}\right] $`, "yynn", true, ""},
	{"matrices", `\begin{bmatrix}1 & 0 \\ 0 & 1\end{bmatrix}`, `\left(\begin{array}{rr}1 & 0 \\ 0 & 1\end{array}\right)`, "nyny", true, ""},
	{"matrices", `\begin{pmatrix} 1 \\ 2 \end{pmatrix}`, `\left[\begin{array}{c} 1 \\ 2 \end{array}\right]`, "nyny", true, ""},
	{"matrices", `\begin{pmatrix} \frac12 & 0 \\ 0 & 1 \end{pmatrix}`, `\left[\begin{array}{cc} 0.5 & 0 \\ 0 & 1 \end{array}\right]`, "nyny", true, ""},
	{"matrices", `\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}`, `\left[\begin{array}{cc}1 & 2 \\ 3 & 5\end{array}\right]`, "nnnn", false, ""},
	{"matrices", `\begin{pmatrix} 1 & 2 \end{pmatrix}`, `\left[\begin{array}{c} 1 \\ 2 \end{array}\right]`, "nnny", false, "AReaL reads the last number of a gold outside math mode"},
	{"matrices", `\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}`, `\left[\begin{array}{cc}1 & 3 \\ 2 & 4\end{array}\right]`, "nnny", false, "AReaL reads the last number of a gold outside math mode"},
	{"matrices", `\begin{pmatrix}1 & 2 & 3\end{pmatrix}`, `\left[\begin{array}{cc|c}1 & 2 & 3\end{array}\right]`, "nnny", false, "an augmented matrix is not a matrix"},
}

// TestRecallCases: robust gives every pair its intended verdict, both ways,
// and refuses what a family accepts only with a reason.
func TestRecallCases(t *testing.T) {
	for _, c := range recallCases {
		if len(c.fam) != 4 || strings.Trim(c.fam, "yn") != "" {
			t.Errorf("%q vs %q: family verdicts %q are not 4 of y/n", c.gold, c.answer, c.fam)
		}
		if !c.want && strings.Contains(c.fam, "y") && c.why == "" {
			t.Errorf("%q vs %q refuses what a family accepts without a reason", c.gold, c.answer)
		}
		for _, p := range [][2]string{{c.gold, c.answer}, {c.answer, c.gold}} {
			if got := RobustEquiv(p[0], p[1]); got != c.want {
				t.Errorf("%s: RobustEquiv(%q, %q) = %v, want %v", c.category, p[0], p[1], got, c.want)
			}
		}
	}
}

// recallTable is robust's agreement with each family per category (the
// README's table, in percent to one place) and, last, its recall: of the
// pairs the family calls equal, how many robust calls equal.
func recallTable() (header []string, rows [][]string) {
	var order []string
	seen := map[string]bool{}
	for _, c := range recallCases {
		if !seen[c.category] {
			seen[c.category] = true
			order = append(order, c.category)
		}
	}
	header = append([]string{"family"}, append(order, "all", "recall")...)
	pct := func(n, d int) string {
		if d == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(d))
	}
	for _, f := range recallFamilies {
		agree, cases := map[string]int{}, map[string]int{}
		accepted, kept := 0, 0
		for _, c := range recallCases {
			fam := c.fam[f.column] == 'y'
			got := RobustEquiv(c.gold, c.answer)
			cases[c.category]++
			if got == fam {
				agree[c.category]++
				agree["all"]++
			}
			if fam {
				accepted++
				if got {
					kept++
				}
			}
		}
		row := []string{f.name}
		for _, cat := range order {
			row = append(row, pct(agree[cat], cases[cat]))
		}
		rows = append(rows, append(row, pct(agree["all"], len(recallCases)), pct(kept, accepted)))
	}
	return header, rows
}

// recallReadme is the table as the README states it.
var recallReadme = [][]string{
	{"Math-Verify", "80.0%", "92.9%", "53.8%", "76.5%", "53.8%", "50.0%", "75.0%", "55.6%", "68.7%", "82.9%"},
	{"lighteval", "80.0%", "92.9%", "53.8%", "76.5%", "53.8%", "50.0%", "75.0%", "55.6%", "68.7%", "82.9%"},
	{"NeMo-Skills", "100.0%", "92.9%", "92.3%", "58.8%", "100.0%", "50.0%", "37.5%", "100.0%", "80.8%", "97.3%"},
	{"open-r1", "40.0%", "42.9%", "46.2%", "47.1%", "53.8%", "50.0%", "75.0%", "44.4%", "48.5%", "80.0%"},
	{"AReaL", "33.3%", "71.4%", "53.8%", "76.5%", "30.8%", "50.0%", "37.5%", "55.6%", "52.5%", "60.0%"},
}

// TestRecallAgreement prints the README's table of robust's agreement with
// each grader family per category, and checks the README states it.
func TestRecallAgreement(t *testing.T) {
	header, rows := recallTable()
	t.Logf("| %s |", strings.Join(header, " | "))
	for i, r := range rows {
		t.Logf("| %s |", strings.Join(r, " | "))
		if i >= len(recallReadme) || strings.Join(r, "|") != strings.Join(recallReadme[i], "|") {
			t.Errorf("row %v is not the README's %v", r, recallReadme)
		}
	}
}
