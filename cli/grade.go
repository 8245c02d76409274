package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/jsonline"
)

func init() {
	register(&ucli.Command{
		Name:      "grade",
		Usage:     "grade answers in a JSONL file with both checkers, strict and robust, and compare them",
		UsageText: "umad grade --in FILE [--out FILE] [--compare FILE] [--response-field response] [--pred-field pred] [--gold-field gold] [--strict-input] [--gsm8k-hash] [--answer-phrase] [--last-math] [--last-number] [--verifier MODEL.gguf --verifier-prompt FILE [--verifier-budget 10m] [--question-field question]]",
		Description: "Each input line is a JSON object holding a gold answer and either a full model\n" +
			"response (its final answer is extracted: the last \\boxed{}) or a bare prediction.\n" +
			"Each line is written back with every field it had, plus:\n" +
			"  extracted  the answer found, or null for none\n" +
			"  key        its canonical form (equal keys are equivalent answers), or null\n" +
			"  strict     the MATH benchmark's is_equiv, as the paper's numbers use it\n" +
			"  robust     a careful grader: commas, trailing zeros, 27.0 vs 27, fractions, sets...\n" +
			"  rule       the robust comparison that found them equal: exact, text, numeric,\n" +
			"             approximate, symbolic, tuple, set, interval, relation or equation;\n" +
			"             none when they differ; null without an answer; verifier where the\n" +
			"             --verifier model decided a pair robust's rules do not\n" +
			"With --verifier MODEL.gguf, the pairs no robust rule decides (a side robust could\n" +
			"not parse, or a word or choice letter against mathematics) go to a verifier model\n" +
			"asked with the --verifier-prompt template (the question is --question-field, empty if absent),\n" +
			"and each line gets a verifier field: equal, not equal, undecided (output naming no\n" +
			"verdict), skipped (--verifier-budget spent), or null for a pair it was not asked.\n" +
			"When a line has both fields, the response is graded. Agreement statistics go to\n" +
			"stderr; --compare also writes a Markdown report of the lines where strict and\n" +
			"robust disagree, counted and listed by robust's rule (unread: robust compared the\n" +
			"spelling of a side it could not parse), to audit a reward before training on it.\n" +
			"Malformed lines are reported with their number and skipped, or stop the run with\n" +
			"--strict-input. --out is written atomically; without it, stdout.\n\n" +
			"Example:\n" +
			"  printf '%s\\n' '{\"response\": \"so \\\\boxed{1,000}\", \"gold\": \"1000\"}' > /tmp/r.jsonl\n" +
			"  umad grade --in /tmp/r.jsonl        # strict false, robust true",
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "in", Usage: "JSONL file to grade (- for stdin)", Required: true},
			&ucli.StringFlag{Name: "out", Usage: "write the graded lines here instead of stdout"},
			&ucli.StringFlag{Name: "response-field", Value: "response", Usage: "field with a full response"},
			&ucli.StringFlag{Name: "pred-field", Value: "pred", Usage: "field with a bare predicted answer"},
			&ucli.StringFlag{Name: "gold-field", Value: "gold", Usage: "field with the gold answer"},
			&ucli.BoolFlag{Name: "strict-input", Usage: "stop at the first malformed line instead of skipping it"},
			&ucli.BoolFlag{Name: "gsm8k-hash", Usage: `also accept a final "#### N" line as a response's answer`},
			&ucli.BoolFlag{Name: "answer-phrase", Usage: `take "the answer is X" or "Answer: X" when a response has no boxed answer`},
			&ucli.BoolFlag{Name: "last-math", Usage: `take the last math span ($...$, \(...\), \[...\]) of a response in prose when it has no boxed answer or answer phrase`},
			&ucli.BoolFlag{Name: "last-number", Usage: "take a response's last number when it has no boxed answer"},
			&ucli.StringFlag{Name: "compare", Usage: "write a Markdown report of the lines where strict and robust disagree, by rule, to this file"},
			&ucli.StringFlag{Name: "question-field", Value: "question", Usage: "field with the question, for the verifier's prompt"},
		}, append(verifierFlags(), verifierLlamaFlags()...)...),
		Action: runGrade,
	})
}

// gradeConfig is what grading one line needs from the flags.
type gradeConfig struct {
	responseField, predField, goldField string
	extract                             grade.ExtractOptions
	// check, when set, asks the verifier model about the pairs robust does not decide.
	check         *runVerifier
	questionField string
}

// gradeStats counts the verdicts of one run.
type gradeStats struct {
	graded, skipped, strict, robust, strictOnly, robustOnly, noAnswer int
	verified                                                          int // correct in robust+verifier mode
	withVerifier                                                      bool
	// disagree holds the lines where the modes differ, for --compare.
	disagree []disagreement
}

// disagreement is a line that strict and robust grade differently.
type disagreement struct {
	line           int
	answer, gold   string
	strict, robust bool
	rule           string // robust's rule; "no answer" where robust extracted none, "unread" where it could not parse a side
}

func runGrade(c *ucli.Context) error {
	cfg := gradeConfig{
		responseField: c.String("response-field"),
		predField:     c.String("pred-field"),
		goldField:     c.String("gold-field"),
		extract: grade.ExtractOptions{
			GSM8KHash: c.Bool("gsm8k-hash"), AnswerPhrase: c.Bool("answer-phrase"), LastMath: c.Bool("last-math"),
			LastNumberFallback: c.Bool("last-number"),
		},
		questionField: c.String("question-field"),
	}
	check, err := openRunVerifier(c, c.Int("threads"))
	if err != nil {
		return err
	}
	if check != nil {
		defer check.Close()
		ctx, release := interruptContext("")
		defer release()
		check.ctx, cfg.check = ctx, check
	}
	inPath := c.String("in")
	in := c.App.Reader
	if inPath != "-" {
		f, err := os.Open(inPath)
		if err != nil {
			return fmt.Errorf("grade: %w", err)
		}
		defer f.Close()
		in = f
	}
	stats := gradeStats{withVerifier: cfg.check != nil}
	gradeAll := func(w io.Writer) error {
		return gradeLines(in, w, c.App.ErrWriter, cfg, c.Bool("strict-input"), &stats)
	}
	if err := writeOutput(c, c.String("out"), gradeAll); err != nil {
		return fmt.Errorf("grade %s: %w", inPath, err)
	}
	stats.print(c.App.ErrWriter, cfg.check)
	if path := c.String("compare"); path != "" {
		if err := atomicfile.Write(path, stats.writeComparison); err != nil {
			return fmt.Errorf("grade --compare %s: %w", path, err)
		}
	}
	return nil
}

// gradeLines grades every line of in onto out; malformed lines are reported on errs and
// skipped, or returned as the error when strictInput is set. With a verifier, lines are
// held in chunks, so that the model is asked about a chunk's pairs at once.
func gradeLines(in io.Reader, out, errs io.Writer, cfg gradeConfig, strictInput bool, stats *gradeStats) error {
	chunk := 1
	if cfg.check != nil {
		chunk = verifierChunk
	}
	var held []*gradedLine
	flush := func() error {
		if err := cfg.check.decide(held); err != nil {
			return err
		}
		for _, g := range held {
			b, err := g.finish(stats)
			if err != nil {
				return err
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
		}
		held = held[:0]
		return nil
	}
	err := data.ReadLines(in, func(lineNo int, line []byte) error {
		g, err := cfg.gradeLine(lineNo, line)
		if err != nil {
			if strictInput {
				return fmt.Errorf("line %d: %w", lineNo, err)
			}
			fmt.Fprintf(errs, "umad grade: line %d skipped: %v\n", lineNo, err)
			stats.skipped++
			return nil
		}
		if held = append(held, g); len(held) == chunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// gradedLine is a line graded by the rules, waiting for the verifier's verdict.
type gradedLine struct {
	obj             *jsonline.Object
	lineNo          int
	v               grade.Verdict
	extracted, gold string
	question        string
	ask             bool // a pair robust does not decide, for the verifier
}

// gradeLine parses and grades one line.
func (cfg gradeConfig) gradeLine(lineNo int, line []byte) (*gradedLine, error) {
	obj, err := jsonline.Parse(line)
	if err != nil {
		return nil, err
	}
	goldValue, ok := obj.Get(cfg.goldField)
	if !ok {
		return nil, fmt.Errorf("no %q field; fields found: %s", cfg.goldField, obj.Keys())
	}
	gold, err := answerText(goldValue)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", cfg.goldField, err)
	}
	if strings.TrimSpace(gold) == "" {
		return nil, fmt.Errorf("field %q is empty", cfg.goldField)
	}

	var v grade.Verdict
	var extracted string
	if raw, ok := obj.Get(cfg.responseField); ok {
		var response string // null reads as "", which has no answer
		if err := json.Unmarshal(raw, &response); err != nil {
			return nil, fmt.Errorf("field %q is not a string", cfg.responseField)
		}
		v, extracted = grade.Grade(response, gold, cfg.extract)
	} else if raw, ok := obj.Get(cfg.predField); ok {
		if extracted, err = answerText(raw); err != nil {
			return nil, fmt.Errorf("field %q: %w", cfg.predField, err)
		}
		v = grade.GradeAnswer(extracted, gold)
	} else {
		return nil, fmt.Errorf("neither %q nor %q field; fields found: %s", cfg.responseField, cfg.predField, obj.Keys())
	}
	g := &gradedLine{obj: obj, lineNo: lineNo, v: v, extracted: extracted, gold: gold}
	if cfg.check != nil && !v.NoAnswer && !v.Decided(extracted, gold) {
		g.ask = true
		if raw, ok := obj.Get(cfg.questionField); ok {
			if g.question, err = answerText(raw); err != nil {
				return nil, fmt.Errorf("field %q: %w", cfg.questionField, err)
			}
		}
	}
	return g, nil
}

// finish returns the line with the verdict fields set, and counts them. The verifier
// field is there only when a verifier was given (withVerifier).
func (g *gradedLine) finish(stats *gradeStats) ([]byte, error) {
	v, extracted, gold := g.v, g.extracted, g.gold
	var extractedJSON, keyJSON, ruleJSON any // null without an answer
	ruleName := "no answer"
	if !v.NoAnswer {
		_, rule := grade.RobustEquivRule(extracted, gold)
		extractedJSON, keyJSON, ruleJSON = extracted, v.Key, rule
		ruleName = string(rule)
	}
	fields := []struct {
		name  string
		value any
	}{{"extracted", extractedJSON}, {"key", keyJSON}, {"strict", v.Strict}, {"robust", v.Robust}, {"rule", ruleJSON}}
	if stats.withVerifier {
		var check any // null: not asked
		if v.Verifier != "" {
			check = v.Verifier
		}
		if v.Verifier == grade.CheckEqual || v.Verifier == grade.CheckNotEqual {
			fields[4].value, ruleName = "verifier", "verifier"
		}
		fields = append(fields, struct {
			name  string
			value any
		}{"verifier", check})
	}
	for _, f := range fields {
		if err := g.obj.Set(f.name, f.value); err != nil {
			return nil, err
		}
	}
	stats.count(v)
	if v.Strict != v.Robust {
		if ruleName == string(grade.RuleNone) && (!grade.Readable(extracted) || !grade.Readable(gold)) {
			ruleName = "unread" // robust compared the spelling of text it could not parse
		}
		stats.disagree = append(stats.disagree, disagreement{g.lineNo, extracted, gold, v.Strict, v.Robust, ruleName})
	}
	return g.obj.Marshal(), nil
}

// answerText reads an answer value: a string, a number (27.0 reads "27"), or null for none.
func answerText(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch v.(type) {
	case nil:
		return "", nil
	case string, json.Number:
		return data.AnswerText(v), nil
	}
	return "", fmt.Errorf("want a string or a number, got %s", raw)
}

func (s *gradeStats) count(v grade.Verdict) {
	strict, robust := v.Correct(grade.Strict), v.Correct(grade.Robust)
	s.graded++
	if v.NoAnswer {
		s.noAnswer++
	}
	if strict {
		s.strict++
	}
	if robust {
		s.robust++
	}
	if v.Correct(grade.Verified) {
		s.verified++
	}
	if strict && !robust {
		s.strictOnly++
	}
	if robust && !strict {
		s.robustOnly++
	}
}

// print writes the counts, and the verifier's where one was given.
func (s gradeStats) print(w io.Writer, check *runVerifier) {
	percent := func(n int) string {
		if s.graded == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f%%", 100*float64(n)/float64(s.graded))
	}
	fmt.Fprintf(w, "graded %d lines, skipped %d malformed\n", s.graded, s.skipped)
	fmt.Fprintf(w, "strict accuracy  %s (%d/%d)\n", percent(s.strict), s.strict, s.graded)
	fmt.Fprintf(w, "robust accuracy  %s (%d/%d)\n", percent(s.robust), s.robust, s.graded)
	fmt.Fprintf(w, "modes disagree   %d (robust only %d, strict only %d)\n", s.strictOnly+s.robustOnly, s.robustOnly, s.strictOnly)
	fmt.Fprintf(w, "no answer        %d\n", s.noAnswer)
	if check != nil {
		fmt.Fprintf(w, "robust+verifier  %s (%d/%d)\n", percent(s.verified), s.verified, s.graded)
		fmt.Fprintf(w, "verifier         %s\n", check.done)
	}
}

// writeComparison writes the --compare report: per rule, how often each mode alone
// called a line correct, then every such line.
func (s gradeStats) writeComparison(w io.Writer) error {
	var rules []string
	byRule := map[string][]disagreement{}
	for _, d := range s.disagree {
		if byRule[d.rule] == nil {
			rules = append(rules, d.rule)
		}
		byRule[d.rule] = append(byRule[d.rule], d)
	}
	slices.Sort(rules)
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# Strict and robust disagreements\n\n%d lines graded; the modes disagree on %d (robust only %d, strict only %d).\n",
		s.graded, len(s.disagree), s.robustOnly, s.strictOnly)
	fmt.Fprintf(b, "The rule is robust's: the comparison that found a line correct, none where it\nfound it wrong, unread where it found it wrong by the spelling of a side it could\nnot parse, no answer where robust's extraction found none.\n\n")
	fmt.Fprintf(b, "| rule | robust only | strict only |\n|---|---|---|\n")
	for _, r := range rules {
		robustOnly := 0
		for _, d := range byRule[r] {
			if d.robust {
				robustOnly++
			}
		}
		fmt.Fprintf(b, "| %s | %d | %d |\n", r, robustOnly, len(byRule[r])-robustOnly)
	}
	for _, r := range rules {
		fmt.Fprintf(b, "\n## %s\n\n| line | answer | gold | strict | robust |\n|---|---|---|---|---|\n", r)
		for _, d := range byRule[r] {
			fmt.Fprintf(b, "| %d | %s | %s | %v | %v |\n", d.line, markdownCell(d.answer), markdownCell(d.gold), d.strict, d.robust)
		}
	}
	return b.Flush()
}

// maxCell bounds an answer shown in the report; a whole solution as gold would
// drown the table.
const maxCell = 200

// markdownCell shows an answer in a table cell: one line, pipes escaped, bounded.
func markdownCell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxCell {
		s = string(r[:maxCell]) + "..."
	}
	return "`` " + strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "`", "'") + " ``"
}
