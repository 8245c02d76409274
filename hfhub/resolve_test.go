package hfhub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A path that exists wins over the id it spells, an id in the cache is its snapshot, one
// that is not is downloaded only when a download is given, and anything else comes back as
// given.
func TestResolve(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	commit := "2222222222222222222222222222222222222222"
	cacheRepo(t, cache, "org/tiny", commit, map[string][]byte{"config.json": []byte(`{}`), "model.safetensors": []byte("w")},
		map[string]bool{"model.safetensors": true}, "main")
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Join("org", "tiny"), 0o755); err != nil {
		t.Fatal(err)
	}
	if dir, snap, err := Resolve("org/tiny", nil); err != nil || dir != "org/tiny" || snap != nil {
		t.Errorf("an existing path: %q %v %v", dir, snap, err)
	}
	if dir, snap, err := Resolve("org/tiny@main", nil); err != nil || snap == nil || snap.Commit != commit || dir != snap.Dir {
		t.Errorf("a cached id: %q %+v %v", dir, snap, err)
	}
	if dir, snap, err := Resolve("no/such/path", nil); err != nil || dir != "no/such/path" || snap != nil {
		t.Errorf("neither: %q %v %v", dir, snap, err)
	}
	if _, _, err := Resolve("org/other", nil); err == nil || !strings.Contains(err.Error(), "umad --hf-download") {
		t.Errorf("not cached, no download: %v", err)
	}
	var asked Ref
	download := func(c string, r Ref) (Snapshot, error) {
		asked = r
		return Snapshot{Ref: r, Commit: commit, Dir: filepath.Join(c, "downloaded")}, nil
	}
	if dir, snap, err := Resolve("org/other", download); err != nil || asked.Repo != "org/other" || dir != filepath.Join(cache, "downloaded") || snap.Repo != "org/other" {
		t.Errorf("downloaded: %q %+v %v (asked %v)", dir, snap, err, asked)
	}
}
