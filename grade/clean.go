package grade

import (
	"regexp"
	"strings"
)

var (
	// doubledRe finds a control word written with two backslashes.
	doubledRe = regexp.MustCompile(`\\\\[a-zA-Z]`)
	// bracedCommaRe finds LaTeX's "{,}" before digits: a thousands separator
	// before a group of three, a decimal comma before any other count.
	bracedCommaRe = regexp.MustCompile(`\{,\}\d+`)
)

// Bounds that keep the robust grader's work per answer small whatever the
// input: longer answers are compared as normalised text only.
const maxAnswerBytes = 4096

// noise is removed or rewritten before the LaTeX lexer runs: degree marks,
// dollar and percent signs, thousands-grouping spaces, Unicode stand-ins.
var noise = strings.NewReplacer(
	`^{\circ}`, "", `^\circ`, "", `^{ \circ}`, "", `^{\circ }`, "", "°", "",
	`\$`, "", "$", "", `\%`, "", "%", "",
	`,\! `, "", `,\!`, "", // LaTeX digit grouping: 10,\!080
	"\u2212", "-", "×", "*", "·", "*", "÷", "/", "π", `\pi `, "∞", `\infty `, "√", `\sqrt`, "≤", `\le `, "≥", `\ge `, "≠", `\ne `, "≈", `\approx `,
	"€", "", "£", "", "¥", "",
	"\n", " ", "\t", " ", "\r", " ", "~", " ",
)

// wordReplacements rewrites LaTeX control words; "" drops the word.
var wordReplacements = map[string]string{
	"left": "", "right": "", "big": "", "Big": "", "bigl": "", "bigr": "", "Bigl": "", "Bigr": "",
	"displaystyle": "", "textstyle": "", "quad": " ", "qquad": " ", "limits": "", "circ": "",
	"dfrac": `\frac`, "tfrac": `\frac`, "cfrac": `\frac`,
	"cdot": "*", "times": "*", "ast": "*", "div": "/",
	"text": `\text`, "textbf": `\text`, "textit": `\text`, "textrm": `\text`, "textnormal": `\text`,
	"mbox": `\text`, "hbox": `\text`, "mathrm": `\text`, "mathbf": `\text`, "mathit": `\text`,
	"mathsf": `\text`, "operatorname": `\text`,
	"boxed": "", "fbox": "",
	"langle": "(", "rangle": ")", "lbrace": `\{`, "rbrace": `\}`,
	"leq": `\le`, "geq": `\ge`, "neq": `\ne`, "leqslant": `\le`, "geqslant": `\ge`,
	"infinity": `\infty`, "varnothing": `\emptyset`, "ldots": `\dots`, "cdots": `\dots`,
	"varepsilon": `\epsilon`, "varphi": `\phi`, "vartheta": `\theta`,
}

// cleanLatex drops spacing, sizing and decoration from an answer, maps
// synonyms to one spelling and collapses white space.
func cleanLatex(s string) string {
	if doubledRe.MatchString(s) {
		s = strings.ReplaceAll(s, `\\`, `\`) // JSON-escaped twice: \\frac
	}
	s = bracedCommaRe.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) == len("{,}000") {
			return m[3:] // digit grouping: 1{,}000
		}
		return "." + m[3:] // a decimal comma: 3{,}14
	})
	s = noise.Replace(s)
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			break
		}
		next := s[i+1]
		if !isASCIILetter(next) {
			switch next {
			case '!', ',', ';', ':', ' ', '>':
				b.WriteByte(' ') // thin and negative spaces
			default:
				b.WriteByte('\\')
				b.WriteByte(next)
			}
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		word := s[i+1 : j]
		if rep, ok := wordReplacements[word]; ok {
			b.WriteString(rep)
		} else {
			b.WriteString(s[i:j])
		}
		// A control word ends at its last letter; keep a separator so that
		// "\pi r" does not become "\pir" once the space is gone, and join
		// "\text {x}" to its argument.
		k := j
		for k < len(s) && s[k] == ' ' {
			k++
		}
		switch {
		case k < len(s) && s[k] == '{':
			j = k
		case j < len(s) && isASCIILetter(s[j]):
			b.WriteByte(' ')
		}
		i = j - 1
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// unwrapText removes \text{...} (and its synonyms, already spelled \text):
// a whole-answer wrapper, trailing unit text such as "5\text{ cm}^2", and
// connectives "\text{ and }" that separate several answers.
func unwrapText(s string) string {
	const cmd = `\text`
	for strings.HasPrefix(s, cmd+"{") {
		inner, ok := braceGroup(s[len(cmd):])
		if !ok || len(cmd)+len(inner)+2 != len(s) {
			break
		}
		s = strings.TrimSpace(inner)
	}
	for range 2 {
		i := strings.LastIndex(s, cmd+"{")
		if i <= 0 {
			break
		}
		inner, ok := braceGroup(s[i+len(cmd):])
		if !ok {
			break
		}
		after := strings.TrimSpace(s[i+len(cmd)+len(inner)+2:])
		before := strings.TrimSpace(s[:i])
		if !isUnitPower(after) || before == "" || isConnective(inner) || isMeridiem(strings.TrimSpace(inner)) {
			break
		}
		s = before
	}
	var b strings.Builder
	for {
		i := strings.Index(s, cmd+"{")
		if i < 0 {
			b.WriteString(s)
			break
		}
		inner, ok := braceGroup(s[i+len(cmd):])
		if !ok {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		if isConnective(inner) {
			b.WriteString(", ")
		} else {
			b.WriteString(inner)
		}
		s = s[i+len(cmd)+len(inner)+2:]
	}
	return strings.TrimSpace(b.String())
}

// isUnitPower reports whether what follows a unit is nothing or a square or
// cube mark, as in "cm^2".
func isUnitPower(s string) bool {
	switch s {
	case "", "^2", "^3", "^{2}", "^{3}":
		return true
	}
	return false
}

func isConnective(s string) bool {
	switch strings.TrimSpace(s) {
	case "and", "or", ",":
		return true
	}
	return false
}

// dropUnitWords removes trailing plain-word units ("10 cm", "5 dollars",
// "3 square feet") after a number or a closed group.
func dropUnitWords(s string) string {
	fields := strings.Split(s, " ")
	n := len(fields)
	for n > 1 && isUnitWord(fields[n-1]) {
		n--
	}
	if n == len(fields) {
		return s
	}
	rest := strings.Join(fields[:n], " ")
	if last := rest[len(rest)-1]; isDigit(last) || last == '}' || last == ')' {
		return rest
	}
	return s
}

// isUnitWord is a word of two or more ASCII letters, possibly squared or
// ending a sentence, that is not a connective.
func isUnitWord(w string) bool {
	w = strings.TrimSuffix(w, ".")
	for _, p := range []string{"^2", "^3", "^{2}", "^{3}"} {
		w = strings.TrimSuffix(w, p)
	}
	if len(w) < 2 || w == "and" || w == "or" || isMeridiem(w) {
		return false
	}
	for i := 0; i < len(w); i++ {
		if !isASCIILetter(w[i]) {
			return false
		}
	}
	return true
}

// meridiemRe is a time's "am" or "pm" after its digits, in any spelling: "11:21 p.m.",
// "11:21PM".
var meridiemRe = regexp.MustCompile(`^(.*\d)\s*([aApP])\.?\s*[mM]\.?$`)

// isMeridiem reports "am" or "pm": not a unit, since 11:21 pm is not 11:21 am.
func isMeridiem(w string) bool {
	w = strings.ToLower(w)
	return w == "am" || w == "pm"
}

// spellMeridiem writes a time's am or pm one way, "11:21 pm", so that spellings agree.
func spellMeridiem(s string) string {
	if m := meridiemRe.FindStringSubmatch(s); m != nil {
		return m[1] + " " + strings.ToLower(m[2]) + "m"
	}
	return s
}
