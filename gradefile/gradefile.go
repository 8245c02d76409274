// Package gradefile grades a JSONL file of answers line by line with both checkers, strict
// and robust, and a verifier model for the pairs robust does not decide: each line comes back
// with every field it had plus its verdicts, and the run's counts and disagreements are kept
// for a summary and a Markdown report (umad grade).
package gradefile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/internal/jsonline"
	"github.com/umad-dev/umad/verifier"
)

// Options are the fields a line's answers are read from and how they are graded.
type Options struct {
	ResponseField, PredField, GoldField string
	// QuestionField is the question, for the verifier's prompt.
	QuestionField string
	Extract       grade.ExtractOptions
	// StrictInput stops at the first malformed line instead of skipping it.
	StrictInput bool
	// Verifier, when set, is asked about the pairs robust does not decide.
	Verifier *verifier.Session
}

// verifierChunk is how many lines are held to ask the verifier about their pairs at once.
const verifierChunk = 64

// Lines grades every line of in onto out; malformed lines are reported on errs and
// skipped, or returned as the error with opt.StrictInput. With a verifier, lines are held
// in chunks, so that the model is asked about a chunk's pairs at once.
func Lines(in io.Reader, out, errs io.Writer, opt Options) (*Stats, error) {
	stats := &Stats{check: opt.Verifier}
	return stats, opt.lines(in, out, errs, stats)
}

// lines is Lines, counting into stats.
func (opt Options) lines(in io.Reader, out, errs io.Writer, stats *Stats) error {
	chunk := 1
	if opt.Verifier != nil {
		chunk = verifierChunk
	}
	var held []*gradedLine
	flush := func() error {
		if err := opt.decide(held); err != nil {
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
		g, err := opt.gradeLine(lineNo, line)
		if err != nil {
			if opt.StrictInput {
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
func (opt Options) gradeLine(lineNo int, line []byte) (*gradedLine, error) {
	obj, err := jsonline.Parse(line)
	if err != nil {
		return nil, err
	}
	goldValue, ok := obj.Get(opt.GoldField)
	if !ok {
		return nil, fmt.Errorf("no %q field; fields found: %s", opt.GoldField, obj.Keys())
	}
	gold, err := answerText(goldValue)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", opt.GoldField, err)
	}
	if strings.TrimSpace(gold) == "" {
		return nil, fmt.Errorf("field %q is empty", opt.GoldField)
	}

	var v grade.Verdict
	var extracted string
	if raw, ok := obj.Get(opt.ResponseField); ok {
		var response string // null reads as "", which has no answer
		if err := json.Unmarshal(raw, &response); err != nil {
			return nil, fmt.Errorf("field %q is not a string", opt.ResponseField)
		}
		v, extracted = grade.Grade(response, gold, opt.Extract)
	} else if raw, ok := obj.Get(opt.PredField); ok {
		if extracted, err = answerText(raw); err != nil {
			return nil, fmt.Errorf("field %q: %w", opt.PredField, err)
		}
		v = grade.GradeAnswer(extracted, gold)
	} else {
		return nil, fmt.Errorf("neither %q nor %q field; fields found: %s", opt.ResponseField, opt.PredField, obj.Keys())
	}
	g := &gradedLine{obj: obj, lineNo: lineNo, v: v, extracted: extracted, gold: gold}
	if opt.Verifier != nil && !v.NoAnswer && !v.Decided(extracted, gold) {
		g.ask = true
		if raw, ok := obj.Get(opt.QuestionField); ok {
			if g.question, err = answerText(raw); err != nil {
				return nil, fmt.Errorf("field %q: %w", opt.QuestionField, err)
			}
		}
	}
	return g, nil
}

// finish returns the line with the verdict fields set, and counts them. The verifier
// field is there only when a verifier was given.
func (g *gradedLine) finish(stats *Stats) ([]byte, error) {
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
	if stats.check != nil {
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

// decide asks the verifier about the held lines' pairs and puts its verdicts in them;
// without a verifier it does nothing.
func (opt Options) decide(lines []*gradedLine) error {
	if opt.Verifier == nil {
		return nil
	}
	var pairs []verifier.Pair
	var asked []*gradedLine
	for _, g := range lines {
		if g.ask {
			pairs = append(pairs, verifier.Pair{Question: g.question, Gold: g.gold, Answer: g.extracted})
			asked = append(asked, g)
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	checks, err := opt.Verifier.Pairs(pairs)
	if err != nil {
		return err
	}
	for i, g := range asked {
		g.v.Verifier = checks[i]
	}
	return nil
}
