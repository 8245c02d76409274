package trainer

// One-step-off-policy overlap (Overlap 1): while step t learns in libtorch, llama.cpp
// rolls out step t+1 from the weights it holds, those of step t-1; step t's weights are
// synced at the boundary, when both have finished, before step t+2's rollout starts.
// Step 1 rolls out from the starting weights first, alone. The update weights each token
// by exp(trainer - rollout log-prob), truncated importance sampling (update.go): with the
// trainer at step t-1's weights and the rollout from step t-2's, that is the current
// policy over the one that sampled the stale batch.
//
// A rollout depends on (seed, step, the weights it was made from) alone, never on when it
// ran. A checkpoint at step t holds step t+1's rollout (NextRolloutFile), written with
// the checkpoint and renamed into place with it, so a resumed run learns the same step
// t+1 and rolls out step t+2 from the step-t weights it loads, as the uninterrupted run
// does. Keeping the rollout rather than step t-1's weights costs a batch of tokens instead
// of a second copy of the model, and does not rely on llama.cpp reproducing its log-probs
// bit for bit. The last step rolls out the next one too, so that a run resumed with a
// larger --steps continues as one trained that far at once.

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/rollouts"
)

// NextRolloutFile is, in a checkpoint of an overlapped run, the rollout of the next step.
const NextRolloutFile = "next-rollout.jsonl.zst"

// overlapStep learns step t+1 from the rollout made during the previous step (rolling it
// out first when there is none: the run's first step) while it rolls out step t+2, then
// syncs. An interrupt lets both finish: the checkpoint after the step needs the next
// rollout.
func (t *Trainer) overlapStep(ctx context.Context) error {
	step := t.step + 1
	start := time.Now()
	beside := t.next != nil // rolled out during the previous step
	if !beside {
		g, err := t.gather(ctx, step)
		if err != nil {
			return err
		}
		t.next = &g
	}
	var next gathered
	var rollErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		next, rollErr = t.gather(context.WithoutCancel(ctx), step+1)
	}()
	lines, err := t.learnStep(step, *t.next)
	<-done
	if err != nil {
		return err
	}
	if rollErr != nil {
		return rollErr
	}
	for i := range lines {
		lines[i].Times.Overlapped = beside
	}
	if err := t.finishStep(step, *t.next, lines, start); err != nil {
		return err
	}
	t.next = &next
	return nil
}

// nextRollout is NextRolloutFile's one record.
type nextRollout struct {
	Step    int             `json:"step"`
	Records []debate.Record `json:"records"`
	Stats   debate.Stats    `json:"stats"`
	Took    time.Duration   `json:"took_ns"`
}

// writeNext writes the next step's rollout, if there is one, into the checkpoint dir.
func (t *Trainer) writeNext(dir string) error {
	if t.next == nil {
		return nil
	}
	n := nextRollout{Step: t.step + 1, Records: t.next.recs, Stats: t.next.stats, Took: t.next.took}
	return rollouts.WriteFile(filepath.Join(dir, NextRolloutFile), []nextRollout{n})
}

// readNext reads the next step's rollout from a checkpoint; nil when it holds none.
func readNext(ck *checkpointInfo) (*gathered, error) {
	path := filepath.Join(ck.Dir, NextRolloutFile)
	var n *nextRollout
	torn, err := rollouts.Read(path, func(line []byte) error {
		n = new(nextRollout)
		return json.Unmarshal(line, n)
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("resume: %s: %w", path, err)
	case n == nil && !torn:
		return nil, nil // none (removed by hand): step t+1 rolls out from the step-t weights
	case torn || n.Step != ck.Step+1:
		return nil, fmt.Errorf("resume: %s does not hold step %d's rollout", path, ck.Step+1)
	}
	return &gathered{recs: n.Records, stats: n.Stats, took: n.Took}, nil
}
