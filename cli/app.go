// Package cli holds umad's command-line interface: one file per command.
package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"

	ucli "github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/launch"
)

// commands lists every top-level command; each file of this package adds its own in init.
var commands []*ucli.Command

func register(c *ucli.Command) { commands = append(commands, c) }

// App builds the command-line application.
func App() *ucli.App {
	return &ucli.App{
		Name:  "umad",
		Usage: "evaluate and train teams of LLM agents that debate math problems",
		Description: "umad samples multi-agent debates with llama.cpp, grades them, decomposes their\n" +
			"uncertainty, and trains the agents with GRPO-style updates through libtorch.\n\n" +
			"Start with:  umad model tiny --out /tmp/tiny && umad generate --model /tmp/tiny/model.gguf --prompt 'What is 2+3?'",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log debug messages, llama.cpp's included, on stderr"},
			hubDownloadFlag,
		},
		Before: func(c *ucli.Context) error {
			level := slog.LevelWarn
			if c.Bool("verbose") {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
			return nil
		},
		Commands:        withConfigFiles(withFloatChecks(commands)),
		HideHelpCommand: true,
		// Hidden --generate-bash-completion, which umad completion's scripts call.
		EnableBashCompletion: true,
		// --agent values hold commas (path,key=value,...): repeat a flag instead.
		DisableSliceFlagSeparator: true,
		// Errors are printed once, by Main.
		ExitErrHandler: func(*ucli.Context, error) {},
	}
}

// Main runs the application and returns the process exit code: 0 on success, 1 with one
// line on stderr for any error, 130 after an interrupt.
func Main(args []string) int {
	return mainStatus(args, os.Stderr)
}

// mainStatus runs the application on args and returns the exit code, with an error
// written to stderr.
func mainStatus(args []string, stderr io.Writer) int {
	err := App().Run(args)
	if err == nil {
		return 0
	}
	if errors.Is(err, launch.ErrInterrupted) {
		fmt.Fprintln(stderr, "umad: interrupted; completed work is on disk")
		return 130
	}
	fmt.Fprintf(stderr, "umad: %v\n", err)
	return 1
}

// withFloatChecks makes every command refuse NaN and infinite values of its float flags,
// which otherwise fail far from the flag (--lr NaN: "json: unsupported value: NaN").
func withFloatChecks(cmds []*ucli.Command) []*ucli.Command {
	for _, cmd := range cmds {
		if cmd.Before == nil {
			cmd.Before = checkFloatFlags
		}
		withFloatChecks(cmd.Subcommands)
	}
	return cmds
}

func checkFloatFlags(c *ucli.Context) error {
	for _, f := range c.Command.Flags {
		if af, ok := f.(*altsrc.Float64Flag); ok { // a command with --config (config.go)
			f = af.Float64Flag
		}
		if ff, ok := f.(*ucli.Float64Flag); ok && c.IsSet(ff.Name) {
			if v := c.Float64(ff.Name); math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("--%s %v: want a finite number", ff.Name, v)
			}
		}
	}
	return nil
}

// writeOutput writes a command's output file through atomicfile (a regular file replaced
// atomically, a device or pipe written through), or to the app's standard output when
// path is "" or "-".
func writeOutput(c *ucli.Context, path string, fill func(io.Writer) error) error {
	if path != "" && path != atomicfile.Stdout {
		return atomicfile.Write(path, fill)
	}
	w := bufio.NewWriter(c.App.Writer)
	if err := fill(w); err != nil {
		return err
	}
	return w.Flush()
}
