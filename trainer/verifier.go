package trainer

// The verifier model of a robust+verifier run: it decides the rewards of the answers
// robust does not, and the metrics count them.

import (
	"context"
	"fmt"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/verifier"
)

// verify asks the verifier about the records' answers robust did not decide, within the
// run's budget per rollout batch; without a verifier it does nothing.
func (t *Trainer) verify(ctx context.Context, recs []debate.Record) error {
	if t.live.Checker == nil {
		return nil
	}
	if _, err := t.live.Checker.Records(ctx, recs, t.cfg.VerifierBudget); err != nil {
		return fmt.Errorf("verifier: %w", err)
	}
	return nil
}

// verifierMetrics sets each line's verifier counts (its agent and turn), summed over the
// ranks; without a verifier the lines have none.
func (t *Trainer) verifierMetrics(recs []debate.Record, lines []trainlog.StepMetrics) error {
	if t.live.Checker == nil {
		return nil
	}
	tally := verifier.Tally(recs, t.cfg.Turns, len(t.cfg.Agents))
	sums := make([]float64, 0, 4*len(lines))
	for _, l := range lines {
		c := tally[l.Turn][l.Agent]
		sums = append(sums, float64(c.Decided()), float64(c.Equal), float64(c.Undecided), float64(c.Skipped))
	}
	if err := t.reduce(sums, torch.Sum); err != nil {
		return err
	}
	for i := range lines {
		s := sums[4*i:]
		lines[i].Verifier = &trainlog.VerifierCounts{Decided: int(s[0]), Equal: int(s[1]), Undecided: int(s[2]), Skipped: int(s[3])}
	}
	return nil
}
