package cli

// The verifier model of `grade --verifier` and `train --reward robust+verifier=MODEL.gguf`.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/reward"
	"github.com/umad-dev/umad/verifier"
)

// verifierChunk is how many lines grade holds to ask the verifier about their pairs at once.
const verifierChunk = 64

// verifierLlamaFlags are the llama.cpp flags grade's verifier model runs with: those of
// llamaFlags but --ctx, which the verifier sets itself.
func verifierLlamaFlags() []ucli.Flag {
	return slices.DeleteFunc(llamaFlags(), func(f ucli.Flag) bool { return slices.Contains(f.Names(), "ctx") })
}

// verifierPromptFlag names the verifier's prompt template. umad ships none: the text is
// its authors', and a verifier model answers well only to the one it was trained on.
func verifierPromptFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "verifier-prompt", Usage: "the verifier model's prompt template file, as its authors publish it: " +
		"str.format text with {question}, {gold_answer} and {llm_response} (CompassVerifier's CV_PROMPT; README, \"Verifier model\")"}
}

// openVerifier loads the verifier model with --verifier-prompt's template, the command's
// llama.cpp flags and threads (0 = the physical cores).
func openVerifier(c *ucli.Context, path string, threads int) (*verifier.Verifier, error) {
	if c.String("verifier-prompt") == "" {
		return nil, errors.New("a verifier model needs --verifier-prompt FILE: its prompt template, as its authors publish it (README, \"Verifier model\")")
	}
	template, err := verifier.ReadTemplate(c.String("verifier-prompt"))
	if err != nil {
		return nil, err
	}
	if err := checkThreads("threads", threads); err != nil {
		return nil, err
	}
	opt, err := engine.ParseOptions(0, 0, threads, c.String("kv-type"), c.String("flash-attn"))
	if err != nil {
		return nil, err
	}
	place, err := placement(c)
	if err != nil {
		return nil, err
	}
	return verifier.Open(path, template, place, opt)
}

// parseReward reads --reward: strict, robust, or robust+verifier=MODEL.gguf, which also
// names the verifier model.
func parseReward(s string) (reward.Mode, string, error) {
	name, path, withPath := strings.Cut(s, "=")
	mode, err := reward.ParseMode(name)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("--reward: %w", err)
	case mode == reward.Verified && (!withPath || path == ""):
		return "", "", fmt.Errorf("--reward %s needs its model: %s=MODEL.gguf", s, reward.Verified)
	case mode != reward.Verified && withPath:
		return "", "", fmt.Errorf("--reward %s: only %s takes a model", s, reward.Verified)
	}
	return mode, path, nil
}

// gradeVerifier is grade's verifier: the model, the run's context, and its budget for the
// whole run.
type gradeVerifier struct {
	v      *verifier.Verifier
	ctx    context.Context
	budget time.Duration
}

// decide asks the verifier about the held lines' pairs and puts its verdicts in them; a
// nil verifier does nothing.
func (gv *gradeVerifier) decide(lines []*gradedLine, stats *gradeStats) error {
	if gv == nil {
		return nil
	}
	var pairs []verifier.Pair
	var asked []*gradedLine
	for _, g := range lines {
		if g.ask {
			pairs = append(pairs, verifier.Pair{Question: g.question, Gold: g.gold, Answer: g.extracted})
			asked = append(asked, g)
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	budget := gv.budget
	if budget > 0 {
		// What is left of the run's budget; once spent, only cached pairs are answered.
		budget = max(budget-time.Duration(stats.checks.Seconds*float64(time.Second)), time.Nanosecond)
	}
	checks, c, err := gv.v.Check(gv.ctx, pairs, budget)
	if err != nil {
		if gv.ctx.Err() != nil {
			return errInterrupted
		}
		return err
	}
	stats.checks = stats.checks.Add(c)
	for i, g := range asked {
		g.v.Verifier = checks[i]
	}
	return nil
}
