package cli

// Hugging Face hub ids wherever an HF directory is accepted (--agent, sft and score
// --model, convert, export): resolved through huggingface_hub's cache (hfhub/), and
// downloaded into it when the user allows.

import (
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/hfhub"
	"github.com/umad-dev/umad/internal/interrupt"
	"github.com/umad-dev/umad/memplan"
)

// hubDownloadFlag is the app's --hf-download.
var hubDownloadFlag = &ucli.BoolFlag{Name: "hf-download", EnvVars: []string{"UMAD_HF_DOWNLOAD"},
	Usage: "download a Hugging Face model named by id (ORG/NAME[@REVISION]) that is not in the cache (HF_HUB_CACHE, HF_HOME/hub or " +
		"~/.cache/huggingface/hub) into it, as huggingface_hub would: from HF_ENDPOINT (default https://huggingface.co) with HF_TOKEN " +
		"(or the token file that huggingface_hub's login writes), its configuration, tokenizer and safetensors only, a cut transfer resumed, each file " +
		"checked against the hub's checksum; HF_HUB_OFFLINE=1 refuses. Without it an id must be in the cache"}

// hfDir resolves an HF directory argument (hfhub.Resolve), downloading a hub id that is
// not in the cache with --hf-download. snap is the resolved id, nil for a path.
func hfDir(c *ucli.Context, arg string) (dir string, snap *hfhub.Snapshot, err error) {
	var download func(string, hfhub.Ref) (hfhub.Snapshot, error)
	if c.Bool(hubDownloadFlag.Name) {
		download = func(cache string, ref hfhub.Ref) (hfhub.Snapshot, error) {
			ctx, stop := interrupt.Context("")
			defer stop()
			hub := hfhub.FromEnv()
			hub.Progress = downloadBar(c)
			return hub.Download(ctx, cache, ref)
		}
	}
	return hfhub.Resolve(arg, download)
}

// hfDirArg resolves an HF directory argument of a command that records nothing of it.
func hfDirArg(c *ucli.Context, arg string) (string, error) {
	dir, _, err := hfDir(c, arg)
	return dir, err
}

// resolveHFFlag resolves the HF directory flag name in place, when set.
func resolveHFFlag(c *ucli.Context, name string) error {
	if c.String(name) == "" {
		return nil
	}
	dir, err := hfDirArg(c, c.String(name))
	if err != nil {
		return fmt.Errorf("--%s: %w", name, err)
	}
	return c.Set(name, dir)
}

// downloadBar draws a download's progress on stderr, one line per file, redrawn at most
// five times a second.
func downloadBar(c *ucli.Context) func(file string, have, size int64, cut error) {
	var last time.Time
	start := map[string]time.Time{}
	return func(file string, have, size int64, cut error) {
		w := c.App.ErrWriter
		if cut != nil {
			fmt.Fprintf(w, "\n%s: transfer cut at %s (%v); continuing\n", file, memplan.Size(have), cut)
			return
		}
		if _, ok := start[file]; !ok {
			start[file] = time.Now()
		}
		if have < size && time.Since(last) < 200*time.Millisecond {
			return
		}
		last = time.Now()
		const width = 30
		filled := int(width * float64(have) / float64(max(size, 1)))
		rate := float64(have) / max(time.Since(start[file]).Seconds(), 1e-3)
		fmt.Fprintf(w, "\r%-34s [%-*s] %5.1f%% %s of %s, %s/s ", file, width, strings.Repeat("=", min(filled, width)), 100*float64(have)/float64(max(size, 1)),
			memplan.Size(have), memplan.Size(size), memplan.Size(int64(rate)))
		if have >= size {
			fmt.Fprintln(w)
		}
	}
}
