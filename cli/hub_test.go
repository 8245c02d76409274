package cli

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
)

// hubEtag is the hub's ETag of a file: sha256 for the LFS-stored safetensors, git's blob
// sha1 for the others.
func hubEtag(name string, b []byte) string {
	if strings.HasSuffix(name, ".safetensors") {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// newHubCache is an empty Hugging Face cache that HF_HUB_CACHE names.
func newHubCache(t *testing.T) string {
	t.Helper()
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	return cache
}

// hubCache lays out src's files in cache as huggingface_hub caches repo at commit: blobs
// named by ETag, the snapshot's relative symlinks, refs/main.
func hubCache(t *testing.T, cache, repo, commit, src string) {
	t.Helper()
	dir := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	for _, d := range []string{"blobs", "refs", filepath.Join("snapshots", commit)} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		etag := hubEtag(e.Name(), b)
		if err := os.WriteFile(filepath.Join(dir, "blobs", etag), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", etag), filepath.Join(dir, "snapshots", commit, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
}

const hubCommit = "0123456789abcdef0123456789abcdef01234567"

// copyNamed copies a model directory to one named name (a GGUF's general.name is the
// directory's, or the hub repository's, name).
func copyNamed(t *testing.T, src, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// convertOut converts DIR (a path or an id) to a GGUF and returns its bytes.
func convertOut(t *testing.T, dir string, global ...string) []byte {
	t.Helper()
	b, _ := convertWithStderr(t, dir, global...)
	return b
}

// convertWithStderr is convertOut with what the command wrote on stderr.
func convertWithStderr(t *testing.T, dir string, global ...string) ([]byte, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "m.gguf")
	_, stderr, err := runApp(t, append(global, "convert", "hf2gguf", dir, out)...)
	if err != nil {
		t.Fatalf("convert %s: %v\n%s", dir, err, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b, stderr
}

// An id ORG/NAME resolves through a cache laid out as huggingface_hub lays it out; an
// existing directory of the same name wins; an id in no cache is one line naming the
// cache and --hf-download.
func TestHubIDFromCache(t *testing.T) {
	qwen2, qwen3 := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"), filepath.Join(testmodel.Tiny(t, "qwen3"), "hf")
	cache := newHubCache(t)
	hubCache(t, cache, "org/tiny", hubCommit, qwen2)
	want := convertOut(t, copyNamed(t, qwen2, "tiny"))
	if got := convertOut(t, "org/tiny"); !bytes.Equal(got, want) {
		t.Error("convert org/tiny differs from converting the directory the cache holds")
	}
	if got := convertOut(t, "org/tiny@"+hubCommit); !bytes.Equal(got, want) {
		t.Error("convert org/tiny@COMMIT differs")
	}
	// A relative directory org/tiny here is that directory, not the hub's model.
	t.Chdir(t.TempDir())
	if err := os.CopyFS("org/tiny", os.DirFS(qwen3)); err != nil {
		t.Fatal(err)
	}
	if got := convertOut(t, "org/tiny"); bytes.Equal(got, want) || !bytes.Equal(got, convertOut(t, copyNamed(t, qwen3, "tiny"))) {
		t.Error("an existing directory org/tiny did not win over the hub id")
	}
	_, _, err := runApp(t, "convert", "hf2gguf", "org/other", filepath.Join(t.TempDir(), "x.gguf"))
	if err == nil || !strings.Contains(err.Error(), cache) || !strings.Contains(err.Error(), "--hf-download") {
		t.Errorf("an uncached id: %v", err)
	}
}

// `umad train --agent ORG/NAME` trains the cached model, and the run's config.json records
// the id with the commit it resolved to.
func TestTrainRecordsHubID(t *testing.T) {
	hubCache(t, newHubCache(t), "org/tiny", hubCommit, filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"))
	out := filepath.Join(t.TempDir(), "run")
	args := trainArgs(t, out, "1")
	args[slices.Index(args, "--agent")+1] = "org/tiny"
	if _, stderr, err := runApp(t, args...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Agents []struct{ Model, Hub string }
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Agents) != 1 || cfg.Agents[0].Hub != "org/tiny@"+hubCommit || !strings.HasSuffix(cfg.Agents[0].Model, filepath.Join("snapshots", hubCommit)) {
		t.Errorf("config.json agents: %+v", cfg.Agents)
	}
}

// `umad --hf-download` fetches an id missing from the cache from HF_ENDPOINT (a local
// server answering the hub's revision API and resolve URLs) into huggingface_hub's layout.
func TestHubDownloadFromCLI(t *testing.T) {
	src := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var siblings []map[string]string
	for _, e := range entries {
		siblings = append(siblings, map[string]string{"rfilename": e.Name()})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/models/org/tiny/revision/main" {
			json.NewEncoder(w).Encode(map[string]any{"sha": hubCommit, "siblings": siblings})
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, "/org/tiny/resolve/"+hubCommit+"/")
		b, err := os.ReadFile(filepath.Join(src, name))
		if !ok || err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Repo-Commit", hubCommit)
		w.Header().Set("ETag", `"`+hubEtag(name, b)+`"`)
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		if r.Method == http.MethodGet {
			w.Write(b)
		}
	}))
	defer srv.Close()
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_TOKEN", "x")
	if _, _, err := runApp(t, "convert", "hf2gguf", "org/tiny", filepath.Join(t.TempDir(), "x.gguf")); err == nil {
		t.Fatal("downloaded without --hf-download")
	}
	got, stderr := convertWithStderr(t, "org/tiny", "--hf-download")
	if !bytes.Equal(got, convertOut(t, copyNamed(t, src, "tiny"))) {
		t.Error("the downloaded model converts otherwise than its source")
	}
	if !strings.Contains(stderr, "model.safetensors") || !strings.Contains(stderr, "100.0%") {
		t.Errorf("no progress bar on stderr:\n%s", stderr)
	}
	if _, err := os.Readlink(filepath.Join(cache, "models--org--tiny", "snapshots", hubCommit, "config.json")); err != nil {
		t.Errorf("no snapshot link: %v", err)
	}
}

// An experiment file's agent sets take hub ids: the dry run plans the training cell on the
// cached models, and the cell trains on them and records their ids and commits.
func TestExperimentHubIDs(t *testing.T) {
	torchtest.Open(t)
	cache := newHubCache(t)
	hubCache(t, cache, "org/q2", hubCommit, filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"))
	hubCache(t, cache, "org/q3", hubCommit, filepath.Join(testmodel.Tiny(t, "qwen3"), "hf"))
	dir := t.TempDir()
	out := filepath.Join(dir, "exp")
	text := strings.NewReplacer("OUT", out, "Q2/hf", "org/q2", "Q3/hf", "org/q3", "Q2", testmodel.Tiny(t, "qwen2"), "Q3", testmodel.Tiny(t, "qwen3")).Replace(expGrid)
	file := filepath.Join(dir, "grid.toml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runApp(t, "experiment", "--dry-run", file)
	if err != nil || !strings.Contains(stdout, "memory plan of the largest training cell") {
		t.Fatalf("dry run: %v\n%s\n%s", err, stdout, stderr)
	}
	if _, stderr, err := runApp(t, "experiment", "--only", "train/ippo", file); err != nil {
		t.Fatalf("the training cell: %v\n%s", err, stderr)
	}
	settings, _ := runConfig(t, filepath.Join(out, "train", "ippo", "pair", "seed-1"))
	agents := settings["agents"].([]any)
	for i, id := range []string{"org/q2", "org/q3"} {
		if got := agents[i].(map[string]any)["hub"]; got != id+"@"+hubCommit {
			t.Errorf("agent %d records hub %v, want %s@%s", i, got, id, hubCommit)
		}
	}
}
