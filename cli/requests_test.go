package cli

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"reflect"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/experiment"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/run"
)

// Every flag of umad debate and umad train that sets the run is a key of its request, by
// its name, and a request's defaults are its flags' (so a cell that leaves a setting out
// runs what the command would).
func TestRequestKeysAreFlags(t *testing.T) {
	for _, tc := range []struct {
		command string
		keys    run.Keys
		flags   []ucli.Flag
		not     []string // flags that are no setting of the run
		later   []string // settings whose default Resolve gives, from others
	}{
		{"debate", run.NewDebateRequest().Keys(), debateFlags(), []string{"check-determinism"}, []string{"continue"}},
		{"train", run.NewTrainRequest().Keys(), trainFlags(), nil, nil},
	} {
		for _, name := range tc.keys.Names() {
			if flagName(tc.command, name) != name {
				t.Errorf("key %s is no flag name of umad %s", name, tc.command)
			}
		}
		for _, f := range tc.flags {
			name := f.Names()[0]
			if !slices.Contains(tc.keys.Names(), name) {
				if !slices.Contains(tc.not, name) {
					t.Errorf("flag --%s of umad %s is no key of its request", name, tc.command)
				}
				continue
			}
			if env, ok := f.(interface{ GetEnvVars() []string }); ok && len(env.GetEnvVars()) > 0 {
				continue // the machine's, read where it is used
			}
			d, ok := f.(ucli.DocGenerationFlag)
			if !ok {
				t.Fatalf("flag --%s: no default to compare", name)
			}
			want, got := d.GetValue(), fmt.Sprint(tc.keys.Value(name))
			if _, list := tc.keys.Value(name).([]string); list {
				got = strings.Join(tc.keys.Value(name).([]string), ", ")
			}
			if want == "" && got == "false" {
				want = got // a bool flag shows no default
			}
			if want != got && !slices.Contains(tc.later, name) {
				t.Errorf("umad %s --%s: the flag's default %q, the request's %q", tc.command, name, want, got)
			}
		}
	}
}

// A debate cell's settings (an alias among them) resolve to the run the same flags give,
// a recipe's overlay and overrides included, and record the same command in config.json.
func TestDebateCellResolvesAsFlags(t *testing.T) {
	out := t.TempDir()
	pairs := [][2]string{{"recipe", "paper"}, {"agent", "a.gguf"}, {"agent", "b.gguf,temperature=0.9"}, {"k", "2"},
		{"stop", "agree=2"}, {"no-mask", "false"}, {"t", "0.7"}, {"synthetic-task", "experts"}, {"ctx", "8192"}, {"dist-timeout", "90s"}, {"out", out}}
	var args []string
	var settings []experiment.Setting
	for _, p := range pairs {
		args = append(args, "--"+p[0]+"="+p[1])
		settings = append(settings, experiment.Setting{Key: p[0], Value: p[1]})
	}
	want, err := resolveOnly(t, "debate", debateFromFlags, args...)
	if err != nil {
		t.Fatal(err)
	}
	e := &run.Experiment{FlagName: flagName}
	r, err := e.DebateRequest(settings)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	same := func(d run.Debate) []any {
		return []any{d.Settings, d.Note, d.CtxGiven, d.PromptLimitGiven, d.Slots, d.Threads, d.Placement, d.NProc, d.DistTimeout, d.Out, d.Command}
	}
	if !reflect.DeepEqual(same(got), same(want)) {
		t.Errorf("the cell resolves to\n%+v\nthe flags to\n%+v", same(got), same(want))
	}
	if len(want.Settings.Recipe.Overrides) != 3 || want.Settings.Seeds[4] != 5 {
		t.Errorf("the recipe's overrides %+v, seeds %v: want k, temperature and no-mask overridden, seeds 1 to 5",
			want.Settings.Recipe.Overrides, want.Settings.Seeds)
	}
	if _, err := e.DebateRequest([]experiment.Setting{{Key: "turns", Value: "three"}}); err == nil || err.Error() != `turns (--turns) "three": strconv.ParseInt: parsing "three": invalid syntax` {
		t.Errorf("a cell's value that does not read: %v", err)
	}
}

// A training cell's settings (aliases among them) resolve to the settings the same flags
// give, a recipe's overlay and overrides included, and record the same command.
func TestTrainCellResolvesAsFlags(t *testing.T) {
	pairs := [][2]string{{"a", filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")}, {"algo", "ippo"}, {"recipe", "paper"}, {"lr", "2e-6"},
		{"t", "0.8"}, {"lora-rank", "4"}, {"kl-in-loss", "true"}, {"dist-timeout", "90s"}, {"o", t.TempDir()}}
	var args []string
	var settings []experiment.Setting
	for _, p := range pairs {
		args = append(args, "--"+p[0]+"="+p[1])
		settings = append(settings, experiment.Setting{Key: p[0], Value: p[1]})
	}
	type resolved struct {
		settings run.TrainSettings
		command  map[string]any
	}
	want, err := resolveOnly(t, "train", func(c *ucli.Context) (resolved, error) {
		r, err := trainFromFlags(c)
		if err != nil {
			return resolved{}, err
		}
		s, err := r.Resolve()
		return resolved{s, r.Command}, err
	}, args...)
	if err != nil {
		t.Fatal(err)
	}
	e := &run.Experiment{FlagName: flagName}
	r, err := e.TrainRequest(settings)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want.settings) || !reflect.DeepEqual(r.Command, want.command) {
		t.Errorf("the cell resolves to\n%+v\n%v\nthe flags to\n%+v\n%v", got, r.Command, want.settings, want.command)
	}
	if want.settings.Recipe == nil || len(want.settings.Recipe.Overrides) != 1 || want.settings.Trainer.LoRA.Rank != 4 {
		t.Errorf("the recipe's overrides %+v, LoRA %+v: want lr overridden (temperature 0.8 is the recipe's), rank 4", want.settings.Recipe.Overrides, want.settings.Trainer.LoRA)
	}
	if _, err := e.TrainRequest([]experiment.Setting{{Key: "lr", Value: "fast"}}); err == nil || err.Error() != `lr (--lr) "fast": strconv.ParseFloat: parsing "fast": invalid syntax` {
		t.Errorf("a cell's value that does not read: %v", err)
	}
}
