package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// Lineup gathers the methods of Table 1, the debate browser and the figures of one umad
// report, run by run under their labels, in the order they are given.
type Lineup struct {
	// Settings are the labels' agent sets, from an experiment file.
	Settings map[string]string
	order    []string
	debates  map[string][]Run
	training map[string]Method
	pairs    []Pair
	skipped  []string // training runs without a summarised validation
}

// Methods is how many methods the lineup holds.
func (t *Lineup) Methods() int { return len(t.order) }

func (t *Lineup) claim(label string, training bool) error {
	_, isDebate := t.debates[label]
	_, isTraining := t.training[label]
	if (training && isDebate) || isTraining {
		return fmt.Errorf("report: label %s names a training run and another run; give each training run its own label", label)
	}
	if !isDebate {
		t.order = append(t.order, label)
	}
	return nil
}

// AddDebate adds a debate run under label; runs with one label are seeds of one method.
func (t *Lineup) AddDebate(label string, run Run) error {
	if err := t.claim(label, false); err != nil {
		return err
	}
	if t.debates == nil {
		t.debates = map[string][]Run{}
	}
	t.debates[label] = append(t.debates[label], run)
	return nil
}

// AddTraining adds the training run in dir under label, with its last validation; one
// without a summarised validation is left out, said so by WriteTable1.
func (t *Lineup) AddTraining(label, dir string) error {
	m, pair, ok, err := TrainingMethod(dir, label)
	if err != nil {
		return err
	}
	if !ok {
		t.skipped = append(t.skipped, dir)
		return nil
	}
	if err := t.claim(label, true); err != nil {
		return err
	}
	if t.training == nil {
		t.training = map[string]Method{}
	}
	t.training[label] = m
	if pair != nil {
		t.pairs = append(t.pairs, *pair)
	}
	return nil
}

// WriteBrowser writes the debate browser of the debate runs into out, a method per label
// (as Table 1's rows, whose cells link to it).
func (t *Lineup) WriteBrowser(out string) error {
	var methods []Method
	for _, label := range t.order {
		if runs, ok := t.debates[label]; ok {
			m, err := NewMethod(label, runs)
			if err != nil {
				return fmt.Errorf("report: %w", err)
			}
			methods = append(methods, m)
		}
	}
	return WriteBrowser(out, methods)
}

// WriteTable1 writes Table 1 and the figures into out when there are two methods or more,
// saying on w what it wrote.
func (t *Lineup) WriteTable1(w io.Writer, out string, opt TableOptions) error {
	if len(t.order) < 2 {
		return nil
	}
	for _, dir := range t.skipped {
		fmt.Fprintf(w, "table: %s has no validation with a summary; not a method of Table 1\n", dir)
	}
	var methods []Method
	var series []Series
	for _, label := range t.order {
		m, ok := t.training[label]
		if !ok {
			var err error
			if m, err = NewMethod(label, t.debates[label]); err != nil {
				return fmt.Errorf("report: %w", err)
			}
		}
		m.Setting = t.Settings[label]
		methods = append(methods, m)
		series = append(series, Series{Name: m.Name, Summary: m.Summary.Mean})
	}
	if err := WriteTable1(out, methods, opt); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(w, "table: %s\n", filepath.Join(out, Table1File))
	// Fig. 3 also sets each debate method against its baseline's debate.
	pairs := t.pairs
	bases, err := Baselines(methods, opt.Baseline)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for i, m := range methods {
		if _, isDebate := t.debates[m.Name]; isDebate && bases[i] != i {
			base := methods[bases[i]]
			pairs = append(pairs, Pair{Name: base.Name + " → " + m.Name, Base: base.Summary.Mean, Trained: m.Summary.Mean})
		}
	}
	layouts, err := WriteRunFigures(out, series, pairs)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	var names []string
	for _, l := range layouts {
		names = append(names, filepath.Join(out, l.Name+".png"))
	}
	fmt.Fprintf(w, "figures: %s\n", strings.Join(names, ", "))
	return nil
}
