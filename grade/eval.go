package grade

import (
	"hash/fnv"
	"math"
	"math/big"
	"math/bits"
	"math/cmplx"
)

// Evaluation limits: exact arithmetic gives up (and numeric evaluation
// takes over) beyond these sizes, so no input can make it slow.
const (
	maxExactBits = 1 << 14      // numerator plus denominator bits of any intermediate
	maxExactExp  = maxExactBits // |n| in an exact x^n
	maxFactorial = 300
	numPoints    = 8 // points at which expressions with variables are compared
)

// value is an expression's value at one evaluation point.
type value struct {
	r    *big.Rat   // the exact value when it is rational and small enough, else nil
	c    complex128 // the numeric value, set where r is nil or enters a floating-point operation
	vary bool       // the value depends on a variable
}

// evaluator evaluates an expression at evaluation point k: exactly while
// the value is rational, in complex floating point from the first
// operation that is not (a root that is not a perfect power, \pi, a
// function) or whose exact result is too large.
type evaluator struct {
	k int
	// lossy: float64 lost what the answer wrote, so a numeric comparison
	// cannot decide: a constant with more significant digits than float64
	// holds entered a floating-point operation, or a value that is not
	// zero underflowed or overflowed.
	lossy bool
	// offReal: an operation took real arguments that depend on a variable
	// out of the reals (\sqrt{x} or \ln x at x < 0): over the reals the
	// expression is undefined at this point.
	offReal bool
	work    int // bits of exact results so far, bounded by maxExactWork
}

// maxExactWork bounds the exact arithmetic of one evaluation: beyond it
// floating point takes over.
const maxExactWork = 1 << 17

func (e *evaluator) eval(n *node) value {
	switch n.op {
	case opNum:
		return rational(n.num, false)
	case opSym:
		return rational(pointValue(n.name, e.k), true)
	case opPi:
		return value{c: math.Pi}
	case opImag:
		return value{c: 1i}
	case opInf:
		return value{c: cmplx.NaN()}
	}
	args := make([]value, len(n.args))
	v := value{}
	for i, a := range n.args {
		args[i] = e.eval(a)
		v.vary = v.vary || args[i].vary
	}
	if e.work < maxExactWork {
		if r, ok := exactOp(n, args); ok {
			e.work += ratBits(r)
			v.r = r
			return v
		}
	}
	realArgs := true
	for i, a := range args {
		if a.r != nil {
			args[i].c = ratComplex(a.r)
			e.lossy = e.lossy || !fitsFloat(a.r, !a.vary)
		}
		realArgs = realArgs && imag(args[i].c) == 0
	}
	v.c = floatOp(n, args)
	if realArgs && v.vary && imag(v.c) != 0 {
		e.offReal = true
	}
	if underflowed(n, args, v.c) {
		e.lossy = true
	}
	return v
}

func rational(r *big.Rat, vary bool) value {
	return value{r: r, vary: vary}
}

func ratComplex(r *big.Rat) complex128 {
	f, _ := r.Float64()
	return complex(f, 0)
}

// smallestNormal is the least float64 that keeps all 53 bits.
const smallestNormal = 0x1p-1022

// fitsFloat reports whether float64 holds r as well as the answer wrote it:
// within range and, for a constant, with at most 53 significant bits once
// the factors 2 and 5 (its decimal scale) are taken out, so that 1/3 and
// 6\cdot10^{23} fit and 10^{40}+1 does not.
func fitsFloat(r *big.Rat, constant bool) bool {
	f, _ := r.Float64()
	if r.Sign() != 0 && (math.Abs(f) < smallestNormal || math.IsInf(f, 0)) {
		return false
	}
	return !constant || withoutTwosAndFives(r.Num()).BitLen() <= 53 && withoutTwosAndFives(r.Denom()).BitLen() <= 53
}

// withoutTwosAndFives divides x by 2 and 5 as often as they divide it.
func withoutTwosAndFives(x *big.Int) *big.Int {
	d := new(big.Int).Abs(x)
	if d.Sign() == 0 {
		return d
	}
	d.Rsh(d, d.TrailingZeroBits())
	m := new(big.Int)
	for _, p := range []int64{1220703125, 5} { // 5^13, then 5
		for {
			q, rem := new(big.Int).QuoRem(d, big.NewInt(p), m)
			if rem.Sign() != 0 {
				break
			}
			d = q
		}
	}
	return d
}

// underflowed reports a result of zero or below the normal range where the
// exact result is not zero: a product, quotient, power, root or exponential
// of numbers that are not zero.
func underflowed(n *node, args []value, c complex128) bool {
	if c != 0 {
		return cmplx.Abs(c) < smallestNormal
	}
	if n.op != opMul && n.op != opDiv && n.op != opPow && n.op != opRoot && (n.op != opFunc || n.name != "exp") {
		return false
	}
	for _, a := range args {
		if a.c == 0 {
			return false
		}
	}
	return true
}

// exactOp applies n's operation to exact arguments; ok is false when an
// argument or the result is not rational or is too large.
func exactOp(n *node, args []value) (*big.Rat, bool) {
	for _, a := range args {
		if a.r == nil {
			return nil, false
		}
	}
	var r *big.Rat
	switch n.op {
	case opNeg:
		r = new(big.Rat).Neg(args[0].r)
	case opAdd:
		r = new(big.Rat).Add(args[0].r, args[1].r)
	case opSub:
		r = new(big.Rat).Sub(args[0].r, args[1].r)
	case opMul:
		r = new(big.Rat).Mul(args[0].r, args[1].r)
	case opDiv:
		if args[1].r.Sign() == 0 {
			return nil, false
		}
		r = new(big.Rat).Quo(args[0].r, args[1].r)
	case opPow:
		return exactPow(args[0].r, args[1].r)
	case opRoot:
		return exactRoot(args[0].r, args[1].r)
	case opAbs:
		r = new(big.Rat).Abs(args[0].r)
	case opFact, opBinom:
		return exactCombinatorial(n.op, args)
	default:
		return nil, false
	}
	return r, ratBits(r) <= maxExactBits
}

func ratBits(r *big.Rat) int { return r.Num().BitLen() + r.Denom().BitLen() }

// exactPow computes base^e for an integer e, and for e = p/q as the q-th
// root to the p-th power when the root is rational: 8^{2/3} = 4.
func exactPow(base, e *big.Rat) (*big.Rat, bool) {
	if !e.IsInt() {
		if !e.Denom().IsInt64() || e.Denom().Int64() > 64 {
			return nil, false
		}
		root, ok := exactRoot(base, new(big.Rat).SetInt(e.Denom()))
		if !ok {
			return nil, false
		}
		return exactPow(root, new(big.Rat).SetInt(e.Num()))
	}
	if !e.Num().IsInt64() {
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
func exactRoot(x, idx *big.Rat) (*big.Rat, bool) {
	if !idx.IsInt() || !idx.Num().IsInt64() {
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

func exactCombinatorial(op opKind, args []value) (*big.Rat, bool) {
	var ints [2]int64
	for i, a := range args {
		if !a.r.IsInt() || !a.r.Num().IsInt64() {
			return nil, false
		}
		ints[i] = a.r.Num().Int64()
		if ints[i] < 0 || ints[i] > maxFactorial {
			return nil, false
		}
	}
	if op == opFact {
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
// in every run and on every machine. Across the points every variable
// takes values of both signs, small (1/8 to 1) and large (1 to 3), so that
// |x| differs from x and \sqrt{(x+1)^2} from x+1; two variables take
// every combination of signs unless their names happen to share a sign
// pattern (1 in 7). A value is n/4096 with n square-free, so that no
// root of it is rational (no point value is 1/2 or 2) while roots of
// squares stay exact.
func pointValue(name string, k int) *big.Rat {
	h := fnv.New64a()
	h.Write([]byte(name))
	sum := h.Sum64()
	signs := 1 + sum%7                // a Walsh function of k: four points of each sign
	sizes := 1 + (signs+(sum>>8)%6)%7 // another one, so each sign gets both sizes
	u := mix64(sum+uint64(k)*0x9e3779b97f4a7c15) >> 11
	lo, hi := uint64(512), uint64(3840) // 1/8 to 15/16
	if parity(uint64(k)&sizes) == 1 {
		lo, hi = 4480, 12288 // 1.09 to 3
	}
	n := lo + u%(hi-lo)
	for !squareFree(n) {
		n++
	}
	r := new(big.Rat).SetFrac64(int64(n), 4096)
	if parity(uint64(k)&signs) == 1 {
		r.Neg(r)
	}
	return r
}

func parity(x uint64) uint64 { return uint64(bits.OnesCount64(x) & 1) }

func squareFree(n uint64) bool {
	for p := uint64(2); p*p <= n; p++ {
		if n%(p*p) == 0 {
			return false
		}
	}
	return true
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

// floatOp applies n's operation to the arguments' numeric values.
func floatOp(n *node, args []value) complex128 {
	a := args[0].c
	var b complex128
	if len(args) > 1 {
		b = args[1].c
	}
	switch n.op {
	case opNeg:
		return -a
	case opAdd:
		return a + b
	case opSub:
		return a - b
	case opMul:
		return a * b
	case opDiv:
		return a / b
	case opPow:
		return numPow(a, args[1])
	case opRoot:
		return numRoot(a, b)
	case opAbs:
		return complex(cmplx.Abs(a), 0)
	case opFact:
		if imag(a) != 0 || real(a) < 0 || real(a) > 170 {
			return cmplx.NaN()
		}
		return complex(math.Gamma(real(a)+1), 0)
	case opBinom:
		if imag(a) != 0 || imag(b) != 0 || real(a) > 170 {
			return cmplx.NaN()
		}
		return complex(math.Gamma(real(a)+1)/(math.Gamma(real(b)+1)*math.Gamma(real(a)-real(b)+1)), 0)
	case opFunc:
		return numFunc(n.name, args)
	}
	return cmplx.NaN()
}

// numPow uses repeated squaring for small integer exponents, which keeps
// (-2)^3 real and x^2 exact to the last bit, and takes the real root of a
// negative number for an exponent p/q with q odd: x^{1/3} is \sqrt[3]{x}.
func numPow(b complex128, exp value) complex128 {
	e := exp.c
	if r := exp.r; r != nil && !r.IsInt() && r.Denom().Bit(0) == 1 && imag(b) == 0 && real(b) < 0 {
		v := math.Pow(-real(b), real(e))
		if r.Num().Bit(0) == 1 {
			v = -v
		}
		return complex(v, 0)
	}
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

func numFunc(name string, args []value) complex128 {
	x := args[0].c
	switch name {
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
		if len(args) > 1 {
			return cmplx.Log(x) / cmplx.Log(args[1].c)
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
