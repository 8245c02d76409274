package cli

import (
	"errors"
	"slices"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/experiment"
	"github.com/umad-dev/umad/run"
)

func init() {
	register(&ucli.Command{
		Name:      "experiment",
		Usage:     "run a grid of trainings and debates (methods x agent sets x evaluations x seeds) from one file",
		UsageText: "umad experiment [--dry-run] [--only REGEXP] FILE.toml",
		Description: "Every cell of the grid is an ordinary `umad train` or `umad debate` run directory under the\n" +
			"file's out, run in this process by the command itself. The plan comes first: the cells, each\n" +
			"one's state (done, new, resume) and generated tokens at most (training rollouts, validation\n" +
			"not counted), and the memory plan of the largest training cell left. Cells that are done are\n" +
			"skipped (a debate when every problem of every seed is in its rollouts), a cut one resumes (train\n" +
			"--resume; a debate reruns its unfinished problems), and one whose directory holds other settings\n" +
			"is refused, naming the setting. A trained debate follows a moved experiment directory, and one\n" +
			"whose training has a newer checkpoint (more steps) is kept as DIR.step-N and run afresh. Ctrl-C\n" +
			"stops the cell as the command would; the same command resumes it. One process per experiment\n" +
			"directory.\n\n" + experiment.Help,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "dry-run", Usage: "print the plan and stop"},
			&ucli.StringFlag{Name: "only", Usage: "run only the cells whose name (train/METHOD/AGENTS/seed-S, debate/METHOD/AGENTS/EVAL/seed-S) matches this regular expression"},
		},
		Action: experimentCmd,
	})
}

func experimentCmd(c *ucli.Context) error {
	if c.NArg() != 1 {
		return errors.New("give one experiment file: umad experiment FILE.toml")
	}
	f, err := experiment.Load(c.Args().First())
	if err != nil {
		return err
	}
	e := run.Experiment{File: f, Path: c.Args().First(), Only: c.String("only"), DryRun: c.Bool("dry-run"), FlagName: flagName,
		Prepare:  func(args []string) error { return runCommand(c, args) },
		RankArgs: func(args []string) []string { return appArgs(c, args) },
		Hub:      hubDirs(c), Stdout: c.App.Writer, Stderr: c.App.ErrWriter}
	return e.Run()
}

// flagName is the name of command's flag that key names (its name or an alias); "" for
// none.
func flagName(command, key string) string {
	i := slices.IndexFunc(commands, func(cmd *ucli.Command) bool { return cmd.Name == command })
	j := slices.IndexFunc(commands[i].Flags, func(fl ucli.Flag) bool { return slices.Contains(fl.Names(), key) })
	if j < 0 {
		return ""
	}
	return commands[i].Flags[j].Names()[0]
}

// runCommand runs a umad command line in this process, on this app's outputs. The app
// keeps the line (commandLine), which a multi-process run's ranks run.
func runCommand(c *ucli.Context, args []string) error {
	app := App()
	app.Writer, app.ErrWriter = c.App.Writer, c.App.ErrWriter
	args = appArgs(c, args)
	app.Metadata = map[string]any{commandLineKey: args}
	return app.Run(append([]string{"umad"}, args...))
}

// appArgs is a command line (after "umad") as this app runs it: with --verbose when the
// app has it.
func appArgs(c *ucli.Context, args []string) []string {
	if c.Bool("verbose") {
		return append([]string{"--verbose"}, args...)
	}
	return args
}

// commandLineKey is the app metadata that holds a command line run in process.
const commandLineKey = "command line"

// commandLine is the command line this app runs, after "umad": runCommand's, or nil for
// the process's own.
func commandLine(c *ucli.Context) []string {
	args, _ := c.App.Metadata[commandLineKey].([]string)
	return args
}
