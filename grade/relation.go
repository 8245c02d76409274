package grade

import (
	"math"
	"math/big"
	"slices"
	"strings"
)

// relationOps are the comparison operators after cleanLatex, longest
// first so that "<=" is not read as "<".
var relationOps = []struct{ text, op string }{
	{`\le`, "<="}, {`\ge`, ">="}, {`\lt`, "<"}, {`\gt`, ">"}, {`\ne`, "!="},
	{"<=", "<="}, {">=", ">="}, {"<", "<"}, {">", ">"}, {"!=", "!="},
}

// splitRelation splits "a < b \le c" at its top-level comparison
// operators; ops is empty when there is none.
func splitRelation(s string) (sides, ops []string) {
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
			continue
		case ')', ']', '}':
			depth--
			continue
		}
		if depth != 0 {
			continue
		}
		for _, r := range relationOps {
			if strings.HasPrefix(s[i:], r.text) && wholeWordAt(s, i+len(r.text), r.text) && !factorialAt(s, i, r.text) {
				sides = append(sides, s[start:i])
				ops = append(ops, r.op)
				start = i + len(r.text)
				i = start - 1
				break
			}
		}
	}
	return append(sides, s[start:]), ops
}

// factorialAt reports a "!=" that ends a factorial: "5!=120" is 5! = 120.
func factorialAt(s string, i int, op string) bool {
	return op == "!=" && i > 0 && (isDigit(s[i-1]) || strings.IndexByte(")]}", s[i-1]) >= 0)
}

// parseRelation reads an inequality. One linear in a single variable, or a
// chain "a < x \le b" around one, is the interval of its solutions, so that
// "5 \ge x", "x \le 5" and "(-\infty, 5]" agree; any other is kept as
// f < 0 or f <= 0 with f scaled by a positive factor.
func parseRelation(sides, ops []string, raw string) form {
	if slices.Contains(ops, "!=") {
		return notEqualForm(sides, ops, raw)
	}
	if len(ops) > 2 {
		return textForm(raw)
	}
	if union, ok := absChain(sides, ops); ok {
		return parseForm(union, 1) // "2 \le |y| \le 3" is [-3,-2] \cup [2,3]
	}
	sides = functionMiddle(sides) // "0 < g(t) < 2" bounds g
	var lines [2]halfLine
	for i, op := range ops {
		l, errL := parseExpr(sides[i])
		r, errR := parseExpr(sides[i+1])
		if errL != nil || errR != nil {
			return textForm(raw)
		}
		// Write every relation as f < 0 or f <= 0.
		f := &node{op: opSub, args: []*node{l, r}}
		if op[0] == '>' {
			f.args[0], f.args[1] = r, l
		}
		closed := strings.HasSuffix(op, "=")
		sc, ok := evalScalar(f)
		if !ok || sc.inf != 0 {
			return textForm(raw)
		}
		line, ok := solveLinear(f, sc, closed)
		if !ok {
			if len(ops) > 1 {
				return textForm(raw)
			}
			return relationForm(sc, closed)
		}
		lines[i] = line
	}
	lo := halfLine{bound: scalar{inf: -1}}
	hi := halfLine{bound: scalar{inf: 1}, upper: true}
	for _, line := range lines[:len(ops)] {
		if line.upper {
			hi = line
		} else {
			lo = line
		}
	}
	if len(ops) == 2 && (lines[0].upper == lines[1].upper || lines[0].name != lines[1].name) {
		return textForm(raw)
	}
	f := form{kind: kindTuple, open: '(', close: ')', interval: true, elems: []form{{kind: kindScalar, sc: lo.bound}, {kind: kindScalar, sc: hi.bound}}}
	if lo.closed {
		f.open = '['
	}
	if hi.closed {
		f.close = ']'
	}
	return f
}

// halfLine is "name < bound" (upper) or "name > bound", closed for <= and >=.
type halfLine struct {
	name          string
	bound         scalar
	upper, closed bool
}

// solveLinear solves f < 0 (f <= 0 when closed) where f is linear in its
// only variable, from f's values at the evaluation points.
func solveLinear(f *node, sc scalar, closed bool) (halfLine, bool) {
	name, ok := singleVar(f, "")
	if !ok || name == "" {
		return halfLine{}, false
	}
	if sc.offReal != 0 {
		return halfLine{}, false
	}
	if line, ok := solveLinearExact(name, sc); ok {
		line.closed = closed
		return line, true
	}
	var x [numPoints]float64
	for k := range x {
		x[k], _ = pointValue(name, k).Float64()
		if math.Abs(imag(sc.vals[k])) > absTol {
			return halfLine{}, false
		}
	}
	f0 := real(sc.vals[0])
	slope := (real(sc.vals[1]) - f0) / (x[1] - x[0])
	if math.Abs(slope) <= absTol {
		return halfLine{}, false
	}
	for k := 2; k < numPoints; k++ {
		if !closeTo(sc.vals[k], complex(f0+slope*(x[k]-x[0]), 0)) {
			return halfLine{}, false
		}
	}
	root := x[0] - f0/slope
	line := halfLine{name: name, upper: slope > 0, closed: closed}
	for k := range line.bound.vals {
		line.bound.vals[k] = complex(root, 0)
	}
	return line, true
}

// solveLinearExact is solveLinear for f rational at every point, with an
// exact bound: "x > 10^{-12}" is not "x > 0".
func solveLinearExact(name string, sc scalar) (halfLine, bool) {
	var x [numPoints]*big.Rat
	for k := range x {
		if sc.at[k] == nil {
			return halfLine{}, false
		}
		x[k] = pointValue(name, k)
	}
	f0 := sc.at[0]
	slope := new(big.Rat).Sub(sc.at[1], f0)
	slope.Quo(slope, new(big.Rat).Sub(x[1], x[0]))
	if slope.Sign() == 0 {
		return halfLine{}, false
	}
	root := new(big.Rat).Quo(f0, slope)
	root.Sub(x[0], root)
	for k := 2; k < numPoints; k++ {
		want := new(big.Rat).Sub(x[k], root)
		if want.Mul(want, slope).Cmp(sc.at[k]) != 0 {
			return halfLine{}, false
		}
	}
	return halfLine{name: name, upper: slope.Sign() > 0, bound: constScalar(root)}, true
}

// singleVar returns the one variable n uses, "" for none; ok is false
// when it uses several.
func singleVar(n *node, seen string) (string, bool) {
	if n.op == opSym {
		if seen != "" && seen != n.name {
			return "", false
		}
		return n.name, true
	}
	for _, a := range n.args {
		var ok bool
		if seen, ok = singleVar(a, seen); !ok {
			return "", false
		}
	}
	return seen, true
}

// relationForm keeps f < 0 scaled by a positive factor, which keeps its
// direction.
func relationForm(sc scalar, closed bool) form {
	op := "<"
	if closed {
		op = "<="
	}
	return form{kind: kindRelation, sc: sc.scaled(true), op: op}
}

// notEqualForm reads "a \ne b" as a - b != 0, scaled by any factor like
// an equation: "x \ne 3" is "3 \ne x".
func notEqualForm(sides, ops []string, raw string) form {
	if len(ops) != 1 {
		return textForm(raw)
	}
	eq := parseEquation(sides[0], sides[1], raw)
	if eq.kind != kindEquation {
		return eq
	}
	return form{kind: kindRelation, op: "!=", sc: eq.sc}
}
