package data

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"github.com/umad-dev/umad/grade"
)

// layout is one known row shape: how to recognise it and how to turn a row into a Problem.
type layout struct {
	name string
	// matches reports whether a file's first row (and for the benchmarks whose rows look
	// alike, its path) has this layout; layouts are tried in order.
	matches func(r record, pathKey string) bool
	// required lists the fields an explicit format needs; each entry is satisfied by any
	// one of its alternatives.
	required [][]string
	convert  func(r record, dataset string) (Problem, error)
}

var layouts = []layout{
	{
		name:     "verl",
		matches:  func(r record, _ string) bool { return r.has("prompt") && r.has("reward_model") },
		required: [][]string{{"prompt"}, {"reward_model"}},
		convert:  verlProblem,
	},
	{
		name: "gsm8k",
		matches: func(r record, _ string) bool {
			return r.has("question") && strings.Contains(r.text("answer"), "#### ")
		},
		required: [][]string{{"question"}, {"answer"}},
		convert:  gsm8kProblem,
	},
	{
		name:     "math500",
		matches:  func(r record, _ string) bool { return r.has("problem") && r.has("answer") && r.has("unique_id") },
		required: [][]string{{"problem"}, {"answer"}},
		convert:  answerProblem,
	},
	{
		name:     "math",
		matches:  func(r record, _ string) bool { return r.has("problem") && r.has("solution") && !r.has("answer") },
		required: [][]string{{"problem"}, {"solution"}},
		convert:  answerProblem,
	},
	namedBenchmark("amc23", "amc2023"),
	namedBenchmark("aime24", "aime2024"),
	namedBenchmark("aime25", "aime2025"),
	{
		name: "hf",
		matches: func(r record, _ string) bool {
			return (r.has("problem") || r.has("question")) && (r.has("answer") || r.has("solution"))
		},
		required: [][]string{{"problem", "question"}, {"answer", "solution"}},
		convert:  answerProblem,
	},
}

// namedBenchmark is a problem+answer layout that only the file's path tells apart from the
// others (aime24/test.jsonl, aime_2024.parquet).
func namedBenchmark(name, longName string) layout {
	return layout{
		name: name,
		matches: func(r record, pathKey string) bool {
			return (r.has("problem") || r.has("question")) && r.has("answer") &&
				(strings.Contains(pathKey, name) || strings.Contains(pathKey, longName))
		},
		required: [][]string{{"problem", "question"}, {"answer"}},
		convert:  answerProblem,
	}
}

func findLayout(name string) *layout {
	for i := range layouts {
		if layouts[i].name == name {
			return &layouts[i]
		}
	}
	return nil
}

// chooseLayout checks an explicit format against the first row's fields, or detects one.
func chooseLayout(path string, first record, format string) (*layout, error) {
	if format != "" {
		l := findLayout(format)
		for _, alternatives := range l.required {
			if !hasAny(first, alternatives) {
				return nil, fmt.Errorf("format %s needs field %s; fields found: %s",
					format, strings.Join(alternatives, " or "), strings.Join(first.fields(), ", "))
			}
		}
		return l, nil
	}
	key := pathKey(path)
	for i := range layouts {
		if layouts[i].matches(first, key) {
			return &layouts[i], nil
		}
	}
	return nil, fmt.Errorf("unknown data layout; fields found: %s (want problem or question with answer "+
		"or solution, or verl's prompt and reward_model)", strings.Join(first.fields(), ", "))
}

func hasAny(r record, keys []string) bool {
	for _, k := range keys {
		if r.has(k) {
			return true
		}
	}
	return false
}

// pathKey is the file's folder and name, lower case, without '_' and '-', so aime_2024 and
// AIME-2024 both read aime2024.
func pathKey(path string) string {
	dir, file := filepath.Split(filepath.Clean(path))
	key := filepath.Base(dir) + "/" + file
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(key))
}

// answerProblem reads the problem+answer layouts (MATH, MATH500, AMC, AIME, Hugging Face):
// the gold is the answer field, or the last \boxed{} of the solution when there is none.
func answerProblem(r record, dataset string) (Problem, error) {
	p := Problem{
		ID:       r.firstText("unique_id", "id", "idx", "problem_idx", "index"),
		Dataset:  dataset,
		Question: r.firstText("problem", "question"),
		Gold:     r.text("answer"),
		Subject:  r.firstText("subject", "type"),
		Level:    levelOf(r["level"]),
		Solution: r.text("solution"),
	}
	if strings.TrimSpace(p.Gold) == "" && p.Solution != "" {
		gold, err := boxedAnswer(p.Solution)
		if err != nil {
			return Problem{}, fmt.Errorf("solution: %w", err)
		}
		p.Gold = gold
	}
	return p, p.check()
}

// gsm8kAnswer is the reference's pattern for the final answer of a GSM8K solution.
var gsm8kAnswer = regexp.MustCompile(`#### (\-?[0-9\.\,]+)`)

// gsm8kProblem reads GSM8K: the gold is the number after "#### " without thousands commas.
func gsm8kProblem(r record, dataset string) (Problem, error) {
	solution := r.text("answer")
	m := gsm8kAnswer.FindStringSubmatch(solution)
	if m == nil {
		return Problem{}, errors.New(`answer has no "#### N" final answer`)
	}
	p := Problem{
		ID:       r.firstText("id", "idx", "index"),
		Dataset:  dataset,
		Question: r.text("question"),
		Gold:     strings.ReplaceAll(m[1], ",", ""),
		Solution: solution,
	}
	return p, p.check()
}

// Instructions are the suffixes the reference preprocessing appends to every verl prompt
// (MATH-style and GSM8K-style); Load removes them from Question.
var Instructions = []string{
	`Let's think step by step and output the final answer within \boxed{}.`,
	`Let's think step by step and output the final answer after "####".`,
}

// verlProblem reads a verl row: prompt (a list of {role, content}), reward_model.ground_truth,
// data_source, extra_info {index, subset, ...}, and top-level level and type.
func verlProblem(r record, _ string) (Problem, error) {
	content, err := userContent(r["prompt"])
	if err != nil {
		return Problem{}, err
	}
	extra := r.group("extra_info")
	level := r["level"]
	if level == nil {
		level = extra["level"]
	}
	p := Problem{
		ID:       extra.text("index"),
		Dataset:  cmp.Or(extra.text("subset"), r.text("data_source"), "verl"),
		Question: stripInstruction(content),
		Gold:     r.group("reward_model").text("ground_truth"),
		Subject:  cmp.Or(r.text("type"), extra.firstText("subject", "type")),
		Level:    levelOf(level),
		Solution: extra.text("solution"),
	}
	return p, p.check()
}

// userContent returns the first user message of a chat prompt (or the first message when
// none has a role), or the prompt itself when it is plain text.
func userContent(prompt any) (string, error) {
	if s, ok := prompt.(string); ok {
		return s, nil
	}
	messages, _ := prompt.([]any)
	if len(messages) == 0 {
		return "", errors.New("prompt is not a list of {role, content} messages")
	}
	for _, m := range messages {
		msg, _ := m.(map[string]any)
		if record(msg).text("role") == "user" {
			return record(msg).text("content"), nil
		}
	}
	first, _ := messages[0].(map[string]any)
	return record(first).text("content"), nil
}

func stripInstruction(content string) string {
	trimmed := strings.TrimRightFunc(content, unicode.IsSpace)
	for _, instruction := range Instructions {
		if rest, ok := strings.CutSuffix(trimmed, instruction); ok {
			return strings.TrimRightFunc(rest, unicode.IsSpace)
		}
	}
	return content
}

// boxedAnswer is the reference's remove_boxed(last_boxed_only_string(solution)).
func boxedAnswer(solution string) (string, error) {
	boxed, ok := grade.LastBoxedOnlyString(solution)
	if !ok {
		return "", errors.New(`no \boxed{} answer`)
	}
	answer, ok := grade.RemoveBoxed(boxed)
	if !ok {
		return "", fmt.Errorf("cannot unbox %q", boxed)
	}
	return answer, nil
}

// errEmptyGold marks a row whose gold is present but empty, like the two MATH training
// problems whose solutions end in an empty \boxed{}. Such a row cannot be graded (the strict
// checker would reward an empty box), so Load drops it with a warning even when malformed
// rows are fatal: it is a defect of the data set, not of the file.
var errEmptyGold = errors.New("empty gold answer")

func (p Problem) check() error {
	if strings.TrimSpace(p.Question) == "" {
		return errors.New("no question")
	}
	if strings.TrimSpace(p.Gold) == "" {
		return errEmptyGold
	}
	return nil
}
