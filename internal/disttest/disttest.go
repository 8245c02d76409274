// Package disttest runs a test as several ranks of a process group: the test binary starts
// itself once per rank, on this machine over 127.0.0.1, with torchrun's environment.
package disttest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// childEnv marks a process started by Spawn.
const childEnv = "UMAD_DISTTEST_CHILD"

// Result is one rank's exit and output.
type Result struct {
	Err    error
	Output string
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Env is torchrun's environment for rank of world on this machine.
func Env(rank, world, port int) []string {
	return []string{"RANK=" + strconv.Itoa(rank), "LOCAL_RANK=" + strconv.Itoa(rank), "WORLD_SIZE=" + strconv.Itoa(world),
		"LOCAL_WORLD_SIZE=" + strconv.Itoa(world), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port)}
}

// Spawn runs the test named name (a top-level test of this binary) as world ranks and waits
// for all of them, at most timeout. env adds variables for every rank (a directory the
// ranks share, say).
func Spawn(t testing.TB, name string, world int, timeout time.Duration, env ...string) []Result {
	t.Helper()
	port := FreePort(t)
	res := make([]Result, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
		cmd.Env = append(append(append(os.Environ(), childEnv+"=1"), Env(r, world, port)...), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			timer := time.AfterFunc(timeout, func() { cmd.Process.Kill() })
			err := cmd.Wait()
			timer.Stop()
			res[r] = Result{Err: err, Output: out.String()}
		}(r)
	}
	wg.Wait()
	return res
}

// Child reports whether this process is a rank started by Spawn; a test that is only a
// rank's body skips otherwise.
func Child(t testing.TB) bool {
	t.Helper()
	if os.Getenv(childEnv) == "" {
		t.Skip("runs as a rank of a multi-process test")
		return false
	}
	return true
}

// Rank reads RANK, WORLD_SIZE and MASTER_PORT of a child.
func Rank(t testing.TB) (rank, world, port int) {
	t.Helper()
	var err error
	get := func(k string) int {
		v, e := strconv.Atoi(os.Getenv(k))
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", k, e)
		}
		return v
	}
	rank, world, port = get("RANK"), get("WORLD_SIZE"), get("MASTER_PORT")
	if err != nil {
		t.Fatal(err)
	}
	return rank, world, port
}
