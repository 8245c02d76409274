package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainer"
)

// A GPU the plugin cannot use, asked of train, sft or score, fails in one line naming the
// flag and, on a libtorch without CUDA (Debian's), what to do; nothing is written. On a
// CUDA build the GPU one past the last is asked for instead. A bad --dtype or device name
// fails the same way.
func TestTrainDeviceErrors(t *testing.T) {
	rt := torchtest.Open(t)
	gpus, built := rt.CUDADevices()
	gpu := fmt.Sprintf("cuda:%d", gpus)
	want := gpu + " requested, but "
	if !built {
		want += "the torch plugin was built against libtorch " + rt.TorchVersion() + " without CUDA: build it against a CUDA PyTorch (see kernels/README.md)"
	}
	tiny := testmodel.Tiny(t, "qwen2")
	hf := filepath.Join(tiny, "hf")
	in := writeLines(t, `{"prompt_tokens":[1,2],"response_tokens":[3]}`)
	plugin := []string{"--torch-plugin", rt.Path()}
	train := func(extra ...string) []string {
		return append(trainArgs(t, filepath.Join(t.TempDir(), "run"), "1", plugin...), extra...)
	}
	sft := func(extra ...string) []string {
		return append([]string{"sft", "--model", hf, "--synthetic", "2", "--out", filepath.Join(t.TempDir(), "sft")}, append(plugin, extra...)...)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{train("--train-device", gpu), []string{"--train-device: ", want}},
		{sft("--train-device", gpu), []string{"--train-device: ", want}},
		{append([]string{"score", "--model", hf, "--in", in, "--train-device", gpu}, plugin...), []string{"--train-device: ", want}},
		{train("--dtype", "fp16"), []string{"--dtype", `"fp16"`, "f32 or bf16"}},
		{sft("--dtype", "fp16"), []string{"--dtype", `"fp16"`, "f32 or bf16"}},
		{train("--train-device", "gpu0"), []string{"--train-device", "cpu, cuda, cuda:N or auto"}},
	} {
		cwd := t.TempDir()
		cmd := umadProcess(t, 0, c.args...)
		cmd.Dir = cwd
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		msg := strings.TrimSpace(stderr.String())
		if err == nil || strings.Count(msg, "\n") != 0 {
			t.Errorf("%q: %v, stderr %q: want a failure in one line", c.args, err, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q: %q does not say %q", c.args, msg, w)
			}
		}
		if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
			t.Errorf("%q wrote %d entries into the current directory", c.args, len(entries))
		}
	}
}

// --dtype bf16 reaches the memory plan (f32 masters, bf16 reference, LoRA base and
// activations) and config.json (with the bf16 probe tolerance); the run trains on the CPU
// with bf16 compute and resumes, at bf16 only. sft takes the same flags.
func TestTrainBF16(t *testing.T) {
	torchtest.Open(t)
	out := filepath.Join(t.TempDir(), "run")
	stdout, stderr, err := runApp(t, trainArgs(t, out, "1", "--dtype", "bf16", "--dry-run")...)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, stderr)
	}
	for _, w := range []string{"trainer weights (f32 masters, bf16 compute)", "reference model (bf16)"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("the bf16 plan lacks %q:\n%s", w, stdout)
		}
	}
	// With LoRA the base is frozen, so held in bf16 whatever the checkpoint's dtype.
	stdout, stderr, err = runApp(t, trainArgs(t, out, "1", "--dtype", "bf16", "--lora-rank", "4", "--dry-run")...)
	if err != nil {
		t.Fatalf("LoRA dry run: %v\n%s", err, stderr)
	}
	for _, w := range []string{"base weights (bf16, frozen)", "LoRA adapters (rank 4, f32)"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("the bf16 LoRA plan lacks %q:\n%s", w, stdout)
		}
	}
	if _, stderr, err := runApp(t, trainArgs(t, out, "1", "--dtype", "bf16", "--val-synthetic", "0")...); err != nil {
		t.Fatalf("train --dtype bf16: %v\n%s", err, stderr)
	}
	var rc run.TrainSettings
	if b, err := os.ReadFile(filepath.Join(out, "config.json")); err != nil || json.Unmarshal(b, &rc) != nil {
		t.Fatalf("config.json: %v", err)
	}
	if rc.Trainer.DType != "bf16" || rc.Trainer.ProbeTol != run.ProbeTolBF16 {
		t.Errorf("config.json records dtype %q, probe tolerance %g; want bf16 and %g", rc.Trainer.DType, rc.Trainer.ProbeTol, run.ProbeTolBF16)
	}
	train, _ := readRun(t, out)
	if len(train) != 1 || !(train[0].ProbeGap > 0) {
		t.Errorf("metrics %+v: want one step with the bf16 probe gap", train)
	}
	if _, _, err := runApp(t, trainArgs(t, out, "2", "--val-synthetic", "0", "--resume")...); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("resume at f32 of a bf16 run: %v, want a refusal", err)
	}
	if _, stderr, err := runApp(t, trainArgs(t, out, "2", "--dtype", "bf16", "--val-synthetic", "0", "--resume")...); err != nil {
		t.Fatalf("resume --dtype bf16: %v\n%s", err, stderr)
	}
	if ck, _ := trainer.LatestCheckpoint(out); filepath.Base(ck) != "step-000002" {
		t.Errorf("latest checkpoint %q, want step-000002", ck)
	}
	sft := filepath.Join(t.TempDir(), "sft")
	if _, stderr, err := runApp(t, "sft", "--model", filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"), "--synthetic", "4",
		"--epochs", "1", "--batch", "2", "--dtype", "bf16", "--train-device", "cpu", "--torch-threads", "1", "--out", sft); err != nil {
		t.Fatalf("sft --dtype bf16: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(sft, "model.gguf")); err != nil {
		t.Errorf("sft --dtype bf16 wrote no model: %v", err)
	}
}
