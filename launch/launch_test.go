package launch

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

// TestResolveFromOptions checks the launcher's reading of the flags: the ranks this machine
// runs, and the refusals of shapes that cannot work.
func TestResolveFromOptions(t *testing.T) {
	t.Setenv("RANK", "")
	t.Setenv("SLURM_STEP_ID", "") // not an srun task, also where the tests run under Slurm
	o := Options{Group: true, NProc: 2, NNodes: 3, NodeRank: 1, MasterAddr: "10.0.0.1", MasterAddrSet: true, MasterPort: 29500,
		Timeout: time.Minute, Backend: "gloo"}
	d, isRank, err := Resolve(o)
	if err != nil || isRank || d.Rank != 2 || d.World != 6 || d.LocalWorld != 2 || !d.Multi() {
		t.Fatalf("Resolve = %+v, %v, %v", d, isRank, err)
	}
	for _, bad := range []func(*Options){
		func(o *Options) { o.NProc = 0 },
		func(o *Options) { o.NodeRank = 3 },
		func(o *Options) { o.MasterAddrSet = false },
		func(o *Options) { o.MasterPort = 0 },
		func(o *Options) { o.Timeout = 0 },
		func(o *Options) { o.Backend = "mpi" },
	} {
		o2 := o
		bad(&o2)
		if _, _, err := Resolve(o2); err == nil {
			t.Errorf("Resolve(%+v) accepted", o2)
		}
	}
	// Without a process group, only --nproc counts.
	if d, _, err := Resolve(Options{NProc: 3, NNodes: 7, Timeout: time.Minute}); err != nil || d.World != 3 {
		t.Errorf("no group: %+v, %v", d, err)
	}
}

// TestResolveFromEnv reads a rank's place from torchrun's variables.
func TestResolveFromEnv(t *testing.T) {
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "4")
	t.Setenv("LOCAL_RANK", "1")
	t.Setenv("LOCAL_WORLD_SIZE", "2")
	t.Setenv("MASTER_ADDR", "")
	t.Setenv("MASTER_PORT", "")
	d, isRank, err := Resolve(Options{Timeout: time.Minute})
	if err != nil || !isRank || d.Rank != 1 || d.World != 4 || d.LocalWorld != 2 || d.Addr != "127.0.0.1" || d.Port != 29500 {
		t.Fatalf("Resolve = %+v, %v, %v", d, isRank, err)
	}
	t.Setenv("RANK", "4")
	if _, _, err := Resolve(Options{Timeout: time.Minute}); err == nil {
		t.Error("RANK outside WORLD_SIZE accepted")
	}
}

// TestLinesOrProgress keeps progress updates (\r) apart from lines, so that other ranks'
// progress can be left out.
func TestLinesOrProgress(t *testing.T) {
	sc := bufio.NewScanner(strings.NewReader("a\n1/2\r2/2\rb"))
	sc.Split(linesOrProgress)
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if want := []string{"a", "1/2\r", "2/2\r", "b"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}
