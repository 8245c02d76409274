package grade

import "testing"

// Defects of issue 44 in the robust grader, each a pair with its verdict, both ways.
func TestRobustDefects44(t *testing.T) {
	for _, c := range []struct {
		name, gold, answer string
		want               bool
	}{
		// am and pm are not units: they tell two times apart.
		{"meridiem", `11:21 pm`, `11:21 am`, false},
		{"meridiem", `11:21`, `11:21 pm`, false},
		{"meridiem", `11:21 \text{ pm}`, `11:21 \text{ am}`, false},
		{"meridiem", `11:21 \text{pm}`, `11:21`, false},
		{"meridiem", `11:21 p.m.`, `11:21 pm`, true},
		{"meridiem", `11:21 PM`, `11:21 \text{ pm}`, true},
		{"meridiem", `10 \text{ cm}`, `10`, true}, // a unit is still dropped
		// A gold equation is not its right-hand side, in math delimiters or not.
		{"equation", `$7 = 11a+c$`, `11a+c`, false},
		{"equation", `\(7 = 11a+c\)`, `\boxed{11a+c}`, false},
		{"equation", `7 = 11a+c`, `11a+c`, false},
		{"equation", `$7 = 11a+c$`, `7 = 11a+c`, true},
		{"equation", `The sum is $2+3=5$.`, `5`, true}, // a computation still gives its result
	} {
		for _, p := range [][2]string{{c.gold, c.answer}, {c.answer, c.gold}} {
			if got := RobustEquiv(p[0], p[1]); got != c.want {
				t.Errorf("%s: RobustEquiv(%q, %q) = %v, want %v", c.name, p[0], p[1], got, c.want)
			}
		}
	}
}
