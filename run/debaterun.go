package run

// A debate run from start to report: Run takes every step; Open and OpenDebate.Run split it
// where the models are loaded.

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/evalrun"
	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/report"
)

// Run runs the debate: Resolve, Check, Plan, Open, then the debate itself, into Out, and
// its report. Stopped by an interrupt (SIGINT, SIGTERM) or ctx, it returns
// launch.ErrInterrupted, and the same run resumes.
func (d *Debate) Run(ctx context.Context) error {
	d.Resolve()
	if err := d.Check(); err != nil {
		return err
	}
	o, err := d.Open()
	if err != nil {
		return err
	}
	defer o.Close()
	return o.Run(ctx)
}

// OpenDebate is a debate run ready to start: its directory locked and claimed (by the
// process that starts it), and, in a process that debates, its models loaded.
type OpenDebate struct {
	d      *Debate
	plan   DebatePlan
	place  launch.Spec
	isRank bool // one of the ranks a launcher started: it writes only its rollout files
	lock   *runlock.Lock
	save   func() error // saves the settings once the models are loaded
	models *debateModels
}

// Open prints the run's note, plans it and claims its directory for its settings (a
// directory holding a run with other settings is refused); a process that debates (not
// the launcher of several) then loads the models. Settings must be resolved and checked.
func (d *Debate) Open() (*OpenDebate, error) {
	place, isRank, err := d.place()
	if err != nil {
		return nil, err
	}
	if !isRank && d.Note != "" {
		fmt.Fprint(d.Stderr, d.Note)
	}
	plan, err := d.Plan()
	if err != nil {
		return nil, err
	}
	if d.Out == "" {
		return nil, ErrNoOut
	}
	o := &OpenDebate{d: d, plan: plan, place: place, isRank: isRank, save: func() error { return nil }}
	if !isRank {
		if err := o.claim(); err != nil {
			o.Close()
			return nil, err
		}
	}
	if place.Multi() && !isRank {
		return o, nil // the ranks load the models
	}
	threads := d.Threads
	if place.LocalWorld > 1 && threads == 0 { // this machine's ranks share its cores
		threads = engine.SharedThreads(d.Settings.distinctModels() * place.LocalWorld)
	}
	if o.models, err = d.openModels(threads); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// claim locks and claims the run directory, and merges what the ranks of a stopped
// multi-process run left.
func (o *OpenDebate) claim() error {
	d := o.d
	var err error
	if o.lock, err = runlock.Dir(d.Out); err != nil {
		return err
	}
	save, err := ClaimDir(d.Out, d.Settings)
	if err != nil {
		return err
	}
	o.save = RecordCommand(d.Out, d.Command, save)
	return evalrun.Merge(d.Out, d.Settings.Seeds)
}

// Close frees the models and releases the directory.
func (o *OpenDebate) Close() {
	if o.models != nil {
		o.models.close()
	}
	if o.lock != nil {
		o.lock.Release()
	}
}

// Run saves the settings and debates: this process's part of the problems (all of them, or
// a rank's share), or, as the launcher of several processes, starts the ranks and merges
// their shares; then, but in a rank, writes the report.
func (o *OpenDebate) Run(ctx context.Context) error {
	d := o.d
	if err := o.save(); err != nil {
		return err
	}
	if o.place.Multi() && !o.isRank {
		if err := evalrun.Launch(d.Out, d.Settings.Seeds, o.place, launch.Output{Stdout: d.Stdout, Stderr: d.Stderr}); err != nil {
			return err
		}
		return d.writeReport()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := o.models
	ev := evalrun.Run{Debate: d.Settings.config(m.agents), Problems: o.plan.Problems,
		Part: evalrun.Part{Rank: o.place.Rank, World: o.place.World}, Progress: os.Stderr}
	for _, a := range d.Settings.Agents {
		ev.SeedOffsets = append(ev.SeedOffsets, a.SeedOffset)
	}
	if m.check != nil {
		m.check.Ctx, ev.Check = ctx, m.check.Records
	}
	if err := ev.Seeds(ctx, d.Out, d.Settings.Seeds); err != nil {
		return err
	}
	if m.check != nil {
		fmt.Fprintf(d.Stderr, "verifier: %s\n", m.check.Done)
	}
	if o.isRank {
		return nil // the launcher merges and reports
	}
	m.printSharing(d)
	return d.writeReport()
}

// writeReport writes the run's report from its rollouts and says where it is.
func (d *Debate) writeReport() error {
	if _, err := WriteDebateReport(d.Out); err != nil {
		return err
	}
	fmt.Fprintf(d.Stdout, "report: %s\n", filepath.Join(d.Out, "report", report.ReportFile))
	return nil
}
