package hfhub

// Downloading a snapshot into the cache, through the hub's HTTP endpoints as
// huggingface_hub uses them:
//
//	GET  ENDPOINT/api/models/ORG/NAME/revision/REV   {"sha": COMMIT, "siblings": [{"rfilename": ...}]}
//	HEAD ENDPOINT/ORG/NAME/resolve/COMMIT/FILE       X-Repo-Commit; X-Linked-Etag and X-Linked-Size for an
//	                                                 LFS file (on a redirect to its CDN), else ETag and
//	                                                 Content-Length; relative redirects (a renamed repo) followed
//	GET  the same, or the CDN's Location             the bytes, from an offset with Range
//
// Each file goes to blobs/ETAG.incomplete, which a cut download continues (Range), is
// checked against its ETag (sha256 for LFS files, git's blob sha1 for the others) and only
// then renamed to blobs/ETAG and linked from the snapshot; refs/REV is written last.

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/umad-dev/umad/internal/atomicfile"
)

// Client downloads from a hub.
type Client struct {
	Endpoint string // HF_ENDPOINT, else https://huggingface.co
	Token    string // HF_TOKEN, else the token file huggingface_hub's login writes
	Offline  bool   // HF_HUB_OFFLINE: refuse to download
	// Progress, when set, hears each file's bytes so far (have == size at its end), and
	// cut with the error of a try that a next try continues.
	Progress func(file string, have, size int64, cut error)
	// Stall is the longest wait for a byte (headers or body) before a try fails.
	Stall time.Duration
	http  *http.Client
}

// FromEnv is a client configured as huggingface_hub configures itself from the
// environment.
func FromEnv() *Client {
	c := &Client{Endpoint: strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"), Token: os.Getenv("HF_TOKEN"), Stall: time.Minute}
	if c.Endpoint == "" {
		c.Endpoint = "https://huggingface.co"
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		c.Offline = true
	}
	if c.Token == "" {
		tokenFile := os.Getenv("HF_TOKEN_PATH")
		if tokenFile == "" {
			if cache, err := CacheDir(); err == nil {
				tokenFile = filepath.Join(filepath.Dir(cache), "token")
			}
		}
		if b, err := os.ReadFile(tokenFile); err == nil {
			c.Token = strings.TrimSpace(string(b))
		}
	}
	return c
}

// files umad reads from a model repository: its top level's configuration, tokenizer,
// chat template and safetensors weights (not other formats' copies, nor subfolders such as
// original/ or onnx/).
var wanted = regexp.MustCompile(`^[^/]+\.(json|safetensors|txt|model|jinja)$`)

// tries is how often a cut transfer is continued before the download gives up.
const tries = 5

// Download puts r's snapshot into the cache and returns it.
func (c *Client) Download(ctx context.Context, cache string, r Ref) (Snapshot, error) {
	s := Snapshot{Ref: r}
	if c.Offline {
		return s, fmt.Errorf("%s is not in the Hugging Face cache, and HF_HUB_OFFLINE is set: not downloading", r)
	}
	info, err := c.revision(ctx, r)
	if err != nil {
		return s, err
	}
	s.Commit = info.Sha
	dir := repoDir(cache, r.Repo)
	s.Dir = filepath.Join(dir, "snapshots", s.Commit)
	n := 0
	for _, f := range info.Siblings {
		if !wanted.MatchString(f.Name) {
			continue
		}
		n++
		if err := c.file(ctx, dir, s, f.Name); err != nil {
			return s, fmt.Errorf("%s: %s: %w", r, f.Name, err)
		}
	}
	if n == 0 {
		return s, fmt.Errorf("%s has no files umad reads (config.json, safetensors, tokenizer)", r)
	}
	if missing := incomplete(s.Dir); missing != "" {
		return s, fmt.Errorf("%s is no Hugging Face model directory umad reads: it has no %s", r, missing)
	}
	if r.Revision != s.Commit {
		if err := writeRef(dir, r.Revision, s.Commit); err != nil {
			return s, err
		}
	}
	return s, nil
}

type revisionInfo struct {
	Sha      string `json:"sha"`
	Siblings []struct {
		Name string `json:"rfilename"`
	} `json:"siblings"`
}

// revision asks the hub for r's commit and files.
func (c *Client) revision(ctx context.Context, r Ref) (revisionInfo, error) {
	var info revisionInfo
	u := c.Endpoint + "/api/models/" + r.Repo + "/revision/" + url.PathEscape(r.Revision)
	ctx, cancel := context.WithTimeout(ctx, c.Stall) // a small answer: all of it within the stall time
	defer cancel()
	resp, err := c.do(ctx, http.MethodGet, u, nil)
	if err != nil {
		return info, err
	}
	defer resp.Body.Close()
	if err := status(resp, r); err != nil {
		return info, err
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return info, fmt.Errorf("%s: the hub's answer: %w", u, err)
	}
	if !commitHash.MatchString(info.Sha) {
		return info, fmt.Errorf("%s: the hub gave commit %q", u, info.Sha)
	}
	return info, nil
}

// status turns an HTTP failure into one line that says what to do.
func status(resp *http.Response, r Ref) error {
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent:
		return nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: the hub refused access (%s): a gated or private model needs HF_TOKEN with access to it", r, resp.Status)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: not found on the hub %s (%s): check the id and revision (a private model needs HF_TOKEN)", r, resp.Request.URL.Host, resp.Status)
	}
	return fmt.Errorf("%s: %s %s: %s", r, resp.Request.Method, resp.Request.URL, resp.Status)
}

// do sends one request; a response's headers must come within the stall time (its body
// is the caller's to bound). The token goes to the hub's own host only.
func (c *Client) do(ctx context.Context, method, u string, header http.Header) (*http.Response, error) {
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = c.Stall
		c.http = &http.Client{Transport: t, CheckRedirect: c.redirect}
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept-Encoding", "identity") // sizes and checksums are the raw bytes'
	req.Header.Set("User-Agent", "umad")
	if hub, err := url.Parse(c.Endpoint); err == nil && req.URL.Host == hub.Host && c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return c.http.Do(req)
}

// redirect follows a HEAD only to the hub itself (a relative Location: a renamed
// repository), so the LFS headers of the redirect to the CDN stay readable; a GET follows.
func (c *Client) redirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("more than 10 redirects")
	}
	if req.Method == http.MethodHead {
		if loc, err := url.Parse(req.Response.Header.Get("Location")); err != nil || loc.Host != "" {
			return http.ErrUseLastResponse
		}
	}
	if req.URL.Host != via[0].URL.Host {
		req.Header.Del("Authorization")
	}
	return nil
}

// meta is a file's etag, size and location, from the hub's HEAD.
type meta struct {
	etag, location string
	size           int64
}

func (c *Client) head(ctx context.Context, s Snapshot, name string) (meta, error) {
	var m meta
	u := c.Endpoint + "/" + s.Repo + "/resolve/" + s.Commit + "/" + (&url.URL{Path: name}).EscapedPath()
	hctx, cancel := context.WithTimeout(ctx, c.Stall)
	defer cancel()
	resp, err := c.do(hctx, http.MethodHead, u, nil)
	if err != nil {
		return m, err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		m.location = resp.Header.Get("Location")
	} else if err := status(resp, s.Ref); err != nil {
		return m, err
	} else {
		m.location = resp.Request.URL.String()
	}
	if commit := resp.Header.Get("X-Repo-Commit"); commit != "" && commit != s.Commit {
		return m, fmt.Errorf("the hub serves commit %s, not %s", commit, s.Commit)
	}
	m.etag = resp.Header.Get("X-Linked-Etag")
	if m.etag == "" {
		m.etag = resp.Header.Get("ETag")
	}
	m.etag = strings.Trim(strings.TrimPrefix(m.etag, "W/"), `"`)
	size := resp.Header.Get("X-Linked-Size")
	if size == "" {
		size = resp.Header.Get("Content-Length")
	}
	if m.size, err = strconv.ParseInt(size, 10, 64); err != nil || m.size < 0 {
		return m, fmt.Errorf("the hub gave no size (%q)", size)
	}
	if checksum(m.etag, 0) == nil {
		return m, fmt.Errorf("the hub gave no checksum to verify it by (ETag %q is neither a sha256 nor a git blob sha1)", m.etag)
	}
	if loc, err := url.Parse(m.location); err == nil && loc.Host == "" { // relative to the hub
		m.location = c.Endpoint + m.location
	}
	return m, nil
}

// checksum is the hash an etag names: sha256 of the bytes (LFS files) or git's blob sha1
// ("blob SIZE\0" then the bytes); nil for any other etag.
func checksum(etag string, size int64) hash.Hash {
	if _, err := hex.DecodeString(etag); err != nil {
		return nil
	}
	switch len(etag) {
	case 64:
		return sha256.New()
	case 40:
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", size)
		return h
	}
	return nil
}

// file puts one file of the snapshot into the cache: its blob (downloaded unless there)
// and the snapshot's link to it. Another process downloading the same blob (a rank, or
// huggingface_hub, which locks the same file) is waited for.
func (c *Client) file(ctx context.Context, dir string, s Snapshot, name string) error {
	m, err := c.head(ctx, s, name)
	if err != nil {
		return err
	}
	blob := filepath.Join(dir, "blobs", m.etag)
	if !exists(blob) {
		unlock, err := lock(ctx, filepath.Join(filepath.Dir(dir), ".locks", filepath.Base(dir), m.etag+".lock"))
		if err != nil {
			return err
		}
		err = c.blob(ctx, blob, name, m)
		unlock()
		if err != nil {
			return err
		}
	}
	link := filepath.Join(s.Dir, filepath.FromSlash(name))
	target, err := filepath.Rel(filepath.Dir(link), blob)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	tmp := link + ".tmp-umad"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

// blob downloads the file into blob, continuing a cut transfer, and verifies it.
func (c *Client) blob(ctx context.Context, blob, name string, m meta) error {
	if exists(blob) { // the process we waited for wrote it
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return err
	}
	part := blob + ".incomplete"
	progress := func(have int64, cut error) {
		if c.Progress != nil {
			c.Progress(name, have, m.size, cut)
		}
	}
	for try := 1; ; try++ {
		err := c.fetch(ctx, part, m, progress)
		if err == nil {
			break
		}
		var f fatal
		if ctx.Err() != nil || try == tries || errors.As(err, &f) {
			return err
		}
		var have int64
		if fi, serr := os.Stat(part); serr == nil {
			have = fi.Size()
		}
		progress(have, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
	if err := verify(part, m); err != nil {
		os.Remove(part) // a corrupt file would be continued, never repaired
		return err
	}
	return os.Rename(part, blob)
}

// fatal marks a failure that another try would repeat (unlike a cut transfer).
type fatal struct{ error }

// fetch appends the rest of the file to part, from where it ends (Range).
func (c *Client) fetch(ctx context.Context, part string, m meta, progress func(int64, error)) error {
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fatal{err}
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if have >= m.size {
		return nil // verify decides
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	header := http.Header{}
	if have > 0 {
		header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.do(ctx, http.MethodGet, m.location, header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)) {
			return fatal{fmt.Errorf("the server answered Range bytes=%d- with %q", have, resp.Header.Get("Content-Range"))}
		}
	case http.StatusOK: // the whole file again: start over
		if have, err = 0, f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	default:
		return fatal{fmt.Errorf("GET %s: %s", resp.Request.URL.Redacted(), resp.Status)}
	}
	progress(have, nil)
	// A body that stops sending is a cut too: each byte must come within the stall time.
	watchdog := time.AfterFunc(c.Stall, cancel)
	defer watchdog.Stop()
	buf := make([]byte, 1<<20)
	for {
		n, rerr := resp.Body.Read(buf)
		watchdog.Reset(c.Stall)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				return fatal{err}
			}
			have += int64(n)
			progress(have, nil)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	return f.Sync()
}

// verify checks a downloaded file's size and checksum against the hub's.
func verify(part string, m meta) error {
	f, err := os.Open(part)
	if err != nil {
		return err
	}
	defer f.Close()
	h := checksum(m.etag, m.size)
	n, err := io.Copy(h, f)
	switch {
	case err != nil:
		return err
	case n != m.size:
		return fmt.Errorf("downloaded %d bytes, the hub says %d; removed, run again", n, m.size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.etag {
		return fmt.Errorf("corrupt download: checksum %s, the hub's %s; removed, run again", got, m.etag)
	}
	return nil
}

// lock takes an exclusive flock on path, waiting (until ctx ends) for whoever holds it.
func lock(ctx context.Context, path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeRef records that revision names commit.
func writeRef(dir, revision, commit string) error {
	p := filepath.Join(dir, "refs", filepath.FromSlash(revision))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteBytes(p, []byte(commit))
}
