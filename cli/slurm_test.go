package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainlog"
)

// freePort is a TCP port of 127.0.0.1 that nothing listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// trainedRun is what a 2-step run ends with: agent 0's weights at step 2 and its metrics
// lines, times (which vary) left out.
func trainedRun(t *testing.T, out string) ([]byte, []trainlog.StepMetrics) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(trainer.AgentCheckpointDir(filepath.Join(out, trainer.CheckpointsDir, "step-000002"), 0), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	lines, _, err := trainlog.Read(filepath.Join(out, trainlog.File))
	if err != nil {
		t.Fatal(err)
	}
	for i := range lines {
		lines[i].Times, lines[i].RolloutTokensPerSec = trainlog.Times{}, 0
		// The rollouts' log-probs carry llama.cpp's batch-dependent rounding (README, Debates).
		lines[i].LogpGap, lines[i].LogpGapMax, lines[i].RolloutKL, lines[i].ISWeight = 0, 0, 0, trainlog.Stats{}
	}
	return b, lines
}

// Two processes given srun's variables by hand (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
// SLURM_NODELIST, as `srun -n 2` gives its tasks) train as `--nproc 2` does: the same
// weights, byte for byte, and the same metrics. They meet through rank 0's TCP store on the
// node list's first host, 127.0.0.1.
func TestTrainSlurmMatchesNproc(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two 2-step runs over 2 processes, about 30 s")
	}
	start := warmStarted(t)
	runArgs := func(out string) []string {
		args := distTrainArgs(start, out, "--threads", "1", "--torch-threads", "1")
		args[slices.Index(args, "--steps")+1] = "2"
		return args
	}
	nproc := filepath.Join(t.TempDir(), "nproc")
	if code, stderr := runUmadProcess(t, 0, runArgs(nproc)...); code != 0 {
		t.Fatalf("--nproc 2: exit %d\n%s", code, stderr)
	}
	srun := filepath.Join(t.TempDir(), "srun")
	args := runArgs(srun)
	i := slices.Index(args, "--nproc")
	args = append(slices.Delete(args, i, i+2), "--master-port", strconv.Itoa(freePort(t)))
	stderrs := make([]bytes.Buffer, 2)
	var running []func() error
	for rank := range 2 {
		cmd := umadProcess(t, 0, args...)
		cmd.Env = append(cmd.Env, "SLURM_STEP_ID=0", "SLURM_PROCID="+strconv.Itoa(rank), "SLURM_NTASKS=2",
			"SLURM_LOCALID="+strconv.Itoa(rank), "SLURM_NODEID=0", "SLURM_STEP_TASKS_PER_NODE=2", "SLURM_NODELIST=127.0.0.1",
			"RANK=", "MASTER_ADDR=", "MASTER_PORT=")
		cmd.Stderr = &stderrs[rank]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		running = append(running, cmd.Wait)
	}
	for rank, wait := range running {
		if err := wait(); err != nil {
			t.Fatalf("srun rank %d: %v\n%s", rank, err, stderrs[rank].String())
		}
	}
	// Rank 1 was a rank of a 2-rank job: it wrote its own synced GGUFs, as one process would not.
	if _, err := os.Stat(filepath.Join(srun, "ranks", "1")); err != nil {
		t.Errorf("no rank 1 files: %v\n%s", err, stderrs[1].String())
	}
	wantW, wantM := trainedRun(t, nproc)
	gotW, gotM := trainedRun(t, srun)
	if !bytes.Equal(gotW, wantW) {
		t.Error("the srun ranks' weights after 2 steps differ from --nproc 2's")
	}
	if len(gotM) != 2 || !reflect.DeepEqual(gotM, wantM) {
		t.Errorf("metrics:\nsrun     %+v\n--nproc  %+v", gotM, wantM)
	}
}
