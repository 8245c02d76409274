package grade

import (
	"testing"
)

func TestExtract(t *testing.T) {
	mathOpt := ExtractOptions{}
	gsmOpt := ExtractOptions{GSM8KHash: true}
	lastOpt := ExtractOptions{LastNumberFallback: true}
	phraseOpt := ExtractOptions{AnswerPhrase: true}
	proseOpt := ExtractOptions{LastMath: true}
	cases := []struct {
		response string
		opt      ExtractOptions
		want     string
		ok       bool
		why      string
	}{
		{`so $\boxed{42}$.`, mathOpt, "42", true, "plain box"},
		{`\boxed{\frac{1}{2}}`, mathOpt, `\frac{1}{2}`, true, "nested braces inside the box"},
		{`\boxed{\left\{1,2\right\}}`, mathOpt, `\left\{1,2\right\}`, true, "escaped braces do not close the box"},
		{`first \boxed{3} then \boxed{5}`, mathOpt, "5", true, "the last of several boxes"},
		{`\boxed{3} and finally \fbox{7}`, mathOpt, "7", true, "fbox counts as a box in robust extraction"},
		{`\fbox{7} then \boxed{8}`, mathOpt, "8", true, "a later boxed wins over an earlier fbox"},
		{`\boxed{3} and \boxed{5`, mathOpt, "", false, "the last box is unclosed: no answer"},
		{`\boxed{{2}`, mathOpt, "", false, "unbalanced nesting never closes"},
		{`\boxed{}`, mathOpt, "", false, "an empty box is no answer"},
		{`\boxed{   }`, mathOpt, "", false, "a blank box is no answer"},
		{`\boxed`, mathOpt, "", false, "a bare command at the end"},
		{`The answer is $\boxed 5$.`, mathOpt, "5", true, "space form ends at the dollar"},
		{"\\boxed 12.\nNext line", mathOpt, "12", true, "space form ends at the line and loses the full stop"},
		{`\[\boxed 7\]`, mathOpt, "7", true, "space form inside display math"},
		{`\boxed {9} is it`, mathOpt, "9", true, "a space before the brace is still the brace form"},
		{`\boxed{4}. Hope this helps! 17 apples.`, mathOpt, "4", true, "text after the box is ignored"},
		{`\boxed{\boxed{6}}`, mathOpt, "6", true, "nested boxes: the inner box starts last"},
		{`\boxedsymbol{3}`, mathOpt, "", false, "a longer control word is not a box"},
		{`no box, the answer is 12`, mathOpt, "", false, "MATH-style scoring has no fallback"},
		{`no box, the answer is 12`, lastOpt, "12", true, "fallback to the last number"},
		{`it costs 1,234 dollars`, lastOpt, "1234", true, "fallback drops thousands commas"},
		{"is $400 000 - $282 000 = $118 000.", lastOpt, "118000", true, "GSM8K's thousands spaces"},
		{`scores 7 12`, lastOpt, "12", true, "a space before two digits does not join numbers"},
		{`points (1,2)`, lastOpt, "2", true, "a comma before a short group is not a thousands comma"},
		{`x = -3.5.`, lastOpt, "-3.5", true, "negative decimal before a full stop"},
		{`it is .5 now`, lastOpt, ".5", true, "a decimal without a leading zero"},
		{`ratio 3/4`, lastOpt, "3/4", true, "a simple fraction"},
		{`no digits here`, lastOpt, "", false, "nothing to fall back to"},
		{"Natalia sold 48/2 = 24 clips.\n#### 72", gsmOpt, "72", true, "GSM8K final line"},
		{"#### 1,200", gsmOpt, "1200", true, "GSM8K answer with a thousands comma"},
		{"#### -5", gsmOpt, "-5", true, "negative GSM8K answer"},
		{"#### 72", mathOpt, "", false, "#### is off unless asked for"},
		{"#### none", gsmOpt, "", false, "#### without digits"},
		{"#### 5 but \\boxed{6}", gsmOpt, "6", true, "a box wins over ####"},
		{"", lastOpt, "", false, "empty response"},
		{`\boxed{1}, \boxed{2}, \boxed{3}`, mathOpt, "1, 2, 3", true, "a set answered in several boxes is one answer"},
		{`$\boxed{1}$ and $\boxed{-1}$.`, mathOpt, "1, -1", true, "boxes joined by a word between math spans"},
		{`\boxed{1} \quad \boxed{2}`, mathOpt, "1, 2", true, "boxes separated by a quad"},
		{`\boxed{1}\boxed{2}`, mathOpt, "2", true, "boxes side by side without a separator are not a list"},
		{`\boxed{4}, so the final answer is \boxed{5}`, mathOpt, "5", true, "words between boxes: the last box alone"},
		{`\boxed{}, \boxed{5}`, mathOpt, "5", true, "an empty box does not join"},
		{`\boxed{0} and \boxed{}`, mathOpt, "", false, "an empty last box is no answer even after a full one"},
		{`The answer is $\frac{5}{6}$.`, phraseOpt, `\frac{5}{6}`, true, "an answer phrase with a math span"},
		{"Final Answer: 12 apples\nbye", phraseOpt, "12 apples", true, "a phrase ends at the line"},
		{`so the answer is 7. Then 9.`, phraseOpt, "7", true, "a phrase ends at the sentence"},
		{`The answer is $\frac{5}{6}$.`, mathOpt, "", false, "phrases are off unless asked for"},
		{`The answer is`, phraseOpt, "", false, "a phrase with nothing after it"},
		{"\xbcAnswer is 5", phraseOpt, "5", true, "invalid UTF-8 before the phrase does not shift it (found by FuzzExtract)"},
		{`so $x = \frac{5}{6}$`, lastOpt, `\frac{5}{6}`, true, "the last number is part of a math span: the span after its last ="},
		{`it is \(\sqrt{16}\).`, lastOpt, `\sqrt{16}`, true, `inside \( \)`},
		{`it is \frac{5}{6}`, lastOpt, "", false, "a macro argument outside math is no answer, not 6"},
		{`it is $x = 6$.`, lastOpt, "6", true, "a plain number in a span is the number"},
		{`had $5 and earned 10 more, $ left`, lastOpt, "10", true, "text between dollar prices is not a math span"},
		{`costs $\$1,200$ in all`, lastOpt, "1200", true, "an escaped dollar does not open a span"},
		{`\boxed{3} apples and \boxed{5} pears`, mathOpt, "3, 5", true, "a unit word after a box, then a separator: one answer"},
		{`\boxed{3} apples then \boxed{5}`, mathOpt, "5", true, "a word without a separator: the last box alone"},
		{`So the result is \(17\).`, proseOpt, "17", true, "the last math span of prose"},
		{`So the result is \(17\).`, mathOpt, "", false, "math spans are off unless asked for"},
		{`Hence $y \le 4$ holds for every $x$.`, proseOpt, `y \le 4`, true, "a span that only names a variable is not the answer"},
		{`Adding, we get \[2+3=5.\]`, proseOpt, "5", true, "a computation's result"},
		{`Thus $x = 4$.`, proseOpt, "x = 4", true, "an assignment keeps its name"},
		{`The sum is $5$, not $6$.`, proseOpt, "6", true, "the last span, as the symbolic graders take it"},
		{`$1$ and $2$`, proseOpt, "", false, "spans joined by connectives are a list, not prose"},
		{`The roots are $1$, $2$ and $3$.`, proseOpt, "1, 2, 3", true, "the last spans that only commas and and separate are one list"},
		{`We get $1$ and then $2$.`, proseOpt, "2", true, "spans with words between them are not a list"},
		{`It costs \$5 or \$6.`, proseOpt, "", false, "escaped dollars open no span"},
	}
	for _, c := range cases {
		got, ok := Extract(c.response, c.opt)
		if got != c.want || ok != c.ok {
			t.Errorf("Extract(%q, %+v) = %q, %v; want %q, %v (%s)", c.response, c.opt, got, ok, c.want, c.ok, c.why)
		}
	}
}

func TestLastBoxedOnlyStringAndRemoveBoxed(t *testing.T) {
	cases := []struct {
		in        string
		boxed     string
		found     bool
		inner     string
		removedOK bool
		why       string
	}{
		{`a \boxed{1} b \boxed{2} c`, `\boxed{2}`, true, "2", true, "last box"},
		{`\boxed{\frac{1}{2}}.`, `\boxed{\frac{1}{2}}`, true, `\frac{1}{2}`, true, "nested braces"},
		{`\boxed 5$ and \boxed{6}`, `\boxed 5`, true, "5", true, `quirk: any "\boxed " wins over a later \boxed{}`},
		{`\boxed 5 and more`, `\boxed 5 and more`, true, "5 and more", true, "space form runs to the end without a dollar"},
		{`\fbox{3}`, `\fbox{3}`, true, "", false, "fbox is found but remove_boxed rejects it"},
		{`\boxed{3`, "", false, "", false, "unclosed"},
		{`no box`, "", false, "", false, "nothing"},
		{`\boxed}{x}`, "", false, "", false, "a stray closer makes the count negative; it never returns to zero"},
		{`\boxedx{1}`, `\boxedx{1}`, true, "", false, "rfind matches a prefix of a longer word; the prefix check then fails"},
		{`\boxed{\{}`, `\boxed{\{}`, false, "", false, `quirk: "\{" counts as an opening brace`},
	}
	for _, c := range cases {
		boxed, found := LastBoxedOnlyString(c.in)
		if !c.found {
			if found {
				t.Errorf("LastBoxedOnlyString(%q) = %q, want none (%s)", c.in, boxed, c.why)
			}
			continue
		}
		if !found || boxed != c.boxed {
			t.Errorf("LastBoxedOnlyString(%q) = %q, %v; want %q (%s)", c.in, boxed, found, c.boxed, c.why)
			continue
		}
		inner, ok := RemoveBoxed(boxed)
		if ok != c.removedOK || inner != c.inner {
			t.Errorf("RemoveBoxed(%q) = %q, %v; want %q, %v (%s)", boxed, inner, ok, c.inner, c.removedOK, c.why)
		}
	}
}

func TestStripString(t *testing.T) {
	cases := []struct {
		in, want string
		fails    bool
		why      string
	}{
		{`\left( 3, \frac{\pi}{2} \right)`, `(3,\frac{\pi}{2})`, false, "left/right and spaces"},
		{`\dfrac12`, `\frac{1}{2}`, false, "dfrac and fix_fracs"},
		{`\frac1{72}`, `\frac{1}{72}`, false, "brace before the denominator"},
		{`\frac{72}1`, `\frac{72}1`, false, "a braced numerator stops fix_fracs"},
		{`\sqrt3x`, `\sqrt{3}x`, false, "fix_sqrt takes one character"},
		{`\sqrtéx`, `\sqrt{é}x`, false, "one code point, not one byte"},
		{`ék=5`, `5`, false, "two code points before = are dropped"},
		{`abc=5`, `abc=5`, false, "three characters before = are kept"},
		{`a=b=c`, `a=b=c`, false, "two = signs are kept"},
		{`5 \text{ cm}`, `5`, false, "unit after a space"},
		{`.5`, `\frac{1}{2}`, false, "leading point then the 0.5 rule"},
		{``, ``, false, "empty stays empty"},
		{`-3/4`, `\frac{-3}{4}`, false, "canonical negative integers"},
		{`-0/4`, `-0/4`, false, "-0 is not what Python prints for int('-0')"},
		{`a/b`, `a/b`, false, "non-integers stay"},
		{`1/2/3`, `1/2/3`, false, "two slashes stay"},
		{"1\n000", "1000", false, "newlines removed"},
		{`a\text{ b}\text{ c}`, "", true, "two unit texts raise"},
		{`2\sqrt`, "", true, "a bare sqrt raises"},
		{`\frac`, "", true, "a bare frac raises"},
		{`\frac\frac12`, "", true, "an empty piece between two fracs raises"},
		{`\frac1`, `\frac1`, false, "one character after frac: input returned unchanged"},
		{`3\frac{1}{2}+\frac1`, `3\frac{1}{2}+\frac1`, false, "fix_fracs discards its earlier rewrites too"},
	}
	for _, c := range cases {
		got, err := StripString(c.in)
		if c.fails {
			if err == nil {
				t.Errorf("StripString(%q) = %q, want an error (%s)", c.in, got, c.why)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("StripString(%q) = %q, %v; want %q (%s)", c.in, got, err, c.want, c.why)
		}
	}
}

func TestStrictScore(t *testing.T) {
	cases := []struct {
		response, gold string
		want           bool
		why            string
	}{
		{`so \boxed{\dfrac{1}{2}}.`, `\frac12`, true, "boxed fraction"},
		{`\fbox{5}`, "5", false, "fbox always scores 0 in strict"},
		{`\boxed 7$ then \boxed{5}`, "5", false, "the space form wins even though it comes first"},
		{`\boxed 7$ then \boxed{5}`, "7", true, "and it is what gets graded"},
		{`\boxed{1,000}`, "1000", false, "no thousands handling"},
		{`answer: 5`, "5", false, "no box, no score"},
		{`\boxed{5`, "5", false, "unclosed box"},
		{`\boxed{025}`, "25", false, "leading zero kept"},
	}
	for _, c := range cases {
		if got := StrictScore(c.response, c.gold); got != c.want {
			t.Errorf("StrictScore(%q, %q) = %v, want %v (%s)", c.response, c.gold, got, c.want, c.why)
		}
	}
}

func TestGradeAndModes(t *testing.T) {
	if m, err := ParseMode("robust"); err != nil || m != Robust {
		t.Errorf(`ParseMode("robust") = %q, %v`, m, err)
	}
	if m, err := ParseMode("strict"); err != nil || m != Strict {
		t.Errorf(`ParseMode("strict") = %q, %v`, m, err)
	}
	if _, err := ParseMode("lenient"); err == nil {
		t.Error(`ParseMode("lenient") accepted an unknown mode`)
	}
	if Equiv(Mode("lenient"), "1", "1") {
		t.Error("an unknown mode must not call answers equal")
	}
	if (Verdict{Strict: true, Robust: true}).Correct(Mode("lenient")) {
		t.Error("an unknown mode must not call a verdict correct")
	}
	cases := []struct {
		mode           Mode
		response, gold string
		opt            ExtractOptions
		want           bool
		why            string
	}{
		{Robust, `\fbox{1,000}`, "1000", ExtractOptions{}, true, "robust extracts fbox and reads the comma"},
		{Strict, `\fbox{1,000}`, "1000", ExtractOptions{}, false, "strict rejects both"},
		{Robust, "#### 72", "72", ExtractOptions{GSM8KHash: true}, true, "GSM8K line in robust"},
		{Strict, "#### 72", "72", ExtractOptions{GSM8KHash: true}, false, "strict ignores extraction options, like the reference"},
		{Robust, "the answer is 3", "3", ExtractOptions{}, false, "no box and no fallback"},
		{Robust, "the answer is 3", "3", ExtractOptions{LastNumberFallback: true}, true, "fallback on"},
	}
	for _, c := range cases {
		if v, _ := Grade(c.response, c.gold, c.opt); v.Correct(c.mode) != c.want {
			t.Errorf("Grade(%q, %q).Correct(%s) = %v, want %v (%s)", c.response, c.gold, c.mode, !c.want, c.want, c.why)
		}
	}
}
