package grade

// Answers written out in ways that name one value: a sentence that ends on it, a list of
// named values grouped by semicolons, a sum or product of matrix literals, an inequality
// around |y| or g(t), a true equation of constants, a sum whose summand is a product.

import (
	"regexp"
	"slices"
	"strings"
)

var (
	// sentenceNumberRe is a number in prose, its thousands grouped or not: "10,455",
	// "-3.5".
	sentenceNumberRe = regexp.MustCompile(`-?\d+(?:,\d{3})*(?:\.\d+)?`)
	// negations make a sentence's number what the answer is not: "the answer is not 5".
	negations = map[string]bool{"not": true, "no": true, "never": true, "cannot": true, "isn't": true,
		"aren't": true, "neither": true, "nor": true, "except": true, "besides": true}
	// matrixLitRe is one matrix literal inside a longer answer.
	matrixLitRe = regexp.MustCompile(`\\begin\{([pbBv]?matrix)\}(.*?)\\end\{([pbBv]?matrix)\}`)
	// absMiddleRe is the middle of "2 \le |y| \le 3"; funcMiddleRe that of "0 < g(t) < 2".
	absMiddleRe  = regexp.MustCompile(`^\|\s*([a-zA-Z])\s*\|$`)
	funcMiddleRe = regexp.MustCompile(`^([a-zA-Z])\(\s*[a-zA-Z]\s*\)$`)
	// sumRe is "\sum_k summand" with an optional upper limit; sumFactorRe one factor of
	// the summand: a letter with an optional subscript and power.
	sumRe       = regexp.MustCompile(`^\\sum_(\{[^{}]*\}|[a-zA-Z0-9])(\^(?:\{[^{}]*\}|[a-zA-Z0-9]))?\s*(.+)$`)
	sumFactorRe = regexp.MustCompile(`^[a-zA-Z](?:_(?:\{[^{}]*\}|[a-zA-Z0-9]))?(?:\^(?:\{[^{}]*\}|[a-zA-Z0-9]))?`)
)

// maxMatrixOperands bounds a written-out matrix computation.
const maxMatrixOperands = 4

// sentenceNumber is the answer of a sentence that states one number and nothing marks:
// "... so the total cost is 10455 dollars." is 10455, as Math-Verify reads plain text. The
// final sentence must hold words, exactly one number and no negation; ok is false
// otherwise.
func sentenceNumber(s string) (string, bool) {
	s = strings.TrimRight(strings.TrimSpace(s), ".!")
	if i := max(strings.LastIndex(s, ". "), strings.LastIndex(s, "\n")); i >= 0 {
		s = s[i+1:]
	}
	if !hasWord(s) || strings.ContainsAny(s, `\$^_{}=<>`) {
		return "", false
	}
	for _, w := range strings.FieldsFunc(asciiLower(s), func(r rune) bool { return r == ' ' || r == ',' || r == ':' || r == ';' }) {
		if negations[w] || strings.HasSuffix(w, "n't") || isMeridiem(w) {
			return "", false
		}
	}
	nums := sentenceNumberRe.FindAllStringIndex(s, 2)
	if len(nums) != 1 {
		return "", false
	}
	at := nums[0]
	if at[0] > 0 && isASCIILetter(s[at[0]-1]) || at[1] < len(s) && (isASCIILetter(s[at[1]]) || s[at[1]] == '/' || s[at[1]] == ':') {
		return "", false // part of a name such as x2, a fraction or a time
	}
	return strings.ReplaceAll(s[at[0]:at[1]], ",", ""), true
}

// namedTuples reads "p=3,q=1; p=5,q=1", groups of values named in the same order, as the
// points "(3,1), (5,1)"; ok is false for anything else.
func namedTuples(s string) (string, bool) {
	groups := splitTop(s, ";")
	if len(groups) < 2 || len(groups) > maxElems {
		return "", false
	}
	var names []string
	tuples := make([]string, len(groups))
	for g, group := range groups {
		parts := splitTop(group, ",")
		if len(parts) < 2 || g > 0 && len(parts) != len(names) {
			return "", false
		}
		values := make([]string, len(parts))
		for i, p := range parts {
			rest, label := stripAssignment(strings.TrimSpace(p))
			if label == "" || g == 0 && slices.Contains(names, label) || g > 0 && names[i] != label {
				return "", false
			}
			if g == 0 {
				names = append(names, label)
			}
			values[i] = rest
		}
		tuples[g] = "(" + strings.Join(values, ", ") + ")"
	}
	return strings.Join(tuples, ", "), true
}

// namedPoint reports a list of values named by two or more variables against a point
// of the same values in the order written: "a=2, b=9" is "(2, 9)". Against a bare list
// ("2, 9", which may list roots in any order) it stays unequal.
func namedPoint(a, b form) bool {
	if b.kind == kindSet {
		a, b = b, a
	}
	if a.kind != kindSet || b.kind != kindTuple || b.open != '(' || b.close != ')' || b.isInterval() || len(a.order) != len(b.elems) {
		return false
	}
	for i, e := range a.order {
		if e.label == "" || !e.equal(b.elems[i]) {
			return false
		}
	}
	return true
}

// matrixCells splits a matrix body into its rows' cells; a trailing row break is no row.
func matrixCells(body string) [][]string {
	rows := strings.Split(body, `\\`)
	if len(rows) > 1 && strings.TrimSpace(rows[len(rows)-1]) == "" {
		rows = rows[:len(rows)-1]
	}
	cells := make([][]string, len(rows))
	for i, row := range rows {
		cells[i] = strings.Split(row, "&")
	}
	return cells
}

// rectangular reports cells with one row length, and that length.
func rectangular(cells [][]string) (int, bool) {
	for _, row := range cells {
		if len(row) != len(cells[0]) {
			return 0, false
		}
	}
	return len(cells[0]), true
}

// matrixArith writes out a sum, difference or product of matrix literals,
// "\begin{pmatrix}..\end{pmatrix} + \begin{pmatrix}..\end{pmatrix}", as the one matrix it
// computes, each cell the expression of its value; ok is false for anything else,
// operators mixed or shapes that do not fit.
func matrixArith(s string) (string, bool) {
	locs := matrixLitRe.FindAllStringSubmatchIndex(s, maxMatrixOperands+1)
	if len(locs) < 2 || len(locs) > maxMatrixOperands || strings.TrimSpace(s[:locs[0][0]]) != "" || strings.TrimSpace(s[locs[len(locs)-1][1]:]) != "" {
		return "", false
	}
	acc := matrixCells(s[locs[0][4]:locs[0][5]])
	op := ""
	for i, loc := range locs {
		if s[loc[2]:loc[3]] != s[loc[6]:loc[7]] {
			return "", false
		}
		if i == 0 {
			continue
		}
		between := strings.TrimSpace(s[locs[i-1][1]:loc[0]])
		if between == "" {
			between = "*"
		}
		if op != "" && between != op || between != "+" && between != "-" && between != "*" {
			return "", false
		}
		op = between
		var ok bool
		if acc, ok = combine(acc, matrixCells(s[loc[4]:loc[5]]), op); !ok {
			return "", false
		}
	}
	rows := make([]string, len(acc))
	for i, row := range acc {
		rows[i] = strings.Join(row, " & ")
	}
	return `\begin{pmatrix}` + strings.Join(rows, ` \\ `) + `\end{pmatrix}`, true
}

// combine is a op b for matrices of cells: + and - cell by cell, * the matrix product.
func combine(a, b [][]string, op string) ([][]string, bool) {
	ac, okA := rectangular(a)
	bc, okB := rectangular(b)
	if !okA || !okB || len(a)*max(ac, bc) > maxElems*4 {
		return nil, false
	}
	if op != "*" {
		if len(a) != len(b) || ac != bc {
			return nil, false
		}
		out := make([][]string, len(a))
		for i := range a {
			out[i] = make([]string, ac)
			for j := range a[i] {
				out[i][j] = "(" + a[i][j] + ")" + op + "(" + b[i][j] + ")"
			}
		}
		return out, true
	}
	if ac != len(b) {
		return nil, false
	}
	out := make([][]string, len(a))
	for i := range a {
		out[i] = make([]string, bc)
		for j := 0; j < bc; j++ {
			terms := make([]string, ac)
			for k := 0; k < ac; k++ {
				terms[k] = "(" + a[i][k] + ")*(" + b[k][j] + ")"
			}
			out[i][j] = strings.Join(terms, "+")
			if len(out[i][j]) > maxAnswerBytes {
				return nil, false // a chain of products grows each cell: bounded as an answer is
			}
		}
	}
	return out, true
}

// absChain reads "a \le |y| \le b" with constants 0 < a < b as the union of the two
// intervals it solves to, [-b, -a] \cup [a, b]; ok is false for anything else.
func absChain(sides, ops []string) (string, bool) {
	if len(ops) != 2 || absMiddleRe.FindStringSubmatch(strings.TrimSpace(sides[1])) == nil || ops[0][0] != ops[1][0] {
		return "", false
	}
	lo, hi := strings.TrimSpace(sides[0]), strings.TrimSpace(sides[2])
	loClosed, hiClosed := strings.HasSuffix(ops[0], "="), strings.HasSuffix(ops[1], "=")
	if ops[0][0] == '>' {
		lo, hi, loClosed, hiClosed = hi, lo, hiClosed, loClosed
	}
	l, okL := constValue(lo)
	h, okH := constValue(hi)
	if !okL || !okH || !(l > 0) || !(l < h) {
		return "", false
	}
	brackets := func(closed bool, open, shut string) string {
		if closed {
			return shut
		}
		return open
	}
	neg := brackets(hiClosed, "(", "[") + "-(" + hi + "), -(" + lo + ")" + brackets(loClosed, ")", "]")
	pos := brackets(loClosed, "(", "[") + lo + ", " + hi + brackets(hiClosed, ")", "]")
	return neg + ` \cup ` + pos, true
}

// constValue is the real value of a constant expression.
func constValue(s string) (float64, bool) {
	n, err := parseExpr(s)
	if err != nil || hasVars(n) {
		return 0, false
	}
	sc, ok := evalScalar(n)
	if !ok || sc.inf != 0 || imag(sc.vals[0]) != 0 {
		return 0, false
	}
	return real(sc.vals[0]), true
}

// functionMiddle reads the middle of a chain "0 < g(t) < 2" as the one variable g.
func functionMiddle(sides []string) []string {
	if len(sides) != 3 {
		return sides
	}
	if m := funcMiddleRe.FindStringSubmatch(strings.TrimSpace(sides[1])); m != nil {
		sides = slices.Clone(sides)
		sides[1] = m[1]
	}
	return sides
}

// trueValue reads "\cos(\pi) = -1", a true equation between constants, as its value;
// ok is false where a side has a variable or the sides differ.
func trueValue(lhs, rhs string) (form, bool) {
	l, errL := parseExpr(lhs)
	r, errR := parseExpr(rhs)
	if errL != nil || errR != nil || hasVars(l) || hasVars(r) || strings.HasSuffix(strings.TrimSpace(lhs), "!") {
		return form{}, false // "5!=120" may be 5 \ne 120
	}
	ls, okL := evalScalar(l)
	rs, okR := evalScalar(r)
	if !okL || !okR || !ls.equal(rs) {
		return form{}, false
	}
	if m := decimalRe.FindStringSubmatch(strings.TrimSpace(rhs)); m != nil {
		rs.places = len(m[1])
	}
	return form{kind: kindScalar, sc: rs}, true
}

// sumText is the text of "\sum_k a_k b_{n-k}" with the summand's factors in one order,
// since they commute: "\sum_k b_{n-k} a_k" gets the same; ok is false unless the summand
// is a product of letters with subscripts and powers.
func sumText(s string) (string, bool) {
	m := sumRe.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	var factors []string
	for rest := strings.TrimSpace(m[3]); rest != ""; rest = strings.TrimLeft(rest, " *") {
		f := sumFactorRe.FindString(rest)
		if f == "" || len(factors) == maxElems {
			return "", false
		}
		factors = append(factors, strings.ReplaceAll(f, " ", ""))
		rest = rest[len(f):]
	}
	slices.Sort(factors)
	return `\sum_` + strings.ReplaceAll(m[1]+m[2], " ", "") + " " + strings.Join(factors, "*"), true
}
