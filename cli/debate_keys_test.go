package cli

import (
	"fmt"
	"slices"
	"strings"

	"reflect"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/experiment"
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
