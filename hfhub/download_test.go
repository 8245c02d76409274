package hfhub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHub serves one repository as the hub's endpoints do: the revision API, HEAD and GET
// of /REPO/resolve/REV/FILE (a file in LFS answered with a 302 to a CDN path, with the
// X-Linked-* headers), and the CDN, which honours Range.
type fakeHub struct {
	repo, commit string
	files        map[string][]byte
	lfs          map[string]bool
	token        string // required as a Bearer token when set
	corrupt      string // a file whose bytes the CDN alters
	cutOnce      string // a file whose first GET is cut halfway

	mu     sync.Mutex
	cut    bool
	ranges []string // Range headers of the CDN's GETs
	gets   int      // GETs of file bytes
	reqs   int
	srv    *httptest.Server
}

func (h *fakeHub) start(t *testing.T) {
	h.srv = httptest.NewServer(h)
	t.Cleanup(h.srv.Close)
}

func (h *fakeHub) etag(name string) string {
	if h.lfs[name] {
		return sha256Hex(h.files[name])
	}
	return gitBlobSha1(h.files[name])
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.reqs++
	h.mu.Unlock()
	if h.token != "" && !strings.HasPrefix(r.URL.Path, "/cdn/") && r.Header.Get("Authorization") != "Bearer "+h.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if rev, ok := strings.CutPrefix(r.URL.Path, "/api/models/"+h.repo+"/revision/"); ok {
		if rev != "main" && rev != h.commit {
			http.NotFound(w, r)
			return
		}
		info := map[string]any{"id": h.repo, "sha": h.commit, "siblings": []map[string]string{}}
		for name := range h.files {
			info["siblings"] = append(info["siblings"].([]map[string]string), map[string]string{"rfilename": name})
		}
		json.NewEncoder(w).Encode(info)
		return
	}
	if name, ok := strings.CutPrefix(r.URL.Path, "/cdn/"); ok {
		h.cdn(w, r, name)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/"+h.repo+"/resolve/"+h.commit+"/")
	if _, exists := h.files[name]; !ok || !exists {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("X-Repo-Commit", h.commit)
	if h.lfs[name] {
		w.Header().Set("X-Linked-Etag", `"`+h.etag(name)+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(h.files[name])))
		w.Header().Set("ETag", `"not-the-file"`)
		http.Redirect(w, r, h.srv.URL+"/cdn/"+name, http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+h.etag(name)+`"`)
	if r.Method == http.MethodGet {
		h.mu.Lock()
		h.gets++
		h.mu.Unlock()
	}
	http.ServeContent(w, r, name, time.Time{}, strings.NewReader(string(h.files[name])))
}

// cdn serves an LFS file's bytes: altered for h.corrupt, cut halfway the first time for
// h.cutOnce.
func (h *fakeHub) cdn(w http.ResponseWriter, r *http.Request, name string) {
	b := h.files[name]
	if name == h.corrupt {
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 1
	}
	h.mu.Lock()
	h.gets++
	h.ranges = append(h.ranges, r.Header.Get("Range"))
	cut := name == h.cutOnce && !h.cut
	h.cut = h.cut || cut
	h.mu.Unlock()
	if cut {
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b[:len(b)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // closes the connection mid-body
	}
	http.ServeContent(w, r, name, time.Time{}, strings.NewReader(string(b)))
}

func newFakeHub(t *testing.T) *fakeHub {
	weights := make([]byte, 300_000)
	for i := range weights {
		weights[i] = byte(i * 7)
	}
	h := &fakeHub{repo: "org/tiny", commit: "5555555555555555555555555555555555555555",
		files: map[string][]byte{"config.json": []byte(`{"model_type": "qwen2"}`), "model.safetensors": weights,
			"tokenizer.json": []byte(`{"model": {}}`), "README.md": []byte("# tiny"), "original/consolidated.pth": []byte("pth")},
		lfs: map[string]bool{"model.safetensors": true, "original/consolidated.pth": true}}
	h.start(t)
	return h
}

func testClient(h *fakeHub) *Client {
	return &Client{Endpoint: h.srv.URL, Token: h.token, Stall: 10 * time.Second}
}

// Download writes the snapshot in huggingface_hub's layout (blobs named by ETag, the
// snapshot's relative links, refs/main), only the files umad reads; Cached then finds it,
// and a second Download fetches no bytes again.
func TestDownloadLayout(t *testing.T) {
	h := newFakeHub(t)
	h.token = "secret"
	cache := t.TempDir()
	c := testClient(h)
	var last int64
	c.Progress = func(file string, have, size int64, cut error) {
		if file == "model.safetensors" {
			last = have
		}
	}
	s, err := c.Download(context.Background(), cache, Ref{"org/tiny", "main"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Commit != h.commit || last != int64(len(h.files["model.safetensors"])) {
		t.Errorf("snapshot %+v, progress ended at %d", s, last)
	}
	dir := repoDir(cache, "org/tiny")
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		link := filepath.Join(dir, "snapshots", h.commit, name)
		target, err := os.Readlink(link)
		if err != nil || target != filepath.Join("..", "..", "blobs", h.etag(name)) {
			t.Errorf("%s -> %q, %v", name, target, err)
		}
		if b, err := os.ReadFile(link); err != nil || string(b) != string(h.files[name]) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"README.md", "original"} {
		if _, err := os.Lstat(filepath.Join(s.Dir, name)); err == nil {
			t.Errorf("%s was downloaded", name)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "refs", "main")); err != nil || string(b) != h.commit {
		t.Errorf("refs/main: %q, %v", b, err)
	}
	if got, err := Cached(cache, Ref{"org/tiny", "main"}); err != nil || got.Dir != s.Dir {
		t.Errorf("Cached after Download: %+v, %v", got, err)
	}
	gets := h.gets
	if _, err := c.Download(context.Background(), cache, Ref{"org/tiny", "main"}); err != nil || h.gets != gets {
		t.Errorf("second Download: %v, %d more GETs of bytes", err, h.gets-gets)
	}
}

// A transfer cut halfway continues from where the file ends (Range) and is verified.
func TestDownloadResumes(t *testing.T) {
	h := newFakeHub(t)
	h.cutOnce = "model.safetensors"
	cache := t.TempDir()
	var cuts int
	c := testClient(h)
	c.Progress = func(file string, have, size int64, cut error) {
		if cut != nil {
			cuts++
		}
	}
	s, err := c.Download(context.Background(), cache, Ref{"org/tiny", "main"})
	if err != nil {
		t.Fatal(err)
	}
	half := len(h.files["model.safetensors"]) / 2
	if len(h.ranges) != 2 || h.ranges[0] != "" || h.ranges[1] != "bytes="+strconv.Itoa(half)+"-" || cuts != 1 {
		t.Errorf("CDN requests with Range %q, %d cuts reported; want a whole request, then bytes=%d-", h.ranges, cuts, half)
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir, "model.safetensors")); err != nil || string(b) != string(h.files["model.safetensors"]) {
		t.Errorf("the resumed file differs: %v", err)
	}
}

// A file whose bytes do not match the hub's checksum is refused and removed: no blob, no
// partial file to continue, no link, no ref.
func TestDownloadRefusesCorrupt(t *testing.T) {
	h := newFakeHub(t)
	h.corrupt = "model.safetensors"
	cache := t.TempDir()
	_, err := testClient(h).Download(context.Background(), cache, Ref{"org/tiny", "main"})
	if err == nil || !strings.Contains(err.Error(), "corrupt download") {
		t.Fatalf("err = %v, want a corrupt download", err)
	}
	dir := repoDir(cache, "org/tiny")
	etag := h.etag("model.safetensors")
	for _, p := range []string{filepath.Join(dir, "blobs", etag), filepath.Join(dir, "blobs", etag+".incomplete"),
		filepath.Join(dir, "snapshots", h.commit, "model.safetensors"), filepath.Join(dir, "refs", "main")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is there", p)
		}
	}
	if _, err := Cached(cache, Ref{"org/tiny", "main"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("Cached: %v", err)
	}
}

// HF_HUB_OFFLINE refuses before any request; a missing token and an unknown revision are
// one line that says what to do.
func TestDownloadRefusals(t *testing.T) {
	h := newFakeHub(t)
	t.Setenv("HF_ENDPOINT", h.srv.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "1")
	c := FromEnv()
	if c.Endpoint != h.srv.URL || !c.Offline {
		t.Fatalf("FromEnv: %+v", c)
	}
	if _, err := c.Download(context.Background(), t.TempDir(), Ref{"org/tiny", "main"}); err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") || h.reqs != 0 {
		t.Errorf("offline: %v after %d requests", err, h.reqs)
	}
	c.Offline = false
	if _, err := c.Download(context.Background(), t.TempDir(), Ref{"org/tiny", "v9"}); err == nil || !strings.Contains(err.Error(), "not found on the hub") {
		t.Errorf("unknown revision: %v", err)
	}
	h.token = "secret"
	if _, err := c.Download(context.Background(), t.TempDir(), Ref{"org/tiny", "main"}); err == nil || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Errorf("no token: %v", err)
	}
	// The token file huggingface_hub's login writes, beside the cache.
	if err := os.WriteFile(filepath.Join(os.Getenv("HF_HOME"), "token"), []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_HUB_OFFLINE", "")
	if _, err := FromEnv().Download(context.Background(), t.TempDir(), Ref{"org/tiny", "main"}); err != nil {
		t.Errorf("with the token file: %v", err)
	}
}
