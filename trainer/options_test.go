package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/rollouts"
)

func TestScheduleFactor(t *testing.T) {
	for _, tc := range []struct {
		s           Schedule
		step, steps int
		want        float64
	}{
		{Schedule{}, 1, 10, 1},
		{Schedule{Kind: ScheduleConstant, WarmupSteps: 4}, 1, 10, 0.25},
		{Schedule{Kind: ScheduleConstant, WarmupSteps: 4}, 4, 10, 1},
		{Schedule{Kind: ScheduleConstant, WarmupSteps: 4}, 9, 10, 1},
		{Schedule{Kind: ScheduleCosine, WarmupSteps: 2, MinRatio: 0.1}, 2, 10, 1},
		{Schedule{Kind: ScheduleCosine, WarmupSteps: 2, MinRatio: 0.1}, 6, 10, 0.55}, // half-way: 0.1 + 0.9/2
		{Schedule{Kind: ScheduleCosine, WarmupSteps: 2, MinRatio: 0.1}, 10, 10, 0.1},
		{Schedule{Kind: ScheduleCosine}, 10, 10, 0},
	} {
		if got := tc.s.Factor(tc.step, tc.steps); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%+v step %d of %d: factor %g, want %g", tc.s, tc.step, tc.steps, got, tc.want)
		}
	}
	for _, bad := range []Schedule{{Kind: "linear"}, {WarmupSteps: -1}, {MinRatio: 2}} {
		if bad.check() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// The GRPO-user options on a real run: the learning rate follows the schedule, overlong
// filtering masks exactly the responses cut off at the token limit, dynamic sampling
// drops exactly the groups whose rewards are all equal, truncated IS weights stay under
// their cap, kept rollouts are the trained records, and validation carries the debate
// summary.
func TestTrainingOptions(t *testing.T) {
	rt := torchtest.Open(t)
	cfg := demoConfig(t, "grpo", []string{warmStart(t, rt, "qwen2")}, 2)
	cfg.Schedule = Schedule{Kind: ScheduleCosine, WarmupSteps: 1, MinRatio: 0.1}
	cfg.DynamicSampling, cfg.MaxGenBatches = true, 2
	cfg.OverlongFilter, cfg.TISCap = true, 2
	cfg.KeepRollouts = cfg.BatchSize
	cfg.Agents[0].MaxTokens = 12 // some responses run out of tokens
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	train, val := readMetrics(t, cfg.Out)
	if len(train) != 2 {
		t.Fatalf("%d training lines, want 2", len(train))
	}
	for i, wantLR := range []float64{cfg.Opt.LR, 0.1 * cfg.Opt.LR} {
		if math.Abs(train[i].LR-wantLR) > 1e-12 {
			t.Errorf("step %d learning rate %g, want %g", i+1, train[i].LR, wantLR)
		}
	}
	for _, l := range train {
		var recs []debate.Record
		path := filepath.Join(cfg.Out, RolloutsDir, fmt.Sprintf("step-%06d.jsonl.zst", l.Step))
		if _, err := rollouts.Read(path, func(b []byte) error {
			var r debate.Record
			err := json.Unmarshal(b, &r)
			recs = append(recs, r)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(recs) != cfg.BatchSize {
			t.Fatalf("step %d kept %d records, want the %d trained", l.Step, len(recs), cfg.BatchSize)
		}
		overlong, uniform := 0, 0
		for _, r := range recs {
			same := true
			for _, at := range r.Turns[0][0] {
				if at.Finish == engine.FinishLength {
					overlong++
				}
				same = same && at.Grade.Strict == r.Turns[0][0][0].Grade.Strict
			}
			if same {
				uniform++
			}
		}
		t.Logf("step %d: %d cut-off responses, %d groups dropped, %d trained, IS weight %+v", l.Step, overlong, l.DroppedGroups, l.Groups, l.ISWeight)
		if l.Overlong != overlong || l.DroppedGroups != uniform || l.Groups+l.DroppedGroups > cfg.BatchSize {
			t.Errorf("step %d: %d overlong, %d dropped, %d trained groups; the records have %d cut-off responses and %d all-equal groups",
				l.Step, l.Overlong, l.DroppedGroups, l.Groups, overlong, uniform)
		}
		if !(l.ISWeight.Max <= cfg.TISCap) || !(l.ISWeight.Mean > 0.9) {
			t.Errorf("step %d: IS weights %+v; cap %g, and rollout and trainer run the same weights", l.Step, l.ISWeight, cfg.TISCap)
		}
	}
	if len(val) != 2 || val[1].Summary == nil || len(val[1].Summary.Rows) == 0 {
		t.Errorf("validation lines carry no debate summary: %+v", val)
	}

	// An untrained model answers nothing right: every group is dropped, the step rolls out
	// MaxGenBatches batches looking for signal, and no update is made.
	cfg = demoConfig(t, "grpo", []string{filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")}, 1)
	cfg.DynamicSampling, cfg.MaxGenBatches, cfg.ValProblems = true, 2, nil
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	train, _ = readMetrics(t, cfg.Out)
	if l := train[0]; l.Accuracy != 0 || l.Groups != 0 || l.DroppedGroups != cfg.BatchSize || l.RolledOut != 2*cfg.BatchSize || l.OptimSteps != 0 {
		t.Errorf("untrained model with dynamic sampling: accuracy %g, %d groups trained, %d dropped, %d problems rolled out, %d optimizer steps; want 0, 0, %d, %d, 0",
			l.Accuracy, l.Groups, l.DroppedGroups, l.RolledOut, l.OptimSteps, cfg.BatchSize, 2*cfg.BatchSize)
	}
}
