package reward

import (
	"fmt"
	"testing"
)

// recallCase is a pair from one of the recall categories: gold, the
// answer as a model writes it, what the symbolic graders (Math-Verify,
// NeMo-Skills, lighteval, open-r1, AReaL) say, and what robust says. The
// two differ only where robust refuses on purpose, with a reason.
type recallCase struct {
	category      string
	gold, answer  string
	graders, want bool
	why           string
}

// recallCases are written by hand from how those graders treat each
// category; every category has equal pairs and near misses.
var recallCases = []recallCase{
	{"relations", `x < 3`, `We find that $x \lt 3$.`, true, true, ""},
	{"relations", `x \ge 5`, `Therefore $x \geq 5$ is the solution.`, true, true, ""},
	{"relations", `x \le 2`, `Thus $x <= 2$ is our answer.`, true, true, ""},
	{"relations", `x > 5`, `Therefore $x \gt 5$ is the solution.`, true, true, ""},
	{"relations", `x \ne 3`, `x != 3`, true, true, ""},
	{"relations", `x \neq 3`, `We find that $x \ne 3$.`, true, true, ""},
	{"relations", `x \neq 3`, `3 \neq x`, true, true, ""},
	{"relations", `x ≠ 3`, `\(x \neq 3\)`, true, true, ""},
	{"relations", `x \le 5`, `So \[ 5 \geq x \]`, true, true, ""},
	{"relations", `x \ne 3`, `x \ne 4`, false, false, ""},
	{"relations", `x \neq 3`, `x = 3`, false, false, ""},
	{"relations", `x \neq 3`, `x < 3`, false, false, ""},
	{"relations", `x > 5`, `Therefore $x < 5$ is the solution.`, false, false, ""},
	{"relations", `x \ge 5`, `The solution is $x \le 5$`, false, false, ""},
	{"relations", `120`, `5!=120`, false, false, "a factorial, not a relation"},

	{"free text", `17`, `So the result is \(17\).`, true, true, ""},
	{"free text", `y \le 4`, `Hence $y \le 4$ holds.`, true, true, ""},
	{"free text", `y \le 4`, `Hence $y \le 4$ holds for every $x$.`, true, true, ""},
	{"free text", `4`, `Thus, $x = 4$.`, true, true, ""},
	{"free text", `5`, `The sum is $2+3$, which is $5$.`, true, true, ""},
	{"free text", `\frac{14}{3}`, `Adding, we get $2+\frac53+1=\frac{14}{3}$.`, true, true, ""},
	{"free text", `(3, \frac{\pi}{2})`, `The polar coordinates are \(\left( 3, \frac{\pi}{2} \right)\).`, true, true, ""},
	{"free text", `17`, `So the result is \(71\).`, false, false, ""},
	{"free text", `y \le 4`, `Hence $y < 4$ holds.`, false, false, ""},
	{"free text", `4`, `Thus, $x = 5$.`, false, false, ""},
	{"free text", `2`, `Hence $x = 2$ or $x = -2$.`, false, false, "the last expression is the answer"},
	{"free text", `5`, `The sum is $5$, not $6$.`, false, false, ""},
	{"free text", `2`, `The roots are $1$ and $2$.`, false, false, "spans joined by and are a list"},
	{"free text", `1, 2`, `The roots are $1$ and $2$.`, true, true, ""},

	{"approximation", `\frac{2}{7}`, `x = 2/7 \approx 0.29`, true, true, ""},
	{"approximation", `\frac{2}{7}`, `x = \frac{2}{7} ≈ 0.2857`, true, true, ""},
	{"approximation", `\frac{1}{3}`, `x = 5+5+1 = 1/3 \approx 11`, true, true, ""},
	{"approximation", `11`, `x \approx 11`, true, true, ""},
	{"approximation", `\frac{2}{7}`, `x \approx 0.29`, false, false, "an approximation is not the exact answer"},
	{"approximation", `\frac{2}{7}`, `\frac{3}{7} \approx 0.43`, false, false, ""},
	{"approximation", `0.29`, `x = \frac{2}{7} \approx 0.29`, false, true, "the gold is approximate and the answer states it"},
	{"approximation", `0.29`, `x = \frac{3}{7} \approx 0.29`, false, false, ""},
	{"approximation", `0.29`, `\frac{2}{7} \approx 0.3`, false, false, ""},
	{"approximation", `\sqrt{2}`, `\sqrt{2} \approx 1.41`, true, true, ""},
	{"approximation", `1.41`, `\sqrt{2}`, false, false, ""},
	{"approximation", `\frac{1}{3}`, `a = \frac13 \approx 0.33, b = \frac23 \approx 0.67`, false, false, "a list of approximations is not its first element"},
	{"approximation", `a = \frac13, b = \frac23`, `a = \frac13 \approx 0.33, b = \frac23 \approx 0.67`, true, true, ""},

	{"decimal comma", `3.75`, `3,75 €`, true, true, ""},
	{"decimal comma", `3.75`, `€3,75`, true, true, ""},
	{"decimal comma", `3.75`, `3,75 \text{ m}`, true, true, ""},
	{"decimal comma", `0.05`, `0,05`, true, true, ""},
	{"decimal comma", `3.05`, `3,05`, true, true, ""},
	{"decimal comma", `12`, `The rope is $12$ meters long.`, true, true, ""},
	{"decimal comma", `1250`, `The total is \(1,250\) dollars.`, true, true, ""},
	{"decimal comma", `3.5`, `It weighs $3{,}5$ kg.`, true, true, ""},
	{"decimal comma", `1.22`, `1,22`, true, false, "1,22 may be the list 1 and 22"},
	{"decimal comma", `2.3`, `2,3`, true, false, "2,3 may be the list 2 and 3"},
	{"decimal comma", `375`, `3,75 €`, false, false, ""},
	{"decimal comma", `3.5`, `3,5 m`, true, true, ""},
	{"decimal comma", `35`, `3,5 m`, false, false, ""},
	{"decimal comma", `2.3`, `2, 3`, false, false, ""},
	{"decimal comma", `0.5`, `0,05`, false, false, ""},
	{"decimal comma", `1`, `1,000 €`, false, false, ""},
	{"decimal comma", `\frac{3}{10}`, `0,3a`, false, false, "a product after the comma is a list element, not a unit"},

	{"rearranged equation", `2x - y - 1 = 0`, `y = 2x - 1`, true, true, ""},
	{"rearranged equation", `2x+4y-3=0`, `y=-\frac{1}{2}x+\frac{3}{4}`, true, true, ""},
	{"rearranged equation", `x + y = 1`, `y = 1 - x`, true, true, ""},
	{"rearranged equation", `y = x^2 + 1`, `x^2 - y + 1 = 0`, true, true, ""},
	{"rearranged equation", `x = 2y + 3`, `y = \frac{x-3}{2}`, true, true, ""},
	{"rearranged equation", `x^2/4 + y^2/3 = 1`, `x^2/16 + y^2/12 = 1/4`, true, true, ""},
	{"rearranged equation", `2x - y - 1 = 0`, `2x - 1`, false, false, "a rearranged equation is not an expression"},
	{"rearranged equation", `7 = 11a+c`, `11a+c`, false, false, ""},
	{"rearranged equation", `2x + z = 1`, `1`, false, false, ""},
	{"rearranged equation", `y = 2x - 1`, `2x + y - 1 = 0`, false, false, ""},
	{"rearranged equation", `y = 2x - 1`, `2x - y - 1`, false, false, ""},
	{"rearranged equation", `y = 2x - 1`, `y = 2x + 1`, false, false, ""},
	{"rearranged equation", `x = 2y + 3`, `y = \frac{x+3}{2}`, false, false, ""},

	{"interval decimals", `[\frac14, \frac43)`, `[0.25, 1.3333)`, true, true, ""},
	{"interval decimals", `\left(\frac{3}{5},\frac{8}{3}\right]`, `(0.6, 2.6667]`, true, true, ""},
	{"interval decimals", `(-\infty, \sqrt{2}]`, `(-\infty, 1.4142]`, true, true, ""},
	{"interval decimals", `\frac{1}{3} \le x \le \frac{2}{3}`, `[0.3333, 0.6667]`, true, true, ""},
	{"interval decimals", `[\frac14, \frac43)`, `[0.2500, 1.33333)`, true, true, ""},
	{"interval decimals", `[\frac14, \frac43)`, `[0.25, 1.33)`, false, false, ""},
	{"interval decimals", `[\frac14, \frac43)`, `(0.25, 1.3333)`, false, false, ""},
	{"interval decimals", `[\frac14, \frac43)`, `[0.25, 1.3333]`, false, false, ""},
	{"interval decimals", `(-\infty, \sqrt{2}]`, `(-\infty, 1.41]`, false, false, ""},
	{"interval decimals", `[\frac14, \frac43)`, `[0.25, 1.3334)`, true, false, "1.3334 is not 4/3 rounded or cut to four places"},

	{"boxes", `3, 5`, `\boxed{3} apples and \boxed{5} pears`, true, true, ""},
	{"boxes", `\{3, 5\}`, `\boxed{3} and \boxed{5}`, true, true, ""},
	{"boxes", `-2, 1`, `The integers are \boxed{-2} and \boxed{1}.`, true, true, ""},
	{"boxes", `\{1, 2, 3\}`, `$\boxed{1}$, $\boxed{2}$, $\boxed{3}$`, true, true, ""},
	{"boxes", `3, 5`, `\boxed{3} apples and \boxed{6} pears`, false, false, ""},
	{"boxes", `5`, `\boxed{3} apples and \boxed{5} pears`, false, false, ""},
	{"boxes", `3`, `First \boxed{2}, then we get \boxed{3}`, true, true, ""},
	{"boxes", `(3, 5)`, `\boxed{3}, \boxed{5}`, true, false, "a list is not a point: the order of boxes is not a tuple's"},

	{"matrices", `\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}`, `\left[\begin{array}{cc}1 & 2 \\ 3 & 4\end{array}\right]`, true, true, ""},
	{"matrices", `\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}`, `Special matrix: $ \left[\begin{array}{cc}1 & 2 \\3 & 4\end{array}\right] $`, true, true, ""},
	{"matrices", `\begin{bmatrix}1 & 0 \\ 0 & 1\end{bmatrix}`, `\left(\begin{array}{rr}1 & 0 \\ 0 & 1\end{array}\right)`, true, true, ""},
	{"matrices", `\begin{pmatrix} 1 \\ 2 \end{pmatrix}`, `\left[\begin{array}{c} 1 \\ 2 \end{array}\right]`, true, true, ""},
	{"matrices", `\begin{pmatrix} \frac12 & 0 \\ 0 & 1 \end{pmatrix}`, `\left[\begin{array}{cc} 0.5 & 0 \\ 0 & 1 \end{array}\right]`, true, true, ""},
	{"matrices", `\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}`, `\left[\begin{array}{cc}1 & 2 \\ 3 & 5\end{array}\right]`, false, false, ""},
	{"matrices", `\begin{pmatrix} 1 & 2 \end{pmatrix}`, `\left[\begin{array}{c} 1 \\ 2 \end{array}\right]`, false, false, ""},
	{"matrices", `\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}`, `\left[\begin{array}{cc}1 & 3 \\ 2 & 4\end{array}\right]`, false, false, ""},
	{"matrices", `\begin{pmatrix}1 & 2 & 3\end{pmatrix}`, `\left[\begin{array}{cc|c}1 & 2 & 3\end{array}\right]`, false, false, "an augmented matrix is not a matrix"},
}

// TestRecallCases: robust gives every pair its intended verdict, both ways.
func TestRecallCases(t *testing.T) {
	for _, c := range recallCases {
		if c.graders != c.want && c.why == "" {
			t.Errorf("%q vs %q departs from the graders without a reason", c.gold, c.answer)
		}
		for _, p := range [][2]string{{c.gold, c.answer}, {c.answer, c.gold}} {
			if got := RobustEquiv(p[0], p[1]); got != c.want {
				t.Errorf("%s: RobustEquiv(%q, %q) = %v, want %v", c.category, p[0], p[1], got, c.want)
			}
		}
	}
}

// TestRecallAgreement logs robust's agreement with the symbolic graders per
// category, the table in the README's grader section.
func TestRecallAgreement(t *testing.T) {
	var order []string
	cases, agree := map[string]int{}, map[string]int{}
	for _, c := range recallCases {
		if cases[c.category] == 0 {
			order = append(order, c.category)
		}
		cases[c.category]++
		if RobustEquiv(c.gold, c.answer) == c.graders {
			agree[c.category]++
		}
	}
	total, totalAgree := 0, 0
	for _, cat := range order {
		t.Logf("| %s | %d | %.1f%% |", cat, cases[cat], 100*float64(agree[cat])/float64(cases[cat]))
		total += cases[cat]
		totalAgree += agree[cat]
	}
	t.Log(fmt.Sprintf("| all | %d | %.1f%% |", total, 100*float64(totalAgree)/float64(total)))
}
