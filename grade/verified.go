package grade

// What a verifier model adds to robust: the pairs no rule decides, and its verdict on them.

// Verified is robust with a verifier model deciding the pairs robust's rules do not
// (Verdict.Decided); the model and its calls live above the engine (package verifier).
const Verified Mode = "robust+verifier"

// Check is a verifier model's verdict on a pair robust did not decide.
type Check string

// The verdicts; an output that names none of the model's answers is CheckUndecided, never
// CheckEqual.
const (
	CheckEqual     Check = "equal"
	CheckNotEqual  Check = "not equal"
	CheckUndecided Check = "undecided" // the model's output matched no verdict
	CheckSkipped   Check = "skipped"   // the verifier's time budget ran out first
)

// Decided reports whether robust's rules decide a pair, given v, its verdict of answer
// against gold (Grade, GradeAnswer), so the pair is not judged twice: they do when robust
// calls the answers equal, or when it read both sides (Readable) and neither is a word or
// choice letter set against mathematics. A side kept as text robust could not parse
// ("11:21"), or "three" against 3, or "(B)" against the value of option B that only the
// question names, is a pair no rule decides: the pairs a verifier model is asked about.
func (v Verdict) Decided(answer, gold string) bool {
	if v.Robust {
		return true
	}
	if !Readable(answer) || !Readable(gold) {
		return false
	}
	a, b := parseAnswer(answer).kind, parseAnswer(gold).kind
	word := func(k formKind) bool { return k == kindText || k == kindChoice }
	return a == b || !word(a) && !word(b)
}
