package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/trainspec"
)

// A run stopped after step 2 and resumed to step 3 writes each step's metrics once and
// continues from the checkpointed optimizer state; an interrupted context checkpoints the
// completed steps and reports ErrInterrupted.
func TestResumeAndInterrupt(t *testing.T) {
	rt := torchtest.Open(t)
	dir := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	cfg := demoConfig(t, "grpo", []string{dir}, 2)
	cfg.ValProblems, cfg.SaveEvery, cfg.KeepLast = nil, 1, 1
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	cfg.Steps = 3
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	train, _ := readMetrics(t, cfg.Out)
	var steps []int
	for _, l := range train {
		steps = append(steps, l.Step)
	}
	if len(steps) != 3 || steps[0] != 1 || steps[1] != 2 || steps[2] != 3 {
		t.Errorf("metrics steps %v, want [1 2 3]", steps)
	}
	// Optimizer steps carried over: step 3's AdamW counter continues from the checkpoint.
	ck, _ := LatestCheckpoint(cfg.Out)
	if filepath.Base(ck) != "step-000003" {
		t.Errorf("latest checkpoint %s, want step-000003", ck)
	}
	entries, _ := os.ReadDir(filepath.Join(cfg.Out, CheckpointsDir))
	if len(entries) != 2 { // keep 1 plus the latest pointer
		t.Errorf("checkpoint dir holds %d entries, want the newest checkpoint and latest", len(entries))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg.Steps = 5
	if err := Run(ctx, cfg, Live{Torch: rt}); !errors.Is(err, ErrInterrupted) {
		t.Errorf("cancelled run: %v, want ErrInterrupted", err)
	}
	if ck, _ := LatestCheckpoint(cfg.Out); filepath.Base(ck) != "step-000003" {
		t.Errorf("after an interrupt before any step the latest checkpoint is %s, want step-000003", ck)
	}
}

// cancelAt cancels a run's context when the trainer reports finishing the given step; the
// trainer then checkpoints that step and returns ErrInterrupted.
type cancelAt struct {
	prefix []byte
	cancel context.CancelFunc
}

func (c cancelAt) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, c.prefix) {
		c.cancel()
	}
	return len(p), nil
}

// Resuming is exact: a run stopped after step 2 (by a finished run of 2 steps, or by a
// cancelled context) and resumed to step 4 logs, for steps 3 and 4 and the final
// validation, what an uninterrupted 4-step run logs, and its step-4 checkpoint holds the
// same weights and optimizer state, byte for byte.
//
// Tolerance: every field is compared exactly except the timings, which measure the
// machine, and the fields computed from llama.cpp's log-probs: logp_gap (mean
// |rollout - trainer log-prob|), logp_gap_max, rollout_kl and the validation summary's nll
// and token_entropy.
// Nothing in a resume is approximate: the checkpoint holds the weights and both AdamW
// moments as the plugin's own float32 bytes plus the step counters, the reference is
// reloaded from the same files, batches and samples derive from (seed, step), and with one
// torch thread every reduction runs in the same order. But llama.cpp's logits move in the
// last bits with the composition of its batches, which depends on when the debate
// goroutine queues requests, so those fields differ between any two runs, resumed
// or not (measured: up to 1e-8 on values near 3e-7 and 9e-9 on values near 0.9). Each is
// a token mean of llama.cpp log-probs (or of |llama.cpp - trainer|), so two runs differ
// by at most the sum of their two rounding errors, about 2 x 6e-7 at F32 (docs/ARCHITECTURE.md
// section 4): the tolerance is 2e-6 absolute. The same wobble could flip a sampled token
// only where two candidates tie to 1e-7; 14 repeated 4-step runs (about 100k sampled
// tokens) never did. The trainer reads rollout log-probs only for truncated importance
// sampling (off here), so the weights stay exact. A gap anywhere else is a bug (lost
// optimizer state, a changed seed, a re-drawn batch), not noise; the control run at the
// end shows that losing the AdamW moments is visible.
//
// The stopped run is re-run with Steps 4 instead of 2; that is the same run only because
// the default constant learning rate does not depend on the step count (a cosine decay
// would); the cancelled run never changes Steps.
func TestResumeIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 16 tiny steps, about 20 s")
	}
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2") // a fresh model is never right: no advantages, no updates
	config := func(steps int) Config {
		cfg := demoConfig(t, "grpo", []string{start}, steps)
		cfg.ValProblems, cfg.ValEvery = cfg.ValProblems[:8], 0 // validate at step 0 and at the end
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
	if ck, _ := LatestCheckpoint(cancelled.Out); filepath.Base(ck) != "step-000002" {
		t.Fatalf("the interrupted run checkpointed %q, want step-000002", ck)
	}
	if err := Run(context.Background(), cancelled, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}

	trained := 0
	for _, l := range want {
		if l.Step > 2 {
			trained += l.OptimSteps
		}
	}
	if trained == 0 {
		t.Fatal("steps 3 and 4 took no optimizer step: the comparison would not see the optimizer state")
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{{"stopped after 2 steps", stopped}, {"cancelled after step 2", cancelled}} {
		got, gotVal := readMetrics(t, tc.cfg.Out)
		if len(got) != len(want) {
			t.Errorf("%s: %d training lines, want %d (each step once)", tc.name, len(got), len(want))
			continue
		}
		for i := range want {
			if want[i].Step <= 2 {
				continue
			}
			for _, d := range metricsDiff(t, want[i], got[i]) {
				t.Errorf("%s: step %d agent %d turn %d: %s", tc.name, want[i].Step, want[i].Agent, want[i].Turn, d)
			}
		}
		for _, f := range []string{"model.safetensors", hfmodel.OptimizerFile, "model.gguf"} {
			a := filepath.Join(AgentCheckpointDir(filepath.Join(whole.Out, CheckpointsDir, "step-000004"), 0), f)
			b := filepath.Join(AgentCheckpointDir(filepath.Join(tc.cfg.Out, CheckpointsDir, "step-000004"), 0), f)
			if !sameBytes(t, a, b) {
				t.Errorf("%s: the step-4 checkpoint's %s differs from the uninterrupted run's", tc.name, f)
			}
		}
		last, gotLast := wantVal[len(wantVal)-1], gotVal[len(gotVal)-1]
		if last.Step != 4 || gotLast.Step != 4 {
			t.Fatalf("%s: last validation at steps %d and %d, want 4", tc.name, last.Step, gotLast.Step)
		}
		for _, d := range metricsDiff(t, last, gotLast) {
			t.Errorf("%s: validation at step 4: %s", tc.name, d)
		}
	}

	// Control: the same resume with the wrong AdamW moments (step 1's in step 2's
	// checkpoint; a missing file is refused outright) must show up in the comparison.
	lost := config(2)
	lost.SaveEvery = 1
	if err := Run(context.Background(), lost, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	ck, _ := LatestCheckpoint(lost.Out)
	stale, err := os.ReadFile(filepath.Join(AgentCheckpointDir(filepath.Join(filepath.Dir(ck), "step-000001"), 0), hfmodel.OptimizerFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(AgentCheckpointDir(ck, 0), hfmodel.OptimizerFile), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	lost.Steps = 4
	if err := Run(context.Background(), lost, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	got, _ := readMetrics(t, lost.Out)
	if len(got) == len(want) && len(metricsDiff(t, want[len(want)-1], got[len(got)-1])) == 0 {
		t.Error("a resume with stale optimizer state logs the same step 4: the comparison cannot see it")
	}
}

// metricsDiff lists the fields in which two metrics lines differ, through their JSON
// form so that fields added to the log are compared too. Timings and throughput are
// left out: they measure the machine, not the run. tols add absolute tolerances by key
// pattern to noisyKeys'.
func metricsDiff(t *testing.T, a, b any, tols ...map[string]float64) []string {
	t.Helper()
	fa, fb := flatJSON(t, a), flatJSON(t, b)
	var diffs []string
	for k, va := range fa {
		vb, ok := fb[k]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: %v, missing in the other", k, va))
			continue
		}
		if x, isNum := va.(float64); isNum {
			y, _ := vb.(float64)
			tol := noisyKeys[pattern(k)]
			for _, m := range tols {
				tol = math.Max(tol, m[pattern(k)])
			}
			if !(math.Abs(x-y) <= tol) {
				diffs = append(diffs, fmt.Sprintf("%s: %v vs %v (gap %.3g)", k, x, y, math.Abs(x-y)))
			}
		} else if va != vb {
			diffs = append(diffs, fmt.Sprintf("%s: %v vs %v", k, va, vb))
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing, %v in the other", k, fb[k]))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// noisyKeys are the fields computed from llama.cpp's log-probs, which carry its
// batch-dependent rounding, with their absolute tolerance (see TestResumeIsExact).
var noisyKeys = map[string]float64{"logp_gap": 2e-6, "logp_gap_max": 2e-6, "rollout_kl": 2e-6, "summary.rows.*.nll": 2e-6, "summary.rows.*.token_entropy": 2e-6}

// pattern replaces the indices of a flatJSON key by *.
func pattern(key string) string {
	parts := strings.Split(key, ".")
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, ".")
}

// sameBytes reports whether two files hold the same bytes.
func sameBytes(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}

// timingKeys are the metrics fields that measure the machine.
var timingKeys = map[string]bool{"seconds": true, "rollout_tokens_per_s": true}

// flatJSON maps each leaf of v's JSON form to its value: "advantage.mean", "accuracy.0.1".
func flatJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var root any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	var walk func(prefix string, x any)
	walk = func(prefix string, x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				if timingKeys[k] {
					continue
				}
				walk(join(prefix, k), v)
			}
		case []any:
			for i, v := range x {
				walk(join(prefix, fmt.Sprint(i)), v)
			}
		default:
			out[prefix] = x
		}
	}
	walk("", root)
	return out
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// blockCheckpoints cancels a run when the trainer reports finishing the given step and
// puts a file where the checkpoints directory goes, so the interrupt's checkpoint fails.
type blockCheckpoints struct {
	cancelAt
	path string
}

func (b blockCheckpoints) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, b.prefix) {
		if err := os.WriteFile(b.path, nil, 0o644); err != nil {
			return 0, err
		}
	}
	return b.cancelAt.Write(p)
}

// An interrupt whose checkpoint fails is not reported as a clean stop: the error says which
// step was not saved and where a resume continues (issue 18, item 4).
func TestInterruptWithFailedCheckpoint(t *testing.T) {
	rt := torchtest.Open(t)
	dir := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	cfg := demoConfig(t, "grpo", []string{dir}, 3)
	cfg.ValProblems, cfg.SaveEvery = nil, 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := blockCheckpoints{cancelAt{[]byte("step 1/"), cancel}, filepath.Join(cfg.Out, CheckpointsDir)}
	err := Run(ctx, cfg, Live{Torch: rt, Progress: progress})
	if err == nil || errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), "step 1 was not saved") ||
		!strings.Contains(err.Error(), "continues after step 0") {
		t.Fatalf("interrupt with a failing checkpoint: %v; want an error naming the unsaved step", err)
	}
}

// A resume needs its state: a checkpoint without optimizer state is refused by name, and a
// lost latest pointer is recovered from the newest checkpoint instead of restarting from
// step 1 (issue 18, item 11).
func TestResumeWithMissingState(t *testing.T) {
	rt := torchtest.Open(t)
	dir := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	cfg := demoConfig(t, "grpo", []string{dir}, 2)
	cfg.ValProblems, cfg.SaveEvery, cfg.KeepLast = nil, 1, 2
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(cfg.Out, CheckpointsDir)
	if err := os.Remove(filepath.Join(root, LatestFile)); err != nil {
		t.Fatal(err)
	}
	cfg.Steps = 3
	var progress bytes.Buffer
	if err := Run(context.Background(), cfg, Live{Torch: rt, Progress: &progress}); err != nil {
		t.Fatal(err)
	}
	if p := progress.String(); strings.Contains(p, "step 1/") || !strings.Contains(p, "step 3/3") {
		t.Errorf("a resume without latest ran:\n%s\nwant step 3 alone, continuing from step 2's checkpoint", p)
	}

	ck, err := LatestCheckpoint(cfg.Out)
	if err != nil || filepath.Base(ck) != "step-000003" {
		t.Fatalf("latest checkpoint %q, %v; want step-000003", ck, err)
	}
	if err := os.Remove(filepath.Join(AgentCheckpointDir(ck, 0), hfmodel.OptimizerFile)); err != nil {
		t.Fatal(err)
	}
	cfg.Steps = 4
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err == nil || !strings.Contains(err.Error(), "no optimizer state") {
		t.Errorf("resume without optimizer state: %v, want an error naming it", err)
	}
}

// A LoRA run resumes exactly too: adapters, their AdamW moments, the step counters and the
// dropout masks (seeded by step) carry over, so steps 3 and 4 log the same and the step-4
// checkpoint's adapter, optimizer state and merged GGUF are byte-identical.
func TestLoRAResumeIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 8 tiny steps")
	}
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	config := func(steps int) Config {
		cfg := demoConfig(t, "grpo", []string{start}, steps)
		cfg.ValProblems, cfg.ValEvery = cfg.ValProblems[:8], 0
		cfg.Opt.LR = 5e-3
		cfg.LoRA = trainspec.LoRA{Rank: 4, Alpha: 8, Targets: []string{"q", "v", "down"}, Dropout: 0.1}
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
	// Both ran the adapter sync (the in-place default), the resumed one from a base GGUF
	// and the trained adapters: llama.cpp agrees with the plugin to F32 rounding.
	for _, l := range got {
		if !(l.ProbeGap <= 1e-5) {
			t.Errorf("resumed run, step %d: probe gap %g after the adapter sync, want <= 1e-5", l.Step, l.ProbeGap)
		}
	}
	for _, run := range []string{whole.Out, stopped.Out} {
		sync := filepath.Join(run, "sync", "agent-0")
		if _, err := os.Stat(filepath.Join(sync, AdapterGGUF)); err != nil {
			t.Errorf("no adapter sync: %v", err)
		}
		if _, err := os.Stat(filepath.Join(sync, "hf")); err == nil {
			t.Errorf("%s keeps the base's staging copy", sync)
		}
	}
	for _, f := range []string{peft.WeightsFile, hfmodel.OptimizerFile, "model.gguf"} {
		a := filepath.Join(AgentCheckpointDir(filepath.Join(whole.Out, CheckpointsDir, "step-000004"), 0), f)
		b := filepath.Join(AgentCheckpointDir(filepath.Join(stopped.Out, CheckpointsDir, "step-000004"), 0), f)
		if !sameBytes(t, a, b) {
			t.Errorf("the step-4 checkpoint's %s differs from the uninterrupted run's", f)
		}
	}
}

// wholeAndStopped runs config(4) straight through, and config(2) stopped after step 2 and
// resumed to step 4 (the same run while the learning rate does not depend on the step
// count): the two runs the resume tests compare.
func wholeAndStopped(t *testing.T, rt *torch.Runtime, config func(steps int) Config) (whole, stopped Config) {
	t.Helper()
	whole, stopped = config(4), config(2)
	for _, run := range []func() error{
		func() error { return Run(context.Background(), whole, Live{Torch: rt}) },
		func() error { return Run(context.Background(), stopped, Live{Torch: rt}) },
		func() error { stopped.Steps = 4; return Run(context.Background(), stopped, Live{Torch: rt}) },
	} {
		if err := run(); err != nil {
			t.Fatal(err)
		}
	}
	return whole, stopped
}
