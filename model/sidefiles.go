package model

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// TokenizerFiles are the files beside a Hugging Face checkpoint's weights that describe its
// tokenizer and generation defaults; they travel with exported weights so the directory
// converts and loads in other tools.
var TokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"}

// CopyFiles copies the named files that directory src has into directory dst.
func CopyFiles(src, dst string, names []string) error {
	for _, f := range names {
		if err := copyOne(filepath.Join(src, f), filepath.Join(dst, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func copyOne(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// RemoveHFFiles removes from dir the files a Hugging Face checkpoint is made of (config.json,
// every .safetensors file and the shard index, the tokenizer files), so that a new
// checkpoint written there is not mixed with an old one's shards; other files stay.
func RemoveHFFiles(dir string) error {
	shards, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return err
	}
	names := append([]string{"config.json", stIndexName}, TokenizerFiles...)
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
