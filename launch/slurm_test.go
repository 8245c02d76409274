package launch

import (
	"strings"
	"testing"
	"time"
)

// setSlurm sets the variables srun gives task procid of ntasks, and clears torchrun's.
func setSlurm(t *testing.T, procid, ntasks, localid, nodeid, perNode, nodelist string) {
	t.Helper()
	for k, v := range map[string]string{"RANK": "", "MASTER_ADDR": "", "MASTER_PORT": "", "SLURM_STEP_ID": "0",
		"SLURM_PROCID": procid, "SLURM_NTASKS": ntasks, "SLURM_LOCALID": localid, "SLURM_NODEID": nodeid,
		"SLURM_STEP_TASKS_PER_NODE": perNode, "SLURM_TASKS_PER_NODE": "", "SLURM_STEP_NODELIST": "", "SLURM_NODELIST": nodelist} {
		t.Setenv(k, v)
	}
}

// TestResolveFromSlurm reads a rank's place from srun's variables: task 5 of 8 on the
// third node of "4(x1),2(x2)" is local rank 1 of 2, and rank 0's host is the node list's first.
func TestResolveFromSlurm(t *testing.T) {
	o := Options{Group: true, NProc: 1, NNodes: 1, MasterAddr: "127.0.0.1", MasterPort: 29400, Timeout: time.Minute, Backend: "gloo"}
	setSlurm(t, "7", "8", "1", "2", "4(x1),2(x2)", "gpu[007-009,12],login1")
	d, isRank, err := Resolve(o)
	if err != nil || !isRank || d.Rank != 7 || d.World != 8 || d.LocalRank != 1 || d.LocalWorld != 2 || d.Addr != "gpu007" || d.Port != 29400 || d.StoreFile != "" {
		t.Fatalf("Resolve = %+v, %v, %v", d, isRank, err)
	}
	// MASTER_ADDR and MASTER_PORT, when set, win over the node list and --master-port.
	t.Setenv("MASTER_ADDR", "10.1.1.1")
	t.Setenv("MASTER_PORT", "1234")
	if d, _, err := Resolve(o); err != nil || d.Addr != "10.1.1.1" || d.Port != 1234 {
		t.Errorf("with MASTER_ADDR/PORT: %+v, %v", d, err)
	}
	// torchrun's variables win over srun's (torchrun run as an srun task).
	t.Setenv("RANK", "3")
	t.Setenv("WORLD_SIZE", "16")
	if d, _, err := Resolve(o); err != nil || d.Rank != 3 || d.World != 16 {
		t.Errorf("RANK beside srun's variables: %+v, %v", d, err)
	}
}

// An sbatch script (no SLURM_STEP_ID) and srun's single task are no rank: umad there is a
// launcher, as without Slurm. --nproc with several tasks on a node is refused; so are bad
// values.
func TestSlurmNotARank(t *testing.T) {
	o := Options{Group: true, NProc: 2, NNodes: 1, MasterPort: 29500, Timeout: time.Minute, Backend: "gloo"}
	setSlurm(t, "0", "4", "0", "0", "4", "node1")
	t.Setenv("SLURM_STEP_ID", "")
	if d, isRank, err := Resolve(o); err != nil || isRank || d.World != 2 {
		t.Errorf("sbatch script: %+v, %v, %v", d, isRank, err)
	}
	setSlurm(t, "0", "1", "0", "0", "1", "node1")
	if d, isRank, err := Resolve(o); err != nil || isRank || d.World != 2 {
		t.Errorf("srun -n 1: %+v, %v, %v", d, isRank, err)
	}
	for _, tc := range []struct {
		env   []string
		nproc int
		want  string
	}{
		{[]string{"SLURM_NTASKS", "4"}, 2, "srun runs 4 tasks on this node: ask for --ntasks-per-node=1"},
		{[]string{"SLURM_PROCID", "4"}, 1, "outside SLURM_NTASKS 4"},
		{[]string{"SLURM_LOCALID", "x"}, 1, `SLURM_LOCALID="x" is not a count`},
		{[]string{"SLURM_STEP_TASKS_PER_NODE", "2(x1)", "SLURM_NODEID", "1"}, 1, "no entry for SLURM_NODEID 1"},
		{[]string{"SLURM_NODELIST", "node[1-"}, 1, "a [ without its ]"},
		{[]string{"SLURM_NODELIST", ""}, 1, "empty"},
	} {
		setSlurm(t, "1", "4", "1", "0", "4", "node[1-4]")
		for i := 0; i < len(tc.env); i += 2 {
			t.Setenv(tc.env[i], tc.env[i+1])
		}
		o.NProc = tc.nproc
		if _, _, err := Resolve(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
}

// TestFirstHost expands the first host of Slurm's host lists.
func TestFirstHost(t *testing.T) {
	for list, want := range map[string]string{
		"127.0.0.1":               "127.0.0.1",
		"node[01-04,07]":          "node01",
		"node[07,01-04]":          "node07",
		"a1,b[2-3]":               "a1",
		"rack[2-3]-n[009-010],x9": "rack2-n009",
		"gpu[5]-ib":               "gpu5-ib",
	} {
		if got, err := firstHost(list); err != nil || got != want {
			t.Errorf("firstHost(%q) = %q, %v; want %q", list, got, err, want)
		}
	}
	for _, bad := range []string{"", ",a", "n[a-b]", "n[1-2", "n]1["} {
		if got, err := firstHost(bad); err == nil {
			t.Errorf("firstHost(%q) = %q, accepted", bad, got)
		}
	}
}

// With --nproc, srun's tasks are the nodes (one per node): task 1 of 2 launches ranks 4-7
// of 8, meeting at the node list's first host over TCP.
func TestSlurmTasksAsNodes(t *testing.T) {
	setSlurm(t, "1", "2", "0", "1", "1(x2)", "gpu[1-2]")
	o := Options{Group: true, NProc: 4, NNodes: 1, MasterAddr: "127.0.0.1", MasterPort: 29500, Timeout: time.Minute, Backend: "gloo"}
	d, isRank, err := Resolve(o)
	if err != nil || isRank || d.Rank != 4 || d.World != 8 || d.LocalWorld != 4 || d.Addr != "gpu1" || d.Port != 29500 {
		t.Fatalf("Resolve = %+v, %v, %v", d, isRank, err)
	}
	o.NNodes = 2
	if _, _, err := Resolve(o); err == nil || !strings.Contains(err.Error(), "srun's tasks are the nodes") {
		t.Errorf("--nnodes under srun: %v", err)
	}
}
