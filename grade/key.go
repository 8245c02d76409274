package grade

// Canonical keys: answers that robust equality calls equal get the same key, so answer
// distributions can be counted.

import (
	"math"
	"math/big"
	"math/cmplx"
	"slices"
	"strconv"
	"strings"
)

// key is the canonical key of a form; see the package documentation.
func (a form) key() string {
	switch a.kind {
	case kindText:
		return "text:" + strconv.Quote(a.text)
	case kindChoice:
		return "choice:" + a.text
	case kindScalar:
		return a.sc.key()
	case kindEquation:
		return "eq(" + a.sc.valsKey() + ")"
	case kindRelation:
		return "rel" + a.op + "(" + a.sc.valsKey() + ")"
	case kindTuple:
		return string(a.open) + joinKeys(a.elems, false) + string(a.close)
	case kindSet:
		return "{" + joinKeys(a.elems, true) + "}"
	case kindUnion:
		return "union{" + joinKeys(a.elems, true) + "}"
	case kindMatrix:
		var b strings.Builder
		b.WriteString("matrix[")
		for i, e := range a.elems {
			if i > 0 {
				if i%a.cols == 0 {
					b.WriteByte(';')
				} else {
					b.WriteByte(',')
				}
			}
			b.WriteString(e.key())
		}
		b.WriteByte(']')
		return b.String()
	}
	return ""
}

// joinKeys joins the element keys, sorted for sets and lists, whose
// repeats count: a set has none left.
func joinKeys(elems []form, sorted bool) string {
	keys := make([]string, len(elems))
	for i, e := range elems {
		keys[i] = e.key()
		if e.label != "" {
			keys[i] = e.label + "=" + keys[i]
		}
	}
	if sorted {
		slices.Sort(keys)
	}
	return strings.Join(keys, ",")
}

func (a scalar) key() string {
	switch {
	case a.inf > 0:
		return "inf"
	case a.inf < 0:
		return "-inf"
	case a.exact != nil:
		return a.exact.RatString()
	}
	if a.constant() {
		if a.at[0] != nil {
			return a.at[0].RatString()
		}
		return complexKey(a.vals[0])
	}
	return "f(" + a.valsKey() + ")"
}

// constant reports an expression whose variables cancel: exactly where it
// is rational everywhere, else within the tolerance.
func (a scalar) constant() bool {
	if a.offReal != 0 {
		return false
	}
	for k := range a.vals {
		if a.at[k] != nil && a.at[0] != nil {
			if a.at[k].Cmp(a.at[0]) != 0 {
				return false
			}
		} else if a.at[k] != nil || a.at[0] != nil || !closeTo(a.vals[k], a.vals[0]) {
			return false
		}
	}
	return true
}

// valsKey prints the values of a non-constant expression: exact where they
// are rational, else not matched to fractions, which would only make
// accidental fractions; "!" marks a point where it is undefined over the
// reals.
func (a scalar) valsKey() string {
	keys := make([]string, len(a.vals))
	for i, v := range a.vals {
		if a.offReal&(1<<i) != 0 {
			keys[i] = "!"
		}
		if a.at[i] != nil {
			keys[i] += a.at[i].RatString()
			continue
		}
		keys[i] += approxKey(real(v))
		if im := imag(v); math.Abs(im) > math.Max(absTol, relTol*cmplx.Abs(v)) {
			keys[i] += "," + approxKey(im) + "i"
		}
	}
	return strings.Join(keys, ";")
}

// complexKey prints a numeric value: "6+9i", "3/4", "~1.414213562".
func complexKey(v complex128) string {
	re, im := real(v), imag(v)
	if math.Abs(im) <= math.Max(absTol, relTol*cmplx.Abs(v)) {
		return realKey(re)
	}
	imKey := realKey(math.Abs(im))
	if math.Abs(re) <= math.Max(absTol, relTol*cmplx.Abs(v)) {
		re = 0
	}
	sign := "+"
	if im < 0 {
		sign = "-"
	}
	return realKey(re) + sign + imKey + "i"
}

// A numeric value that is within fractionTol of a fraction with
// denominator at most maxKeyDenominator prints as that fraction, so that
// \sin\frac{\pi}{6} and \frac{1}{2} share a key. fractionTol is much
// tighter than relTol: it absorbs floating-point error, not approximation.
const (
	maxKeyDenominator = 1000
	fractionTol       = 1e-11
)

func realKey(x float64) string {
	if math.Abs(x) <= absTol {
		return "0"
	}
	tol := fractionTol * math.Abs(x)
	for q := 1.0; q <= maxKeyDenominator; q++ {
		p := math.Round(x * q)
		if math.Abs(p) >= 1<<53 {
			break
		}
		if math.Abs(x-p/q) <= tol {
			return big.NewRat(int64(p), int64(q)).RatString()
		}
	}
	return approxKey(x)
}

func approxKey(x float64) string {
	if math.Abs(x) <= absTol {
		return "0"
	}
	return "~" + strconv.FormatFloat(x, 'g', 10, 64)
}
