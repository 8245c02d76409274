package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/data"
)

// floorProblems is how many of the longest questions CheckPromptFloor measures: the floor
// grows with the question, so these are the ones that can fail.
const floorProblems = 8

// FloorAgent is one agent as CheckPromptFloor counts its prompts: a model with its
// tokenizer (OpenVocab loads one without weights) and its chat format.
type FloorAgent struct {
	Model  *Model
	Format chat.Format
}

// CheckPromptFloor refuses a prompt limit that a turn-1 debate prompt cannot fit even with
// every response emptied, before a debate or a training loads its models: the run failed
// there, after loading them. Each agent's tokenizer counts the turn-1 message of the
// longest questions, skipping those whose turn-0 prompt is over the limit (a debate skips
// them at turn 0).
func CheckPromptFloor(agents []FloorAgent, problems []data.Problem, p DebatePrompt, limit int) error {
	problems = slices.Clone(problems)
	slices.SortStableFunc(problems, func(a, b data.Problem) int { return cmp.Compare(len(b.Question), len(a.Question)) })
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
		measured := 0
		for _, pr := range problems {
			if measured == floorProblems {
				break
			}
			if n, err := count(Turn0Message(pr.Question)); err != nil || n > limit {
				continue // skipped at turn 0, or not tokenizable at all
			}
			measured++
			question := RemoveTemplate(Turn0Message(pr.Question))
			if _, _, err := p.FitMessage(question, rounds, TrajectoryID{Problem: ProblemKey(pr)}, count, limit); err != nil {
				return fmt.Errorf("--prompt-limit %d is too small for agent %d, problem %s: %w", limit, i, pr.ID, err)
			}
		}
	}
	return nil
}
