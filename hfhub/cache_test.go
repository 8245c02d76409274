package hfhub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// gitBlobSha1 is git's id of a file's bytes, the hub's ETag of a file not in LFS.
func gitBlobSha1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// cacheRepo lays out one snapshot of repo as huggingface_hub documents its cache (the
// "Manage the cache" guide): blobs named by ETag, the snapshot's files relative symlinks to
// them, and refs/REV holding the commit for each revision in refs.
func cacheRepo(t *testing.T, cache, repo, commit string, files map[string][]byte, lfs map[string]bool, refs ...string) {
	t.Helper()
	dir := repoDir(cache, repo)
	for name, b := range files {
		etag := gitBlobSha1(b)
		if lfs[name] {
			etag = sha256Hex(b)
		}
		blob := filepath.Join(dir, "blobs", etag)
		link := filepath.Join(dir, "snapshots", commit, name)
		for _, d := range []string{filepath.Dir(blob), filepath.Dir(link)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(blob, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(filepath.Dir(link), blob)
		if err := os.Symlink(rel, link); err != nil {
			t.Fatal(err)
		}
	}
	for _, ref := range refs {
		p := filepath.Join(dir, "refs", ref)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(commit), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseID(t *testing.T) {
	for s, want := range map[string]Ref{
		"Qwen/Qwen2.5-3B-Instruct":           {"Qwen/Qwen2.5-3B-Instruct", "main"},
		"Qwen/Qwen3-4B-Instruct-2507@v1.0":   {"Qwen/Qwen3-4B-Instruct-2507", "v1.0"},
		"org/m@refs/pr/3":                    {"org/m", "refs/pr/3"},
		"meta-llama/Llama-3.2-1B@0123abcdef": {"meta-llama/Llama-3.2-1B", "0123abcdef"},
	} {
		if got, ok := ParseID(s); !ok || got != want {
			t.Errorf("ParseID(%q) = %+v, %v; want %+v", s, got, ok, want)
		}
	}
	for _, s := range []string{"model.gguf", "./org/name", "/org/name", "runs/x/y", "org/", "/name", "org/na--me",
		"org/a..b", "org/-x", "org/name@", "org/name@../x", "org/name@a//b", "../org"} {
		if r, ok := ParseID(s); ok {
			t.Errorf("ParseID(%q) = %+v, accepted", s, r)
		}
	}
}

// CacheDir follows huggingface_hub: HF_HUB_CACHE, else HF_HOME/hub, else the XDG cache's
// huggingface/hub, else ~/.cache/huggingface/hub.
func TestCacheDir(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	for _, tc := range []struct{ hubCache, home, xdg, want string }{
		{"/c", "/h", "/x", "/c"},
		{"", "/h", "/x", "/h/hub"},
		{"", "", "/x", "/x/huggingface/hub"},
		{"", "", "", "/home/u/.cache/huggingface/hub"},
	} {
		t.Setenv("HF_HUB_CACHE", tc.hubCache)
		t.Setenv("HF_HOME", tc.home)
		t.Setenv("XDG_CACHE_HOME", tc.xdg)
		if got, err := CacheDir(); err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v", tc, got, err)
		}
	}
}

// Cached resolves a branch or tag through refs/, a commit directly, and refuses a
// snapshot that lacks a file the model needs (a removed blob leaves a broken link).
func TestCached(t *testing.T) {
	cache := t.TempDir()
	old, commit := "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	files := map[string][]byte{"config.json": []byte(`{"model_type":"qwen2"}`), "model.safetensors": []byte("weights")}
	lfs := map[string]bool{"model.safetensors": true}
	cacheRepo(t, cache, "org/tiny", old, files, lfs, "v1")
	cacheRepo(t, cache, "org/tiny", commit, map[string][]byte{"config.json": []byte(`{"model_type":"qwen3"}`), "model.safetensors": []byte("new")}, lfs, "main")
	for rev, want := range map[string]string{"main": commit, "v1": old, old: old} {
		s, err := Cached(cache, Ref{"org/tiny", rev})
		if err != nil || s.Commit != want || s.Dir != filepath.Join(cache, "models--org--tiny", "snapshots", want) {
			t.Errorf("%s: %+v, %v", rev, s, err)
			continue
		}
		if b, err := os.ReadFile(filepath.Join(s.Dir, "model.safetensors")); err != nil || (rev == "main") != (string(b) == "new") {
			t.Errorf("%s: reads %q, %v", rev, b, err)
		}
		if s.ID() != "org/tiny@"+want {
			t.Errorf("ID %q", s.ID())
		}
	}
	for _, r := range []Ref{{"org/tiny", "v2"}, {"org/other", "main"}, {"org/tiny", "3333333333333333333333333333333333333333"}} {
		if _, err := Cached(cache, r); !errors.Is(err, ErrNotCached) {
			t.Errorf("%s: %v, want not cached", r, err)
		}
	}
	// A blob removed from under the snapshot.
	if err := os.Remove(filepath.Join(cache, "models--org--tiny", "blobs", sha256Hex([]byte("new")))); err != nil {
		t.Fatal(err)
	}
	if _, err := Cached(cache, Ref{"org/tiny", "main"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("broken link: %v", err)
	}
}

// A sharded checkpoint is whole when every shard its index lists is there.
func TestCachedShards(t *testing.T) {
	cache := t.TempDir()
	commit := "4444444444444444444444444444444444444444"
	index := []byte(`{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}`)
	files := map[string][]byte{"config.json": []byte("{}"), "model.safetensors.index.json": index, "model-00001-of-00002.safetensors": []byte("1")}
	cacheRepo(t, cache, "org/big", commit, files, nil, "main")
	if _, err := Cached(cache, Ref{"org/big", "main"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("a missing shard: %v", err)
	}
	cacheRepo(t, cache, "org/big", commit, map[string][]byte{"model-00002-of-00002.safetensors": []byte("2")}, nil)
	if _, err := Cached(cache, Ref{"org/big", "main"}); err != nil {
		t.Errorf("every shard: %v", err)
	}
}
