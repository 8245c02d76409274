package grade

import "testing"

func TestGrade(t *testing.T) {
	tests := []struct {
		name, response, gold string
		opt                  ExtractOptions
		want                 Verdict
		answer               string
	}{
		{"a boxed right answer", `so \boxed{1000}.`, "1000", ExtractOptions{},
			Verdict{Key: Key("1000"), Strict: true, Robust: true, Boxed: true}, "1000"},
		{"thousands commas: robust only", `so \boxed{1,000}.`, "1000", ExtractOptions{},
			Verdict{Key: Key("1000"), Robust: true, Boxed: true}, "1,000"},
		{"a wrong answer keeps its own key", `so \boxed{7}.`, "1000", ExtractOptions{},
			Verdict{Key: Key("7"), Boxed: true}, "7"},
		{"no box: no answer", "it is 1000", "1000", ExtractOptions{}, Verdict{NoAnswer: true}, ""},
		{"the fallback answers, unboxed", "it is 1000", "1000", ExtractOptions{LastNumberFallback: true},
			Verdict{Key: Key("1000"), Robust: true}, "1000"},
		// The reference's "\boxed " quirk finds 5 where Extract sees an unclosed box.
		{"strict extracts its own way", `\boxed 5$ and \boxed{`, "5", ExtractOptions{},
			Verdict{NoAnswer: true, Strict: true, Boxed: true}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, answer := Grade(tc.response, tc.gold, tc.opt)
			if got != tc.want || answer != tc.answer {
				t.Errorf("Grade = %+v, %q; want %+v, %q", got, answer, tc.want, tc.answer)
			}
		})
	}
}

func TestGradeAnswer(t *testing.T) {
	tests := []struct {
		answer, gold string
		want         Verdict
	}{
		{"1000", "1000", Verdict{Key: Key("1000"), Strict: true, Robust: true}},
		{"1,000", "1000", Verdict{Key: Key("1000"), Robust: true}},
		{"7", "1000", Verdict{Key: Key("7")}},
		{"", "1000", Verdict{NoAnswer: true}},
	}
	for _, tc := range tests {
		if got := GradeAnswer(tc.answer, tc.gold); got != tc.want {
			t.Errorf("GradeAnswer(%q, %q) = %+v, want %+v", tc.answer, tc.gold, got, tc.want)
		}
	}
}

func TestReadable(t *testing.T) {
	for _, c := range []struct {
		answer string
		want   bool
	}{
		{`\frac{1}{2}`, true}, {`x \le 3`, true}, {`(1, 2]`, true}, {`\text{Evelyn}`, true}, {`(B)`, true},
		{`11:21`, false}, {`\frac{1}{`, false}, {`2021_3`, false}, {`x \mapsto 2`, false},
	} {
		if got := Readable(c.answer); got != c.want {
			t.Errorf("Readable(%q) = %v, want %v", c.answer, got, c.want)
		}
	}
}
