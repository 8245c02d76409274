package data

// The experts task: synthetic problems of several kinds, one kind per operator ("What is
// 3 + 4?" is a sum, "What is 3 * 4?" a product). Agents warm-started each on one kind know
// different parts of the set, so a peer's worked result is worth reading in a debate.

import (
	"fmt"
	"strconv"
	"strings"
)

// The built-in tasks.
const (
	TaskArithmetic = "arithmetic" // every operator of an expression drawn from Ops
	TaskExperts    = "experts"    // one operator per problem, drawn from Ops: its kind
)

// KindName names the kind of an experts problem by its operator.
func KindName(op byte) string {
	switch op {
	case '+':
		return "sum"
	case '-':
		return "difference"
	case '*':
		return "product"
	}
	return string(op)
}

// Claim is what an expert says of a problem: its working ("3 + 4 = 7") and its answer.
type Claim struct {
	Work, Answer string
}

// WorkedResponse is the response the synthetic warm starts teach: the result stands
// outside the box too, so it survives the debate message's answer mask.
func (c Claim) WorkedResponse() string {
	return c.Work + ", so the answer is \\boxed{" + c.Answer + "}."
}

// ExpertClaims returns, for each operator of ops (the experts in order), the claim an expert
// of that kind makes about synthetic problem p: p's expression, valued with the expert's own
// operator, so "What is 3 * 4?" gets "3 * 4 = 7" from the sum expert and "3 * 4 = 12" from
// the product expert. The expert of p's kind is right; the others are wrong unless the
// values coincide. (Working written with the expert's own operator, "3 + 4 = 7", would let a
// reader match it against the question and take the right claim with no training at all.)
func ExpertClaims(p Problem, ops string) ([]Claim, error) {
	expr, ok := strings.CutPrefix(p.Question, "What is ")
	expr, ok2 := strings.CutSuffix(expr, "?")
	fields := strings.Fields(expr)
	if !ok || !ok2 || len(fields) < 3 || len(fields)%2 == 0 {
		return nil, fmt.Errorf("experts: %q is not a synthetic problem", p.Question)
	}
	operands := make([]int64, 0, len(fields)/2+1)
	for i, f := range fields {
		if i%2 == 1 {
			if f != fields[1] {
				return nil, fmt.Errorf("experts: %q mixes operators, so it has no kind", p.Question)
			}
			continue
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 1 || v > maxSyntheticOperand {
			return nil, fmt.Errorf("experts: %q is not a synthetic problem", p.Question)
		}
		operands = append(operands, v)
	}
	claims := make([]Claim, len(ops))
	for e := range len(ops) {
		value := operands[0]
		for _, v := range operands[1:] {
			switch ops[e] {
			case '+':
				value += v
			case '-':
				value -= v
			case '*':
				value *= v
			default:
				return nil, fmt.Errorf("experts: operator %q is not one of + - *", ops[e])
			}
		}
		answer := strconv.FormatInt(value, 10)
		claims[e] = Claim{Work: strings.Join(fields, " ") + " = " + answer, Answer: answer}
	}
	return claims, nil
}
