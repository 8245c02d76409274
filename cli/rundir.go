package cli

// Run and output directories: naming, claiming, locking.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/runlock"
)

// outDir is the --out of a command that writes a directory. An empty one named the
// current directory: debate wrote its run there, sft trained and then failed.
func outDir(c *ucli.Context) (string, error) {
	if c.String("out") == "" {
		return "", errors.New("--out is empty; name the output directory")
	}
	return c.String("out"), nil
}

// claimRunDir checks that dir, locked by the caller, is empty or holds a run with the same
// config (so re-running the command resumes it). It returns what saves the config of a new
// run, to be called as late as the command can (debate: once its models loaded; train
// removes what its start wrote if the run fails before its first step, abandonRun), so that
// a run that fails at the start leaves nothing that blocks the corrected command.
func claimRunDir(dir string, cfg any) (save func() error, err error) {
	path := filepath.Join(dir, "config.json")
	want, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	old, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != runlock.File {
				return nil, fmt.Errorf("%s is not empty and holds no run; choose another --out", dir)
			}
		}
		return func() error { return atomicfile.WriteBytes(path, append(want, '\n')) }, nil
	}
	if err != nil {
		return nil, err
	}
	oldCfg := reflect.New(reflect.TypeOf(cfg)).Interface()
	if err := json.Unmarshal(old, oldCfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !reflect.DeepEqual(reflect.ValueOf(oldCfg).Elem().Interface(), cfg) {
		return nil, fmt.Errorf("%s holds a run with other settings; resume it with the same flags or choose another --out", dir)
	}
	return func() error { return nil }, nil
}

// sftLock locks sft's output directory, which does not exist until the end (it is built
// beside and renamed into place), through a lock file beside it.
func sftLock(out string) (*runlock.Lock, error) {
	clean := filepath.Clean(out)
	if err := os.MkdirAll(filepath.Dir(clean), 0o755); err != nil {
		return nil, err
	}
	return runlock.Acquire(filepath.Join(filepath.Dir(clean), "."+filepath.Base(clean)+runlock.File), out)
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
