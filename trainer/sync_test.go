package trainer

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/trainlog"
)

// Both weight-sync modes give llama.cpp the same weights, so the same run logs the same
// metrics with either: rollouts, rewards, updates, probe gaps and validation.
func TestSyncModesAgree(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	file, inplace := syncRun(t, rt, start, SyncFile, torch.LoRA{}), syncRun(t, rt, start, SyncInPlace, torch.LoRA{})
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
		l := torch.LoRA{Rank: 4, Alpha: 8, Targets: []string{"q", "k", "v", "o", "gate", "up", "down"}, BaseBF16: bf16}
		file, adapter := syncRun(t, rt, start, SyncFile, l), syncRun(t, rt, start, SyncInPlace, l)
		if _, err := os.Stat(filepath.Join(adapter.Out, "sync", "agent-0", AdapterGGUF)); err != nil {
			t.Errorf("bf16 base %v: the in-place LoRA run wrote no adapter GGUF: %v", bf16, err)
		}
		compareSyncRuns(t, file, adapter, 2e-6)
	}
}

// syncRun trains 2 steps of a one-agent GRPO run from start with the sync mode and LoRA.
func syncRun(t *testing.T, rt *torch.Runtime, start string, mode SyncMode, l torch.LoRA) Config {
	t.Helper()
	cfg := demoConfig(t, "grpo", []string{start}, 2)
	cfg.ValProblems, cfg.Sync, cfg.LoRA = cfg.ValProblems[:8], mode, l
	if l.Rank > 0 {
		cfg.Opt.LR = 5e-3
	}
	if err := Run(context.Background(), rt, cfg); err != nil {
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
