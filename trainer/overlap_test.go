package trainer

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/torchtest"
)

// With --overlap 1 step 2 learns from a batch rolled out from the starting weights while
// step 1 trained, and weights each token by the trainer's current policy (step 1's
// weights) over the policy that sampled it: its rollout log-probs match the reference
// model's (the starting weights) to llama.cpp's rounding and differ from the trainer's by
// step 1's update. Without overlap the same batch's rollout log-probs are the trainer's.
// The file sync gives the stale batch too.
func TestOverlapImportanceWeights(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	const tol = 1e-4 // llama.cpp vs the plugin at f32 (the probe tolerance)
	for _, tc := range []struct {
		name    string
		overlap int
		sync    SyncMode
	}{{"overlap 0", 0, SyncInPlace}, {"overlap 1", 1, SyncInPlace}, {"overlap 1, file sync", 1, SyncFile}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := demoConfig(t, "grpo", []string{start}, 2)
			cfg.ValProblems, cfg.Overlap, cfg.Sync = nil, tc.overlap, tc.sync
			cfg.TISCap = 1e6 // no weight is cut: the test sees the ratio itself
			var batches []*turnBatch
			cfg.hooks = &testHooks{batch: func(step, _, _ int, b *turnBatch) {
				if step == 2 {
					batches = append(batches, b)
				}
			}}
			if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
				t.Fatal(err)
			}
			if len(batches) != 1 {
				t.Fatalf("step 2 learned %d batches, want 1", len(batches))
			}
			b := batches[0]
			toRef, toTrainer := logpGap(b.rolloutLogp, b.ref), logpGap(b.rolloutLogp, b.old)
			t.Logf("step 2: mean |rollout - reference| %.3g, |rollout - trainer| %.3g", toRef, toTrainer)
			stale, current := toRef, toTrainer // the rollout's policy, and the other one
			if tc.overlap == 0 {
				stale, current = toTrainer, toRef
			}
			if !(stale < tol) || !(current > 10*tol) {
				t.Errorf("the rollout log-probs are %.3g from the policy that should have sampled them and %.3g from the other; want < %g and > %g", stale, current, tol, 10*tol)
			}
			for i := range b.old {
				for j := range b.old[i] {
					w := math.Exp(float64(b.old[i][j]) - float64(b.rolloutLogp[i][j]))
					if b.keptMass[i] != nil {
						w *= float64(b.keptMass[i][j])
					}
					if want := float32(math.Min(w, cfg.TISCap)); b.isw[i][j] != want {
						t.Fatalf("response %d token %d: importance weight %g, want pi_trainer/pi_rollout = %g", i, j, b.isw[i][j], want)
					}
				}
			}
		})
	}
}

// logpGap is the mean |a - b| over every token of two sets of log-probs.
func logpGap(a, b [][]float32) float64 {
	var sum float64
	var n int
	for i := range a {
		sum += meanAbsDiff(a[i], b[i]) * float64(len(a[i]))
		n += len(a[i])
	}
	return sum / float64(n)
}

// An overlapped run is deterministic and resumes exactly: two fresh runs log the same
// steps, and a run stopped after step 2 (finished, or cancelled after it or while it
// learned and step 3 rolled out, which both finish) and resumed to step 4
// logs what the uninterrupted 4-step run logs and ends with the same weights and
// optimizer state, byte for byte. The step-2 checkpoint holds step 3's rollout, made from
// step 1's weights; rolling it out again from step 2's (what a resume without it would
// do) changes the run, which the control at the end shows. Importance sampling reads the
// rollout log-probs, so the engines run on one clock (Deterministic) to give the same bits
// whatever the timing; metricsDiff's tolerances are then not needed, but kept.
func TestOverlapResumeIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 18 tiny steps")
	}
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	config := func(steps int) Config {
		cfg := demoConfig(t, "grpo", []string{start}, steps)
		cfg.ValProblems, cfg.ValEvery = cfg.ValProblems[:8], 0
		cfg.Overlap, cfg.TISCap, cfg.Rollout.Deterministic = 1, 2, true
		return cfg
	}
	whole, stopped := wholeAndStopped(t, rt, config)
	want, wantVal := readMetrics(t, whole.Out)

	cancelled := config(4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := cancelAt{prefix: []byte("step 2/4:"), cancel: cancel}
	if err := Run(ctx, cancelled, Live{Torch: rt, Progress: stop}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run cancelled after step 2: %v, want ErrInterrupted", err)
	}
	ck, _ := LatestCheckpoint(cancelled.Out)
	if filepath.Base(ck) != "step-000002" {
		t.Fatalf("the interrupted run checkpointed %q, want step-000002", ck)
	}
	if _, err := os.Stat(filepath.Join(ck, NextRolloutFile)); err != nil {
		t.Fatalf("the step-2 checkpoint holds no step-3 rollout: %v", err)
	}
	if err := Run(context.Background(), cancelled, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}

	// Ctrl-C while step 2 learns and step 3 rolls out: both finish, and step 2 is saved.
	midStep := config(4)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	midStep.hooks = &testHooks{batch: func(step, _, _ int, _ *turnBatch) {
		if step == 2 {
			cancel()
		}
	}}
	if err := Run(ctx, midStep, Live{Torch: rt}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run cancelled in step 2: %v, want ErrInterrupted", err)
	}
	if ck, _ := LatestCheckpoint(midStep.Out); filepath.Base(ck) != "step-000002" {
		t.Fatalf("the run cancelled in step 2 checkpointed %q, want step-000002", ck)
	}
	midStep.hooks = nil
	if err := Run(context.Background(), midStep, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}

	// Control: the stopped run's step-2 checkpoint without step 3's rollout.
	regen := config(2)
	if err := Run(context.Background(), regen, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	ck, _ = LatestCheckpoint(regen.Out)
	if err := os.Remove(filepath.Join(ck, NextRolloutFile)); err != nil {
		t.Fatal(err)
	}
	regen.Steps = 4
	if err := Run(context.Background(), regen, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		cfg   Config
		first int // the first step compared
		same  bool
	}{{"a second fresh run", stopped, 1, true}, {"stopped after 2 steps", stopped, 3, true}, {"cancelled after step 2", cancelled, 3, true},
		{"cancelled while step 2 learned", midStep, 3, true},
		{"resumed without step 3's rollout", regen, 3, false}} {
		got, gotVal := readMetrics(t, tc.cfg.Out)
		if len(got) != len(want) {
			t.Errorf("%s: %d training lines, want %d (each step once)", tc.name, len(got), len(want))
			continue
		}
		var diffs []string
		for i := range want {
			if want[i].Step >= tc.first {
				diffs = append(diffs, metricsDiff(t, want[i], got[i])...)
			}
		}
		diffs = append(diffs, metricsDiff(t, wantVal[len(wantVal)-1], gotVal[len(gotVal)-1])...)
		for _, f := range []string{"model.safetensors", hfmodel.OptimizerFile, "model.gguf"} {
			a := filepath.Join(AgentCheckpointDir(filepath.Join(whole.Out, CheckpointsDir, "step-000004"), 0), f)
			b := filepath.Join(AgentCheckpointDir(filepath.Join(tc.cfg.Out, CheckpointsDir, "step-000004"), 0), f)
			if !sameBytes(t, a, b) {
				diffs = append(diffs, "the step-4 checkpoint's "+f)
			}
		}
		if tc.same {
			for _, d := range diffs {
				t.Errorf("%s differs from the uninterrupted run: %s", tc.name, d)
			}
		} else if len(diffs) == 0 {
			t.Errorf("%s: the same run as the uninterrupted one; the comparison cannot see a re-rolled batch", tc.name)
		}
	}
}
