package grade

import (
	"slices"
	"strings"
)

// ExtractOptions selects the answer formats Extract accepts besides boxes.
type ExtractOptions struct {
	// LastNumberFallback takes the last number of the response when it has
	// no box (and no "#### N" line when GSM8KHash is set). Off for
	// MATH-style scoring, where an unboxed response has no answer.
	LastNumberFallback bool
	// GSM8KHash also accepts GSM8K's "#### N" final line.
	GSM8KHash bool
	// AnswerPhrase also accepts "the answer is X" or "Answer: X" when the
	// response has no box (tried after "#### N").
	AnswerPhrase bool
	// LastMath takes the last math span ($...$, \(...\), \[...\]) of a
	// response in prose when it has no box or answer phrase, as symbolic
	// graders do: "So the result is \(17\)." answers 17.
	LastMath bool
}

// Extract returns the final answer of a model response; ok=false means "no
// answer". The last "\boxed{...}", "\boxed ..." (space form) or "\fbox{...}"
// wins, whichever comes last in the text, joined with the boxes right
// before it that only commas, "and" or math delimiters separate (a set
// answered as \boxed{1}, \boxed{2}); then, if enabled, the last "#### N"
// (commas dropped, as GSM8K's own extractor does); then, if enabled, an
// answer phrase; then, if enabled, the last number, or the whole math span
// holding it (a number inside \frac{5}{6} alone is worse than no answer).
// Empty or unclosed boxes are no answer, and so is any text after them that
// is not itself a box.
func Extract(response string, opt ExtractOptions) (string, bool) {
	if ans, found := lastBox(response); found {
		ans = strings.TrimSpace(ans)
		return ans, ans != ""
	}
	if opt.GSM8KHash {
		if ans, ok := lastHashAnswer(response); ok {
			return ans, true
		}
	}
	if opt.AnswerPhrase {
		if ans, ok := answerPhrase(response); ok {
			return ans, true
		}
	}
	if opt.LastMath {
		if ans, ok := proseAnswer(response); ok {
			return ans, true
		}
	}
	if opt.LastNumberFallback {
		return lastNumber(response)
	}
	return "", false
}

// mathDelims open and close math spans, longest first.
var mathDelims = [][2]string{{"$$", "$$"}, {`\(`, `\)`}, {`\[`, `\]`}, {"$", "$"}}

// proseAnswer reads the answer of a text in prose: its last math span that
// is more than a lone letter ("holds for every $x$" names a variable),
// joined with the spans right before it that only commas, "and" or "or"
// separate ("the roots are $1$ and $2$"), and of a computation "2+3=5" its
// result. ok is false when s has no math span, or words other than "and"
// and "or" outside several spans.
func proseAnswer(s string) (string, bool) {
	var spans, gaps []string // gaps[i] is the text before spans[i]
	var prose, gap strings.Builder
	for rest := s; rest != ""; {
		at, d := nextDelim(rest)
		if at < 0 {
			prose.WriteString(rest)
			break
		}
		prose.WriteString(rest[:at])
		gap.WriteString(rest[:at])
		body := rest[at+len(d[0]):]
		end := strings.Index(body, d[1])
		if end < 0 {
			prose.WriteString(body)
			break
		}
		if span := strings.TrimSpace(body[:end]); isLoneLetter(span) {
			gap.WriteString(" " + span + " ")
		} else {
			spans, gaps = append(spans, span), append(gaps, gap.String())
			gap.Reset()
		}
		rest = body[end+len(d[1]):]
	}
	if len(spans) == 0 || !isProse(prose.String()) {
		return "", false
	}
	first := len(spans) - 1
	for first > 0 && len(spans)-first < maxElems && listGap(gaps[first]) {
		first--
	}
	if first < len(spans)-1 {
		return strings.Join(spans[first:], ", "), true
	}
	span := strings.TrimRight(spans[first], ".,; ")
	// Of "2+3=5" the result; "7 = 11a+c" is an equation, not its right-hand side.
	if sides := splitTop(span, "="); len(sides) > 1 && !hasLetter(sides[0]) && !hasLetter(sides[len(sides)-1]) {
		span = strings.TrimSpace(sides[len(sides)-1])
	}
	return span, span != ""
}

// listGap reports text between two math spans that only joins them into a
// list: ", ", " and ", ", or ".
func listGap(gap string) bool {
	if strings.TrimSpace(gap) == "" {
		return false
	}
	for _, w := range strings.FieldsFunc(gap, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		if w != "and" && w != "or" {
			return false
		}
	}
	return true
}

// isProse reports text around math spans that is blank (one span) or
// has words other than the connectives of an answer list ("$1$ and $2$").
func isProse(s string) bool {
	if strings.TrimSpace(s) == "" {
		return true
	}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r > 127 || !isASCIILetter(byte(r)) }) {
		if w != "and" && w != "or" {
			return true
		}
	}
	return false
}

// nextDelim finds the first math delimiter in s, skipping the escaped
// dollar \$ of a price.
func nextDelim(s string) (int, [2]string) {
	best, which := -1, [2]string{}
	for _, d := range mathDelims {
		for from := 0; from < len(s); {
			i := strings.Index(s[from:], d[0])
			if i < 0 {
				break
			}
			i += from
			if d[0] == "$" && i > 0 && s[i-1] == '\\' {
				from = i + 1
				continue
			}
			if best < 0 || i < best {
				best, which = i, d
			}
			break
		}
	}
	return best, which
}

// isLoneLetter reports a span that only names a variable: "x", "\theta".
func isLoneLetter(s string) bool {
	return len(s) == 1 && isASCIILetter(s[0]) || len(s) > 1 && s[0] == '\\' && greek[s[1:]]
}

// hasLetter reports an ASCII letter outside control words: a side with a
// variable, not a computation.
func hasLetter(s string) bool {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\':
			i += len(wordAt(s, i+1))
		case isASCIILetter(s[i]):
			return true
		}
	}
	return false
}

// phrases introduce a final answer in prose, matched case-blind.
var phrases = []string{"answer is", "answer:"}

// answerPhrase reads the answer after the last phrase: a math span
// ($...$, \(...\), \[...\]) if one starts there, else the text up to the
// end of the sentence or line.
func answerPhrase(s string) (string, bool) {
	lower := asciiLower(s)
	at := -1
	for _, p := range phrases {
		if i := strings.LastIndex(lower, p); i >= 0 && i+len(p) > at {
			at = i + len(p)
		}
	}
	if at < 0 {
		return "", false
	}
	rest := strings.TrimLeft(s[at:], " \t:")
	for _, d := range [][2]string{{"$$", "$$"}, {"$", "$"}, {`\(`, `\)`}, {`\[`, `\]`}} {
		if strings.HasPrefix(rest, d[0]) {
			if j := strings.Index(rest[len(d[0]):], d[1]); j >= 0 {
				rest = rest[len(d[0]) : len(d[0])+j]
			}
			break
		}
	}
	if i := strings.Index(rest, "\n"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.Index(rest, ". "); i >= 0 {
		rest = rest[:i]
	}
	ans := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(rest), "."))
	return ans, ans != ""
}

// lastBox finds the box that starts last. found reports that a box command
// was present; its content is "" when the box is empty or never closes.
func lastBox(s string) (content string, found bool) {
	start, cmdLen := -1, 0
	for _, cmd := range []string{`\boxed`, `\fbox`} {
		if i := lastCommand(s, cmd); i > start {
			start, cmdLen = i, len(cmd)
		}
	}
	if start < 0 {
		return "", false
	}
	rest := strings.TrimLeft(s[start+cmdLen:], " \t")
	if rest == "" {
		return "", true
	}
	if rest[0] != '{' {
		return spacedBoxContent(rest), true
	}
	inner, ok := braceGroup(rest)
	if !ok || strings.TrimSpace(inner) == "" {
		return "", true // an empty last box is no answer, whatever precedes it
	}
	answers := []string{inner}
	for before := s[:start]; len(answers) < maxElems; {
		prev, at, ok := boxEndingAt(dropUnit(trimSeparators(before), before))
		if !ok {
			break
		}
		answers = append(answers, prev)
		before = before[:at]
	}
	slices.Reverse(answers)
	return strings.Join(answers, ", "), true
}

// boxSeparators may stand between boxes that together make one answer.
var boxSeparators = []string{",", ";", "$", "and", "or", `\quad`, `\qquad`, `\text{and}`, `\text{ and }`, `\(`, `\)`, `\[`, `\]`, `\,`}

// trimSeparators removes separators from the end of s; "" when none was
// there, since boxes written side by side without one are not a list.
func trimSeparators(s string) string {
	orig := len(s)
	for trimmed := true; trimmed; {
		s = strings.TrimRight(s, " \t\n")
		trimmed = false
		for _, sep := range boxSeparators {
			if strings.HasSuffix(s, sep) {
				s, trimmed = s[:len(s)-len(sep)], true
			}
		}
	}
	if len(s) == orig {
		return ""
	}
	return s
}

// dropUnit removes one word of letters after a box, the unit of
// "\boxed{3} apples and \boxed{5} pears", from s, what came before a box
// less its separators; s is returned as it is when before had no
// separator but space or no box comes before the word.
func dropUnit(s, before string) string {
	if s == strings.TrimRight(before, " \t\n") {
		return s
	}
	t := strings.TrimRight(s, " ")
	i := len(t)
	for i > 0 && isASCIILetter(t[i-1]) {
		i--
	}
	if i == len(t) || len(t)-i < 2 || i == len(strings.TrimRight(t[:i], " ")) {
		return s
	}
	if head := strings.TrimRight(t[:i], " "); strings.HasSuffix(head, "}") {
		return head
	}
	return s
}

// boxEndingAt returns the content of a "\boxed{...}" that ends s and
// where it starts.
func boxEndingAt(s string) (inner string, at int, ok bool) {
	if !strings.HasSuffix(s, "}") {
		return "", 0, false
	}
	at = lastCommand(s, `\boxed`)
	if at < 0 {
		return "", 0, false
	}
	rest := strings.TrimLeft(s[at+len(`\boxed`):], " \t")
	inner, ok = braceGroup(rest)
	if !ok || len(inner)+2 != len(rest) || strings.TrimSpace(inner) == "" {
		return "", 0, false
	}
	return inner, at, true
}

// lastCommand is the index of the last cmd in s that is a whole control word
// (not the start of a longer one, such as \boxedsymbol).
func lastCommand(s, cmd string) int {
	for end := len(s); ; {
		i := strings.LastIndex(s[:end], cmd)
		if i < 0 {
			return -1
		}
		if next := i + len(cmd); next == len(s) || !isASCIILetter(s[next]) {
			return i
		}
		end = i
	}
}

// spacedBoxContent reads the answer of "\boxed 5": up to the end of the
// math or the line, without sentence punctuation.
func spacedBoxContent(s string) string {
	if i := strings.IndexAny(s, "$\n"); i >= 0 {
		s = s[:i]
	}
	for _, closer := range []string{`\]`, `\)`} {
		if i := strings.Index(s, closer); i >= 0 {
			s = s[:i]
		}
	}
	return strings.TrimRight(strings.TrimSpace(s), ".,;")
}

// braceGroup returns the inside of the brace group that s starts with,
// honouring nesting and skipping escaped braces (\{ and \}).
func braceGroup(s string) (string, bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped character never opens or closes a group
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[1:i], true
			}
		}
	}
	return "", false
}

// lastHashAnswer reads GSM8K's "#### N": like the reference extractor, a
// signed run of digits, dots and commas, with the commas removed.
func lastHashAnswer(s string) (string, bool) {
	i := strings.LastIndex(s, "####")
	if i < 0 {
		return "", false
	}
	rest := strings.TrimLeft(s[i+4:], " \t")
	end := 0
	if end < len(rest) && rest[end] == '-' {
		end++
	}
	digits := false
	for end < len(rest) && (isDigit(rest[end]) || rest[end] == '.' || rest[end] == ',') {
		digits = digits || isDigit(rest[end])
		end++
	}
	if !digits {
		return "", false
	}
	ans := strings.TrimRight(strings.ReplaceAll(rest[:end], ",", ""), ".")
	return ans, true
}

// lastNumber returns the last number in s: an optional minus, digits with
// optional thousands commas or spaces (dropped) and an optional decimal
// part, or a simple fraction a/b.
func lastNumber(s string) (string, bool) {
	end := len(s)
	for end > 0 && !isDigit(s[end-1]) {
		end--
	}
	if end == 0 {
		return "", false
	}
	start := end
scan:
	for start > 0 {
		c := s[start-1]
		switch {
		case isDigit(c):
			start--
		case (c == '.' || c == '/') && start > 1 && isDigit(s[start-2]):
			start--
		case (c == ',' || c == ' ') && start > 1 && isDigit(s[start-2]) && groupOfThree(s[start:end]):
			start-- // "1,200" and "118 000" (GSM8K writes both)
		default:
			break scan
		}
	}
	if start > 0 && s[start-1] == '.' {
		start-- // ".5"
	}
	if start > 0 && s[start-1] == '-' {
		start--
	}
	if span, ok := mathSpan(s, start, end); ok {
		return span, true
	}
	if end < len(s) && s[end] == '}' || start > 0 && s[start-1] == '{' {
		return "", false // an argument of \frac or \sqrt outside math delimiters
	}
	num := strings.NewReplacer(",", "", " ", "").Replace(s[start:end])
	return num, true
}

// mathSpan returns the math span ($...$, \(...\), \[...\]) around
// s[start:end] when the number is part of a larger expression, after its
// last "=": the answer of "$x = \frac{5}{6}$" is \frac{5}{6}, not 6.
func mathSpan(s string, start, end int) (string, bool) {
	open, close := -1, -1
	if n := strings.Count(s[:start], "$") - strings.Count(s[:start], `\$`); n%2 == 1 {
		open = strings.LastIndex(s[:start], "$") + 1
		if j := strings.Index(s[end:], "$"); j >= 0 {
			close = end + j
		}
	}
	for _, d := range [][2]string{{`\(`, `\)`}, {`\[`, `\]`}} {
		if i := strings.LastIndex(s[:start], d[0]); i >= 0 && i > strings.LastIndex(s[:start], d[1]) {
			if j := strings.Index(s[end:], d[1]); j >= 0 {
				open, close = i+len(d[0]), end+j
			}
		}
	}
	if open < 0 || close < 0 {
		return "", false
	}
	sides := splitTop(s[open:close], "=")
	span := strings.TrimRight(strings.TrimSpace(sides[len(sides)-1]), ".,")
	if span == strings.TrimSpace(s[start:end]) || !strings.Contains(span, strings.TrimSpace(s[start:end])) {
		return "", false // a plain number: keep the number rules
	}
	if !strings.ContainsAny(span, `\^{_`) {
		return "", false // no LaTeX: the dollar signs were prices, as in GSM8K
	}
	return span, true
}

// groupOfThree reports whether s begins with exactly three digits followed
// by a non-digit, which is what a thousands comma must precede.
func groupOfThree(s string) bool {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n == 3
}

// asciiLower lowers ASCII letters only, so that indices into the result
// are indices into s (strings.ToLower rewrites invalid UTF-8).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func isDigit(c byte) bool       { return c >= '0' && c <= '9' }
func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
