package trainer

import (
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/trainspec"
)

// A bf16 run (f32 masters and AdamW state, bf16 compute) resumes exactly: the masters and
// moments are what the checkpoint holds, so steps 3 and 4 after a stop at step 2 repeat the
// uninterrupted run's metrics and bytes. Its probe gap to llama.cpp (which runs the f32
// masters) is bf16 rounding: above f32's ~1e-6, within the bf16 default tolerance.
func TestBF16ResumeIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 8 tiny steps")
	}
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	config := func(steps int) Config {
		cfg := demoConfig(t, "grpo", []string{start}, steps)
		cfg.ValProblems, cfg.ValEvery = cfg.ValProblems[:8], 0
		cfg.DType, cfg.ProbeTol = trainspec.PrecisionBF16, 5e-2
		return cfg
	}
	whole, stopped := wholeAndStopped(t, rt, config)
	want, _ := readMetrics(t, whole.Out)
	got, _ := readMetrics(t, stopped.Out)
	if len(got) != len(want) {
		t.Fatalf("%d training lines, want %d", len(got), len(want))
	}
	trained := 0
	for i := range want {
		t.Logf("step %d: probe gap %.3g (bf16 trainer vs llama.cpp f32)", want[i].Step, want[i].ProbeGap)
		if !(want[i].ProbeGap > 1e-5 && want[i].ProbeGap < whole.ProbeTol) {
			t.Errorf("step %d: probe gap %g, want bf16 rounding (above 1e-5, below %g)", want[i].Step, want[i].ProbeGap, whole.ProbeTol)
		}
		if want[i].Step <= 2 {
			continue
		}
		trained += want[i].OptimSteps
		for _, d := range metricsDiff(t, want[i], got[i]) {
			t.Errorf("step %d: %s", want[i].Step, d)
		}
	}
	if trained == 0 {
		t.Fatal("steps 3 and 4 took no optimizer step: the comparison proves nothing")
	}
	ck := func(run string) string {
		return AgentCheckpointDir(filepath.Join(run, CheckpointsDir, "step-000004"), 0)
	}
	for _, f := range []string{"model.safetensors", hfmodel.OptimizerFile, "model.gguf"} {
		if !sameBytes(t, filepath.Join(ck(whole.Out), f), filepath.Join(ck(stopped.Out), f)) {
			t.Errorf("the step-4 checkpoint's %s differs from the uninterrupted run's", f)
		}
	}
	// The checkpoint holds the f32 masters, not bf16 weights.
	st, err := safetensors.Open(ck(whole.Out))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range st.Names() {
		if v, err := st.Tensor(name); err != nil || v.DType != safetensors.F32 {
			t.Fatalf("checkpoint tensor %s: %v, dtype %v; want the f32 masters", name, err, v.DType)
		}
	}
}
