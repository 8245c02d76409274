package cli

// Several processes, torchrun's way: `--nproc N` makes this process a launcher that starts
// N ranks of the same command on this machine (and `--nnodes M --node-rank R` says which
// share of M x N ranks this machine runs); a rank is the same binary with RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, as torchrun sets them, so
// `torchrun --no-python umad train ...` works too. The ranks of a one-machine job meet through
// a file only they can reach (storeFileEnv); with several machines rank 0 hosts a TCP store.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
)

// distFlags are the multi-process flags of train and debate.
func distFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "nproc", Value: 1, Usage: "processes (ranks) on this machine: one per GPU on a GPU server; on CPUs they share the cores"},
		&ucli.IntFlag{Name: "nnodes", Value: 1, Usage: "machines in the job, each running --nproc ranks"},
		&ucli.IntFlag{Name: "node-rank", Usage: "this machine's index among --nnodes (0 hosts the rendezvous)"},
		&ucli.StringFlag{Name: "master-addr", Value: "127.0.0.1", Usage: "with --nnodes > 1: address of node 0, where rank 0 hosts the rendezvous store (one machine's ranks meet through a private file)"},
		&ucli.IntFlag{Name: "master-port", Value: 29500, Usage: "with --nnodes > 1: port of the rendezvous store"},
		distTimeoutFlag("longest wait for the other ranks (rendezvous and every collective): a rank that died or hangs fails the job after this"),
		&ucli.StringFlag{Name: "dist-backend", Value: "gloo", Usage: "collectives: gloo (CPU tensors; every libtorch) or nccl (GPU; pip PyTorch builds)"},
	}
}

// distTimeoutFlag is --dist-timeout, the bound on waiting for other ranks.
func distTimeoutFlag(usage string) ucli.Flag {
	return &ucli.DurationFlag{Name: "dist-timeout", Value: 10 * time.Minute, Usage: usage}
}

// Variables the launcher gives its ranks beside torchrun's: its process id, by which a rank
// tells the launcher's start from an inherited RANK (ownRank), and the rendezvous file of a
// one-machine job, in a directory only this user reaches.
const (
	launcherEnv  = "UMAD_LAUNCHER_PID"
	storeFileEnv = "UMAD_RENDEZVOUS_FILE"
)

// ownRank reports whether this process is a rank that umad's launcher started (its parent),
// rather than one whose RANK came from torchrun or a job system.
func ownRank() bool { return os.Getenv(launcherEnv) == strconv.Itoa(os.Getppid()) }

// distSpec is this process's place in a multi-process job.
type distSpec struct {
	Rank, World, LocalRank, LocalWorld int
	Addr                               string
	Port                               int
	// StoreFile is the rendezvous file of a one-machine job (torch.GroupOptions).
	StoreFile string
	Timeout   time.Duration
	Backend   torch.Backend
}

// multi reports whether the job has more than one rank.
func (d distSpec) multi() bool { return d.World > 1 }

// resolveDist reads the job's shape: torchrun's environment when RANK is set (this is a
// rank), else the flags (this may be a launcher). A command with --nproc alone (debate:
// its ranks share no process group) passes group false.
func resolveDist(c *ucli.Context, group bool) (d distSpec, isRank bool, err error) {
	if group {
		if d.Backend, err = torch.ParseBackend(c.String("dist-backend")); err != nil {
			return d, false, fmt.Errorf("--dist-backend: %w", err)
		}
	}
	if d.Timeout = c.Duration("dist-timeout"); d.Timeout <= 0 {
		return d, false, errors.New("--dist-timeout must be positive")
	}
	if os.Getenv("RANK") != "" {
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
			return d, false, err
		}
		if d.Rank >= d.World {
			return d, false, fmt.Errorf("RANK %d is outside WORLD_SIZE %d", d.Rank, d.World)
		}
		if d.Addr = os.Getenv("MASTER_ADDR"); d.Addr == "" {
			d.Addr = "127.0.0.1"
		}
		if ownRank() {
			d.StoreFile = os.Getenv(storeFileEnv)
		}
		return d, true, nil
	}
	nproc, nnodes, node := c.Int("nproc"), 1, 0
	if group {
		nnodes, node = c.Int("nnodes"), c.Int("node-rank")
	}
	switch {
	case nproc < 1 || nproc > 1024:
		return d, false, fmt.Errorf("--nproc must be in 1..1024, got %d", nproc)
	case nnodes < 1 || nnodes > 4096:
		return d, false, fmt.Errorf("--nnodes must be in 1..4096, got %d", nnodes)
	case node < 0 || node >= nnodes:
		return d, false, fmt.Errorf("--node-rank %d is outside --nnodes %d", node, nnodes)
	case nnodes > 1 && !c.IsSet("master-addr"):
		return d, false, errors.New("--nnodes > 1 needs --master-addr: the address of node 0 that the other machines reach")
	}
	d = distSpec{Rank: node * nproc, World: nproc * nnodes, LocalWorld: nproc, Addr: c.String("master-addr"), Port: c.Int("master-port"),
		Timeout: d.Timeout, Backend: d.Backend}
	if nnodes > 1 && (d.Port < 1 || d.Port > 65535) {
		return d, false, fmt.Errorf("--master-port must be in 1..65535, got %d", d.Port)
	}
	return d, false, nil
}

// launchRanks starts this machine's ranks of a multi-process job when this process is
// the launcher (check, when not nil, refuses a world size first), and waits for them;
// done says it did (the command's work happened in the ranks). Otherwise it returns this
// process's place: a rank's, or rank 0 of 1.
func launchRanks(c *ucli.Context, check func(world int) error) (d distSpec, done bool, err error) {
	d, isRank, err := resolveDist(c, true)
	if err != nil || isRank || !d.multi() {
		return d, false, err
	}
	if check != nil {
		if err := check(d.World); err != nil {
			return d, true, err
		}
	}
	if d.LocalWorld == d.World { // one machine: no network listener for the rendezvous
		dir, err := os.MkdirTemp("", "umad-rendezvous-")
		if err != nil {
			return d, true, fmt.Errorf("launch: %w", err)
		}
		defer os.RemoveAll(dir)
		d.StoreFile = filepath.Join(dir, "store")
	}
	return d, true, startRanks(c, d, 0)
}

// startRanks runs this machine's ranks of d and waits for them. A rank that fails stops
// the others at once and the error names it. With straggle > 0 (ranks that share no
// process group, whose own timeouts would not notice a hung peer), the ranks still running
// that long after one finished are stopped and named too. The first Ctrl-C (or SIGTERM) is
// passed to every rank (a training rank finishes the step, checkpoints and stops); a second
// one kills them. The ranks die with the launcher (no orphans).
func startRanks(c *ucli.Context, d distSpec, straggle time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	// Pdeathsig is sent when the thread that started a child exits: keep this one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, d.LocalWorld)
	var procs []*exec.Cmd
	var out sync.WaitGroup
	for i := 0; i < d.LocalWorld; i++ {
		rank := d.Rank + i
		cmd := exec.Command(exe, os.Args[1:]...)
		cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(d.World),
			"LOCAL_RANK="+strconv.Itoa(i), "LOCAL_WORLD_SIZE="+strconv.Itoa(d.LocalWorld),
			"MASTER_ADDR="+d.Addr, "MASTER_PORT="+strconv.Itoa(d.Port), "CUDA_VISIBLE_DEVICES="+visibleDevice(i),
			launcherEnv+"="+strconv.Itoa(os.Getpid()), storeFileEnv+"="+d.StoreFile)
		cmd.Stdin = nil
		// Own process group: a terminal's Ctrl-C reaches the launcher only, which passes it on.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		ends, err := prefixOutput(cmd, rank, c.App.Writer, c.App.ErrWriter, &out)
		if err != nil {
			return err
		}
		err = cmd.Start()
		for _, e := range ends {
			e.Close() // the child holds its own copy
		}
		if err != nil {
			for _, p := range procs {
				p.Process.Kill()
			}
			return fmt.Errorf("launch rank %d: %w", rank, err)
		}
		procs = append(procs, cmd)
		go func(rank int, cmd *exec.Cmd) { exits <- exit{rank, cmd.Wait()} }(rank, cmd)
	}
	signalAll := func(s os.Signal) {
		for _, p := range procs {
			p.Process.Signal(s)
		}
	}
	var failed error
	interrupted := false
	running := map[int]bool{}
	for i := range procs {
		running[d.Rank+i] = true
	}
	stillRunning := func() string {
		var still []string
		for _, r := range slices.Sorted(maps.Keys(running)) {
			still = append(still, strconv.Itoa(r))
		}
		return strings.Join(still, ", ")
	}
	var straggling <-chan time.Time // fires straggle after the first rank finished
	finished := -1
	for len(running) > 0 {
		select {
		case <-straggling:
			straggling = nil
			if failed == nil {
				failed = fmt.Errorf("rank %d finished its share, but rank %s still ran %v later (--dist-timeout): hung? stopped; the same command resumes",
					finished, stillRunning(), straggle)
				signalAll(syscall.SIGKILL)
			}
		case s := <-sig:
			if interrupted {
				fmt.Fprintln(c.App.ErrWriter, "umad: second interrupt: killing the ranks")
				signalAll(syscall.SIGKILL)
				continue
			}
			interrupted = true
			fmt.Fprintln(c.App.ErrWriter, "umad: interrupt: passed to every rank (again to kill them)")
			signalAll(s)
		case e := <-exits:
			delete(running, e.rank)
			if e.err == nil && straggle > 0 && finished < 0 {
				finished, straggling = e.rank, time.After(straggle)
			}
			if e.err == nil || failed != nil {
				continue
			}
			if interrupted && exitCode(e.err) == 130 {
				failed = errInterrupted
				continue
			}
			failed = fmt.Errorf("rank %d failed (%v)", e.rank, e.err)
			if len(running) > 0 {
				failed = fmt.Errorf("rank %d failed (%v); stopped ranks %s, which were still running (a rank that hangs shows as the others' timeout)",
					e.rank, e.err, stillRunning())
			}
			signalAll(syscall.SIGKILL)
		}
	}
	out.Wait()
	return failed
}

// shareCores gives each of a machine's ranks its share of the cores for llama.cpp and,
// with torch, libtorch, unless --threads or --torch-threads say otherwise; engines is the
// number of rollout engines per rank, which decode concurrently.
func shareCores(c *ucli.Context, d distSpec, engines int, torch bool) error {
	if d.LocalWorld <= 1 {
		return nil
	}
	if torch && !c.IsSet("torch-threads") {
		if err := c.Set("torch-threads", strconv.Itoa(max(1, runtime.NumCPU()/d.LocalWorld))); err != nil {
			return err
		}
	}
	if !c.IsSet("threads") {
		return c.Set("threads", strconv.Itoa(engine.SharedThreads(engines*d.LocalWorld)))
	}
	return nil
}

// visibleDevice is the GPU of a machine's local rank i: its entry of the launcher's
// CUDA_VISIBLE_DEVICES when set, else GPU i (ignored where there is none).
func visibleDevice(i int) string {
	if v := os.Getenv("CUDA_VISIBLE_DEVICES"); v != "" {
		if list := strings.Split(v, ","); i < len(list) {
			return strings.TrimSpace(list[i])
		}
	}
	return strconv.Itoa(i)
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// prefixOutput passes rank 0's output through unchanged (progress, the final summary) and
// prefixes every other rank's lines with the rank, leaving out their progress lines
// (rewritten in place with \r, which ranks cannot share). It returns the pipes' write ends,
// which the launcher closes once the child started.
func prefixOutput(cmd *exec.Cmd, rank int, stdout, stderr io.Writer, wg *sync.WaitGroup) ([]*os.File, error) {
	var ends []*os.File
	pipe := func(dst io.Writer, raw bool) (io.Writer, error) {
		if raw {
			return dst, nil
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("launch: %w", err)
		}
		ends = append(ends, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			sc.Split(linesOrProgress)
			for sc.Scan() {
				if line := sc.Text(); !strings.HasSuffix(line, "\r") {
					fmt.Fprintf(dst, "[rank %d] %s\n", rank, line)
				}
			}
		}()
		return w, nil
	}
	var err error
	if cmd.Stdout, err = pipe(stdout, rank == 0); err == nil {
		cmd.Stderr, err = pipe(stderr, rank == 0)
	}
	return ends, err
}

// linesOrProgress splits output into lines without their \n and progress updates with
// their \r kept.
func linesOrProgress(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\r' {
			return i + 1, data[:i+1], nil
		}
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
