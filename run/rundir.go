package run

// Run directories: one run's settings claim a directory (config.json), and the command
// that made the run is recorded beside them.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/runlock"
)

// ErrNoOut refuses an empty output directory, which named the current directory: debate
// wrote its run there, sft trained and then failed.
var ErrNoOut = errors.New("--out is empty; name the output directory")

// ClaimDir checks that dir, locked by the caller, is empty or holds a run with the same
// config (so re-running the command resumes it). It returns what saves the config of a new
// run, to be called as late as the command can (debate: once its models loaded; train
// removes what its start wrote if the run fails before its first step, abandonRun), so that
// a run that fails at the start leaves nothing that blocks the corrected command.
func ClaimDir(dir string, cfg any) (save func() error, err error) {
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
		return nil, fmt.Errorf("%s holds a run with other settings (%s); resume it with the same flags or choose another --out", dir, ConfigDiff(old, want))
	}
	return func() error { return nil }, nil
}

// ConfigDiff names the first setting where two config.json texts differ, with both values
// ("trainer.optimizer.lr: 0.001 there, 0.002 here").
func ConfigDiff(old, cur []byte) string {
	var a, b any
	if json.Unmarshal(old, &a) != nil || json.Unmarshal(cur, &b) != nil {
		return "config.json is unreadable"
	}
	if m, ok := a.(map[string]any); ok {
		delete(m, "command") // how the run was started, not a setting (RecordCommand)
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

// RecordCommand makes save also add the flags that made the run to its config.json as
// "command", where --config finds them; nil flags record nothing. The settings above it
// stay what resumes compare, and a resumed run keeps the command that wrote them.
func RecordCommand(dir string, flags map[string]any, save func() error) func() error {
	return func() error {
		if err := save(); err != nil || flags == nil {
			return err
		}
		path := filepath.Join(dir, "config.json")
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(b, &top); err != nil || top["command"] != nil {
			return err // a resume: the run keeps the command that wrote its settings
		}
		cmd, err := json.MarshalIndent(flags, "  ", "  ")
		if err != nil {
			return err
		}
		body := bytes.TrimRight(b, "\n")
		if !bytes.HasSuffix(body, []byte("}")) {
			return fmt.Errorf("%s: not a JSON object", path)
		}
		body = bytes.TrimRight(body[:len(body)-1], "\n ")
		return atomicfile.WriteBytes(path, fmt.Appendf(nil, "%s,\n  \"command\": %s\n}\n", body, cmd))
	}
}
