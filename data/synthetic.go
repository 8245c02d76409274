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
	// Task is TaskArithmetic (empty: every operator drawn anew) or TaskExperts (one
	// operator per problem, its kind; see experts.go).
	Task string `json:",omitempty"`
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
		src := rand.NewPCG(seed, uint64(i))
		subject, ops := "arithmetic", cfg.Ops
		if cfg.Task == TaskExperts {
			op := ops[boundedRandom(src, uint64(len(ops)))]
			subject, ops = KindName(op), string(op)
		}
		question, answer := cfg.expression(src, ops)
		gold := strconv.FormatInt(answer, 10)
		problems[i] = Problem{
			ID:       strconv.Itoa(i),
			Dataset:  "synthetic",
			Question: "What is " + question + "?",
			Gold:     gold,
			Subject:  subject,
			Solution: question + " = " + gold,
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
	switch cfg.Task {
	case "", TaskArithmetic:
	case TaskExperts:
		for i := range len(cfg.Ops) {
			if strings.IndexByte(cfg.Ops[:i], cfg.Ops[i]) >= 0 {
				return fmt.Errorf("synthetic: the experts task's operators %q name a kind twice", cfg.Ops)
			}
		}
	default:
		return fmt.Errorf("synthetic: unknown task %q (want %s or %s)", cfg.Task, TaskArithmetic, TaskExperts)
	}
	return nil
}

// expression draws one expression with operators from ops and evaluates it as a sum of
// signed products. Draws go through boundedRandom so a seed gives the same problems in
// every Go version.
func (cfg SyntheticConfig) expression(src *rand.PCG, ops string) (string, int64) {
	var text strings.Builder
	operand := func() int64 { return int64(boundedRandom(src, uint64(cfg.MaxOperand))) + 1 }
	product := operand()
	text.WriteString(strconv.FormatInt(product, 10))
	var sum int64
	sign := int64(1)
	for range cfg.Terms - 1 {
		op := ops[boundedRandom(src, uint64(len(ops)))]
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
