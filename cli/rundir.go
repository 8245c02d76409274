package cli

// Output directories: naming and preparing them (a run claims its directory with
// run.ClaimDir, a warm start its output with run.SFT.Claim).

import (
	"fmt"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/run"
)

// outDir is the --out of a command that writes a directory, not empty (run.ErrNoOut).
func outDir(c *ucli.Context) (string, error) {
	if c.String("out") == "" {
		return "", run.ErrNoOut
	}
	return c.String("out"), nil
}

// prepareOutDir refuses a non-empty output directory (an old checkpoint's shards would
// stay beside the new files) unless --force, which first removes what the output format
// owns with clear.
func prepareOutDir(c *ucli.Context, dir string, clear func(dir string) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return nil // a missing directory is created; a file fails the write with its own error
	}
	if !c.Bool("force") {
		return fmt.Errorf("%s is not empty; choose another directory, or pass --force to replace the model files in it", dir)
	}
	return clear(dir)
}
