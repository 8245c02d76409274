package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/safetensors"
)

// TokenizerFiles are the files beside a Hugging Face checkpoint's weights that describe its
// tokenizer and generation defaults; they travel with exported weights so the directory
// converts and loads in other tools.
var TokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"}

// ReadFiles reads the named files that directory src has (missing ones are skipped), so
// they can be written beside exported weights even after src is gone.
func ReadFiles(src string, names []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, f := range names {
		b, err := os.ReadFile(filepath.Join(src, f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[f] = b
	}
	return out, nil
}

// WriteFiles writes files (name -> contents, as ReadFiles returns them) into directory dst.
func WriteFiles(dst string, files map[string][]byte) error {
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// RemoveHFFiles removes from dir the files a Hugging Face checkpoint is made of (config.json,
// every .safetensors file and the shard index, the tokenizer files), so that a new
// checkpoint written there is not mixed with an old one's shards; other files stay.
func RemoveHFFiles(dir string) error {
	shards, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return err
	}
	names := append([]string{"config.json", safetensors.IndexName}, TokenizerFiles...)
	for _, n := range names {
		shards = append(shards, filepath.Join(dir, n))
	}
	for _, p := range shards {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
