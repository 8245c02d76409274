package grade

// Equality of parsed answers, and the rule that decided it.

import (
	"math"
	"math/big"
	"math/cmplx"
)

// equal is robust equality of two forms.
func (a form) equal(b form) bool {
	if a.kind != b.kind {
		return namedPoint(a, b)
	}
	switch a.kind {
	case kindText, kindChoice:
		return a.text == b.text
	case kindScalar:
		return a.sc.equal(b.sc)
	case kindEquation:
		return a.sc.closeAt(b.sc)
	case kindRelation:
		return a.op == b.op && a.sc.closeAt(b.sc)
	case kindTuple, kindMatrix:
		if a.open != b.open || a.close != b.close || a.cols != b.cols || len(a.elems) != len(b.elems) {
			return false
		}
		ends := a.isInterval() && b.isInterval()
		for i := range a.elems {
			if !a.elems[i].equal(b.elems[i]) && !(ends && (cutsEnd(a.elems[i], b.elems[i]) || cutsEnd(b.elems[i], a.elems[i]))) {
				return false
			}
		}
		return true
	case kindSet, kindUnion:
		return sameElements(a.elems, b.elems)
	}
	return false
}

// sameElements matches the elements one to one, in any order: a list keeps
// its repeats ("1, 2, 2" is not "1, 2"), a set has none.
func sameElements(a, b []form) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
next:
	for _, x := range a {
		for i, y := range b {
			if !used[i] && x.sameElement(y) {
				used[i] = true
				continue next
			}
		}
		return false
	}
	return true
}

// sameElement is equality of elements of a set or list: the same value
// assigned to the same name, where the list names its variables.
func (a form) sameElement(b form) bool {
	return a.label == b.label && a.equal(b)
}

func (a scalar) equal(b scalar) bool {
	if a.inf != 0 || b.inf != 0 {
		return a.inf == b.inf
	}
	if a.exact != nil && b.exact != nil && a.exact.Cmp(b.exact) == 0 {
		return true
	}
	if a.percent != b.percent && (a.percent && a.hundredth().equal(b) || b.percent && b.hundredth().equal(a)) {
		return true
	}
	if a.places > 0 && b.places == 0 && roundsTo(a, b) || b.places > 0 && a.places == 0 && roundsTo(b, a) {
		return true
	}
	if a.exact != nil && b.exact != nil {
		return false
	}
	return a.closeAt(b)
}

// hundredth is a percentage as a fraction: 50\% is 0.5.
func (a scalar) hundredth() scalar {
	if a.exact != nil {
		return constScalar(new(big.Rat).Quo(a.exact, big.NewRat(100, 1)))
	}
	h := a
	h.percent, h.places = false, 0
	for k := range h.vals {
		h.vals[k] /= 100
	}
	return h
}

// roundsTo reports whether the decimal d is the constant v rounded or cut
// to d's places, and within 1e-6 of it relatively: 0.0833333 for 1/12, but
// not 0.083. A v that is itself a terminating decimal must be met exactly.
func roundsTo(d, v scalar) bool {
	if v.inf != 0 || v.lossy || d.lossy || v.exact != nil && terminates(v.exact) {
		return false
	}
	for k := 1; k < numPoints; k++ {
		if v.vals[k] != v.vals[0] {
			return false
		}
	}
	x, y := real(d.vals[0]), v.vals[0]
	diff := cmplx.Abs(complex(x, 0) - y)
	return diff <= math.Pow(10, -float64(d.places))*(1+1e-9) && diff <= 1e-6*cmplx.Abs(y)
}

// minEndPlaces is the fewest decimals an interval's end may be written
// with in place of its exact value: [0.25, 1.3333) is [1/4, 4/3).
const minEndPlaces = 4

// cutsEnd reports an interval end d written as a decimal of at least
// minEndPlaces places that is the exact end v rounded or cut to them.
func cutsEnd(d, v form) bool {
	if d.kind != kindScalar || v.kind != kindScalar || d.sc.places < minEndPlaces || v.sc.places > 0 {
		return false
	}
	if v.sc.inf != 0 || v.sc.lossy || v.sc.varies() || v.sc.exact != nil && terminates(v.sc.exact) {
		return false
	}
	x, y := real(d.sc.vals[0]), real(v.sc.vals[0])
	if imag(v.sc.vals[0]) != 0 {
		return false
	}
	unit := math.Pow(10, -float64(d.sc.places))
	cut := math.Trunc(y/unit) * unit
	return math.Abs(x-y) <= unit/2*(1+1e-9) || math.Abs(x-cut) <= unit*1e-6
}

// statesApprox reports an answer "a \approx d" against a decimal gold
// that d states and a rounds to: an approximation is the answer only
// where the gold is one.
func (a form) statesApprox(gold form) bool {
	if a.approx == nil || gold.kind != kindScalar || gold.sc.places == 0 || !a.approx.equal(gold) {
		return false
	}
	unit := math.Pow(10, -float64(gold.sc.places))
	return !a.sc.varies() && cmplx.Abs(a.sc.vals[0]-gold.sc.vals[0]) <= unit/2*(1+1e-9)
}

// sameCurve reports an assignment "y = f" and an equation of the same
// curve: "y = 2x - 1" is "2x - y - 1 = 0", but not "2x - 1 = 0".
func (a form) sameCurve(b form) bool {
	switch {
	case a.eq != nil && b.eq != nil:
		return a.eq.equal(*b.eq)
	case a.eq != nil:
		return a.eq.equal(b)
	case b.eq != nil:
		return b.eq.equal(a)
	}
	return false
}

// terminates reports whether r has a finite decimal expansion.
func terminates(r *big.Rat) bool {
	d := withoutTwosAndFives(r.Denom())
	return d.IsInt64() && d.Int64() == 1
}

// closeAt compares the values at every evaluation point: exactly where
// both are rational, else numerically unless either side is lossy. The
// sides must be defined over the reals at the same points.
func (a scalar) closeAt(b scalar) bool {
	if a.offReal != b.offReal {
		return false
	}
	for k := range a.vals {
		if a.at[k] != nil && b.at[k] != nil {
			if a.at[k].Cmp(b.at[k]) != 0 {
				return false
			}
			continue
		}
		if a.lossy || b.lossy || !finite(a.vals[k]) || !finite(b.vals[k]) || !closeTo(a.vals[k], b.vals[k]) {
			return false
		}
	}
	return true
}

// rule names the comparison that found a equal to b.
func (a form) rule(b form) Rule {
	switch a.kind {
	case kindScalar:
		switch {
		case a.sc.exact != nil && b.sc.exact != nil && a.sc.exact.Cmp(b.sc.exact) == 0, a.sc.percent != b.sc.percent:
			return RuleNumeric
		case (a.sc.places > 0) != (b.sc.places > 0):
			return RuleApprox
		case a.sc.varies() || b.sc.varies():
			return RuleSymbolic
		}
		return RuleNumeric
	case kindEquation:
		return RuleSymbolic
	case kindRelation:
		return RuleRelation
	case kindTuple:
		if a.isInterval() || b.isInterval() {
			return RuleInterval
		}
		return RuleTuple
	case kindMatrix:
		return RuleTuple
	case kindSet:
		return RuleSet
	case kindUnion:
		return RuleInterval
	}
	return RuleText
}

// isInterval tells an interval from a point: a bracket or an infinite end.
func (a form) isInterval() bool {
	if a.kind != kindTuple || len(a.elems) != 2 {
		return false
	}
	return a.interval || a.open == '[' || a.close == ']' || a.elems[0].sc.inf != 0 || a.elems[1].sc.inf != 0
}

// varies reports a value that depends on variables.
func (a scalar) varies() bool {
	for _, v := range a.vals[1:] {
		if v != a.vals[0] {
			return true
		}
	}
	return false
}
