package data

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// SyntheticConfig sets the difficulty of synthetic problems.
type SyntheticConfig struct {
	// Terms is the number of operands per expression, 2 to 6.
	Terms int
	// MaxOperand bounds the operands, drawn from 1..MaxOperand (at most 1000).
	MaxOperand int
	// Ops holds the operators to draw from, any of "+-*". Multiplication binds first, as
	// usual, so "2 + 3 * 4" is 14.
	Ops string
}

// DefaultSynthetic is one-digit addition, subtraction and multiplication of two numbers.
var DefaultSynthetic = SyntheticConfig{Terms: 2, MaxOperand: 9, Ops: "+-*"}

// The bounds keep every value within int64: at most 1000^6 = 1e18.
const (
	maxSyntheticTerms   = 6
	maxSyntheticOperand = 1000
)

// Synthetic returns n small-integer arithmetic problems with exact answers ("What is 3 + 4?",
// gold "7") drawn from seed with DefaultSynthetic. It needs no files, so it is the problem
// set of a fresh machine. A negative n gives none.
func Synthetic(n int, seed uint64) []Problem {
	return generate(max(n, 0), seed, DefaultSynthetic)
}

// SyntheticWith is Synthetic with a chosen difficulty. Problem i depends only on seed and i,
// so a longer set extends a shorter one with the same seed.
func SyntheticWith(n int, seed uint64, cfg SyntheticConfig) ([]Problem, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("synthetic: negative count %d", n)
	}
	return generate(n, seed, cfg), nil
}

func generate(n int, seed uint64, cfg SyntheticConfig) []Problem {
	problems := make([]Problem, n)
	for i := range problems {
		question, answer := cfg.expression(rand.NewPCG(seed, uint64(i)))
		problems[i] = Problem{
			ID:       strconv.Itoa(i),
			Dataset:  "synthetic",
			Question: "What is " + question + "?",
			Gold:     strconv.FormatInt(answer, 10),
			Subject:  "arithmetic",
		}
	}
	return problems
}

func (cfg SyntheticConfig) validate() error {
	if cfg.Terms < 2 || cfg.Terms > maxSyntheticTerms {
		return fmt.Errorf("synthetic: terms %d outside 2..%d", cfg.Terms, maxSyntheticTerms)
	}
	if cfg.MaxOperand < 1 || cfg.MaxOperand > maxSyntheticOperand {
		return fmt.Errorf("synthetic: max operand %d outside 1..%d", cfg.MaxOperand, maxSyntheticOperand)
	}
	if cfg.Ops == "" || strings.Trim(cfg.Ops, "+-*") != "" {
		return fmt.Errorf("synthetic: operators %q must be a non-empty mix of + - *", cfg.Ops)
	}
	return nil
}

// expression draws one expression and evaluates it as a sum of signed products. Draws go
// through boundedRandom so a seed gives the same problems in every Go version.
func (cfg SyntheticConfig) expression(src *rand.PCG) (string, int64) {
	var text strings.Builder
	operand := func() int64 { return int64(boundedRandom(src, uint64(cfg.MaxOperand))) + 1 }
	product := operand()
	text.WriteString(strconv.FormatInt(product, 10))
	var sum int64
	sign := int64(1)
	for range cfg.Terms - 1 {
		op := cfg.Ops[boundedRandom(src, uint64(len(cfg.Ops)))]
		v := operand()
		fmt.Fprintf(&text, " %c %d", op, v)
		switch op {
		case '*':
			product *= v
		case '+', '-':
			sum += sign * product
			sign, product = 1, v
			if op == '-' {
				sign = -1
			}
		}
	}
	return text.String(), sum + sign*product
}
