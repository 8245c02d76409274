package trainer

import (
	"context"
	"testing"

	"github.com/umad-dev/umad/internal/torchtest"
)

// Both weight-sync modes give llama.cpp the same weights, so the same run logs the same
// metrics with either: rollouts, rewards, updates, probe gaps and validation.
func TestSyncModesAgree(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	run := func(mode SyncMode) Config {
		cfg := demoConfig(t, "grpo", []string{start}, 2)
		cfg.ValProblems, cfg.Sync = cfg.ValProblems[:8], mode
		if err := Run(context.Background(), rt, cfg); err != nil {
			t.Fatalf("sync %s: %v", mode, err)
		}
		return cfg
	}
	file, inplace := run(SyncFile), run(SyncInPlace)
	want, wantVal := readMetrics(t, file.Out)
	got, gotVal := readMetrics(t, inplace.Out)
	if len(got) != len(want) || len(gotVal) != len(wantVal) {
		t.Fatalf("in place: %d training and %d validation lines, by file %d and %d", len(got), len(gotVal), len(want), len(wantVal))
	}
	trained := 0
	for i := range want {
		trained += want[i].OptimSteps
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
