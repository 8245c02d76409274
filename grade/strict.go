package grade

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// Errors that StripString returns where the reference implementation raises.
// Callers of StrictEquiv never see them: like the reference, it falls back to
// comparing the raw strings.
var (
	errManyUnitTexts = errors.New(`strip: more than one "\text{ " (reference asserts exactly one)`)
	errBareSqrt      = errors.New(`strip: "\sqrt" with nothing after it (reference raises IndexError)`)
	errBareFrac      = errors.New(`strip: "\frac" with nothing after it (reference raises IndexError)`)
)

// StrictScore is the reference's math.compute_score: the response scores
// true only when its last box, as found by LastBoxedOnlyString and unwrapped
// by RemoveBoxed, is StrictEquiv to gold.
func StrictScore(response, gold string) bool {
	boxed, ok := LastBoxedOnlyString(response)
	if !ok {
		return false
	}
	answer, ok := RemoveBoxed(boxed)
	if !ok {
		return false
	}
	return StrictEquiv(answer, gold)
}

// StrictEquiv is the reference's is_equiv on two extracted answers:
// StripString of both must match; if either strip fails, the raw strings
// must match.
func StrictEquiv(a, b string) bool {
	sa, errA := StripString(a)
	sb, errB := StripString(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return sa == sb
}

// LastBoxedOnlyString returns the last "\boxed{...}" (or "\fbox{...}") of s,
// braces included, with the reference's semantics: if "\boxed " (with a
// space) occurs anywhere, the result is "\boxed " followed by the text after
// its last occurrence up to the next "$", even when a later "\boxed{" exists.
// ok is false where the reference returns None (no box, or braces that
// never close).
func LastBoxedOnlyString(s string) (string, bool) {
	const spaced = `\boxed `
	if i := strings.LastIndex(s, spaced); i >= 0 {
		rest := s[i+len(spaced):]
		if j := strings.IndexByte(rest, '$'); j >= 0 {
			rest = rest[:j]
		}
		return spaced + rest, true
	}
	idx := LastBoxStart(s)
	if idx < 0 {
		return "", false
	}
	end, ok := BoxEnd(s, idx)
	if !ok {
		return "", false
	}
	return s[idx:end], true
}

// LastBoxStart is where the reference's last box starts: the last "\boxed", or failing
// that the last "\fbox"; -1 if there is neither.
func LastBoxStart(s string) int {
	if idx := strings.LastIndex(s, `\boxed`); idx >= 0 {
		return idx
	}
	return strings.LastIndex(s, `\fbox`)
}

// BoxEnd is the end (exclusive) of the box starting at idx. The reference counts every
// brace after idx and stops only when a closing brace brings the count back to exactly
// zero; ok is false when that never happens.
func BoxEnd(s string, idx int) (end int, ok bool) {
	depth := 0
	for i := idx; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// RemoveBoxed unwraps the output of LastBoxedOnlyString. ok is false where
// the reference's assertions fail, notably for every "\fbox{...}".
func RemoveBoxed(s string) (string, bool) {
	const spaced, braced = `\boxed `, `\boxed{`
	if strings.Contains(s, spaced) {
		if !strings.HasPrefix(s, spaced) {
			return "", false
		}
		return s[len(spaced):], true
	}
	if !strings.HasPrefix(s, braced) || !strings.HasSuffix(s, "}") {
		return "", false
	}
	return s[len(braced) : len(s)-1], true
}

// StripString is the reference's strip_string, step for step and in the same
// order. Lengths and single-character look-ahead count Unicode code points,
// as Python does. It returns an error exactly where the reference raises.
func StripString(s string) (string, error) {
	s = strings.ReplaceAll(s, "\n", "")
	s = strings.ReplaceAll(s, `\!`, "")
	s = strings.ReplaceAll(s, `\\`, `\`)
	s = strings.ReplaceAll(s, "tfrac", "frac")
	s = strings.ReplaceAll(s, "dfrac", "frac")
	s = strings.ReplaceAll(s, `\left`, "")
	s = strings.ReplaceAll(s, `\right`, "")
	s = strings.ReplaceAll(s, `^{\circ}`, "")
	s = strings.ReplaceAll(s, `^\circ`, "")
	s = strings.ReplaceAll(s, `\$`, "")
	s, err := removeRightUnits(s)
	if err != nil {
		return "", err
	}
	s = strings.ReplaceAll(s, `\%`, "")
	s = strings.ReplaceAll(s, " .", " 0.")
	s = strings.ReplaceAll(s, "{.", "{0.")
	if s == "" {
		return s, nil
	}
	if s[0] == '.' {
		s = "0" + s
	}
	if parts := strings.Split(s, "="); len(parts) == 2 && utf8.RuneCountInString(parts[0]) <= 2 {
		s = parts[1]
	}
	if s, err = fixSqrt(s); err != nil {
		return "", err
	}
	s = strings.ReplaceAll(s, " ", "")
	if s, err = fixFracs(s); err != nil {
		return "", err
	}
	if s == "0.5" {
		s = `\frac{1}{2}`
	}
	return fixASlashB(s), nil
}

// removeRightUnits keeps what precedes "\text{ ", the reference's guess at
// a trailing unit.
func removeRightUnits(s string) (string, error) {
	const unit = `\text{ `
	if !strings.Contains(s, unit) {
		return s, nil
	}
	parts := strings.Split(s, unit)
	if len(parts) != 2 {
		return "", errManyUnitTexts
	}
	return parts[0], nil
}

// fixSqrt braces the single character after "\sqrt": \sqrt3 -> \sqrt{3}.
func fixSqrt(s string) (string, error) {
	const cmd = `\sqrt`
	if !strings.Contains(s, cmd) {
		return s, nil
	}
	parts := strings.Split(s, cmd)
	var b strings.Builder
	b.Grow(len(s) + 2*len(parts))
	b.WriteString(parts[0])
	for _, part := range parts[1:] {
		if part == "" {
			return "", errBareSqrt
		}
		b.WriteString(cmd)
		if part[0] == '{' {
			b.WriteString(part)
			continue
		}
		_, n := utf8.DecodeRuneInString(part)
		b.WriteString("{" + part[:n] + "}" + part[n:])
	}
	return b.String(), nil
}

// fixFracs braces the two characters after "\frac": \frac12 -> \frac{1}{2},
// \frac1{72} -> \frac{1}{72}. As in the reference, a "\frac" followed by a
// single character makes it give up and return its input unchanged.
func fixFracs(s string) (string, error) {
	const cmd = `\frac`
	parts := strings.Split(s, cmd)
	var b strings.Builder
	b.Grow(len(s) + 4*len(parts))
	b.WriteString(parts[0])
	for _, part := range parts[1:] {
		b.WriteString(cmd)
		if part == "" {
			return "", errBareFrac
		}
		if part[0] == '{' {
			b.WriteString(part)
			continue
		}
		_, n1 := utf8.DecodeRuneInString(part)
		if n1 == len(part) {
			return s, nil
		}
		_, n2 := utf8.DecodeRuneInString(part[n1:])
		first, second, rest := part[:n1], part[n1:n1+n2], part[n1+n2:]
		if second != "{" {
			b.WriteString("{" + first + "}{" + second + "}" + rest)
		} else {
			b.WriteString("{" + first + "}" + second + rest)
		}
	}
	return b.String(), nil
}

// fixASlashB turns exactly "a/b" with a and b canonical integers (what
// Python's str(int(x)) prints back unchanged) into \frac{a}{b}.
func fixASlashB(s string) string {
	parts := strings.Split(s, "/")
	if len(parts) != 2 || !isCanonicalInt(parts[0]) || !isCanonicalInt(parts[1]) {
		return s
	}
	return `\frac{` + parts[0] + "}{" + parts[1] + "}"
}

// isCanonicalInt reports whether s is an integer in Python's str(int)
// form: optional "-", no leading zeros, no "+", no "-0", ASCII digits only.
func isCanonicalInt(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || (digits[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}
