package cli

// Hugging Face hub ids wherever an HF directory is accepted (--agent, sft and score
// --model, convert, export): resolved through huggingface_hub's cache (hfhub/), and
// downloaded into it when the user allows.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/hfhub"
	"github.com/umad-dev/umad/memplan"
)

// hubDownloadFlag is the app's --hf-download.
var hubDownloadFlag = &ucli.BoolFlag{Name: "hf-download", EnvVars: []string{"UMAD_HF_DOWNLOAD"},
	Usage: "download a Hugging Face model named by id (ORG/NAME[@REVISION]) that is not in the cache (HF_HUB_CACHE, HF_HOME/hub or " +
		"~/.cache/huggingface/hub) into it, as huggingface_hub would: from HF_ENDPOINT (default https://huggingface.co) with HF_TOKEN " +
		"(or the token file that huggingface_hub's login writes), its configuration, tokenizer and safetensors only, a cut transfer resumed, each file " +
		"checked against the hub's checksum; HF_HUB_OFFLINE=1 refuses. Without it an id must be in the cache"}

// hfDir resolves an HF directory argument. A path that exists is that path, whatever it
// looks like (so runs/x stays a directory); else ORG/NAME[@REVISION] is a hub id, found in
// the cache or, with --hf-download, downloaded; anything else is returned as given, for
// the command to say it is missing. snap is the resolved id, nil for a path.
func hfDir(c *ucli.Context, arg string) (dir string, snap *hfhub.Snapshot, err error) {
	if _, err := os.Stat(arg); err == nil {
		return arg, nil, nil
	}
	ref, ok := hfhub.ParseID(arg)
	if !ok {
		return arg, nil, nil
	}
	cache, err := hfhub.CacheDir()
	if err != nil {
		return "", nil, err
	}
	s, err := hfhub.Cached(cache, ref)
	if err == nil {
		return s.Dir, &s, nil
	}
	if !errors.Is(err, hfhub.ErrNotCached) {
		return "", nil, err
	}
	if !c.Bool(hubDownloadFlag.Name) {
		return "", nil, fmt.Errorf("%s: no such file or directory, nor a model in the Hugging Face cache %s (%v); download it with umad --hf-download (or UMAD_HF_DOWNLOAD=1)",
			arg, cache, err)
	}
	ctx, stop := interruptContext("")
	defer stop()
	hub := hfhub.FromEnv()
	hub.Progress = downloadBar(c)
	if s, err = hub.Download(ctx, cache, ref); err != nil {
		return "", nil, err
	}
	return s.Dir, &s, nil
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
