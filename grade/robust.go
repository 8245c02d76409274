package grade

import (
	"math/big"
	"math/cmplx"
	"regexp"
	"slices"
	"strings"
)

// Structure limits: nesting of tuples/sets and the number of elements.
const (
	maxFormDepth = 8
	maxElems     = 64
)

type formKind uint8

const (
	kindText     formKind = iota // normalised text: what could not be parsed
	kindChoice                   // multiple-choice letter A-E
	kindScalar                   // one number or expression
	kindEquation                 // lhs = rhs, compared as lhs - rhs up to a constant factor
	kindTuple                    // ordered, with its brackets: points, vectors, intervals
	kindSet                      // unordered: sets and \pm (repeats dropped), answer lists (repeats kept)
	kindUnion                    // unordered union of intervals
	kindMatrix                   // rows x cols
	kindRelation                 // f op 0, op "<" or "<=", f scaled like an equation
)

// form is an answer parsed into its structure.
type form struct {
	kind        formKind
	text        string // kindText, kindChoice
	open, close byte   // kindTuple
	elems       []form // kindTuple, kindSet, kindUnion, kindMatrix (row-major)
	cols        int    // kindMatrix
	sc          scalar // kindScalar, kindEquation, kindRelation
	op          string // kindRelation
	// alternatives marks the set that "a \pm b" expands to; inside a list
	// its members are members of the list.
	alternatives bool
	interval     bool // a kindTuple that solves an inequality
	// label is the name an answer list's element assigns ("x" of "x = 1"),
	// kept only when the list names two or more variables.
	label string
	// order is an answer list's elements as written, repeats included,
	// for the ordered judgement (RobustEquivOrdered).
	order []form
	// approx is the decimal that "a \approx d" states after its answer a.
	approx *form
	// eq is "y = f" read as the equation of a curve, for an assignment to
	// a variable y.
	eq *form
}

// scalar is a value: exact when a rational constant; otherwise its numeric
// values at the evaluation points (all equal when it has no variables),
// exact at the points where they are rational.
type scalar struct {
	exact *big.Rat
	inf   int // +1 or -1 for an infinity
	vals  [numPoints]complex128
	at    [numPoints]*big.Rat
	// offReal has bit k set where the value is undefined over the reals.
	offReal uint8
	// lossy marks an exact constant that float64 cannot hold (10^{40}+1,
	// 10^{-400}): only an exact value can equal it.
	lossy bool
	// places is the number of decimals of an answer written as a decimal
	// literal such as 0.0833333, 0 otherwise: it may round a value.
	places int
	// percent marks a number written with a percent sign: "50\%" is 50,
	// and also 0.5.
	percent bool
}

var (
	thousandsRe  = regexp.MustCompile(`^[+-]?\d{1,3}((,\d{3})+|( \d{3})+)(\.\d+)?$`)
	europeanRe   = regexp.MustCompile(`^[+-]?\d{1,3}(\.\d{3})+,\d+$`)
	decimalRe    = regexp.MustCompile(`^[+-]?\d*\.(\d+)$`)
	choiceRe     = regexp.MustCompile(`^\(?([A-E])\)?$`)
	baseNumRe    = regexp.MustCompile(`^\d+_\{?\d+\}?$`)
	assignmentRe = regexp.MustCompile(`^(\\[a-zA-Z]+|[a-zA-Z]{1,2})('*)(_\{?[a-zA-Z0-9]+\}?)?(\([a-z, ]*\))? ?(=|\\in) ?`)
	matrixRe     = regexp.MustCompile(`^\\begin\{([pbBv]?matrix|smallmatrix)\}(.*)\\end\{([pbBv]?matrix|smallmatrix)\}$`)
	arrayRe      = regexp.MustCompile(`^([(\[]?)\\begin\{array\}\{([a-z ]*)\}(.*)\\end\{array\}([)\]]?)$`)
	// zeroCommaRe is a decimal comma before a leading zero, "3,05": no
	// list element is written 05. Three digits are a thousands group.
	zeroCommaRe = regexp.MustCompile(`^[+-]?\d+,0(\d|\d{3,})$`)
	// unitCommaRe is a number with a comma and a currency or a unit, "3,75 €"
	// or "3,5 m": a list carries no unit, so the comma is a decimal one
	// unless three digits follow it. A unit word stands apart: "0,3a" is
	// the list 0 and 3a.
	unitCommaRe = regexp.MustCompile(`^(\\\$|€|£|¥)?\s*([+-]?\d+),(\d{1,2}|\d{4,})(\s*(?:€|£|¥|\\\$|\\(?:text|mathrm)\{\s*[a-zA-Z]+\s*\}(?:\^\{?[23]\}?)?|m²)|\s+[a-zA-Z]+(?:\^\{?[23]\}?)?)?$`)
)

// parseAnswer turns an extracted answer into its comparable form.
func parseAnswer(s string) form {
	s = strings.TrimSpace(finalAnswer(strings.TrimSpace(s)))
	if len(s) > maxAnswerBytes {
		return textForm(s)
	}
	raw := s
	percent := strings.HasSuffix(strings.TrimRight(s, "$. "), "%")
	if m := unitCommaRe.FindStringSubmatch(s); m != nil && (m[1] != "" || m[4] != "") {
		s = m[2] + "." + m[3]
	}
	s = cleanLatex(s)
	s = spellMeridiem(unwrapText(s))
	s = dropUnitWords(s)
	s = strings.TrimRight(s, ". ")
	s = bracketedUnit(s)
	f := parseForm(s, 0)
	if f.kind == kindText || f.kind == kindSet && slices.ContainsFunc(f.elems, func(e form) bool { return e.kind == kindText }) {
		if n, ok := sentenceNumber(raw); ok {
			f = parseForm(n, 0) // "... so the total is 10455 dollars."
		}
	}
	if f.kind == kindScalar {
		f.sc.percent = percent
	}
	return f
}

// approxChain reads "x = a \approx d": the answer is a, stating the
// decimal d; "x \approx d" answers d.
func approxChain(sides []string, depth int) form {
	d := parseForm(sides[len(sides)-1], depth+1)
	if isLabel(sides[0]) {
		return d
	}
	f := parseForm(sides[0], depth+1)
	if f.kind == kindScalar && d.kind == kindScalar && d.sc.places > 0 {
		f.approx = &d
	}
	return f
}

// finalAnswer is the answer a whole solution states, its boxes or its
// "the answer is" sentence, so that a gold solution can be compared; a
// bare answer is returned as it is.
func finalAnswer(s string) string {
	if !strings.Contains(s, `\boxed`) && !strings.Contains(s, `\fbox`) && !strings.Contains(asciiLower(s), "answer") && !strings.Contains(s, "$") && !strings.Contains(s, `\(`) && !strings.Contains(s, `\[`) {
		return s
	}
	if ans, ok := Extract(s, ExtractOptions{AnswerPhrase: true, LastMath: true}); ok {
		return ans
	}
	return s
}

func parseForm(s string, depth int) form {
	s = strings.TrimSpace(s)
	if depth > maxFormDepth || s == "" {
		return textForm(s)
	}
	if sides := splitTop(s, `\approx`); len(sides) > 1 && len(splitList(s)) == 1 {
		return approxChain(sides, depth)
	}
	rest, label := stripAssignment(s)
	f := parseValue(rest, depth)
	f.label = label
	if f.kind == kindScalar && label != "" && f.sc.varies() {
		f.eq = curve(s) // "x = 4" is a value, "y = 2x - 1" a line
	}
	return f
}

// curve reads an assignment "y = f" to one variable as the equation of a
// curve, so that it equals "f - y = 0"; nil for other labels.
func curve(s string) *form {
	sides := splitTop(s, "=")
	if len(sides) != 2 {
		return nil
	}
	if n, err := parseExpr(strings.TrimSpace(sides[0])); err != nil || n.op != opSym {
		return nil
	}
	eq := parseEquation(sides[0], sides[1], s)
	if eq.kind != kindEquation {
		return nil
	}
	return &eq
}

// parseValue parses an answer without its label.
func parseValue(s string, depth int) form {
	if thousandsRe.MatchString(s) {
		s = strings.NewReplacer(",", "", " ", "").Replace(s)
	} else if europeanRe.MatchString(s) {
		s = strings.NewReplacer(".", "", ",", ".").Replace(s) // 1.234,5 is 1234.5
	} else if zeroCommaRe.MatchString(s) {
		s = strings.Replace(s, ",", ".", 1)
	}
	if s == `\emptyset` {
		return form{kind: kindSet}
	}
	if m, ok := matrixArith(s); ok {
		s = m // a sum or product of matrices, written out
	}
	if m := matrixRe.FindStringSubmatch(s); m != nil && m[1] == m[3] {
		return parseMatrix(m[2], s, depth)
	}
	if m := arrayRe.FindStringSubmatch(s); m != nil && (m[1] == "") == (m[4] == "") {
		return parseMatrix(m[3], s, depth) // \left[\begin{array}{cc}...\end{array}\right]
	}
	if parts := splitTop(s, `\cup`); len(parts) > 1 {
		return parseCollection(kindUnion, parts, s, depth, false)
	}
	if inner, ok := setBraces(s); ok {
		if strings.TrimSpace(inner) == "" {
			return form{kind: kindSet}
		}
		f := parseCollection(kindSet, splitTop(inner, ","), s, depth, false)
		f.order = nil // a set written as one has no order
		return f
	}
	if len(s) >= 2 && isWholeGroup(s) {
		if parts := tupleParts(s[1 : len(s)-1]); len(parts) > 1 {
			f := parseCollection(kindTuple, parts, s, depth, true)
			f.open, f.close = s[0], s[len(s)-1]
			return f
		}
	}
	if t, ok := namedTuples(s); ok {
		s = t // "p=3,q=1; p=5,q=1" lists the points (3,1) and (5,1)
	}
	if parts := splitList(s); len(parts) > 1 {
		return parseCollection(kindSet, parts, s, depth, true) // roots are listed with multiplicity
	}
	if sides, ops := splitRelation(s); len(ops) > 0 {
		return parseRelation(sides, ops, s)
	}
	if plus, minus, ok := expandPlusMinus(s); ok {
		f := parseCollection(kindSet, []string{plus, minus}, s, depth, false)
		f.alternatives, f.order = f.kind == kindSet, nil
		return f
	}
	if m := choiceRe.FindStringSubmatch(s); m != nil {
		return form{kind: kindChoice, text: m[1]}
	}
	if baseNumRe.MatchString(s) {
		return textForm(strings.NewReplacer("{", "", "}", "").Replace(s))
	}
	if t, ok := sumText(s); ok {
		return textForm(t)
	}
	if hasWord(s) {
		return textForm(s)
	}
	if sides := splitTop(s, "="); len(sides) == 2 {
		if f, ok := trueValue(sides[0], sides[1]); ok {
			return f // "\cos(\pi) = -1" is -1
		}
		return parseEquation(sides[0], sides[1], s)
	}
	n, err := parseExpr(s)
	if err != nil {
		return textForm(s)
	}
	sc, ok := evalScalar(n)
	if !ok {
		return textForm(s)
	}
	if m := decimalRe.FindStringSubmatch(s); m != nil {
		sc.places = len(m[1])
	}
	return form{kind: kindScalar, sc: sc}
}

// stripAssignment drops "x = ", "f(x) = ", "\theta = " and "x \in " in front
// of a single answer, and labels such as "(p,q) = ", "|AB| = " or
// "V_1:V_2 = "; of a chain "x = 5+5+1 = 11" it keeps the last side. label
// is the name an "=" assigns, without spaces and braces.
func stripAssignment(s string) (rest, label string) {
	if sides := splitTop(s, "="); len(sides) > 1 && isLabel(sides[0]) && len(splitList(s)) == 1 {
		return strings.TrimSpace(sides[len(sides)-1]), labelName(sides[0])
	}
	m := assignmentRe.FindStringSubmatchIndex(s)
	if m == nil || m[1] == len(s) {
		return s, ""
	}
	if op := s[m[10]:m[11]]; op == "=" {
		if len(splitTop(s, "=")) != 2 {
			return s, "" // a chain such as "x = y = 5" or an equation
		}
		return s[m[1]:], labelName(s[:m[10]])
	} else if m[1] == m[11] && isASCIILetter(s[m[1]]) {
		return s, "" // "\in" was the start of a longer word such as \infty
	}
	return s[m[1]:], ""
}

// labelName normalises a name: "a_{1} " is "a_1".
func labelName(s string) string {
	return strings.NewReplacer(" ", "", "{", "", "}", "").Replace(s)
}

// labelWords are the control words a label may contain.
var labelWords = map[string]bool{"angle": true, "measuredangle": true, "overline": true, "overrightarrow": true,
	"vec": true, "hat": true, "bar": true, "triangle": true, "text": true,
	"det": true, "deg": true, "dim": true, "Pr": true}

// isLabel reports whether s names what an answer is rather than computing
// it: letters, subscripts, primes, brackets, bars, colons and a few control
// words such as \angle, but no digits or operators outside subscripts.
func isLabel(s string) bool {
	letters := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isASCIILetter(c):
			letters = true
		case c == '_':
			if i+1 < len(s) && s[i+1] == '{' {
				inner, ok := braceGroup(s[i+1:])
				if !ok {
					return false
				}
				i += len(inner) + 2
			} else {
				i++
			}
		case c == '\\':
			w := wordAt(s, i+1)
			if !labelWords[w] && !greek[w] {
				return false
			}
			letters = true
			i += len(w)
		case strings.IndexByte(" '(),:|{}", c) >= 0:
		default:
			return false
		}
	}
	return letters
}

// wordAt returns the run of ASCII letters starting at i.
func wordAt(s string, i int) string {
	j := i
	for j < len(s) && isASCIILetter(s[j]) {
		j++
	}
	return s[i:j]
}

// hasWord reports a run of three or more letters outside a control word:
// "Evelyn" or "even" is a word, not a product of variables.
func hasWord(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\':
			for i+1 < len(s) && isASCIILetter(s[i+1]) {
				i++
			}
			run = 0
		case isASCIILetter(s[i]):
			run++
			if run >= 3 {
				return true
			}
		default:
			run = 0
		}
	}
	return false
}

func textForm(s string) form {
	s = strings.ReplaceAll(s, " ", "")
	letters := s != ""
	for i := 0; i < len(s) && letters; i++ {
		letters = isASCIILetter(s[i])
	}
	if letters {
		s = strings.ToLower(s) // a word: "Even" and "even" are the same answer
	}
	return form{kind: kindText, text: s}
}

// parseCollection parses the parts of a tuple, set, list or union; repeats
// tells whether repeated elements count, as in tuples and answer lists.
func parseCollection(kind formKind, parts []string, raw string, depth int, repeats bool) form {
	if len(parts) > maxElems {
		return textForm(raw)
	}
	f := form{kind: kind, elems: make([]form, 0, len(parts))}
	for _, p := range parts {
		e := parseForm(p, depth+1)
		if kind == kindSet && e.alternatives {
			for _, m := range e.elems {
				m.label = e.label // "x = 1 \pm \sqrt2" assigns both to x
				f.elems = append(f.elems, m)
			}
		} else {
			f.elems = append(f.elems, e)
		}
	}
	if kind == kindTuple {
		return f
	}
	keepLabels(f.elems)
	// "x < -1 or x > 3" is the union of two intervals.
	if kind == kindSet && len(f.elems) > 1 && !slices.ContainsFunc(f.elems, func(e form) bool { return !e.isInterval() }) {
		kind, repeats = kindUnion, false
	}
	f.kind = kind
	if kind == kindSet && repeats {
		f.order = slices.Clone(f.elems)
	}
	if !repeats || restated(f.elems, parts) {
		unique := f.elems[:0]
		for _, e := range f.elems {
			if !slices.ContainsFunc(unique, e.sameElement) {
				unique = append(unique, e)
			}
		}
		f.elems = unique
	}
	// A set of one answer is that answer, so that "\{5\}" and "5" agree.
	if len(f.elems) == 1 && kind == kindSet {
		return f.elems[0]
	}
	return f
}

// restated reports a list that gives one value in different forms, as a
// solution that boxes "15\frac{39}{40}, \frac{639}{40}" does: it states the
// value once. A value written the same way twice ("2, 2") is a repeated
// root.
func restated(elems []form, parts []string) bool {
	if len(elems) != len(parts) {
		return false
	}
	spellings := map[string]bool{}
	for i, e := range elems {
		spelling := strings.ReplaceAll(parts[i], " ", "")
		if !e.sameElement(elems[0]) || spellings[spelling] {
			return false
		}
		spellings[spelling] = true
	}
	return true
}

// keepLabels keeps the labels of a list that names two or more variables
// ("x = 1, y = 2"), where they tell which value is which, and drops them
// elsewhere: "x = 2, x = 3" are the roots 2 and 3.
func keepLabels(elems []form) {
	named := elems[0].label != ""
	distinct := false
	for _, e := range elems {
		named = named && e.label != ""
		distinct = distinct || e.label != elems[0].label
	}
	if named && distinct {
		return
	}
	for i := range elems {
		elems[i].label = ""
	}
}

func parseMatrix(body, raw string, depth int) form {
	f := form{kind: kindMatrix}
	for _, cells := range matrixCells(body) {
		if f.cols == 0 {
			f.cols = len(cells)
		}
		if len(cells) != f.cols || len(f.elems)+len(cells) > maxElems*4 {
			return textForm(raw)
		}
		for _, c := range cells {
			f.elems = append(f.elems, parseForm(c, depth+1))
		}
	}
	return f
}

func parseEquation(lhs, rhs, raw string) form {
	l, errL := parseExpr(lhs)
	r, errR := parseExpr(rhs)
	if errL != nil || errR != nil {
		return textForm(raw)
	}
	diff := &node{op: opSub, args: []*node{l, r}}
	sc, ok := evalScalar(diff)
	if !ok || sc.inf != 0 {
		return textForm(raw)
	}
	// An equation is the same after scaling both sides.
	return form{kind: kindEquation, sc: sc.scaled(false)}
}

// scaled divides the values by the first one that is not zero, or by its
// modulus, which keeps the direction of a relation.
func (sc scalar) scaled(modulus bool) scalar {
	sc.exact = nil
	for k, v := range sc.vals {
		if sc.at[k] != nil && sc.at[k].Sign() == 0 || sc.at[k] == nil && cmplx.Abs(v) <= absTol {
			continue
		}
		pivot, exactPivot := v, sc.at[k]
		if modulus {
			pivot = complex(cmplx.Abs(v), 0)
			if exactPivot != nil {
				exactPivot = new(big.Rat).Abs(exactPivot)
			}
		}
		for j := range sc.vals {
			sc.vals[j] /= pivot
			if sc.at[j] != nil && exactPivot != nil {
				sc.at[j] = new(big.Rat).Quo(sc.at[j], exactPivot)
			} else {
				sc.at[j] = nil
			}
		}
		break
	}
	return sc
}

// evalScalar evaluates an expression exactly when it is a rational
// constant, else at every evaluation point; ok is false where a numeric
// comparison could not decide: a value that is not finite, or lost
// precision (evaluator.lossy).
func evalScalar(n *node) (scalar, bool) {
	var sc scalar
	switch {
	case n.op == opInf:
		sc.inf = 1
		return sc, true
	case n.op == opNeg && n.args[0].op == opInf:
		sc.inf = -1
		return sc, true
	}
	vary := hasVars(n)
	for k := range sc.vals {
		if k > 0 && !vary {
			sc.vals[k], sc.at[k] = sc.vals[0], sc.at[0]
			continue
		}
		e := evaluator{k: k}
		v := e.eval(n)
		if !vary && v.r != nil {
			return constScalar(v.r), true
		}
		if v.r == nil && (e.lossy || !finite(v.c)) || v.r != nil && !fitsFloat(v.r, false) {
			return sc, false
		}
		sc.vals[k], sc.at[k] = v.c, v.r
		if v.r != nil {
			sc.vals[k] = ratComplex(v.r)
		}
		if e.offReal {
			sc.offReal |= 1 << k
		}
	}
	return sc, true
}

// constScalar is the scalar of a rational constant.
func constScalar(r *big.Rat) scalar {
	sc := scalar{exact: r, lossy: !fitsFloat(r, true)}
	c := ratComplex(r)
	for k := range sc.vals {
		sc.vals[k], sc.at[k] = c, r
	}
	return sc
}
