package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/run"
)

// Two umad debate processes on one --out both ran, writing every problem twice: the second
// now stops at once, naming the first one's PID.
func TestDebateRunDirIsLocked(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	gguf := testmodel.GGUF(t, "qwen2")
	args := []string{"debate", "--agent", gguf, "--synthetic", "500", "-k", "2", "--turns", "2", "--max-tokens", "32",
		"--prompt-limit", "256", "--threads", "1", "--out", out}
	first := umadProcess(t, 0, args...)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Wait()
	defer first.Process.Kill()
	lock := filepath.Join(out, runlock.File)
	pid := strconv.Itoa(first.Process.Pid)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(lock); strings.TrimSpace(string(b)) == pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first debate did not lock its run directory")
		}
	}
	_, _, err := runApp(t, args...)
	if err == nil || !strings.Contains(err.Error(), "in use by another umad process (pid "+pid+")") {
		t.Fatalf("second debate: %v, want an error naming pid %s", err, pid)
	}
}

// train and sft refuse an output another process holds; the lock here is this test's own.
func TestTrainAndSFTOutputsAreLocked(t *testing.T) {
	hf := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	dir := filepath.Join(t.TempDir(), "run")
	l, err := runlock.Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	want := "in use by another umad process (pid " + strconv.Itoa(os.Getpid()) + ")"
	if _, _, err := runApp(t, trainArgs(t, dir, "1")...); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("train: %v, want %q", err, want)
	}
	sftOut := filepath.Join(t.TempDir(), "sft")
	sl, err := (&run.SFT{Out: sftOut}).Claim()
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Release()
	if _, _, err := runApp(t, "sft", "--model", hf, "--synthetic", "4", "--out", sftOut); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("sft: %v, want %q", err, want)
	}
}

// brokenGGUF writes a file with a GGUF's magic and nothing after it: a model that does
// not load.
func brokenGGUF(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "broken.gguf")
	if err := os.WriteFile(path, []byte("GGUF but not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A run that fails at start (a model that does not load) leaves nothing behind, so the
// corrected command runs in the same directory.
func TestFailedStartLeavesNoRun(t *testing.T) {
	broken := brokenGGUF(t)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"debate", "--synthetic", "2", "-k", "1", "--turns", "1", "--max-tokens", "4", "--prompt-limit", "256", "--out", out}
	if _, _, err := runApp(t, append(args, "--agent", broken)...); err == nil {
		t.Fatal("a debate with a broken model started")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the failed debate left %s (%v)", out, err)
	}
	if _, stderr, err := runApp(t, append(args, "--agent", testmodel.GGUF(t, "qwen2"))...); err != nil {
		t.Fatalf("the corrected debate: %v\n%s", err, stderr)
	}

	hf := t.TempDir()
	src := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		if e.Name() == "model.safetensors" {
			b = b[:len(b)/2] // truncated weights: found, but they do not load
		}
		os.WriteFile(filepath.Join(hf, e.Name()), b, 0o644)
	}
	run := filepath.Join(t.TempDir(), "train")
	targs := trainArgs(t, run, "1")
	targs[2] = hf
	if _, _, err := runApp(t, targs...); err == nil {
		t.Fatal("a training run with truncated weights started")
	}
	if _, err := os.Stat(run); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(run)
		t.Errorf("the failed training left %s with %d entries", run, len(entries))
	}
}
