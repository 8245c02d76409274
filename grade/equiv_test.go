package grade

import (
	"testing"
)

// equivCase is one pair of extracted answers with the verdict of each mode
// and the reason for it.
type equivCase struct {
	a, b           string
	strict, robust bool
	why            string
}

// equivCases are written by hand. Strict verdicts follow the reference's
// strip_string step by step; robust verdicts are what a careful grader says.
var equivCases = []equivCase{
	// Identity and plain integers.
	{"5", "5", true, true, "identical integers"},
	{"5", "6", false, false, "different integers"},
	{"-3", "-3", true, true, "identical negative integers"},
	{"-3", "3", false, false, "sign matters"},
	{"+3", "3", false, true, "explicit plus sign is the same number; strict compares strings"},
	{"0", "-0", false, true, "negative zero is zero"},
	{"12", "1 2", true, false, "strict removes spaces; robust refuses to multiply two literals"},
	{" 7 ", "7", true, true, "surrounding spaces are removed by both"},
	{"7\n", "7", true, true, "newlines are removed by both"},

	// Leading and trailing zeros, decimals.
	{"025", "25", false, true, "AIME leading zero: strict keeps it, robust reads the number"},
	{"007", "7", false, true, "two leading zeros"},
	{"27.0", "27", false, true, "AMC float gold: trailing .0"},
	{"18.00", "18", false, true, "trailing zeros after the point"},
	{"3.50", "3.5", false, true, "trailing zero in the decimals"},
	{"0.5", "\\frac{1}{2}", true, true, "strict special-cases exactly 0.5"},
	{".5", "\\frac{1}{2}", true, true, "strict prefixes 0 to .5 and then maps 0.5"},
	{"0.50", "\\frac12", false, true, "strict maps only the exact string 0.5"},
	{"0.25", "\\frac{1}{4}", false, true, "strict has no general decimal-to-fraction rule"},
	{"0.75", "3/4", false, true, "decimal against a slash fraction"},
	{".35625", "0.35625", true, true, "strict prefixes the missing leading zero"},
	{"0.3", "0.33", false, false, "different decimals"},
	{"0.333", "\\frac{1}{3}", false, false, "a rounded decimal is not the exact fraction"},
	{"1.5", "1.50000000001", false, false, "exact rationals are compared exactly"},
	{".0000672", "6.72 \\times 10^{-5}", false, true, "scientific notation with \\times 10^{}"},
	{"1.5e3", "1500", false, true, "e-notation"},
	{"2E-2", "0.02", false, true, "capital E notation with a negative exponent"},
	{"1e400", "1", false, false, "an over-long exponent does not parse and stays text"},

	// Thousands separators.
	{"1,000", "1000", false, true, "thousands comma"},
	{"10,\\!080", "10080", false, true, "LaTeX thin-space digit grouping"},
	{"10,\\!080", "10,080", true, true, "strict removes \\! and keeps the comma, so both read 10,080"},
	{"11,\\! 111,\\! 111,\\! 100", "11111111100", false, true, "several groups with spaces after the thin space"},
	{"1{,}000", "1000", false, true, "braced comma grouping"},
	{"58,500", "58500", false, true, "MATH500 gold with a comma"},
	{"1,000,000", "10^6", false, true, "millions against a power of ten"},
	{"1,000.5", "1000.5", false, true, "grouping with decimals"},
	{"1,00", "100", false, false, "a group of two digits is a list, not a thousands separator"},
	{"100,200", "100200", false, true, "documented: three-digit groups read as one number"},

	// Fractions.
	{"\\frac{1}{2}", "\\dfrac{1}{2}", true, true, "dfrac is frac"},
	{"\\tfrac{3}{4}", "\\frac34", true, true, "tfrac and the unbraced form"},
	{"\\frac12", "\\frac{1}{2}", true, true, "strict fix_fracs braces two characters"},
	{"\\frac1{72}", "\\frac{1}{72}", true, true, "fix_fracs with a braced denominator"},
	{"\\frac 34", "\\frac{3}{4}", true, true, "space before the digits; strict removes spaces first"},
	{"\\frac9{19}", "9/19", true, true, "slash form becomes a frac in strict when both are integers"},
	{"1/2", "\\frac{1}{2}", true, true, "fix_a_slash_b"},
	{"-1/2", "\\frac{-1}{2}", true, true, "negative numerator is a canonical integer"},
	{"-1/2", "-\\frac{1}{2}", false, true, "minus outside the frac"},
	{"2/4", "1/2", false, true, "unreduced fraction"},
	{"\\frac{2}{4}", "\\frac{1}{2}", false, true, "unreduced frac"},
	{"03/4", "3/4", false, true, "strict leaves non-canonical integers alone"},
	{"\\frac{6}{8}", "0.75", false, true, "fraction against decimal"},
	{"\\frac{10}{11}", "\\frac{11}{10}", false, false, "swapped numerator and denominator"},
	{"\\frac{1}{3}", "0.3333333333", false, true, "a ten-digit decimal is 1/3 to its precision and within 1e-6"},
	{"1\\frac{4}{5}", "\\frac{9}{5}", false, true, "mixed number"},
	{"137 \\frac{1}{2}", "137.5", false, true, "mixed number with a space (MATH500 gold)"},
	{"-2\\frac{1}{2}", "-2.5", false, true, "negative mixed number"},
	{"\\frac{a}{b}", "a/b", false, true, "symbolic fraction against slash; strict only converts integers"},
	{"\\frac{11+9a}{20}", "\\frac{9a+11}{20}", false, true, "commuted numerator (MATH500 gold)"},
	{"\\frac{1}{0}", "\\frac{2}{0}", false, false, "division by zero does not evaluate; compared as text"},
	{"\\frac{1}{0}", "\\frac{1}{0}", true, true, "but is equal to itself"},

	// Square roots and symbolic constants.
	{"\\sqrt{2}", "\\sqrt2", true, true, "fix_sqrt braces one character"},
	{"\\sqrt{12}", "2\\sqrt{3}", false, true, "simplified radical"},
	{"2\\sqrt{3}", "2\\sqrt3", true, true, "both forms of the same radical"},
	{"\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}", false, true, "rationalised denominator"},
	{"\\frac{\\sqrt{21}}{5}", "\\sqrt{21}/5", false, true, "frac against slash with a radical"},
	{"\\sqrt{9}", "3", false, true, "perfect square root is exact"},
	{"\\sqrt{\\frac{9}{4}}", "1.5", false, true, "root of a rational perfect square"},
	{"\\sqrt[3]{-8}", "-2", false, true, "real cube root of a negative number"},
	{"\\sqrt[3]{16}", "2\\sqrt[3]{2}", false, true, "cube root simplified"},
	{"\\sqrt{2}", "1.414", false, false, "a rounded decimal is not the radical"},
	{"\\sqrt{2}", "\\sqrt{3}", false, false, "different radicals"},
	{"11\\sqrt2", "11\\sqrt{2}", true, true, "MATH500 gold written two ways"},
	{"3 \\sqrt{5}", "\\sqrt{45}", false, true, "coefficient moved inside the root"},
	{"\\frac{3\\sqrt{3}}{4}", "\\frac{3}{4}\\sqrt{3}", false, true, "coefficient out of the fraction"},
	{"1+2\\sqrt{3}", "2\\sqrt{3}+1", false, true, "commuted sum"},
	{"11 \\sqrt{5} + 11", "11(\\sqrt5+1)", false, true, "factored form"},
	{"\\pi", "\\pi", true, true, "the constant"},
	{"\\frac{\\pi}{2}", "\\pi/2", false, true, "frac against slash with pi"},
	{"12\\pi", "12 \\pi", true, true, "strict removes spaces"},
	{"12\\pi", "\\pi \\cdot 12", false, true, "explicit product in the other order"},
	{"8 \\pi", "8\\pi", true, true, "space before pi"},
	{"18+2\\pi", "2\\pi+18", false, true, "commuted sum with pi"},
	{"\\frac{20000}{\\pi}", "20000/\\pi", false, true, "slash division by pi"},
	{"-\\frac{\\pi}{6}", "-\\pi/6", false, true, "negative angle"},
	{"\\pi", "3.14159", false, true, "pi cut to five decimals, within 1e-6 relatively"},
	{"\\pi", "3.14", false, false, "pi to two decimals is too rough"},
	{"2\\pi", "\\pi", false, false, "different multiples"},
	{"\\pi^2", "\\pi \\cdot \\pi", false, true, "power against product"},
	{"\\frac{\\pi^2}{8}", "\\frac{1}{8}\\pi^2", false, true, "coefficient order"},
	{"\\sin\\frac{\\pi}{6}", "\\frac12", false, true, "trigonometric value"},
	{"\\cos 0", "1", false, true, "function without brackets"},
	{"\\log_2 8", "3", false, true, "logarithm with a base"},
	{"\\ln 1", "0", false, true, "natural logarithm"},
	{"5!", "120", false, true, "factorial"},
	{"\\binom{5}{2}", "10", false, true, "binomial coefficient"},
	{"2^{10}", "1024", false, true, "integer power"},
	{"2^{-1}", "0.5", false, true, "negative exponent"},
	{"2^10", "1024", false, true, "an unbraced multi-digit exponent means what the writer meant"},

	// Variables and polynomials.
	{"x^2+2x+1", "(x+1)^2", false, true, "expanded square"},
	{"x^2+2x+1", "(x-1)^2", false, false, "wrong sign inside the square"},
	{"2k", "2k", true, true, "same monomial"},
	{"2k", "k2", false, true, "coefficient after the variable"},
	{"2k+2", "2(k+1)", false, true, "factored"},
	{"-13x+3", "3-13x", false, true, "commuted linear polynomial"},
	{"15x - 80", "5(3x-16)", false, true, "common factor"},
	{"6r^2-4r-24", "2(3r^2-2r-12)", false, true, "quadratic with a factor"},
	{"3R^2", "3r^2", false, false, "variables are case-sensitive"},
	{"x^3+3x-6", "x^3+3x+6", false, false, "different constant term"},
	{"(a+5)(b+2)", "ab+2a+5b+10", false, true, "expanded product of two variables"},
	{"p - q", "-(q-p)", false, true, "negated difference"},
	{"p - q", "q - p", false, false, "the difference reversed"},
	{"x^8 + x^7 + x^6 + x^5 + x^4 + x^3 + x^2 + x + 1", "\\frac{x^9-1}{x-1}", false, true, "geometric series in closed form"},
	{"5r^5", "5 r^5", true, true, "space inside a monomial"},
	{"\\frac{x}{2}", "0.5x", false, true, "half of x"},
	{"a_1+a_2", "a_2+a_1", false, true, "subscripted variables commute"},
	{"a_1", "a_2", false, false, "different subscripts are different variables"},
	{"\\theta", "\\theta", true, true, "Greek letter variable"},
	{"2\\alpha", "\\alpha+\\alpha", false, true, "Greek variables add"},
	{"\\sqrt{x^2}", "x", false, false, "sqrt(x^2) is |x|: evaluation points have both signs"},
	{"\\cot x", "\\frac{\\cos x}{\\sin x}", false, true, "trigonometric identity"},
	{"\\sin^2 x + \\cos^2 x", "1", false, true, "Pythagorean identity"},
	{"|x-3|", "|3-x|", false, true, "absolute value is symmetric"},

	// Complex numbers.
	{"-2 + 7i", "7i-2", false, true, "commuted complex number"},
	{"6+9i", "6 + 9i", true, true, "spaces only"},
	{"1 - 12i", "1+12i", false, false, "conjugate"},
	{"i^2", "-1", false, true, "i is the imaginary unit"},
	{"1+274i", "1+274i", true, true, "MATH500 gold"},
	{"\\frac{1}{i}", "-i", false, true, "reciprocal of i"},

	// Equations.
	{"x=5", "5", true, true, "strict drops a short left side; robust drops an assignment"},
	{"k = 5", "5", true, true, "strict: the left side 'k ' has two characters"},
	{"x = 5", "5", true, true, "strict: the left side 'x ' has two characters; the space on the right goes later"},
	{"y = -2x", "-2x", true, true, "line through the origin"},
	{"y = 2x + 3", "2x+3", true, true, "strict removes spaces after dropping 'y '"},
	{"y = 2x + 3", "y = 3 + 2x", false, true, "commuted right side"},
	{"f(x) = x^2", "x^2", false, true, "strict keeps a left side longer than two characters"},
	{"\\theta = \\frac{\\pi}{4}", "\\frac{\\pi}{4}", false, true, "Greek assignment"},
	{"5x - 7y + 11z + 4 = 0", "10x - 14y + 22z + 8 = 0", false, true, "the same plane scaled by 2"},
	{"5x - 7y + 11z + 4 = 0", "-5x + 7y - 11z - 4 = 0", false, true, "the same plane with both sides negated"},
	{"5x - 7y + 11z + 4 = 0", "5x - 7y + 11z - 4 = 0", false, false, "a parallel plane"},
	{"x+y=1", "y=1-x", false, true, "an assignment to a variable of an expression with variables is also the equation of its curve"},
	{"x+y=1", "1-x", false, false, "but the expression alone is not the line"},
	{"x+y=1", "2x+2y=2", false, true, "the same equation scaled by 2"},
	{"2x=4", "4", true, false, "strict quirk: '2x' has two characters and is dropped"},
	{"x = y = 5", "5", false, true, "a chain after a label is worth its last side"},

	// Degrees, percent, dollars, units.
	{"90^\\circ", "90", true, true, "degree mark"},
	{"90^{\\circ}", "90", true, true, "braced degree mark"},
	{"106^\\circ", "106°", false, true, "Unicode degree sign"},
	{"50\\%", "50", true, true, "escaped percent"},
	{"50%", "50", false, true, "strict removes only the escaped percent"},
	{"\\$18.90", "18.90", true, true, "escaped dollar"},
	{"\\$18.90", "18.9", false, true, "dollar and trailing zero"},
	{"\\$32,\\!348", "32348", false, true, "dollar with digit grouping"},
	{"\\$36", "36 dollars", false, true, "plain-word unit"},
	{"5.4 \\text{ cents}", "5.4", true, true, "strict removes text starting with a space"},
	{"5.4\\text{cents}", "5.4", false, true, "strict keeps text without the space"},
	{"\\frac{270}7\\text{ degrees}", "\\frac{270}{7}", false, true, "strict fix_fracs never braces a denominator after a braced numerator"},
	{"15\\mbox{ cm}^2", "15", false, true, "mbox unit with a square"},
	{"864 \\mbox{ inches}^2", "864", false, true, "MATH500 gold with squared inches"},
	{"10 \\text{ cm} \\text{ long}", "10", false, true, "two unit texts: strict raises and compares raw strings"},
	{"10 \\text{ cm} \\text{ long}", "10 \\text{ cm} \\text{ long}", true, true, "the raw fallback still matches itself"},
	{"12 inches", "12", false, true, "plain-word unit"},
	{"3 square feet", "3", false, true, "two unit words"},

	// Text answers and multiple choice.
	{"\\text{(B)}", "B", false, true, "choice letter in text"},
	{"\\text{(B)}", "(B)", false, true, "choice letter in brackets"},
	{"(C)", "C", false, true, "bracketed letter"},
	{"\\textbf{(E)}", "E", false, true, "bold choice"},
	{"\\text{(B)}", "\\text{(C)}", false, false, "different choices"},
	{"\\text{Evelyn}", "Evelyn", false, true, "a name in text"},
	{"\\text{east}", "East", false, true, "a word is compared case-blind"},
	{"\\text{even}", "\\text{odd}", false, false, "different words"},
	{"\\text{ellipse}", "\\text{ ellipse}", false, true, "strict cuts at '\\text{ ' leaving nothing on one side"},
	{"\\text{Navin}", "\\text{Navin}", true, true, "identical text"},
	{"\\text{June 20}", "\\text{June 20}", true, true, "text with a number"},
	{"204_5", "204_{5}", false, true, "base subscript with and without braces"},
	{"204_5", "204", false, false, "the base matters"},
	{"4210_{5}", "4210_5", false, true, "MATH500 base-5 gold"},

	// Tuples, points and intervals.
	{"(1,2)", "(1,2)", true, true, "identical points"},
	{"(1,2)", "(2,1)", false, false, "order matters in a point"},
	{"\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})", true, true, "\\left and \\right removed"},
	{"\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi/2)", false, true, "slash form inside a tuple"},
	{"(-1,6)", "(-1, 6)", true, true, "space after the comma"},
	{"(1,-16,-4,43)", "(1,-16,-4,43.0)", false, true, "four-tuple with a trailing zero"},
	{"(1,2,3)", "(1,2)", false, false, "different lengths"},
	{"\\left( \\frac{3}{2}, -13 \\right)", "(1.5,-13)", false, true, "fraction against decimal in a point"},
	{"(-\\infty, 0]", "(-\\infty,0]", true, true, "interval with minus infinity"},
	{"(-\\infty, 0]", "(-\\infty, 0)", false, false, "closed and open ends differ"},
	{"[3,4]", "(3,4)", false, false, "closed against open interval"},
	{"(3,4]", "(3, 4]", true, true, "half-open interval"},
	{"(2,\\infty)", "(2, \\infty)", true, true, "interval to infinity"},
	{"(2,\\infty)", "(2, +\\infty)", false, true, "explicit plus infinity"},
	{"(2,\\infty)", "(2, -\\infty)", false, false, "wrong infinity"},
	{"(-\\infty, 2) \\cup (3, \\infty)", "(3,\\infty)\\cup(-\\infty,2)", false, true, "union order does not matter"},
	{"(0,9) \\cup (9,36)", "(0,9)\\cup(9,36]", false, false, "one end differs"},
	{"x \\in [-2,7]", "[-2,7]", false, true, "membership prefix"},
	{"\\left(\\frac{3}{5},\\frac{8}{3}\\right]", "(0.6, 8/3]", false, true, "half-open interval with fractions"},
	{"\\left[ \\frac{\\pi^2}{8}, \\frac{5 \\pi^2}{4} \\right]", "[\\pi^2/8, 1.25\\pi^2]", false, true, "interval with pi squared"},
	{"\\langle 1, 2 \\rangle", "(1,2)", false, true, "angle brackets are a tuple"},

	// Sets and answer lists.
	{"1,-2", "-2,1", false, true, "answer list order does not matter"},
	{"3, 5, 7", "7,5,3", false, true, "three solutions reordered"},
	{"3, 5, 7", "3, 5", false, false, "a missing solution"},
	{"1,1,2", "1,2", false, false, "a repeated root counts: roots are listed with multiplicity"},
	{"\\{1,1,2\\}", "\\{1,2\\}", false, true, "a set written with braces has no repeats"},
	{"\\{1,2\\}", "\\{2,1\\}", false, true, "set order"},
	{"\\{5\\}", "5", false, true, "a one-element set is its element"},
	{"\\{1\\pm\\sqrt{5},-2\\}", "-2, 1-\\sqrt5, 1+\\sqrt5", false, true, "plus-minus inside a set"},
	{"1 \\pm \\sqrt{19}", "1+\\sqrt{19}, 1-\\sqrt{19}", false, true, "plus-minus expands to two answers"},
	{"3 \\pm 2 \\sqrt{2}", "3-2\\sqrt2,3+2\\sqrt2", false, true, "MATH500 plus-minus gold"},
	{"\\pm 3", "3,-3", false, true, "a bare plus-minus"},
	{"1 \\pm \\sqrt{19}", "1+\\sqrt{19}", false, false, "only one of the two roots"},
	{"\\emptyset", "\\{\\}", false, true, "two spellings of the empty set"},
	{"(1,2),(3,4)", "(3,4),(1,2)", false, true, "a list of points in another order"},
	{"(1,2),(3,4)", "(2,1),(3,4)", false, false, "a point reversed"},
	{"-2,1", "(-2,1)", false, false, "a list is not a point"},
	{"1, 2 \\text{ and } 3", "1,2,3", false, true, "\\text{and} separates answers"},

	// Matrices and vectors.
	{"\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}", "\\begin{pmatrix}-1&0\\\\0&-1\\end{pmatrix}", true, true, "spacing inside a matrix"},
	{"\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}", "\\begin{bmatrix} -1 & 0 \\\\ 0 & -1 \\end{bmatrix}", false, true, "pmatrix and bmatrix hold the same matrix"},
	{"\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}", "\\begin{pmatrix} 0 & -1 \\\\ -1 & 0 \\end{pmatrix}", false, false, "different entries"},
	{"\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}", "\\begin{pmatrix} -\\frac13 \\\\ \\frac23 \\\\ \\frac53 \\end{pmatrix}", false, true, "column vector with frac entries"},
	{"\\begin{pmatrix} 1/5 \\\\ -18/5 \\end{pmatrix}", "\\begin{pmatrix} 0.2 \\\\ -3.6 \\end{pmatrix}", false, true, "decimal entries"},
	{"\\begin{pmatrix} 1 & 2 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", false, false, "a row is not a column"},
	{"\\begin{pmatrix} 16/49 \\\\ 48/49 \\\\ 24/49 \\end{pmatrix}", "\\begin{pmatrix} 16/49 \\\\ 48/49 \\\\ 24/49 \\end{pmatrix}", true, true, "MATH500 gold equals itself"},

	// Strict-mode quirks kept on purpose.
	{"\\left(1,2\\right)", "(1,2)", true, true, "both drop \\left and \\right"},
	{"\\rightarrow", "arrow", true, false, "strict removes '\\right' even from inside \\rightarrow"},
	{"\\sqrt", "\\sqrt", true, true, "strict raises on a bare \\sqrt and falls back to equal raw strings"},
	{"\\sqrt", "\\sqrt ", false, true, "raw fallback compares the unstripped strings"},
	{"\\frac", "\\frac", true, true, "bare \\frac raises; raw strings are equal"},
	{"\\frac1", "\\frac1 ", true, true, "\\frac with one character: fix_fracs returns its input"},
	{"a\\text{ b}\\text{ c}", "a", false, true, "two '\\text{ ' make strict fall back to raw equality; robust drops both trailing unit texts"},
	{"x^2 \\text{ cm}", "x^2", true, true, "strict removes the unit after a space"},
	{"\\dfrac{a}{b}", "\\frac{a}{b}", true, true, "dfrac rewritten everywhere"},
	{"\\%5", "5", true, true, "strict removes escaped percent anywhere"},
	{"5 .", "50.", true, false, "strict turns ' .' into ' 0.' and then removes spaces; robust rejects two literals side by side"},
}

func TestEquivCases(t *testing.T) {
	for _, c := range equivCases {
		if got := StrictEquiv(c.a, c.b); got != c.strict {
			t.Errorf("StrictEquiv(%q, %q) = %v, want %v: %s", c.a, c.b, got, c.strict, c.why)
		}
		if got := RobustEquiv(c.a, c.b); got != c.robust {
			t.Errorf("RobustEquiv(%q, %q) = %v, want %v: %s", c.a, c.b, got, c.robust, c.why)
		}
		// Both relations are symmetric.
		if StrictEquiv(c.b, c.a) != StrictEquiv(c.a, c.b) || RobustEquiv(c.b, c.a) != RobustEquiv(c.a, c.b) {
			t.Errorf("asymmetric verdict for %q and %q", c.a, c.b)
		}
		if Equiv(Strict, c.a, c.b) != c.strict || Equiv(Robust, c.a, c.b) != c.robust {
			t.Errorf("Equiv(mode, %q, %q) disagrees with the mode's own function", c.a, c.b)
		}
	}
}

// TestKeyAgreesWithRobustEquiv proves the key property on every case: equal
// answers share a key, and different answers do not; a decimal that rounds
// an exact value, and an assignment equal to an equation, keep their own
// keys (package documentation).
func TestKeyAgreesWithRobustEquiv(t *testing.T) {
	for _, c := range equivCases {
		ka, kb := Key(c.a), Key(c.b)
		if _, rule := RobustEquivRule(c.a, c.b); c.robust && ka != kb && rule != RuleApprox && rule != RuleEquation {
			t.Errorf("RobustEquiv(%q, %q) but keys differ: %q vs %q (%s)", c.a, c.b, ka, kb, c.why)
		}
		if !c.robust && ka == kb {
			t.Errorf("not RobustEquiv(%q, %q) but both keys are %q (%s)", c.a, c.b, ka, c.why)
		}
		if Key(c.a) != ka {
			t.Errorf("Key(%q) is not deterministic", c.a)
		}
	}
}
