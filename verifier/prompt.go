package verifier

// CompassVerifier's published prompt (open-compass/CompassVerifier, src/prompts.py,
// CV_PROMPT, the direct-answer form) and the reading of its output.

import (
	"strings"

	"github.com/umad-dev/umad/reward"
)

// compassPrompt is CV_PROMPT after Python's str.format: "{{}}" reads "{}", "\\\\" reads
// "\\", and the trailing spaces are the original's. The three fields follow in order:
// question, gold answer, candidate's answer.
const compassPrompt = "\n" +
	"Please as a grading expert, judge whether the final answers given by the candidates below are consistent with the standard answers, that is, whether the candidates answered correctly. \n" +
	"Here are some evaluation criteria:\n" +
	"1. Please refer to the given standard answer. You don't need to re-generate the answer to the question because the standard answer has been given. You only need to judge whether the candidate's answer is consistent with the standard answer according to the form of the question. THE STANDARD ANSWER IS ALWAYS CORRECT AND THE QUESTION IS PERFECTLY VALID. NEVER QUESTION THEM.\n" +
	"2. ONLY compare the FINAL ANSWER - COMPLETELY IGNORE any potential errors in the REASONING PROCESSES.\n" +
	"3. Some answers may be expressed in different ways, such as some answers may be a mathematical expression, some answers may be a textual description, as long as the meaning expressed is the same. Before making a judgment, please understand the question and the standard answer first, and then judge whether the candidate's answer is correct.\n" +
	"4. Some answers may consist of multiple items, such as multiple-choice questions, multiple-select questions, fill-in-the-blank questions, etc. Regardless of the question type, the final answer will be considered correct as long as it matches the standard answer, regardless of whether the reasoning process is correct. For multiple-select questions and multi-blank fill-in-the-blank questions, all corresponding options or blanks must be answered correctly and match the standard answer exactly to be deemed correct.\n" +
	"5. If the prediction is given with \\\\boxed{}, please ignore the \\\\boxed{} and only judge whether the candidate's answer is consistent with the standard answer.\n" +
	"6. If the candidate's answer is invalid (e.g., incomplete (cut off mid-response), lots of unnormal repetitive content, or irrelevant to the question, saying it can't answer the question because some irresistible factors, like ethical issues, no enough information, etc.), select option C (INVALID).Please judge whether the following answers are consistent with the standard answer based on the above criteria. Grade the predicted answer of this new question as one of:\n" +
	"A: CORRECT \n" +
	"B: INCORRECT\n" +
	"C: INVALID\n" +
	"Just return the letters \"A\", \"B\", or \"C\", with no text around it.\n" +
	"Here is your task. Simply reply with either CORRECT, INCORRECT, or INVALID. Don't apologize or correct yourself if there was a mistake; we are just trying to grade the answer.\n" +
	"<Original Question Begin>:\n" +
	"%Q\n" +
	"<Original Question End>\n" +
	"<Standard Answer Begin>:\n" +
	"%G\n" +
	"<Standard Answer End>\n" +
	"<Candidate's Answer Begin>: \n" +
	"%A\n" +
	"<Candidate's Answer End>\n" +
	"Judging the correctness of the candidate's answer:\n"

// Prompt is the user message that asks the verifier about a pair: CompassVerifier's
// CV_PROMPT with the question, the gold answer and the candidate's answer put in.
func Prompt(p Pair) string {
	// One pass, so that a field containing "%G" is not substituted again.
	return strings.NewReplacer("%Q", p.Question, "%G", p.Gold, "%A", p.Answer).Replace(compassPrompt)
}

// ParseVerdict reads the verifier's output. CompassVerifier answers with one letter, A
// (correct), B (incorrect) or C (invalid); the words its prompt also names, "A: CORRECT"
// and a boxed letter are read the same. C is not equal, as its authors score it. Anything
// else, letters inside prose included, is undecided, never equal.
func ParseVerdict(out string) reward.Check {
	s := strings.TrimSuffix(strings.TrimSpace(out), ".")
	switch s {
	case "A", "CORRECT", "A: CORRECT", `\boxed{A}`:
		return reward.CheckEqual
	case "B", "INCORRECT", "B: INCORRECT", `\boxed{B}`, "C", "INVALID", "C: INVALID", `\boxed{C}`:
		return reward.CheckNotEqual
	}
	return reward.CheckUndecided
}
