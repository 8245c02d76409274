package cli

import (
	"fmt"
	"io"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/gradefile"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/interrupt"
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

func runGrade(c *ucli.Context) error {
	opt := gradefile.Options{
		ResponseField: c.String("response-field"),
		PredField:     c.String("pred-field"),
		GoldField:     c.String("gold-field"),
		QuestionField: c.String("question-field"),
		Extract: grade.ExtractOptions{
			GSM8KHash: c.Bool("gsm8k-hash"), AnswerPhrase: c.Bool("answer-phrase"), LastMath: c.Bool("last-math"),
			LastNumberFallback: c.Bool("last-number"),
		},
		StrictInput: c.Bool("strict-input"),
	}
	check, err := openRunVerifier(c, c.Int("threads"))
	if err != nil {
		return err
	}
	if check != nil {
		defer check.Close()
		ctx, release := interrupt.Context("")
		defer release()
		check.Ctx, opt.Verifier = ctx, check
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
	var stats *gradefile.Stats
	gradeAll := func(w io.Writer) (err error) {
		stats, err = gradefile.Lines(in, w, c.App.ErrWriter, opt)
		return err
	}
	if err := writeOutput(c, c.String("out"), gradeAll); err != nil {
		return fmt.Errorf("grade %s: %w", inPath, err)
	}
	stats.Print(c.App.ErrWriter)
	if path := c.String("compare"); path != "" {
		if err := atomicfile.Write(path, stats.WriteComparison); err != nil {
			return fmt.Errorf("grade --compare %s: %w", path, err)
		}
	}
	return nil
}
