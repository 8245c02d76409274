package grade

import (
	"errors"
	"math/big"
	"strings"
)

// Parser limits: a hostile answer cannot recurse deeply or build a huge tree.
const (
	maxParseDepth = 64
	maxNodes      = 512
	maxSciExp     = 400 // |exponent| of 1e400-style literals
)

var errParse = errors.New("not an expression")

type opKind uint8

const (
	opNum   opKind = iota // num
	opSym                 // variable; name
	opPi                  // the constant pi
	opImag                // the imaginary unit i
	opInf                 // infinity (only meaningful alone or negated)
	opAdd                 // args[0] + args[1]
	opSub                 // args[0] - args[1]
	opMul                 // args[0] * args[1]
	opDiv                 // args[0] / args[1]
	opNeg                 // -args[0]
	opPow                 // args[0] ^ args[1]
	opRoot                // args[1]-th root of args[0]
	opFact                // args[0]!
	opBinom               // binom(args[0], args[1])
	opAbs                 // |args[0]|
	opFunc                // name(args[0]); for log, args[1] is the base when given
)

type node struct {
	op   opKind
	num  *big.Rat
	name string
	args []*node
}

// functions are the named functions the parser knows, applied to one
// argument.
var functions = map[string]bool{
	"sin": true, "cos": true, "tan": true, "cot": true, "sec": true, "csc": true,
	"arcsin": true, "arccos": true, "arctan": true, "sinh": true, "cosh": true, "tanh": true,
	"ln": true, "log": true, "exp": true,
}

// greek letters are variables.
var greek = map[string]bool{
	"alpha": true, "beta": true, "gamma": true, "delta": true, "epsilon": true, "zeta": true,
	"eta": true, "theta": true, "iota": true, "kappa": true, "lambda": true, "mu": true,
	"nu": true, "xi": true, "rho": true, "sigma": true, "tau": true, "upsilon": true,
	"phi": true, "chi": true, "psi": true, "omega": true, "Gamma": true, "Delta": true,
	"Theta": true, "Lambda": true, "Xi": true, "Sigma": true, "Phi": true, "Psi": true, "Omega": true,
}

type parser struct {
	s     string
	pos   int
	depth int
	nodes int
}

// parseExpr parses a whole cleaned answer as one expression.
func parseExpr(s string) (*node, error) {
	p := &parser{s: s}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos != len(p.s) {
		return nil, errParse
	}
	return n, nil
}

func (p *parser) mk(op opKind, args ...*node) (*node, error) {
	p.nodes++
	if p.nodes > maxNodes {
		return nil, errParse
	}
	return &node{op: op, args: args}, nil
}

func (p *parser) space() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *parser) peek() byte {
	p.space()
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

// enter bounds the recursion depth; every recursive rule calls it.
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxParseDepth {
		return errParse
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) expr() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	left, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		c := p.peek()
		if c != '+' && c != '-' {
			return left, nil
		}
		p.pos++
		right, err := p.term()
		if err != nil {
			return nil, err
		}
		op := opAdd
		if c == '-' {
			op = opSub
		}
		if left, err = p.mk(op, left, right); err != nil {
			return nil, err
		}
	}
}

// term is a product: explicit * and /, or juxtaposition (2\sqrt{3}, 3x).
func (p *parser) term() (*node, error) {
	left, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		c := p.peek()
		op := opMul
		switch {
		case c == '*' || c == '/':
			p.pos++
			if c == '/' {
				op = opDiv
			}
		case p.startsFactor():
			if isDigit(c) && endsWithDigit(left) {
				return nil, errParse // "2 3" is not a product anyone writes
			}
		default:
			return left, nil
		}
		var right *node
		if op == opMul && c != '*' {
			right, err = p.power()
		} else {
			right, err = p.unary()
		}
		if err != nil {
			return nil, err
		}
		if left, err = p.mk(op, left, right); err != nil {
			return nil, err
		}
	}
}

// endsWithDigit reports whether n was written ending in a number literal.
func endsWithDigit(n *node) bool {
	for n.op == opMul || n.op == opDiv {
		n = n.args[1]
	}
	return n.op == opNum
}

// startsFactor reports whether the next character can begin an implicitly
// multiplied factor.
func (p *parser) startsFactor() bool {
	c := p.peek()
	switch {
	case isDigit(c), c == '.', isASCIILetter(c), c == '(', c == '[', c == '{':
		return true
	case c == '\\':
		name := wordAt(p.s, p.pos+1)
		return name == "frac" || name == "sqrt" || name == "pi" || name == "binom" || functions[name] || greek[name]
	}
	return false
}

func (p *parser) unary() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	switch p.peek() {
	case '-':
		p.pos++
		arg, err := p.unary()
		if err != nil {
			return nil, err
		}
		return p.mk(opNeg, arg)
	case '+':
		p.pos++
		return p.unary()
	}
	return p.power()
}

func (p *parser) power() (*node, error) {
	base, err := p.postfix()
	if err != nil {
		return nil, err
	}
	for p.peek() == '^' {
		p.pos++
		exp, err := p.script()
		if err != nil {
			return nil, err
		}
		if base, err = p.mk(opPow, base, exp); err != nil {
			return nil, err
		}
	}
	return base, nil
}

func (p *parser) postfix() (*node, error) {
	n, err := p.primary()
	if err != nil {
		return nil, err
	}
	for p.pos < len(p.s) && p.s[p.pos] == '!' {
		p.pos++
		if n, err = p.mk(opFact, n); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// script reads a superscript: a brace group, one letter or control word, or
// a whole number. LaTeX would set x^10 as x^1 followed by 0; nobody means
// that, so the number is the exponent. A sign may come first (x^-1).
func (p *parser) script() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	switch c := p.peek(); {
	case c == '{':
		return p.group('{', '}')
	case c == '-' || c == '+':
		p.pos++
		arg, err := p.script()
		if err != nil || c == '+' {
			return arg, err
		}
		return p.mk(opNeg, arg)
	case isDigit(c):
		start := p.pos
		for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
			p.pos++
		}
		return p.number(p.s[start:p.pos])
	case isASCIILetter(c) || c == '\\':
		return p.primary()
	}
	return nil, errParse
}

// macroArg reads an argument of \frac, \sqrt or \binom: a brace group or a
// single character or control word (\frac12, \sqrt2, \frac\pi2).
func (p *parser) macroArg() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	switch c := p.peek(); {
	case c == '{':
		return p.group('{', '}')
	case isDigit(c):
		p.pos++
		return p.number(p.s[p.pos-1 : p.pos])
	case isASCIILetter(c) || c == '\\':
		return p.primary()
	}
	return nil, errParse
}

func (p *parser) group(open, close byte) (*node, error) {
	if p.peek() != open {
		return nil, errParse
	}
	p.pos++
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.peek() != close {
		return nil, errParse
	}
	p.pos++
	return n, nil
}

func (p *parser) primary() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	switch c := p.peek(); {
	case isDigit(c) || c == '.':
		return p.numberLiteral()
	case isASCIILetter(c):
		p.pos++
		name := string(c)
		if sub, ok := p.subscript(); ok {
			name += "_" + sub
		} else if c == 'i' {
			return p.mk(opImag)
		}
		n, err := p.mk(opSym)
		if err == nil {
			n.name = name
		}
		return n, err
	case c == '(':
		return p.group('(', ')')
	case c == '[':
		return p.group('[', ']')
	case c == '{':
		return p.group('{', '}')
	case c == '|':
		arg, err := p.group('|', '|')
		if err != nil {
			return nil, err
		}
		return p.mk(opAbs, arg)
	case c == '\\':
		return p.command()
	}
	return nil, errParse
}

// subscript reads "_x" or "_{...}" as plain text, for names like a_1.
func (p *parser) subscript() (string, bool) {
	if p.pos >= len(p.s) || p.s[p.pos] != '_' {
		return "", false
	}
	rest := p.s[p.pos+1:]
	if strings.HasPrefix(rest, "{") {
		inner, ok := braceGroup(rest)
		if !ok || inner == "" {
			return "", false
		}
		p.pos += 1 + len(inner) + 2
		return strings.ReplaceAll(inner, " ", ""), true
	}
	if rest == "" || !(isDigit(rest[0]) || isASCIILetter(rest[0])) {
		return "", false
	}
	p.pos += 2
	return rest[:1], true
}

func (p *parser) command() (*node, error) {
	name := wordAt(p.s, p.pos+1)
	p.pos += 1 + len(name)
	switch {
	case name == "frac" || name == "binom":
		a, err := p.macroArg()
		if err != nil {
			return nil, err
		}
		b, err := p.macroArg()
		if err != nil {
			return nil, err
		}
		if name == "binom" {
			return p.mk(opBinom, a, b)
		}
		return p.mk(opDiv, a, b)
	case name == "sqrt":
		index := &node{op: opNum, num: big.NewRat(2, 1)}
		if p.peek() == '[' {
			var err error
			if index, err = p.group('[', ']'); err != nil {
				return nil, err
			}
		}
		arg, err := p.macroArg()
		if err != nil {
			return nil, err
		}
		return p.mk(opRoot, arg, index)
	case name == "pi":
		return p.mk(opPi)
	case name == "infty":
		return p.mk(opInf)
	case greek[name]:
		n, err := p.mk(opSym)
		if err == nil {
			n.name = `\` + name
		}
		return n, err
	case functions[name]:
		return p.function(name)
	}
	return nil, errParse
}

// function parses \sin x, \sin^2 x, \sin(2x), \log_2 8. An unbracketed
// argument is the product that follows, up to the next function.
func (p *parser) function(name string) (*node, error) {
	var power, base *node
	var err error
	if name == "log" && p.peek() == '_' {
		p.pos++
		if base, err = p.macroArg(); err != nil {
			return nil, err
		}
	}
	if p.peek() == '^' {
		p.pos++
		if power, err = p.script(); err != nil {
			return nil, err
		}
	}
	var arg *node
	if c := p.peek(); c == '(' || c == '{' {
		arg, err = p.primary()
	} else {
		arg, err = p.funcArg()
	}
	if err != nil {
		return nil, err
	}
	f, err := p.mk(opFunc, arg)
	if err != nil {
		return nil, err
	}
	f.name = name
	if base != nil {
		f.args = append(f.args, base)
	}
	if power != nil {
		return p.mk(opPow, f, power)
	}
	return f, nil
}

func (p *parser) funcArg() (*node, error) {
	arg, err := p.power()
	if err != nil {
		return nil, err
	}
	for p.startsFactor() && !(p.s[p.pos] == '\\' && functions[wordAt(p.s, p.pos+1)]) {
		right, err := p.power()
		if err != nil {
			return nil, err
		}
		if arg, err = p.mk(opMul, arg, right); err != nil {
			return nil, err
		}
	}
	return arg, nil
}

// numberLiteral reads 12, 3.5, .5, 1.5e3 (scientific notation only where no
// letter follows, so "2e" stays 2 times e), 204_5 (a base-5 numeral, kept
// as an opaque symbol) and mixed numbers such as 1\frac{4}{5}.
func (p *parser) numberLiteral() (*node, error) {
	start := p.pos
	for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
		p.pos++
	}
	integer := p.pos > start
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		integer = false
		p.pos++
		for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
			p.pos++
		}
	}
	lit := p.s[start:p.pos]
	if lit == "." {
		return nil, errParse
	}
	if sci := p.sciExponent(); sci != "" {
		lit += "e" + sci
		integer = false
	}
	if sub, ok := p.subscript(); ok {
		n, err := p.mk(opSym)
		if err == nil {
			n.name = lit + "_" + sub
		}
		return n, err
	}
	whole, err := p.number(lit)
	if err != nil || !integer {
		return whole, err
	}
	if frac := p.mixedFraction(); frac != nil {
		return p.mk(opAdd, whole, frac)
	}
	return whole, nil
}

// sciExponent consumes "e-3" / "E+10" after a number when it is an exponent.
func (p *parser) sciExponent() string {
	i := p.pos
	if i >= len(p.s) || (p.s[i] != 'e' && p.s[i] != 'E') {
		return ""
	}
	i++
	if i < len(p.s) && (p.s[i] == '+' || p.s[i] == '-') {
		i++
	}
	digits := i
	for i < len(p.s) && isDigit(p.s[i]) {
		i++
	}
	if i == digits || i-digits > 3 || (i < len(p.s) && isASCIILetter(p.s[i])) {
		return ""
	}
	exp := p.s[p.pos+1 : i]
	p.pos = i
	return exp
}

// mixedFraction consumes "\frac{a}{b}" with integer literals a and b right
// after an integer, the way MATH writes mixed numbers (137 \frac{1}{2}). It
// scans instead of parsing, so trying it never costs a second parse.
func (p *parser) mixedFraction() *node {
	if p.peek() != '\\' || wordAt(p.s, p.pos+1) != "frac" {
		return nil
	}
	i := p.pos + len(`\frac`)
	a, i, okA := intArg(p.s, i)
	b, i, okB := intArg(p.s, i)
	if !okA || !okB {
		return nil
	}
	num, errA := p.number(a)
	den, errB := p.number(b)
	if errA != nil || errB != nil {
		return nil
	}
	frac, err := p.mk(opDiv, num, den)
	if err != nil {
		return nil
	}
	p.pos = i
	return frac
}

// intArg reads a macro argument that is an integer literal: "{12}" or a
// single digit, with optional spaces.
func intArg(s string, i int) (digits string, next int, ok bool) {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i < len(s) && isDigit(s[i]) {
		return s[i : i+1], i + 1, true
	}
	if i >= len(s) || s[i] != '{' {
		return "", i, false
	}
	j := strings.IndexByte(s[i:], '}')
	if j < 0 {
		return "", i, false
	}
	digits = strings.TrimSpace(s[i+1 : i+j])
	if digits == "" {
		return "", i, false
	}
	for k := 0; k < len(digits); k++ {
		if !isDigit(digits[k]) {
			return "", i, false
		}
	}
	return digits, i + j + 1, true
}

func (p *parser) number(lit string) (*node, error) {
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		if exp := strings.TrimLeft(lit[i+1:], "+-"); len(exp) > 3 || atoiSmall(exp) > maxSciExp {
			return nil, errParse
		}
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return nil, errParse
	}
	n, err := p.mk(opNum)
	if err == nil {
		n.num = r
	}
	return n, err
}

// atoiSmall converts at most three ASCII digits.
func atoiSmall(s string) int {
	v := 0
	for i := 0; i < len(s); i++ {
		v = 10*v + int(s[i]-'0')
	}
	return v
}
