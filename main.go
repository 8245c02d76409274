// Command umad evaluates and trains teams of LLM agents that debate math problems.
package main

import (
	"os"

	"github.com/umad-dev/umad/cli"
)

func main() { os.Exit(cli.Main(os.Args)) }
