package cli

import (
	"reflect"
	"testing"

	"github.com/umad-dev/umad/experiment"
	"github.com/umad-dev/umad/run"
)

// Every flag of umad debate that sets the run is a key of debateKeys, by its name.
func TestDebateKeysAreFlags(t *testing.T) {
	for name := range debateKeys {
		if flagName("debate", name) != name {
			t.Errorf("key %s is no flag name of umad debate", name)
		}
	}
	for _, f := range debateFlags() {
		if name := f.Names()[0]; debateKeys[name].set == nil && name != "check-determinism" {
			t.Errorf("flag --%s is no key of debateKeys", name)
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
	r, err := debateCell(settings)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.resolve()
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
	if _, err := debateCell([]experiment.Setting{{Key: "turns", Value: "three"}}); err == nil || err.Error() != `turns (--turns) "three": strconv.ParseInt: parsing "three": invalid syntax` {
		t.Errorf("a cell's value that does not read: %v", err)
	}
}
