package verifier

// The verifier's prompt, read from the file its authors publish, and the reading of its
// output.

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/umad-dev/umad/grade"
)

// Template is a verifier's prompt with its three fields: the text its model was trained
// on, which umad does not ship (its authors publish it; README "Verifier model"). It is
// written as Python's str.format writes it, as CompassVerifier's CV_PROMPT is: {question},
// {gold_answer} and {llm_response} are the fields, {{ and }} literal braces.
type Template struct {
	parts []string // literal text and fields, alternating, starting with text
}

// templateFields are a template's fields, each of which it must use.
var templateFields = []string{"question", "gold_answer", "llm_response"}

// MaxTemplateBytes caps a template file (a published verifier prompt is a few KiB): a
// larger one, or an endless one such as /dev/zero, is refused before it is read whole.
const MaxTemplateBytes = 1 << 20

// ReadTemplate reads and parses a prompt template file.
func ReadTemplate(path string) (Template, error) {
	f, err := os.Open(path)
	if err != nil {
		return Template{}, fmt.Errorf("verifier prompt: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxTemplateBytes+1))
	if err != nil {
		return Template{}, fmt.Errorf("verifier prompt: %w", err)
	}
	if len(b) > MaxTemplateBytes {
		return Template{}, fmt.Errorf("verifier prompt %s: larger than %d bytes; a prompt template is a few KiB", path, MaxTemplateBytes)
	}
	t, err := ParseTemplate(string(b))
	if err != nil {
		return Template{}, fmt.Errorf("verifier prompt %s: %w", path, err)
	}
	return t, nil
}

// ParseTemplate parses a template's text: a brace that is not an escape or a known field
// is an error, as is a field the template never uses.
func ParseTemplate(text string) (Template, error) {
	var t Template
	var lit strings.Builder
	used := map[string]bool{}
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case (c == '{' || c == '}') && i+1 < len(text) && text[i+1] == c:
			lit.WriteByte(c)
			i++
		case c == '{':
			end := strings.IndexByte(text[i:], '}')
			if end < 0 {
				return Template{}, fmt.Errorf("an unclosed { at byte %d (write {{ for a brace)", i)
			}
			name := text[i+1 : i+end]
			if !slices.Contains(templateFields, name) {
				return Template{}, fmt.Errorf("unknown field {%s} (the fields are {question}, {gold_answer} and {llm_response}; write {{ for a brace)", name)
			}
			t.parts = append(t.parts, lit.String(), name)
			lit.Reset()
			used[name] = true
			i += end
		case c == '}':
			return Template{}, fmt.Errorf("a lone } at byte %d (write }} for a brace)", i)
		default:
			lit.WriteByte(c)
		}
	}
	t.parts = append(t.parts, lit.String())
	for _, f := range templateFields {
		if !used[f] {
			return Template{}, fmt.Errorf("the field {%s} is missing", f)
		}
	}
	return t, nil
}

// Prompt is the user message that asks the verifier about a pair. Fields are put in once,
// so an answer containing "{question}" stays as it is.
func (t Template) Prompt(p Pair) string {
	value := map[string]string{"question": p.Question, "gold_answer": p.Gold, "llm_response": p.Answer}
	var b strings.Builder
	for i, part := range t.parts {
		if i%2 == 1 {
			part = value[part]
		}
		b.WriteString(part)
	}
	return b.String()
}

// ParseVerdict reads the verifier's output. CompassVerifier answers with one letter, A
// (correct), B (incorrect) or C (invalid); the words its prompt also names, "A: CORRECT"
// and a boxed letter are read the same. C is not equal, as its authors score it. Anything
// else, letters inside prose included, is undecided, never equal.
func ParseVerdict(out string) grade.Check {
	s := strings.TrimSuffix(strings.TrimSpace(out), ".")
	switch s {
	case "A", "CORRECT", "A: CORRECT", `\boxed{A}`:
		return grade.CheckEqual
	case "B", "INCORRECT", "B: INCORRECT", `\boxed{B}`, "C", "INVALID", "C: INVALID", `\boxed{C}`:
		return grade.CheckNotEqual
	}
	return grade.CheckUndecided
}
