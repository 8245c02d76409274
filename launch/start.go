package launch

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Output is where the ranks' output goes: rank 0's unchanged, the others' prefixed.
type Output struct{ Stdout, Stderr io.Writer }

// exit is one rank's end.
type exit struct {
	rank int
	err  error
}

// job is this machine's running ranks.
type job struct {
	d       Spec
	out     Output
	procs   []*exec.Cmd
	exits   chan exit
	running map[int]bool
	pipes   sync.WaitGroup
}

// Start runs this machine's ranks of d and waits for them. A rank that fails stops
// the others at once and the error names it. With straggle > 0 (ranks that share no
// process group, whose own timeouts would not notice a hung peer), the ranks still running
// that long after one finished are stopped and named too. The first Ctrl-C (or SIGTERM) is
// passed to every rank (a training rank finishes the step, checkpoints and stops); a second
// one kills them. The ranks die with the launcher (no orphans).
func Start(d Spec, straggle time.Duration, out Output) error {
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
	j := &job{d: d, out: out, exits: make(chan exit, d.LocalWorld), running: map[int]bool{}}
	for i := 0; i < d.LocalWorld; i++ {
		if err := j.start(exe, i); err != nil {
			j.signalAll(syscall.SIGKILL)
			return err
		}
	}
	failed := j.wait(sig, straggle)
	j.pipes.Wait()
	return failed
}

// start starts local rank i.
func (j *job) start(exe string, i int) error {
	d, rank := j.d, j.d.Rank+i
	args := d.Command
	if args == nil {
		args = os.Args[1:]
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(d.World),
		"LOCAL_RANK="+strconv.Itoa(i), "LOCAL_WORLD_SIZE="+strconv.Itoa(d.LocalWorld),
		"MASTER_ADDR="+d.Addr, "MASTER_PORT="+strconv.Itoa(d.Port), "CUDA_VISIBLE_DEVICES="+visibleDevice(i),
		launcherEnv+"="+strconv.Itoa(os.Getpid()), storeFileEnv+"="+d.StoreFile)
	cmd.Stdin = nil
	// Own process group: a terminal's Ctrl-C reaches the launcher only, which passes it on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	ends, err := prefixOutput(cmd, rank, j.out.Stdout, j.out.Stderr, &j.pipes)
	if err != nil {
		return err
	}
	err = cmd.Start()
	for _, e := range ends {
		e.Close() // the child holds its own copy
	}
	if err != nil {
		return fmt.Errorf("launch rank %d: %w", rank, err)
	}
	j.procs = append(j.procs, cmd)
	j.running[rank] = true
	go func() { j.exits <- exit{rank, cmd.Wait()} }()
	return nil
}

func (j *job) signalAll(s os.Signal) {
	for _, p := range j.procs {
		p.Process.Signal(s)
	}
}

// stillRunning lists the running ranks.
func (j *job) stillRunning() string {
	var still []string
	for _, r := range slices.Sorted(maps.Keys(j.running)) {
		still = append(still, strconv.Itoa(r))
	}
	return strings.Join(still, ", ")
}

// wait supervises the ranks until every one has ended and returns the job's error.
func (j *job) wait(sig <-chan os.Signal, straggle time.Duration) error {
	var failed error
	interrupted := false
	var straggling <-chan time.Time // fires straggle after the first rank finished
	finished := -1
	for len(j.running) > 0 {
		select {
		case <-straggling:
			straggling = nil
			if failed == nil {
				failed = fmt.Errorf("rank %d finished its share, but rank %s still ran %v later (--dist-timeout): hung? stopped; the same command resumes",
					finished, j.stillRunning(), straggle)
				j.signalAll(syscall.SIGKILL)
			}
		case s := <-sig:
			if interrupted {
				fmt.Fprintln(j.out.Stderr, "umad: second interrupt: killing the ranks")
				j.signalAll(syscall.SIGKILL)
				continue
			}
			interrupted = true
			fmt.Fprintln(j.out.Stderr, "umad: interrupt: passed to every rank (again to kill them)")
			j.signalAll(s)
		case e := <-j.exits:
			delete(j.running, e.rank)
			if e.err == nil && straggle > 0 && finished < 0 {
				finished, straggling = e.rank, time.After(straggle)
			}
			if e.err == nil || failed != nil {
				continue
			}
			failed = j.failure(e, interrupted)
		}
	}
	return failed
}

// failure is the job's error when rank e failed first; the others are stopped.
func (j *job) failure(e exit, interrupted bool) error {
	if interrupted && ExitCode(e.err) == 130 {
		return ErrInterrupted
	}
	defer j.signalAll(syscall.SIGKILL)
	if len(j.running) > 0 {
		return fmt.Errorf("rank %d failed (%v); stopped ranks %s, which were still running (a rank that hangs shows as the others' timeout)",
			e.rank, e.err, j.stillRunning())
	}
	return fmt.Errorf("rank %d failed (%v)", e.rank, e.err)
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
