package cli

// A run request's settings from its command's flags: the key is the flag's name, and the
// request's keys (run.Keys) read each value as the flag gave it, so a flag, an experiment
// cell and a recipe set the same field the same way.

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/run"
)

// fromFlags sets the keys of k whose flags were given to c.
func fromFlags(c *ucli.Context, k run.Keys) error {
	for _, name := range k.Names() {
		if !c.IsSet(name) {
			continue
		}
		values := []string{c.String(name)}
		if k.IsList(name) {
			values = c.StringSlice(name)
		}
		for _, v := range values {
			if err := k.Set(name, v); err != nil {
				return fmt.Errorf("%s: %w", recipe.Flag(name), err)
			}
		}
	}
	return nil
}
