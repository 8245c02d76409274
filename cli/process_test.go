package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mainArgsEnv makes the test binary run umad itself: a test starts it as a child process
// to hold an address-space limit or to be a second, concurrent umad.
const mainArgsEnv = "UMAD_CLI_TEST_MAIN_ARGS"

func init() {
	if args, ok := os.LookupEnv(mainArgsEnv); ok {
		if len(os.Args) > 1 { // a launcher's rank, started with its command line as the binary is
			args = strings.Join(os.Args[1:], "\n")
		}
		// os.Args too, as a real umad's: shell completion reads it (urfave/cli).
		os.Args = append([]string{"umad"}, strings.Split(args, "\n")...)
		os.Exit(Main(os.Args))
	}
}

// umadProcess is a command that runs umad args (none holding a newline) in a child process, under an address-space
// limit of asLimit bytes (prlimit --as) when asLimit > 0, killed after three minutes.
func umadProcess(t *testing.T, asLimit int64, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A hung child is killed, so a regression that hangs fails.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, self)
	if asLimit > 0 {
		prlimit, err := exec.LookPath("prlimit")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("prlimit (util-linux) is not installed; CI needs it for the memory-limited cases")
			}
			t.Skip("prlimit (util-linux) is not installed")
		}
		cmd = exec.CommandContext(ctx, prlimit, "--as="+strconv.FormatInt(asLimit, 10), "--", self)
	}
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\n"))
	return cmd
}

// runUmadProcess runs umad args in a child process and returns its exit code and stderr.
func runUmadProcess(t *testing.T, asLimit int64, args ...string) (int, string) {
	t.Helper()
	cmd := umadProcess(t, asLimit, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String()
	}
	t.Fatal(err)
	return 0, ""
}
