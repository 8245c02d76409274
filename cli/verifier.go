package cli

// The verifier model of `grade --verifier`, `debate --verifier` and
// `train --reward robust+verifier=MODEL.gguf`.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/launch"
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

// openVerifier loads the verifier model with --verifier-prompt's template (checked given),
// the command's llama.cpp flags and threads (0 = the physical cores).
func openVerifier(c *ucli.Context, path string, threads int) (*verifier.Verifier, error) {
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
func parseReward(s string) (grade.Mode, string, error) {
	name, path, withPath := strings.Cut(s, "=")
	mode, err := grade.ParseMode(name)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("--reward: %w", err)
	case mode == grade.Verified && (!withPath || path == ""):
		return "", "", fmt.Errorf("--reward %s needs its model: %s=MODEL.gguf", s, grade.Verified)
	case mode != grade.Verified && withPath:
		return "", "", fmt.Errorf("--reward %s: only %s takes a model", s, grade.Verified)
	}
	return mode, path, nil
}

// verifierFlags are grade's and debate's verifier model, its prompt, and its budget for
// the whole run.
func verifierFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "verifier", Usage: "GGUF verifier model for the pairs robust's rules do not decide, asked with --verifier-prompt"},
		verifierPromptFlag(),
		&ucli.DurationFlag{Name: "verifier-budget", Usage: "most time the verifier model may take in all (0 = no limit); the pairs left are counted as skipped"},
	}
}

// checkVerifierFlags refuses verifierFlags that do not go together: a prompt or budget
// without a model, a model without its prompt, a negative budget; and a prompt template
// that does not read, before any work.
func checkVerifierFlags(c *ucli.Context) error {
	switch {
	case c.Duration("verifier-budget") < 0:
		return fmt.Errorf("--verifier-budget must not be negative, got %v", c.Duration("verifier-budget"))
	case c.String("verifier") == "" && (c.IsSet("verifier-budget") || c.IsSet("verifier-prompt")):
		return errors.New("--verifier-budget and --verifier-prompt need --verifier")
	case c.String("verifier") != "" && c.String("verifier-prompt") == "":
		return errors.New("a verifier model needs --verifier-prompt FILE: its prompt template, as its authors publish it (README, \"Verifier model\")")
	case c.String("verifier-prompt") != "":
		_, err := verifier.ReadTemplate(c.String("verifier-prompt"))
		return err
	}
	return nil
}

// runVerifier is grade's or debate's verifier: the model, the run's context (set once the
// run starts), its budget for the whole run, and what it did so far.
type runVerifier struct {
	v      *verifier.Verifier
	ctx    context.Context
	budget time.Duration
	done   verifier.Counts
}

// openRunVerifier opens verifierFlags' model with the command's threads; nil without
// --verifier.
func openRunVerifier(c *ucli.Context, threads int) (*runVerifier, error) {
	if err := checkVerifierFlags(c); err != nil || c.String("verifier") == "" {
		return nil, err
	}
	v, err := openVerifier(c, c.String("verifier"), threads)
	if err != nil {
		return nil, err
	}
	return &runVerifier{v: v, budget: c.Duration("verifier-budget")}, nil
}

// Close frees the model; a nil verifier is a no-op.
func (rv *runVerifier) Close() {
	if rv != nil {
		rv.v.Close()
	}
}

// left is what is left of the run's budget (0 = no limit); once it is spent, only cached
// pairs are answered.
func (rv *runVerifier) left() time.Duration {
	if rv.budget <= 0 {
		return 0
	}
	return max(rv.budget-time.Duration(rv.done.Seconds*float64(time.Second)), time.Nanosecond)
}

// failed is the command's error for a failure of the model: an interruption, or the
// engine's error.
func (rv *runVerifier) failed(err error) error {
	if rv.ctx.Err() != nil {
		return launch.ErrInterrupted
	}
	return err
}

// decide asks the verifier about the held lines' pairs and puts its verdicts in them; a
// nil verifier does nothing.
func (rv *runVerifier) decide(lines []*gradedLine) error {
	if rv == nil {
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
	checks, c, err := rv.v.Check(rv.ctx, pairs, rv.left())
	if err != nil {
		return rv.failed(err)
	}
	rv.done = rv.done.Add(c)
	for i, g := range asked {
		g.v.Verifier = checks[i]
	}
	return nil
}

// records asks the verifier about the answers of debate records that robust did not
// decide (verifier.Records); a nil verifier does nothing.
func (rv *runVerifier) records(recs []engine.DebateRecord) error {
	if rv == nil {
		return nil
	}
	c, err := rv.v.Records(rv.ctx, recs, rv.left())
	if err != nil {
		return rv.failed(err)
	}
	rv.done = rv.done.Add(c)
	return nil
}
