package cli

// Run and output directories: naming, claiming, locking.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"

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
		return nil, fmt.Errorf("%s holds a run with other settings (%s); resume it with the same flags or choose another --out", dir, configDiff(old, want))
	}
	return func() error { return nil }, nil
}

// configDiff names the first setting where two config.json texts differ, with both values
// ("trainer.optimizer.lr: 0.001 there, 0.002 here").
func configDiff(old, cur []byte) string {
	var a, b any
	if json.Unmarshal(old, &a) != nil || json.Unmarshal(cur, &b) != nil {
		return "config.json is unreadable"
	}
	if m, ok := a.(map[string]any); ok {
		delete(m, "command") // how the run was started, not a setting (recordCommand)
	}
	key, there, here := jsonDiff("", a, b)
	if key == "" {
		key = "a value" // equal as JSON: a float or type that reads back otherwise
	}
	return fmt.Sprintf("%s: %s there, %s here", key, jsonText(there), jsonText(here))
}

// jsonDiff walks two decoded JSON values and returns the path of their first difference.
func jsonDiff(at string, a, b any) (key string, x, y any) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		names := map[string]bool{}
		for k := range am {
			names[k] = true
		}
		for k := range bm {
			names[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(names)) {
			if key, x, y := jsonDiff(joinKey(at, k), am[k], bm[k]); key != "" {
				return key, x, y
			}
		}
		return "", nil, nil
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			if key, x, y := jsonDiff(fmt.Sprintf("%s[%d]", at, i), al[i], bl[i]); key != "" {
				return key, x, y
			}
		}
		return "", nil, nil
	}
	if reflect.DeepEqual(a, b) {
		return "", nil, nil
	}
	return at, a, b
}

func joinKey(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

// jsonText is a value as config.json writes it; "unset" where the key is absent.
func jsonText(v any) string {
	if v == nil {
		return "unset"
	}
	b, _ := json.Marshal(v)
	return string(b)
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
