// Package grade extracts final answers from model responses and decides
// whether two answers are the same, in two modes.
//
// # Strict mode
//
// Strict reproduces the MATH benchmark checker that the UMAD reference uses
// (verl's math.compute_score: last_boxed_only_string, remove_boxed,
// strip_string, is_equiv), so that the paper's numbers can be reproduced.
// It keeps every quirk of that code on purpose:
//
//   - If "\boxed " (with a space) occurs anywhere in a response, the answer
//     is the text after its last occurrence up to the next "$", even when a
//     later "\boxed{...}" exists.
//   - The last "\boxed" wins even when it is nested or unclosed; an unclosed
//     one is no answer, although an earlier box may be complete. Brace
//     counting does not skip "\{" and "\}".
//   - "\fbox{...}" is found but always scores 0 (remove_boxed asserts).
//   - No thousands separators ("1,000" differs from "1000"), no trailing
//     zeros ("18.00" differs from "18"), no leading zeros ("025" differs
//     from "25"), no set order, no "\text{...}" unless it starts with a
//     space ("\text{ cm}" is cut off with everything after it).
//   - A "\text{ " appearing twice, a "\sqrt" or "\frac" at the very end, or
//     "\frac\frac" make strip_string raise; is_equiv then compares the raw
//     strings.
//   - "\frac" followed by one character ("\frac1") makes fix_fracs return
//     its input unchanged, discarding its other rewrites.
//   - Anything of the form "ab=c" with at most two characters before a
//     single "=" loses them ("k=5" becomes "5", but so does "2x=4" -> "4").
//   - Only the exact string "0.5" becomes \frac{1}{2}; ".5" becomes "0.5"
//     first and then \frac{1}{2}, but "0.50" stays.
//   - "a/b" becomes \frac{a}{b} only when both are integers as Python
//     prints them ("03/4" and "-0/1" are left alone).
//   - "tfrac" and "dfrac" are replaced anywhere, even inside words;
//     "\left" and "\right" likewise ("\rightarrow" loses "\right").
//
// Lengths and one-character look-aheads count Unicode code points, as
// Python does; a byte that is not valid UTF-8 counts as one character.
//
// # Robust mode
//
// Robust is what a careful grader accepts. An answer that is a whole
// solution (a gold answer written as one) is first reduced to its final
// answer: its last box, joined with the boxes right before it that only
// commas, "and" or math delimiters separate (a unit word may follow a box:
// "\boxed{3} apples and \boxed{5} pears" is 3, 5), else its "the answer
// is ..." sentence, else, in prose, its last math span that is more than a
// lone letter ("So the result is \(17\)." is 17; of "$2+3=5$" the result
// 5, but "$7 = 11a+c$" stays an equation). A sentence that nothing marks,
// holding words, exactly one number and no negation, is that number ("...
// so the total cost is 10455 dollars." is 10455; "Final Answer: the
// largest n is 34." is 34). It then parses the answer into a structure: a number or
// expression, a tuple or interval (brackets must match: "(1,2]" differs
// from "(1,2)"), a set or answer list separated by commas, semicolons,
// "and" or "or" (order ignored; a set written with braces or "\pm" has no
// repeats, while an answer list keeps them, as roots are listed with
// multiplicity: "1,2,2" differs from "1,2", but a list that gives one value
// in different forms, "\frac{639}{40}, 15\frac{39}{40}", states it once;
// a one-element set is its element; a list that names two or more
// variables, "x=1, y=2", is compared name by name, and equals the point
// "(1, 2)" in the order written, but not the bare list "1, 2"; groups of
// named values separated by semicolons, "p=3,q=1; p=5,q=1", are the points
// (3,1), (5,1); a tuple may separate by semicolons, "(1;2;3)"; plain
// braces around a list, "{4, 7}", are a set), a union of intervals, an inequality, a matrix
// (pmatrix/bmatrix/matrix, or an array without column rules inside
// brackets; a sum, difference or product of matrix literals is the matrix
// it computes), a sum "\sum_k a_k b_{n-k}" whose summand is a product of
// indexed letters (compared as text with the factors in one order), a
// true equation between constants ("\cos(\pi) = -1" is -1; "\det(A) = 4"
// is 4 by its label), a multiple-choice letter ("(B)", "B",
// "\text{(B)}"), an equation, or, where nothing parses, normalised text
// (spaces removed; a single word compared case-blind).
//
// Before parsing it removes LaTeX noise (\left, \right, \!, \,, \;, ^\circ,
// \$, $, \%, %, \displaystyle; control words written with two backslashes,
// as JSON-escaped data carries them, get one), unwraps \text{...} and its
// synonyms, drops trailing units ("5\text{ cm}^2", "10 inches", "[60
// degrees]"; never "am" or "pm", which tell times apart), labels in
// front of an answer ("x = ", "f(x) = ", "x \in ", "(p,q) = ", "|AB| = ",
// "V_1:V_2 = ", "\angle ABC = "; of a chain "x = 5+5+1 = 11" the last side
// counts), thousands separators ("1,000", "1 000", "1\,000", "10,\!080",
// "1{,}000"; a whole answer of 1-3 digits then groups of three is one
// number, so "100,200" is 100200, not a list), decimal commas where they
// can only be one ("3{,}14", before other than three digits, and
// "1.234,5"; "3,05", since no list element is written 05; "3,75 €",
// "\$3,75" and "3,5 m", since a list carries no unit; but "2,3" is a list),
// and expands "a \pm b" into the set {a+b, a-b}. Of an approximation chain
// "x = \frac27 \approx 0.29" the answer is 2/7; it also equals a decimal
// gold that the stated decimal is and 2/7 rounds to ("0.29"), since such a
// gold asked for an approximation, while "x \approx 0.29" answers 0.29.
//
// An inequality linear in one variable, or a chain "a < x \le b" around
// one, is the interval of its solutions: "5 \geq x", "x \le 5",
// "-x \ge -5" and "(-\infty, 5]" agree, while "x < 5" differs. The middle
// of a chain may be a function's value, "0 < g(t) < 2" is (0, 2), or an
// absolute value between positive constants, "2 \le |y| \le 3" is
// [-3,-2] \cup [2,3]. Other
// inequalities are compared as f < 0 or f <= 0 with f scaled by a
// positive factor, like equations; "a \ne b" ("\neq", "!=", "≠") as
// a - b != 0 scaled by any factor. An interval's end written as a decimal
// of four or more places equals the exact end rounded or cut to them
// ("[0.25, 1.3333)" is "[\frac14, \frac43)", "[0.25, 1.33)" and
// "[0.25, 1.3334)" are not).
//
// Expressions support + - * /, implicit multiplication, ^ (an unbraced
// number is the whole exponent: 2^10 is 1024, as meant), \frac, \dfrac, \frac12, \sqrt,
// \sqrt[n], \pi, i (the imaginary unit), Greek letters and Latin letters as
// variables, |x|, n!, \binom, trigonometric functions, \ln, \log (natural,
// or \log_b), \exp, decimals, scientific notation (1.5e3), mixed numbers
// (1\frac{4}{5} is 9/5; an integer directly followed by a fraction of
// integers is always read as a mixed number), and base-b numerals (204_5,
// compared as written). A number with a percent sign equals both its
// number and its hundredth: "50\%" equals "50" and "0.5" (and keeps the
// key of 50).
//
// Values are compared exactly (math/big.Rat) when both sides are rational,
// with one exception: a decimal literal equals a value that is not a
// terminating decimal (1/12, \sqrt{2}, \pi) when it is that value rounded or
// cut to its own places and within 1e-6 relatively, so 0.0833333 is 1/12
// but 0.083 is not, and 1.414 is not \sqrt{2}. Otherwise they are compared
// numerically in complex arithmetic with a relative tolerance of 1e-9
// (absolute 1e-12 near zero). Expressions with variables are evaluated at
// eight points that depend only on the variables' names, where each
// variable takes values of both signs, below and above 1 in size
// (rationals n/4096): exactly where the value is rational, so "x^2+2x+1"
// equals "(x+1)^2" but "x+10^{-12}" is not "x", else numerically. So
// "\sqrt{x^2}" equals "|x|" but not "x", and "\log(x^2)" is not
// "2\log x"; an expression undefined over the reals at a point where the
// other is defined ("\exp(\ln x)" and "x" at x < 0) differs from it
// (x^{1/3} is the real cube root). Equations are equal when lhs - rhs agree
// up to a constant factor at those points. An assignment "y = f" of an
// expression with variables is also the equation of its curve: it equals
// "2x - y - 1 = 0" when f is 2x - 1 (rule equation), and still equals f
// itself; an equation never equals an expression.
//
// Where float64 loses what an answer wrote, a numeric comparison cannot
// decide and the answer is compared as text: a constant with more than 53
// significant bits (factors 2 and 5 aside) inside a value that is not
// rational ("\sqrt{10^{40}+1}"), or a value that underflows
// ("10^{-10000}", "1+10^{-1000000}"); an exact constant beyond float64
// ("10^{-400}") equals only exact values. Two irrational values closer than
// the tolerance ("\sqrt{2}+10^{-12}" and "\sqrt{2}") remain equal.
//
// Every input is bounded: final answers over 4 KiB (a solution may be
// longer; only its answer counts) are compared as text, the
// parser stops at depth 64 and 512 nodes, exact arithmetic gives way to
// floating point beyond 16 Kibit numbers or 128 Kibit of results per point, and
// collections hold at most 64 elements. Nothing calls another program.
//
// # Canonical keys
//
// Key gives every answer a string such that answers that RobustEquiv calls
// equal share it. Its format is stable: exact rationals print as "n" or
// "n/d"; other numbers as the simplest fraction with denominator at most
// 1000 that is within tolerance, else "~" and 10 significant digits, with
// "+bi" for complex values; expressions with variables as "f(v1;...;v8)"
// of their values at the evaluation points (exact "n/d" where rational, "!"
// in front where undefined over the reals); tuples and intervals with their
// brackets; sets and lists as "{...}" and unions as "union{...}" with sorted
// element keys, repeats included, each with "name=" in front in a list
// that names its variables; matrices as "matrix[a,b;c,d]"; choices as "choice:B"; equations as
// "eq(...)"; other inequalities as "rel<(...)", "rel<=(...)" or "rel!=(...)"; text as `text:"..."`.
//
// RobustEquivRule names the comparison that found two answers equal
// (Rule): exact strings, normalised text or choice, numeric, approximate
// (the decimal exception above), symbolic (variables or equations), tuple
// (points, vectors, matrices), set, interval (intervals, unions and the
// inequalities that solve to them), relation (other inequalities and
// "\ne") or equation (an assignment against the equation of its curve).
//
// Equal answers can get different keys where equality is numeric (a
// decimal that rounds an exact value keeps its own exact key, as do an
// approximation chain's decimal and an interval's decimal ends), and where
// an assignment "y = f" equals an equation (it keeps the key of f), and
// where a list of named values equals a point (each keeps its own):
// two values within the tolerance that round to different 10-digit
// decimals, and an exact rational compared with an irrational-looking
// expression that equals it numerically (a decimal such as 0.333333333333
// equals 2\sin(\pi/6)/3 within the tolerance but keeps its own exact key;
// likewise a transcendental expression equal to a rational whose
// denominator exceeds 1000).
package grade
