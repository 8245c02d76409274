package grade

import "testing"

// The pairs a verifier is asked about are those no rule decides: an unparsed side, or a
// word or choice letter against mathematics. Pairs a rule decides, equal or not, stay
// robust's.
func TestDecided(t *testing.T) {
	for _, c := range []struct {
		answer, gold string
		decided      bool
	}{
		{"1,000", "1000", true},        // equal by a rule
		{"7", "8", true},               // unequal numbers: the numeric rule decides
		{"(1,2)", "3", true},           // a point against a number: never equal
		{"yes", "three", true},         // two words: the text rule decides
		{"(B)", "C", true},             // two choices
		{"x = 3", "3", true},           // a label is dropped: equal
		{"11:21", "11:21", true},       // the same text: exact
		{"three", "3", false},          // a word against a number
		{"(B)", "\\frac{1}{2}", false}, // a choice against the option's value
		{"11:21", "681", false},        // a side robust could not parse
		{"\\frac{1}{", "1", false},
	} {
		if got := GradeAnswer(c.answer, c.gold).Decided(c.answer, c.gold); got != c.decided {
			t.Errorf("Decided(%q, %q) = %v, want %v", c.answer, c.gold, got, c.decided)
		}
	}
}

// Verified counts a pair correct when robust does or the verifier said equal; no other
// verifier verdict makes a pair correct.
func TestVerifiedCorrect(t *testing.T) {
	for _, c := range []struct {
		v    Verdict
		want bool
	}{
		{Verdict{Robust: true}, true},
		{Verdict{Verifier: CheckEqual}, true},
		{Verdict{Verifier: CheckNotEqual}, false},
		{Verdict{Verifier: CheckUndecided}, false},
		{Verdict{Verifier: CheckSkipped}, false},
		{Verdict{}, false},
	} {
		if got := c.v.Correct(Verified); got != c.want {
			t.Errorf("%+v.Correct(Verified) = %v, want %v", c.v, got, c.want)
		}
		if c.v.Correct(Robust) != c.v.Robust {
			t.Errorf("%+v: the verifier changed robust's own verdict", c.v)
		}
	}
	if m, err := ParseMode("robust+verifier"); err != nil || m != Verified {
		t.Errorf(`ParseMode("robust+verifier") = %q, %v`, m, err)
	}
}
