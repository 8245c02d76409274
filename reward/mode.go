package reward

import "fmt"

// Mode selects how answers are compared.
type Mode string

const (
	// Strict reproduces the reference's MATH is_equiv, quirks included.
	Strict Mode = "strict"
	// Robust is what a careful grader accepts.
	Robust Mode = "robust"
)

// ParseMode validates a mode name from a flag or a config file.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Strict, Robust:
		return m, nil
	}
	return "", fmt.Errorf("unknown answer-checking mode %q (want %q or %q)", s, Strict, Robust)
}

// Equiv compares two extracted answers in the given mode. An unknown mode
// never calls answers equal.
func Equiv(mode Mode, a, b string) bool {
	switch mode {
	case Strict:
		return StrictEquiv(a, b)
	case Robust:
		return RobustEquiv(a, b)
	}
	return false
}

// RobustEquiv reports whether two extracted answers are the same answer to
// a careful grader; see the package documentation.
func RobustEquiv(a, b string) bool {
	return parseAnswer(a).equal(parseAnswer(b))
}

// Key returns the canonical key of an answer: answers that RobustEquiv calls
// equal get the same key (exceptions in the package documentation), and
// the same answer gets the same key in every run.
func Key(answer string) string {
	return parseAnswer(answer).key()
}
