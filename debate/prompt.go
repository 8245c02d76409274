package debate

// The debate prompt builder: the user messages of turn 0 and of every debate round
// t >= 1, reproducing the reference protocol (spec/UMAD-reference.md section 1.4) byte
// for byte by default, with the paper's variants as named options.

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/sampler"
)

// instruction is the reference's MATH-style instruction suffix, appended to the question
// at turn 0 and ending every debate message.
var instruction = data.Instructions[0]

// AnswerMask replaces the last boxed answer of every response shown in a debate message.
const AnswerMask = "<answer>"

// HistoryMode selects which earlier rounds a debate message shows.
type HistoryMode int

const (
	// HistoryPrevious shows the responses of turn t-1 only (the reference).
	HistoryPrevious HistoryMode = iota
	// HistoryFull shows every earlier round, oldest first, each introduced by a line
	// "Round r:" with r counted from 1 (round 1 holds the turn-0 answers); rounds are
	// separated by "\n" like the responses within a round. The header still counts the
	// agents ("We have two answers").
	HistoryFull
)

// Prompt configures the messages of turns t >= 1. The zero value is the reference
// protocol: previous round only, last boxed answers masked, agents in fixed order.
type Prompt struct {
	// KeepAnswers shows the responses unmasked (the paper's prompt figure); the
	// reference masks every agent's last boxed answer with AnswerMask.
	KeepAnswers bool
	History     HistoryMode
	// Anonymise labels the agents by a permutation drawn from (Seed, problem,
	// trajectory, turn) and lists them in label order, instead of "agent a" for agent a.
	// Both agents of a trajectory still see the same message.
	Anonymise bool
	Seed      uint64
}

// TrajectoryID names one debate thread: trajectory k of a problem.
type TrajectoryID struct {
	Problem    uint64
	Trajectory uint64
}

// Turn0Message is the user message of turn 0: the question and the instruction.
func Turn0Message(question string) string {
	return question + " " + instruction
}

// anonymiseStream keeps the label permutations' random stream apart from the sampling
// streams, which are keyed by other ids.
const anonymiseStream = 0x616e6f6e // "anon"

// Labels returns, for each of n agents, the number it is called by in the message of
// the given turn: its own index, or with Anonymise a seeded permutation of 0..n-1.
func (p Prompt) Labels(id TrajectoryID, turn, n int) []int {
	labels := make([]int, n)
	for i := range labels {
		labels[i] = i
	}
	if !p.Anonymise {
		return labels
	}
	rng := sampler.NewStream(p.Seed, anonymiseStream, id.Problem, id.Trajectory, uint64(turn))
	// Fisher-Yates; the multiply-high bias is below n/2^64.
	for i := n - 1; i > 0; i-- {
		j, _ := bits.Mul64(rng.Uint64(), uint64(i+1))
		labels[i], labels[j] = labels[j], labels[i]
	}
	return labels
}

// Message builds the user message of turn len(rounds) for one trajectory from the
// responses of the earlier turns: rounds[r][a] is agent a's response text at turn r,
// decoded without special tokens (EOS stripped). The question is the bare question (see
// RemoveTemplate).
func (p Prompt) Message(question string, rounds [][]string, id TrajectoryID) (string, error) {
	texts, err := p.shownTexts(rounds)
	if err != nil {
		return "", err
	}
	return p.render(question, texts, p.Labels(id, len(rounds), len(rounds[0]))), nil
}

// trimMarker starts a response whose beginning was cut to fit the prompt limit.
const trimMarker = "... "

// FitMessage is Message shortened to at most limit tokens as count measures them (count
// sees the whole message; render the chat template inside it to count the template's
// tokens too; its errors are returned). When the full message is too long, every shown response longer than some
// length L keeps only its last L bytes (rune-aligned, after masking, so the conclusion
// and its mask stay) behind trimMarker, with the largest L that fits; the question, the
// template and the instruction are never cut. trimmed reports that responses were cut.
// It fails when even empty responses do not fit.
func (p Prompt) FitMessage(question string, rounds [][]string, id TrajectoryID, count func(string) (int, error), limit int) (msg string, trimmed bool, err error) {
	texts, err := p.shownTexts(rounds)
	if err != nil {
		return "", false, err
	}
	labels := p.Labels(id, len(rounds), len(rounds[0]))
	msg = p.render(question, texts, labels)
	n, err := count(msg)
	if err != nil {
		return "", false, err
	}
	if n <= limit {
		return msg, false, nil
	}
	longest := 0
	for _, round := range texts {
		for _, t := range round {
			longest = max(longest, len(t))
		}
	}
	// Binary search for the largest keep in [0, longest) whose message fits.
	best, found := "", false
	lo, hi := 0, longest-1
	for lo <= hi {
		keep := lo + (hi-lo)/2
		candidate := p.render(question, keepTails(texts, keep), labels)
		n, err := count(candidate)
		if err != nil {
			return "", false, err
		}
		if n <= limit {
			best, found = candidate, true
			lo = keep + 1
		} else {
			hi = keep - 1
		}
	}
	if !found {
		n, err := count(p.render(question, keepTails(texts, 0), labels))
		if err != nil {
			return "", false, err
		}
		return "", false, fmt.Errorf("debate prompt of turn %d: %d tokens even with every response emptied, limit %d",
			len(rounds), n, limit)
	}
	return best, true, nil
}

// shownTexts validates rounds and returns the rounds the message shows, with their
// responses as shown.
func (p Prompt) shownTexts(rounds [][]string) ([][]string, error) {
	if len(rounds) == 0 {
		return nil, errors.New("debate prompt: no earlier round (turn 0 uses Turn0Message)")
	}
	agents := len(rounds[0])
	if agents == 0 {
		return nil, errors.New("debate prompt: round 0 has no responses")
	}
	for r, round := range rounds {
		if len(round) != agents {
			return nil, fmt.Errorf("debate prompt: round %d has %d responses, round 0 has %d", r, len(round), agents)
		}
	}
	if p.History == HistoryPrevious {
		rounds = rounds[len(rounds)-1:]
	}
	shown := make([][]string, len(rounds))
	for r, round := range rounds {
		shown[r] = make([]string, agents)
		for a, text := range round {
			if !p.KeepAnswers {
				text = MaskFinalAnswer(text)
			}
			shown[r][a] = text
		}
	}
	return shown, nil
}

// keepTails returns texts with every text longer than keep bytes cut to its last keep
// bytes, moved forward to a rune boundary, behind trimMarker.
func keepTails(texts [][]string, keep int) [][]string {
	out := make([][]string, len(texts))
	for r, round := range texts {
		out[r] = make([]string, len(round))
		for a, t := range round {
			if len(t) > keep {
				cut := len(t) - keep
				for cut < len(t) && !utf8.RuneStart(t[cut]) {
					cut++
				}
				t = trimMarker + t[cut:]
			}
			out[r][a] = t
		}
	}
	return out
}

// render fills the reference template (multi_turn_traj_grpo.py L185-218): the responses
// of the shown rounds, each prefixed "agent {label} response is: ", joined by "\n".
func (p Prompt) render(question string, texts [][]string, labels []int) string {
	agents := len(labels)
	byLabel := make([]int, agents) // byLabel[label] = agent
	for a, l := range labels {
		byLabel[l] = a
	}
	var b strings.Builder
	b.WriteString("Given the following problem: ")
	b.WriteString(question)
	b.WriteString(" \n We have ")
	b.WriteString(numberWord(agents))
	if agents == 1 {
		b.WriteString(" answer: \n ")
	} else {
		b.WriteString(" answers: \n ")
	}
	for r, round := range texts {
		if r > 0 {
			b.WriteByte('\n')
		}
		if p.History == HistoryFull {
			fmt.Fprintf(&b, "Round %d:\n", r+1)
		}
		for l, a := range byLabel {
			if l > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "agent %d response is: %s", l, round[a])
		}
	}
	b.WriteString(" \n Please carefully review these answers and recognize which one is right. " +
		"If one or all of them are right, please summarize the reasoning process of right ones and give the final answer. If ")
	// The reference says "both" (it has two agents); other team sizes read "all".
	if agents == 2 {
		b.WriteString("both")
	} else {
		b.WriteString("all")
	}
	b.WriteString(" of them are wrong, please correct their mistakes and provide a novel and complete solution " +
		"to the problem and give the final answer. ")
	b.WriteString(instruction)
	return b.String()
}

var smallNumbers = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
	"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}

// numberWord spells n in words up to twenty and in digits above.
func numberWord(n int) string {
	if n >= 0 && n < len(smallNumbers) {
		return smallNumbers[n]
	}
	return strconv.Itoa(n)
}

// MaskFinalAnswer replaces the last boxed answer of a response, and every identical copy
// of it, with AnswerMask, exactly as the reference's _replace_boxed_with_answer does
// (multi_turn_traj_grpo.py L104-141):
//   - the last "\boxed" is the answer, or the last "\fbox" when there is no "\boxed";
//     without either the text is unchanged;
//   - if that last "\boxed" is the start of a "\boxed " (space form), the answer is
//     "\boxed " plus the text after the last "\boxed " up to the next "$";
//   - otherwise it runs from there to the brace that brings the brace count back to zero
//     (escaped braces count too); if there is none (a truncated response) the text is
//     unchanged;
//   - all occurrences of the answer text are replaced, so earlier identical boxes are
//     masked while earlier different ones stay.
func MaskFinalAnswer(s string) string {
	idx := grade.LastBoxStart(s)
	if idx < 0 {
		return s
	}
	if space := strings.LastIndex(s, `\boxed `); space >= 0 && space == idx {
		tail := s[space+len(`\boxed `):]
		if dollar := strings.IndexByte(tail, '$'); dollar >= 0 {
			tail = tail[:dollar]
		}
		return strings.ReplaceAll(s, `\boxed `+tail, AnswerMask)
	}
	if end, ok := grade.BoxEnd(s, idx); ok {
		return strings.ReplaceAll(s, s[idx:end], AnswerMask)
	}
	return s
}

// RemoveTemplate turns a stored prompt back into the bare question, as the reference's
// remove_template does (multi_turn_traj_grpo.py L57-100): keep what follows the first
// "user\n", keep what precedes the first "\nassistant\n", strip white space, then remove
// a trailing MATH or GSM8K instruction and the white space before it. White space is
// Python's (str.strip), which adds the separators U+001C-U+001F to Go's.
func RemoveTemplate(s string) string {
	if _, after, ok := strings.Cut(s, "user\n"); ok {
		s = after
	}
	if before, _, ok := strings.Cut(s, "\nassistant\n"); ok {
		s = before
	}
	s = strings.TrimFunc(s, pythonSpace)
	for _, suffix := range data.Instructions {
		if rest, ok := strings.CutSuffix(s, suffix); ok {
			return strings.TrimRightFunc(rest, pythonSpace)
		}
	}
	return s
}

// pythonSpace reports whether Python's str.isspace holds for r.
func pythonSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// UserPrompt renders one user message in a chat format and tokenizes it with tokenize (a
// chat prompt's tokenization: special tokens parsed, none added): how every debate prompt
// is built, so training pairs built with it have the ids the debate decodes.
func UserPrompt(f chat.Format, msg string, tokenize func(text string) ([]int32, error)) ([]int32, error) {
	text, err := f.Render([]chat.Message{{Role: "user", Content: msg}}, chat.Options{})
	if err != nil {
		return nil, fmt.Errorf("render prompt: %w", err)
	}
	ids, err := tokenize(text)
	if err != nil {
		return nil, fmt.Errorf("tokenize prompt: %w", err)
	}
	return ids, nil
}
