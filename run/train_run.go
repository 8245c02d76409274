package run

// A training run from its directory to its report: Run claims the directory (rank 0),
// joins the ranks' group, trains and reports.

import (
	"context"
	"errors"
	"fmt"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/verifier"
)

// CheckDir says what the run would say before it loads, touching nothing: of the agents'
// tokenizers, and of Out against Resume and the settings. A dry run's last check.
func (t *Train) CheckDir() error {
	if err := t.checkTokenizers(); err != nil {
		return err
	}
	_, _, err := t.claim()
	return err
}

// Run trains the loaded and checked run as rank d of its job, on the plugin rt, until ctx
// ends it: rank 0 claims the run directory, the ranks join their group, and rank 0 reports
// at the end. A new run that fails before finishing removes what it wrote; an interrupted
// one returns launch.ErrInterrupted and resumes.
func (t *Train) Run(ctx context.Context, rt *torch.Runtime, d launch.Spec) error {
	if err := t.checkTokenizers(); err != nil {
		return err
	}
	cfg := t.Config()
	// The page, RUN/report/index.html, is rewritten as each step lands.
	live := trainer.Live{Torch: rt, Progress: t.Stdout, Page: report.WriteTrainingPage}
	if cfg.Verifier != "" { // loaded before the run directory is touched; the agents' threads
		var err error
		if live.Checker, err = t.openVerifier(); err != nil {
			return err
		}
		defer live.Checker.Close()
	}
	save, exists := func() error { return nil }, true
	if d.Rank == 0 { // the run directory is rank 0's; other ranks write only RUN/ranks/R/
		lock, err := runlock.Dir(cfg.Out)
		if err != nil {
			return err
		}
		defer lock.Release()
		if exists, save, err = t.claim(); err != nil {
			return err
		}
	}
	if d.Multi() {
		var err error
		if live.Group, err = launch.Join(rt, d, t.Settings); err != nil {
			return err
		}
		defer live.Group.Close()
	}
	if err := save(); err != nil {
		return err
	}
	if err := trainer.Run(ctx, cfg, live); err != nil {
		if errors.Is(err, trainer.ErrInterrupted) {
			return errors.Join(launch.ErrInterrupted, err)
		}
		if !exists {
			abandonRun(cfg.Out)
		}
		return err
	}
	if d.Rank != 0 {
		return nil
	}
	return t.report()
}

// openVerifier loads the verifier model of a robust+verifier run with the rollout
// engines' threads, cache type and placement.
func (t *Train) openVerifier() (*verifier.Verifier, error) {
	template, err := verifier.ReadTemplate(t.Settings.VerifierPrompt)
	if err != nil {
		return nil, err
	}
	s := t.Settings
	opt, err := engine.ParseOptions(0, 0, t.Rollout.Engine.Threads, s.KVType, s.FlashAttn)
	if err != nil {
		return nil, err
	}
	return verifier.Open(s.Trainer.Verifier, template, t.Rollout.Placement, opt)
}

// report names the last checkpoint and writes the training report.
func (t *Train) report() error {
	latest, err := trainer.LatestCheckpoint(t.Out)
	if err != nil {
		return err
	}
	fmt.Fprintf(t.Stdout, "trained %d steps; checkpoint: %s (agent-I/model.gguf for umad debate)\n", t.Settings.Trainer.Steps, latest)
	rep, err := report.WriteTraining(t.Out)
	if err != nil {
		return err
	}
	fmt.Fprintf(t.Stdout, "report: %s\n", rep)
	if peak, err := sysmem.PeakRSS(); err == nil { // against the plan's "peak host" line
		fmt.Fprintf(t.Stderr, "peak host memory: %s (this process's resident high-water mark)\n", memplan.Size(peak))
	}
	return nil
}
