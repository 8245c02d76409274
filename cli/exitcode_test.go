package cli

import "github.com/umad-dev/umad/launch"

// exitCode is the exit status of a command the tests ran (launch.ExitCode).
func exitCode(err error) int { return launch.ExitCode(err) }
