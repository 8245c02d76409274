package grade

// Splitting an answer at its top-level separators, and the groups it is written in.

import "strings"

// splitTop splits s at every sep that is outside brackets.
func splitTop(s, sep string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
		if depth == 0 && strings.HasPrefix(s[i:], sep) && wholeWordAt(s, i+len(sep), sep) {
			parts = append(parts, s[start:i])
			start = i + len(sep)
			i += len(sep) - 1
		}
	}
	return append(parts, s[start:])
}

// wholeWordAt keeps a control-word separator such as \cup from matching the
// start of a longer word.
func wholeWordAt(s string, end int, sep string) bool {
	return sep[0] != '\\' || end >= len(s) || !isASCIILetter(s[end])
}

// isWholeGroup reports whether s is one bracket group, ( or [ to ) or ],
// mixed brackets allowed because intervals mix them.
func isWholeGroup(s string) bool {
	if (s[0] != '(' && s[0] != '[') || (s[len(s)-1] != ')' && s[len(s)-1] != ']') {
		return false
	}
	return closesAtEnd(s)
}

// closesAtEnd reports whether the bracket opened at s[0] closes at the last
// byte of s and not before.
func closesAtEnd(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return i == len(s)-1
			}
		}
	}
	return false
}

// setBraces returns the inside of "\{ ... \}", or of "{4, 7}": plain braces around a
// list.
func setBraces(s string) (string, bool) {
	if len(s) >= 2 && s[0] == '{' && s[len(s)-1] == '}' && closesAtEnd(s) && len(splitTop(s[1:len(s)-1], ",")) > 1 &&
		!thousandsRe.MatchString(strings.TrimSpace(s[1:len(s)-1])) { // "{1,000}" is no set
		return s[1 : len(s)-1], true
	}
	if !strings.HasPrefix(s, `\{`) || !strings.HasSuffix(s, `\}`) || len(s) < 4 {
		return "", false
	}
	if !closesAtEnd(s[1:]) {
		return "", false
	}
	return s[2 : len(s)-2], true
}

// expandPlusMinus turns "a \pm b" into "a + b" and "a - b" (\mp the other
// way round); several \pm share one sign, as they do in formulas.
func expandPlusMinus(s string) (plus, minus string, ok bool) {
	if !strings.Contains(s, `\pm`) && !strings.Contains(s, `\mp`) {
		return "", "", false
	}
	plus = strings.NewReplacer(`\pm`, "+", `\mp`, "-").Replace(s)
	minus = strings.NewReplacer(`\pm`, "-", `\mp`, "+").Replace(s)
	return plus, minus, true
}

// splitList splits an answer list at top-level commas, semicolons and the
// words "and" and "or".
func splitList(s string) []string {
	var parts []string
	for _, p := range splitTop(s, ",") {
		for _, q := range splitTop(p, ";") {
			for _, r := range splitTop(q, " and ") {
				parts = append(parts, splitTop(r, " or ")...)
			}
		}
	}
	return parts
}

// tupleParts splits the inside of a tuple at its commas, or at its semicolons where it
// has no comma: "(1;2;3)" is "(1,2,3)".
func tupleParts(inner string) []string {
	if parts := splitTop(inner, ","); len(parts) > 1 {
		return parts
	}
	return splitTop(inner, ";")
}

// bracketedUnit drops the unit of one bracketed value, "[60 degrees]", which is "[60]".
func bracketedUnit(s string) string {
	if len(s) < 3 || s[0] != '[' || s[len(s)-1] != ']' || !closesAtEnd(s) {
		return s
	}
	inner := strings.TrimSpace(s[1 : len(s)-1])
	if len(splitTop(inner, ",")) > 1 {
		return s
	}
	if bare := dropUnitWords(inner); bare != inner {
		return bare
	}
	return s
}
