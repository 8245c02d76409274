package trainer

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/trainspec"
)

// Both weight-sync modes give llama.cpp the same weights, so the same run logs the same
// metrics with either: rollouts, rewards, updates, probe gaps and validation.
func TestSyncModesAgree(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	file, inplace := syncRun(t, rt, start, SyncFile, trainspec.LoRA{}), syncRun(t, rt, start, SyncInPlace, trainspec.LoRA{})
	compareSyncRuns(t, file, inplace, 0)
}

// A LoRA run's adapter sync (llama.cpp: base + adapter GGUF) and its file sync (llama.cpp:
// the merged weights) compute W x + s B A x in two roundings, so only the log-probs read
// from llama.cpp may differ, in their last bits; the probe gap after every adapter sync
// stays at F32 rounding (1e-5), with an fp32 base and with the plugin's bf16-rounded one.
func TestLoRAAdapterSyncAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 4 runs of 2 tiny steps")
	}
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	for _, bf16 := range []bool{false, true} {
		l := trainspec.LoRA{Rank: 4, Alpha: 8, Targets: []string{"q", "k", "v", "o", "gate", "up", "down"}, BaseBF16: bf16}
		file, adapter := syncRun(t, rt, start, SyncFile, l), syncRun(t, rt, start, SyncInPlace, l)
		if _, err := os.Stat(filepath.Join(adapter.Out, "sync", "agent-0", AdapterGGUF)); err != nil {
			t.Errorf("bf16 base %v: the in-place LoRA run wrote no adapter GGUF: %v", bf16, err)
		}
		compareSyncRuns(t, file, adapter, 2e-6)
	}
}

// syncRun trains 2 steps of a one-agent GRPO run from start with the sync mode and LoRA.
func syncRun(t *testing.T, rt *torch.Runtime, start string, mode SyncMode, l trainspec.LoRA) Config {
	t.Helper()
	cfg := demoConfig(t, "grpo", []string{start}, 2)
	cfg.ValProblems, cfg.Sync, cfg.LoRA = cfg.ValProblems[:8], mode, l
	if l.Rank > 0 {
		cfg.Opt.LR = 5e-3
	}
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatalf("sync %s, lora %+v: %v", mode, l, err)
	}
	return cfg
}

// compareSyncRuns checks that two runs logged the same metrics, their probe gaps to within
// probeTol (each then at most 1e-5), and that they trained.
func compareSyncRuns(t *testing.T, ref, run Config, probeTol float64) {
	t.Helper()
	want, wantVal := readMetrics(t, ref.Out)
	got, gotVal := readMetrics(t, run.Out)
	if len(got) != len(want) || len(gotVal) != len(wantVal) {
		t.Fatalf("sync %s: %d training and %d validation lines, sync %s %d and %d", run.Sync, len(got), len(gotVal), ref.Sync, len(want), len(wantVal))
	}
	trained := 0
	for i := range want {
		trained += want[i].OptimSteps
		if probeTol > 0 {
			checkProbeGaps(t, &want[i], &got[i], probeTol)
		}
		for _, d := range metricsDiff(t, want[i], got[i]) {
			t.Errorf("step %d agent %d turn %d: %s", want[i].Step, want[i].Agent, want[i].Turn, d)
		}
	}
	if trained == 0 {
		t.Fatal("no optimizer step was taken: both modes would sync the starting weights")
	}
	for i := range wantVal {
		for _, d := range metricsDiff(t, wantVal[i], gotVal[i]) {
			t.Errorf("validation at step %d: %s", wantVal[i].Step, d)
		}
	}
}

// checkProbeGaps checks both lines' probe gaps (at most 1e-5, within tol of each other),
// then makes them equal so that the rest of the line is compared exactly.
func checkProbeGaps(t *testing.T, want, got *trainlog.StepMetrics, tol float64) {
	t.Helper()
	if !(want.ProbeGap <= 1e-5) || !(got.ProbeGap <= 1e-5) || !(math.Abs(want.ProbeGap-got.ProbeGap) <= tol) {
		t.Errorf("step %d agent %d: probe gaps %g (reference) and %g: want both <= 1e-5, within %g", want.Step, want.Agent, want.ProbeGap, got.ProbeGap, tol)
	}
	got.ProbeGap = want.ProbeGap
}

// bf16 rollout weights: the sync gives llama.cpp a BF16 copy (the checkpoint's GGUF stays
// F32), the same bytes in place as by file, so both runs log the same metrics. The probe gap
// and the rollout-trainer gap are then bf16 rounding, which the metrics report and
// truncated importance sampling weighs.
func TestBF16Rollouts(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 2 runs of 2 tiny steps")
	}
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	run := func(mode SyncMode) Config {
		cfg := demoConfig(t, "grpo", []string{start}, 2)
		cfg.ValProblems, cfg.Sync = cfg.ValProblems[:8], mode
		cfg.RolloutDType, cfg.ProbeTol, cfg.TISCap = RolloutBF16, 5e-2, 2
		if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
			t.Fatalf("sync %s: %v", mode, err)
		}
		return cfg
	}
	file, inplace := run(SyncFile), run(SyncInPlace)
	compareSyncRuns(t, file, inplace, 0)
	lines, _ := readMetrics(t, inplace.Out)
	for _, l := range lines {
		t.Logf("step %d turn %d: probe gap %.3g, rollout gap mean %.3g max %.3g, rollout KL %.3g, IS weight mean %.4f",
			l.Step, l.Turn, l.ProbeGap, l.LogpGap, l.LogpGapMax, l.RolloutKL, l.ISWeight.Mean)
		if !(l.ProbeGap > 1e-5 && l.ProbeGap < inplace.ProbeTol) {
			t.Errorf("step %d: probe gap %g, want bf16 rounding (above 1e-5, below %g)", l.Step, l.ProbeGap, inplace.ProbeTol)
		}
		if !(l.LogpGap > 1e-5) || !(l.LogpGapMax >= l.LogpGap) || !(l.RolloutKL > 0) || !(l.ISWeight.Mean > 0) {
			t.Errorf("step %d turn %d: rollout gap mean %g max %g, KL %g, IS weight %+v: want a bf16 gap, reported and weighted",
				l.Step, l.Turn, l.LogpGap, l.LogpGapMax, l.RolloutKL, l.ISWeight)
		}
	}
	ck, err := LatestCheckpoint(inplace.Out)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]gguf.GGMLType{
		filepath.Join(inplace.Out, "sync", "agent-0", "model.gguf"): gguf.TypeBF16,
		filepath.Join(AgentCheckpointDir(ck, 0), "model.gguf"):      gguf.TypeF32,
	} {
		g, err := gguf.OpenGGUF(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range g.Tensors {
			if len(ti.Dims) == 2 && ti.Type != want {
				t.Errorf("%s: matrix %s is %v, want %v", path, ti.Name, ti.Type, want)
				break
			}
		}
		g.Close()
	}
}
