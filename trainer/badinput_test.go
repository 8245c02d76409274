package trainer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/trainspec"
)

// checkStopped asserts that a run failed with one clear line containing every part of
// want, and left its checkpoints as they were: latest names wantLatest ("" for none), and
// no temporary directory or newer checkpoint is left behind.
func checkStopped(t *testing.T, run string, err error, wantLatest string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("the run succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("the error spans lines: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
	ck, lerr := LatestCheckpoint(run)
	if got := filepath.Base(ck); lerr != nil || ck == "" && wantLatest != "" || ck != "" && got != wantLatest {
		t.Errorf("latest checkpoint %q (%v), want %q", ck, lerr, wantLatest)
	}
	entries, _ := os.ReadDir(filepath.Join(run, CheckpointsDir))
	for _, e := range entries {
		if n := e.Name(); n != LatestFile && n != wantLatest {
			t.Errorf("left behind in checkpoints/: %s", n)
		}
	}
	filepath.WalkDir(run, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// copyHF copies an HF model directory's files into a new directory.
func copyHF(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	files, err := model.ReadFiles(src, append([]string{"config.json", "model.safetensors"}, model.TokenizerFiles...))
	if err == nil {
		err = model.WriteFiles(dst, files)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// truncate cuts a file to half its size, as a crash or a full disk outside our atomic
// writes would leave it.
func truncate(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// An agent whose model cannot load stops the run before anything is written, with one
// line naming the agent and the file; a checkpoint damaged on disk stops a resume the
// same way and stays the latest (nothing newer is made from it).
func TestUnloadableAgent(t *testing.T) {
	rt := torchtest.Open(t)
	good := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	missing := filepath.Join(t.TempDir(), "no-such-model")
	corrupt := copyHF(t, good)
	truncate(t, filepath.Join(corrupt, "model.safetensors"))
	for _, tc := range []struct {
		why, dir string
		want     []string
	}{
		{"missing directory", missing, []string{"agent 0 (a0)", filepath.Join(missing, "config.json"), "no such file"}},
		{"truncated weights", corrupt, []string{"agent 0 (a0)", corrupt, "model.safetensors", "truncated"}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			cfg := demoConfig(t, "grpo", []string{tc.dir}, 1)
			checkStopped(t, cfg.Out, Run(context.Background(), cfg, Live{Torch: rt}), "", tc.want...)
		})
	}

	t.Run("damaged checkpoint", func(t *testing.T) {
		cfg := demoConfig(t, "grpo", []string{good}, 1)
		cfg.ValProblems = nil
		if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
			t.Fatal(err)
		}
		ck, _ := LatestCheckpoint(cfg.Out)
		weights := filepath.Join(AgentCheckpointDir(ck, 0), "model.safetensors")
		truncate(t, weights)
		cfg.Steps = 2
		checkStopped(t, cfg.Out, Run(context.Background(), cfg, Live{Torch: rt}), "step-000001", "agent 0 (a0)", AgentCheckpointDir(ck, 0), "truncated")
	})
}

// Problems the trainer cannot use stop the run at once with one line.
func TestNoUsableProblems(t *testing.T) {
	rt := torchtest.Open(t)
	good := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	for _, tc := range []struct {
		why  string
		n    int
		want string
	}{
		{"none", 0, "no training problems"},
		{"fewer than a batch", 3, "3 problems are fewer than one batch of 16"},
	} {
		cfg := demoConfig(t, "grpo", []string{good}, 1)
		cfg.Problems = cfg.Problems[:tc.n]
		checkStopped(t, cfg.Out, Run(context.Background(), cfg, Live{Torch: rt}), "", tc.want)
	}
}

// A learning rate that blows the weights up stops the run at the step it happens, with
// the last good checkpoint still the latest, and a run with a sane rate resumes from it.
//
// What happens (tiny qwen2, after one good step): at 1e30 the first optimizer step of
// step 2 makes the weights non-finite, the next mini-batch's loss is NaN and the trainer
// stops on it. At 1e8 the loss stays finite through step 2 but the weights do not: the
// sync's probe gets NaN log-probs, which stops the run whether the probe check is on or
// off. Either way nothing is checkpointed from the diverged weights. The plugin's own
// guard (a non-finite gradient norm skips the optimizer step) does not fire here: the
// gradients stay finite until the loss is not.
func TestDivergenceKeepsLastGoodCheckpoint(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2") // a fresh model has no advantages, so no gradient
	cfg := demoConfig(t, "grpo", []string{start}, 1)
	cfg.ValProblems, cfg.SaveEvery = nil, 1
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	sane := cfg.Opt.LR
	for _, tc := range []struct {
		lr, probeTol float64
		want         []string
	}{
		{1e30, 1e-4, []string{"step 2", "policy loss is NaN", "lower the learning rate"}},
		{1e8, 1e-4, []string{"step 2", "log-probs are NaN", "weights diverged", "lower the learning rate"}},
		{1e8, 0, []string{"step 2", "log-probs are NaN", "weights diverged", "lower the learning rate"}},
	} {
		cfg.Steps, cfg.Opt.LR, cfg.ProbeTol = 3, tc.lr, tc.probeTol
		checkStopped(t, cfg.Out, Run(context.Background(), cfg, Live{Torch: rt}), "step-000001", tc.want...)
	}
	cfg.Steps, cfg.Opt.LR, cfg.ProbeTol = 2, sane, 1e-4
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatalf("resume with a sane learning rate: %v", err)
	}
	train, _ := readMetrics(t, cfg.Out)
	if len(train) != 2 || train[0].Step != 1 || train[1].Step != 2 {
		t.Errorf("%d metrics lines after the resume, want steps 1 and 2 once each", len(train))
	}
}

// A disk that fills up while a checkpoint is written fails the run with an error naming
// the checkpoint; latest still names the previous one, no temporary directory is left,
// and once there is room again the same run resumes from that checkpoint.
//
// The disk is real: a small tmpfs mounted for the test (root can; CI runs as root), so
// the error is the kernel's ENOSPC from wherever the writes happen to hit it, not a fault
// injected at a place chosen in advance.
func TestDiskFullDuringCheckpoint(t *testing.T) {
	rt := torchtest.Open(t)
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64m"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs for the full-disk test: %v", err)
		}
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })

	cfg := demoConfig(t, "grpo", []string{filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")}, 1)
	cfg.ValProblems, cfg.SaveEvery, cfg.Out = nil, 1, filepath.Join(mnt, "run")
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	// Leave room for half a checkpoint: the step's weight sync still fits (it replaces a
	// safetensors file and then a GGUF, each about a quarter of a checkpoint), the next
	// checkpoint does not (it fails on the optimizer state, half of one).
	ck, _ := LatestCheckpoint(cfg.Out)
	ballast := filepath.Join(mnt, "ballast")
	fill(t, ballast, mnt, dirSize(t, ck)/2)

	cfg.Steps = 2
	err := Run(context.Background(), cfg, Live{Torch: rt})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("error %v, want ENOSPC", err)
	}
	checkStopped(t, cfg.Out, err, "step-000001", "checkpoint "+filepath.Join(cfg.Out, CheckpointsDir, "step-000002"), "no space left on device")

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatalf("resume after freeing space: %v", err)
	}
	if ck, _ := LatestCheckpoint(cfg.Out); filepath.Base(ck) != "step-000002" {
		t.Errorf("after the resume the latest checkpoint is %s, want step-000002", ck)
	}
	train, _ := readMetrics(t, cfg.Out)
	if len(train) != 2 || train[0].Step != 1 || train[1].Step != 2 {
		t.Errorf("%d metrics lines after the resume, want steps 1 and 2 once each", len(train))
	}
}

// dirSize is the bytes of the files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fill allocates a file that leaves about free bytes on the filesystem of dir.
func fill(t *testing.T, path, dir string, free int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	size := int64(st.Bavail)*st.Bsize - free
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatal(err)
	}
}

// A LoRA scale whose gradients overflow float32 makes the plugin skip every optimizer step
// (the update's own guard). The step's metrics count the skipped steps and average only
// finite gradient norms: a non-finite one failed the metrics line ("metrics: json:
// unsupported value: +Inf" after a step, issue 28).
func TestSkippedStepsAreLogged(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2") // a fresh model has no advantages, so no gradient
	cfg := demoConfig(t, "grpo", []string{start}, 1)
	cfg.ValProblems = nil
	cfg.LoRA = trainspec.LoRA{Rank: 4, Alpha: 1e30, Targets: trainspec.LoRATargets}
	cfg.Opt.LR = 1e-31 // lr x alpha/rank is small: only the gradients overflow
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	train, _ := readMetrics(t, cfg.Out)
	if len(train) != 1 || train[0].SkippedSteps == 0 || train[0].GradNorm != 0 {
		t.Fatalf("metrics %+v; want one line with skipped steps and no gradient norm", train)
	}
}
