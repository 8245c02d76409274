package grade

import "strings"

// Verdict is one graded response: its answer key and correctness in both modes, plus the
// statistics of the response that the uncertainty tables average per verdict. It is the
// "grade" object of rollout files. Grade fills the answer fields and Boxed; whoever
// sampled the response adds Tokens, Truncated, MeanEntropy and MeanNLL.
type Verdict struct {
	// Key is the canonical key of the extracted answer (Key); ignored when NoAnswer is set.
	Key      string `json:"key,omitempty"`
	NoAnswer bool   `json:"no_answer,omitempty"`
	// Strict and Robust report correctness in the two modes.
	Strict bool `json:"strict"`
	Robust bool `json:"robust"`
	// Tokens is the response length in tokens, EOS included.
	Tokens    int  `json:"tokens"`
	Truncated bool `json:"truncated,omitempty"` // stopped by the length limit, not by EOS
	Boxed     bool `json:"boxed,omitempty"`     // the response contains "\boxed"
	// MeanEntropy and MeanNLL are per-token means over the response of the sampling
	// distribution's entropy and of the sampled tokens' negative log-probability.
	MeanEntropy float64 `json:"mean_entropy"`
	MeanNLL     float64 `json:"mean_nll"`
	// Verifier is a verifier model's verdict on a pair robust did not decide; empty when
	// none was asked.
	Verifier Check `json:"verifier,omitempty"`
}

// Correct reports correctness in the given mode; an unknown mode is never correct.
func (v Verdict) Correct(m Mode) bool {
	switch m {
	case Strict:
		return v.Strict
	case Robust:
		return v.Robust
	case Verified:
		return v.Robust || v.Verifier == CheckEqual
	}
	return false
}

// Grade judges a whole response against a gold answer and returns the verdict and the
// answer Extract found with opt ("" when v.NoAnswer). Strict follows the reference,
// which finds the answer its own way (StrictScore), so it may differ from judging the
// extracted answer.
func Grade(response, gold string, opt ExtractOptions) (v Verdict, answer string) {
	answer, ok := Extract(response, opt)
	v = judge(answer, ok, gold, StrictScore(response, gold))
	v.Boxed = strings.Contains(response, `\boxed`)
	return v, answer
}

// GradeAnswer judges an already extracted answer, "" for none, against a gold answer.
func GradeAnswer(answer, gold string) Verdict {
	ok := answer != ""
	return judge(answer, ok, gold, ok && StrictEquiv(answer, gold))
}

// judge fills a verdict's answer fields from the answer (ok=false: none) and the strict
// correctness the caller computed.
func judge(answer string, ok bool, gold string, strict bool) Verdict {
	if !ok {
		return Verdict{NoAnswer: true, Strict: strict}
	}
	return Verdict{Key: Key(answer), Strict: strict, Robust: RobustEquiv(answer, gold)}
}
