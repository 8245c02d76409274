package run

// A recipe's overlay on a run request: what --recipe sets of the settings left out, and
// the lines that say so.

import (
	"fmt"
	"io"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/trainer"
)

// recipeRivals are flags that give a recipe's setting another way, when given a value
// that does (--steps 0 trains --epochs passes; --robust=false leaves --reward).
var recipeRivals = map[string]struct {
	flag  string
	gives func(Keys) bool
}{
	"seeds":  {"seed", func(Keys) bool { return true }},
	"reward": {"robust", func(k Keys) bool { return k.Value("robust") == true }},
	"epochs": {"steps", func(k Keys) bool { n, _ := k.Value("steps").(int); return n > 0 }},
}

// applyRecipe sets every setting of --recipe that was left out, and returns what it set
// and which settings given explicitly override it (nil without --recipe). algo is the
// training algorithm; command is "train" or "debate".
func applyRecipe(c Keys, command, algo string) (*recipe.Applied, error) {
	if !c.IsSet("recipe") {
		return nil, nil
	}
	r, err := recipe.Lookup(c.String("recipe"))
	if err != nil {
		return nil, fmt.Errorf("--recipe: %w", err)
	}
	if command == "train" {
		if _, err := trainer.LookupAlgo(algo); err != nil {
			return nil, err
		}
	}
	var lengths recipe.Lengths // none when both are given
	if !c.IsSet("max-tokens") || !c.IsSet("prompt-limit") {
		sets, err := problemSets(c.String("data"))
		if err != nil {
			return nil, err
		}
		if lengths, err = r.LengthsFor(sets); err != nil {
			return nil, err
		}
	}
	settings, err := r.Settings(command, algo, lengths)
	if err != nil {
		return nil, err
	}
	run := &recipe.Applied{Name: r.Name, Source: r.Source}
	for _, s := range settings {
		given := s.Flag
		if rival, ok := recipeRivals[s.Flag]; ok && c.IsSet(rival.flag) && rival.gives(c) {
			given = rival.flag
		}
		explicit := c.IsSet(given)
		switch {
		case !explicit:
			if err := c.Set(s.Flag, fmt.Sprint(s.Value)); err != nil {
				return nil, fmt.Errorf("--recipe %s: %s: %w", r.Name, s.Arg(), err)
			}
		case given != s.Flag || fmt.Sprint(c.Value(given)) != fmt.Sprint(s.Value):
			run.Overrides = append(run.Overrides, recipe.Override{Recipe: recipe.Recorded(s), Flag: given})
			continue
		}
		v := recipe.Recorded(s) // also when given with the recipe's own value
		v.Given = explicit
		run.Set = append(run.Set, v)
	}
	return run, nil
}

// problemSets names the problem sets of --data (the built-in set without it), whose
// lengths a recipe gives.
func problemSets(path string) ([]string, error) {
	if path == "" {
		return []string{"synthetic"}, nil
	}
	ps, err := data.Load(path, data.Options{})
	if err != nil {
		return nil, err
	}
	var sets []string
	seen := map[string]bool{}
	for _, p := range ps {
		if !seen[p.Dataset] {
			seen[p.Dataset] = true
			sets = append(sets, p.Dataset)
		}
	}
	return sets, nil
}

// WriteRecipe prints what the recipe set and every override, with the value c gives it: a
// run's first lines; a training run's also say where the recipe departs from its source.
func WriteRecipe(w io.Writer, run *recipe.Applied, c Keys, train bool) {
	if run == nil {
		return
	}
	fmt.Fprintf(w, "recipe %s: %s\n", run.Name, run.Source)
	for _, s := range run.Set {
		fmt.Fprintf(w, "  %s  (%s)\n", s.Arg(), s.Source)
	}
	for _, o := range run.Overrides {
		given := recipe.Setting{Flag: o.Flag, Value: c.Value(o.Flag)}.Arg()
		fmt.Fprintf(w, "  override: %s instead of the recipe's %s  (%s)\n", given, o.Recipe.Arg(), o.Recipe.Source)
	}
	if r, err := recipe.Lookup(run.Name); err == nil && train {
		for _, d := range r.Departures {
			fmt.Fprintf(w, "  departs from its source: %s\n", d)
		}
	}
}
