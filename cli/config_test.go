package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/trainlog"
)

// runConfig reads the settings and the recorded command of a run's config.json.
func runConfig(t *testing.T, run string) (settings map[string]any, command map[string]any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(run, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &settings); err != nil {
		t.Fatal(err)
	}
	command, _ = settings["command"].(map[string]any)
	delete(settings, "command")
	return settings, command
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// `umad train --config run.toml` takes every flag from the file, a flag on the command
// line wins over it, and the run's config.json records the flags; that config.json then
// reruns the run in another directory with the same settings, and extends the run itself
// (--resume, a larger --steps; --out is its directory).
func TestTrainConfigFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	file := writeFile(t, "run.toml", fmt.Sprintf(`# a tiny grpo run
agent = [%q]
algo = "grpo"
turns = 1
synthetic = 16
batch = 4
g = 4
max-tokens = 8
prompt-limit = 512
val-synthetic = 4
steps = 1
lr = 1e-3
threads = 1
torch-threads = 1
kv-type = "f32"
flash-attn = "off"
slots = 4
out = %q
`, filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"), out))
	if _, stderr, err := runApp(t, "train", "--config", file, "--lr", "2e-3"); err != nil {
		t.Fatalf("train --config: %v\n%s", err, stderr)
	}
	settings, command := runConfig(t, out)
	tr := settings["trainer"].(map[string]any)
	if lr := tr["optimizer"].(map[string]any)["LR"]; lr != 2e-3 || tr["batch_size"] != 4.0 || tr["g"] != 4.0 {
		t.Errorf("trainer settings: lr %v (want the command line's 2e-3), batch %v, g %v", lr, tr["batch_size"], tr["g"])
	}
	if command["lr"] != 2e-3 || command["batch"] != 4.0 || command["out"] != nil || command["config"] != nil {
		t.Errorf("recorded command: %v", command)
	}
	// The run's config.json as a config: a new run elsewhere with the same settings.
	again := filepath.Join(t.TempDir(), "again")
	if _, stderr, err := runApp(t, "train", "--config", filepath.Join(out, "config.json"), "--out", again); err != nil {
		t.Fatalf("train --config RUN/config.json: %v\n%s", err, stderr)
	}
	if s2, c2 := runConfig(t, again); fmt.Sprint(s2) != fmt.Sprint(settings) || fmt.Sprint(c2) != fmt.Sprint(command) {
		t.Errorf("rerun from config.json:\n%v\n%v\nwant\n%v\n%v", s2, c2, settings, command)
	}
	// And extended in place: --out is the config's directory.
	if _, stderr, err := runApp(t, "train", "--config", filepath.Join(out, "config.json"), "--resume", "--steps", "2"); err != nil {
		t.Fatalf("extend with --config RUN/config.json: %v\n%s", err, stderr)
	}
	if train, _, err := trainlog.Read(filepath.Join(out, trainlog.File)); err != nil || len(train) != 2 || train[1].Step != 2 {
		t.Errorf("extended run: %d lines, %v", len(train), err)
	}
}

// `umad debate --config d.yaml` (YAML), with a flag on the command line winning.
func TestDebateConfigFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	file := writeFile(t, "d.yaml", fmt.Sprintf("agent:\n  - %s\n  - %s\nsynthetic: 3\nk: 1\nturns: 2\nmax-tokens: 4\nthreads: 1\nseeds: 7\nout: %s\n",
		testmodel.GGUF(t, "qwen2"), testmodel.GGUF(t, "qwen2")+",temperature=0.9", out))
	if _, stderr, err := runApp(t, "debate", "--config", file, "--turns", "1"); err != nil {
		t.Fatalf("debate --config: %v\n%s", err, stderr)
	}
	settings, command := runConfig(t, out)
	agents := settings["agents"].([]any)
	if settings["turns"] != 1.0 || settings["k"] != 1.0 || len(agents) != 2 || agents[1].(map[string]any)["params"].(map[string]any)["Temperature"] != 0.9 {
		t.Errorf("debate settings: %v", settings)
	}
	if _, err := os.Stat(filepath.Join(out, "seed-7")); err != nil || command["seeds"] != "7" {
		t.Errorf("seeds from the file: %v, command %v", err, command)
	}
	// The recorded command is no setting: other settings are named, not it.
	if _, _, err := runApp(t, "debate", "--config", file, "--turns", "1", "-k", "2"); err == nil || !strings.Contains(err.Error(), "(k: 1 there, 2 here)") {
		t.Errorf("a rerun with another -k: %v", err)
	}
}

// Unknown keys are refused naming their line, in TOML, YAML and a run's config.json; so
// are values of the wrong type, a config.json from before commands were recorded, and
// required flags given nowhere.
func TestConfigFileRefusals(t *testing.T) {
	oldRun := writeFile(t, "config.json", `{"agents": [], "trainer": {"steps": 3}}`)
	for _, tc := range []struct {
		cmd, name, text, want string
	}{
		{"train", "a.toml", "algo = \"grpo\"\n\nlrr = 3\n", "line 3: unknown key lrr"},
		{"train", "a.yaml", "algo: grpo\nsteps: 2\nbogus: 1\n", "line 3: unknown key bogus: umad train has no flag --bogus"},
		{"debate", "config.json", "{\n  \"k\": 2,\n  \"command\": {\n    \"k\": 2,\n    \"lr\": 1\n  }\n}\n", "line 5: unknown key lr: umad debate has no flag --lr"},
		{"train", "a.toml", "steps = \"many\"\n", "steps: want a whole number"},
		{"train", "a.yaml", "lr: [1, 2]\n", "line 1: lr: want a number"},
		{"train", "a.toml", "config = \"x.toml\"\n", "unknown key config"},
		{"train", "a.toml", "algo = \"grpo\"\n", "required flags not set: --agent, --out"},
		{"sft", "a.txt", "model = \"x\"\n", "want a .toml, .yaml, .yml or .json file"},
	} {
		_, _, err := runApp(t, tc.cmd, "--config", writeFile(t, tc.name, tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: %v, want %q", tc.cmd, tc.text, err, tc.want)
		}
	}
	if _, _, err := runApp(t, "train", "--config", oldRun); err == nil || !strings.Contains(err.Error(), `no "command"`) {
		t.Errorf("an older config.json: %v", err)
	}
}
