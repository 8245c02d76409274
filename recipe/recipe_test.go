package recipe

import (
	"strings"
	"testing"
)

func value(t *testing.T, settings []Setting, flag string) any {
	t.Helper()
	var v any
	n := 0
	for _, s := range settings {
		if s.Flag == flag {
			v, n = s.Value, n+1
		}
	}
	if n != 1 {
		t.Fatalf("--%s is set %d times", flag, n)
	}
	return v
}

// An algorithm's own settings replace the common ones, which replace the lengths; every
// flag is set once.
func TestSettingsPrecedence(t *testing.T) {
	r, err := Lookup("reference")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Settings("train", "grpo", r.Other)
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]any{"prompt-limit": 2048, "max-tokens": 2048, "batch": 1024, "epochs": 15, "turns": 1, "kl-in-loss": true, "temperature": 0.6} {
		if got := value(t, s, flag); got != want {
			t.Errorf("reference grpo --%s %v, want %v", flag, got, want)
		}
	}
	// Both lengths given on the command line: the recipe sets none.
	if s, err = r.Settings("train", "umad", Lengths{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range s {
		if s.Flag == "max-tokens" || s.Flag == "prompt-limit" {
			t.Errorf("no lengths asked for, got %s", s.Arg())
		}
	}
}

// A recipe refuses an algorithm its source does not define, naming those it does.
func TestSettingsUndefinedAlgorithm(t *testing.T) {
	r := Recipe{Name: "ablations-only", Algos: map[string][]Setting{"umad": nil, "ippo": nil}}
	_, err := r.Settings("train", "grpo", Lengths{})
	if err == nil || err.Error() != "--recipe ablations-only does not define --algo grpo (it defines ippo, umad)" {
		t.Errorf("error %v", err)
	}
	if _, err := Lookup("papers"); err == nil || err.Error() != `unknown recipe "papers" (want paper or reference)` {
		t.Errorf("unknown recipe: %v", err)
	}
}

// Lengths follow the problem set: AIME's own, the others', and a mix refused.
func TestLengthsFor(t *testing.T) {
	r, _ := Lookup("paper")
	for _, tc := range []struct {
		sets []string
		want Lengths
		err  string
	}{
		{[]string{"aime24"}, r.AIME, ""},
		{[]string{"aime_2025", "AIME24"}, r.AIME, ""},
		{[]string{"math500", "gsm8k"}, r.Other, ""},
		{nil, r.Other, ""},
		{[]string{"aime24", "amc23"}, Lengths{}, "mix aime24 with amc23"},
	} {
		got, err := r.LengthsFor(tc.sets)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: %v, want %q", tc.sets, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %+v %v, want %+v", tc.sets, got, err, tc.want)
		}
	}
	if r.AIME.MaxTokens != 4096 || r.AIME.PromptLimit != 9216 || r.Other.MaxTokens != 2048 || r.Other.PromptLimit != 5120 {
		t.Errorf("paper lengths %+v %+v, want AIME 4096/9216 and 2048/5120 (paper.tex L811)", r.AIME, r.Other)
	}
}

func TestLoRALR(t *testing.T) {
	if got := LoRALR(1e-6); got != 1e-5 {
		t.Errorf("LoRALR(1e-6) = %v, want 1e-05", got)
	}
}
