package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/envreport"
)

// umad env reports what a bug report needs; on this machine (no GPU) that is the CPU device,
// the plugin's libtorch without CUDA, and no layers offloaded by default.
func TestEnvReport(t *testing.T) {
	t.Setenv(engine.BackendsEnv, t.TempDir())
	out, _, err := runApp(t, "env", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r envreport.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("umad env --json: %v\n%s", err, out)
	}
	if len(r.Devices) == 0 || r.Devices[0].Kind != "cpu" || r.Devices[0].TotalBytes == 0 {
		t.Errorf("devices %+v: want the CPU with its memory", r.Devices)
	}
	if !strings.Contains(r.CPUFeatures, "CPU") {
		t.Errorf("cpu features %q", r.CPUFeatures)
	}
	if r.Torch.Error != "" || r.Torch.Version == "" {
		t.Errorf("libtorch: %+v", r.Torch)
	}
	if _, err := os.Stat("/dev/nvidia0"); (err != nil && r.Torch.GPUs != 0) || r.Torch.CUDA != (r.Torch.GPUs > 0) || (r.Torch.GPUs > 0 && !r.Torch.Built) {
		t.Errorf("libtorch's GPUs: %+v", r.Torch)
	}
	if r.Threads.LogicalCPUs < 1 || r.Threads.LlamaDefault < 1 {
		t.Errorf("threads %+v", r.Threads)
	}
	if _, err := os.Stat("/dev/nvidia0"); err != nil && r.Threads.DefaultGPULayers != 0 {
		t.Errorf("no GPU here, yet --gpu-layers defaults to %d", r.Threads.DefaultGPULayers)
	}
	text, _, err := runApp(t, "env")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"llama.cpp", "device    CPU", "libtorch  " + r.Torch.Version, "threads"} {
		if !strings.Contains(text, want) {
			t.Errorf("umad env does not say %q:\n%s", want, text)
		}
	}
}

// A backend library that cannot be used costs one warning line, and umad runs on the CPU.
func TestUnusableBackendWarnsOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "libggml-cuda.so"), []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := umadProcess(t, 0, "env")
	cmd.Env = append(cmd.Env, engine.BackendsEnv+"="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("umad env: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "GPU backend not used") || !strings.Contains(lines[0], dir) {
		t.Errorf("stderr: want one warning naming the library, got\n%s", stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "not used: ") || !strings.Contains(out, "device    CPU") {
		t.Errorf("umad env does not report the unused library and the CPU:\n%s", out)
	}
}
