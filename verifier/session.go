package verifier

import (
	"context"
	"time"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/launch"
)

// Session is the verifier of one command's run (umad grade, umad debate): its model, a
// time budget for the whole run, and what it did so far.
type Session struct {
	v      *Verifier
	budget time.Duration
	done   Counts
}

// NewSession gives v a budget for the whole run (0 = no limit).
func NewSession(v *Verifier, budget time.Duration) *Session {
	return &Session{v: v, budget: budget}
}

// Close frees the model; a nil session is a no-op.
func (s *Session) Close() {
	if s != nil {
		s.v.Close()
	}
}

// Done is what the session did so far.
func (s *Session) Done() Counts { return s.done }

// left is what is left of the run's budget (0 = no limit); once it is spent, only cached
// pairs are answered.
func (s *Session) left() time.Duration {
	if s.budget <= 0 {
		return 0
	}
	return max(s.budget-time.Duration(s.done.Seconds*float64(time.Second)), time.Nanosecond)
}

// failed is the command's error for a failure of the model: an interruption, or the
// engine's error.
func failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return launch.ErrInterrupted
	}
	return err
}

// Check asks the model about the pairs within what is left of the budget.
func (s *Session) Check(ctx context.Context, pairs []Pair) ([]grade.Check, error) {
	checks, c, err := s.v.Check(ctx, pairs, s.left())
	if err != nil {
		return nil, failed(ctx, err)
	}
	s.done = s.done.Add(c)
	return checks, nil
}

// Records asks the model about the answers of debate records that robust did not decide
// (Verifier.Records) within what is left of the budget.
func (s *Session) Records(ctx context.Context, recs []engine.DebateRecord) error {
	c, err := s.v.Records(ctx, recs, s.left())
	if err != nil {
		return failed(ctx, err)
	}
	s.done = s.done.Add(c)
	return nil
}
