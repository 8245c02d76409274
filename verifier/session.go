package verifier

import (
	"context"
	"time"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/launch"
)

// Session is a verifier over one run (umad grade's, umad debate's): the run's context, the
// time the model may take in all (0 = no limit), and what it did so far. Once the budget
// is spent, only cached pairs are answered.
type Session struct {
	*Verifier
	Ctx    context.Context
	Budget time.Duration
	Done   Counts
}

// Close frees the model; a nil session is a no-op.
func (s *Session) Close() {
	if s != nil {
		s.Verifier.Close()
	}
}

// left is what is left of the budget (0 = no limit).
func (s *Session) left() time.Duration {
	if s.Budget <= 0 {
		return 0
	}
	return max(s.Budget-time.Duration(s.Done.Seconds*float64(time.Second)), time.Nanosecond)
}

// failed is the run's error for a failure of the model: an interruption, or the engine's
// error.
func (s *Session) failed(err error) error {
	if s.Ctx.Err() != nil {
		return launch.ErrInterrupted
	}
	return err
}

// Pairs asks about the pairs within what is left of the budget (Verifier.Check).
func (s *Session) Pairs(pairs []Pair) ([]grade.Check, error) {
	checks, c, err := s.Check(s.Ctx, pairs, s.left())
	if err != nil {
		return nil, s.failed(err)
	}
	s.Done = s.Done.Add(c)
	return checks, nil
}

// Records asks about the answers of debate records that robust did not decide
// (Verifier.Records); a nil session does nothing.
func (s *Session) Records(recs []debate.Record) error {
	if s == nil {
		return nil
	}
	c, err := s.Verifier.Records(s.Ctx, recs, s.left())
	if err != nil {
		return s.failed(err)
	}
	s.Done = s.Done.Add(c)
	return nil
}
