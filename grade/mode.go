package grade

import (
	"fmt"
	"slices"
	"strings"
)

// Mode selects how answers are compared.
type Mode string

const (
	// Strict reproduces the reference's MATH is_equiv, quirks included.
	Strict Mode = "strict"
	// Robust is what a careful grader accepts.
	Robust Mode = "robust"
)

// ParseMode validates a mode name from a flag or a config file.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Strict, Robust, Verified:
		return m, nil
	}
	return "", fmt.Errorf("unknown answer-checking mode %q (want %q, %q or %q=MODEL.gguf)", s, Strict, Robust, Verified)
}

// Equiv compares two extracted answers in the given mode. An unknown mode
// never calls answers equal.
func Equiv(mode Mode, a, b string) bool {
	switch mode {
	case Strict:
		return StrictEquiv(a, b)
	case Robust:
		return RobustEquiv(a, b)
	}
	return false
}

// RobustEquiv reports whether two extracted answers are the same answer to
// a careful grader; see the package documentation.
func RobustEquiv(a, b string) bool {
	equal, _ := RobustEquivRule(a, b)
	return equal
}

// Rule names the comparison that found two answers equal in robust mode.
type Rule string

// The rules, from the cheapest: RuleNone when the answers differ.
const (
	RuleNone     Rule = "none"        // not equal
	RuleExact    Rule = "exact"       // the same string once trimmed
	RuleText     Rule = "text"        // the same normalised text, word or choice letter
	RuleNumeric  Rule = "numeric"     // the same number, exactly or within 1e-9
	RuleApprox   Rule = "approximate" // a decimal that rounds the other side's exact value
	RuleSymbolic Rule = "symbolic"    // expressions or equations agreeing at the evaluation points
	RuleTuple    Rule = "tuple"       // points, vectors and matrices, element by element
	RuleSet      Rule = "set"         // sets and answer lists in any order; a list keeps its repeats
	RuleInterval Rule = "interval"    // intervals, unions and inequalities in one variable
	RuleRelation Rule = "relation"    // other inequalities, compared as f < 0 or f <= 0
	RuleEquation Rule = "equation"    // an assignment y = f against an equation of the same curve
)

// RobustEquivRule is RobustEquiv with the rule that decided it, for
// showing why two answers were judged equal.
func RobustEquivRule(a, b string) (bool, Rule) {
	if strings.TrimSpace(a) == strings.TrimSpace(b) {
		return true, RuleExact
	}
	fa, fb := parseAnswer(a), parseAnswer(b)
	switch {
	case fa.equal(fb):
		return true, fa.rule(fb)
	case fa.statesApprox(fb) || fb.statesApprox(fa):
		return true, RuleApprox
	case fa.sameCurve(fb):
		return true, RuleEquation
	}
	return false, RuleNone
}

// Key returns the canonical key of an answer: answers that RobustEquiv calls
// equal get the same key (exceptions in the package documentation), and
// the same answer gets the same key in every run.
func Key(answer string) string {
	return parseAnswer(answer).key()
}

// RobustEquivOrdered is RobustEquiv for questions whose answer list has an
// order ("list the roots from least to greatest"): answer lists must agree
// element by element, repeats included. Sets written with braces, \pm and
// everything else compare as in RobustEquiv.
func RobustEquivOrdered(a, b string) bool {
	fa, fb := parseAnswer(a), parseAnswer(b)
	if fa.order == nil || fb.order == nil {
		return fa.equal(fb)
	}
	return slices.EqualFunc(fa.order, fb.order, form.sameElement)
}

// Readable reports whether robust read an answer as mathematics, a word or
// a choice letter, rather than keeping text it could not parse ("11:21",
// "\frac{1}{"): a pair with an unreadable side is one robust judges by
// spelling alone, which an audit (umad grade --compare) shows apart.
func Readable(answer string) bool {
	f := parseAnswer(answer)
	if f.kind != kindText {
		return true
	}
	for i := 0; i < len(f.text); i++ {
		if !isASCIILetter(f.text[i]) {
			return false
		}
	}
	return true
}
