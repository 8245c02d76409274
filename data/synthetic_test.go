package data

import (
	"go/constant"
	"go/token"
	"go/types"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// evaluate computes an arithmetic expression with Go's constant arithmetic, whose precedence
// of + - * is the usual one: an oracle independent of the generator.
func evaluate(t *testing.T, expr string) string {
	t.Helper()
	tv, err := types.Eval(token.NewFileSet(), nil, token.NoPos, expr)
	if err != nil || tv.Value == nil || tv.Value.Kind() != constant.Int {
		t.Fatalf("cannot evaluate %q: %v", expr, err)
	}
	return tv.Value.ExactString()
}

func TestSyntheticAnswersAreExact(t *testing.T) {
	tests := []struct {
		name string
		cfg  SyntheticConfig
	}{
		{"default", DefaultSynthetic},
		{"long mixed expressions", SyntheticConfig{Terms: 6, MaxOperand: 1000, Ops: "+-*"}},
		{"products only, largest values", SyntheticConfig{Terms: 6, MaxOperand: 1000, Ops: "*"}},
		{"subtraction only goes negative", SyntheticConfig{Terms: 3, MaxOperand: 5, Ops: "-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := SyntheticWith(300, 7, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				expr, ok := strings.CutPrefix(p.Question, "What is ")
				expr, ok2 := strings.CutSuffix(expr, "?")
				if !ok || !ok2 {
					t.Fatalf("question %q is not 'What is ...?'", p.Question)
				}
				if got := evaluate(t, expr); got != p.Gold {
					t.Fatalf("%s: gold %s, the expression is %s", p.Question, p.Gold, got)
				}
				fields := strings.Fields(expr)
				if len(fields) != 2*tt.cfg.Terms-1 {
					t.Fatalf("%q has %d tokens, want %d terms", expr, len(fields), tt.cfg.Terms)
				}
				for i, f := range fields {
					if i%2 == 1 {
						if !strings.Contains(tt.cfg.Ops, f) {
							t.Fatalf("%q uses operator %s outside %q", expr, f, tt.cfg.Ops)
						}
						continue
					}
					if v, err := strconv.Atoi(f); err != nil || v < 1 || v > tt.cfg.MaxOperand {
						t.Fatalf("%q: operand %s outside 1..%d", expr, f, tt.cfg.MaxOperand)
					}
				}
			}
		})
	}
}

func TestSyntheticIsSeeded(t *testing.T) {
	a := Synthetic(50, 1)
	if !slices.Equal(a, Synthetic(50, 1)) {
		t.Error("the same seed gave different problems")
	}
	if slices.Equal(a, Synthetic(50, 2)) {
		t.Error("seeds 1 and 2 gave the same problems")
	}
	if !slices.Equal(Synthetic(20, 1), a[:20]) {
		t.Error("a shorter set is not a prefix of a longer one with the same seed")
	}
	distinct := map[string]bool{}
	for _, p := range a {
		distinct[p.Question] = true
		if p.Dataset != "synthetic" {
			t.Fatalf("dataset %q", p.Dataset)
		}
	}
	// 9*9*3 = 243 possible questions; 50 draws that repeat much would mean a broken stream.
	if len(distinct) < 40 {
		t.Errorf("only %d distinct questions among 50", len(distinct))
	}
	if got := Synthetic(-1, 1); len(got) != 0 {
		t.Errorf("negative count gave %d problems", len(got))
	}
}

func TestSyntheticConfigIsValidated(t *testing.T) {
	tests := []struct {
		why string
		cfg SyntheticConfig
	}{
		{"one term is no expression", SyntheticConfig{Terms: 1, MaxOperand: 9, Ops: "+"}},
		{"seven terms could overflow", SyntheticConfig{Terms: 7, MaxOperand: 9, Ops: "+"}},
		{"operands must be positive", SyntheticConfig{Terms: 2, MaxOperand: 0, Ops: "+"}},
		{"operands above 1000 could overflow", SyntheticConfig{Terms: 2, MaxOperand: 1001, Ops: "+"}},
		{"division is not offered", SyntheticConfig{Terms: 2, MaxOperand: 9, Ops: "+/"}},
		{"no operators", SyntheticConfig{Terms: 2, MaxOperand: 9}},
	}
	for _, tt := range tests {
		if _, err := SyntheticWith(3, 1, tt.cfg); err == nil {
			t.Errorf("%s: %+v accepted", tt.why, tt.cfg)
		}
	}
	if _, err := SyntheticWith(-1, 1, DefaultSynthetic); err == nil {
		t.Error("negative count accepted")
	}
}
