package cli

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainlog"
)

// distTrainArgs is a 4-step grpo run of a warm-started tiny model over 2 ranks on this
// machine, checkpointed every step.
func distTrainArgs(start, out string, extra ...string) []string {
	args := []string{"train", "--agent", filepath.Join(start, "hf"), "--algo", "grpo", "--turns", "1",
		"--synthetic", "32", "--synthetic-terms", "2", "--synthetic-max", "2", "--batch", "4", "-g", "4", "--mini-batch", "2",
		"--max-tokens", "16", "--prompt-limit", "512", "--lr", "3e-3", "--val-synthetic", "4", "--steps", "4", "--save-every", "1",
		"--kv-type", "f32", "--flash-attn", "off", "--slots", "4", "--nproc", "2", "--dist-timeout", "5s", "--out", out}
	return append(args, extra...)
}

// warmStarted is a tiny model that learned the answer format (so rewards vary and steps
// have gradients).
func warmStarted(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sft")
	if _, stderr, err := runApp(t, "sft", "--model", filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"), "--synthetic", "64",
		"--synthetic-terms", "2", "--synthetic-max", "2", "--epochs", "4", "--lr", "3e-3", "--torch-threads", "1", "--out", out); err != nil {
		t.Fatalf("sft: %v\n%s", err, stderr)
	}
	return out
}

// rankPID finds the process of a rank among the launcher's children, waiting up to 10 s
// for the launcher to start it.
func rankPID(t *testing.T, launcher, rank int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(fields) < 2 || fields[1] != strconv.Itoa(launcher) {
				continue
			}
			env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			for _, kv := range bytes.Split(env, []byte{0}) {
				if string(kv) == "RANK="+strconv.Itoa(rank) {
					return pid
				}
			}
		}
	}
	t.Fatalf("no child of %d is rank %d", launcher, rank)
	return 0
}

// tcpListeners lists the addresses that process pid listens on over TCP, from its socket
// descriptors and its network namespace's /proc/net/tcp and tcp6.
func tcpListeners(t *testing.T, pid int) []netip.AddrPort {
	t.Helper()
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, _ := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []netip.AddrPort
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(proc, "net", table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// Fields: sl, local address, remote address, state (0A: LISTEN), ..., inode (the 10th).
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			host, port, _ := strings.Cut(f[1], ":")
			ip, err := hex.DecodeString(host)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+4 <= len(ip); i += 4 { // 32-bit words in host (little-endian) order
				slices.Reverse(ip[i : i+4])
			}
			addr, _ := netip.AddrFromSlice(ip)
			p, _ := strconv.ParseUint(port, 16, 16)
			out = append(out, netip.AddrPortFrom(addr.Unmap(), uint16(p)))
		}
	}
	return out
}

// The ranks of a one-machine job listen on no address but the loopback's: they meet
// through a file, not a TCP store (which libtorch 1.13 opens on every interface, also with
// --master-addr 127.0.0.1), and Gloo binds 127.0.0.1.
func TestTrainNprocListensOnLoopbackOnly(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	cmd, stderr := startUntilStep(t, trainArgs(t, out, "40", "--nproc", "2", "--master-addr", "127.0.0.1"), out, 1)
	var all []netip.AddrPort
	for rank := range 2 {
		all = append(all, tcpListeners(t, rankPID(t, cmd.Process.Pid, rank))...)
	}
	for _, a := range all {
		if !a.Addr().IsLoopback() {
			t.Errorf("a rank listens on %v", a)
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); exitCode(err) != 130 {
		t.Fatalf("interrupted launcher: %v\n%s", err, stderr)
	}
}

// A debate rank that hangs (stopped here) ends `debate --nproc 2` --dist-timeout after the
// other rank finished its share, with an error naming it (it waited forever, silently);
// the same command then resumes and finishes.
func TestDebateNprocHungRank(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"debate", "--agent", gguf, "--agent", gguf + ",seed=44", "--synthetic", "16", "-k", "2", "--turns", "2",
		"--max-tokens", "12", "--kv-type", "f32", "--flash-attn", "off", "--nproc", "2", "--dist-timeout", "3s", "--out", out}
	cmd := umadProcess(t, 0, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(rankPID(t, cmd.Process.Pid, 1), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	want := "rank 0 finished its share, but rank 1 still ran 3s later (--dist-timeout): hung?"
	if err := cmd.Wait(); exitCode(err) != 1 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("with rank 1 stopped: %v, want exit 1 and %q\n%s", err, want, stderr.String())
	}
	if took := time.Since(t0); took > time.Minute {
		t.Errorf("the hung rank ended the job after %v; --dist-timeout is 3s", took)
	}
	if code, stderr := runUmadProcess(t, 0, args...); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if recs := readRecords(t, filepath.Join(out, "seed-1", "rollouts.jsonl.zst")); len(recs) != 16 {
		t.Errorf("the resumed run holds %d debates, want 16", len(recs))
	}
}

// startUntilStep starts a run and returns once its metrics log has a line of step.
func startUntilStep(t *testing.T, args []string, out string, step int) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := umadProcess(t, 0, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if lines, _, err := trainlog.Read(filepath.Join(out, trainlog.File)); err == nil && len(lines) > 0 && lines[len(lines)-1].Step >= step {
			return cmd, &stderr
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	t.Fatalf("step %d never finished:\n%s", step, stderr.String())
	return nil, nil
}

// A rank killed mid-run ends the job at once, naming it; a rank that hangs ends it after
// --dist-timeout; --resume then finishes with the metrics and weights of an
// uninterrupted run, also under --shard 2 (ZeRO stage 2 takes its part of the
// checkpoint's moments, and its steps are the replicated ones bit for bit: each rank's two
// groups are a mini-batch of their own).
func TestTrainRankFailureAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three 4-step runs over 2 processes, about 30 s")
	}
	start := warmStarted(t)
	whole := filepath.Join(t.TempDir(), "whole")
	if code, stderr := runUmadProcess(t, 0, distTrainArgs(start, whole)...); code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, stderr)
	}

	killed := filepath.Join(t.TempDir(), "killed")
	cmd, stderr := startUntilStep(t, distTrainArgs(start, killed), killed, 2)
	if err := syscall.Kill(rankPID(t, cmd.Process.Pid, 1), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || !strings.Contains(stderr.String(), "rank 1 failed (signal: killed)") {
		t.Fatalf("after rank 1 was killed: %v\n%s", err, stderr)
	}

	hung := filepath.Join(t.TempDir(), "hung")
	cmd, stderr = startUntilStep(t, distTrainArgs(start, hung), hung, 1)
	if err := syscall.Kill(rankPID(t, cmd.Process.Pid, 1), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Wait(); !errors.As(err, &exit) || !strings.Contains(stderr.String(), "rank 0 failed") ||
		!strings.Contains(stderr.String(), "stopped ranks 1, which were still running") {
		t.Fatalf("after rank 1 hung: %v\n%s", err, stderr)
	}
	if took := time.Since(t0); took > time.Minute {
		t.Errorf("a hung rank ended the job after %v; --dist-timeout is 5s", took)
	}

	if code, stderr := runUmadProcess(t, 0, distTrainArgs(start, killed, "--resume", "--shard", "2")...); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	want, _ := readRun(t, whole)
	got, _ := readRun(t, killed)
	if len(got) != len(want) || want[len(want)-1].Step != 4 || want[len(want)-1].OptimSteps == 0 {
		t.Fatalf("%d metrics lines after the resume, uninterrupted %d (last: %+v)", len(got), len(want), want[len(want)-1])
	}
	w, g := want[len(want)-1], got[len(got)-1]
	w.Times, g.Times = trainlog.Times{}, trainlog.Times{}
	w.RolloutTokensPerSec, g.RolloutTokensPerSec = 0, 0
	for _, f := range []struct {
		name string
		w, g *float64
	}{{"log-prob gap", &w.LogpGap, &g.LogpGap}, {"largest log-prob gap", &w.LogpGapMax, &g.LogpGapMax}, {"rollout KL", &w.RolloutKL, &g.RolloutKL}} {
		if d := *f.g - *f.w; d > 2e-6 || d < -2e-6 { // llama.cpp's rounding, as in trainer.TestResumeIsExact
			t.Errorf("step 4's %s %g, uninterrupted %g", f.name, *f.g, *f.w)
		}
		*f.w, *f.g = 0, 0
	}
	if !reflect.DeepEqual(w, g) {
		t.Errorf("step 4 after the resume:\n%+v\nuninterrupted:\n%+v", g, w)
	}
	ck := func(run string) []byte {
		b, err := os.ReadFile(filepath.Join(trainer.AgentCheckpointDir(filepath.Join(run, trainer.CheckpointsDir, "step-000004"), 0), "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(ck(whole), ck(killed)) {
		t.Error("the resumed run's final weights differ from the uninterrupted run's")
	}
}

// `umad train --nproc 2 --shard 3 --grad-checkpoint`, as a user starts it, ends with the
// weights of the same run replicated (--shard 0), byte for byte: each rank's groups are a
// mini-batch of their own, so every stage computes one process's sums (issue 32).
func TestTrainShard3(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two 2-step runs over 2 processes, about 20 s")
	}
	start := warmStarted(t)
	weights := map[string][]byte{}
	for _, stage := range []string{"0", "3"} {
		out := filepath.Join(t.TempDir(), "stage"+stage)
		args := distTrainArgs(start, out, "--shard", stage, "--grad-checkpoint")
		args[slices.Index(args, "--steps")+1] = "2"
		if code, stderr := runUmadProcess(t, 0, args...); code != 0 {
			t.Fatalf("--shard %s: exit %d\n%s", stage, code, stderr)
		}
		b, err := os.ReadFile(filepath.Join(trainer.AgentCheckpointDir(filepath.Join(out, trainer.CheckpointsDir, "step-000002"), 0), "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		weights[stage] = b
	}
	if !bytes.Equal(weights["0"], weights["3"]) {
		t.Error("--shard 3's weights after 2 steps differ from --shard 0's")
	}
}

// `umad train --nproc 2 --agent-ranks 1,0` trains agent 0 on rank 1 and agent 1 on rank
// 0 alone; both agents end with the weights of the same run without agent groups, byte for
// byte (two ranks' gradient sums are one process's).
func TestTrainAgentRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two 2-step debates of two agents over 2 processes, about 40 s")
	}
	start := warmStarted(t)
	weights := map[string][][]byte{}
	for _, groups := range []string{"", "1,0"} {
		out := filepath.Join(t.TempDir(), "run")
		args := distTrainArgs(start, out, "--agent", filepath.Join(start, "hf"))
		args[slices.Index(args, "--steps")+1] = "2"
		args[slices.Index(args, "--algo")+1] = "umad"
		args[slices.Index(args, "--turns")+1] = "2"
		if groups != "" {
			args = append(args, "--agent-ranks", groups)
		}
		if code, stderr := runUmadProcess(t, 0, args...); code != 0 {
			t.Fatalf("--agent-ranks %q: exit %d\n%s", groups, code, stderr)
		}
		lines, _, err := trainlog.Read(filepath.Join(out, trainlog.File))
		if err != nil {
			t.Fatal(err)
		}
		stepped := map[int]bool{}
		for _, l := range lines {
			stepped[l.Agent] = stepped[l.Agent] || l.GradNorm > 0
		}
		if len(lines) != 2*2*2 || !stepped[0] || !stepped[1] {
			t.Fatalf("--agent-ranks %q: %d metrics lines (want 8), agents with a gradient step: %v", groups, len(lines), stepped)
		}
		for i := range 2 {
			b, err := os.ReadFile(filepath.Join(trainer.AgentCheckpointDir(filepath.Join(out, trainer.CheckpointsDir, "step-000002"), i), "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			weights[groups] = append(weights[groups], b)
		}
	}
	for i := range 2 {
		if !bytes.Equal(weights[""][i], weights["1,0"][i]) {
			t.Errorf("agent %d's weights after 2 steps with --agent-ranks 1,0 differ from those without", i)
		}
	}
}

// `umad debate --nproc 2` splits the problems over two processes and merges their
// rollouts into the one-process run's bytes, though each rank batches fewer sequences,
// with other --slots and threads: llama.cpp's logits do not depend on the batch
// (build.sh), and a finished seed's file is in problem order whatever the timing.
func TestDebateNprocMatchesOneProcess(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	args := func(out string) []string {
		return []string{"debate", "--agent", gguf, "--agent", gguf + ",seed=44", "--synthetic", "12", "-k", "3", "--turns", "2",
			"--max-tokens", "12", "--seeds", "1,2", "--out", out}
	}
	one, two := filepath.Join(t.TempDir(), "run"), filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runApp(t, append(args(one), "--threads", "2", "--slots", "16")...); err != nil {
		t.Fatalf("one process: %v\n%s", err, stderr)
	}
	if code, stderr := runUmadProcess(t, 0, append(args(two), "--nproc", "2", "--slots", "4")...); code != 0 {
		t.Fatalf("two processes: exit %d\n%s", code, stderr)
	}
	for _, seed := range []string{"seed-1", "seed-2"} {
		recs := readRecords(t, filepath.Join(two, seed, "rollouts.jsonl.zst"))
		if left, _ := filepath.Glob(filepath.Join(two, seed, "rollouts.rank-*")); len(recs) != 12 || len(left) > 0 {
			t.Errorf("%s: %d merged debates, rank files left: %v", seed, len(recs), left)
		}
	}
	for _, f := range []string{"seed-1/rollouts.jsonl.zst", "seed-2/rollouts.jsonl.zst", "report/summary.json", "report/problems.csv"} {
		a, errA := os.ReadFile(filepath.Join(one, f))
		b, errB := os.ReadFile(filepath.Join(two, f))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", f, errA, errB)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: one process (--slots 16, 2 threads) and two (--slots 4) differ", f)
		}
	}
}

// Multi-process settings that cannot work are refused before any rank starts.
func TestTrainDistFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nproc", "0"}, "--nproc must be in 1..1024"},
		{[]string{"--nproc", "2", "--nnodes", "2"}, "needs --master-addr"},
		{[]string{"--nproc", "2", "--nnodes", "2", "--node-rank", "2", "--master-addr", "10.0.0.1"}, "--node-rank 2 is outside --nnodes 2"},
		{[]string{"--nproc", "2", "--dist-backend", "mpi"}, `unknown backend "mpi"`},
		{[]string{"--nproc", "2", "--dist-timeout", "0s"}, "--dist-timeout must be positive"},
		{[]string{"--nproc", "2", "--dynamic-sampling"}, "--dynamic-sampling is not supported with several processes"},
		{[]string{"--nproc", "2", "--overlap", "1"}, "--overlap 1 is not supported with several processes"},
		{[]string{"--nproc", "8"}, "a batch of 4 problems cannot be split over 8 processes"},
	} {
		out := filepath.Join(t.TempDir(), "run")
		_, _, err := runApp(t, trainArgs(t, out, "1", tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: the refused run left %s", tc.args, out)
		}
	}
}

// Ctrl-C on the launcher reaches every rank: they stop after the same step, rank 0
// checkpoints it, the job exits as interrupted and no rank outlives the launcher.
func TestTrainNprocInterrupt(t *testing.T) {
	start := warmStarted(t)
	out := filepath.Join(t.TempDir(), "run")
	cmd, stderr := startUntilStep(t, distTrainArgs(start, out, "--steps", "40"), out, 1)
	ranks := []int{rankPID(t, cmd.Process.Pid, 0), rankPID(t, cmd.Process.Pid, 1)}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("interrupted launcher: %v, want exit 130\n%s", err, stderr)
	}
	for _, pid := range ranks {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("rank process %d outlived the launcher (%v)", pid, err)
		}
	}
	lines, _ := readRun(t, out)
	ck, err := trainer.LatestCheckpoint(out)
	if err != nil || len(lines) == 0 || filepath.Base(ck) != fmt.Sprintf("step-%06d", lines[len(lines)-1].Step) {
		t.Fatalf("latest checkpoint %q (%v) is not the last logged step\n%s", ck, err, stderr)
	}
}
