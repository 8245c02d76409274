package reward

import (
	"hash/fnv"
	"math"
	"math/big"
	"math/cmplx"
)

// Evaluation limits: exact arithmetic gives up (and numeric evaluation
// takes over) beyond these sizes, so no input can make it slow.
const (
	maxExactBits = 1 << 14      // numerator plus denominator bits of any intermediate
	maxExactExp  = maxExactBits // |n| in an exact x^n
	maxFactorial = 300
	numPoints    = 4 // points at which expressions with variables are compared
)

// exact evaluates n as a rational number; ok is false when n is not one
// (variables, pi, i, irrational roots) or is too large to compute exactly.
func exact(n *node) (*big.Rat, bool) {
	var r *big.Rat
	switch n.op {
	case opNum:
		return n.num, true
	case opNeg:
		a, ok := exact(n.args[0])
		if !ok {
			return nil, false
		}
		r = new(big.Rat).Neg(a)
	case opAdd, opSub, opMul, opDiv:
		a, ok := exact(n.args[0])
		if !ok {
			return nil, false
		}
		b, ok := exact(n.args[1])
		if !ok {
			return nil, false
		}
		r = new(big.Rat)
		switch n.op {
		case opAdd:
			r.Add(a, b)
		case opSub:
			r.Sub(a, b)
		case opMul:
			r.Mul(a, b)
		case opDiv:
			if b.Sign() == 0 {
				return nil, false
			}
			r.Quo(a, b)
		}
	case opPow:
		return exactPow(n)
	case opRoot:
		return exactRoot(n)
	case opAbs:
		a, ok := exact(n.args[0])
		if !ok {
			return nil, false
		}
		r = new(big.Rat).Abs(a)
	case opFact, opBinom:
		return exactCombinatorial(n)
	default:
		return nil, false
	}
	return r, ratBits(r) <= maxExactBits
}

func ratBits(r *big.Rat) int { return r.Num().BitLen() + r.Denom().BitLen() }

func exactPow(n *node) (*big.Rat, bool) {
	base, ok := exact(n.args[0])
	if !ok {
		return nil, false
	}
	e, ok := exact(n.args[1])
	if !ok || !e.IsInt() || !e.Num().IsInt64() {
		return nil, false
	}
	k := e.Num().Int64()
	if k > maxExactExp || k < -maxExactExp || int64(ratBits(base))*abs64(k) > maxExactBits {
		return nil, false
	}
	if base.Sign() == 0 && k < 0 {
		return nil, false
	}
	exp := big.NewInt(abs64(k))
	num := new(big.Int).Exp(base.Num(), exp, nil)
	den := new(big.Int).Exp(base.Denom(), exp, nil)
	if k < 0 {
		num, den = den, num
	}
	return new(big.Rat).SetFrac(num, den), true
}

// exactRoot succeeds only for perfect powers: \sqrt{9/4} = 3/2.
func exactRoot(n *node) (*big.Rat, bool) {
	x, ok := exact(n.args[0])
	if !ok {
		return nil, false
	}
	idx, ok := exact(n.args[1])
	if !ok || !idx.IsInt() || !idx.Num().IsInt64() {
		return nil, false
	}
	k := idx.Num().Int64()
	if k < 1 || k > 64 || (x.Sign() < 0 && k%2 == 0) {
		return nil, false
	}
	num, ok := intRoot(new(big.Int).Abs(x.Num()), k)
	if !ok {
		return nil, false
	}
	den, ok := intRoot(x.Denom(), k)
	if !ok {
		return nil, false
	}
	if x.Sign() < 0 {
		num.Neg(num)
	}
	return new(big.Rat).SetFrac(num, den), true
}

// intRoot returns the exact k-th root of x >= 0 when x is a perfect power.
func intRoot(x *big.Int, k int64) (*big.Int, bool) {
	if k == 1 {
		return new(big.Int).Set(x), true
	}
	if k == 2 {
		r := new(big.Int).Sqrt(x)
		return r, new(big.Int).Mul(r, r).Cmp(x) == 0
	}
	if x.BitLen() > 48*int(k) { // a float64 guess of the root would be inexact
		return nil, false
	}
	f, _ := new(big.Float).SetInt(x).Float64()
	guess := int64(math.Round(math.Pow(f, 1/float64(k))))
	for _, r := range []int64{guess, guess - 1, guess + 1} {
		root := big.NewInt(r)
		if r >= 0 && new(big.Int).Exp(root, big.NewInt(k), nil).Cmp(x) == 0 {
			return root, true
		}
	}
	return nil, false
}

func exactCombinatorial(n *node) (*big.Rat, bool) {
	var ints [2]int64
	for i, a := range n.args {
		v, ok := exact(a)
		if !ok || !v.IsInt() || !v.Num().IsInt64() {
			return nil, false
		}
		ints[i] = v.Num().Int64()
		if ints[i] < 0 || ints[i] > maxFactorial {
			return nil, false
		}
	}
	if n.op == opFact {
		return new(big.Rat).SetInt(new(big.Int).MulRange(1, ints[0])), true
	}
	if ints[1] > ints[0] {
		return new(big.Rat), true
	}
	return new(big.Rat).SetInt(new(big.Int).Binomial(ints[0], ints[1])), true
}

func abs64(k int64) int64 {
	if k < 0 {
		return -k
	}
	return k
}

// pointValue is the value variable name takes at evaluation point k: a
// fixed function of the name, so the same expression gets the same values
// in every run and on every machine. Values lie in [0.5, 3) to stay clear
// of the branch cuts of roots and logarithms.
func pointValue(name string, k int) float64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	u := float64(mix64(h.Sum64()+uint64(k)*0x9e3779b97f4a7c15)>>11) / (1 << 53)
	return 0.5 + 2.5*u
}

// mix64 is the splitmix64 finaliser: it spreads the bits of consecutive
// inputs, which FNV alone would map to nearly equal values.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// numeric evaluates n at point k in complex arithmetic.
func numeric(n *node, k int) complex128 {
	switch n.op {
	case opNum:
		f, _ := n.num.Float64()
		return complex(f, 0)
	case opSym:
		return complex(pointValue(n.name, k), 0)
	case opPi:
		return math.Pi
	case opImag:
		return 1i
	case opInf:
		return cmplx.NaN()
	case opNeg:
		return -numeric(n.args[0], k)
	case opAdd:
		return numeric(n.args[0], k) + numeric(n.args[1], k)
	case opSub:
		return numeric(n.args[0], k) - numeric(n.args[1], k)
	case opMul:
		return numeric(n.args[0], k) * numeric(n.args[1], k)
	case opDiv:
		return numeric(n.args[0], k) / numeric(n.args[1], k)
	case opPow:
		return numPow(numeric(n.args[0], k), numeric(n.args[1], k))
	case opRoot:
		return numRoot(numeric(n.args[0], k), numeric(n.args[1], k))
	case opAbs:
		return complex(cmplx.Abs(numeric(n.args[0], k)), 0)
	case opFact:
		x := numeric(n.args[0], k)
		if imag(x) != 0 || real(x) < 0 || real(x) > 170 {
			return cmplx.NaN()
		}
		return complex(math.Gamma(real(x)+1), 0)
	case opBinom:
		a, b := numeric(n.args[0], k), numeric(n.args[1], k)
		if imag(a) != 0 || imag(b) != 0 || real(a) > 170 {
			return cmplx.NaN()
		}
		return complex(math.Gamma(real(a)+1)/(math.Gamma(real(b)+1)*math.Gamma(real(a)-real(b)+1)), 0)
	case opFunc:
		return numFunc(n, k)
	}
	return cmplx.NaN()
}

// numPow uses repeated squaring for small integer exponents, which keeps
// (-2)^3 real and x^2 exact to the last bit.
func numPow(b, e complex128) complex128 {
	if imag(e) == 0 && real(e) == math.Trunc(real(e)) && math.Abs(real(e)) <= 64 {
		k := int(real(e))
		neg := k < 0
		if neg {
			k = -k
		}
		r := complex(1, 0)
		for sq := b; k > 0; k >>= 1 {
			if k&1 == 1 {
				r *= sq
			}
			sq *= sq
		}
		if neg {
			return 1 / r
		}
		return r
	}
	return cmplx.Pow(realZero(b), e)
}

// realZero turns a negative zero imaginary part, which negating a real
// number leaves, into +0: otherwise \sqrt{-1} lands on the other side of
// the branch cut and is -i.
func realZero(x complex128) complex128 {
	if imag(x) == 0 {
		return complex(real(x), 0)
	}
	return x
}

// numRoot takes the real root of a negative real number for odd indices
// (\sqrt[3]{-8} = -2), the principal root otherwise.
func numRoot(x, idx complex128) complex128 {
	x = realZero(x)
	if idx == 2 {
		return cmplx.Sqrt(x)
	}
	if imag(x) == 0 && real(x) < 0 && imag(idx) == 0 && math.Mod(real(idx), 2) == 1 {
		return complex(-math.Pow(-real(x), 1/real(idx)), 0)
	}
	return cmplx.Pow(x, 1/idx)
}

func numFunc(n *node, k int) complex128 {
	x := numeric(n.args[0], k)
	switch n.name {
	case "sin":
		return cmplx.Sin(x)
	case "cos":
		return cmplx.Cos(x)
	case "tan":
		return cmplx.Tan(x)
	case "cot":
		return 1 / cmplx.Tan(x)
	case "sec":
		return 1 / cmplx.Cos(x)
	case "csc":
		return 1 / cmplx.Sin(x)
	case "arcsin":
		return cmplx.Asin(x)
	case "arccos":
		return cmplx.Acos(x)
	case "arctan":
		return cmplx.Atan(x)
	case "sinh":
		return cmplx.Sinh(x)
	case "cosh":
		return cmplx.Cosh(x)
	case "tanh":
		return cmplx.Tanh(x)
	case "exp":
		return cmplx.Exp(x)
	case "ln":
		return cmplx.Log(x)
	case "log":
		if len(n.args) > 1 {
			return cmplx.Log(x) / cmplx.Log(numeric(n.args[1], k))
		}
		return cmplx.Log(x)
	}
	return cmplx.NaN()
}

// hasVars reports whether n depends on a variable.
func hasVars(n *node) bool {
	if n.op == opSym {
		return true
	}
	for _, a := range n.args {
		if hasVars(a) {
			return true
		}
	}
	return false
}

func finite(c complex128) bool {
	return !math.IsNaN(real(c)) && !math.IsNaN(imag(c)) && !math.IsInf(real(c), 0) && !math.IsInf(imag(c), 0)
}

// Tolerances of numeric comparison: relative, with an absolute floor for
// values that should be zero.
const (
	relTol = 1e-9
	absTol = 1e-12
)

func closeTo(a, b complex128) bool {
	d := cmplx.Abs(a - b)
	return d <= absTol || d <= relTol*math.Max(cmplx.Abs(a), cmplx.Abs(b))
}
