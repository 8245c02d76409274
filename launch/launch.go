// Package launch runs several processes of one command, torchrun's way: a launcher starts
// N ranks of the same command on this machine (and with M machines, each runs its share of
// M x N ranks); a rank is the same binary with RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, as torchrun sets them, so
// `torchrun --no-python umad train ...` works too, and so does `srun umad train ...`
// (slurm.go). The ranks of a one-machine job meet
// through a file only they can reach (storeFileEnv); with several machines rank 0 hosts a
// TCP store (rendezvous.go).
package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/umad-dev/umad/cgo/torch"
)

// ErrInterrupted is the error of a command stopped by Ctrl-C (or SIGTERM), in a rank or
// in the process itself: the CLI reports it with exit status 130.
var ErrInterrupted = errors.New("interrupted")

// Variables the launcher gives its ranks beside torchrun's: its process id, by which a rank
// tells the launcher's start from an inherited RANK (OwnRank), and the rendezvous file of a
// one-machine job, in a directory only this user reaches.
const (
	launcherEnv  = "UMAD_LAUNCHER_PID"
	storeFileEnv = "UMAD_RENDEZVOUS_FILE"
)

// OwnRank reports whether this process is a rank that umad's launcher started (its parent),
// rather than one whose RANK came from torchrun or a job system.
func OwnRank() bool { return os.Getenv(launcherEnv) == strconv.Itoa(os.Getppid()) }

// Spec is this process's place in a multi-process job.
type Spec struct {
	Rank, World, LocalRank, LocalWorld int
	Addr                               string
	Port                               int
	// StoreFile is the rendezvous file of a one-machine job (torch.GroupOptions).
	StoreFile string
	Timeout   time.Duration
	Backend   torch.Backend
	// Command is the command line the ranks run, after the executable; nil is this
	// process's own (a command run inside another, as umad experiment runs its cells, is not).
	Command []string
}

// Multi reports whether the job has more than one rank.
func (d Spec) Multi() bool { return d.World > 1 }

// Options are the job's shape as the command line gives it (the flags --nproc, --nnodes,
// --node-rank, --master-addr, --master-port, --dist-timeout and --dist-backend).
type Options struct {
	// Group says the ranks form a process group (train); without one (debate) only
	// NProc and Timeout count.
	Group                   bool
	NProc, NNodes, NodeRank int
	MasterAddr              string
	MasterAddrSet           bool // given explicitly: several machines need it
	MasterPort              int
	Timeout                 time.Duration
	Backend                 string
}

// Resolve reads the job's shape: torchrun's environment when RANK is set (this is a
// rank), else srun's when srun started this process (slurm.go; with --nproc, srun's tasks
// are the nodes), else the options (this may be a launcher).
func Resolve(o Options) (d Spec, isRank bool, err error) {
	if o.Group {
		if d.Backend, err = torch.ParseBackend(o.Backend); err != nil {
			return d, false, fmt.Errorf("--dist-backend: %w", err)
		}
	}
	if d.Timeout = o.Timeout; d.Timeout <= 0 {
		return d, false, errors.New("--dist-timeout must be positive")
	}
	// torchrun's variables win over srun's: torchrun run as an srun task (one per node)
	// gives its ranks RANK, while SLURM_PROCID is still the task's.
	if os.Getenv("RANK") != "" {
		d, err = fromEnv(d)
		return d, err == nil, err
	}
	if underSrun() {
		if o.NProc <= 1 {
			d, err = fromSlurm(d, o)
			return d, err == nil, err
		}
		if o, err = srunNodes(o); err != nil { // each task launches its node's ranks
			return d, false, err
		}
	}
	if !o.Group {
		o.NNodes, o.NodeRank = 1, 0
	}
	switch {
	case o.NProc < 1 || o.NProc > 1024:
		return d, false, fmt.Errorf("--nproc must be in 1..1024, got %d", o.NProc)
	case o.NNodes < 1 || o.NNodes > 4096:
		return d, false, fmt.Errorf("--nnodes must be in 1..4096, got %d", o.NNodes)
	case o.NodeRank < 0 || o.NodeRank >= o.NNodes:
		return d, false, fmt.Errorf("--node-rank %d is outside --nnodes %d", o.NodeRank, o.NNodes)
	case o.NNodes > 1 && !o.MasterAddrSet:
		return d, false, errors.New("--nnodes > 1 needs --master-addr: the address of node 0 that the other machines reach")
	}
	d = Spec{Rank: o.NodeRank * o.NProc, World: o.NProc * o.NNodes, LocalWorld: o.NProc, Addr: o.MasterAddr, Port: o.MasterPort,
		Timeout: d.Timeout, Backend: d.Backend}
	if o.NNodes > 1 && (d.Port < 1 || d.Port > 65535) {
		return d, false, fmt.Errorf("--master-port must be in 1..65535, got %d", d.Port)
	}
	return d, false, nil
}

// fromEnv completes d from torchrun's variables.
func fromEnv(d Spec) (Spec, error) {
	env := func(k string, def int) (int, error) {
		v := os.Getenv(k)
		if v == "" {
			if def >= 0 {
				return def, nil
			}
			return 0, fmt.Errorf("RANK is set but %s is not", k)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q is not a count", k, v)
		}
		return n, nil
	}
	var err error
	if d.Rank, err = env("RANK", -1); err == nil {
		d.World, err = env("WORLD_SIZE", -1)
	}
	if err == nil {
		d.LocalRank, err = env("LOCAL_RANK", 0)
	}
	if err == nil {
		d.LocalWorld, err = env("LOCAL_WORLD_SIZE", 1)
	}
	if err == nil {
		d.Port, err = env("MASTER_PORT", 29500)
	}
	if err != nil {
		return d, err
	}
	if d.Rank >= d.World {
		return d, fmt.Errorf("RANK %d is outside WORLD_SIZE %d", d.Rank, d.World)
	}
	if d.Addr = os.Getenv("MASTER_ADDR"); d.Addr == "" {
		d.Addr = "127.0.0.1"
	}
	if OwnRank() {
		d.StoreFile = os.Getenv(storeFileEnv)
	}
	return d, nil
}

// Group runs this machine's ranks of a job whose ranks form a process group, and waits for
// them; a one-machine job's ranks meet through a private rendezvous file.
func Group(d Spec, out Output) error {
	if d.LocalWorld == d.World { // one machine: no network listener for the rendezvous
		dir, err := os.MkdirTemp("", "umad-rendezvous-")
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		defer os.RemoveAll(dir)
		d.StoreFile = filepath.Join(dir, "store")
	}
	return Start(d, 0, out)
}

// ExitCode is the exit status of a process that ended with err, or -1.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
