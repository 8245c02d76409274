package debate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
)

// FloorAgent is one agent as CheckPromptFloor counts its prompts: a model with its
// tokenizer (OpenVocab loads one without weights) and its chat format.
type FloorAgent struct {
	Model  *engine.Model
	Format chat.Format
}

// CheckPromptFloor refuses a prompt limit below the settings' turn-1 floor, before a
// debate or a training loads its models: the turn-1 prompt of the shortest question, with
// every response cut, does not fit, so no problem can be debated past turn 0 and the run
// would fail there after loading them. Each agent's tokenizer counts it; a question whose
// turn-0 prompt is already over the limit is skipped, as the debate skips it. (A longer
// question alone may still not fit at turn 1; the debate says so when it gets there.)
func CheckPromptFloor(agents []FloorAgent, problems []data.Problem, p Prompt, limit int) error {
	problems = slices.Clone(problems)
	slices.SortStableFunc(problems, func(a, b data.Problem) int { return cmp.Compare(len(a.Question), len(b.Question)) })
	// Responses long enough to be cut: what is left of them at the floor is the marker of a
	// cut response, as in a real debate's turn 1.
	long := make([]string, len(agents))
	for i := range long {
		long[i] = strings.Repeat("x ", limit)
	}
	rounds := [][]string{long}
	for i, a := range agents {
		count := func(msg string) (int, error) {
			ids, err := UserPrompt(a.Format, msg, func(text string) ([]int32, error) { return a.Model.Tokenize(text, false, true) })
			return len(ids), err
		}
		for _, pr := range problems {
			if n, err := count(Turn0Message(pr.Question)); err != nil || n > limit {
				continue // skipped at turn 0, or not tokenizable at all
			}
			question := RemoveTemplate(Turn0Message(pr.Question))
			if _, _, err := p.FitMessage(question, rounds, TrajectoryID{Problem: ProblemKey(pr)}, count, limit); err != nil {
				return fmt.Errorf("--prompt-limit %d is too small for agent %d even for the shortest question, problem %s: %w", limit, i, pr.ID, err)
			}
			break // the shortest question fits: the settings' floor does
		}
	}
	return nil
}
