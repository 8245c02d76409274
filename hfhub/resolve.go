package hfhub

import (
	"errors"
	"fmt"
	"os"
)

// Resolve finds the model directory an argument names. A path that exists is that path,
// whatever it looks like (so runs/x stays a directory); else ORG/NAME[@REVISION] is a hub
// id, found in the cache or, when download is not nil, downloaded by it into the cache;
// anything else is returned as given, for the caller to say it is missing. snap is the
// resolved id, nil for a path.
func Resolve(arg string, download func(cache string, r Ref) (Snapshot, error)) (dir string, snap *Snapshot, err error) {
	if _, err := os.Stat(arg); err == nil {
		return arg, nil, nil
	}
	ref, ok := ParseID(arg)
	if !ok {
		return arg, nil, nil
	}
	cache, err := CacheDir()
	if err != nil {
		return "", nil, err
	}
	s, err := Cached(cache, ref)
	if err == nil {
		return s.Dir, &s, nil
	}
	if !errors.Is(err, ErrNotCached) {
		return "", nil, err
	}
	if download == nil {
		return "", nil, fmt.Errorf("%s: no such file or directory, nor a model in the Hugging Face cache %s (%v); download it with umad --hf-download (or UMAD_HF_DOWNLOAD=1)",
			arg, cache, err)
	}
	if s, err = download(cache, ref); err != nil {
		return "", nil, err
	}
	return s.Dir, &s, nil
}
