package run

// A trained debate cell of umad experiment that follows its training cells: a moved
// experiment directory, a training continued to more steps.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/umad-dev/umad/internal/atomicfile"
)

// beforeRun readies a cell's directory: a trained debate planned before its training was
// done is resolved on the training's checkpoint now (it may be done, moved or stale), and
// a moved or stale directory is fixed.
func (st *cellState) beforeRun(e *Experiment) error {
	if st.Kind == "debate" && !st.ready {
		st.ready = true
		tokens := st.tokens
		if err := st.resolveDebate(e, st.Settings); err != nil {
			return err
		}
		st.tokens = tokens // the plan's estimate, which the ETA counts down
	}
	if st.fix == nil {
		return nil
	}
	if err := st.fix(); err != nil {
		return err
	}
	st.fix = nil
	return nil
}

// followTraining lets a trained debate's directory follow its training cells, whose
// checkpoints config.json names by absolute path. A moved experiment directory holds the
// same run at a new place: its paths are updated before it runs. A training continued to
// more steps has a newer checkpoint, which this run did not debate: the run is set aside,
// kept beside the cell, and the cell runs afresh.
func (st *cellState) followTraining(cfg DebateSettings) error {
	if len(st.Needs) == 0 {
		return nil
	}
	path := filepath.Join(st.dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var old DebateSettings
	if err := json.Unmarshal(raw, &old); err != nil || len(old.Agents) != len(cfg.Agents) {
		return nil // run.ClaimDir names the difference
	}
	rebased := old
	rebased.Agents = slices.Clone(old.Agents)
	for i, a := range cfg.Agents {
		was, now := st.TrainedTail(old.Agents[i].Model), st.TrainedTail(a.Model)
		switch {
		case old.Agents[i].Model == a.Model:
		case was == "" || now == "":
			return nil // not a training cell's checkpoint: run.ClaimDir names it
		case was != now:
			return st.setAside(was, now)
		default:
			rebased.Agents[i].Model = a.Model
		}
	}
	if reflect.DeepEqual(rebased, old) {
		return nil
	}
	want, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(rebased, cfg) {
		have, _ := json.MarshalIndent(rebased, "", "  ")
		return fmt.Errorf("%s holds a run with other settings (%s); resume it with the same flags or choose another --out", st.dir, ConfigDiff(have, want))
	}
	st.moved = true
	// Each old path is replaced in the file's text, which keeps the rest as it was (the
	// command that started the run, recordCommand).
	var pairs []string
	for i, a := range old.Agents {
		if a.Model != cfg.Agents[i].Model {
			from, _ := json.Marshal(a.Model)
			to, _ := json.Marshal(cfg.Agents[i].Model)
			pairs = append(pairs, string(from), string(to))
		}
	}
	st.fix = func() error {
		return atomicfile.WriteBytes(path, []byte(strings.NewReplacer(pairs...).Replace(string(raw))))
	}
	return nil
}

// setAside plans a stale trained debate's move to DIR.step-N (its checkpoint's name), so
// the cell debates the training's newest checkpoint and the old results stay.
func (st *cellState) setAside(was, now string) error {
	parts := strings.Split(was, "/")
	aside := st.dir + "." + parts[len(parts)-3] // .../checkpoints/step-N/agent-I/model.gguf
	if _, err := os.Stat(aside); err == nil {
		return fmt.Errorf("%s debated %s, which is no longer its training's newest checkpoint, and %s, where the experiment would keep it, exists; move one away", st.dir, was, aside)
	}
	st.stale = fmt.Sprintf("it debated %s, its training's newest is %s; the old run is kept as %s", was, now, aside)
	st.fix = func() error { return os.Rename(st.dir, aside) }
	return nil
}
