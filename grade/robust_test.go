package grade

import (
	"strings"
	"testing"
)

// robustCase is a pair of answers with the robust verdict and the rule
// that should decide it (RuleNone for different answers).
type robustCase struct {
	a, b string
	rule Rule
}

const no = RuleNone

// robustCases are written by hand from the answer formats of GSM8K, MATH,
// MATH500, AMC and AIME and from what models write; every unequal pair is a
// near miss that a too-lenient grader would accept.
var robustCases = []robustCase{
	// Exact and plain numbers.
	{"42", "42", RuleExact},
	{"42", " 42 ", RuleExact},
	{"42", "43", no},
	{"42", "042", RuleNumeric},
	{"42", "42.0", RuleNumeric},
	{"42", "42.000", RuleNumeric},
	{"-7", "-7.0", RuleNumeric},
	{"-7", "7", no},
	{"0", "0.0", RuleNumeric},
	{"0", "-0.0", RuleNumeric},
	{"3.5", "3.50", RuleNumeric},
	{"3.5", "3.05", no},
	{"0.1", "0.01", no},
	{"100", "1e2", RuleNumeric},
	{"0.00012", "1.2\\times10^{-4}", RuleNumeric},
	{"0.00012", "1.2 \\cdot 10^{-4}", RuleNumeric},
	{"0.00012", "1.2\\times10^{-5}", no},
	{"6.02\\times 10^{23}", "602000000000000000000000", RuleNumeric},
	{"2.5E3", "2500", RuleNumeric},
	{"2.5E3", "250", no},

	// Thousands separators and decimal commas.
	{"1,000", "1000", RuleNumeric},
	{"1 000", "1000", RuleNumeric},
	{"1\\,000", "1000", RuleNumeric},
	{"1{,}000", "1000", RuleNumeric},
	{"1,000,000", "1000000", RuleNumeric},
	{"1\\,000\\,000", "1000000", RuleNumeric},
	{"12,345.67", "12345.67", RuleNumeric},
	{"1 000", "100", no},
	{"1,000", "1,0000", no},
	{"\\$1,250", "1250", RuleNumeric},
	{"\\$1,250.00", "1250", RuleNumeric},
	{"1,250", "125", no},
	{"10,\\!000", "10000", RuleNumeric},
	{"2,3", "3,2", RuleSet},
	{"2,3", "2.3", no},
	{"3{,}5", "3.5", RuleNumeric},
	{"3{,}5", "35", no},
	{"0{,}25", "\\frac14", RuleNumeric},
	{"1{,}000{,}000", "10^6", RuleNumeric},
	{"1{,}0000", "1.0000", RuleNumeric},
	{"1.234,5", "1234.5", RuleNumeric},
	{"1.234,5", "1.2345", no},
	{"1.234.567,89", "1234567.89", RuleNumeric},

	// Fractions against decimals, with and without rounding.
	{"\\frac{1}{12}", "0.0833333", RuleApprox},
	{"\\frac{1}{12}", "0.08333333333", RuleApprox},
	{"\\frac{1}{12}", "0.083", no},
	{"\\frac{1}{12}", "0.0833", no},
	{"\\frac{1}{12}", "0.0834", no},
	{"\\frac{1}{3}", "0.333333", RuleApprox},
	{"\\frac{1}{3}", "0.333", no},
	{"\\frac{2}{3}", "0.666667", RuleApprox},
	{"\\frac{2}{3}", "0.666666", RuleApprox},
	{"\\frac{2}{3}", "0.67", no},
	{"\\frac{1}{7}", "0.142857", RuleApprox},
	{"\\frac{1}{7}", "0.142858", no},
	{"\\frac{1}{4}", "0.25", RuleNumeric},
	{"\\frac{1}{4}", "0.250001", no},
	{"\\frac{1}{8}", "0.125", RuleNumeric},
	{"\\frac{1}{8}", "0.13", no},
	{"\\frac{3}{2}", "1.5", RuleNumeric},
	{"\\frac{5}{6}", "0.8333333", RuleApprox},
	{"\\frac{5}{6}", "6", no},
	{"\\frac{22}{7}", "\\pi", no},
	{"\\sqrt{2}", "1.414", no},
	{"\\sqrt{2}", "1.41421356", RuleApprox},
	{"\\sqrt{2}", "1.4142136", RuleApprox},
	{"\\sqrt{2}", "1.4142", no},
	{"\\pi", "3.1415927", RuleApprox},
	{"\\pi", "3.1416", no},
	{"2\\pi", "6.283185", RuleApprox},
	{"e", "2.718282", no},
	{"\\frac{1}{3}", "\\frac{333333}{1000000}", no},
	{"-\\frac{1}{3}", "-0.3333333", RuleApprox},
	{"-\\frac{1}{3}", "0.3333333", no},

	// Percentages, dollars, degrees and units.
	{"25\\%", "25", RuleNumeric},
	{"25%", "25", RuleNumeric},
	{"25\\%", "26", no},
	{"25\\%", "0.25", RuleNumeric},
	{"25\\%", "\\frac{1}{4}", RuleNumeric},
	{"12.5%", "\\frac18", RuleNumeric},
	{"25\\%", "2.5", no},
	{"25\\%", "0.025", no},
	{"25\\%", "25\\%", RuleExact},
	{"25\\%", "0.25\\%", no},
	{"$50\\%$", "0.5", RuleNumeric},
	{"\\$5", "5", RuleNumeric},
	{"$5$", "5", RuleNumeric},
	{"5 dollars", "5", RuleNumeric},
	{"\\$5.50", "5.5", RuleNumeric},
	{"\\$5.50", "5.05", no},
	{"30^\\circ", "30", RuleNumeric},
	{"30^{\\circ}", "30", RuleNumeric},
	{"30°", "30", RuleNumeric},
	{"30^\\circ", "60", no},
	{"12 \\text{ cm}", "12", RuleNumeric},
	{"12\\text{ cm}^2", "12", RuleNumeric},
	{"12 \\mathrm{cm}", "12", RuleNumeric},
	{"12 meters", "12", RuleNumeric},
	{"12 square units", "12", RuleNumeric},
	{"12 \\text{ cm}", "13", no},
	{"7 \\text{ hours}", "7", RuleNumeric},
	{"18 \\text{ minutes}", "8", no},

	// LaTeX noise.
	{"\\left(1,2\\right)", "(1,2)", RuleTuple},
	{"\\displaystyle\\frac{1}{2}", "\\frac12", RuleNumeric},
	{"\\frac{1}{2}", "\\dfrac{1}{2}", RuleNumeric},
	{"\\frac{1}{2}", "\\tfrac12", RuleNumeric},
	{"\\!\\frac{1}{2}", "1/2", RuleNumeric},
	{"\\\\frac{1}{2}", "\\frac{1}{2}", RuleNumeric},
	{"\\\\frac{\\\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}", RuleNumeric},
	{"\\\\frac{1}{2}", "\\frac{1}{3}", no},
	{"\\\\sqrt{2}", "\\sqrt{2}", RuleNumeric},
	{"\\\\pi", "\\pi", RuleNumeric},
	{"\\mathrm{5}", "5", RuleNumeric},
	{"\\text{5}", "5", RuleNumeric},
	{"\\textbf{5}", "5", RuleNumeric},
	{"\\boxed{5}", "5", RuleNumeric},
	{"5.", "5", RuleNumeric},
	{"x = 5.", "5", RuleNumeric},
	{"\\left[ 0, 1 \\right]", "[0,1]", RuleInterval},
	{"\\left\\{ 1, 2 \\right\\}", "\\{1,2\\}", RuleSet},
	{"\\Big(\\frac{1}{2}\\Big)", "0.5", RuleNumeric},
	{"2 \\cdot 3", "6", RuleNumeric},
	{"2 \\times 3", "6", RuleNumeric},
	{"2 \\times 3", "5", no},
	{"−5", "-5", RuleNumeric},

	// Radicals and symbolic constants.
	{"\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}", RuleNumeric},
	{"\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{2}}", no},
	{"2\\sqrt{2}", "\\sqrt{8}", RuleNumeric},
	{"2\\sqrt{2}", "\\sqrt{6}", no},
	{"3\\sqrt{2}", "\\sqrt{18}", RuleNumeric},
	{"\\frac{9}{4}\\pi", "\\frac{9\\pi}{4}", RuleNumeric},
	{"\\frac{9}{4}\\pi", "\\frac{4\\pi}{9}", no},
	{"\\frac{\\pi}{3}", "60", no},
	{"\\sqrt{3}/2", "\\frac{\\sqrt{3}}{2}", RuleNumeric},
	{"\\sqrt{50}", "5\\sqrt2", RuleNumeric},
	{"\\sqrt{50}", "5\\sqrt3", no},
	{"4\\sqrt{3}+2", "2+\\sqrt{48}", RuleNumeric},
	{"\\frac{1+\\sqrt{5}}{2}", "\\frac{\\sqrt5+1}{2}", RuleNumeric},
	{"\\frac{1+\\sqrt{5}}{2}", "\\frac{1-\\sqrt5}{2}", no},
	{"\\sqrt[3]{27}", "3", RuleNumeric},
	{"\\sqrt[4]{16}", "2", RuleNumeric},
	{"\\sqrt[3]{2}", "2^{1/3}", RuleNumeric},
	{"\\sqrt{2}", "2^{\\frac{1}{2}}", RuleNumeric},
	{"\\sqrt{2}", "2^{\\frac{1}{3}}", no},
	{"8^{2/3}", "4", RuleNumeric},
	{"100\\pi", "\\pi \\cdot 100", RuleNumeric},
	{"\\pi r^2", "r^2\\pi", RuleSymbolic},
	{"\\pi r^2", "2\\pi r", no},
	{"e^2", "e\\cdot e", RuleSymbolic},
	{"\\ln 8", "3\\ln 2", RuleNumeric},
	{"\\log_2 32", "5", RuleNumeric},
	{"\\log_3 9", "3", no},
	{"\\tan\\frac{\\pi}{4}", "1", RuleNumeric},
	{"\\cos\\frac{\\pi}{3}", "\\frac12", RuleNumeric},
	{"\\sin 30^\\circ", "\\frac{1}{2}", no},
	{"3!", "6", RuleNumeric},
	{"\\binom{6}{3}", "20", RuleNumeric},
	{"\\binom{6}{3}", "\\binom{6}{2}", no},
	{"2^{10}", "1024", RuleNumeric},
	{"2^{10}", "1000", no},
	{"3^{-2}", "\\frac{1}{9}", RuleNumeric},
	{"(-2)^3", "-8", RuleNumeric},
	{"-2^2", "-4", RuleNumeric},
	{"-2^2", "4", no},
	{"|-3|", "3", RuleNumeric},
	{"i", "\\sqrt{-1}", RuleNumeric},
	{"3+4i", "4i+3", RuleNumeric},
	{"3+4i", "3-4i", no},
	{"(1+i)^2", "2i", RuleNumeric},
	{"\\frac{1}{1+i}", "\\frac{1-i}{2}", RuleNumeric},

	// Expressions with variables.
	{"x^2-1", "(x-1)(x+1)", RuleSymbolic},
	{"x^2-1", "(x-1)^2", no},
	{"x^2+x", "x(x+1)", RuleSymbolic},
	{"a^2+2ab+b^2", "(a+b)^2", RuleSymbolic},
	{"a^2-2ab+b^2", "(a+b)^2", no},
	{"\\frac{x}{x^2}", "\\frac{1}{x}", RuleSymbolic},
	{"\\frac{2x+2}{2}", "x+1", RuleSymbolic},
	{"\\frac{2x+2}{2}", "x+2", no},
	{"3n+3", "3(n+1)", RuleSymbolic},
	{"n(n+1)/2", "\\frac{n^2+n}{2}", RuleSymbolic},
	{"n(n+1)/2", "\\frac{n^2-n}{2}", no},
	{"2^{n+1}", "2\\cdot2^n", RuleSymbolic},
	{"2^{n+1}", "2^n+1", no},
	{"\\sin 2x", "2\\sin x\\cos x", RuleSymbolic},
	{"\\cos 2x", "1-2\\sin^2 x", RuleSymbolic},
	{"\\cos 2x", "2\\sin^2 x-1", no},
	{"\\tan x", "\\frac{\\sin x}{\\cos x}", RuleSymbolic},
	{"\\sec^2 x", "1+\\tan^2 x", RuleSymbolic},
	{"\\sqrt{x^2+2x+1}", "x+1", no}, // it is |x+1|: points have both signs
	{"\\sqrt{x^2+2x+1}", "|x+1|", RuleSymbolic},
	{"\\exp(\\ln x)", "x", no}, // defined for x > 0 only
	{"\\exp(\\ln x)", "\\frac{x^2}{x}", no},
	{"\\ln(xy)", "\\ln x+\\ln y", no}, // differ where x, y < 0
	{"\\ln(2x)", "\\ln 2+\\ln x", RuleSymbolic},
	{"|x|", "x", no},
	{"\\sqrt{x^2}", "x", no},
	{"\\sqrt{x^2}", "|x|", RuleSymbolic},
	{"\\sqrt{x^6}", "x^3", no},
	{"\\sqrt{x^6}", "|x|^3", RuleSymbolic},
	{"\\frac{x}{|x|}", "1", no},
	{"\\frac{x}{|x|}", "\\frac{|x|}{x}", RuleSymbolic},
	{"\\log(x^2)", "2\\log(x)", no},
	{"\\log(x^2)", "2\\log|x|", RuleSymbolic},
	{"(\\sqrt{x})^2", "x", no}, // defined for x >= 0 only
	{"\\sqrt[3]{x}", "x^{1/3}", RuleSymbolic},
	{"x^{2/3}", "\\sqrt[3]{x^2}", RuleSymbolic},
	{"\\sqrt{x^2-2x+1}", "|1-x|", RuleSymbolic},
	{"|x^2-1|", "x^2-1", no}, // differ where |x| < 1 only
	{"\\ln(x+y)", "\\ln x+\\ln y", no},
	{"x^3", "x^2", no},
	{"xy", "yx", RuleSymbolic},
	{"x-y", "y-x", no},
	{"\\frac{a+b}{2}", "\\frac{b+a}{2}", RuleSymbolic},
	{"\\frac{a}{b}", "\\frac{b}{a}", no},
	{"4x^2+4x+1", "(2x+1)^2", RuleSymbolic},
	{"4x^2-4x+1", "(2x+1)^2", no},
	{"\\alpha+\\beta", "\\beta+\\alpha", RuleSymbolic},
	{"\\alpha", "\\beta", no},

	// Labelled answers and equations.
	{"x = 5", "5", RuleNumeric},
	{"x=5", "x = 5", RuleNumeric},
	{"n = 12", "12", RuleNumeric},
	{"x = 5", "6", no},
	{"(p,q)=(3,2)", "(3,2)", RuleTuple},
	{"(p,q)=(3,2)", "(2,3)", no},
	{"(a, b, c) = (1, 2, 3)", "(1,2,3)", RuleTuple},
	{"V_1:V_2=11:21", "11:21", RuleText},
	{"V_1:V_2=11:21", "21:11", no},
	{"|AB|=1", "1", RuleNumeric},
	{"AB = 7", "7", RuleNumeric},
	{"AB = 7", "8", no},
	{"\\angle ABC = 45^\\circ", "45", RuleNumeric},
	{"m\\angle A = 30", "30", RuleNumeric},
	{"\\overline{BC} = 4", "4", RuleNumeric},
	{"x = 5+5+1 = 11", "11", RuleNumeric},
	{"x = 5+5+1 = 11", "10", no},
	{"a_n = 2n+1", "2n+1", RuleSymbolic},
	{"f(x) = 3x-2", "3x-2", RuleSymbolic},
	{"f(x) = 3x-2", "3x+2", no},
	{"g(x) = \\frac{x+2}{3}", "\\frac{x+2}{3}", RuleSymbolic},
	{"y = 2x+1", "y=1+2x", RuleSymbolic},
	{"y = 2x+1", "y=2x-1", no},
	{"x^2+y^2=25", "y^2+x^2=25", RuleSymbolic},
	{"x^2+y^2=25", "x^2+y^2=5", no},
	{"2x+4y=8", "x+2y=4", RuleSymbolic},
	{"2x+4y=8", "x+2y=8", no},
	{"\\theta = \\frac{\\pi}{6}", "\\frac{\\pi}{6}", RuleNumeric},
	{"k = -\\frac{3}{2}", "-1.5", RuleNumeric},
	{"x \\in \\{1, 2\\}", "\\{2,1\\}", RuleSet},
	{"xy = 6", "6", RuleNumeric},

	// Relations and intervals.
	{"5 \\geq x", "x \\leq 5", RuleInterval},
	{"5 \\ge x", "x \\le 5", RuleInterval},
	{"5 \\geq x", "x < 5", no},
	{"-x > -1", "x < 1", RuleInterval},
	{"-x > -1", "x > 1", no},
	{"x<1", "x\\le1", no},
	{"x<1", "x \\lt 1", RuleInterval},
	{"x<1", "(-\\infty,1)", RuleInterval},
	{"x\\le 1", "(-\\infty,1]", RuleInterval},
	{"x\\le 1", "(-\\infty,1)", no},
	{"x > 3", "(3, \\infty)", RuleInterval},
	{"x \\geq 3", "[3, \\infty)", RuleInterval},
	{"x \\geq 3", "(3, \\infty)", no},
	{"2x+1 > 7", "x > 3", RuleInterval},
	{"2x+1 > 7", "x > 4", no},
	{"-7 < a < 10", "(-7,10)", RuleInterval},
	{"-7 < a \\le 10", "(-7,10]", RuleInterval},
	{"-7 \\le a < 10", "(-7,10]", no},
	{"-7 < a < 10", "(-7,10]", no},
	{"10 > a > -7", "(-7,10)", RuleInterval},
	{"0 < x < \\frac{1}{2}", "(0, 0.5)", RuleInterval},
	{"1 \\le x \\le 3", "[1,3]", RuleInterval},
	{"1 \\le x \\le 3", "[1,3)", no},
	{"x \\ge 0", "0 \\le x", RuleInterval},
	{"x ≤ 4", "x \\le 4", RuleInterval},
	{"x^2 < 4", "4 > x^2", RuleRelation},
	{"x^2 < 4", "x^2 \\le 4", no},
	{"x+y<3", "3>y+x", RuleRelation},
	{"x+y<3", "x+y>3", no},
	{"[2,5]", "[2, 5]", RuleInterval},
	{"[2,5]", "\\left[2,5\\right]", RuleInterval},
	{"[2,5)", "[2,5]", no},
	{"(1,2)", "[1,2]", no},
	{"(1,2)", "(1,2]", no},
	{"(-\\infty,-1)\\cup(1,\\infty)", "(1,\\infty)\\cup(-\\infty,-1)", RuleInterval},
	{"(-\\infty,-1)\\cup(1,\\infty)", "(-\\infty,-1]\\cup(1,\\infty)", no},
	{"(-\\infty, 2] \\cup [5, \\infty)", "(-\\infty,2]\\cup[5,\\infty)", RuleInterval},
	{"[0, \\frac{\\pi}{2}]", "[0, \\pi/2]", RuleInterval},
	{"x < -1 \\text{ or } x > 3", "(-\\infty,-1)\\cup(3,\\infty)", RuleInterval},
	{"x \\le -1 \\text{ or } x > 3", "(-\\infty,-1)\\cup(3,\\infty)", no},
	{"x < -1 \\text{ or } x > 3", "(-\\infty,-1)", no},
	{"[1,2], [3,4]", "[3,4] \\cup [1,2]", RuleInterval},
	{"(-\\infty, \\infty)", "(-\\infty,+\\infty)", RuleInterval},

	// Lists and sets.
	{"1, 2, 3", "3, 2, 1", RuleSet},
	{"1; 2; 3", "1, 2, 3", RuleSet},
	{"1 and 2", "2, 1", RuleSet},
	{"1 or 2", "1, 2", RuleSet},
	{"1 \\text{ and } 2", "1,2", RuleSet},
	{"1 \\text{ or } 2", "\\{1, 2\\}", RuleSet},
	{"1, 2, 3", "1, 2", no},
	{"1, 2", "1, 2, 3", no},
	{"1, 2", "1, 3", no},
	{"\\{-1, 1\\}", "\\pm 1", RuleSet},
	{"x = 2, x = 3", "2, 3", RuleSet},
	{"x=2 \\text{ or } x=3", "3, 2", RuleSet},
	{"x=2 \\text{ or } x=3", "2", no},
	{"\\{3\\}", "3", RuleNumeric},
	{"\\{\\}", "\\emptyset", RuleSet},
	{"\\emptyset", "0", no},
	{"\\frac12, \\frac13", "0.5, \\frac{1}{3}", RuleSet},
	{"2, 2, 3", "3, 2", no}, // roots are listed with multiplicity
	{"2, 2, 3", "2, 3, 2", RuleSet},
	{"1, 2, 2", "1, 2", no},
	{"5, 5", "5", no},
	{"5, 5, 5", "5, 5", no},
	{"\\frac{639}{40}, 15\\frac{39}{40}", "\\frac{639}{40}", RuleNumeric}, // one value restated
	{"\\{1, 2, 2\\}", "\\{2, 1\\}", RuleSet},                              // a set has no repeats
	{"\\{1, 2\\}", "1, 2, 2", no},
	{"\\{5, 5\\}", "5", RuleNumeric},
	{"x=1, y=2", "x=2, y=1", no}, // named values are compared by name
	{"x=1, y=2", "y = 2, x = 1", RuleSet},
	{"x=2", "x=2, y=2", no},
	{"x=1, y=2", "1, 2", no},
	{"a_{1} = 3, a_2 = 4", "a_2=4, a_1=3", RuleSet},
	{"a_1 = 3, a_2 = 4", "a_1=4, a_2=3", no},
	{"x = 1 \\pm \\sqrt{2}, y = 0", "y = 0, x = 1-\\sqrt2, x = 1+\\sqrt2", RuleSet},
	{"x = 1 \\pm \\sqrt{2}, y = 0", "x = 0, y = 1-\\sqrt2, y = 1+\\sqrt2", no},
	{"(0,0), (1,1)", "(1,1), (0,0)", RuleSet},
	{"(0,0), (1,1)", "(0,1), (1,0)", no},
	{"\\text{Monday and Tuesday}", "Tuesday, Monday", RuleSet},
	{"-2, \\frac{1}{2}", "\\frac12,-2", RuleSet},
	{"1 \\pm \\sqrt{2}", "1+\\sqrt2, 1-\\sqrt2", RuleSet},
	{"1 \\pm \\sqrt{2}", "1+\\sqrt2", no},

	// Tuples, vectors and matrices.
	{"(1,2)", "(2,1)", no},
	{"(1, 2, 3)", "(1,2,3)", RuleTuple},
	{"(0.5, 1)", "(\\frac{1}{2}, 1)", RuleTuple},
	{"(1,2)", "1,2", no},
	{"\\langle 1,2,3\\rangle", "(1,2,3)", RuleTuple},
	{"\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{bmatrix} 1 \\\\ 2 \\end{bmatrix}", RuleTuple},
	{"\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}", no},
	{"\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", RuleTuple},
	{"\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{pmatrix} 1 & 3 \\\\ 2 & 4 \\end{pmatrix}", no},
	{"\\begin{pmatrix} \\frac12 \\\\ 0 \\end{pmatrix}", "\\begin{pmatrix} 0.5 \\\\ 0 \\end{pmatrix}", RuleTuple},
	{"\\begin{pmatrix} \\sqrt2 & 0 \\end{pmatrix}", "\\begin{pmatrix} \\sqrt{2} & 0 \\end{pmatrix}", RuleTuple},
	{"\\\\begin{pmatrix} 1 \\\\\\\\ 2 \\\\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", RuleTuple},
	{"\\begin{pmatrix} 1 & 2 \\end{pmatrix}", "(1,2)", no},

	// Multiple choice and text.
	{"(B)", "B", RuleText},
	{"\\text{(B)}", "B", RuleText},
	{"\\textbf{(B)}", "(B)", RuleText},
	{"B", "C", no},
	{"(A)", "A", RuleText},
	{"(E)", "(D)", no},
	{"\\text{Yes}", "yes", RuleText},
	{"\\text{yes}", "no", no},
	{"\\text{odd}", "Odd", RuleText},
	{"\\text{Tuesday}", "Wednesday", no},
	{"2021_{3}", "2021_3", RuleText},
	{"2021_3", "2021_4", no},

	// Answers in prose, boxes and gold solutions.
	{"The answer is $\\frac{5}{6}$.", "\\frac{5}{6}", RuleNumeric},
	{"The answer is $\\frac{5}{6}$.", "6", no},
	{"The answer is \\sqrt{16}.", "4", RuleNumeric},
	{"Final answer: 12", "12", RuleNumeric},
	{"so the answer is 7. Thanks", "7", RuleNumeric},
	{"\\boxed{1}, \\boxed{2}, \\boxed{3}", "1, 2, 3", RuleSet},
	{"$\\boxed{1}$ and $\\boxed{2}$", "2, 1", RuleSet},
	{"\\boxed{1}, \\boxed{2}, \\boxed{3}", "3", no},
	{"First \\boxed{2}, then we get \\boxed{3}", "3", RuleNumeric},
	{"We add them: $2+3=5$, so $\\boxed{5}$.", "5", RuleNumeric},
	{"We add them: $2+3=5$, so $\\boxed{5}$.", "\\boxed{5}", RuleNumeric},
	{"We add them: $2+3=5$, so $\\boxed{5}$.", "6", no},
	{"Hence the area is $\\boxed{12\\text{ cm}^2}$.", "12", RuleNumeric},
	{"Therefore $x = \\boxed{\\frac{1}{2}}$.", "0.5", RuleNumeric},
	// More near misses, and a few look-alikes that are equal.
	{"x<1", "x>1", no},
	{"x \\le 1", "x \\ge 1", no},
	{"(1,2)", "\\{1,2\\}", no},
	{"\\{1,2\\}", "[1,2]", no},
	{"1,2", "[1,2]", no},
	{"(-\\infty,1)", "(-\\infty,-1)", no},
	{"(-\\infty,1)", "(1,\\infty)", no},
	{"\\infty", "-\\infty", no},
	{"\\infty", "1000000", no},
	{"\\frac{1}{2}", "\\frac{1}{2}x", no},
	{"2x", "x^2", no},
	{"\\sqrt{x}", "x^{1/3}", no},
	{"10^{-3}", "10^{3}", no},
	{"1e-3", "1e3", no},
	{"\\frac{3}{4}", "\\frac{4}{3}", no},
	{"\\ln 2", "\\log_{10} 2", no},
	{"\\sin x", "\\cos x", no},
	{"\\arcsin 1", "\\frac{\\pi}{2}", RuleNumeric},
	{"\\arcsin 1", "\\pi", no},
	{"(2,3)", "(2,3,0)", no},
	{"2:3", "3:2", no},
	{"2:3", "\\frac{2}{3}", no},
	{"1/2", "2/1", no},
	{"-\\frac12", "\\frac{-1}{-2}", no},
	{"1-\\sqrt{2}", "\\sqrt{2}-1", no},
	{"3\\sqrt{2}", "2\\sqrt{3}", no},
	{"\\pi/2", "\\pi^2", no},
	{"2^{3^2}", "(2^3)^2", no},
	{"4!", "24", RuleNumeric},
	{"4!", "4", no},
	{"0.999999", "1", no},
	{"10^{-999999999}", "10^{-999999998}", no}, // beyond exact arithmetic: cannot decide
	{"10^{-10000}", "0", no},
	{"1+10^{-1000000}", "1", no},
	{"10^{-400}", "0", no},
	{"10^{-400}", "\\frac{1}{10^{400}}", RuleNumeric},
	{"10^{-400}\\pi", "0", no},
	{"x+10^{-12}", "x", no},
	{"x+10^{-30}", "x", no},
	{"x > 10^{-12}", "x > 0", no},
	{"\\sqrt{10^{40}+1}", "10^{20}", no},
	{"\\sqrt{100000000000000000000000000000000000000001}", "10^{20}", no},
	{"\\sqrt{10^{40}}", "10^{20}", RuleNumeric},
	{"6\\times 10^{23}\\sqrt{2}", "6\\sqrt{2}\\times10^{23}", RuleNumeric},
	{"0.9999999999", "1", no},
	{"1.0000001", "1", no},
	{"\\frac{1}{6}", "0.1666667", RuleApprox},
	{"\\frac{1}{6}", "0.1666", no},
	{"\\frac{1}{6}", "0.16", no},
	{"\\sqrt{3}", "1.7320508", RuleApprox},
	{"\\sqrt{3}", "1.73", no},
	{"\\frac{1}{12}", "0.08", no},
	{"\\frac{1}{12}", "1/12.1", no},
	{"-\\frac{1}{12}", "0.0833333", no},
	{"i", "-i", no},
	{"2i", "2", no},
	{"x = 5", "y = 5", RuleNumeric},
	{"x + 1 = 5", "x = 4", no},
	{"y = x + 1", "y = x - 1", no},
	{"x > 5", "5", no},
	{"x > 5", "x \\ge 5", no},
	{"\\begin{pmatrix} 1 \\\\ 0 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 0 \\\\ 0 \\end{pmatrix}", no},
	{"\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}", "1", no},
	{"(B)", "(B), (C)", no},
	{"\\text{B}", "\\text{BC}", no},
	{"1, 2, 3", "6", no},
	{"12", "1, 2", no},
	{"1,234", "1.234", no},
	{"1\\,234", "1.234", no},
	{"\\boxed{1}, \\boxed{2}", "\\boxed{1}", no},
	{"The answer is 12.", "120", no},
	{"The answer is $\\sqrt{16}$.", "16", no},
}

func TestRobustCases(t *testing.T) {
	if len(robustCases) < 300 {
		t.Errorf("%d robust cases, want at least 300", len(robustCases))
	}
	seen := map[[2]string]bool{}
	for _, c := range robustCases {
		if seen[[2]string{c.a, c.b}] {
			t.Errorf("duplicate case %q vs %q", c.a, c.b)
		}
		seen[[2]string{c.a, c.b}] = true
		equal, rule := RobustEquivRule(c.a, c.b)
		back, backRule := RobustEquivRule(c.b, c.a)
		if equal != (c.rule != RuleNone) || rule != c.rule {
			t.Errorf("RobustEquivRule(%q, %q) = %v, %s; want %s", c.a, c.b, equal, rule, c.rule)
		}
		if back != equal || backRule != rule {
			t.Errorf("RobustEquivRule(%q, %q) = %v, %s but reversed %v, %s", c.a, c.b, equal, rule, back, backRule)
		}
		if RobustEquiv(c.a, c.b) != equal {
			t.Errorf("RobustEquiv(%q, %q) disagrees with RobustEquivRule", c.a, c.b)
		}
	}
}

// TestRobustCaseCounts reports the table's size by verdict for the report.
func TestRobustCaseCounts(t *testing.T) {
	equal := 0
	for _, c := range robustCases {
		if c.rule != RuleNone {
			equal++
		}
	}
	t.Logf("%d robust cases: %d equal, %d unequal", len(robustCases), equal, len(robustCases)-equal)
	if equal == 0 || equal == len(robustCases) {
		t.Error("the table needs both equal and unequal pairs")
	}
}

func TestRobustEquivOrdered(t *testing.T) {
	cases := []struct {
		a, b              string
		ordered, anyOrder bool
	}{
		{"1, 2, 3", "1, 2, 3", true, true},
		{"1, 2, 3", "3, 2, 1", false, true},
		{"1; 2 and 3", "1,2,3", true, true},
		{"1, 1, 2", "1, 2", false, false},
		{"1, 2, 1", "1, 1, 2", false, true},
		{"x = 1, y = 2", "y = 1, x = 2", false, false},
		{"x = 1, y = 2", "x = 1, y = 2", true, true},
		{"1, 2", "1, 3", false, false},
		{"\\{1, 2\\}", "\\{2, 1\\}", true, true},
		{"1 \\pm \\sqrt{2}", "1-\\sqrt2, 1+\\sqrt2", true, true},
		{"\\frac12, -3", "0.5, -3", true, true},
		{"(1,2), (3,4)", "(3,4), (1,2)", false, true},
		{"5", "5", true, true},
		{"5", "6", false, false},
	}
	for _, c := range cases {
		if got := RobustEquivOrdered(c.a, c.b); got != c.ordered {
			t.Errorf("RobustEquivOrdered(%q, %q) = %v, want %v", c.a, c.b, got, c.ordered)
		}
		if got := RobustEquiv(c.a, c.b); got != c.anyOrder {
			t.Errorf("RobustEquiv(%q, %q) = %v, want %v", c.a, c.b, got, c.anyOrder)
		}
	}
}

// TestRobustCaseKeys: keys agree with the verdicts of the table, except
// where the package documentation says they cannot: a decimal that rounds
// an exact value, and a percentage taken as its hundredth.
func TestRobustCaseKeys(t *testing.T) {
	for _, c := range robustCases {
		ka, kb := Key(c.a), Key(c.b)
		hundredth := strings.Contains(c.a, "%") != strings.Contains(c.b, "%")
		switch {
		case c.rule == RuleNone && ka == kb:
			t.Errorf("%q and %q differ but share the key %q", c.a, c.b, ka)
		case c.rule != RuleNone && ka != kb && c.rule != RuleApprox && !hundredth:
			t.Errorf("%q and %q are equal (%s) but have keys %q and %q", c.a, c.b, c.rule, ka, kb)
		}
	}
}
