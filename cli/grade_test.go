package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/umad-dev/umad/grade"
)

// runGradeCmd runs `umad grade args...` through the app and returns stdout, stderr and the error.
func runGradeCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	app := App()
	app.Writer, app.ErrWriter = &stdout, &stderr
	err := app.Run(append([]string{"umad", "grade"}, args...))
	return stdout.String(), stderr.String(), err
}

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// gradeCases are input lines with the verdicts the checkers' specifications give them.
var gradeCases = []struct {
	why       string
	line      string
	extracted any // string, or nil for no answer
	strict    bool
	robust    bool
	rule      any // the rule's name, or nil for no answer
}{
	{"thousands comma: strict_string keeps it, a careful grader does not",
		`{"id": 1, "response": "The total is \\boxed{1,000}.", "gold": "1000"}`, "1,000", false, true, "numeric"},
	{"dfrac vs frac is normalised by both",
		`{"id": 2, "response": "$\\boxed{\\dfrac{1}{2}}$", "gold": "\\frac{1}{2}", "meta": {"agent": 0, "turn": [1, 2]}}`, `\dfrac{1}{2}`, true, true, "numeric"},
	{"an unboxed response has no answer under MATH-style extraction",
		`{"id": 3, "response": "I think it is 7.", "gold": "7"}`, nil, false, false, nil},
	{"a wrong boxed answer fails both",
		`{"id": 4, "response": "\\boxed{8}", "gold": "7"}`, "8", false, false, "none"},
	{"AIME's leading zero: only the robust grader accepts 25 for 025",
		`{"id": 5, "pred": "25", "gold": "025"}`, "25", false, true, "numeric"},
	{"a numeric prediction against AMC's float gold",
		`{"id": 6, "pred": 27, "gold": 27.0}`, "27", true, true, "exact"},
	{"a null prediction is no answer",
		`{"id": 7, "pred": null, "gold": "3"}`, nil, false, false, nil},
	{"a null response is no answer",
		`{"id": 8, "response": null, "gold": "3"}`, nil, false, false, nil},
	{"an inequality against the interval it describes",
		`{"id": 9, "pred": "5 \\geq x", "gold": "(-\\infty, 5]"}`, `5 \geq x`, false, true, "interval"},
}

func TestGradeFieldsAndStats(t *testing.T) {
	var lines []string
	for _, c := range gradeCases {
		lines = append(lines, c.line)
	}
	stdout, stderr, err := runGradeCmd(t, "--in", writeLines(t, lines...))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	out := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(out) != len(gradeCases) {
		t.Fatalf("%d output lines for %d input lines:\n%s", len(out), len(gradeCases), stdout)
	}
	var strict, robust, disagree, none int
	for i, c := range gradeCases {
		t.Run(c.why, func(t *testing.T) {
			// Every original field is kept byte for byte, in order, before the new ones.
			if !strings.HasPrefix(out[i], strings.TrimSuffix(c.line, "}")+",") {
				t.Errorf("output does not start with the input's fields:\n in: %s\nout: %s", c.line, out[i])
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(out[i]), &got); err != nil {
				t.Fatalf("output line is not JSON: %v", err)
			}
			var wantKey any
			if c.extracted != nil {
				wantKey = grade.Key(c.extracted.(string))
			}
			if got["extracted"] != c.extracted || got["key"] != wantKey || got["strict"] != c.strict || got["robust"] != c.robust || got["rule"] != c.rule {
				t.Errorf("got extracted=%#v key=%#v strict=%v robust=%v rule=%#v, want %#v %#v %v %v %#v",
					got["extracted"], got["key"], got["strict"], got["robust"], got["rule"], c.extracted, wantKey, c.strict, c.robust, c.rule)
			}
		})
		if c.strict {
			strict++
		}
		if c.robust {
			robust++
		}
		if c.strict != c.robust {
			disagree++
		}
		if c.extracted == nil {
			none++
		}
	}
	n := len(gradeCases)
	for _, want := range []string{
		fmt.Sprintf("graded %d lines, skipped 0 malformed", n),
		fmt.Sprintf("strict accuracy  %.2f%% (%d/%d)", 100*float64(strict)/float64(n), strict, n),
		fmt.Sprintf("robust accuracy  %.2f%% (%d/%d)", 100*float64(robust)/float64(n), robust, n),
		fmt.Sprintf("modes disagree   %d (robust only %d, strict only 0)", disagree, disagree),
		fmt.Sprintf("no answer        %d", none),
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// Grading a graded file replaces the verdict fields where they are: the output is unchanged.
func TestGradeIsIdempotent(t *testing.T) {
	first, _, err := runGradeCmd(t, "--in", writeLines(t, gradeCases[0].line, gradeCases[4].line))
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := runGradeCmd(t, "--in", writeLines(t, strings.Split(strings.TrimSpace(first), "\n")...))
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("regrading changed the lines:\n%s\n%s", first, second)
	}
}

func TestGradeFieldNames(t *testing.T) {
	in := writeLines(t, `{"completion": "\\boxed{4}", "answer": "4"}`, `{"guess": "5", "answer": "4"}`)
	stdout, _, err := runGradeCmd(t, "--in", in, "--response-field", "completion", "--pred-field", "guess", "--gold-field", "answer")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"completion": "\\boxed{4}", "answer": "4","extracted":"4","key":` + mustJSON(t, grade.Key("4")) + `,"strict":true,"robust":true,"rule":"exact"}` + "\n" +
		`{"guess": "5", "answer": "4","extracted":"5","key":` + mustJSON(t, grade.Key("5")) + `,"strict":false,"robust":false,"rule":"none"}` + "\n"
	if stdout != want {
		t.Errorf("got\n%s\nwant\n%s", stdout, want)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGradeBadLines(t *testing.T) {
	in := writeLines(t,
		`{"response": "\\boxed{2}", "gold": "2"}`,
		`{"response": "\\boxed{3}", "gold": `,
		`["not", "an", "object"]`,
		`{"response": 5, "gold": "5"}`,
		`{"response": "\\boxed{1}", "answer": "1"}`,
		`{"text": "x", "gold": "1"}`,
		`{"pred": "1", "gold": ""}`,
		`{"pred": "6", "gold": "6"}`,
	)
	stdout, stderr, err := runGradeCmd(t, "--in", in)
	if err != nil {
		t.Fatalf("malformed lines must be skipped, got %v", err)
	}
	if n := strings.Count(stdout, "\n"); n != 2 {
		t.Errorf("%d lines written, want the 2 good ones:\n%s", n, stdout)
	}
	for _, want := range []string{
		"line 2 skipped", "line 3 skipped: not a JSON object", `line 4 skipped: field "response" is not a string`,
		`line 5 skipped: no "gold" field; fields found: response, answer`,
		`line 6 skipped: neither "response" nor "pred" field; fields found: text, gold`,
		`line 7 skipped: field "gold" is empty`, "graded 2 lines, skipped 6 malformed",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	_, _, err = runGradeCmd(t, "--in", in, "--strict-input")
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("--strict-input: error %v, want one naming line 2", err)
	}
}

// --out is replaced whole or not at all: a failed run leaves the old file and no temporary.
func TestGradeOutIsAtomic(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "graded.jsonl")
	good := writeLines(t, `{"pred": "2", "gold": "2"}`)
	stdout, stderr, err := runGradeCmd(t, "--in", good, "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != "" || !strings.Contains(stderr, "graded 1 lines") {
		t.Errorf("with --out, stdout must be empty and stats on stderr; got %q, %q", stdout, stderr)
	}
	written, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(written), `"strict":true`) {
		t.Fatalf("out file %q (%v)", written, err)
	}

	bad := writeLines(t, `{"pred": "2", "gold": "2"}`, `{broken`)
	if _, _, err := runGradeCmd(t, "--in", bad, "--out", out, "--strict-input"); err == nil {
		t.Fatal("a malformed line with --strict-input must fail")
	}
	after, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(after, written) {
		t.Errorf("failed run changed the out file: %q (%v)", after, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("files left in the out folder: %v (%v)", entries, err)
	}
}

func TestGradeMissingInput(t *testing.T) {
	_, _, err := runGradeCmd(t, "--in", filepath.Join(t.TempDir(), "absent.jsonl"))
	if err == nil || !strings.Contains(err.Error(), "absent.jsonl") {
		t.Fatalf("error %v, want one naming the file", err)
	}
}

func TestGradeStdin(t *testing.T) {
	var stdout, stderr bytes.Buffer
	app := App()
	app.Reader = strings.NewReader(`{"pred": "x", "gold": "x"}` + "\n")
	app.Writer, app.ErrWriter = &stdout, &stderr
	if err := app.Run([]string{"umad", "grade", "--in", "-"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), `"strict":true,"robust":true`) {
		t.Errorf("stdin was not graded: %q %q", stdout.String(), stderr.String())
	}
}

// The robust checker's false "equal"s of the grader sweep, through the command: pairs that
// look alike but differ in sign, names, repeats or digits beyond float64, next to
// look-alikes that are equal.
func TestGradeNearMisses(t *testing.T) {
	pairs := []struct {
		pred, gold string
		robust     bool
	}{
		{`|x|`, `x`, false},
		{`\sqrt{x^2}`, `x`, false},
		{`\sqrt{x^6}`, `x^3`, false},
		{`\frac{x}{|x|}`, `1`, false},
		{`\log(x^2)`, `2\log(x)`, false},
		{`x=1, y=2`, `x=2, y=1`, false},
		{`x=2`, `x=2, y=2`, false},
		{`1,2,2`, `1,2`, false},
		{`10^{-999999999}`, `10^{-999999998}`, false},
		{`10^{-10000}`, `0`, false},
		{`1+10^{-1000000}`, `1`, false},
		{`x+10^{-12}`, `x`, false},
		{`\sqrt{10^{40}+1}`, `10^{20}`, false},
		{`\sqrt{x^2}`, `|x|`, true},
		{`x^2-1`, `(x-1)(x+1)`, true},
		{`y=2, x=1`, `x=1, y=2`, true},
		{`2,1,2`, `1,2,2`, true},
		{`\sqrt{10^{40}}`, `10^{20}`, true},
	}
	var lines []string
	for _, p := range pairs {
		lines = append(lines, mustJSON(t, map[string]string{"pred": p.pred, "gold": p.gold}))
	}
	stdout, stderr, err := runGradeCmd(t, "--in", writeLines(t, lines...))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	out := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(out) != len(pairs) {
		t.Fatalf("%d output lines for %d pairs:\n%s", len(out), len(pairs), stdout)
	}
	for i, p := range pairs {
		var got struct {
			Robust bool
			Rule   string
		}
		if err := json.Unmarshal([]byte(out[i]), &got); err != nil {
			t.Fatal(err)
		}
		if got.Robust != p.robust || (got.Rule == "none") == p.robust {
			t.Errorf("%q vs %q: robust %v (rule %s), want %v", p.pred, p.gold, got.Robust, got.Rule, p.robust)
		}
	}
}

// Invalid UTF-8 in an input string is not copied: JSON readers other than Go's refuse it.
func TestGradeOutputIsValidUTF8(t *testing.T) {
	in := writeLines(t, "{\"note\": \"caf\xe9\", \"response\": \"\\\\boxed{5}\xff\\\\boxed{\xc3(}\", \"gold\": \"5\xfe\"}")
	stdout, stderr, err := runGradeCmd(t, "--in", in)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !utf8.ValidString(stdout) {
		t.Fatalf("output is not valid UTF-8: %q", stdout)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got["note"] != "caf\uFFFD" || got["gold"] != "5\uFFFD" || got["extracted"] != "\uFFFD(" {
		t.Errorf("invalid bytes were not replaced by U+FFFD: %q", stdout)
	}
}

// TestGradeCompare: --compare writes, per robust rule, how often each mode alone called a
// line correct and which lines, from a real JSONL file; lines the modes agree on are left out.
func TestGradeCompare(t *testing.T) {
	in := writeLines(t,
		`{"pred": "1,000", "gold": "1000"}`,
		`{"pred": "x \\ne 3", "gold": "3 \\neq x"}`,
		`{"pred": "12", "gold": "1 2"}`,
		`{"pred": "x = 2/7 \\approx 0.29", "gold": "0.29"}`,
		`{"pred": "5", "gold": "5"}`,
		`{"pred": "6", "gold": "5"}`,
		`{"response": "\\boxed{a|b}", "gold": "5"}`,
		`{"pred": "7", "gold": "7 : 1"}`,
	)
	report := filepath.Join(t.TempDir(), "compare.md")
	_, stderr, err := runGradeCmd(t, "--in", in, "--compare", report)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	got := string(raw)
	for _, want := range []string{
		"8 lines graded; the modes disagree on 4 (robust only 3, strict only 1).",
		"| unread | 0 | 1 |",
		"## unread\n\n| line | answer | gold | strict | robust |\n|---|---|---|---|---|\n| 3 | `` 12 `` | `` 1 2 `` | true | false |",
		"| approximate | 1 | 0 |",
		"| numeric | 1 | 0 |",
		"| relation | 1 | 0 |",
		"## numeric\n\n| line | answer | gold | strict | robust |\n|---|---|---|---|---|\n| 1 | `` 1,000 `` | `` 1000 `` | false | true |",
		"| 2 | `` x \\ne 3 `` | `` 3 \\neq x `` | false | true |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	for _, agreed := range []string{"| 5 |", "| 6 |", "| 7 |", "| 8 |", "| none |"} {
		if strings.Contains(got, agreed) {
			t.Errorf("report lists a line the modes agree on (%s):\n%s", agreed, got)
		}
	}
	if _, _, err := runGradeCmd(t, "--in", in, "--compare", filepath.Join(in, "c.md")); err == nil || !strings.Contains(err.Error(), "--compare") {
		t.Errorf("unwritable --compare path: err %v, want one naming --compare", err)
	}
}

// TestGradeLastMath: --last-math takes the last math span of a boxless response in prose.
func TestGradeLastMath(t *testing.T) {
	in := writeLines(t, `{"response": "So the result is \\(17\\).", "gold": "17"}`)
	for _, c := range []struct {
		args   []string
		robust bool
	}{{nil, false}, {[]string{"--last-math"}, true}} {
		stdout, stderr, err := runGradeCmd(t, append([]string{"--in", in}, c.args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var got struct{ Robust bool }
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		if got.Robust != c.robust {
			t.Errorf("umad grade %v: robust %v, want %v (%s)", c.args, got.Robust, c.robust, stdout)
		}
	}
}
