package grade

import (
	"strings"
	"testing"
)

// recallCases44 are pairs written for the categories where symbolic graders said "equal"
// and robust did not (issue 44), each with near misses that must stay unequal, and the
// disputable kinds with robust's decision (README, Grading).
var recallCases44 = []struct {
	category, gold, answer string
	want                   bool
}{
	{"free text", `10455`, `… so the total cost is 10455 dollars.`, true},
	{"free text", `34`, `Final Answer: the largest n is 34.`, true},
	{"free text", `10455`, `We add them up. So the total cost is 10,455 dollars.`, true},
	{"free text", `34`, `Final Answer: the largest n is 35.`, false},
	{"free text", `5`, `The answer is not 5.`, false},
	{"free text", `5`, `She isn't 5 years old.`, false},
	{"free text", `3`, `There are 2 solutions, 3 and 5.`, false},
	{"free text", `12`, `It took 12 minutes. Then 3 more passed.`, false},
	{"free text", `2`, `The value of x2 is large.`, false},
	{"free text", `3`, `We meet on Monday at 3 pm.`, false},

	{"several boxes", `{4, 7}`, `\boxed{4} and \boxed{7}`, true},
	{"several boxes", `1, 2`, `\boxed{1},\boxed{2}`, true},
	{"several boxes", `{4, 7}`, `\boxed{4} and \boxed{8}`, false},
	{"several boxes", `{4, 7}`, `\boxed{7}`, false},
	{"several boxes", `{4, 4, 7}`, `\boxed{4} and \boxed{7}`, true}, // a set has no repeats
	{"several boxes", `{0, 1}`, `{1,000}`, false},                   // thousands, not a set

	{"joined lists", `(5,2), (2,5)`, `(2,5) or (5,2)`, true},
	{"joined lists", `(3,1),(5,1)`, `p=3,q=1; p=5,q=1`, true},
	{"joined lists", `1, 2, 3`, `1; 2 and 3`, true},
	{"joined lists", `(3,1),(5,1)`, `p=1,q=3; p=1,q=5`, false},
	{"joined lists", `(3,1),(5,1)`, `p=3,q=1; q=1,p=5`, false}, // names in another order
	{"joined lists", `(5,2), (2,5)`, `(2,5) or (5,3)`, false},

	{"named values", `(2, 9)`, `a=2, b=9`, true},
	{"named values", `(1, 2)`, `x = 1, y = 2`, true},
	{"named values", `(2, 9)`, `a=9, b=2`, false},
	{"named values", `(2, 9)`, `b=9, a=2`, false}, // in the order written
	{"named values", `[2, 9]`, `a=2, b=9`, false}, // an interval is no point
	{"named values", `2, 9`, `a=2, b=9`, false},   // a bare list may list roots in any order

	{"plus-minus", `-7, 7`, `\pm 7`, true},
	{"plus-minus", `-7, 7`, `x = \pm 7`, true},
	{"plus-minus", `7`, `\pm 7`, false},
	{"plus-minus", `-7, 7, 7`, `\pm 7`, false},

	{"brackets", `60`, `[60]`, true},
	{"brackets", `60`, `[ 60 ]`, true},
	{"brackets", `60`, `[60 degrees]`, true},
	{"brackets", `60`, `[61 degrees]`, false},
	{"brackets", `60`, `[60, 70 degrees]`, false},

	{"true equation", `-1`, `\cos(\pi) = -1`, true},
	{"true equation", `4`, `\det(A) = 4`, true},
	{"true equation", `\frac12`, `\sin(\frac{\pi}{6}) = 0.5`, true},
	{"true equation", `1`, `\cos(\pi) = 1`, false}, // a false statement is no value
	{"true equation", `5`, `\det(A) = 4`, false},
	{"true equation", `120`, `5!=120`, false}, // may be 5 \ne 120
	{"true equation", `11a+c`, `7 = 11a+c`, false},

	{"matrix arithmetic", `\begin{pmatrix}2&2\\3&5\end{pmatrix}`, `\begin{pmatrix}1&2\\3&4\end{pmatrix}+\begin{pmatrix}1&0\\0&1\end{pmatrix}`, true},
	{"matrix arithmetic", `\begin{pmatrix}2&1\\4&3\end{pmatrix}`, `\begin{pmatrix}1&2\\3&4\end{pmatrix}\begin{pmatrix}0&1\\1&0\end{pmatrix}`, true},
	{"matrix arithmetic", `\begin{pmatrix}11\\ 27\end{pmatrix}`, `\begin{bmatrix}1&2\\3&4\end{bmatrix} \cdot \begin{bmatrix}5\\3\end{bmatrix}`, true},
	{"matrix arithmetic", `\begin{pmatrix}0&2\\3&3\end{pmatrix}`, `\begin{pmatrix}1&2\\3&4\end{pmatrix}-\begin{pmatrix}1&0\\0&1\end{pmatrix}`, true},
	{"matrix arithmetic", `\begin{pmatrix}3&4\\1&2\end{pmatrix}`, `\begin{pmatrix}1&2\\3&4\end{pmatrix}\begin{pmatrix}0&1\\1&0\end{pmatrix}`, false}, // the product does not commute
	{"matrix arithmetic", `\begin{pmatrix}2&2\\3&5\end{pmatrix}`, `\begin{pmatrix}1&2\\3&4\end{pmatrix}+\begin{pmatrix}1&0\end{pmatrix}`, false},
	{"matrix arithmetic", `\begin{pmatrix}1&2\\3&4\end{pmatrix}`, `\begin{pmatrix}1&2\\3&4\end{pmatrix}+\begin{pmatrix}1&0\\0&1\end{pmatrix}`, false},

	{"absolute inequalities", `[-3,-2] \cup [2,3]`, `2 \le |y| \le 3`, true},
	{"absolute inequalities", `(-3,-2] \cup [2,3)`, `2 \le |y| < 3`, true},
	{"absolute inequalities", `(0, 2)`, `0 < g(t) < 2`, true},
	{"absolute inequalities", `[-3,-2] \cup [2,3]`, `3 \ge |y| \ge 2`, true},
	{"absolute inequalities", `[2,3]`, `2 \le |y| \le 3`, false},
	{"absolute inequalities", `(-3,-2) \cup (2,3)`, `2 \le |y| \le 3`, false},
	{"absolute inequalities", `(0, 2]`, `0 < g(t) < 2`, false},
	{"absolute inequalities", `[-3,3]`, `0 \le |y| \le 3`, false}, // left unread, not a wrong union

	{"semicolon tuples", `(1,2,3)`, `(1;2;3)`, true},
	{"semicolon tuples", `(1,2,3)`, `(1;3;2)`, false},
	{"semicolon tuples", `\{1,2,3\}`, `(1;2;3)`, false},

	{"commuting sums", `\sum_k a_k b_{n-k}`, `\sum_k b_{n-k} a_k`, true},
	{"commuting sums", `\sum_{k=0}^{n} a_k b_{n-k}`, `\sum_{k=0}^{n} b_{n-k}a_k`, true},
	{"commuting sums", `\sum_k a_k b_{n-k}`, `\sum_k a_{n-k} b_k`, false},
	{"commuting sums", `\sum_k a_k b_{n-k}`, `\sum_j b_{n-k} a_k`, false},

	// The disputable kinds: robust keeps refusing each (README, Grading).
	{"disputable", `3.14`, `3,14`, false},     // a decimal comma is ambiguous with a list
	{"disputable", `\frac23`, `0.67`, false},  // a gold is not rounded to the answer's places
	{"disputable", `(2,5)`, `\{2,5\}`, false}, // a set is not a tuple
	{"disputable", `f(x)`, `f(t)`, false},     // a function's variable is part of the answer
}

// TestRecallCases44 checks every category's pairs both ways, and that equal pairs share
// a key except where the package documentation says they keep their own (a named list
// against a point).
func TestRecallCases44(t *testing.T) {
	categories := map[string][2]int{}
	for _, c := range recallCases44 {
		n := categories[c.category]
		if c.want {
			n[0]++
		} else {
			n[1]++
		}
		categories[c.category] = n
		for _, p := range [][2]string{{c.gold, c.answer}, {c.answer, c.gold}} {
			if got := RobustEquiv(p[0], p[1]); got != c.want {
				t.Errorf("%s: RobustEquiv(%q, %q) = %v, want %v", c.category, p[0], p[1], got, c.want)
			}
		}
		named := c.category == "named values"
		if ka, kb := Key(c.gold), Key(c.answer); c.want && !named && ka != kb || !c.want && ka == kb {
			t.Errorf("%s: %q and %q (equal %v) have keys %q and %q", c.category, c.gold, c.answer, c.want, ka, kb)
		}
	}
	for cat, n := range categories {
		if cat != "disputable" && (n[0] == 0 || n[1] == 0) && !strings.HasPrefix(cat, "disput") {
			t.Errorf("category %s has %d equal and %d unequal pairs; want both", cat, n[0], n[1])
		}
	}
}
