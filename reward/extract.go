package reward

import (
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
}

// Extract returns the final answer of a model response; ok=false means "no
// answer". The last "\boxed{...}", "\boxed ..." (space form) or "\fbox{...}"
// wins, whichever comes last in the text; then, if enabled, the last "#### N"
// (commas dropped, as GSM8K's own extractor does); then, if enabled, the last
// number. Empty or unclosed boxes are no answer, and so is any text after
// them that is not itself a box.
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
	if opt.LastNumberFallback {
		return lastNumber(response)
	}
	return "", false
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
	if !ok {
		return "", true
	}
	return inner, true
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
// optional thousands commas (dropped) and an optional decimal part, or a
// simple fraction a/b.
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
		case c == ',' && start > 1 && isDigit(s[start-2]) && groupOfThree(s[start:end]):
			start--
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
	num := strings.ReplaceAll(s[start:end], ",", "")
	return num, true
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

func isDigit(c byte) bool       { return c >= '0' && c <= '9' }
func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
