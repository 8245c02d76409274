package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/recipe"
)

// recipeFlag is --recipe of umad train and umad debate.
func recipeFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "recipe", Usage: "set every knob from a source: " + strings.Join(recipe.Names(), " or ") +
		" (listed above); a flag given explicitly overrides the recipe's value"}
}

// recipeHelp is the help text's paragraph on --recipe, with every recipe's values.
func recipeHelp(command string) string {
	return "--recipe paper|reference sets every knob its source gives, listed below with the source; a\n" +
		"flag given explicitly overrides the recipe's value. The run's first lines list what the recipe\n" +
		"set and every override, and config.json records both. Knobs a source does not give keep\n" +
		"umad's defaults. Lengths follow the problem set (AIME's are longer); --data mixing AIME with\n" +
		"other sets needs --max-tokens and --prompt-limit.\n" + recipe.Help(command)
}
