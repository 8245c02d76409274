package cli

import (
	"encoding/json"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/envreport"
)

func init() {
	register(&ucli.Command{
		Name:  "env",
		Usage: "print the build, the backends and devices, libtorch and the thread settings (paste it into bug reports)",
		Description: "What umad runs on: its build (commit, Go, the pinned ggml), llama.cpp's CPU features,\n" +
			"the GPU backend library if one was found (next to the binary, in its build/cuda, or in\n" +
			"$" + engine.BackendsEnv + ") and why it is not in use if it is not, every device with its\n" +
			"memory and compute capability, the libtorch plugin and whether it sees a GPU, and the\n" +
			"thread settings. It starts no model and changes nothing.",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON instead of text"},
			&ucli.StringFlag{Name: "torch-plugin", EnvVars: []string{torch.PluginEnv}, Usage: "path to " + torch.PluginName},
		},
		Action: func(c *ucli.Context) error {
			r := envreport.Collect(c.String("torch-plugin"))
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			r.Write(c.App.Writer)
			return nil
		},
	})
}
