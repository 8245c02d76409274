package grade

import (
	"strings"
	"testing"
	"time"
)

// maxPerInput is the time any single call may take on a fuzzed input: the
// bounds in the package must keep hostile strings cheap.
const maxPerInput = 100 * time.Millisecond

// timed fails when fn is slow twice in a row: one slow run on a loaded
// machine (a GC pause, a busy core) is not a slow input.
func timed(t *testing.T, what string, input any, fn func()) {
	t.Helper()
	for try := 0; ; try++ {
		start := time.Now()
		fn()
		d := time.Since(start)
		if d <= maxPerInput {
			return
		}
		if try == 1 {
			t.Fatalf("%s took %v on %q, more than %v twice", what, d, input, maxPerInput)
		}
	}
}

func addEquivSeeds(f *testing.F) {
	for _, c := range equivCases {
		f.Add(c.a, c.b)
	}
	f.Add(strings.Repeat("(", 200)+"1"+strings.Repeat(")", 200), "1")
	f.Add(strings.Repeat(`\sqrt{`, 100)+"2"+strings.Repeat("}", 100), "2")
	f.Add("9^{9^{9^{9}}}", "1")
	f.Add(strings.Repeat("x^{99}", 60), "0")
	f.Add(strings.Repeat("1,", 200), "1")
	for _, c := range robustCases {
		f.Add(c.a, c.b)
	}
}

func FuzzExtract(f *testing.F) {
	for _, s := range []string{`\boxed{1}`, `\boxed 2$`, `\fbox{\frac{1}{2}}`, "#### 1,000", `\boxed{`, "a 1.5 b", `\boxed{\{}`,
		`\boxed{1}, \boxed{2} and $\boxed{3}$`, "The answer is $\\frac{5}{6}$.", `so $x = \frac{5}{6}$`, `\(\sqrt{16}\)`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, response string) {
		for _, opt := range []ExtractOptions{{}, {GSM8KHash: true, AnswerPhrase: true, LastNumberFallback: true}} {
			var ans string
			var ok bool
			timed(t, "Extract", response, func() { ans, ok = Extract(response, opt) })
			if ok && strings.TrimSpace(ans) == "" {
				t.Fatalf("Extract(%q) reported an empty answer as found", response)
			}
			if !ok && ans != "" {
				t.Fatalf("Extract(%q) returned %q with ok=false", response, ans)
			}
			// Adjacent boxes are joined with ", ": every piece comes from the response.
			for _, piece := range strings.Split(ans, ", ") {
				if ok && opt == (ExtractOptions{}) && !strings.Contains(response, piece) {
					t.Fatalf("Extract(%q) = %q, and %q is not part of the response", response, ans, piece)
				}
			}
		}
	})
}

func FuzzStrict(f *testing.F) {
	addEquivSeeds(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		var ab, ba, aa bool
		timed(t, "StrictEquiv", [2]string{a, b}, func() {
			ab, ba, aa = StrictEquiv(a, b), StrictEquiv(b, a), StrictEquiv(a, a)
		})
		if ab != ba || !aa {
			t.Fatalf("StrictEquiv(%q, %q)=%v, reversed %v, reflexive %v", a, b, ab, ba, aa)
		}
		timed(t, "StrictScore", [2]string{a, b}, func() { StrictScore(a, b) })
	})
}

func FuzzRobust(f *testing.F) {
	addEquivSeeds(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		var ab, ba, aa bool
		timed(t, "RobustEquiv", [2]string{a, b}, func() {
			ab, ba, aa = RobustEquiv(a, b), RobustEquiv(b, a), RobustEquiv(a, a)
		})
		if ab != ba || !aa {
			t.Fatalf("RobustEquiv(%q, %q)=%v, reversed %v, reflexive %v", a, b, ab, ba, aa)
		}
		var k1, k2 string
		timed(t, "Key", a, func() { k1, k2 = Key(a), Key(a) })
		if k1 != k2 || k1 == "" {
			t.Fatalf("Key(%q) = %q then %q", a, k1, k2)
		}
	})
}

// TestHostileInputsAreBounded: inputs built to defeat each bound finish
// quickly in every entry point.
func TestHostileInputsAreBounded(t *testing.T) {
	hostile := []struct{ in, why string }{
		{strings.Repeat(`1\frac{`, 60) + "1" + strings.Repeat(`}{x}`, 60), "nested mixed-number candidates"},
		{strings.Repeat("(", 5000) + strings.Repeat(")", 5000), "deep brackets over the length bound"},
		{strings.Repeat("(", 1000) + "1" + strings.Repeat(")", 1000), "deep brackets under the length bound"},
		{strings.Repeat(`\sqrt{`, 500) + "2" + strings.Repeat("}", 500), "deep roots"},
		{"9^{9^{9^{9^{9}}}}", "tower of powers"},
		{"(10^{4000})^{4000}", "huge exact power"},
		{strings.Repeat("99999999999999999999^{99}*", 100) + "1", "long product of large powers"},
		{"1e999", "huge scientific exponent"},
		{strings.Repeat("x+", 2000) + "x", "many terms"},
		{strings.Repeat("(x+y)^{600}+", 40) + "1", "large exact powers at every evaluation point"},
		{strings.Repeat("1,", 2000) + "1", "long list"},
		{strings.Repeat(`\{`, 300) + strings.Repeat(`\}`, 300), "nested sets"},
		{strings.Repeat(`\pm 1`, 300), "many plus-minus signs"},
		{strings.Repeat(`\text{`, 1000), "unclosed text groups"},
		{strings.Repeat(`\boxed{`, 3000), "unclosed boxes"},
		{strings.Repeat("\\sin ", 1000) + "x", "nested functions"},
		{"\\sqrt[64]{" + strings.Repeat("9", 4000) + "}", "high root of a long number"},
		{strings.Repeat("300!", 50), "factorials"},
		{"2^{2^{2^{100}}}", "a tower with a huge top"},
		{strings.Repeat("1 < ", 500) + "x", "a long chain of inequalities"},
		{strings.Repeat("x = ", 500) + "1", "a long chain of equations"},
		{strings.Repeat(`\boxed{1}, `, 2000), "many adjacent boxes"},
		{"the answer is " + strings.Repeat("$1$ ", 25000), "a 100 kB answer phrase"},
		{strings.Repeat("a", 100000), "100 kB of letters"},
		{"$" + strings.Repeat(`\frac{1}{`, 10000) + "$ 5", "a 100 kB math span"},
		{strings.Repeat("1 and ", 1000) + "1", "a long list in words"},
	}
	for _, h := range hostile {
		timed(t, "Extract "+h.why, h.in, func() { Extract(h.in, ExtractOptions{GSM8KHash: true, LastNumberFallback: true}) })
		timed(t, "StrictScore "+h.why, h.in, func() { StrictScore(h.in, h.in) })
		timed(t, "RobustEquiv "+h.why, h.in, func() {
			if !RobustEquiv(h.in, h.in) {
				t.Errorf("RobustEquiv is not reflexive on %s", h.why)
			}
		})
		timed(t, "Key "+h.why, h.in, func() { Key(h.in) })
	}
}
