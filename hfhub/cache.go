// Package hfhub finds Hugging Face Hub models by id (ORG/NAME[@REVISION]) in the cache
// that huggingface_hub keeps, and downloads missing ones into it (download.go), in its
// layout, so Python tools and umad share one copy:
//
//	CACHE/models--ORG--NAME/refs/REVISION          the commit a branch or tag named
//	CACHE/models--ORG--NAME/snapshots/COMMIT/FILE  a relative symlink to ../../blobs/ETAG
//	CACHE/models--ORG--NAME/blobs/ETAG             the file: its sha256 (LFS) or git blob sha1
//
// CACHE is HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub.
package hfhub

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Ref names a model repository on the hub and a revision of it (a branch, tag or commit).
type Ref struct {
	Repo     string // ORG/NAME
	Revision string // "main" when the id names none
}

func (r Ref) String() string { return r.Repo + "@" + r.Revision }

// Snapshot is a revision found in (or downloaded into) the cache.
type Snapshot struct {
	Ref
	Commit string // the 40-hex commit the revision resolved to
	Dir    string // CACHE/models--ORG--NAME/snapshots/COMMIT
}

// ID is the snapshot's id with its commit, ORG/NAME@COMMIT: what a run records.
func (s Snapshot) ID() string { return s.Repo + "@" + s.Commit }

// A repository id as the hub allows it: ORG/NAME, each of letters, digits, '-', '_' and
// '.', neither starting nor ending with '-' or '.', with no "--" or "..".
var repoPart = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$`)

// ParseID reads ORG/NAME[@REVISION]; ok is false for anything else (a path such as
// ./x/y, /x/y or x/y/z is never an id).
func ParseID(s string) (r Ref, ok bool) {
	repo, rev, hasRev := strings.Cut(s, "@")
	org, name, found := strings.Cut(repo, "/")
	if !found || !repoPart.MatchString(org) || !repoPart.MatchString(name) || strings.Contains(repo, "--") || strings.Contains(repo, "..") {
		return r, false
	}
	if !hasRev {
		rev = "main"
	}
	// A revision is a file name under refs/ (refs/pr/1 has slashes): nothing that climbs.
	for _, part := range strings.Split(rev, "/") {
		if part == "" || part == "." || part == ".." {
			return r, false
		}
	}
	return Ref{Repo: repo, Revision: rev}, true
}

// CacheDir is the hub cache huggingface_hub uses.
func CacheDir() (string, error) {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub"), nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("the Hugging Face cache: no HF_HUB_CACHE, HF_HOME or home directory: %w", err)
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), nil
}

// repoDir is the repository's folder in the cache.
func repoDir(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// ErrNotCached says the cache has no complete snapshot of the revision.
var ErrNotCached = errors.New("not in the Hugging Face cache")

// Cached finds r's snapshot in the cache: refs/REVISION names its commit (a revision that
// is a commit names itself), and the snapshot must hold a whole model (complete).
func Cached(cache string, r Ref) (Snapshot, error) {
	s := Snapshot{Ref: r}
	dir := repoDir(cache, r.Repo)
	b, err := os.ReadFile(filepath.Join(dir, "refs", filepath.FromSlash(r.Revision)))
	switch {
	case err == nil:
		s.Commit = strings.TrimSpace(string(b))
		if !commitHash.MatchString(s.Commit) {
			return s, fmt.Errorf("%s: refs/%s holds %q, not a commit", dir, r.Revision, s.Commit)
		}
	case commitHash.MatchString(r.Revision):
		s.Commit = r.Revision
	default:
		return s, fmt.Errorf("%s (%s): %w", r, dir, ErrNotCached)
	}
	s.Dir = filepath.Join(dir, "snapshots", s.Commit)
	if missing := incomplete(s.Dir); missing != "" {
		return s, fmt.Errorf("%s: snapshot %s lacks %s: %w", r, s.Dir, missing, ErrNotCached)
	}
	return s, nil
}

// incomplete names a file a model directory needs and dir lacks ("" when none): its
// config.json and its weights, the shards the index lists or model.safetensors (a PEFT
// adapter: adapter_config.json and adapter_model.safetensors).
func incomplete(dir string) string {
	need := []string{"config.json"}
	if exists(filepath.Join(dir, "adapter_config.json")) {
		need = []string{"adapter_model.safetensors"}
	} else if b, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json")); err == nil {
		var index struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if json.Unmarshal(b, &index) != nil || len(index.WeightMap) == 0 {
			return "a readable model.safetensors.index.json"
		}
		for _, shard := range index.WeightMap {
			need = append(need, shard)
		}
	} else {
		need = append(need, "model.safetensors")
	}
	for _, f := range need {
		if !exists(filepath.Join(dir, f)) { // a broken link (a blob removed) counts as missing
			return f
		}
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
